//! The `micro` suite: the fusion micro patterns of the paper's Figures 9, 10 and 13
//! (`examples/micro/*.dml`), each under every fusion policy of the scale, with dense and
//! sparse X at several row counts (Outer: at several sparsities), next to the peers.
//!
//! Each sample is one child run of the script, whose `ms_per_rep` is the mean of its inner
//! loop after a first evaluation (data generation and JIT compilation excluded); that first
//! evaluation, JIT compilation included, is timed apart (`first_ms`, as the peers' first
//! call, JAX's compilation included). The policies' runs of a case alternate. The
//! bandwidth fraction divides the bytes a fused operator must read by the median time and the
//! read bandwidth measured at start; bytes are counted as in `cli/benches/fusion.rs`. Dense cases
//! under `gen` also time a plain read of the same inputs in the same child process after each
//! evaluation (`read_ref=1`), and report the operator's speed as a fraction of that read's.

use super::results::{median, rel_diff, Measurement, Status};
use super::runner::stats_figures;
use super::Ctx;
use std::time::Instant;

/// One micro pattern: its id (script and peer case name), figure and expression.
pub struct Pattern {
    pub id: &'static str,
    pub figure: &'static str,
    pub expression: &'static str,
}

/// The patterns in report order.
pub const PATTERNS: &[Pattern] = &[
    Pattern {
        id: "sum_xyz",
        figure: "Figure 9a (Cell)",
        expression: "sum(X*Y*Z)",
    },
    Pattern {
        id: "magg",
        figure: "Figure 9b (MultiAgg)",
        expression: "sum(X*Y), sum(X*Z)",
    },
    Pattern {
        id: "row_mv",
        figure: "Figure 10a (Row)",
        expression: "t(X)%*%(w*(X%*%v))",
    },
    Pattern {
        id: "row_mm",
        figure: "Figure 10b (Row)",
        expression: "t(X)%*%(W*(X%*%V)), V of 2 columns",
    },
    Pattern {
        id: "outer",
        figure: "Figure 13 (Outer)",
        expression: "sum(X*log(U%*%t(V)+1e-15))",
    },
];

/// One micro case: a pattern at one size.
#[derive(Clone, Debug)]
pub struct MicroCase {
    pub pattern: &'static str,
    pub variant: String,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub sp: f64,
}

impl MicroCase {
    /// The script arguments that define the data (the same for lafuse, SystemDS and Python).
    pub fn params(&self) -> Vec<(String, String)> {
        let mut p = vec![
            ("m".to_string(), self.m.to_string()),
            ("n".to_string(), self.n.to_string()),
            ("sp".to_string(), format_sp(self.sp)),
        ];
        if self.pattern == "outer" {
            p.push(("k".to_string(), self.k.to_string()));
        }
        p
    }

    /// Bytes a fused operator must read (dense: 8 per cell; CSR: 12 per non-zero plus row
    /// pointers). `sum_xyz` at sparsity below 1 has all three inputs CSR. A sparse-safe scan
    /// of dense side inputs at X's non-zeros (`magg`) reads the 64-byte lines those touch: a
    /// line of 8 cells holds a non-zero with probability `1 - (1 - sp)^8`. Outer reads the
    /// rows of `U` and `V` that X's non-zeros meet, the expected number of non-empty rows and
    /// columns of X.
    pub fn bytes_read(&self) -> f64 {
        let (m, n, k) = (self.m as f64, self.n as f64, self.k as f64);
        let nnz = m * n * self.sp;
        let x = if self.sp >= 1.0 {
            m * n * 8.0
        } else {
            nnz * 12.0 + (m + 1.0) * 8.0
        };
        match self.pattern {
            "sum_xyz" | "magg" if self.sp >= 1.0 => 3.0 * x,
            "sum_xyz" => 3.0 * x,
            "magg" => {
                let lines_met = m * (n / 8.0).ceil() * (1.0 - (1.0 - self.sp).powi(8));
                x + 2.0 * lines_met * 64.0
            }
            "row_mv" => x + n * 8.0 + m * 8.0,
            "row_mm" => x + n * 16.0 + m * 16.0,
            _ => {
                let sp = self.sp.min(1.0);
                let rows_met = m * (1.0 - (1.0 - sp).powf(n));
                let cols_met = n * (1.0 - (1.0 - sp).powf(m));
                x + (rows_met + cols_met) * k * 8.0
            }
        }
    }

