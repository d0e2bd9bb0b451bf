//! The speed goals of the native-operator work (issue 4) and of lineage reuse (issue 25),
//! checked against one run's own measurements: every ratio compares numbers taken side by side
//! in the same run, so a goal is met or missed on the machine and in the memory phase the run
//! met. A goal whose cases the run did not measure (another filter or scale, a peer not
//! given) is left out, never guessed; a configuration lafuse does not support yet is a missed
//! goal that says so.

use super::results::{Measurement, Status};

/// The size the dense goals are stated for: `1e5 × 1e3` inputs.
const GOAL_ROWS: &str = "100000";
const GOAL_COLS: &str = "1000";
/// The smaller size at which no pattern may be slower than a peer, the first evaluation (JIT
/// included) too.
const PEERS_SMALL_ROWS: &str = "10000";
/// The size the Outer goals are stated for: `X` of `20000 × 20000` (the paper's Figure 10d).
const GOAL_OUTER_DIM: &str = "20000";

/// `sum(X*Y*Z)` dense: at least this many times faster fused than unfused.
pub const SUM_XYZ_MIN_SPEEDUP: f64 = 2.5;
/// `t(X)%*%(w*(X%*%v))` dense: at least this many times faster fused than unfused.
pub const ROW_MV_MIN_SPEEDUP: f64 = 1.7;
/// Dense Cell, MultiAgg and Row operators: at least this fraction of a plain read's speed.
pub const MIN_READ_FRACTION: f64 = 0.7;
/// Dense Outer (sparsity 1): fused at most this many times the time of the plain multiply
/// `U %*% t(V)` measured right after it (`machine::multiply_reference_ms`).
pub const DENSE_OUTER_MAX_MULTIPLY_RATIO: f64 = 1.2;
/// The sparsity the sparse goals are stated for.
const GOAL_SPARSITY: f64 = 0.1;
/// Sparse Row `t(X)%*%(w*(X%*%v))`: at least this many times faster than scipy's two SpMVs
/// (the `numpy` peer, which runs sparse X on scipy.sparse).
pub const SPARSE_ROW_MIN_SCIPY_SPEEDUP: f64 = 2.0;
/// Sparse Cell `sum(X*Y*Z)`, all three CSR: at least this fraction of its read limit.
pub const SPARSE_CELL_MIN_LIMIT_FRACTION: f64 = 0.5;
/// Sparse MultiAgg `sum(X*Y), sum(X*Z)`, X CSR: at least this fraction of its read limit.
pub const SPARSE_MAGG_MIN_LIMIT_FRACTION: f64 = 0.7;
/// Outer at sparsity 1e-3: at least this many times faster fused than unfused.
pub const OUTER_1E3_MIN_SPEEDUP: f64 = 200.0;
/// Outer from sparsity 1e-1 to 1e-4: the largest time per non-zero over the smallest, at
/// most this ("time proportional to nnz").
pub const OUTER_MAX_PER_NNZ_SPREAD: f64 = 3.0;

/// The literal-statements script (`Yi = X * i + 1`, 2,000 literals): fused at most this many
/// times slower than unfused.
pub const LITERALS_MAX_SLOWDOWN: f64 = 3.0;
/// ... compiling at most this many operators ("a handful").
pub const LITERALS_MAX_OPERATORS: f64 = 5.0;

/// HLM: lafuse with reuse at least this many times faster than without.
pub const HLM_MIN_SPEEDUP: f64 = 5.0;
/// The repeated MLogReg search: multi-level reuse at least this many times faster than none.
pub const MLOGREG_MIN_SPEEDUP: f64 = 10.0;
/// steplm's inner loop: partial reuse with compiler assistance (`hybrid`) at least this many
/// times faster than none.
pub const STEPLM_MIN_SPEEDUP: f64 = 10.0;

/// One goal as this run measured it.
#[derive(Clone, Debug, PartialEq)]
pub struct Goal {
    /// What is asked, e.g. `sum(X*Y*Z) dense 1e5×1e3: gen ≥ 2.5× faster than unfused`.
    pub goal: String,
    /// What this run measured, e.g. `2.54×`.
    pub measured: String,
    pub met: bool,
}

