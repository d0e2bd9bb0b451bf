//! The `algorithms` suite (paper Tables 4 and 5): each ML algorithm script of
//! `examples/algorithms/` on dense and sparse generated data under `none`, `fa`, `fnr` and
//! `gen`, next to the peers.
//!
//! The scripts follow the contract of the algorithm scripts: `gen_<id>.dml` writes the inputs
//! (arguments `rows`, `cols`, `sp`, `seed`, `out`, `fmt`) and `<id>.dml` reads them (`X`, and
//! `Y` for the supervised ones) and prints `time_ms`, `iterations`, `objective` and
//! `check PASS|FAIL`. Flags: objectives that disagree across policies, failed checks, and `gen`
//! slower than `fa` or `fnr`, which is reported with the cost model's predicted cost of each
//! policy's plan (`lafuse cost --format json`) next to the measurement.

use super::micro::format_sp;
use super::results::{rel_diff, Measurement, Status};
use super::runner::stats_figures;
use super::Ctx;
use std::collections::BTreeMap;
use std::path::Path;

/// One algorithm: its id and what it reads.
pub struct Algorithm {
    pub id: &'static str,
    pub name: &'static str,
    /// Reads labels `Y` besides `X`.
    pub supervised: bool,
    /// Its rows relative to the suite's (the heavier ones run smaller).
    pub row_factor: f64,
}

/// The algorithms of the paper's Table 2, in report order.
pub const ALGORITHMS: &[Algorithm] = &[
    Algorithm {
        id: "l2svm",
        name: "L2SVM",
        supervised: true,
        row_factor: 1.0,
    },
    Algorithm {
        id: "mlogreg",
        name: "MLogreg",
        supervised: true,
        row_factor: 1.0,
    },
    Algorithm {
        id: "glm",
        name: "GLM (binomial probit)",
        supervised: true,
        row_factor: 1.0,
    },
    Algorithm {
        id: "kmeans",
        name: "KMeans",
        supervised: false,
        row_factor: 1.0,
    },
    Algorithm {
        id: "alscg",
        name: "ALS-CG",
        supervised: false,
        row_factor: 0.2,
    },
    Algorithm {
        id: "autoencoder",
        name: "AutoEncoder",
        supervised: false,
        row_factor: 0.2,
    },
];

/// The fusion policies every algorithm runs under.
pub const POLICIES: &[&str] = &["none", "fa", "fnr", "gen"];

/// Objectives of different plans differ by rounding only; beyond this they disagree.
pub const OBJECTIVE_TOLERANCE: f64 = 1e-6;

/// `gen` counts as slower than `fa`/`fnr` beyond this relative margin (timing noise).
pub const SLOWER_MARGIN: f64 = 0.05;

fn algorithm(id: &str) -> Option<&'static Algorithm> {
    ALGORITHMS.iter().find(|a| a.id == id)
}

/// The script arguments of `<id>.dml` for data written into `dir`.
fn reader_args(alg: &Algorithm, dir: &Path) -> Vec<(String, String)> {
    let mut a = vec![("X".to_string(), dir.join("X").display().to_string())];
    if alg.supervised {
        a.push(("Y".to_string(), dir.join("y").display().to_string()));
    }
    a.push(("fmt".to_string(), "binary".to_string()));
    a
}

/// The arguments of `gen_<id>.dml`.
fn generator_args(rows: usize, cols: usize, sp: f64, dir: &Path) -> Vec<(String, String)> {
    vec![
        ("rows".to_string(), rows.to_string()),
        ("cols".to_string(), cols.to_string()),
        ("sp".to_string(), format_sp(sp)),
        ("seed".to_string(), "7".to_string()),
        ("out".to_string(), dir.display().to_string()),
        ("fmt".to_string(), "binary".to_string()),
    ]
}

/// Runs `gen_<id>.dml` with lafuse into `dir`; returns the arguments of `<id>.dml`.
pub fn generate_data(
    ctx: &Ctx,
    id: &str,
    dir: &Path,
    rows: usize,
    cols: usize,
    sp: f64,
) -> Result<Vec<(String, String)>, String> {
    let alg = algorithm(id).ok_or_else(|| format!("unknown algorithm {id}"))?;
    let gen = ctx.script(&format!("algorithms/gen_{id}.dml"))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let (run, _) = ctx
        .runner
        .run_lafuse(&gen, "gen", &generator_args(rows, cols, sp, dir));
    if let Some(why) = run.failure {
        return Err(format!("data generation (gen_{id}.dml) failed: {why}"));
    }
    Ok(reader_args(alg, dir))
}

