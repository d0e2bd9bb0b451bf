//! The `compile` suite: what compilation costs per script (paper Table 3) and how much of the
//! cost-based search partitioning and pruning save (paper Figure 15).
//!
//! Per script (the algorithm scripts at a small size, then the micro patterns), under `gen`,
//! every block fused at its first run whatever the `--jit` (`--tier-compile-ms 0`):
//! * a child `lafuse run --stats-json` gives operators compiled, operator-cache hits, JIT
//!   (`codegen_ms`), optimizer (`fusion_planning_ms`), compile and total time;
//! * a child `lafuse explain --level hops --format json` gives every block's HOP DAG as it was
//!   compiled at run time; each is optimized here, in-process, with the cost-based selector as
//!   the engine configures it (plans evaluated, skipped by cost and by structure) and again with
//!   cost and structural pruning and the plan cache off (bounded by a per-partition budget, as
//!   `benches/optimizer.rs` does), and the exhaustive counts are computed from the interesting
//!   points: `Σ 2^|M_i|` over partitions (partitioned, unpruned) and `2^Σ|M_i|` (neither).
//!
//! Then the literal-statements case (issue 22): [`LITERAL_STATEMENTS`] statements
//! `Yi = X * i + 1` in one block, each with its own literal, run under `gen` and `none`
//! alternately; each run's process wall time (its engine time, `total_ms`, among the figures)
//! and its operators compiled are recorded.
//! With literals as operator parameters the fused run compiles a handful of operators and stays
//! within [`super::goals::LITERALS_MAX_SLOWDOWN`] of the unfused one.

use super::algorithms::{generate_data, ALGORITHMS};
use super::micro::format_sp;
use super::results::{Measurement, Status};
use super::runner::stats_figures;
use super::Ctx;
use lafuse_compiler::fusion::{self, CostBased, CostModel, ExploreOptions, FusionDag};
use lafuse_compiler::hops::HopDag;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One script of the suite with its arguments.
struct Script {
    id: String,
    path: Result<PathBuf, String>,
    /// The algorithm whose data must be generated first, if any.
    needs_data: Option<&'static str>,
    nvargs: Vec<(String, String)>,
}

/// Runs the suite.
pub fn run(ctx: &Ctx) -> Vec<Measurement> {
    let s = &ctx.sizes;
    let mut scripts = Vec::new();
    for alg in ALGORITHMS {
        scripts.push(Script {
            id: alg.id.to_string(),
            path: ctx.script(&format!("algorithms/{}.dml", alg.id)),
            needs_data: Some(alg.id),
            nvargs: Vec::new(),
        });
    }
    for p in super::micro::PATTERNS {
        let mut nvargs = vec![
            ("m".to_string(), s.compile_rows.to_string()),
            ("n".to_string(), s.compile_cols.to_string()),
            ("sp".to_string(), format_sp(1.0)),
            ("reps".to_string(), "3".to_string()),
        ];
        if p.id == "outer" {
            nvargs[1].1 = s.compile_rows.to_string();
            nvargs[2].1 = format_sp(0.01);
            nvargs.push(("k".to_string(), "10".to_string()));
        }
        scripts.push(Script {
            id: p.id.to_string(),
            path: ctx.script(&format!("micro/{}.dml", p.id)),
            needs_data: None,
            nvargs,
        });
    }
    let variant = format!("{}x{}", s.compile_rows, s.compile_cols);
    scripts.retain(|sc| ctx.selected(&format!("{} {variant}", sc.id)));
    ctx.plan(scripts.len());
    let model = lafuse::profile::load_cost_model(None, &[]).unwrap_or_default();
    let mut out = Vec::new();
    for mut sc in scripts {
        ctx.step(&format!("compile {}", sc.id));
        let mut m = Measurement::new("compile", &sc.id, &variant, "lafuse", "gen");
        if let Err(e) = measure(ctx, &mut sc, &model, &mut m) {
            m.fail(Status::Failed, e);
        }
        m.params = sc.nvargs.iter().cloned().collect();
        m.summarize();
        ctx.done(&m);
        out.push(m);
    }
    if ctx.selected(&format!("{LITERALS_CASE} {LITERAL_STATEMENTS}")) {
        out.extend(literal_statements(ctx));
    }
    out
}

