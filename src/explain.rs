//! Reports on compiled blocks: the HOP DAGs, the fusion levels (memo table, plan, CPlans,
//! generated code) as text, JSON or Graphviz, and the modelled cost of each policy's plan.
//! A block is named by its kind and, for a script's blocks, its lines; a block whose matrix
//! operations fusion had to leave out (sizes unknown when it was compiled) says so.

use crate::compile::unknown_size_ops;
use crate::engine::UNKNOWN_SIZE_REASON;
use crate::error::{Error, Internal, Unsupported};
use crate::{ExplainFormat, ExplainLevel, ExplainedBlock, FusionPolicy};
use lafuse_compiler::fusion::{self, CostModel};
use lafuse_compiler::hops::{self, HopDag};
use lafuse_compiler::span::{SourceFile, Span};
use std::time::Instant;

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
pub(crate) fn render_fusion(
    source: Option<&SourceFile>,
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
        let lines = lines_of(source, block.span);
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
            ExplainLevel::Ptx => {
                let program =
                    fusion::cplan::construct_cplans(&block.dag, &plan.memo, &plan.selection)?;
                let (body, json) = ptx_code(&program)?;
                (body, Ok(json))
            }
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
            "--- {}, policy {} ---\n{}{body}",
            title(&block.kind, lines),
            selector.name(),
            skipped_note(&block.dag)
        ));
        let json: serde_json::Value =
            json.map_err(|source| Error::Internal(Internal::FusionJson { source }))?;
        json_blocks.push(serde_json::json!({
            "kind": block.kind,
            "lines": lines.map(|(a, b)| [a, b]),
            "fusion_skipped": unknown_size_ops(&block.dag),
            "policy": selector.name(),
            "fusion": json,
        }));
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
pub(crate) fn per_block_report(
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
                // An Outer operator's tiles over a dense-enough driver: compiled on first
                // such use, shown here like the CSR entry point.
                if let Some(tiles) = compiled.tiles_text(level == ExplainLevel::Ir) {
                    let tiles = tiles
                        .map_err(|source| Error::Internal(Internal::CodeGeneration { source }))?;
                    code.push_str("; --- tiles entry point (dense-enough driver) ---\n");
                    code.push_str(tiles);
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

/// The PTX kernels of every fused operator of a block (dense main input, and CSR where the
/// plan is sparse-safe; Outer drives from CSR), as text and JSON.
#[cfg(feature = "cuda")]
fn ptx_code(program: &fusion::cplan::FusedProgram) -> Result<(String, serde_json::Value), Error> {
    use lafuse_codegen::backend::CodegenError;
    use lafuse_codegen::ptx::{generate, GpuMain};
    use lafuse_compiler::fusion::cplan::TemplateSpec;
    let mut text = String::new();
    let mut items = Vec::new();
    for (k, op) in program.operators.iter().enumerate() {
        let hash = format!("{:016x}", op.cplan.structural_hash());
        text.push_str(&format!(
            "op {k}: {} {} (hash {hash})\n",
            op.cplan.template.name(),
            op.cplan.template.variant()
        ));
        let mains: &[GpuMain] = match &op.cplan.template {
            TemplateSpec::Cell {
                sparse_safe: true, ..
            }
            | TemplateSpec::MAgg {
                sparse_safe: true, ..
            } => &[GpuMain::Dense, GpuMain::Csr],
            TemplateSpec::Outer { .. } => &[GpuMain::Csr],
            _ => &[GpuMain::Dense],
        };
        let mut kernels = Vec::new();
        for &main in mains {
            match generate(&op.cplan, main) {
                Ok(kernel) => {
                    text.push_str(&format!(
                        "; --- {main:?} main input: {:?} ---\n",
                        kernel.kernel.shape
                    ));
                    text.push_str(&kernel.ptx);
                    kernels.push(
                        serde_json::json!({ "main": format!("{main:?}"), "ptx": kernel.ptx.as_str() }),
                    );
                }
                // A refused CSR kernel of a plan whose shape has none (a column aggregate).
                Err(CodegenError::Internal(
                    lafuse_codegen::backend::Internal::SparseUnsafeCsr { .. },
                )) => {}
                Err(CodegenError::Unsupported(what)) => {
                    text.push_str(&format!("  (runs on the CPU: unsupported: {what})\n"));
                }
                Err(source) => return Err(Error::Internal(Internal::CodeGeneration { source })),
            }
        }
        items.push(serde_json::json!({
            "template": op.cplan.template.name(),
            "variant": op.cplan.template.variant(),
            "hash": hash,
            "kernels": kernels,
        }));
    }
    Ok((text, serde_json::json!({ "operators": items })))
}

#[cfg(not(feature = "cuda"))]
fn ptx_code(_program: &fusion::cplan::FusedProgram) -> Result<(String, serde_json::Value), Error> {
    Err(Error::Unsupported(Unsupported::PtxCode))
}

#[cfg(not(feature = "llvm"))]
fn generated_code(
    _program: &fusion::cplan::FusedProgram,
    _level: ExplainLevel,
) -> Result<(String, serde_json::Value), Error> {
    Err(Error::Unsupported(Unsupported::NativeCode))
}

pub(crate) fn render_explain(
    source: Option<&SourceFile>,
    blocks: &[ExplainedBlock],
    format: ExplainFormat,
) -> String {
    match format {
        ExplainFormat::Text => {
            let mut out = String::new();
            for block in blocks {
                let lines = lines_of(source, block.span);
                out.push_str(&format!("--- {} ---\n", title(&block.kind, lines)));
                out.push_str(&skipped_note(&block.dag));
                out.push_str(&hops::explain_text(&block.dag));
            }
            out
        }
        ExplainFormat::Json => {
            let items: Vec<serde_json::Value> = blocks
                .iter()
                .map(|b| {
                    serde_json::json!({
                        "kind": b.kind,
                        "lines": lines_of(source, b.span).map(|(a, b)| [a, b]),
                        "fusion_skipped": unknown_size_ops(&b.dag),
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

/// A block's first and last line in its script; none for a DAG handed over directly.
pub(crate) fn lines_of(source: Option<&SourceFile>, span: Span) -> Option<(usize, usize)> {
    let source = source?;
    let (first, _) = source.line_col(span.start);
    let (last, _) = source.line_col(span.end.saturating_sub(1).max(span.start));
    Some((first, last))
}

/// "lines 3-7": where a script's block is, as `--stats` names it.
pub(crate) fn lines_label(source: &SourceFile, span: Span) -> String {
    let (first, last) = lines_of(Some(source), span).unwrap_or_default();
    format!("lines {first}-{last}")
}

/// "basic block (lines 3-7)", or the kind alone where there are no lines.
pub(crate) fn title(kind: &str, lines: Option<(usize, usize)>) -> String {
    match lines {
        Some((first, last)) => format!("{kind} (lines {first}-{last})"),
        None => kind.to_string(),
    }
}

/// The line a report gives a block whose matrix operations fusion left out; empty if none.
fn skipped_note(dag: &HopDag) -> String {
    match unknown_size_ops(dag) {
        0 => String::new(),
        n => format!("# fusion skipped for {n} matrix operations: {UNKNOWN_SIZE_REASON}\n"),
    }
}