/// Runs the suite.
pub fn run(ctx: &Ctx) -> Vec<Measurement> {
    let s = &ctx.sizes;
    let mut jobs = Vec::new();
    for alg in ALGORITHMS {
        for sp in [1.0, s.alg_sparsity] {
            let rows = ((s.alg_rows as f64 * alg.row_factor) as usize).max(100);
            let density = if sp >= 1.0 {
                "dense".to_string()
            } else {
                format!("sp={}", format_sp(sp))
            };
            let variant = format!("{density} {rows}x{}", s.alg_cols);
            if ctx.selected(&format!("{} {variant}", alg.id)) {
                jobs.push((alg, sp, rows, variant));
            }
        }
    }
    let per_job =
        POLICIES.len() + ctx.peers.python_peers() + 2 * usize::from(ctx.peers.has_systemds());
    ctx.plan(jobs.len() * per_job);
    let mut out = Vec::new();
    for (alg, sp, rows, variant) in jobs {
        out.extend(run_job(ctx, alg, sp, rows, &variant));
    }
    out
}

fn run_job(ctx: &Ctx, alg: &Algorithm, sp: f64, rows: usize, variant: &str) -> Vec<Measurement> {
    let cols = ctx.sizes.alg_cols;
    let params = vec![
        ("rows".to_string(), rows.to_string()),
        ("cols".to_string(), cols.to_string()),
        ("sp".to_string(), format_sp(sp)),
    ];
    let label = format!("{} {variant}", alg.id);
    let dir = ctx.runner.scratch.join("data/lafuse").join(format!(
        "{}-{}",
        alg.id,
        variant.replace([' ', '='], "_")
    ));
    ctx.step(&format!("{label} generating data"));
    let prepared = ctx
        .script(&format!("algorithms/{}.dml", alg.id))
        .and_then(|script| {
            generate_data(ctx, alg.id, &dir, rows, cols, sp).map(|args| (script, args))
        });
    let mut out = Vec::new();
    for &policy in POLICIES {
        ctx.step(&format!("{label} lafuse {policy}"));
        let mut m =
            Measurement::new("algorithms", alg.id, variant, "lafuse", policy).with_params(&params);
        match &prepared {
            Err(e) => m.fail(Status::Failed, e.clone()),
            Ok((script, args)) => {
                for _ in 0..ctx.sizes.alg_reps.max(1) {
                    let (run, stats) = ctx.runner.run_lafuse(script, policy, args);
                    if let Some(why) = run.failure {
                        m.fail(Status::Failed, why);
                        break;
                    }
                    if !read_outputs(&run.stdout, &mut m) {
                        break;
                    }
                    if let Some(stats) = &stats {
                        m.figures.extend(stats_figures(stats));
                    }
                }
            }
        }
        m.summarize();
        ctx.done(&m);
        out.push(m);
    }
    flag_policies(ctx, &prepared, &mut out);
    if ctx.peers.has_python() {
        ctx.step(&format!("{label} python peers"));
        for mut m in ctx.peers.python_case(
            &ctx.runner,
            "algorithms",
            alg.id,
            variant,
            &params,
            ctx.sizes.alg_reps,
        ) {
            // peers.py's `result` of an algorithm case is its final objective (its own data, so
            // not compared with lafuse's).
            m.objective = m.objective.or(m.result);
            m.summarize();
            ctx.done(&m);
            out.push(m);
        }
    }
    if ctx.peers.has_systemds() {
        out.extend(run_systemds(ctx, alg, sp, rows, variant, &params));
    }
    out
}

/// Reads `time_ms`, `objective`, `iterations` and `check` into `m`; false (and `m` failed)
/// when `time_ms` is missing.
fn read_outputs(stdout: &str, m: &mut Measurement) -> bool {
    use super::runner::output_field;
    let number = |k: &str| {
        output_field(stdout, k)
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
    };
    let Some(t) = number("time_ms") else {
        m.fail(Status::Failed, "the script printed no `time_ms` line");
        return false;
    };
    m.times_ms.push(t);
    m.objective = number("objective");
    m.iterations = number("iterations").map(|i| i as u64);
    m.check = output_field(stdout, "check").map(str::to_string);
    true
}