/// The goals the measurements `ms` cover, in a fixed order.
pub fn evaluate(ms: &[Measurement]) -> Vec<Goal> {
    let mut out = Vec::new();
    let speedups = [
        ("sum_xyz", "sum(X*Y*Z)", SUM_XYZ_MIN_SPEEDUP),
        ("row_mv", "t(X)%*%(w*(X%*%v))", ROW_MV_MIN_SPEEDUP),
    ];
    for (id, expr, goal) in speedups {
        if let Some(r) = dense_gen(ms, id).and_then(|m| m.ratio_to_unfused) {
            out.push(Goal {
                goal: format!("{expr} dense 1e5×1e3: gen ≥ {goal}× faster than unfused"),
                measured: format!("{r:.2}×"),
                met: r >= goal,
            });
        }
    }
    for (id, what) in [
        ("sum_xyz", "Cell sum(X*Y*Z)"),
        ("magg", "MultiAgg sum(X*Y), sum(X*Z)"),
        ("row_mv", "Row t(X)%*%(w*(X%*%v))"),
        ("row_mm", "Row t(X)%*%(W*(X%*%V))"),
    ] {
        if let Some(f) = dense_gen(ms, id).and_then(|m| m.same_process_fraction) {
            out.push(Goal {
                goal: format!(
                    "{what} dense 1e5×1e3: gen reads its inputs at ≥ {:.0}% of a plain read's \
                     speed in the same process",
                    MIN_READ_FRACTION * 100.0
                ),
                measured: format!("{:.0}%", f * 100.0),
                met: f >= MIN_READ_FRACTION,
            });
        }
    }
    if let Some(g) = sparse_gen(ms, "row_mv") {
        let scipy = ms
            .iter()
            .find(|m| m.same_case(g) && m.system == "numpy" && m.status == Status::Ok);
        if let (Some(t), Some(peer)) = (g.median_ms, scipy.and_then(|m| m.median_ms)) {
            let r = peer / t;
            out.push(Goal {
                goal: format!(
                    "Sparse Row t(X)%*%(w*(X%*%v)) 1e5×1e3 sparsity {GOAL_SPARSITY}: gen ≥ \
                     {SPARSE_ROW_MIN_SCIPY_SPEEDUP}× faster than scipy's two SpMVs"
                ),
                measured: format!("{r:.2}× ({t:.1} ms against {peer:.1} ms)"),
                met: r >= SPARSE_ROW_MIN_SCIPY_SPEEDUP,
            });
        }
    }
    for (id, what, goal) in [
        (
            "sum_xyz",
            "Sparse Cell sum(X*Y*Z), all CSR",
            SPARSE_CELL_MIN_LIMIT_FRACTION,
        ),
        (
            "magg",
            "Sparse MultiAgg sum(X*Y), sum(X*Z), X CSR",
            SPARSE_MAGG_MIN_LIMIT_FRACTION,
        ),
    ] {
        if let Some(f) = sparse_gen(ms, id).and_then(|m| m.bandwidth_fraction) {
            out.push(Goal {
                goal: format!(
                    "{what} 1e5×1e3 sparsity {GOAL_SPARSITY}: gen at ≥ {:.0}% of its read \
                     limit (the bytes it must read over the run's read bandwidth)",
                    goal * 100.0
                ),
                measured: format!("{:.0}%", f * 100.0),
                met: f >= goal,
            });
        }
    }
    for (rows, first) in [
        (GOAL_ROWS, false),
        (PEERS_SMALL_ROWS, false),
        (PEERS_SMALL_ROWS, true),
    ] {
        out.extend(no_slower_than_peers(ms, rows, first));
    }
    let outer: Vec<(f64, &Measurement)> = ms
        .iter()
        .filter(|m| m.suite == "micro" && m.case == "outer" && ok_gen(m))
        .filter(|m| has_param(m, "m", GOAL_OUTER_DIM) && has_param(m, "n", GOAL_OUTER_DIM))
        .filter_map(|m| Some((param(m, "sp")?, m)))
        .filter(|(sp, _)| (1e-4 * 0.99..=1e-1 * 1.01).contains(sp))
        .collect();
    let dense_outer = ms
        .iter()
        .filter(|m| m.suite == "micro" && m.case == "outer" && ok_gen(m))
        .filter(|m| has_param(m, "m", GOAL_OUTER_DIM) && has_param(m, "n", GOAL_OUTER_DIM))
        .find(|m| param(m, "sp") == Some(1.0));
    if let Some(m) = dense_outer {
        if let (Some(t), Some(mm)) = (m.median_ms, m.figures.get("multiply_ms")) {
            let r = t / mm;
            out.push(Goal {
                goal: format!(
                    "Dense Outer (sparsity 1): gen within {DENSE_OUTER_MAX_MULTIPLY_RATIO}× of the plain \
                     multiply U %*% t(V)"
                ),
                measured: format!("{r:.2}× ({t:.0} ms against {mm:.0} ms)"),
                met: r <= DENSE_OUTER_MAX_MULTIPLY_RATIO,
            });
        }
    }
    if let Some((_, m)) = outer.iter().find(|(sp, _)| (sp / 1e-3 - 1.0).abs() < 1e-6) {
        if let Some(r) = m.ratio_to_unfused {
            out.push(Goal {
                goal: format!(
                    "Outer sparsity 1e-3: gen ≥ {OUTER_1E3_MIN_SPEEDUP}× faster than unfused"
                ),
                measured: format!("{r:.0}×"),
                met: r >= OUTER_1E3_MIN_SPEEDUP,
            });
        }
    }
    if let Some(m) = ms
        .iter()
        .find(|m| m.suite == "compile" && m.case == super::compile::LITERALS_CASE && ok_gen(m))
    {
        let compiled = m.figures.get("operators_compiled").copied();
        if let (Some(r), Some(compiled)) = (m.ratio_to_unfused, compiled) {
            let slowdown = 1.0 / r;
            out.push(Goal {
                goal: format!(
                    "{} statements `Yi = X * i + 1`: gen within {LITERALS_MAX_SLOWDOWN}× of \
                     unfused, compiling at most {LITERALS_MAX_OPERATORS} operators",
                    m.variant
                ),
                measured: format!("{slowdown:.2}×, {compiled} operators"),
                met: slowdown <= LITERALS_MAX_SLOWDOWN && compiled <= LITERALS_MAX_OPERATORS,
            });
        }
    }
    let per_nnz: Vec<(f64, f64)> = outer
        .iter()
        .filter_map(|(sp, m)| {
            let cells = param(m, "m")? * param(m, "n")?;
            Some((*sp, m.median_ms? * 1e6 / (cells * sp)))
        })
        .collect();
    if per_nnz.len() >= 2 {
        let lo = per_nnz.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
        let hi = per_nnz.iter().map(|p| p.1).fold(0.0, f64::max);
        let each: Vec<String> = per_nnz
            .iter()
            .map(|(sp, ns)| format!("{sp:e}: {ns:.1} ns"))
            .collect();
        out.push(Goal {
            goal: format!(
                "Outer time proportional to nnz(X) from sparsity 1e-1 to 1e-4: time per \
                 non-zero within a factor {OUTER_MAX_PER_NNZ_SPREAD}"
            ),
            measured: format!("{:.2} ({})", hi / lo, each.join(", ")),
            met: hi / lo <= OUTER_MAX_PER_NNZ_SPREAD,
        });
    }
    out.extend(reuse_goals(ms));
    out
}

