//! lafuse: a JIT code generator for fused linear-algebra operators.
//!
//! This crate is the facade: [`Engine`] runs DML scripts (a subset of Apache SystemDS's
//! language) and explains their plans; the `lafuse` command (crate `lafuse-cli` in `cli/`, with
//! the bench harness and calibration) is a thin layer over it. The compiler (`lafuse-compiler`)
//! and runtime (`lafuse-runtime`) crates hold the substance.
//!
//! ```
//! use lafuse::{Engine, EngineConfig, ScriptArgs, SourceFile};
//!
//! let source = SourceFile::new("example.dml", "X = matrix(2, rows=3, cols=4)\nprint(sum(X * X))");
//! let mut out = Vec::new();
//! Engine::new(EngineConfig::default())
//!     .run(&source, &ScriptArgs::default(), &mut out)
//!     .map_err(|e| e.render(&source))
//!     .unwrap();
//! assert_eq!(String::from_utf8(out).unwrap(), "48.0\n");
//! ```
//!
//! Embedding: a script prepared once ([`Engine::prepare`]) runs on the caller's values
//! ([`Bindings`]) and returns the outputs it names ([`Outputs`]); its blocks compile at the
//! first execution and are reused while the inputs keep their shapes. A HOP DAG built with
//! [`DagBuilder`] runs the same way ([`Engine::prepare_dag`]).
//!
//! ```
//! use lafuse::{Bindings, Engine, EngineConfig, Matrix, ScriptArgs, SourceFile};
//!
//! let engine = Engine::new(EngineConfig::default());
//! let source = SourceFile::new("norm.dml", "s = sum(X * X)\nY = X / sqrt(s)");
//! let script = engine.prepare(&source, &ScriptArgs::default(), &["X"], &["s", "Y"])?;
//! for k in 1..=3 {
//!     let mut inputs = Bindings::new();
//!     inputs.matrix("X", Matrix::filled(4, 3, k as f64)?);
//!     let out = script.execute(&inputs)?;
//!     assert_eq!(out.scalar("s")?, 12.0 * (k * k) as f64);
//!     assert!((out.matrix("Y")?.get(0, 0) - 1.0 / 12f64.sqrt()).abs() < 1e-15);
//!     // Same shapes as the first execution: nothing compiles again.
//!     assert!(k == 1 || out.stats.blocks_compiled == 0);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod alloc;
mod bindings;
mod calls;
mod compile;
mod dag;
mod dedup;
mod deferral;
mod engine;
pub mod error;
mod explain;
mod fused;
pub mod gpu;
pub mod interop;
mod lineage;
mod parfor;
mod partial;
mod prepared;
pub mod profile;
mod recompute;
mod reuse;
mod static_explain;
pub mod stats;
mod unmark;

pub use bindings::{Bindings, Outputs, Scalar};
pub use dag::{DagInput, PreparedDag};
pub use error::Error;
pub use explain::cost_report;
pub use fused::{FusionBackend, Jit};
pub use interop::MatrixView;
pub use lafuse_codegen::backend::Placement;
pub use lafuse_compiler::fusion::CostModel;
pub use lafuse_compiler::hops::{DagBuilder, HopDag};
pub use lafuse_compiler::span::SourceFile;
/// Who has to act on an [`Error`] ([`Error::fault`]).
pub use lafuse_core::Fault;
pub use lafuse_runtime::value::Value;
pub use lafuse_runtime::{DenseMatrix, Matrix, SparseMatrix};
pub use prepared::PreparedScript;
pub use recompute::{recompute_dag, RESULT as RECOMPUTE_RESULT};
pub use reuse::{EvictionPolicy, ReuseConfig, ReuseMode};
pub use stats::{Stats, TieringStats};

/// The crates below the facade, for the types an embedder building DAGs or reading matrices
/// needs beyond the re-exports above (hop kinds, ops, matrix I/O).
pub mod crates {
    pub use lafuse_codegen as codegen;
    pub use lafuse_compiler as compiler;
    pub use lafuse_core as core;
    pub use lafuse_runtime as runtime;
}