/// A script with the arguments that read its generated data, or why there is none.
type Prepared = Result<(std::path::PathBuf, Vec<(String, String)>), String>;

/// Objective agreement with `none`, failed checks, and `gen` slower than `fa` or `fnr` (with
/// the cost model's prediction of each policy).
fn flag_policies(ctx: &Ctx, prepared: &Prepared, ms: &mut [Measurement]) {
    let reference = ms
        .iter()
        .find(|m| m.config == "none" && m.status == Status::Ok)
        .and_then(|m| m.objective);
    for m in ms.iter_mut().filter(|m| m.status == Status::Ok) {
        if let (Some(r), Some(o)) = (reference, m.objective) {
            let d = rel_diff(o, r);
            if d > OBJECTIVE_TOLERANCE || o.is_nan() != r.is_nan() {
                m.notes.push(format!(
                    "objective {o} differs from none's {r} (relative {d:.2e})"
                ));
            }
        }
        if m.check.as_deref().is_some_and(|c| !c.starts_with("PASS")) {
            m.notes
                .push(format!("check: {}", m.check.as_deref().unwrap_or("")));
        }
        if m.objective.is_none() {
            m.notes.push("printed no `objective`".into());
        }
    }
    let median = |p: &str| {
        ms.iter()
            .find(|m| m.config == p && m.status == Status::Ok)
            .and_then(|m| m.median_ms)
    };
    let Some(gen) = median("gen") else { return };
    let losers: Vec<(&str, f64)> = ["fa", "fnr"]
        .iter()
        .filter_map(|p| median(p).map(|t| (*p, t)))
        .filter(|(_, t)| gen > t * (1.0 + SLOWER_MARGIN))
        .collect();
    if losers.is_empty() {
        return;
    }
    let predicted = match prepared {
        Ok((script, args)) => predicted_costs(ctx, script, args),
        Err(e) => Err(e.clone()),
    };
    let prediction = match &predicted {
        Ok(p) => {
            for m in ms.iter_mut() {
                if let Some(c) = p.get(m.config.as_str()) {
                    m.figures.insert("predicted_cost_s".into(), *c);
                }
            }
            let parts: Vec<String> = ["gen", "fa", "fnr"]
                .iter()
                .filter_map(|k| p.get(*k).map(|c| format!("{k} {c:.4e} s")))
                .collect();
            format!("cost model predicts {}", parts.join(", "))
        }
        Err(e) => format!("no cost prediction: {e}"),
    };
    if let Some(g) = ms.iter_mut().find(|m| m.config == "gen") {
        for (p, t) in losers {
            g.notes.push(format!(
                "gen slower than {p}: {gen:.1} ms vs {t:.1} ms; {prediction}"
            ));
        }
    }
}

/// The modelled cost of each policy's plan summed over the script's blocks, keyed `gen`,
/// `fa`, `fnr`.
fn predicted_costs(
    ctx: &Ctx,
    script: &Path,
    args: &[(String, String)],
) -> Result<BTreeMap<String, f64>, String> {
    let run = ctx.runner.lafuse_tool(
        "cost",
        script,
        &["--policy", "gen,fa,fnr", "--format", "json"],
        args,
    );
    if let Some(why) = run.failure {
        return Err(format!("lafuse cost failed: {why}"));
    }
    sum_costs(&run.stdout)
}

/// Sums `blocks[].policies[].modelled_cost_s` per policy of `lafuse cost --format json`,
/// naming the policies `gen`, `fa` and `fnr`.
pub fn sum_costs(json: &str) -> Result<BTreeMap<String, f64>, String> {
    let doc: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("cost printed invalid JSON: {e}"))?;
    let mut out = BTreeMap::new();
    for block in doc
        .get("blocks")
        .and_then(|b| b.as_array())
        .ok_or("cost JSON has no `blocks`")?
    {
        for p in block
            .get("policies")
            .and_then(|p| p.as_array())
            .into_iter()
            .flatten()
        {
            let name = p.get("policy").and_then(|n| n.as_str()).unwrap_or("");
            let key = short_policy(name);
            let cost = p
                .get("modelled_cost_s")
                .and_then(|c| c.as_f64())
                .unwrap_or(0.0);
            *out.entry(key.to_string()).or_insert(0.0) += cost;
        }
    }
    Ok(out)
}