    /// Bytes of the plain read the script times after the operator with `read_ref=1` (`sum`
    /// of each input the pattern reads as a whole: `X` for Row, `X`, `Y`, `Z` for Cell and
    /// MultiAgg); dense cases only.
    pub fn read_ref_bytes(&self) -> Option<f64> {
        let x = self.m as f64 * self.n as f64 * 8.0;
        match self.pattern {
            _ if self.sp < 1.0 => None,
            "sum_xyz" | "magg" => Some(3.0 * x),
            "row_mv" | "row_mm" => Some(x),
            _ => None,
        }
    }
}

/// `1.0`, `0.01`, `0.0001`: plain decimals (DML and Python both parse them).
pub fn format_sp(sp: f64) -> String {
    let s = format!("{sp}");
    if s.contains('.') || s.contains('e') {
        s
    } else {
        format!("{s}.0")
    }
}

/// The cases of the scale, in run order.
pub fn cases(ctx: &Ctx) -> Vec<MicroCase> {
    let s = &ctx.sizes;
    let mut out = Vec::new();
    for p in PATTERNS.iter().filter(|p| p.id != "outer") {
        let mut densities = vec![1.0];
        densities.extend(&s.micro_sparsities);
        for &sp in &densities {
            for &m in &s.micro_rows {
                let density = if sp >= 1.0 {
                    "dense".to_string()
                } else {
                    format!("sp={}", format_sp(sp))
                };
                out.push(MicroCase {
                    pattern: p.id,
                    variant: format!("{density} {m}x{}", s.micro_cols),
                    m,
                    n: s.micro_cols,
                    k: 0,
                    sp,
                });
            }
        }
    }
    for &sp in &s.outer_sparsities {
        out.push(MicroCase {
            pattern: "outer",
            variant: format!("sp={sp:e} {}^2 k={}", s.outer_dim, s.outer_rank),
            m: s.outer_dim,
            n: s.outer_dim,
            k: s.outer_rank,
            sp,
        });
    }
    out.into_iter()
        .filter(|c| ctx.selected(&format!("{} {}", c.pattern, c.variant)))
        .collect()
}

/// Inner repetitions of a fused Outer evaluation: at low sparsity one takes a few
/// milliseconds (against seconds unfused), too short for one timing to be stable on a shared
/// machine, so the script repeats it until about as much work as at sparsity 1e-2 is timed
/// (at most 50 repetitions, never fewer than the unfused policy's).
fn outer_fused_inner_reps(unfused_reps: usize, sp: f64) -> usize {
    let scale = if sp > 0.0 { (1e-2 / sp).round() } else { 50.0 };
    (scale.min(50.0) as usize).max(unfused_reps).max(1)
}

/// Runs the suite.
pub fn run(ctx: &Ctx) -> Vec<Measurement> {
    let cases = cases(ctx);
    let per_case = ctx.sizes.micro_policies.len()
        + ctx.peers.python_peers()
        + 2 * usize::from(ctx.peers.has_systemds());
    ctx.plan(cases.len() * per_case);
    let mut out = Vec::new();
    for case in &cases {
        out.extend(run_case(ctx, case));
    }
    out
}

