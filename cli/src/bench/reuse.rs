//! The `reuse` suite (LIMA's experiments, section 5, Figures 7 to 9) at this machine's scale:
//! partial reuse in steplm's inner loop, multi-level reuse of a repeated MLogReg search, the
//! eviction policies under a small cache budget, and the pipelines HL2SVM, HLM, HCV, ENS and
//! PCALM, each a script of `examples/reuse/`.
//!
//! Every experiment runs each reuse configuration in turn within a repetition (interleaved, so
//! a slow phase of the machine hits them all), against no reuse in the same run, and against
//! Apache SystemDS with `-lineage reuse_hybrid` (and without reuse) on the same script when
//! SystemDS is there. Scripts print `time_ms` (their timed region) and `checksum`; every
//! configuration's checksum is compared with lafuse's without reuse (the agreement column). A
//! configuration lafuse does not support (`--reuse hybrid` until partial reuse lands) is a
//! skipped measurement with the reason, never a failure of the suite.

use super::results::{rel_diff, Measurement, Status};
use super::runner::{output_field, ChildOutput};
use super::sizes::Scale;
use super::Ctx;
use std::fmt::Write as _;

/// One experiment: a script of `examples/reuse/` and the configurations it runs under.
pub struct Experiment {
    pub id: &'static str,
    /// Where LIMA shows it, e.g. `Figure 7a`.
    pub figure: &'static str,
    pub title: &'static str,
    /// An eviction experiment runs the eviction policies under a small budget
    /// ([`EVICTION_CONFIGS`]) instead of the reuse modes ([`MODE_CONFIGS`]).
    pub eviction: bool,
    /// A pipeline of Figure 9: lafuse with reuse must beat SystemDS `reuse_hybrid` on it.
    pub pipeline: bool,
}

/// The experiments in report order.
pub const EXPERIMENTS: &[Experiment] = &[
    Experiment {
        id: "steplm_partial",
        figure: "Figure 7a",
        title: "partial reuse, steplm's inner loop",
        eviction: false,
        pipeline: false,
    },
    Experiment {
        id: "steplm_ca",
        figure: "Figure 7a",
        title: "partial reuse with compiler assistance, steplm's inner loop (Z not made)",
        eviction: false,
        pipeline: false,
    },
    Experiment {
        id: "mlogreg_multilevel",
        figure: "Figure 7b",
        title: "multi-level reuse, MLogReg over 40 λ, repeated",
        eviction: false,
        pipeline: false,
    },
    Experiment {
        id: "eviction_minibatch",
        figure: "Figure 8b",
        title: "eviction, mini-batch epochs",
        eviction: true,
        pipeline: false,
    },
    Experiment {
        id: "eviction_phases",
        figure: "Figure 8a",
        title: "eviction, three phases",
        eviction: true,
        pipeline: false,
    },
    Experiment {
        id: "hl2svm",
        figure: "Figure 9a",
        title: "HL2SVM, L2SVM over a grid of λ and intercept",
        eviction: false,
        pipeline: true,
    },
    Experiment {
        id: "hlm",
        figure: "Figure 9b",
        title: "HLM, lm over 40 λ",
        eviction: false,
        pipeline: true,
    },
    Experiment {
        id: "hcv",
        figure: "Figure 9c",
        title: "HCV, k-fold cross-validated lm over λ",
        eviction: false,
        pipeline: true,
    },
    Experiment {
        id: "ens",
        figure: "Figure 9d",
        title: "ENS, weighted ensemble, random search of weights",
        eviction: false,
        pipeline: true,
    },
    Experiment {
        id: "pcalm",
        figure: "Figure 9e",
        title: "PCALM, PCA with varying K, then lm",
        eviction: false,
        pipeline: true,
    },
];

/// lafuse's configurations of the reuse-mode experiments: `none` is the baseline, `hybrid`
/// is full, partial and multi-level reuse together (LIMA's default).
pub const MODE_CONFIGS: &[&str] = &["none", "full", "multilevel", "hybrid"];

/// lafuse's configurations of the eviction experiments: no reuse, then full reuse under each
/// eviction policy with the experiment's budget, every value kept from its first computation
/// (`--reuse-delay 1`, as LIMA's cache does, so eviction has work to do).
pub const EVICTION_CONFIGS: &[&str] = &["none", "lru", "dagheight", "costsize"];