/// The lineage-reuse goals: speedups over no reuse of HLM, the repeated MLogReg search and
/// steplm's inner loop, and lafuse with reuse faster than SystemDS `reuse_hybrid` on every
/// pipeline.
fn reuse_goals(ms: &[Measurement]) -> Vec<Goal> {
    use super::reuse::{best_reuse, find, params, EXPERIMENTS};
    // Only at the sizes the goals are stated for (the default scale's).
    let at_goal_size = |case: &str| {
        let (p, _) = params(case, super::Scale::Full);
        ms.iter()
            .filter(|m| m.suite == "reuse" && m.case == case)
            .all(|m| p.iter().all(|(k, v)| has_param(m, k, &v.to_string())))
    };
    let median = |case: &str, system: &str, config: &str| {
        find(ms, case, system, config)
            .filter(|m| m.status == Status::Ok && at_goal_size(case))
            .and_then(|m| m.median_ms)
    };
    let mut out = Vec::new();
    for (case, config, what, goal) in [
        ("hlm", None, "HLM", HLM_MIN_SPEEDUP),
        (
            "mlogreg_multilevel",
            Some("multilevel"),
            "MLogReg over 40 λ repeated, multi-level reuse",
            MLOGREG_MIN_SPEEDUP,
        ),
        (
            "steplm_ca",
            Some("hybrid"),
            "steplm's inner loop, partial reuse with compiler assistance (hybrid)",
            STEPLM_MIN_SPEEDUP,
        ),
    ] {
        let Some(none) = median(case, "lafuse", "none") else {
            continue;
        };
        let text = format!("{what}: lafuse with reuse ≥ {goal}× faster than without");
        let (label, t) = match config {
            None => match best_reuse(ms, case) {
                Some((c, t)) => (c.to_string(), t),
                None => continue,
            },
            Some(c) => match median(case, "lafuse", c) {
                Some(t) => (c.to_string(), t),
                None => {
                    let Some(m) = find(ms, case, "lafuse", c).filter(|_| at_goal_size(case)) else {
                        continue;
                    };
                    let why = m.error.as_deref().unwrap_or(m.status.name());
                    let best = best_reuse(ms, case)
                        .map(|(b, t)| format!("; best measured: {b} {:.2}×", none / t))
                        .unwrap_or_default();
                    out.push(Goal {
                        goal: text,
                        measured: format!("{c} not measured ({why}){best}"),
                        met: false,
                    });
                    continue;
                }
            },
        };
        let r = none / t;
        out.push(Goal {
            goal: text,
            measured: format!("{r:.2}× ({label})"),
            met: r >= goal,
        });
    }
    for e in EXPERIMENTS.iter().filter(|e| e.pipeline) {
        let (Some((c, t)), Some(sds)) = (
            best_reuse(ms, e.id),
            median(e.id, "systemds", "reuse_hybrid"),
        ) else {
            continue;
        };
        out.push(Goal {
            goal: format!(
                "{} ({}): lafuse with reuse faster than SystemDS with reuse_hybrid",
                e.id, e.figure
            ),
            measured: format!("{:.2}× ({c} {t:.1} ms, SystemDS {sds:.1} ms)", sds / t),
            met: t < sds,
        });
    }
    out
}

