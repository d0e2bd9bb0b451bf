//! CPlan → LLVM IR → native code (and PTX), plus the operator cache.
//!
//! So far: the reference evaluator of CPlans ([`reference`]), the oracle generated operators
//! are tested against.

pub mod reference;