use error::Usage;
use lafuse_compiler::fusion;
use lafuse_compiler::hops;
use lafuse_compiler::span::Span;
use lafuse_compiler::{check, parser, program};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// How the engine runs scripts. A value, passed in; there is no global configuration.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Time every instruction (for `--stats`); off by default because timing costs a little.
    pub collect_stats: bool,
    /// The fusion policy blocks are compiled with; `None` runs every operation unfused.
    pub fusion: Option<FusionPolicy>,
    /// What runs fused operators.
    pub backend: FusionBackend,
    /// The compiler of the native backend's operators: LLVM, Cranelift, or both tiered
    /// ([`Jit::default`]: tiered where both are built in, else LLVM). Under a GPU `placement`
    /// on a machine with a GPU, a tiered JIT compiles with LLVM ([`Jit::for_placement`]).
    pub jit: Jit,
    /// Under `Jit::Tiered`: cells of main input (rows × columns, or a CSR input's non-zeros
    /// for a Row operator that reads its rows at those; summed over calls) an operator
    /// processes on Cranelift before LLVM compiles it in the background
    /// ([`DEFAULT_TIER_THRESHOLD`]; 0: at its first call).
    pub tier_threshold: u64,
    /// Under `Jit::Tiered`: the compile time expected per fused operator, in milliseconds. A
    /// block whose fused operators the cost model expects to save less than their compile
    /// time per run starts on the unfused kernels and is compiled fused once its runs have
    /// forgone that much ([`DEFAULT_TIER_COMPILE_MS`]; 0 fuses every block at once).
    pub tier_compile_ms: f64,
    /// Under `Jit::Tiered` (default true): a deferred block whose fusion has paid for its
    /// compilation is planned and compiled on a background thread while it runs on unfused,
    /// and switches to the fused plan after as many runs as the cost model expects that work
    /// to take (a count, so results never depend on timing), unless a few runs of the saving
    /// the model expects pay for fusing it at once on the run's thread; false always fuses
    /// it on the run's thread at the run it falls due.
    pub tier_in_background: bool,
    /// The cost model the cost-based policy optimizes for.
    pub cost_model: CostModel,
    /// A directory where native operators' machine code is kept across processes: an operator
    /// compiled by an earlier run (of any script, on this CPU, by this lafuse and LLVM) is
    /// loaded from it instead of compiled. `None` (the default) compiles every operator.
    pub operator_cache_dir: Option<std::path::PathBuf>,
    /// Bytes the operator cache directory may take: opening it drops the least recently used
    /// operators beyond this ([`DEFAULT_OPERATOR_CACHE_LIMIT`] by default).
    pub operator_cache_limit: u64,
    /// Trace lineage (LIMA): every value gets an item saying exactly how it was computed;
    /// `lineage(X)` returns X's log and `write(X, f)` also writes `f.lineage`. Off by default,
    /// and free when off (no items, no lineage maps).
    pub lineage: bool,
    /// With `lineage`: deduplicate the lineage of last-level loops (LIMA section 3.2), one
    /// dedup item per assigned variable per iteration instead of one item per operation, and
    /// no tracing at all once the path taken has a patch. Expanded, the lineage is the same.
    pub lineage_dedup: bool,
    /// Lineage-based reuse (LIMA): off by default; on, lineage is traced (without
    /// deduplication) and values are reused by their items.
    pub reuse: ReuseConfig,
    /// Threads a `parfor` runs its iterations on: `None` (the default) for the available
    /// cores, `Some(1)` to run every `parfor` sequentially, like `for`.
    pub parfor_threads: Option<usize>,
    /// A directory of DML-bodied built-ins laid out as SystemDS's `scripts/builtin` (`f.dml`
    /// defining `m_f` or `s_f`): a call of a function `f` that neither the script nor lafuse
    /// defines loads `f.dml` from it. `None` (the default): no such directory.
    pub builtin_path: Option<std::path::PathBuf>,
    /// Where fused operators run: the CPU (the default), the GPU, or (`Auto`) the GPU where
    /// the placement cost model expects it to be faster. Needs the `cuda` feature and a GPU;
    /// without either, operators run on the CPU and the engine says why once.
    pub placement: Placement,
}

