//! Native fused operators compiled with Cranelift (issue 28): a fraction of LLVM's compile
//! time per operator, the same skeletons and `KernelArgs` ABI, and results bit-identical to
//! the LLVM backend's (the same operations per cell, sums in the same lanes and order).
//!
//! Implemented: Cell (every cell type and aggregation, dense and CSR entry points, side
//! inputs read aligned, as row or column vectors, as scalars, transposed), MultiAgg, and Outer
//! (every type; dense, CSR and every-cell entry points), and Row (every row type and vector
//! primitive; dense and CSR entry points, from the LLVM backend's analysis and layout:
//! `crate::row_plan`). A construct no backend generates is refused as unsupported (the engine
//! runs it unfused). As the LLVM backend, the entry
//! point for the expected main-input format is compiled with the operator and any other on
//! the first call that needs it.
//!
//! Module map: `fx` (lane-wise arithmetic on Cranelift values), `body` (CNode bodies),
//! `cell` (Cell and MultiAgg loops), `outer` (Outer loops and dot products), `row` (Row entry points), `helpers` (the scalar Rust functions generated code
//! calls), `jit` (the host ISA and the JIT modules), `operator` (the compiled operator and its
//! calls into the skeletons).

mod body;
mod cell;
mod fx;
mod helpers;
mod jit;
mod operator;
mod outer;
mod row;

pub use jit::{DUMP_ENV, VERIFY_ENV};
pub use operator::{compile_for, CraneliftOperator};

use crate::backend::{Backend, Built, CodegenError, Origin, Request};
use lafuse_compiler::fusion::cplan::CPlan;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Operators a backend keeps at most: a block recompiled (new sizes, a loop's next
/// iteration) finds its operators instead of compiling them again. Past this the cache is
/// emptied at once, since a compilation costs about a millisecond, a bookkeeping of recency
/// would not pay.
pub const DEFAULT_CAPACITY: usize = 4096;

/// Kept operators by [`CPlan::structural_hash`]: the plans with that hash and their operators.
type Cache = HashMap<u64, Vec<(CPlan, Arc<CraneliftOperator>)>>;

/// The Cranelift backend: operators compiled on first request (a block's in parallel), kept
/// by plan.
pub struct CraneliftBackend {
    cache: Mutex<Cache>,
    /// Where an Outer operator's calls run over tiles of `U %*% t(V)` (its operators').
    outer_tile_density: f64,
}

impl Default for CraneliftBackend {
    fn default() -> CraneliftBackend {
        CraneliftBackend {
            cache: Mutex::default(),
            // As LLVM's operators under the default cost model.
            outer_tile_density: lafuse_compiler::fusion::CostModel::default().outer_tile_density(),
        }
    }
}

impl CraneliftBackend {
    pub fn new() -> CraneliftBackend {
        CraneliftBackend::default()
    }

    /// This backend with Outer operators over tiles from a driver density of `density` on
    /// (as the LLVM backend's `RunOptions`; `f64::INFINITY`: never).
    pub fn with_outer_tile_density(mut self, density: f64) -> CraneliftBackend {
        self.outer_tile_density = density;
        self
    }

    /// The operator for `plan`, if kept.
    fn cached(&self, plan: &CPlan) -> Option<Arc<CraneliftOperator>> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .get(&plan.structural_hash())?
            .iter()
            .find(|(p, _)| p == plan)
            .map(|(_, op)| Arc::clone(op))
    }

    /// Keeps `op` for `plan`.
    fn keep(&self, plan: &CPlan, op: &Arc<CraneliftOperator>) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.values().map(Vec::len).sum::<usize>() >= DEFAULT_CAPACITY {
            cache.clear();
        }
        cache
            .entry(plan.structural_hash())
            .or_default()
            .push((plan.clone(), Arc::clone(op)));
    }

    /// Operators kept.
    pub fn len(&self) -> usize {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.values().map(Vec::len).sum()
    }

    /// Whether no operator is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
                if let Some(op) = self.cached(r.plan) {
                    return Ok(Built {
                        executable: op,
                        origin: Origin::CacheHit,
                    });
                }
                let op = Arc::new(
                    compile_for(r.plan, r.main)?.with_outer_tile_density(self.outer_tile_density),
                );
                self.keep(r.plan, &op);
                Ok(Built {
                    executable: op,
                    origin: Origin::Compiled {
                        miss_reason: "a plan not compiled before".to_string(),
                        loaded_from_store: false,
                    },
                })
            })
            .collect()
    }
}