/// SystemDS's configurations (codegen off, its default): without lineage, and with LIMA's
/// hybrid reuse.
pub const SYSTEMDS_CONFIGS: &[&str] = &["none", "reuse_hybrid"];

/// Checksums of configurations differ by rounding only; beyond this they disagree.
pub const AGREEMENT_TOLERANCE: f64 = 1e-6;

/// The script arguments of an experiment at a scale, and the cache budget of the eviction
/// experiments (a fraction of what their reusable values take, so eviction matters).
pub fn params(id: &str, scale: Scale) -> (Vec<(&'static str, usize)>, &'static str) {
    use Scale::{Full, Quick, Tiny};
    let p: Vec<(&'static str, usize)> = match (id, scale) {
        ("steplm_partial" | "steplm_ca", Tiny) => vec![("rows", 500), ("cols", 10), ("feats", 5)],
        ("steplm_partial" | "steplm_ca", Quick) => {
            vec![("rows", 10_000), ("cols", 200), ("feats", 20)]
        }
        // LIMA runs 1000 candidates, so the one-off t(X) %*% X is amortized; 100 keep that
        // proportion within this machine's minutes (at 20, the one-off product is a third of
        // the reuse run).
        ("steplm_partial" | "steplm_ca", Full) => {
            vec![("rows", 20_000), ("cols", 500), ("feats", 100)]
        }
        ("mlogreg_multilevel", Tiny) => {
            vec![("rows", 200), ("cols", 5), ("reps", 3), ("maxi", 2)]
        }
        ("mlogreg_multilevel", Quick) => {
            vec![("rows", 2_000), ("cols", 50), ("reps", 10), ("maxi", 5)]
        }
        ("mlogreg_multilevel", Full) => {
            vec![("rows", 5_000), ("cols", 100), ("reps", 20), ("maxi", 10)]
        }
        ("eviction_minibatch", Tiny) => {
            vec![("rows", 2_000), ("cols", 20), ("batch", 200), ("epochs", 3)]
        }
        ("eviction_minibatch", Quick) => {
            vec![
                ("rows", 10_000),
                ("cols", 100),
                ("batch", 500),
                ("epochs", 3),
            ]
        }
        ("eviction_minibatch", Full) => {
            vec![
                ("rows", 20_000),
                ("cols", 200),
                ("batch", 1_000),
                ("epochs", 4),
            ]
        }
        ("eviction_phases", Tiny) => {
            vec![("rows", 500), ("cols", 30), ("n1", 4), ("n2", 3), ("n3", 2)]
        }
        ("eviction_phases", Quick) => vec![
            ("rows", 2_000),
            ("cols", 200),
            ("n1", 6),
            ("n2", 6),
            ("n3", 3),
        ],
        ("eviction_phases", Full) => vec![
            ("rows", 5_000),
            ("cols", 300),
            ("n1", 8),
            ("n2", 8),
            ("n3", 4),
        ],
        ("hl2svm", Tiny) => vec![("rows", 500), ("cols", 10), ("lambdas", 2), ("maxi", 2)],
        ("hl2svm", Quick) => vec![("rows", 10_000), ("cols", 50), ("lambdas", 5), ("maxi", 3)],
        ("hl2svm", Full) => vec![
            ("rows", 50_000),
            ("cols", 100),
            ("lambdas", 10),
            ("maxi", 5),
        ],
        ("hlm", Tiny) => vec![("rows", 300), ("cols", 8)],
        ("hlm", Quick) => vec![("rows", 20_000), ("cols", 50)],
        ("hlm", Full) => vec![("rows", 100_000), ("cols", 100)],
        ("hcv", Tiny) => vec![("rows", 400), ("cols", 8), ("folds", 4), ("lambdas", 2)],
        ("hcv", Quick) => vec![("rows", 10_000), ("cols", 50), ("folds", 4), ("lambdas", 5)],
        ("hcv", Full) => vec![
            ("rows", 40_000),
            ("cols", 100),
            ("folds", 8),
            ("lambdas", 10),
        ],
        ("ens", Tiny) => vec![
            ("rows", 300),
            ("test", 100),
            ("cols", 10),
            ("classes", 3),
            ("weights", 5),
            ("maxi", 2),
        ],
        ("ens", Quick) => vec![
            ("rows", 3_000),
            ("test", 1_000),
            ("cols", 50),
            ("classes", 5),
            ("weights", 100),
            ("maxi", 5),
        ],
        ("ens", Full) => vec![
            ("rows", 10_000),
            ("test", 5_000),
            ("cols", 100),
            ("classes", 10),
            ("weights", 500),
            ("maxi", 10),
        ],
        ("pcalm", Tiny) => vec![("rows", 300), ("cols", 20), ("kmax", 4), ("iters", 2)],
        ("pcalm", Quick) => vec![("rows", 10_000), ("cols", 50), ("kmax", 10), ("iters", 4)],
        ("pcalm", Full) => vec![("rows", 50_000), ("cols", 100), ("kmax", 20), ("iters", 8)],
        _ => Vec::new(),
    };
    let budget = match (id, scale) {
        (_, Tiny) => "256K",
        ("eviction_minibatch", Quick) | ("eviction_phases", Quick) => "8M",
        ("eviction_minibatch", Full) => "32M",
        _ => "64M",
    };
    (p, budget)
}

/// The `lafuse run` options of a configuration.
fn lafuse_args(config: &str, budget: &str) -> Vec<String> {
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match config {
        "lru" | "dagheight" | "costsize" => v(&[
            "--reuse",
            "full",
            "--reuse-policy",
            config,
            "--reuse-budget",
            budget,
            "--reuse-delay",
            "1",
        ]),
        mode => v(&["--reuse", mode]),
    }
}

/// The experiment's size as the report names it: `rows=.. cols=..`.
fn variant(p: &[(&str, usize)]) -> String {
    let words: Vec<String> = p.iter().map(|(k, v)| format!("{k}={v}")).collect();
    words.join(" ")
}

/// Runs the suite.
pub fn run(ctx: &Ctx) -> Vec<Measurement> {
    let selected: Vec<&Experiment> = EXPERIMENTS
        .iter()
        .filter(|e| {
            let (p, _) = params(e.id, ctx.sizes.scale);
            ctx.selected(&format!("{} {}", e.id, variant(&p)))
        })
        .collect();
    let per = |e: &Experiment| {
        let sds = if e.eviction || !ctx.peers.has_systemds() {
            0
        } else {
            SYSTEMDS_CONFIGS.len()
        };
        configs(e).len() + sds
    };
    ctx.plan(selected.iter().map(|e| per(e)).sum());
    let mut out = Vec::new();
    for e in selected {
        out.extend(run_experiment(ctx, e));
    }
    out
}

fn configs(e: &Experiment) -> &'static [&'static str] {
    if e.eviction {
        EVICTION_CONFIGS
    } else {
        MODE_CONFIGS
    }
}