/// Default cells of main input an operator processes on Cranelift before `--jit tiered` has
/// LLVM compile it (about where LLVM's extra compile time is won back; see
/// `lafuse_codegen::tiers::DEFAULT_TIER_THRESHOLD`).
pub const DEFAULT_TIER_THRESHOLD: u64 = lafuse_codegen::tiers::DEFAULT_TIER_THRESHOLD;

/// Default compile time the tiered JIT expects per fused operator: Cranelift's median over
/// the compile suite's plans is 0.86 ms (BENCHMARKS.md, session 24), and planning and block
/// compilation add to it.
pub const DEFAULT_TIER_COMPILE_MS: f64 = 1.0;

/// Default bound on an operator cache directory: 1 GiB, about ten thousand operators.
pub const DEFAULT_OPERATOR_CACHE_LIMIT: u64 = lafuse_codegen::DEFAULT_STORE_LIMIT;

impl EngineConfig {
    /// Whether a run traces lineage: asked for, or for lineage-based reuse. A traced run keeps
    /// every block's write-backs (its report and block reuse list every variable).
    pub fn traces(&self) -> bool {
        self.lineage || self.reuse.mode != ReuseMode::None
    }
}

impl Default for EngineConfig {
    /// Cost-based fusion on the default backend with SystemDS's cost constants.
    fn default() -> EngineConfig {
        EngineConfig {
            collect_stats: false,
            fusion: Some(FusionPolicy::Gen),
            backend: FusionBackend::default(),
            jit: Jit::default(),
            tier_threshold: DEFAULT_TIER_THRESHOLD,
            tier_compile_ms: DEFAULT_TIER_COMPILE_MS,
            tier_in_background: true,
            cost_model: CostModel::default(),
            operator_cache_dir: None,
            operator_cache_limit: DEFAULT_OPERATOR_CACHE_LIMIT,
            lineage: false,
            lineage_dedup: false,
            reuse: ReuseConfig::default(),
            parfor_threads: None,
            builtin_path: None,
            placement: Placement::Cpu,
        }
    }
}

/// Parses `source` and loads its modules (the files it sources, the built-ins it calls from
/// `config.builtin_path`, else from `scripts/builtin` under the working directory where there
/// is one) into one script.
pub(crate) fn parse_script(
    source: &SourceFile,
    config: &EngineConfig,
) -> Result<lafuse_compiler::ast::Script, Error> {
    use lafuse_compiler::modules;
    let script = parser::parse(source)?;
    let options = modules::LoadOptions {
        script_dir: Path::new(&source.name)
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .map(Path::to_path_buf),
        // As SystemDS, which reads `scripts/builtin/f.dml` from the working directory first:
        // run from a SystemDS checkout, its built-ins load without --builtin-path.
        builtin_path: config.builtin_path.clone().or_else(|| {
            let local = Path::new("scripts/builtin");
            local.is_dir().then(|| local.to_path_buf())
        }),
    };
    let script = modules::load(script, source, &modules::FileSystem, &options)?;
    // SystemDS's lexer skips a character no token starts with, reports it on stderr and
    // parses on (its own sliceLineExtract.dml ends a statement with a stray `.`); so does
    // lafuse.
    for skipped in &script.skipped {
        let offset = skipped.span.map_or(0, |s| s.start);
        let (line, col) = source.line_col(offset);
        let file = source.in_file(offset, |name, _, _| name.to_string());
        eprintln!("warning: {file}:{line}:{col}: skipped as SystemDS's lexer does: {skipped}");
    }
    Ok(script)
}

