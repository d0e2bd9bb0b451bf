//! lafuse: JIT code generator for fused linear-algebra operators (facade crate).
