//! CPlan → LLVM IR → native code (and PTX), plus the operator cache.
//!
//! * [`reference`]: the reference evaluator of CPlans, the oracle generated operators are
//!   tested against.
//! * [`native`] (feature `llvm`, default): JIT-compiled fused operators for the host CPU and
//!   the operator cache.

pub mod reference;

#[cfg(feature = "llvm")]
pub mod native;
