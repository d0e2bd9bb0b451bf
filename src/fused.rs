//! Fusion inside the engine: plans a block's fused operators with the configured policy,
//! has the configured [`Backend`] build each CPlan into an executable operator (the reference
//! evaluator, or native code through the operator cache), wraps it as a runtime
//! [`Operator`], and counts what they did for `--stats`.
//!
//! An operator the backend cannot build (an unsupported template variant, say) is not an
//! error: its hops simply run unfused, and the reason is counted in the statistics.

use crate::deferral::{
    fusing_now_saves, runs_to_pay, BlockCosts, Expected, BACKGROUND_LAG_COMPILATIONS,
    MAX_BACKGROUND_LAG,
};
use crate::error::Error;
use crate::{FusionPolicy, Placement};
use lafuse_codegen::backend::{
    Backend, CodegenError, Executable, MainFormat, Operand, Origin, Request,
};
use lafuse_codegen::reference;
use lafuse_codegen::tiers::{TierCounters, TierCounts};
use lafuse_compiler::fusion::cplan::{construct_cplans, CNode, CNodeId, CPlan, FusedOperator};
use lafuse_compiler::fusion::{self, CostModel};
use lafuse_compiler::hops::{HopDag, HopId};
use lafuse_core::Fault;
use lafuse_runtime::error::{Internal, OperatorFailure, Resource};
use lafuse_runtime::{Matrix, Operator, OperatorInput, RuntimeError};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What executes fused operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FusionBackend {
    /// Native code generated with LLVM for this CPU (when built with the `llvm` feature).
    #[cfg_attr(feature = "llvm", default)]
    Native,
    /// The reference evaluator: interprets the CPlan cell by cell or row by row. Slow, but
    /// obviously correct; the oracle generated code is tested against.
    #[cfg_attr(not(feature = "llvm"), default)]
    Reference,
}

/// The compiler the native backend generates operators with (`--jit`). The default is
/// [`Jit::Tiered`] where lafuse was built with both the `cranelift` and `llvm` features (the
/// default features), else [`Jit::Llvm`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Jit {
    /// LLVM: optimized code, several milliseconds per operator.
    Llvm,
    /// Cranelift (the `cranelift` feature): a fraction of LLVM's compile time, results equal
    /// to the bit (every template, Row included); the operator cache directory and the GPU are
    /// not used.
    Cranelift,
    /// Both (the `cranelift` and `llvm` features): an operator is compiled with Cranelift and
    /// runs at once; once it has processed `EngineConfig::tier_threshold` cells of main input,
    /// LLVM compiles it on a background thread (through the operator cache directory) and it
    /// runs LLVM's code from the next call after. Plans Cranelift refuses as unsupported are
    /// compiled with LLVM at once.
    /// Results equal to the bit whichever tier runs. The tiers are the CPU's: under a GPU
    /// placement on a machine with a GPU the engine compiles with LLVM instead
    /// ([`Jit::for_placement`]).
    Tiered,
}

impl Default for Jit {
    /// Tiered where both of its compilers are built in: a small input's run is not spent
    /// compiling (L2SVM, MLogReg, GLM and KMeans at 10000 x 100: 5-13 times faster than LLVM
    /// alone), and a large one's operators reach LLVM's code within a few calls.
    fn default() -> Jit {
        if cfg!(all(feature = "cranelift", feature = "llvm")) {
            Jit::Tiered
        } else {
            Jit::Llvm
        }
    }
}

impl Jit {
    /// The compiler a run placing operators by `placement` on a machine with a GPU uses: the
    /// tiers are the CPU's, so under a GPU placement (`Gpu`, `Auto`) a tiered JIT compiles
    /// with LLVM, whose NVPTX backend generates the kernels and whose CPU code is each
    /// operator's CPU twin. An explicit Cranelift stays Cranelift (which then runs every
    /// operator on the CPU, and says so). Without a GPU the engine keeps the JIT as asked.
    pub fn for_placement(self, placement: Placement) -> Jit {
        match (self, placement) {
            (Jit::Tiered, Placement::Gpu | Placement::Auto) => Jit::Llvm,
            (jit, _) => jit,
        }
    }

    /// `llvm`, `cranelift` or `tiered`.
    pub fn name(self) -> &'static str {
        match self {
            Jit::Llvm => "llvm",
            Jit::Cranelift => "cranelift",
            Jit::Tiered => "tiered",
        }
    }
}

/// The Cranelift backend, behind the same literal parameterization as LLVM's; where the
/// engine was asked for what it does not offer, it says so once.
fn cranelift_backend(
    store_dir: Option<&std::path::Path>,
    placement: Placement,
    cost_model: &CostModel,
) -> Box<dyn Backend> {
    if let Some(dir) = store_dir {
        eprintln!(
            "warning: --jit cranelift keeps no machine code; the operator cache directory '{}' \
             is not used",
            dir.display()
        );
    }
    if placement != Placement::Cpu {
        eprintln!("warning: --jit cranelift generates CPU code only; operators run on the CPU");
    }
    #[cfg(feature = "cranelift")]
    {
        use lafuse_codegen::cranelift::CraneliftBackend;
        use lafuse_codegen::parameters::LiteralsAsParameters;
        Box::new(LiteralsAsParameters::new(
            CraneliftBackend::new().with_outer_tile_density(cost_model.outer_tile_density()),
        ))
    }
    #[cfg(not(feature = "cranelift"))]
    let _ = cost_model;
    #[cfg(not(feature = "cranelift"))]
    Box::new(lafuse_codegen::backend::Unavailable {
        name: "cranelift",
        why: "code generation with Cranelift (lafuse was built without the `cranelift` \
              feature; use --jit llvm)",
    })
}