/// Script arguments (`$name`), as given with `--nvargs name=value`.
#[derive(Clone, Debug, Default)]
pub struct ScriptArgs {
    values: BTreeMap<String, String>,
    compiled: hops::ScriptArgs,
}

impl ScriptArgs {
    /// Parses `name=value` pairs. Errors name the malformed pair.
    pub fn parse_pairs<S: AsRef<str>>(pairs: &[S]) -> Result<ScriptArgs, Error> {
        let mut values = BTreeMap::new();
        for pair in pairs {
            let pair = pair.as_ref();
            let (name, value) = pair.split_once('=').ok_or_else(|| {
                Error::Usage(Usage::ScriptArgument {
                    argument: pair.to_string(),
                })
            })?;
            let name = name.trim().trim_start_matches('$');
            let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
            if !valid {
                return Err(Error::Usage(Usage::ScriptArgumentName {
                    name: name.to_string(),
                }));
            }
            values.insert(name.to_string(), value.to_string());
        }
        Ok(ScriptArgs::from_map(values))
    }

    pub fn from_map(values: BTreeMap<String, String>) -> ScriptArgs {
        let compiled = hops::ScriptArgs {
            values: values.clone(),
        };
        ScriptArgs { values, compiled }
    }

    pub fn names(&self) -> BTreeSet<String> {
        self.values.keys().cloned().collect()
    }

    pub(crate) fn compiler_args(&self) -> &hops::ScriptArgs {
        &self.compiled
    }
}

/// What `explain` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExplainLevel {
    /// The HOP DAG of each block and predicate, as compiled at run time.
    Hops,
    /// The fusion memo table after exploration (paper Figure 6 style).
    Memo,
    /// The fusion plan a policy selects.
    Plan,
    /// The fused operators (CPlans) constructed from the selected plan.
    Cplan,
    /// The optimized LLVM IR generated for each fused operator.
    Ir,
    /// The machine code (assembly) generated for each fused operator.
    Asm,
    /// The PTX kernels the GPU backend generates for each fused operator (feature `cuda`).
    Ptx,
}

/// Fusion plan selection policies (paper section 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FusionPolicy {
    /// Cost-based: exact selection by MPSkipEnum under the cost model.
    #[default]
    Gen,
    /// Fuse all: the largest fused operators, recomputing shared intermediates.
    FuseAll,
    /// Fuse no redundancy: never fuse an intermediate with several consumers.
    FuseNoRedundancy,
}

impl FusionPolicy {
    fn selector(self, model: CostModel) -> Box<dyn fusion::PlanSelector + Send + Sync> {
        match self {
            FusionPolicy::Gen => Box::new(fusion::CostBased::new(model)),
            FusionPolicy::FuseAll => Box::new(fusion::FuseAll),
            FusionPolicy::FuseNoRedundancy => Box::new(fusion::FuseNoRedundancy),
        }
    }
}

/// What `explain` shows, and how.
#[derive(Clone, Copy, Debug)]
pub struct ExplainOptions {
    pub level: ExplainLevel,
    pub format: ExplainFormat,
    /// The policy whose plans fusion levels show.
    pub policy: FusionPolicy,
    /// Compile every block once without running the script (no side effects; sizes only as
    /// far as the compiler can infer them).
    pub static_only: bool,
    /// Show the main program's blocks writing back every variable they assign, as for an
    /// embedder that reads them all after the run (a DAG exported to run with `--output`);
    /// otherwise blocks are shown as `run` compiles them, without the write-backs of variables
    /// dead after them.
    pub all_variables_live: bool,
}

