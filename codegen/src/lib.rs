//! CPlan → LLVM IR → native code (and PTX), plus the operator cache.
//!
//! Empty until the codegen issue: the foundation runs only unfused kernels.