/// Every micro pattern (Outer has goals of its own) at `rows` rows, dense and sparse: gen no
/// slower than any peer measured beside it, at the median of the steady-state evaluations,
/// or (`first`) at the first evaluation, JIT compilation included, against the peers' first
/// calls. `None` where nothing was compared.
fn no_slower_than_peers(ms: &[Measurement], rows: &str, first: bool) -> Option<Goal> {
    let value = |m: &Measurement| {
        if first {
            m.figures.get("first_ms").copied()
        } else {
            m.median_ms
        }
    };
    let mut compared = 0;
    let mut slower = Vec::new();
    let gens = ms
        .iter()
        .filter(|m| m.suite == "micro" && m.case != "outer" && ok_gen(m));
    for g in gens.filter(|g| has_param(g, "m", rows)) {
        let Some(t) = value(g) else {
            continue;
        };
        let peers = ms
            .iter()
            .filter(|p| p.same_case(g) && p.system != "lafuse" && p.status == Status::Ok);
        for p in peers {
            let Some(pt) = value(p) else {
                continue;
            };
            compared += 1;
            if pt < t {
                slower.push(format!(
                    "{} {} against {} ({t:.1} ms against {pt:.1})",
                    g.case,
                    g.variant,
                    p.who()
                ));
            }
        }
    }
    if compared == 0 {
        return None;
    }
    let what = if first {
        "first evaluation, JIT compilation included, against the peers' first calls"
    } else {
        "median evaluation"
    };
    Some(Goal {
        goal: format!(
            "Every micro pattern at {rows} rows, dense and sparse: gen no slower than any peer \
             ({what})"
        ),
        measured: if slower.is_empty() {
            format!("faster in all {compared} comparisons")
        } else {
            format!(
                "slower in {} of {compared}: {}",
                slower.len(),
                slower.join("; ")
            )
        },
        met: slower.is_empty(),
    })
}