impl Default for ExplainOptions {
    fn default() -> ExplainOptions {
        ExplainOptions {
            level: ExplainLevel::Hops,
            format: ExplainFormat::Text,
            policy: FusionPolicy::Gen,
            static_only: false,
            all_variables_live: false,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExplainFormat {
    Text,
    Json,
    Dot,
}

/// One compiled block, as `explain` shows it.
#[derive(Clone, Debug)]
pub struct ExplainedBlock {
    /// "basic block", "if condition", "for-loop start", ...
    pub kind: String,
    pub span: Span,
    pub dag: HopDag,
}

/// The outcome of a successful run.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub stats: Stats,
    /// With lineage tracing on: the lineage log of every variable live at the end of the main
    /// program, by name (empty when tracing is off).
    pub lineage: BTreeMap<String, String>,
    /// With lineage tracing on: the value of every variable live at the end of the main
    /// program, beside its log in `lineage` (empty when tracing is off).
    pub variables: BTreeMap<String, Value>,
}

/// Reads a script file. Errors name the file.
pub fn load_script(path: &Path) -> Result<SourceFile, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| {
        Error::Usage(Usage::ReadScript {
            path: path.to_path_buf(),
            source,
        })
    })?;
    Ok(SourceFile::new(path.display().to_string(), text))
}

/// Runs and explains DML scripts, and prepares scripts and DAGs for repeated execution on
/// the caller's data ([`Engine::prepare`], [`Engine::prepare_dag`]). Compiled fused operators
/// are cached for the engine's lifetime, so running several scripts on one engine compiles
/// each operator once.
///
/// An engine is `Send + Sync` and cheap to clone (clones share the configuration and the
/// operator cache): one engine serves any number of threads at once.
#[derive(Clone)]
pub struct Engine {
    shared: Arc<Shared>,
}

/// What an engine's clones and the scripts and DAGs it prepared share.
pub(crate) struct Shared {
    pub(crate) config: EngineConfig,
    pub(crate) fuser: Option<fused::Fuser>,
}

impl Engine {
    pub fn new(config: EngineConfig) -> Engine {
        // The tiers are the CPU's: operators go to LLVM only where a GPU will run them, and a
        // GPU placement on a machine without one runs on the tiers (and says why).
        let jit = match config.placement {
            Placement::Cpu => config.jit,
            _ if crate::gpu::available().is_err() => config.jit,
            placement => config.jit.for_placement(placement),
        };
        let fuser = config.fusion.map(|policy| {
            fused::Fuser::new(
                policy,
                config.cost_model,
                config.backend,
                jit,
                config.tier_threshold,
                config.operator_cache_dir.as_deref(),
                config.operator_cache_limit,
                config.placement,
            )
        });
        // Under the tiered JIT the unfused kernels are the first tier: blocks are fused once
        // fusion pays for its compilation.
        let fuser = fuser.map(|f| match (config.backend, jit) {
            (FusionBackend::Native, Jit::Tiered) => f
                .deferring(config.tier_compile_ms / 1e3)
                .in_background(config.tier_in_background),
            _ => f,
        });
        Engine {
            shared: Arc::new(Shared { config, fuser }),
        }
    }

    /// The configuration the engine was made with.
    pub fn config(&self) -> &EngineConfig {
        &self.shared.config
    }

    /// Prepares `source` for repeated execution on bound inputs: parsed and checked now,
    /// each block compiled at its first execution and reused while the inputs keep their
    /// shapes. `inputs` are the variables each execution binds, `outputs` those it returns.
    pub fn prepare(
        &self,
        source: &SourceFile,
        args: &ScriptArgs,
        inputs: &[&str],
        outputs: &[&str],
    ) -> Result<PreparedScript, Error> {
        PreparedScript::new(Arc::clone(&self.shared), source, args, inputs, outputs)
    }

    /// Prepares a HOP DAG for execution on bound inputs (its transient reads) returning its
    /// outputs (its transient writes). The DAG is checked now, optimized, fused and compiled
    /// at its first execution for the bound shapes.
    pub fn prepare_dag(&self, dag: HopDag) -> Result<PreparedDag, Error> {
        PreparedDag::new(Arc::clone(&self.shared), dag)
    }