fn run_case(ctx: &Ctx, case: &MicroCase) -> Vec<Measurement> {
    let label = format!("{} {}", case.pattern, case.variant);
    let params = case.params();
    let inner = if case.pattern == "outer" {
        ctx.sizes.outer_inner_reps
    } else {
        ctx.sizes.micro_inner_reps
    };
    // SystemDS runs every policy with the base repetitions.
    let mut base_nvargs = params.clone();
    base_nvargs.push(("reps".into(), inner.to_string()));
    let script = ctx.script(&format!("micro/{}.dml", case.pattern));
    // The policies' runs alternate (each policy's first run, then each one's second, ...):
    // this machine's memory speed changes over seconds, and alternating gives every policy the
    // same share of fast and slow spells, so that the ratios between policies hold.
    struct PolicyRuns {
        policy: &'static str,
        nvargs: Vec<(String, String)>,
        read_ref: bool,
        read_ms: Vec<f64>,
        /// A dense Outer case under gen: the plain multiply's time after each run.
        multiply_ref: bool,
        multiply_ms: Vec<f64>,
        /// Each run's first evaluation, JIT compilation included.
        first_ms: Vec<f64>,
        elapsed_s: f64,
        finished: bool,
        m: Measurement,
    }
    let mut runs: Vec<PolicyRuns> = ctx
        .sizes
        .micro_policies
        .iter()
        .map(|&policy| {
            let inner = if case.pattern == "outer" && policy != "none" {
                outer_fused_inner_reps(inner, case.sp)
            } else {
                inner
            };
            let mut nvargs = params.clone();
            nvargs.push(("reps".into(), inner.to_string()));
            let read_ref = policy == "gen" && case.read_ref_bytes().is_some();
            if read_ref {
                nvargs.push(("read_ref".into(), "1".into()));
            }
            let mut m = Measurement::new("micro", case.pattern, &case.variant, "lafuse", policy)
                .with_params(&params);
            m.figures.insert("inner_reps".into(), inner as f64);
            if let Err(e) = &script {
                m.fail(Status::Failed, e.clone());
            }
            PolicyRuns {
                policy,
                nvargs,
                read_ref,
                read_ms: Vec::new(),
                multiply_ref: policy == "gen" && case.pattern == "outer" && case.sp >= 1.0,
                multiply_ms: Vec::new(),
                first_ms: Vec::new(),
                elapsed_s: 0.0,
                finished: script.is_err(),
                m,
            }
        })
        .collect();
    // The Python peers' runs, one timed evaluation per round, merged per peer, and each
    // round's first call (JAX's compilation included) per peer.
    let mut python: Vec<Measurement> = Vec::new();
    let mut python_first: Vec<(String, f64)> = Vec::new();
    for rep in 0..ctx.sizes.micro_reps.max(1) {
        if let Ok(script) = &script {
            for r in runs.iter_mut().filter(|r| !r.finished) {
                ctx.step(&format!("{label} lafuse {} (run {})", r.policy, rep + 1));
                let started = Instant::now();
                let (run, stats) = ctx.runner.run_lafuse(script, r.policy, &r.nvargs);
                r.elapsed_s += started.elapsed().as_secs_f64();
                if let Some(why) = run.failure {
                    r.m.fail(Status::Failed, why);
                    r.finished = true;
                    continue;
                }
                let Some(t) = run.number("ms_per_rep") else {
                    r.m.fail(Status::Failed, "the script printed no `ms_per_rep` line");
                    r.finished = true;
                    continue;
                };
                r.m.times_ms.push(t);
                r.m.result = run.number("result");
                r.first_ms.extend(run.number("first_ms"));
                r.read_ms
                    .extend(run.number("read_ms_per_rep").filter(|_| r.read_ref));
                if r.multiply_ref {
                    // Right after the run, so that both meet the machine in the same state.
                    ctx.step(&format!("{label} plain multiply U %*% t(V)"));
                    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
                    r.multiply_ms.push(super::machine::multiply_reference_ms(
                        case.m, case.n, case.k, threads, 2,
                    ));
                }
                if let Some(stats) = &stats {
                    r.m.figures.extend(stats_figures(stats));
                }
                r.finished = r.elapsed_s > ctx.sizes.micro_case_budget_s;
            }
        }
        // The peers take their turn in every round, between lafuse's runs, so that the
        // machine's drifting memory speed meets them as it meets lafuse.
        if ctx.peers.has_python() {
            ctx.step(&format!("{label} python peers (run {})", rep + 1));
            for m in ctx.peers.python_case(
                &ctx.runner,
                "micro",
                case.pattern,
                &case.variant,
                &params,
                1,
            ) {
                if let Some(&t) = m.figures.get("first_ms") {
                    python_first.push((m.system.clone(), t));
                }
                merge_peer_run(&mut python, m);
            }
        }
    }
    let mut out = Vec::new();
    for mut r in runs {
        if let Some(t) = median(r.read_ms) {
            r.m.figures.insert("read_ms_per_rep".into(), t);
        }
        if let Some(t) = median(r.multiply_ms) {
            r.m.figures.insert("multiply_ms".into(), t);
        }
        if let Some(t) = median(r.first_ms) {
            r.m.figures.insert("first_ms".into(), t);
        }
        finish(ctx, case, &mut r.m);
        ctx.done(&r.m);
        out.push(r.m);
    }
    for mut m in python {
        let firsts: Vec<f64> = python_first
            .iter()
            .filter(|(system, _)| *system == m.system)
            .map(|&(_, t)| t)
            .collect();
        match median(firsts) {
            Some(t) => m.figures.insert("first_ms".into(), t),
            None => m.figures.remove("first_ms"),
        };
        finish(ctx, case, &mut m);
        ctx.done(&m);
        out.push(m);
    }
    if let Ok(script) = &script {
        for config in ["codegen", "base"] {
            ctx.step(&format!("{label} systemds {config}"));
            let Some(run) = ctx
                .peers
                .systemds_run(&ctx.runner, script, config, &base_nvargs)
            else {
                continue;
            };
            let mut m = Measurement::new("micro", case.pattern, &case.variant, "systemds", config)
                .with_params(&params);
            m.figures.insert("inner_reps".into(), inner as f64);
            match (run.failure.clone(), run.number("ms_per_rep")) {
                (Some(why), _) => m.fail(Status::Failed, format!("failed: {why}")),
                (None, None) => m.fail(Status::Failed, "SystemDS printed no `ms_per_rep` line"),
                (None, Some(t)) => {
                    m.times_ms.push(t);
                    m.result = run.number("result");
                    if let Some(first) = run.number("first_ms") {
                        m.figures.insert("first_ms".into(), first);
                    }
                }
            }
            finish(ctx, case, &mut m);
            ctx.done(&m);
            out.push(m);
        }
    }
    flag_result_disagreement(&mut out);
    out
}