/// `gen`, `fa` or `fnr` for a selector name (`cost-based`/`gen`, `fuse-all`,
/// `fuse-no-redundancy`, ...).
fn short_policy(name: &str) -> &str {
    let n = name.to_ascii_lowercase();
    if n.contains("no-redundancy") || n.contains("no_redundancy") || n == "fnr" {
        "fnr"
    } else if n.contains("all") || n == "fa" {
        "fa"
    } else {
        "gen"
    }
}

/// SystemDS: its own data (written by the gen script on SystemDS, in its binary format), then
/// the algorithm with codegen on and off.
fn run_systemds(
    ctx: &Ctx,
    alg: &Algorithm,
    sp: f64,
    rows: usize,
    variant: &str,
    params: &[(String, String)],
) -> Vec<Measurement> {
    let label = format!("{} {variant}", alg.id);
    let dir = ctx.runner.scratch.join("data/systemds").join(format!(
        "{}-{}",
        alg.id,
        variant.replace([' ', '='], "_")
    ));
    ctx.step(&format!("{label} systemds data"));
    let prepared = ctx
        .script(&format!("algorithms/gen_{}.dml", alg.id))
        .and_then(|gen| {
            let script = ctx.script(&format!("algorithms/{}.dml", alg.id))?;
            std::fs::create_dir_all(&dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            let args = generator_args(rows, ctx.sizes.alg_cols, sp, &dir);
            match ctx.peers.systemds_run(&ctx.runner, &gen, "codegen", &args) {
                Some(run) => match run.failure {
                    Some(why) => Err(format!("failed: data generation on SystemDS: {why}")),
                    None => Ok(script),
                },
                None => Err("SystemDS not available".to_string()),
            }
        });
    let mut out = Vec::new();
    for config in ["codegen", "base"] {
        ctx.step(&format!("{label} systemds {config}"));
        let mut m =
            Measurement::new("algorithms", alg.id, variant, "systemds", config).with_params(params);
        match &prepared {
            Err(e) => m.fail(Status::Failed, e.clone()),
            Ok(script) => {
                match ctx
                    .peers
                    .systemds_run(&ctx.runner, script, config, &reader_args(alg, &dir))
                {
                    Some(run) => match run.failure {
                        Some(why) => m.fail(Status::Failed, format!("failed: {why}")),
                        None => {
                            read_outputs(&run.stdout, &mut m);
                        }
                    },
                    None => m.fail(Status::Skipped, "SystemDS not available"),
                }
            }
        }
        m.summarize();
        ctx.done(&m);
        out.push(m);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_and_costs_are_parsed() {
        let mut m = Measurement::new("algorithms", "l2svm", "dense", "lafuse", "gen");
        assert!(read_outputs(
            "time_ms 12.5\niterations 7\nobjective 0.25\ncheck PASS loss decreased\n",
            &mut m
        ));
        assert_eq!(m.times_ms, vec![12.5]);
        assert_eq!(m.iterations, Some(7));
        assert_eq!(m.objective, Some(0.25));
        assert_eq!(m.check.as_deref(), Some("PASS loss decreased"));
        let mut bad = Measurement::new("algorithms", "l2svm", "dense", "lafuse", "gen");
        assert!(!read_outputs("objective 1\n", &mut bad));
        assert_eq!(bad.status, Status::Failed);

        let costs = sum_costs(
            r#"{"blocks": [
                {"policies": [{"policy": "gen", "modelled_cost_s": 1.0},
                              {"policy": "fuse-all", "modelled_cost_s": 2.0},
                              {"policy": "fuse-no-redundancy", "modelled_cost_s": 3.0}]},
                {"policies": [{"policy": "gen", "modelled_cost_s": 0.5}]}]}"#,
        )
        .unwrap();
        assert_eq!(costs["gen"], 1.5);
        assert_eq!(costs["fa"], 2.0);
        assert_eq!(costs["fnr"], 3.0);
        assert!(sum_costs("[]").is_err());
    }
}