    /// Recomputes the value whose lineage log is `log` (LIMA's "reconstruct"): the log becomes
    /// one HOP DAG ([`recompute_dag`]: no control flow, only the operations on the way to the
    /// value), which is optimized, fused and executed as [`Engine::prepare_dag`] would, under
    /// this engine's configuration. An unseeded `rand` uses the seed it recorded, `time()`
    /// returns the value it recorded, and files read must be unchanged (same size and
    /// modification time) and are read from where the script read them. The value equals the
    /// original to the bit, or within rounding where fusion sums in another order.
    ///
    /// ```
    /// use lafuse::{Engine, EngineConfig, ScriptArgs, SourceFile, Value};
    ///
    /// let traced = Engine::new(EngineConfig { lineage: true, ..EngineConfig::default() });
    /// let source = SourceFile::new("s.dml", "X = rand(rows=3, cols=3)\ns = sum(X %*% X)");
    /// let report = traced.run(&source, &ScriptArgs::default(), &mut Vec::new())?;
    /// let again = Engine::new(EngineConfig::default()).recompute(&report.lineage["s"])?;
    /// let (Value::Double(s), Value::Double(recomputed)) = (&report.variables["s"], &again) else {
    ///     panic!("s is a double");
    /// };
    /// assert!((s - recomputed).abs() <= 1e-12 * s.abs());
    /// # Ok::<(), lafuse::Error>(())
    /// ```
    ///
    /// A `lineage(X)` on the way runs traced and gives the log of X as recomputed, which can
    /// be simpler than the original where rewrites apply across the script's blocks (and
    /// names `time()` by the literal it returned).
    ///
    /// Errors: a malformed log, or one naming what cannot be reproduced (a variable bound from
    /// outside the script, a changed or missing file) is a user error naming the item;
    /// deduplicated lineage is unsupported.
    pub fn recompute(&self, log: &str) -> Result<Value, Error> {
        let dag = recompute_dag(log)?;
        // The value of `lineage(X)` is X's log, which only a run that traces has: such a DAG
        // runs traced whatever the configuration says.
        let traced;
        let engine =
            if !self.config().lineage && dag.hops.iter().any(|h| h.op == hops::OpKind::Lineage) {
                traced = Engine::new(EngineConfig {
                    lineage: true,
                    ..self.config().clone()
                });
                &traced
            } else {
                self
            };
        let outputs = engine.prepare_dag(dag)?.execute(&Bindings::new())?;
        outputs.value(RECOMPUTE_RESULT).cloned()
    }

    /// Parses, checks and runs a script; `print` output goes to `out`.
    pub fn run(
        &self,
        source: &SourceFile,
        args: &ScriptArgs,
        out: &mut dyn Write,
    ) -> Result<RunReport, Error> {
        let started = Instant::now();
        let program = self.front_end(source, args)?;
        let front_end_time = started.elapsed();
        let plans = engine::PlanCache::default();
        let mut interpreter = engine::Interpreter::new(
            &program,
            args,
            out,
            &self.shared.config,
            self.shared.fuser.as_ref(),
            &plans,
        );
        interpreter.compile_time += front_end_time;
        let vars = interpreter.run_main_with(Default::default())?;
        let stats =
            interpreter.located_stats(started.elapsed(), |span| explain::lines_label(source, span));
        let lineage = interpreter.final_lineage();
        // Kept only beside their logs: a run without tracing drops its variables here.
        let variables = if lineage.is_empty() {
            BTreeMap::new()
        } else {
            vars.into_iter().collect()
        };
        Ok(RunReport {
            stats,
            lineage,
            variables,
        })
    }

    /// Shows every block as it was compiled: its HOP DAG, or the fusion memo table, plan, fused
    /// operators or generated code under `options.policy`. Runs the script with its output
    /// discarded, so blocks are shown with the sizes they actually met, unless
    /// `options.static_only` asks for a compile-only walk (sizes as far as they can be inferred).
    pub fn explain(
        &self,
        source: &SourceFile,
        args: &ScriptArgs,
        options: &ExplainOptions,
    ) -> Result<String, Error> {
        let program = self.front_end_reading(source, args, !options.all_variables_live)?;
        let blocks = if options.static_only {
            static_explain::explain_static(&program, args)?
        } else {
            self.blocks_as_run(&program, args)?
        };
        match options.level {
            ExplainLevel::Hops => Ok(explain::render_explain(
                Some(source),
                &blocks,
                options.format,
            )),
            level => explain::render_fusion(
                Some(source),
                &blocks,
                level,
                options.format,
                options.policy,
                self.shared.config.cost_model,
            ),
        }
    }