/// Median, spread, bytes and bandwidth fractions.
/// Adds one round's measurement of a peer to that peer's (the first round's is kept as it is,
/// later rounds add their times; a failed round fails the peer, with its reason).
fn merge_peer_run(runs: &mut Vec<Measurement>, m: Measurement) {
    match runs
        .iter_mut()
        .find(|r| r.system == m.system && r.config == m.config)
    {
        None => runs.push(m),
        Some(r) if m.status != Status::Ok && r.status == Status::Ok => {
            r.fail(m.status, m.error.unwrap_or_default())
        }
        Some(r) => {
            r.times_ms.extend(m.times_ms);
            r.result = r.result.or(m.result);
        }
    }
}

fn finish(ctx: &Ctx, case: &MicroCase, m: &mut Measurement) {
    m.summarize();
    let bytes = case.bytes_read();
    m.bytes_read = Some(bytes);
    if let (Status::Ok, Some(t)) = (m.status, m.median_ms) {
        if t > 0.0 && ctx.machine.read_bandwidth_gbs > 0.0 {
            m.bandwidth_fraction =
                Some(bytes / (t * 1e-3) / (ctx.machine.read_bandwidth_gbs * 1e9));
        }
        let read = m.figures.get("read_ms_per_rep").copied();
        if let (Some(tr), Some(rb)) = (read, case.read_ref_bytes()) {
            if t > 0.0 && tr > 0.0 {
                m.same_process_fraction = Some((bytes / t) / (rb / tr));
            }
        }
    }
}

