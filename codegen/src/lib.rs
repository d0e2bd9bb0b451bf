//! CPlan → LLVM IR → native code (and PTX), plus the operator cache.
//!
//! * [`reference`](mod@reference): the reference evaluator of CPlans, the oracle generated operators are
//!   tested against.
//! * [`zero_cells`]: what a plan computes at a zero of its main input, bounded by interval
//!   arithmetic: when sparse-safe operators may skip zeros exactly.
//! * [`native`] (feature `llvm`, default): JIT-compiled fused operators for the host CPU and
//!   the operator cache.

pub mod reference;
pub mod zero_cells;

#[cfg(feature = "llvm")]
pub mod native;