/// The LLVM backend, through the operator cache directory `store_dir` where it can be opened.
#[cfg(feature = "llvm")]
fn llvm_backend(
    store_dir: Option<&std::path::Path>,
    store_limit: u64,
) -> lafuse_codegen::native::NativeBackend {
    use lafuse_codegen::native::{NativeBackend, ObjectStore};
    match store_dir.map(|dir| (dir, ObjectStore::open_with_limit(dir, store_limit))) {
        Some((_, Ok(store))) => NativeBackend::with_store(Arc::new(store)),
        Some((dir, Err(refusal))) => {
            // The run goes on, compiling: the directory only saves compilations, and a
            // refused one must not be trusted with the code lafuse runs.
            eprintln!(
                "warning: not using the operator cache directory '{}': {refusal}; operators \
                 are compiled instead",
                dir.display()
            );
            NativeBackend::new()
        }
        None => NativeBackend::new(),
    }
}

/// Says why a GPU placement's operators run on the CPU, where no GPU can run them.
fn warn_without_gpu(placement: Placement) {
    if placement != Placement::Cpu {
        if let Err(why) = crate::gpu::available() {
            eprintln!("warning: {why}; operators run on the CPU");
        }
    }
}

/// The tiered backend (Cranelift first, LLVM in the background past `threshold` cells, through
/// the operator cache directory), behind literal parameterization, with its counters.
fn tiered_backend(
    threshold: u64,
    store_dir: Option<&std::path::Path>,
    store_limit: u64,
    placement: Placement,
    cost_model: &CostModel,
) -> (Box<dyn Backend>, Option<Arc<TierCounters>>) {
    // A GPU placement reaches the tiers only on a machine without a GPU (`Engine::new`
    // compiles a GPU's operators with LLVM, `Jit::for_placement`).
    warn_without_gpu(placement);
    #[cfg(all(feature = "cranelift", feature = "llvm"))]
    {
        use lafuse_codegen::cranelift::CraneliftBackend;
        use lafuse_codegen::native::RunOptions;
        use lafuse_codegen::parameters::LiteralsAsParameters;
        use lafuse_codegen::tiered::TieredBackend;
        let llvm =
            llvm_backend(store_dir, store_limit).with_options(RunOptions::for_model(cost_model));
        let cranelift =
            CraneliftBackend::new().with_outer_tile_density(cost_model.outer_tile_density());
        let tiered = TieredBackend::new(cranelift, llvm, threshold);
        let counters = tiered.counters();
        (Box::new(LiteralsAsParameters::new(tiered)), Some(counters))
    }
    #[cfg(not(all(feature = "cranelift", feature = "llvm")))]
    {
        let _ = (threshold, store_dir, store_limit, cost_model);
        let unavailable = lafuse_codegen::backend::Unavailable {
            name: "tiered",
            why: "tiered code generation (lafuse was built without the `cranelift` and `llvm` \
                  features it needs; use --jit llvm)",
        };
        (Box::new(unavailable), None)
    }
}

impl FusionBackend {
    /// The backend of this kind (the registration of every backend the engine offers), the
    /// native one compiling with `jit` (tiered: promoting past `tier_threshold` cells), with
    /// the tiered backend's counters.
    fn create(
        self,
        jit: Jit,
        tier_threshold: u64,
        store_dir: Option<&std::path::Path>,
        store_limit: u64,
        placement: Placement,
        cost_model: &CostModel,
    ) -> (Box<dyn Backend>, Option<Arc<TierCounters>>) {
        match (self, jit) {
            (FusionBackend::Native, Jit::Cranelift) => {
                return (cranelift_backend(store_dir, placement, cost_model), None)
            }
            (FusionBackend::Native, Jit::Tiered) => {
                return tiered_backend(
                    tier_threshold,
                    store_dir,
                    store_limit,
                    placement,
                    cost_model,
                )
            }
            _ => {}
        }
        let _ = tier_threshold;
        match self {
            FusionBackend::Reference if placement != Placement::Cpu => eprintln!(
                "warning: --device {} needs the native backend; operators run on the \
                 reference evaluator on the CPU",
                placement.name()
            ),
            _ => warn_without_gpu(placement),
        }
        let backend: Box<dyn Backend> = match self {
            FusionBackend::Reference => Box::new(reference::ReferenceBackend),
            #[cfg(feature = "llvm")]
            FusionBackend::Native => {
                use lafuse_codegen::native::{NativeBackend, RunOptions};
                use lafuse_codegen::parameters::LiteralsAsParameters;
                // How operators run where the machine decides (an Outer operator's tiles).
                let options = RunOptions::for_model(cost_model);
                // Compiled code is shared by plans that differ only in constants; on the GPU
                // too, where each operator also keeps its native form for the CPU.
                let parameterized = |b: NativeBackend| -> Box<dyn Backend> {
                    let b = b.with_options(options);
                    #[cfg(feature = "cuda")]
                    if placement != Placement::Cpu && crate::gpu::available().is_ok() {
                        use lafuse_codegen::ptx::backend::{GpuBackend, PlacementModel};
                        return Box::new(LiteralsAsParameters::new(GpuBackend::new(
                            b,
                            placement,
                            PlacementModel::default(),
                        )));
                    }
                    Box::new(LiteralsAsParameters::new(b))
                };
                parameterized(llvm_backend(store_dir, store_limit))
            }
            #[cfg(not(feature = "llvm"))]
            FusionBackend::Native => {
                let _ = (store_dir, store_limit, placement, cost_model);
                Box::new(lafuse_codegen::backend::Unavailable {
                    name: "native",
                    why: "native code generation (lafuse was built without the `llvm` feature; \
                          use --fusion-backend reference)",
                })
            }
        };
        (backend, None)
    }
}

