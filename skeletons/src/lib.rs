//! Hand-written skeletons hosting generated fused-operator bodies (one per fusion template).
//!
//! Empty until the codegen issue: the foundation runs only unfused kernels.
