//! CPlan → LLVM IR → native code (and PTX), plus the operator cache.
//!
//! * [`backend`]: the [`backend::Backend`] trait every executor of fused operators
//!   implements, with its typed errors.
//! * [`reference`](mod@reference): the reference evaluator of CPlans, the oracle generated operators are
//!   tested against.
//! * [`parameters`]: literal constants as operator parameters, so plans that differ only in
//!   constants share one compiled operator (a wrapper around any backend).
//! * [`zero_cells`]: what a plan computes at a zero of its main input, bounded by interval
//!   arithmetic: when sparse-safe operators may skip zeros exactly.
//! * [`native`] (feature `llvm`, default): JIT-compiled fused operators for the host CPU and
//!   the operator cache.
//! * [`cranelift`](mod@cranelift) (feature `cranelift`): the same operators compiled with
//!   Cranelift, in a fraction of LLVM's compile time, bit-identical in their results.
//! * [`tiered`] (features `cranelift` and `llvm`): Cranelift first, LLVM on a background
//!   thread for the operators that do enough work; [`tiers`] counts what it did.

pub mod backend;
pub mod parameters;
pub(crate) mod plan_info;
pub mod reference;
#[cfg(any(feature = "llvm", feature = "cranelift"))]
pub(crate) mod row_plan;
pub mod tiers;
pub mod zero_cells;

#[cfg(feature = "llvm")]
pub mod native;

#[cfg(feature = "ptx")]
pub mod ptx;

#[cfg(feature = "cranelift")]
pub mod cranelift;

#[cfg(all(feature = "cranelift", feature = "llvm"))]
pub mod tiered;

/// Bytes an on-disk object store (`native::ObjectStore`) is pruned to on opening unless told
/// otherwise: 1 GiB, about ten thousand operators. Here, outside the `llvm` feature, so that
/// configurations can name it in every build.
pub const DEFAULT_STORE_LIMIT: u64 = 1 << 30;