/// Flags lafuse and SystemDS results that disagree with lafuse's unfused result (the scripts
/// generate the same data in both; the Python peers generate their own).
fn flag_result_disagreement(ms: &mut [Measurement]) {
    let Some(base) = ms
        .iter()
        .find(|m| m.system == "lafuse" && m.config == "none")
        .and_then(|m| m.result)
    else {
        return;
    };
    for m in ms
        .iter_mut()
        .filter(|m| m.system == "lafuse" || m.system == "systemds")
    {
        if let Some(r) = m.result {
            let d = rel_diff(r, base);
            // Summation order differs between plans; 1e-6 is far above that rounding.
            if d > 1e-6 {
                m.notes.push(format!(
                    "result {r} differs from unfused {base} (relative {d:.2e})"
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peers_rounds_merge_into_one_measurement_and_a_failed_round_fails_it() {
        let run = |system: &str, t: f64| {
            let mut m = Measurement::new("micro", "outer", "v", system, "");
            m.times_ms.push(t);
            m
        };
        let mut runs = Vec::new();
        merge_peer_run(&mut runs, run("numpy", 3.0));
        merge_peer_run(&mut runs, run("jax", 5.0));
        merge_peer_run(&mut runs, run("numpy", 4.0));
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].times_ms, vec![3.0, 4.0]);
        let mut failed = run("jax", 0.0);
        failed.times_ms.clear();
        failed.fail(Status::Failed, "out of memory");
        merge_peer_run(&mut runs, failed);
        assert_eq!(runs[1].status, Status::Failed);
        assert_eq!(runs[1].error.as_deref(), Some("out of memory"));
    }

    #[test]
    fn fused_outer_repeats_short_evaluations_more() {
        assert_eq!(outer_fused_inner_reps(1, 1e-1), 1);
        assert_eq!(outer_fused_inner_reps(1, 1e-2), 1);
        assert_eq!(outer_fused_inner_reps(1, 1e-3), 10);
        assert_eq!(outer_fused_inner_reps(1, 1e-4), 50);
        assert_eq!(outer_fused_inner_reps(2, 1e-1), 2);
        assert_eq!(outer_fused_inner_reps(1, 0.0), 50);
    }

    #[test]
    fn bytes_follow_the_fusion_bench() {
        let dense = MicroCase {
            pattern: "sum_xyz",
            variant: String::new(),
            m: 1000,
            n: 1000,
            k: 0,
            sp: 1.0,
        };
        assert_eq!(dense.bytes_read(), 3.0 * 8e6);
        let sparse = MicroCase {
            sp: 0.01,
            ..dense.clone()
        };
        let x = 1e4 * 12.0 + 1001.0 * 8.0;
        assert_eq!(sparse.bytes_read(), 3.0 * x);
        let magg = MicroCase {
            pattern: "magg",
            ..sparse.clone()
        };
        // 125 lines a row, each met with probability 1 - 0.99^8 = 0.0773.
        let lines = 1000.0 * 125.0 * (1.0 - 0.99f64.powi(8));
        assert!((magg.bytes_read() / (x + 2.0 * 64.0 * lines) - 1.0).abs() < 1e-12);
        let outer = MicroCase {
            pattern: "outer",
            k: 10,
            ..sparse
        };
        assert_eq!(outer.params().len(), 4);
        // Every row and column of a 1000² X at 1e-2 has a non-zero but for about e^-10.
        let all_rows = 1e4 * 12.0 + 1001.0 * 8.0 + 2000.0 * 10.0 * 8.0;
        assert!((outer.bytes_read() / all_rows - 1.0).abs() < 1e-3);
        let outer_1e4 = MicroCase {
            m: 20000,
            n: 20000,
            sp: 1e-4,
            ..outer.clone()
        };
        // Expected non-empty rows: 20000 (1 - (1 - 1e-4)^20000) = 20000 (1 - e^-2) = 17293.
        let met = 2.0 * 17293.3 * 10.0 * 8.0;
        let x = 4e4 * 12.0 + 20001.0 * 8.0;
        assert!((outer_1e4.bytes_read() / (x + met) - 1.0).abs() < 1e-3);
        assert_eq!(format_sp(1.0), "1.0");
        assert_eq!(format_sp(0.0001), "0.0001");
    }

    #[test]
    fn the_same_process_read_covers_the_dense_inputs_read_whole() {
        let case = |pattern, sp| MicroCase {
            pattern,
            variant: String::new(),
            m: 1000,
            n: 100,
            k: 0,
            sp,
        };
        assert_eq!(case("sum_xyz", 1.0).read_ref_bytes(), Some(3.0 * 8e5));
        assert_eq!(case("magg", 1.0).read_ref_bytes(), Some(3.0 * 8e5));
        assert_eq!(case("row_mv", 1.0).read_ref_bytes(), Some(8e5));
        assert_eq!(case("row_mm", 1.0).read_ref_bytes(), Some(8e5));
        assert_eq!(case("row_mm", 0.01).read_ref_bytes(), None);
        assert_eq!(case("outer", 1.0).read_ref_bytes(), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0]), Some(2.5));
        assert_eq!(median(Vec::new()), None);
    }
}