/// A fused operator as a block runs it: the runnable operator and the hops it replaces.
#[derive(Clone, Debug)]
pub(crate) struct PlannedOperator {
    pub(crate) operator: Arc<dyn Operator>,
    /// The hops feeding the operator, by input position.
    pub(crate) inputs: Vec<HopId>,
    /// The hops whose values it produces, with whether each is a scalar.
    pub(crate) outputs: Vec<(HopId, bool)>,
}

/// Counters shared by the fuser and the operators it built (operators run on any thread).
#[derive(Debug, Default)]
pub(crate) struct FusionCounters {
    executed: AtomicU64,
    execution_nanos: AtomicU64,
    compiled: AtomicU64,
    /// Of `compiled`: machine code loaded from the on-disk object store.
    loaded: AtomicU64,
    cache_hits: AtomicU64,
    codegen_nanos: AtomicU64,
    planning_nanos: AtomicU64,
    /// Blocks compiled unfused because fusing did not pay yet, and blocks compiled fused once
    /// it did ([`Fuser::deferring`]).
    deferred: AtomicU64,
    fused_later: AtomicU64,
    /// Why operators were left unfused, with how often.
    fallbacks: Mutex<BTreeMap<String, u64>>,
    /// Why operator-cache requests compiled, with how often.
    miss_reasons: Mutex<BTreeMap<String, u64>>,
    /// Executions per operator, by template name and CPlan structural hash.
    by_operator: Mutex<BTreeMap<(&'static str, u64), u64>>,
}

/// A snapshot of the fusion counters.
#[derive(Clone, Debug, Default)]
pub(crate) struct FusionCounts {
    pub(crate) executed: u64,
    pub(crate) execution: Duration,
    pub(crate) compiled: u64,
    pub(crate) loaded: u64,
    pub(crate) cache_hits: u64,
    pub(crate) codegen: Duration,
    pub(crate) planning: Duration,
    pub(crate) deferred: u64,
    pub(crate) fused_later: u64,
    pub(crate) fallbacks: BTreeMap<String, u64>,
    pub(crate) miss_reasons: BTreeMap<String, u64>,
    pub(crate) by_operator: BTreeMap<(&'static str, u64), u64>,
    /// What the tiers did, under `--jit tiered`.
    pub(crate) tiers: Option<TierCounts>,
}

impl FusionCounters {
    fn fallback(&self, reason: String) {
        if let Ok(mut map) = self.fallbacks.lock() {
            *map.entry(reason).or_insert(0) += 1;
        }
    }