fn run_experiment(ctx: &Ctx, e: &Experiment) -> Vec<Measurement> {
    let (p, budget) = params(e.id, ctx.sizes.scale);
    let nvargs: Vec<(String, String)> = p
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let var = variant(&p);
    let script = ctx.script(&format!("reuse/{}.dml", e.id));
    let mut ms: Vec<Measurement> = configs(e)
        .iter()
        .map(|c| {
            let mut m = Measurement::new("reuse", e.id, &var, "lafuse", c).with_params(&nvargs);
            if e.eviction && *c != "none" {
                m.params.insert("budget".into(), budget.into());
            }
            m
        })
        .collect();
    let with_systemds = ctx.peers.has_systemds() && !e.eviction;
    if with_systemds {
        for c in SYSTEMDS_CONFIGS {
            ms.push(Measurement::new("reuse", e.id, &var, "systemds", c).with_params(&nvargs));
        }
    }
    if let Err(why) = &script {
        for m in &mut ms {
            m.fail(Status::Failed, why.clone());
        }
    }
    let reps = ctx.sizes.reuse_reps.max(1);
    if let Ok(script) = &script {
        // Interleaved: every configuration once per repetition.
        for _ in 0..reps {
            for m in ms.iter_mut().filter(|m| m.status == Status::Ok) {
                ctx.step(&format!("{} {} {}", e.id, m.system, m.config));
                if m.system == "lafuse" {
                    let args = lafuse_args(&m.config, budget);
                    let (run, stats) = ctx.runner.run_lafuse_with(script, "gen", &args, &nvargs);
                    if read_run(&run, m) {
                        if let Some(r) = stats.as_ref().and_then(|s| s.get("reuse")) {
                            reuse_figures(r, m);
                        }
                    }
                } else {
                    let extra: &[&str] = match m.config.as_str() {
                        "reuse_hybrid" => &["-lineage", "reuse_hybrid"],
                        _ => &[],
                    };
                    match ctx
                        .peers
                        .systemds_run_with(&ctx.runner, script, "base", extra, &nvargs)
                    {
                        Some(run) => {
                            read_run(&run, m);
                        }
                        None => m.fail(Status::Skipped, "SystemDS not available"),
                    }
                }
            }
        }
    }
    for m in &mut ms {
        m.summarize();
    }
    flag_agreement(&mut ms);
    for m in &ms {
        ctx.done(m);
    }
    ms
}