/// The `gen` measurement of pattern `id` at the goals' dense size, if the run has it.
fn dense_gen<'a>(ms: &'a [Measurement], id: &str) -> Option<&'a Measurement> {
    ms.iter().find(|m| {
        m.suite == "micro"
            && m.case == id
            && ok_gen(m)
            && has_param(m, "m", GOAL_ROWS)
            && has_param(m, "n", GOAL_COLS)
            && param(m, "sp") == Some(1.0)
    })
}

/// The `gen` measurement of pattern `id` at the goals' size and sparsity, if the run has it.
fn sparse_gen<'a>(ms: &'a [Measurement], id: &str) -> Option<&'a Measurement> {
    ms.iter().find(|m| {
        m.suite == "micro"
            && m.case == id
            && ok_gen(m)
            && has_param(m, "m", GOAL_ROWS)
            && has_param(m, "n", GOAL_COLS)
            && param(m, "sp").is_some_and(|sp| (sp / GOAL_SPARSITY - 1.0).abs() < 1e-9)
    })
}

fn ok_gen(m: &Measurement) -> bool {
    m.system == "lafuse" && m.config == "gen" && m.status == Status::Ok
}

/// Whether size parameter `name` is exactly `value` (as the script was given it).
fn has_param(m: &Measurement, name: &str, value: &str) -> bool {
    m.params.get(name).map(String::as_str) == Some(value)
}

fn param(m: &Measurement, name: &str) -> Option<f64> {
    m.params.get(name)?.parse().ok()
}

