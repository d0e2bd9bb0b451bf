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

pub mod alloc;
mod compile;
mod engine;
pub mod error;
mod fused;
pub mod interop;
pub mod profile;
mod static_explain;
pub mod stats;

pub use error::Error;
pub use fused::FusionBackend;
pub use lafuse_compiler::fusion::CostModel;
pub use lafuse_compiler::span::SourceFile;
/// Who has to act on an [`Error`] ([`Error::fault`]).
pub use lafuse_core::Fault;
pub use stats::Stats;

use error::{Internal, Unsupported, Usage};
use lafuse_compiler::fusion;
use lafuse_compiler::hops::{self, HopDag};
use lafuse_compiler::span::Span;
use lafuse_compiler::{check, parser, program};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
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
    /// The cost model the cost-based policy optimizes for.
    pub cost_model: CostModel,
    /// A directory where native operators' machine code is kept across processes: an operator
    /// compiled by an earlier run (of any script, on this CPU, by this lafuse and LLVM) is
    /// loaded from it instead of compiled. `None` (the default) compiles every operator.
    pub operator_cache_dir: Option<std::path::PathBuf>,
    /// Bytes the operator cache directory may take: opening it drops the least recently used
    /// operators beyond this ([`DEFAULT_OPERATOR_CACHE_LIMIT`] by default).
    pub operator_cache_limit: u64,
}

/// Default bound on an operator cache directory: 1 GiB, about ten thousand operators.
pub const DEFAULT_OPERATOR_CACHE_LIMIT: u64 = lafuse_codegen::DEFAULT_STORE_LIMIT;