/// Reads `time_ms` and `checksum` of one run into `m`; false (and `m` failed or, for an
/// unsupported configuration, skipped) when the run did not give them.
fn read_run(run: &ChildOutput, m: &mut Measurement) -> bool {
    if let Some(why) = &run.failure {
        if why.contains("unsupported") {
            // From `unsupported: ...` on: the exit status says nothing more.
            let at = why.find("unsupported").unwrap_or(0);
            let line = why[at..].lines().next().unwrap_or("").trim();
            m.fail(Status::Skipped, format!("lafuse: {line}"));
        } else {
            m.fail(Status::Failed, why.clone());
        }
        return false;
    }
    let number = |k: &str| {
        output_field(&run.stdout, k)
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
    };
    let Some(t) = number("time_ms") else {
        m.fail(Status::Failed, "the script printed no `time_ms` line");
        return false;
    };
    m.times_ms.push(t);
    m.result = number("checksum");
    true
}

/// The numbers of lafuse's `--stats-json` `reuse` object (hits by level, misses, evictions,
/// spills, time saved, ...) as `reuse_<name>` figures (the last repetition's).
fn reuse_figures(reuse: &serde_json::Value, m: &mut Measurement) {
    if let Some(obj) = reuse.as_object() {
        for (k, v) in obj {
            if let Some(v) = v.as_f64() {
                m.figures.insert(format!("reuse_{k}"), v);
            }
        }
    }
}

/// Notes every checksum that differs from lafuse's without reuse.
fn flag_agreement(ms: &mut [Measurement]) {
    let reference = ms
        .iter()
        .find(|m| m.system == "lafuse" && m.config == "none" && m.status == Status::Ok)
        .and_then(|m| m.result);
    for m in ms.iter_mut().filter(|m| m.status == Status::Ok) {
        match (reference, m.result) {
            (Some(r), Some(c)) => {
                let d = rel_diff(c, r);
                if d > AGREEMENT_TOLERANCE || c.is_nan() != r.is_nan() {
                    m.notes.push(format!(
                        "checksum {c} differs from lafuse none's {r} (relative {d:.2e})"
                    ));
                }
            }
            (_, None) => m.notes.push("printed no `checksum`".into()),
            (None, Some(_)) => {}
        }
    }
}