/// Statements of the literal-statements case.
pub const LITERAL_STATEMENTS: usize = 2000;
/// Its case id.
pub const LITERALS_CASE: &str = "literals";

/// The literal-statements script: a 10x10 `X`, then `Yi = X * i + 1` for every `i`, and a
/// print that reads the first and last (the others are block outputs, so each is computed).
pub fn literal_statements_script(n: usize) -> String {
    let mut s = String::from("X = rand(rows=10, cols=10, seed=7)\n");
    for i in 1..=n {
        s.push_str(&format!("Y{i} = X * {i} + 1\n"));
    }
    s.push_str(&format!("print(sum(Y1) + sum(Y{n}))\n"));
    s
}

/// The `run` options that compile every block's fusion at its first run under any `--jit`:
/// the suite measures compilation, which the tiered JIT (the default) would put off for
/// blocks this small (an option the other JITs ignore).
fn fuse_every_block() -> [String; 2] {
    ["--tier-compile-ms".to_string(), "0".to_string()]
}

/// The literal-statements case under `gen` and `none`, runs alternating.
fn literal_statements(ctx: &Ctx) -> Vec<Measurement> {
    const REPETITIONS: usize = 5;
    let variant = LITERAL_STATEMENTS.to_string();
    let mut ms: Vec<Measurement> = ["gen", "none"]
        .iter()
        .map(|p| Measurement::new("compile", LITERALS_CASE, &variant, "lafuse", p))
        .collect();
    ctx.plan(1);
    ctx.step(&format!("compile {LITERALS_CASE}"));
    let path = ctx.runner.scratch_file("literals", "dml");
    if let Err(e) = std::fs::write(&path, literal_statements_script(LITERAL_STATEMENTS)) {
        for m in &mut ms {
            m.fail(
                Status::Failed,
                format!("cannot write {}: {e}", path.display()),
            );
        }
        return ms;
    }
    'runs: for _ in 0..REPETITIONS {
        for m in ms.iter_mut() {
            let (run, stats) =
                ctx.runner
                    .run_lafuse_with(&path, &m.config.clone(), &fuse_every_block(), &[]);
            let wall_ms = run.wall_ms;
            let figures = match (run.failure, stats) {
                (Some(why), _) => Err(why),
                (None, None) => Err("the run wrote no statistics".to_string()),
                (None, Some(stats)) => Ok(stats_figures(&stats)),
            };
            match figures {
                Ok(f) => {
                    // The process's time, as a user (and the issue) measures it; the
                    // engine's own `total_ms` stays among the figures.
                    m.times_ms.push(wall_ms);
                    m.figures = f;
                }
                Err(why) => {
                    m.fail(Status::Failed, why);
                    break 'runs;
                }
            }
        }
    }
    let _ = std::fs::remove_file(&path);
    for m in &mut ms {
        m.params = [("statements".to_string(), variant.clone())].into();
        m.summarize();
    }
    if let Some(m) = ms.first() {
        ctx.done(m);
    }
    ms
}

fn measure(
    ctx: &Ctx,
    sc: &mut Script,
    model: &CostModel,
    m: &mut Measurement,
) -> Result<(), String> {
    let path = sc.path.clone()?;
    if let Some(alg) = sc.needs_data {
        let dir = ctx.runner.scratch.join("data/compile").join(alg);
        let s = &ctx.sizes;
        sc.nvargs = generate_data(ctx, alg, &dir, s.compile_rows, s.compile_cols, 1.0)?;
    }
    let (run, stats) = ctx
        .runner
        .run_lafuse_with(&path, "gen", &fuse_every_block(), &sc.nvargs);
    if let Some(why) = run.failure {
        return Err(why);
    }
    let stats = stats.ok_or("the run wrote no statistics")?;
    m.figures.extend(stats_figures(&stats));
    if let Some(t) = m.figures.get("total_ms") {
        m.times_ms.push(*t);
    }
    let explain = ctx.runner.lafuse_tool(
        "explain",
        &path,
        &["--level", "hops", "--format", "json"],
        &sc.nvargs,
    );
    if let Some(why) = explain.failure {
        return Err(format!("explain failed: {why}"));
    }
    let dags = dags_of_explain(&explain.stdout)?;
    m.figures
        .extend(optimizer_counts(&dags, model, ctx.sizes.unpruned_budget)?);
    Ok(())
}