    /// Shows a DAG handed over directly as [`Engine::explain`] shows a script's blocks: after
    /// size propagation and the rewrites, with the sizes its inputs state (a DAG read from
    /// JSON states what it was exported with; set an input hop's `rows`, `cols` and `nnz` to
    /// explain it for other data). Nothing runs; `options.static_only` is implied.
    pub fn explain_dag(&self, dag: &HopDag, options: &ExplainOptions) -> Result<String, Error> {
        let dag = compile::optimized_dag(dag, &hops::BlockInputs::new())?;
        let blocks = [ExplainedBlock {
            kind: "DAG".to_string(),
            span: Span::default(),
            dag,
        }];
        match options.level {
            ExplainLevel::Hops => Ok(explain::render_explain(None, &blocks, options.format)),
            level => explain::render_fusion(
                None,
                &blocks,
                level,
                options.format,
                options.policy,
                self.shared.config.cost_model,
            ),
        }
    }

    /// Runs a script with its output discarded and reports, for every block with matrix
    /// operations, the modelled cost of each policy's plan and the cost-based search's work.
    pub fn cost(
        &self,
        source: &SourceFile,
        args: &ScriptArgs,
        policies: &[FusionPolicy],
        format: ExplainFormat,
    ) -> Result<String, Error> {
        let program = self.front_end(source, args)?;
        let blocks = self.blocks_as_run(&program, args)?;
        let labelled: Vec<(String, &HopDag)> = blocks
            .iter()
            .map(|b| {
                let lines = explain::lines_of(Some(source), b.span);
                (explain::title(&b.kind, lines), &b.dag)
            })
            .collect();
        cost_report(&labelled, policies, &self.shared.config.cost_model, format)
    }

    /// Every block of `program` as first compiled when it ran (its output discarded), in
    /// execution order: what `explain` and `cost` report on.
    fn blocks_as_run(
        &self,
        program: &program::Program,
        args: &ScriptArgs,
    ) -> Result<Vec<ExplainedBlock>, Error> {
        let mut sink = std::io::sink();
        let plans = engine::PlanCache::default();
        let mut interpreter = engine::Interpreter::new(
            program,
            args,
            &mut sink,
            &self.shared.config,
            self.shared.fuser.as_ref(),
            &plans,
        );
        interpreter.explained = Some(Vec::new());
        interpreter.run_main()?;
        Ok(interpreter.explained.take().unwrap_or_default())
    }

    fn front_end(&self, source: &SourceFile, args: &ScriptArgs) -> Result<program::Program, Error> {
        self.front_end_reading(source, args, true)
    }

    /// The checked program; with `nothing_read_after`, its main program's liveness is that of a
    /// run nobody reads variables from afterwards.
    fn front_end_reading(
        &self,
        source: &SourceFile,
        args: &ScriptArgs,
        nothing_read_after: bool,
    ) -> Result<program::Program, Error> {
        let script = parse_script(source, &self.shared.config)?;
        let mut program = program::build_program(script)?;
        check::check_program(&program, &args.names())?;
        // Nothing reads the main program's variables after a run, but a traced run's report
        // (and lineage-based reuse, which traces, keeps every block's write-backs).
        if nothing_read_after && !self.shared.config.traces() {
            program.drop_dead_main([]);
        }
        Ok(program)
    }
}

/// An engine and what it prepares serve several threads at once (pinned at compile time).
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Engine>();
    send_sync::<PreparedScript>();
    send_sync::<PreparedDag>();
};