/// The fastest of lafuse's reuse configurations (not `none`) of a case: (config, median).
pub fn best_reuse<'a>(ms: &'a [Measurement], case: &str) -> Option<(&'a str, f64)> {
    ms.iter()
        .filter(|m| m.suite == "reuse" && m.case == case && m.system == "lafuse")
        .filter(|m| m.config != "none" && m.status == Status::Ok)
        .filter_map(|m| m.median_ms.map(|t| (m.config.as_str(), t)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// One lafuse or SystemDS measurement of a case.
pub fn find<'a>(
    ms: &'a [Measurement],
    case: &str,
    system: &str,
    config: &str,
) -> Option<&'a Measurement> {
    ms.iter()
        .find(|m| m.suite == "reuse" && m.case == case && m.system == system && m.config == config)
}

/// `median ±half-range% (ratio×)`, or the status of a measurement that has no time.
fn time_cell(m: Option<&Measurement>, baseline: Option<f64>) -> String {
    let Some(m) = m else {
        return String::new();
    };
    if m.status != Status::Ok {
        let why = m.error.as_deref().unwrap_or("");
        return if why.contains("unsupported") {
            "unsupported".into()
        } else {
            m.status.name().into()
        };
    }
    let Some(t) = m.median_ms else {
        return String::new();
    };
    let spread = m
        .spread
        .filter(|_| m.times_ms.len() > 1)
        .map_or(String::new(), |s| format!(" ±{:.0}%", s * 50.0));
    match baseline {
        Some(b) if t > 0.0 => format!("{t:.1}{spread} ({:.2}×)", b / t),
        _ => format!("{t:.1}{spread}"),
    }
}

/// The report's section: one table of times per kind of experiment, then the reuse
/// statistics of every lafuse run.
pub fn markdown(ms: &[Measurement]) -> String {
    let rs: Vec<&Measurement> = ms.iter().filter(|m| m.suite == "reuse").collect();
    if rs.is_empty() {
        return String::new();
    }
    let owned: Vec<Measurement> = rs.iter().map(|m| (*m).clone()).collect();
    let mut t = String::from(
        "## Lineage reuse (LIMA Figures 7-9)\n\nThe scripts' own `time_ms` (their timed \
         region; data generation excluded), median over repetitions with every configuration \
         run in turn within a repetition; ±: half the range as a percentage of the median; \
         (n×): lafuse without reuse ÷ this (above 1: faster than no reuse). SystemDS runs the \
         same script with codegen off (its default), without lineage (`none`) and with \
         `-lineage reuse_hybrid`. Agreement: every checksum equals lafuse none's to \
         1e-6 relative.\n\n",
    );
    let cases: Vec<&Experiment> = EXPERIMENTS
        .iter()
        .filter(|e| rs.iter().any(|m| m.case == e.id))
        .collect();
    let _ = writeln!(
        t,
        "| experiment | size | lafuse none | lafuse full | lafuse multilevel | lafuse hybrid | \
         SystemDS none | SystemDS reuse_hybrid | best lafuse reuse vs none | best lafuse reuse \
         vs SystemDS reuse_hybrid | agreement |\n|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for e in cases.iter().filter(|e| !e.eviction) {
        let base = find(&owned, e.id, "lafuse", "none")
            .filter(|m| m.status == Status::Ok)
            .and_then(|m| m.median_ms);
        let cell = |sys: &str, c: &str| time_cell(find(&owned, e.id, sys, c), base);
        let best = best_reuse(&owned, e.id);
        let vs_none = match (best, base) {
            (Some((c, b)), Some(n)) if b > 0.0 => format!("{:.2}× ({c})", n / b),
            _ => String::new(),
        };
        let sds = find(&owned, e.id, "systemds", "reuse_hybrid")
            .filter(|m| m.status == Status::Ok)
            .and_then(|m| m.median_ms);
        let vs_sds = match (best, sds) {
            (Some((c, b)), Some(s)) if b > 0.0 => format!("{:.2}× ({c})", s / b),
            (_, None) => "not measured".into(),
            _ => String::new(),
        };
        let var = rs
            .iter()
            .find(|m| m.case == e.id)
            .map_or(String::new(), |m| m.variant.clone());
        let _ = writeln!(
            t,
            "| {} ({}) | {var} | {} | {} | {} | {} | {} | {} | {vs_none} | {vs_sds} | {} |",
            e.id,
            e.figure,
            cell("lafuse", "none"),
            cell("lafuse", "full"),
            cell("lafuse", "multilevel"),
            cell("lafuse", "hybrid"),
            cell("systemds", "none"),
            cell("systemds", "reuse_hybrid"),
            agreement(&rs, e.id)
        );
    }
    if cases.iter().any(|e| e.eviction) {
        let _ = writeln!(
            t,
            "\nEviction (`--reuse full --reuse-delay 1 --reuse-budget B --reuse-policy P`):\n\n\
             | experiment | size | budget | none | lru | dagheight | costsize | best policy | \
             agreement |\n|---|---|---|---|---|---|---|---|---|"
        );
        for e in cases.iter().filter(|e| e.eviction) {
            let base = find(&owned, e.id, "lafuse", "none")
                .filter(|m| m.status == Status::Ok)
                .and_then(|m| m.median_ms);
            let cell = |c: &str| time_cell(find(&owned, e.id, "lafuse", c), base);
            let best = best_reuse(&owned, e.id).map_or(String::new(), |(c, _)| c.to_string());
            let first = rs.iter().find(|m| m.case == e.id);
            let budget = rs
                .iter()
                .find_map(|m| m.params.get("budget").filter(|_| m.case == e.id))
                .cloned()
                .unwrap_or_default();
            let _ = writeln!(
                t,
                "| {} ({}) | {} | {} | {} | {} | {} | {} | {best} | {} |",
                e.id,
                e.figure,
                first.map_or(String::new(), |m| m.variant.clone()),
                budget,
                cell("none"),
                cell("lru"),
                cell("dagheight"),
                cell("costsize"),
                agreement(&rs, e.id)
            );
        }
    }
    let _ = writeln!(
        t,
        "\nReuse statistics of lafuse's runs (`--stats`, the last repetition): hits of \
         operations, fused operators and function calls, misses, evictions, spills and \
         restores, the compute time the hits saved, and the most the cache held.\n\n\
         | experiment | config | hits ops/fused/calls | misses | evictions | spills/restores | \
         saved ms | peak MB |\n|---|---|---|---|---|---|---|---|"
    );
    for m in rs
        .iter()
        .filter(|m| m.system == "lafuse" && m.config != "none" && m.status == Status::Ok)
    {
        let f = |k: &str| m.figures.get(&format!("reuse_{k}")).copied();
        let n = |k: &str| f(k).map_or(String::new(), |v| format!("{v:.0}"));
        let _ = writeln!(
            t,
            "| {} | {} | {}/{}/{} | {} | {} | {}/{} | {} | {} |",
            m.case,
            m.config,
            n("operation_hits"),
            n("fused_hits"),
            n("function_hits"),
            n("misses"),
            n("evictions"),
            n("spills"),
            n("restores"),
            f("saved_ms").map_or(String::new(), |v| format!("{v:.1}")),
            f("peak_bytes").map_or(String::new(), |v| format!("{:.1}", v / (1 << 20) as f64)),
        );
    }
    t.push('\n');
    t
}

/// `agrees`, or the configurations whose checksum differs from lafuse none's.
fn agreement(rs: &[&Measurement], case: &str) -> String {
    let bad: Vec<String> = rs
        .iter()
        .filter(|m| m.case == case && m.notes.iter().any(|n| n.starts_with("checksum")))
        .map(|m| m.who())
        .collect();
    let measured = rs
        .iter()
        .filter(|m| m.case == case && m.status == Status::Ok)
        .count();
    if measured < 2 {
        String::new()
    } else if bad.is_empty() {
        "agrees".into()
    } else {
        format!("**differs**: {}", bad.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_experiment_has_sizes_at_every_scale() {
        for e in EXPERIMENTS {
            for s in [Scale::Tiny, Scale::Quick, Scale::Full] {
                assert!(!params(e.id, s).0.is_empty(), "{} {s:?}", e.id);
            }
        }
        assert_eq!(
            lafuse_args("lru", "8M"),
            [
                "--reuse",
                "full",
                "--reuse-policy",
                "lru",
                "--reuse-budget",
                "8M",
                "--reuse-delay",
                "1"
            ]
        );
        assert_eq!(lafuse_args("hybrid", "8M"), ["--reuse", "hybrid"]);
    }

    #[test]
    fn unsupported_is_skipped_and_checksums_are_compared() {
        let ok = |config: &str, t: f64, c: f64| {
            let mut m = Measurement::new("reuse", "hlm", "rows=1", "lafuse", config);
            m.times_ms = vec![t];
            m.result = Some(c);
            m.summarize();
            m
        };
        let mut hybrid = Measurement::new("reuse", "hlm", "rows=1", "lafuse", "hybrid");
        let run = ChildOutput {
            success: false,
            stdout: String::new(),
            stderr: String::new(),
            wall_ms: 1.0,
            failure: Some("exited with 1: error: unsupported: partial reuse".into()),
        };
        assert!(!read_run(&run, &mut hybrid));
        assert_eq!(hybrid.status, Status::Skipped);
        let mut ms = vec![
            ok("none", 10.0, 1.0),
            ok("full", 2.0, 1.0),
            ok("multilevel", 4.0, 1.1),
            hybrid,
        ];
        flag_agreement(&mut ms);
        assert!(ms[1].notes.is_empty());
        assert_eq!(ms[2].notes.len(), 1);
        assert_eq!(best_reuse(&ms, "hlm"), Some(("full", 2.0)));
        let text = markdown(&ms);
        assert!(text.contains("| hlm (Figure 9b) |"), "{text}");
        assert!(text.contains("unsupported"), "{text}");
        assert!(text.contains("5.00× (full)"), "{text}");
        assert!(text.contains("**differs**: lafuse multilevel"), "{text}");
    }
}