/// The HOP DAGs of `explain --level hops --format json` output (`blocks[].hop_dag`).
pub fn dags_of_explain(json: &str) -> Result<Vec<HopDag>, String> {
    let doc: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("explain printed invalid JSON: {e}"))?;
    let blocks = doc
        .get("blocks")
        .and_then(|b| b.as_array())
        .ok_or("explain JSON has no `blocks`")?;
    blocks
        .iter()
        .filter_map(|b| b.get("hop_dag"))
        .map(|d| HopDag::from_json(&d.to_string()).map_err(|e| format!("explain HOP DAG: {e}")))
        .collect()
}

/// Figure 15's counts over all blocks with matrix operations: the cost-based search as the
/// engine runs it, the same search without pruning and plan cache (budgeted), and the
/// exhaustive counts with and without partitioning (as floating point: `2^n` overflows).
pub fn optimizer_counts(
    dags: &[HopDag],
    model: &CostModel,
    unpruned_budget: u64,
) -> Result<BTreeMap<String, f64>, String> {
    let mut f: BTreeMap<String, f64> = BTreeMap::new();
    let mut add = |k: &str, v: f64| *f.entry(k.to_string()).or_insert(0.0) += v;
    let mut total_points = 0usize;
    for dag in dags.iter().filter(|d| d.hops.iter().any(|h| h.is_matrix())) {
        let view = FusionDag::new(dag).map_err(|e| e.to_string())?;
        let explored = fusion::explore(&view, &ExploreOptions::default());
        let gen = CostBased::new(*model);
        let mut memo = explored.clone();
        let (_, report) = gen.optimize(&view, &mut memo);
        let st = &report.stats;
        add("blocks_optimized", 1.0);
        add("partitions", st.partitions as f64);
        add("interesting_points", st.points as f64);
        add("plans_evaluated", st.evaluated as f64);
        add("plans_skipped_by_cost", st.skipped_by_cost as f64);
        add("plans_skipped_by_structure", st.skipped_by_structure as f64);
        add("approximated_partitions", st.approximated as f64);
        add("optimizer_search_ms", st.elapsed.as_secs_f64() * 1e3);
        total_points += st.points;
        let exhaustive: f64 = report
            .partitions
            .iter()
            .map(|p| 2f64.powi(p.partition.points.len() as i32))
            .sum();
        add("plans_partitioned_exhaustive", exhaustive);

        let mut unpruned = CostBased::new(*model);
        unpruned.cost_pruning = false;
        unpruned.structural_pruning = false;
        unpruned.plan_caching = false;
        unpruned.max_evaluated = Some(unpruned_budget);
        unpruned.exact_points = 0;
        let mut memo = explored.clone();
        let (_, report) = unpruned.optimize(&view, &mut memo);
        add("plans_evaluated_unpruned", report.stats.evaluated as f64);
        add(
            "unpruned_approximated_partitions",
            report.stats.approximated as f64,
        );
        add(
            "optimizer_unpruned_ms",
            report.stats.elapsed.as_secs_f64() * 1e3,
        );
    }
    // Without partitioning, every point of the script is one decision of a single search.
    f.insert(
        "plans_unpartitioned_exhaustive".into(),
        2f64.powi(total_points.min(1023) as i32),
    );
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lafuse_compiler::hops::{BinaryOp, DagBuilder};

    #[test]
    fn counts_of_a_small_dag() {
        let mut b = DagBuilder::new();
        let x = b.input("X", 100, 10, 1000);
        let y = b.input("Y", 100, 10, 1000);
        let xy = b.binary(BinaryOp::Mul, x, y).unwrap();
        let z = b.binary(BinaryOp::Add, xy, x).unwrap();
        b.output("Z", z).unwrap();
        b.output("W", xy).unwrap();
        let dag = b.build().unwrap();
        let f = optimizer_counts(&[dag], &CostModel::default(), 1000).unwrap();
        assert_eq!(f["blocks_optimized"], 1.0);
        assert!(f["plans_partitioned_exhaustive"] >= 1.0);
        assert!(f["plans_unpartitioned_exhaustive"] >= 1.0);
        assert!(f["plans_evaluated"] <= f["plans_partitioned_exhaustive"].max(2.0));
        assert!(dags_of_explain("{\"blocks\": 3}").is_err());
        assert!(dags_of_explain("{\"blocks\": []}").unwrap().is_empty());
    }
}
