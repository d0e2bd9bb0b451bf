//! Native code as a [`Backend`]: operators come from the operator cache (compiled on a miss,
//! the missing ones of a block in parallel, through the on-disk object store where there is
//! one), and run as [`NativeOperator`]s with the backend's [`RunOptions`].

use super::{Lookup, NativeOperator, ObjectStore, OperatorCache, RunOptions};
use crate::backend::Operand;
use crate::backend::{Backend, Built, CodegenError, Executable, Origin, Request};
use lafuse_compiler::fusion::cplan::CPlan;
use lafuse_runtime::{Matrix, ValueRange};
use std::sync::Arc;
use std::time::Duration;

/// The native backend: an operator cache shared by every block of one engine.
#[derive(Default)]
pub struct NativeBackend {
    cache: OperatorCache,
    options: RunOptions,
}

impl NativeBackend {
    /// A backend whose operators are compiled in this process only.
    pub fn new() -> NativeBackend {
        NativeBackend::default()
    }

    /// A backend that keeps and loads machine code through `store`.
    pub fn with_store(store: Arc<ObjectStore>) -> NativeBackend {
        NativeBackend {
            cache: OperatorCache::with_store(store),
            options: RunOptions::default(),
        }
    }

    /// The backend, running its operators with `options` (the engine's, from its cost
    /// model: [`RunOptions::for_model`]).
    pub fn with_options(self, options: RunOptions) -> NativeBackend {
        NativeBackend { options, ..self }
    }

    /// The operator cache.
    pub fn cache(&self) -> &OperatorCache {
        &self.cache
    }

    /// Whether building `plan`'s operator for a main input in format `main` loads its machine
    /// code from the backend's object store (as far as the store's marker says) rather than
    /// compiling it.
    pub fn has_stored(&self, plan: &CPlan, main: crate::backend::MainFormat) -> bool {
        self.cache
            .store()
            .is_some_and(|store| super::stored_in(store, plan, main))
    }
}

impl Backend for NativeBackend {
    fn name(&self) -> &'static str {
        "native"
    }

    fn build(&self, requests: &[Request<'_>]) -> Vec<Result<Built, CodegenError>> {
        let plans: Vec<(&CPlan, _)> = requests.iter().map(|r| (r.plan.as_ref(), r.main)).collect();
        self.cache
            .lookup_all_for(&plans)
            .into_iter()
            .map(|(operator, lookup)| {
                let operator = operator?;
                let origin = match lookup {
                    Lookup::Hit => Origin::CacheHit,
                    Lookup::Miss(reason) => Origin::Compiled {
                        miss_reason: reason.to_string(),
                        loaded_from_store: operator.loaded_from_store(),
                    },
                };
                let executable: Arc<dyn Executable> = if self.options == RunOptions::default() {
                    operator
                } else {
                    Arc::new(WithOptions {
                        operator,
                        options: self.options,
                    })
                };
                Ok(Built { executable, origin })
            })
            .collect()
    }
}

impl Executable for NativeOperator {
    fn execute(
        &self,
        inputs: &[Operand<'_>],
        out_shapes: &[(usize, usize)],
        known: &[Option<ValueRange>],
    ) -> Result<Vec<Matrix>, CodegenError> {
        self.execute_with_ranges(inputs, out_shapes, known)
    }

    fn compile_time(&self) -> Duration {
        NativeOperator::compile_time(self)
    }
}

/// A cached operator run with a backend's non-default [`RunOptions`] (operators are shared by
/// the cache; the options belong to the backend that handed them out).
#[derive(Debug)]
struct WithOptions {
    operator: Arc<NativeOperator>,
    options: RunOptions,
}

impl Executable for WithOptions {
    fn execute(
        &self,
        inputs: &[Operand<'_>],
        out_shapes: &[(usize, usize)],
        known: &[Option<ValueRange>],
    ) -> Result<Vec<Matrix>, CodegenError> {
        self.operator
            .execute_with_options(inputs, out_shapes, known, self.options)
    }

    fn compile_time(&self) -> Duration {
        self.operator.compile_time()
    }
}