impl Default for EngineConfig {
    /// Cost-based fusion on the default backend with SystemDS's cost constants.
    fn default() -> EngineConfig {
        EngineConfig {
            collect_stats: false,
            fusion: Some(FusionPolicy::Gen),
            backend: FusionBackend::default(),
            cost_model: CostModel::default(),
            operator_cache_dir: None,
            operator_cache_limit: DEFAULT_OPERATOR_CACHE_LIMIT,
        }
    }
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
    fn selector(self, model: CostModel) -> Box<dyn fusion::PlanSelector> {
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
}

impl Default for ExplainOptions {
    fn default() -> ExplainOptions {
        ExplainOptions {
            level: ExplainLevel::Hops,
            format: ExplainFormat::Text,
            policy: FusionPolicy::Gen,
            static_only: false,
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

/// Runs and explains DML scripts. Compiled fused operators are cached for the engine's
/// lifetime, so running several scripts on one engine compiles each operator once.
pub struct Engine {
    config: EngineConfig,
    fuser: Option<fused::Fuser>,
}

impl Engine {
    pub fn new(config: EngineConfig) -> Engine {
        let fuser = config.fusion.map(|policy| {
            fused::Fuser::new(
                policy,
                config.cost_model,
                config.backend,
                config.operator_cache_dir.as_deref(),
                config.operator_cache_limit,
            )
        });
        Engine { config, fuser }
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
        let mut interpreter =
            engine::Interpreter::new(&program, args, out, &self.config, self.fuser.as_ref());
        interpreter.compile_time += front_end_time;
        interpreter.run_main()?;
        let mut stats = interpreter.stats(started.elapsed());
        stats.fusion_skipped = interpreter
            .unknown_sizes
            .iter()
            .map(|(span, count)| {
                let (first, _) = source.line_col(span.start);
                let (last, _) = source.line_col(span.end.saturating_sub(1).max(span.start));
                stats::Fallback {
                    reason: format!(
                        "lines {first}-{last}: matrix operations of unknown size when the \
                         block was compiled (a size no file, metadata or earlier statement \
                         states)"
                    ),
                    count: *count as u64,
                }
            })
            .collect();
        Ok(RunReport { stats })
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
        let program = self.front_end(source, args)?;
        let blocks = if options.static_only {
            static_explain::explain_static(&program, args)?
        } else {
            let mut sink = std::io::sink();
            let mut interpreter = engine::Interpreter::new(
                &program,
                args,
                &mut sink,
                &self.config,
                self.fuser.as_ref(),
            );
            interpreter.explained = Some(Vec::new());
            interpreter.run_main()?;
            interpreter.explained.take().unwrap_or_default()
        };
        match options.level {
            ExplainLevel::Hops => Ok(render_explain(source, &blocks, options.format)),
            level => render_fusion(
                source,
                &blocks,
                level,
                options.format,
                options.policy,
                self.config.cost_model,
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
        let mut sink = std::io::sink();
        let mut interpreter =
            engine::Interpreter::new(&program, args, &mut sink, &self.config, self.fuser.as_ref());
        interpreter.explained = Some(Vec::new());
        interpreter.run_main()?;
        let blocks = interpreter.explained.take().unwrap_or_default();
        let labelled: Vec<(String, &HopDag)> = blocks
            .iter()
            .map(|b| {
                let (first, _) = source.line_col(b.span.start);
                let (last, _) = source.line_col(b.span.end.saturating_sub(1).max(b.span.start));
                (format!("{} (lines {first}-{last})", b.kind), &b.dag)
            })
            .collect();
        cost_report(&labelled, policies, &self.config.cost_model, format)
    }

    fn front_end(&self, source: &SourceFile, args: &ScriptArgs) -> Result<program::Program, Error> {
        let script = parser::parse(source)?;
        let program = program::build_program(script)?;
        check::check_program(&program, &args.names())?;
        Ok(program)
    }
}

/// Costs each policy's plan for every DAG with matrix operations (`lafuse cost`); also used for
/// a DAG handed over as JSON.
pub fn cost_report(
    dags: &[(String, &HopDag)],
    policies: &[FusionPolicy],
    model: &CostModel,
    format: ExplainFormat,
) -> Result<String, Error> {
    let mut text = String::new();
    let mut json_blocks = Vec::new();
    for (label, dag) in dags
        .iter()
        .filter(|(_, d)| d.hops.iter().any(|h| h.is_matrix()))
    {
        let view = fusion::FusionDag::new(dag)?;
        text.push_str(&format!("--- {label} ---\n"));
        let mut json_policies = Vec::new();
        let mut search = serde_json::Value::Null;
        for &policy in policies {
            let started = Instant::now();
            let (selection, report) = match policy {
                FusionPolicy::Gen => {
                    let options = fusion::ExploreOptions {
                        prune_dominated: false,
                        ..fusion::ExploreOptions::default()
                    };
                    let mut memo = fusion::explore(&view, &options);
                    let (selection, report) =
                        fusion::CostBased::new(*model).optimize(&view, &mut memo);
                    (selection, Some(report))
                }
                other => (
                    fusion::plan_fusion(dag, other.selector(*model).as_ref())?.selection,
                    None,
                ),
            };
            let optimizer_ms = started.elapsed().as_secs_f64() * 1e3;
            let cost = fusion::cost::cost_of(&view, model, &selection);
            text.push_str(&format!(
                "policy {:<20} modelled cost {:>14.6e} s, {} fused operators, optimized in {:.3} ms\n",
                selection.selector,
                cost,
                selection.roots.len(),
                optimizer_ms
            ));
            if let Some(report) = report {
                text.push_str(&report.explain());
                let st = &report.stats;
                search = serde_json::json!({
                    "partitions": st.partitions,
                    "interesting_points": st.points,
                    "plans_evaluated": st.evaluated,
                    "plans_skipped_by_cost": st.skipped_by_cost,
                    "plans_skipped_by_structure": st.skipped_by_structure,
                    "cut_sets": st.cut_sets,
                    "plan_cache_hits": st.cache_hits,
                    "approximated_partitions": st.approximated,
                    "search_ms": st.elapsed.as_secs_f64() * 1e3,
                });
            }
            json_policies.push(serde_json::json!({
                "policy": selection.selector,
                "modelled_cost_s": cost,
                "fused_operators": selection.roots.len(),
                "optimizer_ms": optimizer_ms,
            }));
        }
        json_blocks.push(
            serde_json::json!({ "block": label, "policies": json_policies, "gen_search": search }),
        );
    }
    per_block_report(text, json_blocks, format, "`cost`")
}

/// The fusion view of every block that contains matrix operations.
fn render_fusion(
    source: &SourceFile,
    blocks: &[ExplainedBlock],
    level: ExplainLevel,
    format: ExplainFormat,
    policy: FusionPolicy,
    model: CostModel,
) -> Result<String, Error> {
    let selector = policy.selector(model);
    let mut text = String::new();
    let mut json_blocks = Vec::new();
    // `--format dot`: one graph per block, one after the other.
    let mut dots: Vec<String> = Vec::new();
    for block in blocks
        .iter()
        .filter(|b| b.dag.hops.iter().any(|h| h.is_matrix()))
    {
        let plan = fusion::plan_fusion(&block.dag, selector.as_ref())?;
        let (first, _) = source.line_col(block.span.start);
        let (last, _) = source.line_col(block.span.end.saturating_sub(1).max(block.span.start));
        let (body, json) = match level {
            ExplainLevel::Memo if format == ExplainFormat::Dot => {
                dots.push(fusion::dot::memo_dot(&block.dag, &plan.explored));
                continue;
            }
            ExplainLevel::Plan | ExplainLevel::Cplan if format == ExplainFormat::Dot => {
                let program =
                    fusion::cplan::construct_cplans(&block.dag, &plan.memo, &plan.selection)?;
                dots.push(if level == ExplainLevel::Plan {
                    fusion::dot::plan_dot(&block.dag, &program)
                } else {
                    fusion::dot::cplan_dot(&program)
                });
                continue;
            }
            ExplainLevel::Memo => (
                plan.explored.explain(&block.dag),
                serde_json::from_str(&plan.explored.to_json()),
            ),
            ExplainLevel::Ir | ExplainLevel::Asm => {
                let program =
                    fusion::cplan::construct_cplans(&block.dag, &plan.memo, &plan.selection)?;
                let (body, json) = generated_code(&program, level)?;
                (body, Ok(json))
            }
            // The plan level is the selection (which memo entries each hop takes), the cplan
            // level the operators built from it.
            ExplainLevel::Plan => (
                plan.selection.explain(),
                serde_json::to_value(&plan.selection),
            ),
            ExplainLevel::Cplan => {
                let program =
                    fusion::cplan::construct_cplans(&block.dag, &plan.memo, &plan.selection)?;
                (program.explain(), serde_json::from_str(&program.to_json()))
            }
            ExplainLevel::Hops => unreachable!("handled by render_explain"),
        };
        text.push_str(&format!(
            "--- {} (lines {first}-{last}), policy {} ---\n{body}",
            block.kind,
            selector.name()
        ));
        let json: serde_json::Value =
            json.map_err(|source| Error::Internal(Internal::FusionJson { source }))?;
        json_blocks.push(serde_json::json!({ "kind": block.kind, "lines": [first, last], "policy": selector.name(), "fusion": json }));
    }
    if format == ExplainFormat::Dot
        && matches!(
            level,
            ExplainLevel::Memo | ExplainLevel::Plan | ExplainLevel::Cplan
        )
    {
        return Ok(dots.concat());
    }
    per_block_report(text, json_blocks, format, "fusion levels")
}

/// A per-block report as text, or as JSON `{"blocks": [...]}`; `report` names it in
/// the error for `--format dot`, which only HOP DAGs have.
fn per_block_report(
    text: String,
    json_blocks: Vec<serde_json::Value>,
    format: ExplainFormat,
    report: &'static str,
) -> Result<String, Error> {
    match format {
        ExplainFormat::Text => Ok(text),
        ExplainFormat::Json => Ok(serde_json::to_string_pretty(
            &serde_json::json!({ "blocks": json_blocks }),
        )
        .unwrap_or_default()
            + "\n"),
        ExplainFormat::Dot => Err(Error::Unsupported(Unsupported::DotFormat { report })),
    }
}

/// The generated code of every fused operator of a block, as text and JSON.
#[cfg(feature = "llvm")]
fn generated_code(
    program: &fusion::cplan::FusedProgram,
    level: ExplainLevel,
) -> Result<(String, serde_json::Value), Error> {
    use lafuse_codegen::native::{self, CodegenError};
    let mut text = String::new();
    let mut items = Vec::new();
    for (k, op) in program.operators.iter().enumerate() {
        let hash = format!("{:016x}", op.cplan.structural_hash());
        let header = format!(
            "op {k}: {} {} (hash {hash})\n",
            op.cplan.template.name(),
            op.cplan.template.variant()
        );
        text.push_str(&header);
        let code = match native::compile(&op.cplan) {
            Ok(compiled) => {
                let mut code = if level == ExplainLevel::Ir {
                    compiled.llvm_ir().to_string()
                } else {
                    compiled.assembly().to_string()
                };
                // The CSR entry point lives in a module of its own, compiled on first sparse
                // use; explain compiles it so both entry points can be read.
                let csr = compiled
                    .compile_csr_entry()
                    .map_err(|source| Error::Internal(Internal::CodeGeneration { source }))?;
                if csr {
                    let csr_code = if level == ExplainLevel::Ir {
                        compiled.csr_llvm_ir()
                    } else {
                        compiled.csr_assembly()
                    };
                    if let Some(c) = csr_code {
                        code.push_str("; --- CSR entry point (sparse main input) ---\n");
                        code.push_str(c);
                    }
                }
                text.push_str(&code);
                Some(code)
            }
            Err(CodegenError::Unsupported(what)) => {
                text.push_str(&format!("  (runs unfused: unsupported: {what})\n"));
                None
            }
            Err(source) => return Err(Error::Internal(Internal::CodeGeneration { source })),
        };
        items.push(serde_json::json!({
            "template": op.cplan.template.name(),
            "variant": op.cplan.template.variant(),
            "hash": hash,
            if level == ExplainLevel::Ir { "ir" } else { "asm" }: code,
        }));
    }
    Ok((text, serde_json::json!({ "operators": items })))
}

#[cfg(not(feature = "llvm"))]
fn generated_code(
    _program: &fusion::cplan::FusedProgram,
    _level: ExplainLevel,
) -> Result<(String, serde_json::Value), Error> {
    Err(Error::Unsupported(Unsupported::NativeCode))
}

fn render_explain(source: &SourceFile, blocks: &[ExplainedBlock], format: ExplainFormat) -> String {
    let lines = |span: Span| {
        let (first, _) = source.line_col(span.start);
        let (last, _) = source.line_col(span.end.saturating_sub(1).max(span.start));
        (first, last)
    };
    match format {
        ExplainFormat::Text => {
            let mut out = String::new();
            for block in blocks {
                let (first, last) = lines(block.span);
                out.push_str(&format!("--- {} (lines {first}-{last}) ---\n", block.kind));
                out.push_str(&hops::explain_text(&block.dag));
            }
            out
        }
        ExplainFormat::Json => {
            let items: Vec<serde_json::Value> = blocks
                .iter()
                .map(|b| {
                    let (first, last) = lines(b.span);
                    serde_json::json!({
                        "kind": b.kind,
                        "lines": [first, last],
                        "dag": serde_json::from_str::<serde_json::Value>(&hops::explain_json(&b.dag)).unwrap_or(serde_json::Value::Null),
                        // The serde form, loadable by `HopDag::from_json` and `lafuse cost`.
                        "hop_dag": serde_json::from_str::<serde_json::Value>(&b.dag.to_json()).unwrap_or(serde_json::Value::Null),
                    })
                })
                .collect();
            serde_json::to_string_pretty(&serde_json::json!({ "blocks": items }))
                .unwrap_or_default()
                + "\n"
        }
        ExplainFormat::Dot => {
            let mut out = String::new();
            for block in blocks {
                out.push_str(&hops::explain_dot(&block.dag));
            }
            out
        }
    }
}