    pub(crate) fn snapshot(&self) -> FusionCounts {
        FusionCounts {
            executed: self.executed.load(Ordering::Relaxed),
            execution: Duration::from_nanos(self.execution_nanos.load(Ordering::Relaxed)),
            compiled: self.compiled.load(Ordering::Relaxed),
            loaded: self.loaded.load(Ordering::Relaxed),
            cache_hits: self.cache_hits.load(Ordering::Relaxed),
            codegen: Duration::from_nanos(self.codegen_nanos.load(Ordering::Relaxed)),
            planning: Duration::from_nanos(self.planning_nanos.load(Ordering::Relaxed)),
            deferred: self.deferred.load(Ordering::Relaxed),
            fused_later: self.fused_later.load(Ordering::Relaxed),
            fallbacks: self.fallbacks.lock().map(|m| m.clone()).unwrap_or_default(),
            miss_reasons: self
                .miss_reasons
                .lock()
                .map(|m| m.clone())
                .unwrap_or_default(),
            by_operator: self
                .by_operator
                .lock()
                .map(|m| m.clone())
                .unwrap_or_default(),
            tiers: None,
        }
    }
}

impl FusionCounts {
    /// What happened since `earlier` (counters only grow).
    pub(crate) fn since(&self, earlier: &FusionCounts) -> FusionCounts {
        fn minus<K: Ord + Clone>(
            now: &BTreeMap<K, u64>,
            then: &BTreeMap<K, u64>,
        ) -> BTreeMap<K, u64> {
            let mut out = now.clone();
            for (reason, n) in then {
                if let Some(v) = out.get_mut(reason) {
                    *v = v.saturating_sub(*n);
                }
            }
            out.retain(|_, v| *v > 0);
            out
        }
        let fallbacks = minus(&self.fallbacks, &earlier.fallbacks);
        let miss_reasons = minus(&self.miss_reasons, &earlier.miss_reasons);
        FusionCounts {
            executed: self.executed.saturating_sub(earlier.executed),
            execution: self.execution.saturating_sub(earlier.execution),
            compiled: self.compiled.saturating_sub(earlier.compiled),
            loaded: self.loaded.saturating_sub(earlier.loaded),
            cache_hits: self.cache_hits.saturating_sub(earlier.cache_hits),
            codegen: self.codegen.saturating_sub(earlier.codegen),
            planning: self.planning.saturating_sub(earlier.planning),
            deferred: self.deferred.saturating_sub(earlier.deferred),
            fused_later: self.fused_later.saturating_sub(earlier.fused_later),
            fallbacks,
            miss_reasons,
            by_operator: minus(&self.by_operator, &earlier.by_operator),
            tiers: match (&self.tiers, &earlier.tiers) {
                (Some(now), Some(then)) => Some(now.since(then)),
                (now, _) => now.clone(),
            },
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Plans and builds the fused operators of blocks, for one engine. Clones share everything
/// (a block's fusion compiled in the background holds one).
#[derive(Clone)]
pub(crate) struct Fuser {
    /// The policy, with its configuration (the cost-based selector's plan cache lives for one
    /// block's search, so a block's plan depends on nothing compiled before it).
    selector: Arc<dyn fusion::PlanSelector + Send + Sync>,
    /// What builds and runs the operators (its operator cache serves every block).
    backend: Arc<dyn Backend>,
    counters: Arc<FusionCounters>,
    /// The tiered backend's counters (`--jit tiered`).
    tiers: Option<Arc<TierCounters>>,
    /// The model that weighs a block's fusion against its compilation ([`Fuser::deferring`]).
    cost_model: CostModel,
    /// Seconds of compilation expected per operator, when blocks are fused only once fusion
    /// pays for it ([`Fuser::deferring`]); `None` fuses every block at once.
    compile_seconds: Option<f64>,
    /// Whether a deferred block that falls due is fused on a background thread while it runs
    /// on ([`Fuser::background_lag`]).
    in_background: bool,
}

/// A block's fused operators, or how many of its executions run unfused first.
#[derive(Debug)]
pub(crate) enum Fusion {
    /// The operators, built and ready to run.
    Now(Vec<PlannedOperator>),
    /// Fusing would not pay for its compilation yet: the block runs unfused until it has run
    /// `runs_to_pay` times (`u64::MAX`: the model expects no saving, so never). `expected`:
    /// what the plan the decision weighed would save (where the block's floor deferred it
    /// before a search, the most any plan could).
    Deferred {
        runs_to_pay: u64,
        expected: Option<Expected>,
    },
}

impl Fuser {
    /// `store_dir`: the on-disk object store native operators go through, if any, pruned to
    /// `store_limit` bytes (a directory that cannot be opened is not used: it only saves
    /// compilations).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        policy: FusionPolicy,
        cost_model: CostModel,
        backend: FusionBackend,
        jit: Jit,
        tier_threshold: u64,
        store_dir: Option<&std::path::Path>,
        store_limit: u64,
        placement: Placement,
    ) -> Fuser {
        let (backend, tiers) = backend.create(
            jit,
            tier_threshold,
            store_dir,
            store_limit,
            placement,
            &cost_model,
        );
        Fuser {
            selector: Arc::from(policy.selector(cost_model)),
            backend: Arc::from(backend),
            counters: Arc::new(FusionCounters::default()),
            tiers,
            cost_model,
            compile_seconds: None,
            in_background: false,
        }
    }

    /// The same fuser, deferring the fusion of blocks whose fused operators would not yet pay
    /// for their compilation (`seconds` an operator; `--jit tiered`): such a block runs on the
    /// unfused kernels, the tier below Cranelift, until the saving the cost model expects of
    /// fusion, summed over its executions, reaches that compile time ([`crate::deferral::runs_to_pay`]).
    /// Deterministic: the decision depends on sizes and counts, never on timings. Runs are
    /// weighed in seconds by [`crate::deferral::weighing_model`] of the engine's model (its
    /// plans are still chosen by the engine's model itself).
    pub(crate) fn deferring(mut self, seconds: f64) -> Fuser {
        self.compile_seconds = (seconds > 0.0).then_some(seconds);
        self.cost_model = crate::deferral::weighing_model(&self.cost_model);
        self
    }

    /// The same fuser, fusing a deferred block that falls due on a background thread
    /// ([`Fuser::background_lag`]) when `on`.
    pub(crate) fn in_background(mut self, on: bool) -> Fuser {
        self.in_background = on;
        self
    }

    /// Under [`Fuser::in_background`], for a deferred block of `dag` that falls due: the runs
    /// it goes on unfused while a background thread plans and compiles its fusion, whose
    /// result replaces the plan at the run after those (`None`: fuse it now, on this thread).
    ///
    /// The lag is the model's guess of how many unfused runs the background work takes
    /// ([`BACKGROUND_LAG_COMPILATIONS`] compilations over the block's unfused cost a run),
    /// never a measured time: the run at which the plan changes, and so every result (a fused plan
    /// may round differently), depends on sizes and counts only. Where the work outlasts the
    /// lag, the run waits for it; where the loop ends first, the work was spent off the run's
    /// path.
    ///
    /// `expected`: what the plan search that deferred the block expects of its fusion; where
    /// a few runs of that saving pay back the stall of fusing now ([`fusing_now_saves`]),
    /// `None`.
    pub(crate) fn background_lag(
        &self,
        dag: &HopDag,
        expected: Option<Expected>,
    ) -> Result<Option<u64>, Error> {
        let Some(per_operator) = self.compile_seconds.filter(|_| self.in_background) else {
            return Ok(None);
        };
        let Some(costs) = BlockCosts::new(dag, &self.cost_model, per_operator)? else {
            return Ok(None);
        };
        let lag = runs_to_pay(costs.unfused(), BACKGROUND_LAG_COMPILATIONS * per_operator)
            .min(MAX_BACKGROUND_LAG);
        if expected.is_some_and(|e| fusing_now_saves(lag, e, per_operator)) {
            return Ok(None);
        }
        Ok(Some(lag))
    }

    pub(crate) fn counters(&self) -> FusionCounts {
        FusionCounts {
            tiers: self.tiers.as_ref().map(|t| t.snapshot()),
            ..self.counters.snapshot()
        }
    }

    fn count_planning(&self, started: Instant) {
        self.counters
            .planning_nanos
            .fetch_add(nanos(started.elapsed()), Ordering::Relaxed);
    }

    /// A block's fusion deferred to its run `runs_to_pay` (counted once per block).
    fn deferred(
        &self,
        started: Instant,
        runs_before: u64,
        runs_to_pay: u64,
        expected: Option<Expected>,
    ) -> Fusion {
        self.count_planning(started);
        self.counters
            .deferred
            .fetch_add(u64::from(runs_before == 0), Ordering::Relaxed);
        Fusion::Deferred {
            runs_to_pay,
            expected,
        }
    }

    /// Counts a block compiled fused after it ran unfused until fusion paid.
    pub(crate) fn fused_later(&self) {
        self.counters.fused_later.fetch_add(1, Ordering::Relaxed);
    }

    /// The fused operators of `dag` under the policy, each ready to run; under
    /// [`Fuser::deferring`], none yet where they would not have paid for their compilation
    /// by this run (the block ran `runs_before` times unfused before it).
    pub(crate) fn fuse(&self, dag: &HopDag, runs_before: u64) -> Result<Fusion, Error> {
        let started = Instant::now();
        let runs = runs_before.saturating_add(1);
        let costs = match self.compile_seconds {
            Some(per_operator) => BlockCosts::new(dag, &self.cost_model, per_operator)?,
            None => None,
        };
        if let Some(costs) = &costs {
            // No plan saves more than the unfused block costs above its floor, so a block
            // whose cost fusion cannot cut defers without a search (to the run that bound
            // allows); a large one whose heuristic plans would not pay yet defers to the run
            // they would, where the exact search decides.
            let (earliest, at_most) = costs.earliest(&self.cost_model);
            if earliest > runs {
                return Ok(self.deferred(started, runs_before, earliest, Some(at_most)));
            }
            if costs.worth_estimating() {
                let (estimated, expected) = costs.estimated(&self.cost_model)?;
                if estimated > runs {
                    return Ok(self.deferred(started, runs_before, estimated, expected));
                }
            }
        }
        let plan = fusion::plan_fusion(dag, self.selector.as_ref())?;
        let program = construct_cplans(dag, &plan.memo, &plan.selection)?;
        if let Some(costs) = &costs {
            if !program.operators.is_empty() {
                let fused = costs.cost_of(&self.cost_model, &plan.selection);
                let operators = program.operators.len();
                let due = costs.pays_at(fused, operators);
                if due > runs {
                    let expected = costs.expected(fused, operators);
                    return Ok(self.deferred(started, runs_before, due, Some(expected)));
                }
            }
        }
        self.count_planning(started);
        let plans: Vec<Arc<CPlan>> = program
            .operators
            .iter()
            .map(|op| Arc::new(op.cplan.clone()))
            .collect();
        // The format each operator's main input will be stored in (its estimated size), so
        // that the backend prepares the entry point that input runs first.
        let requests: Vec<Request<'_>> = program
            .operators
            .iter()
            .zip(&plans)
            .map(|(op, plan)| Request {
                plan,
                main: expected_main_format(dag, op),
            })
            .collect();
        let mut built = self.backend.build(&requests).into_iter();
        let mut planned = Vec::with_capacity(program.operators.len());
        for (op, plan) in program.operators.iter().zip(&plans) {
            let executable = built.next().unwrap_or_else(|| {
                Err(CodegenError::Internal(
                    lafuse_codegen::backend::Internal::MissingOperators,
                ))
            });
            match self.runnable(dag, op, plan, executable) {
                Ok(operator) => planned.push(PlannedOperator {
                    operator,
                    inputs: op.inputs.clone(),
                    outputs: op
                        .outputs
                        .iter()
                        .map(|&h| (h, dag.hop(h).is_scalar()))
                        .collect(),
                }),
                Err(reason) => self.counters.fallback(reason),
            }
        }
        Ok(Fusion::Now(planned))
    }

    /// A runnable operator for `op` from what the backend built, counting how it came to be,
    /// or why its hops must run unfused.
    fn runnable(
        &self,
        dag: &HopDag,
        op: &FusedOperator,
        plan: &Arc<CPlan>,
        built: Result<lafuse_codegen::backend::Built, CodegenError>,
    ) -> Result<Arc<dyn Operator>, String> {
        let built = built.map_err(|e| e.to_string())?;
        match &built.origin {
            Origin::Interpreted => {}
            Origin::CacheHit => {
                self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
            }
            Origin::Compiled {
                miss_reason,
                loaded_from_store,
            } => {
                self.counters.compiled.fetch_add(1, Ordering::Relaxed);
                if *loaded_from_store {
                    self.counters.loaded.fetch_add(1, Ordering::Relaxed);
                }
                self.counters
                    .codegen_nanos
                    .fetch_add(nanos(built.executable.compile_time()), Ordering::Relaxed);
                if let Ok(mut reasons) = self.counters.miss_reasons.lock() {
                    *reasons.entry(miss_reason.clone()).or_insert(0) += 1;
                }
            }
        }
        let mut out_shapes = Vec::with_capacity(op.outputs.len());
        for &h in &op.outputs {
            let hop = dag.hop(h);
            if hop.is_scalar() {
                out_shapes.push((1, 1));
            } else {
                let (r, c) = hop
                    .dims()
                    .ok_or_else(|| "an output of unknown size".to_string())?;
                out_shapes.push((r as usize, c as usize));
            }
        }
        Ok(Arc::new(RunnableOperator {
            opcode: format!("fused_{}", plan.template.name()),
            key: (plan.template.name(), plan.structural_hash()),
            plan: Arc::clone(plan),
            products: ProductOperands::of(plan),
            out_shapes,
            executable: built.executable,
            counters: Arc::clone(&self.counters),
        }))
    }
}

/// The format `op`'s main input will be stored in, by its estimated size.
fn expected_main_format(dag: &HopDag, op: &FusedOperator) -> MainFormat {
    let sparse = op.inputs.first().is_some_and(|&h| {
        let hop = dag.hop(h);
        match (hop.rows, hop.cols, hop.nnz) {
            (Some(r), Some(c), Some(nnz)) => {
                lafuse_runtime::matrix::prefers_sparse(r as usize, c as usize, nnz as usize)
            }
            _ => false,
        }
    });
    if sparse {
        MainFormat::Sparse
    } else {
        MainFormat::Dense
    }
}

/// Per input: its value range, if the executor knows it.
fn known_ranges(inputs: &[OperatorInput<'_>]) -> Vec<Option<lafuse_runtime::ValueRange>> {
    inputs
        .iter()
        .map(|i| match i {
            OperatorInput::Matrix(_, known) => *known,
            OperatorInput::Scalar(_) => None,
        })
        .collect()
}

/// A matrix product in a plan, for the check of [`ProductOperands::exact`]: the input its left
/// operand reads directly (if it is an input), and the inputs its right operand reads.
#[derive(Debug)]
struct ProductOperands {
    left: Option<usize>,
    right: Vec<usize>,
}

impl ProductOperands {
    /// The products of `plan`: a row times a matrix, a dot product, an outer-product
    /// accumulation, an Outer template's `U %*% t(V)`, and its final product (both sides as
    /// right operands: its orientation varies).
    fn of(plan: &CPlan) -> Vec<ProductOperands> {
        let data = |n: CNodeId| match plan.nodes.get(n) {
            Some(CNode::Data { input, .. }) => Some(*input),
            _ => None,
        };
        plan.nodes
            .iter()
            .filter_map(|node| {
                let (left, right) = match node {
                    CNode::VectMatMult { a, b }
                    | CNode::OuterMultAdd { a, b }
                    | CNode::DotCell { a, b } => (data(*a), vec![*b]),
                    CNode::OuterDot { u, v } => (data(*u), vec![*v]),
                    CNode::FinalProduct { g, w } => (None, vec![*g, *w]),
                    _ => return None,
                };
                Some(ProductOperands {
                    left,
                    right: inputs_read(plan, right),
                })
            })
            .collect()
    }

    /// Whether generated code computes this product as `%*%` does. `%*%` skips its left
    /// operand's zeros (`kernels::matmul`), so `0 * Inf` is never formed; the generated dot
    /// products and outer-product updates visit every cell of a dense left operand. They
    /// agree where the right operand's inputs are finite, or the left operand is an input
    /// without zero cells (its non-zero count is its size: nothing to skip).
    fn exact(&self, inputs: &[OperatorInput<'_>]) -> bool {
        let no_zeros = self
            .left
            .and_then(|i| inputs.get(i))
            .is_some_and(|i| match i {
                OperatorInput::Matrix(m, _) => m.nnz() == m.rows() * m.cols(),
                OperatorInput::Scalar(v) => *v != 0.0,
            });
        no_zeros
            || self
                .right
                .iter()
                .filter_map(|&i| inputs.get(i))
                .all(|i| match *i {
                    OperatorInput::Scalar(v) => v.is_finite(),
                    OperatorInput::Matrix(_, Some(range)) => range.is_finite(),
                    OperatorInput::Matrix(m, None) => m.all_finite(),
                })
    }
}

/// The inputs (by position) that the nodes `roots` read, directly or through their operands.
fn inputs_read(plan: &CPlan, roots: Vec<CNodeId>) -> Vec<usize> {
    let mut stack = roots;
    let mut seen = vec![false; plan.nodes.len()];
    let mut inputs = std::collections::BTreeSet::new();
    while let Some(n) = stack.pop() {
        let Some(node) = plan.nodes.get(n) else {
            continue;
        };
        if std::mem::replace(&mut seen[n], true) {
            continue;
        }
        match node {
            CNode::Data { input, .. } => {
                inputs.insert(*input);
            }
            other => stack.extend(other.operands()),
        }
    }
    inputs.into_iter().collect()
}

/// A fused operator the executor can run.
#[derive(Debug)]
struct RunnableOperator {
    opcode: String,
    /// Its template's name and its plan's structural hash, for the statistics.
    key: (&'static str, u64),
    /// The plan, for a call the backend cannot do (run on the reference evaluator instead).
    plan: Arc<CPlan>,
    /// The plan's matrix products: a call where generated code would not compute one as
    /// `%*%` does (NaN/±Inf meeting a left operand's zeros) runs on the reference evaluator.
    products: Vec<ProductOperands>,
    out_shapes: Vec<(usize, usize)>,
    executable: Arc<dyn Executable>,
    counters: Arc<FusionCounters>,
}

impl RunnableOperator {
    /// A backend's failure as the executor reports it: a resource error where an output does
    /// not fit in memory (the script's doing), an internal one otherwise (the plan is ours).
    fn runtime_error(&self, e: CodegenError) -> RuntimeError {
        let opcode = self.opcode.clone();
        match e.fault() {
            Fault::Resource => RuntimeError::Resource(Resource::Operator {
                opcode,
                source: OperatorFailure::new(e),
            }),
            _ => RuntimeError::Internal(Internal::Operator {
                opcode,
                source: OperatorFailure::new(e),
            }),
        }
    }
}

impl Operator for RunnableOperator {
    fn opcode(&self) -> &str {
        &self.opcode
    }

    fn reads_value_range(&self, position: usize) -> bool {
        self.products.iter().any(|p| p.right.contains(&position))
    }

    fn execute(&self, inputs: &[OperatorInput<'_>]) -> lafuse_runtime::Result<Vec<Matrix>> {
        self.execute_traced(inputs, &[])
    }

    fn execute_traced(
        &self,
        inputs: &[OperatorInput<'_>],
        lineage: &[Option<lafuse_runtime::lineage::Lineage>],
    ) -> lafuse_runtime::Result<Vec<Matrix>> {
        let started = Instant::now();
        let operands: Vec<Operand<'_>> = inputs
            .iter()
            .map(|i| match *i {
                OperatorInput::Scalar(v) => Operand::Scalar(v),
                OperatorInput::Matrix(m, _) => Operand::Matrix(m),
            })
            .collect();
        // Entry points an operator compiles on the call that first needs one (a CSR main
        // input of an operator compiled for a dense one, Outer's every-cell entry) count as
        // code generation, not execution.
        let compiled_before = self.executable.compile_time();
        let result = if !self.products.iter().all(|p| p.exact(inputs)) {
            // The reference evaluator skips the left operands' zeros as `%*%` does.
            Err(CodegenError::Unsupported(
                lafuse_codegen::backend::Unsupported::Construct(
                    "a matrix product over NaN or infinite inputs",
                ),
            ))
        } else {
            self.executable.execute_traced(
                &operands,
                &self.out_shapes,
                &known_ranges(inputs),
                lineage,
            )
        };
        let compiled_in_call = self
            .executable
            .compile_time()
            .saturating_sub(compiled_before);
        let results = match result {
            Ok(r) => r,
            // A call the backend cannot do (no native operator refuses one today; Outer
            // calls whose zeros cannot be skipped visit every cell) runs on the reference
            // evaluator, cell by cell.
            Err(CodegenError::Unsupported(why)) => {
                self.counters
                    .fallback(format!("a call ran on the reference evaluator: {why}"));
                reference::evaluate_as_unfused(&self.plan, &operands, &self.out_shapes)
                    .map_err(|e| self.runtime_error(e.into()))?
            }
            Err(e) => return Err(self.runtime_error(e)),
        };
        let results = results
            .into_iter()
            .map(Matrix::examine_and_convert)
            .collect::<Result<Vec<_>, _>>()?;
        self.counters.executed.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut map) = self.counters.by_operator.lock() {
            *map.entry(self.key).or_insert(0) += 1;
        }
        self.counters
            .codegen_nanos
            .fetch_add(nanos(compiled_in_call), Ordering::Relaxed);
        self.counters.execution_nanos.fetch_add(
            nanos(started.elapsed().saturating_sub(compiled_in_call)),
            Ordering::Relaxed,
        );
        Ok(results)
    }
}

#[cfg(test)]
mod tests {
    use super::{Fuser, FusionBackend, Jit};
    use crate::deferral::{Expected, FOREGROUND_PAYBACK_RUNS, MAX_BACKGROUND_LAG};
    use crate::{FusionPolicy, Placement};
    use lafuse_compiler::fusion::CostModel;
    use lafuse_compiler::hops::{AggOp, BinaryOp, DagBuilder, Direction, HopDag};

    /// `sum(X * Y)` over dense `rows` x 1000 inputs.
    fn sum_xy(rows: u64) -> HopDag {
        let mut b = DagBuilder::new();
        let [x, y] = ["X", "Y"].map(|n| b.input(n, rows, 1000, rows * 1000));
        let xy = b.binary(BinaryOp::Mul, x, y).unwrap();
        let s = b.agg(AggOp::Sum, Direction::Full, xy).unwrap();
        b.output("s", s).unwrap();
        b.build().unwrap()
    }

    fn fuser() -> Fuser {
        let model = CostModel::default();
        Fuser::new(
            FusionPolicy::Gen,
            model,
            FusionBackend::Reference,
            Jit::Llvm,
            0,
            None,
            0,
            Placement::Cpu,
        )
    }

    /// The default JIT is tiered where both of its compilers are built in, and the tiers are
    /// the CPU's: a GPU placement compiles with LLVM (whose NVPTX backend makes its kernels),
    /// an explicit LLVM or Cranelift stays as asked.
    #[test]
    fn the_default_jit_is_tiered_on_the_cpu_and_llvm_on_the_gpu() {
        let both = cfg!(all(feature = "cranelift", feature = "llvm"));
        assert_eq!(Jit::default(), if both { Jit::Tiered } else { Jit::Llvm });
        for placement in [Placement::Gpu, Placement::Auto] {
            assert_eq!(Jit::Tiered.for_placement(placement), Jit::Llvm);
            assert_eq!(Jit::Llvm.for_placement(placement), Jit::Llvm);
            assert_eq!(Jit::Cranelift.for_placement(placement), Jit::Cranelift);
        }
        for jit in [Jit::Llvm, Jit::Cranelift, Jit::Tiered] {
            assert_eq!(jit.for_placement(Placement::Cpu), jit);
        }
    }

    /// The lag a due block runs on unfused while its fusion compiles in the background: one
    /// run for a block whose run outlasts the work, more the cheaper the block, capped; none
    /// (fuse now) unless the fuser defers and fuses in the background, or where four runs of
    /// the expected saving (the lag's, if fewer) pay for the stall of fusing now.
    #[test]
    fn the_background_lag_is_the_work_in_runs_of_the_block() {
        let background = fuser().deferring(1e-3).in_background(true);
        let (large, small) = (sum_xy(1_000_000), sum_xy(10));
        assert_eq!(background.background_lag(&large, None).unwrap(), Some(1));
        let lag = background.background_lag(&small, None).unwrap().unwrap();
        assert!(lag > 1 && lag <= MAX_BACKGROUND_LAG, "{lag}");
        let cheaper = background
            .background_lag(&sum_xy(5), None)
            .unwrap()
            .unwrap();
        assert!(cheaper >= lag, "{cheaper} against {lag}");
        // One operator: fusing now stalls the run a compilation (1 ms), which the saving of
        // the next four runs (of the lag's, where fewer) must pay back.
        assert!(lag >= FOREGROUND_PAYBACK_RUNS, "{lag}");
        let saving = |per_run: f64, operators: usize| {
            Some(Expected {
                saving: per_run,
                operators,
            })
        };
        assert_eq!(
            background
                .background_lag(&small, saving(0.24e-3, 1))
                .unwrap(),
            Some(lag)
        );
        assert_eq!(
            background
                .background_lag(&small, saving(0.26e-3, 1))
                .unwrap(),
            None
        );
        assert_eq!(
            background
                .background_lag(&small, saving(0.26e-3, 2))
                .unwrap(),
            Some(lag)
        );
        // A block whose run outlasts the work: its lag of one run is all the saving at stake.
        assert_eq!(
            background
                .background_lag(&large, saving(0.9e-3, 1))
                .unwrap(),
            Some(1)
        );
        assert_eq!(
            background
                .background_lag(&large, saving(1.1e-3, 1))
                .unwrap(),
            None
        );
        assert_eq!(
            fuser()
                .deferring(1e-3)
                .in_background(false)
                .background_lag(&small, None)
                .unwrap(),
            None
        );
        assert_eq!(
            fuser()
                .in_background(true)
                .background_lag(&small, None)
                .unwrap(),
            None
        );
    }
}