/// The goals as a markdown section (empty when the run measured none of them).
pub fn markdown(goals: &[Goal]) -> String {
    if goals.is_empty() {
        return String::new();
    }
    let mut t = String::from(
        "## Goals\n\nThe speed goals of the native fused operators and of lineage reuse, each \
         checked against this run's own measurements (ratios of runs taken side by side).\n\n\
         | goal | measured | |\n|---|---|---|\n",
    );
    for g in goals {
        t.push_str(&format!(
            "| {} | {} | {} |\n",
            g.goal,
            g.measured,
            if g.met { "met" } else { "**missed**" }
        ));
    }
    t.push('\n');
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen(case: &str, m: &str, n: &str, sp: &str, median: f64, ratio: f64) -> Measurement {
        let mut r = Measurement::new("micro", case, "", "lafuse", "gen").with_params(&[
            ("m".into(), m.into()),
            ("n".into(), n.into()),
            ("sp".into(), sp.into()),
        ]);
        r.median_ms = Some(median);
        r.ratio_to_unfused = Some(ratio);
        r
    }

    /// The peers goals compare gen with every peer of the same case, steady state at both
    /// sizes and the first evaluation at the smaller one, and name the cases gen loses.
    #[test]
    fn peer_goals_name_every_case_a_peer_wins() {
        let peer = |case: &str, m: &str, who: &str, median: f64, first: f64| {
            let mut p = Measurement::new("micro", case, "", who, "").with_params(&[
                ("m".into(), m.into()),
                ("n".into(), "1000".into()),
                ("sp".into(), "1.0".into()),
            ]);
            p.median_ms = Some(median);
            p.figures.insert("first_ms".into(), first);
            p
        };
        let mut big = gen("sum_xyz", "100000", "1000", "1.0", 100.0, 2.6);
        big.figures.insert("first_ms".into(), 400.0);
        let mut small = gen("row_mv", "10000", "1000", "1.0", 10.0, 2.0);
        small.figures.insert("first_ms".into(), 60.0);
        let ms = vec![
            big,
            small,
            peer("sum_xyz", "100000", "numpy", 150.0, 150.0),
            peer("row_mv", "10000", "numpy", 12.0, 12.0),
            peer("row_mv", "10000", "jax", 11.0, 900.0),
        ];
        let goals = evaluate(&ms);
        let by = |needle: &str| {
            goals
                .iter()
                .find(|g| g.goal.contains(needle))
                .unwrap_or_else(|| panic!("no goal with {needle}"))
        };
        let large = by("at 100000 rows, dense and sparse: gen no slower than any peer (median");
        assert!(large.met, "{}", large.measured);
        assert_eq!(large.measured, "faster in all 1 comparisons");
        let steady = by("at 10000 rows, dense and sparse: gen no slower than any peer (median");
        assert!(steady.met);
        let first = by("first evaluation");
        assert!(!first.met);
        assert!(first
            .measured
            .starts_with("slower in 1 of 2: row_mv  against numpy"));
    }

    #[test]
    fn goals_follow_the_measurements() {
        let mut sum = gen("sum_xyz", "100000", "1000", "1.0", 100.0, 2.6);
        sum.same_process_fraction = Some(0.95);
        let mut row = gen("row_mv", "100000", "1000", "1.0", 100.0, 1.5);
        row.same_process_fraction = Some(0.65);
        // Another size: no goal is stated for it.
        let small = gen("magg", "1000", "1000", "1.0", 1.0, 9.0);
        let outer = vec![
            gen("outer", "20000", "20000", "0.1", 280.0, 5.0),
            gen("outer", "20000", "20000", "0.001", 4.0, 300.0),
            gen("outer", "20000", "20000", "0.0001", 0.8, 2000.0),
        ];
        let mut ms = vec![sum, row, small];
        ms.extend(outer);
        // A smaller Outer size (`--quick`): no Outer goal is stated for it.
        ms.push(gen("outer", "5000", "5000", "0.001", 4.0, 3.0));
        let goals = evaluate(&ms);
        let by = |prefix: &str| goals.iter().find(|g| g.goal.starts_with(prefix)).unwrap();
        assert!(by("sum(X*Y*Z) dense").met);
        assert_eq!(by("sum(X*Y*Z) dense").measured, "2.60×");
        assert!(!by("t(X)%*%(w*(X%*%v)) dense").met);
        assert!(by("Cell sum(X*Y*Z)").met);
        assert!(!by("Row t(X)%*%(w*(X%*%v))").met);
        assert!(goals.iter().all(|g| !g.goal.starts_with("MultiAgg")));
        assert!(by("Outer sparsity 1e-3").met);
        // Per non-zero: 280 ms / 4e7 = 7 ns, 4 ms / 4e5 = 10 ns, 0.8 ms / 4e4 = 20 ns.
        let p = by("Outer time proportional");
        assert!(p.measured.starts_with("2.86 "), "{}", p.measured);
        assert!(p.met);
        let mut slow = ms.clone();
        let at_1e4 = slow
            .iter_mut()
            .find(|m| m.params["sp"] == "0.0001" && m.params["m"] == "20000")
            .unwrap();
        at_1e4.median_ms = Some(1.2);
        assert!(
            !evaluate(&slow)
                .iter()
                .find(|g| g.goal.starts_with("Outer time proportional"))
                .unwrap()
                .met
        );
        assert!(markdown(&goals).contains("**missed**"));
        assert_eq!(markdown(&[]), "");
    }

    #[test]
    fn sparse_goals_compare_with_scipy_and_the_read_limit() {
        let mut row = gen("row_mv", "100000", "1000", "0.1", 5.0, 40.0);
        let mut scipy = row.clone();
        (scipy.system, scipy.config) = ("numpy".into(), String::new());
        scipy.median_ms = Some(9.0);
        let mut cell = gen("sum_xyz", "100000", "1000", "0.1", 30.0, 3.0);
        cell.bandwidth_fraction = Some(0.55);
        let mut magg = gen("magg", "100000", "1000", "0.1", 40.0, 3.0);
        magg.bandwidth_fraction = Some(0.6);
        // Another sparsity: no sparse goal is stated for it.
        let mut other = gen("magg", "100000", "1000", "0.01", 4.0, 3.0);
        other.bandwidth_fraction = Some(0.9);
        let goals = evaluate(&[row.clone(), scipy.clone(), cell, magg, other]);
        let by = |prefix: &str| goals.iter().find(|g| g.goal.starts_with(prefix)).unwrap();
        assert!(!by("Sparse Row").met, "{}", by("Sparse Row").measured);
        assert!(by("Sparse Row").measured.starts_with("1.80×"));
        assert!(by("Sparse Cell").met);
        assert!(!by("Sparse MultiAgg").met);
        assert_eq!(by("Sparse MultiAgg").measured, "60%");
        row.median_ms = Some(4.0);
        let goals = evaluate(&[row, scipy]);
        assert!(goals[0].met, "{:?}", goals[0]);
    }

    #[test]
    fn the_literals_goal_needs_both_the_ratio_and_few_operators() {
        let literals = |ratio: f64, compiled: f64| {
            let mut m = Measurement::new("compile", "literals", "2000", "lafuse", "gen");
            m.ratio_to_unfused = Some(ratio);
            m.figures.insert("operators_compiled".into(), compiled);
            m
        };
        let goal = |m| evaluate(&[m]).into_iter().next().unwrap();
        assert!(goal(literals(0.5, 2.0)).met);
        assert_eq!(goal(literals(0.5, 2.0)).measured, "2.00×, 2 operators");
        assert!(!goal(literals(0.25, 2.0)).met, "4× slower");
        assert!(!goal(literals(0.9, 2000.0)).met, "an operator per literal");
    }

    #[test]
    fn reuse_goals_state_ratios_and_unsupported_configurations() {
        let m = |case: &str, system: &str, config: &str, t: Option<f64>| {
            let (p, _) = crate::bench::reuse::params(case, crate::bench::Scale::Full);
            let p: Vec<(String, String)> = p
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let mut m = Measurement::new("reuse", case, "", system, config).with_params(&p);
            match t {
                Some(t) => {
                    m.times_ms = vec![t];
                    m.summarize();
                }
                None => m.fail(Status::Skipped, "error: unsupported: partial reuse"),
            }
            m
        };
        let ms = vec![
            m("hlm", "lafuse", "none", Some(600.0)),
            m("hlm", "lafuse", "full", Some(100.0)),
            m("hlm", "lafuse", "multilevel", Some(120.0)),
            m("hlm", "systemds", "reuse_hybrid", Some(300.0)),
            m("steplm_ca", "lafuse", "none", Some(100.0)),
            m("steplm_ca", "lafuse", "full", Some(90.0)),
            m("steplm_ca", "lafuse", "hybrid", None),
            m("hcv", "lafuse", "none", Some(100.0)),
            m("hcv", "lafuse", "full", Some(50.0)),
            m("hcv", "systemds", "reuse_hybrid", Some(40.0)),
        ];
        let goals = evaluate(&ms);
        let by = |prefix: &str| goals.iter().find(|g| g.goal.starts_with(prefix)).unwrap();
        assert!(by("HLM").met);
        assert_eq!(by("HLM").measured, "6.00× (full)");
        let steplm = by("steplm");
        assert!(!steplm.met);
        assert!(
            steplm.measured.contains("unsupported"),
            "{}",
            steplm.measured
        );
        assert!(
            steplm.measured.contains("full 1.11×"),
            "{}",
            steplm.measured
        );
        assert!(by("hlm (Figure 9b)").met);
        assert!(!by("hcv (Figure 9c)").met);
        // No MLogReg measurements: no goal.
        assert!(goals.iter().all(|g| !g.goal.starts_with("MLogReg")));
        // Another size (`--scale tiny`): no goal either.
        let mut tiny = ms.clone();
        for m in &mut tiny {
            m.params.insert("rows".into(), "300".into());
        }
        assert!(evaluate(&tiny).is_empty());
    }

    #[test]
    fn failed_runs_state_no_goal() {
        let mut sum = gen("sum_xyz", "100000", "1000", "1.0", 100.0, 2.6);
        sum.status = Status::Failed;
        assert!(evaluate(&[sum]).is_empty());
    }
}
