//! Native fused operators compiled with Cranelift (issue 28): a fraction of LLVM's compile
//! time per operator, the same skeletons and `KernelArgs` ABI, and results bit-identical to
//! the LLVM backend's (the same operations per cell, sums in the same lanes and order).
//!
//! Implemented: Cell (every cell type and aggregation, dense and CSR entry points, side
//! inputs read aligned, as row or column vectors, as scalars, transposed), MultiAgg, and Outer
//! (every type; dense, CSR and every-cell entry points). Row plans are refused as unsupported
//! (the engine runs them unfused or through another backend). As the LLVM backend, the entry
//! point for the expected main-input format is compiled with the operator and any other on
//! the first call that needs it.
//!
//! Module map: `fx` (lane-wise arithmetic on Cranelift values), `body` (CNode bodies),
//! `cell` (Cell and MultiAgg loops), `outer` (Outer loops and dot products), `helpers` (the scalar Rust functions generated code
//! calls), `jit` (the host ISA and the JIT modules), `operator` (the compiled operator and its
//! calls into the skeletons).

mod body;
mod cell;
mod fx;
mod helpers;
mod jit;
mod operator;
mod outer;

pub use operator::{compile_for, CraneliftOperator};

use crate::backend::{Backend, Built, CodegenError, Origin, Request};
use std::sync::Arc;

/// The Cranelift backend: compiles every requested operator (in parallel); it keeps no cache
/// of its own, since a compilation costs about as much as a cache's bookkeeping would save
/// at a block's first execution.
#[derive(Clone, Copy, Debug, Default)]
pub struct CraneliftBackend;

impl CraneliftBackend {
    pub fn new() -> CraneliftBackend {
        CraneliftBackend
    }
}

impl Backend for CraneliftBackend {
    fn name(&self) -> &'static str {
        "cranelift"
    }

    fn build(&self, requests: &[Request<'_>]) -> Vec<Result<Built, CodegenError>> {
        use rayon::prelude::*;
        requests
            .par_iter()
            .map(|r| {
                let op = compile_for(r.plan, r.main)?;
                Ok(Built {
                    executable: Arc::new(op),
                    origin: Origin::Compiled {
                        miss_reason: "compiled by Cranelift (no operator cache)".to_string(),
                        loaded_from_store: false,
                    },
                })
            })
            .collect()
    }
}
