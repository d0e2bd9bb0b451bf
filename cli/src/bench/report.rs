//! The reports of a run: `report.md` (machine, sizes, peers, one table per suite, flags,
//! failures, figures), `results.csv` and `results.json` (every measurement with all
//! repetitions) and the SVG figures of [`super::plot`].

use super::goals::Goal;
use super::results::{Measurement, Status};
use super::{BenchOptions, Ctx};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The columns of `results.csv`.
pub const CSV_HEADER: &[&str] = &[
    "suite",
    "case",
    "variant",
    "system",
    "config",
    "status",
    "median_ms",
    "min_ms",
    "max_ms",
    "spread",
    "reps",
    "times_ms",
    "ratio_to_unfused",
    "bytes_read",
    "bandwidth_fraction",
    "same_process_fraction",
    "result",
    "objective",
    "iterations",
    "check",
    "params",
    "figures",
    "notes",
    "error",
];

/// Writes every report file into `out`; returns their names.
pub fn write_all(
    out: &Path,
    ctx: &Ctx,
    options: &BenchOptions,
    ms: &[Measurement],
    goals: &[Goal],
    wall_s: f64,
) -> std::io::Result<Vec<String>> {
    let (mut figures, figure_errors) = super::plot::write_figures(out, ms);
    std::fs::write(out.join("results.csv"), csv_text(ms)?)?;
    let doc = serde_json::json!({
        "generated": super::utc_now(),
        "lafuse_version": env!("CARGO_PKG_VERSION"),
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "suite": options.suite.name(),
        "filter": options.filter,
        "wall_s": wall_s,
        "machine": ctx.machine,
        "sizes": ctx.sizes,
        "peers": ctx.peers.status,
        "figures": figures,
        "figure_errors": figure_errors,
        "measurements": ms,
    });
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&doc).map_err(std::io::Error::other)? + "\n",
    )?;
    std::fs::write(
        out.join("report.md"),
        markdown(ctx, options, ms, goals, wall_s, &figures, &figure_errors),
    )?;
    let mut files = vec![
        "report.md".to_string(),
        "results.csv".to_string(),
        "results.json".to_string(),
    ];
    files.append(&mut figures);
    Ok(files)
}

fn opt(v: Option<f64>) -> String {
    v.map_or(String::new(), |v| format!("{v}"))
}

/// `results.csv`: one row per measurement; lists are space-separated, maps `k=v;k=v`.
pub fn csv_text(ms: &[Measurement]) -> std::io::Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(CSV_HEADER).map_err(std::io::Error::other)?;
    for m in ms {
        let times: Vec<String> = m.times_ms.iter().map(|t| t.to_string()).collect();
        let params: Vec<String> = m.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let figures: Vec<String> = m.figures.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let row = vec![
            m.suite.clone(),
            m.case.clone(),
            m.variant.clone(),
            m.system.clone(),
            m.config.clone(),
            m.status.name().to_string(),
            opt(m.median_ms),
            opt(m.min_ms),
            opt(m.max_ms),
            opt(m.spread),
            m.times_ms.len().to_string(),
            times.join(" "),
            opt(m.ratio_to_unfused),
            opt(m.bytes_read),
            opt(m.bandwidth_fraction),
            opt(m.same_process_fraction),
            opt(m.result),
            opt(m.objective),
            m.iterations.map_or(String::new(), |i| i.to_string()),
            m.check.clone().unwrap_or_default(),
            params.join(";"),
            figures.join(";"),
            m.notes.join(" | "),
            m.error.clone().unwrap_or_default(),
        ];
        w.write_record(&row).map_err(std::io::Error::other)?;
    }
    w.into_inner()
        .map_err(|e| std::io::Error::other(e.to_string()))
}

/// Milliseconds with 3 significant digits at least.
fn ms_text(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// A markdown cell: no pipes or newlines.
fn cell(s: &str) -> String {
    s.replace('|', "/").replace('\n', " ")
}

fn count(v: Option<&f64>) -> String {
    match v {
        Some(v) if *v >= 1e15 => format!("{v:.2e}"),
        Some(v) if v.fract() == 0.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.3}"),
        None => String::new(),
    }
}

/// The report's system/config order: lafuse's policies, then peers by name.
fn who_rank(m: &Measurement) -> (usize, String) {
    let rank = match (m.system.as_str(), m.config.as_str()) {
        ("lafuse", "none") => 0,
        ("lafuse", "fa") => 1,
        ("lafuse", "fnr") => 2,
        ("lafuse", "gen") => 3,
        ("systemds", "codegen") => 4,
        ("systemds", "base") => 5,
        _ => 6,
    };
    (rank, m.who())
}

/// A table's columns (the systems, ranked) and rows (the cases: case, variant).
type Columns = Vec<(usize, String)>;
type Rows = Vec<(String, String)>;

/// A table's columns, the systems of `ms` in report order, and its rows, their cases in the
/// order first met.
fn columns_and_rows(ms: &[&Measurement]) -> (Columns, Rows) {
    let mut whos: Vec<(usize, String)> = ms.iter().map(|m| who_rank(m)).collect();
    whos.sort();
    whos.dedup();
    let mut cases: Vec<(String, String)> = Vec::new();
    for m in ms {
        let key = (m.case.clone(), m.variant.clone());
        if !cases.contains(&key) {
            cases.push(key);
        }
    }
    (whos, cases)
}

/// One row per case: each system's median (lafuse gen with its spread), the others also as a
/// ratio to lafuse gen (>1: lafuse gen is faster), gen's speedup over unfused and its fraction
/// of the read bandwidth.
fn comparison_table(text: &mut String, ms: &[&Measurement], with_bandwidth: bool) {
    let (whos, cases) = columns_and_rows(ms);
    let _ = write!(text, "| case |");
    for (_, w) in &whos {
        let _ = write!(text, " {w} |");
    }
    let _ = write!(text, " gen vs unfused |");
    if with_bandwidth {
        let _ = write!(
            text,
            " gen read-bandwidth fraction | gen vs a read of its inputs, same process |"
        );
    }
    text.push('\n');
    text.push_str(&"|---".repeat(whos.len() + 2 + 2 * usize::from(with_bandwidth)));
    text.push_str("|\n");
    for (case, variant) in &cases {
        let row: Vec<&&Measurement> = ms
            .iter()
            .filter(|m| &m.case == case && &m.variant == variant)
            .collect();
        let gen = row
            .iter()
            .find(|m| m.system == "lafuse" && m.config == "gen");
        let gen_ms = gen
            .and_then(|g| g.median_ms)
            .filter(|_| gen.is_some_and(|g| g.status == Status::Ok));
        let _ = write!(text, "| {case} {variant} |");
        for (_, w) in &whos {
            let c = match row.iter().find(|m| &m.who() == w) {
                None => String::new(),
                Some(m) if m.status != Status::Ok => m.status.name().to_string(),
                Some(m) => match m.median_ms {
                    None => String::new(),
                    Some(t) => {
                        let spread = m
                            .spread
                            .filter(|_| m.times_ms.len() > 1)
                            .map_or(String::new(), |s| format!(" ±{:.0}%", s * 50.0));
                        match gen_ms {
                            Some(g) if !(m.system == "lafuse" && m.config == "gen") && g > 0.0 => {
                                format!("{}{spread} ({:.2}×)", ms_text(t), t / g)
                            }
                            _ => format!("{}{spread}", ms_text(t)),
                        }
                    }
                },
            };
            let _ = write!(text, " {c} |");
        }
        let speedup = gen
            .and_then(|g| g.ratio_to_unfused)
            .map_or(String::new(), |r| format!("{r:.2}×"));
        let _ = write!(text, " {speedup} |");
        if with_bandwidth {
            let pct = |f: Option<f64>| f.map_or(String::new(), |f| format!("{:.0}%", f * 100.0));
            let bw = pct(gen.and_then(|g| g.bandwidth_fraction));
            let same = pct(gen.and_then(|g| g.same_process_fraction));
            let _ = write!(text, " {bw} | {same} |");
        }
        text.push('\n');
    }
}

/// One row per case: each system's first evaluation in ms (lafuse: the script's first, JIT
/// compilation included; a Python peer: its first call, JAX's compilation included), the
/// others also as a ratio to lafuse gen's. Empty when no measurement has one.
fn first_evaluation_table(text: &mut String, ms: &[&Measurement]) {
    let first = |m: &Measurement| {
        m.figures
            .get("first_ms")
            .copied()
            .filter(|_| m.status == Status::Ok)
    };
    let with: Vec<&Measurement> = ms.iter().copied().filter(|m| first(m).is_some()).collect();
    if with.is_empty() {
        return;
    }
    let (whos, cases) = columns_and_rows(&with);
    let _ = write!(
        text,
        "First evaluation, ms (JIT compilation included):\n\n| case |"
    );
    for (_, w) in &whos {
        let _ = write!(text, " {w} |");
    }
    text.push('\n');
    text.push_str(&"|---".repeat(whos.len() + 1));
    text.push_str("|\n");
    for (case, variant) in &cases {
        let row: Vec<&&Measurement> = with
            .iter()
            .filter(|m| &m.case == case && &m.variant == variant)
            .collect();
        let gen = row
            .iter()
            .find(|m| m.system == "lafuse" && m.config == "gen")
            .and_then(|m| first(m));
        let _ = write!(text, "| {case} {variant} |");
        for (_, w) in &whos {
            let c = match row.iter().find(|m| &m.who() == w).and_then(|m| first(m)) {
                None => String::new(),
                Some(t) => match gen {
                    Some(g) if g > 0.0 && w != "lafuse gen" => {
                        format!("{} ({:.2}×)", ms_text(t), t / g)
                    }
                    _ => ms_text(t),
                },
            };
            let _ = write!(text, " {c} |");
        }
        text.push('\n');
    }
}

fn markdown(
    ctx: &Ctx,
    options: &BenchOptions,
    ms: &[Measurement],
    goals: &[Goal],
    wall_s: f64,
    figures: &[String],
    figure_errors: &[String],
) -> String {
    let mut t = String::new();
    let m = &ctx.machine;
    let _ = writeln!(t, "# lafuse bench report\n");
    let _ = writeln!(
        t,
        "Generated {} by lafuse {} (`{}`), suite `{}`{}, {:.0} s wall time.\n",
        super::utc_now(),
        env!("CARGO_PKG_VERSION"),
        std::env::args().collect::<Vec<_>>().join(" "),
        options.suite.name(),
        if options.filter.is_empty() {
            String::new()
        } else {
            format!(", filter {}", options.filter_text())
        },
        wall_s
    );
    let _ = writeln!(t, "## Machine\n");
    let _ = writeln!(
        t,
        "| CPU | cores | memory | available at start | read bandwidth (measured at start) | OS |"
    );
    let _ = writeln!(t, "|---|---|---|---|---|---|");
    let _ = writeln!(
        t,
        "| {} | {} | {} | {} | {:.2} GB/s (plain sum over {} MiB, best of 9) | {} |\n",
        cell(&m.cpu),
        m.cores,
        super::machine::gib(m.memory_total_bytes),
        super::machine::gib(m.memory_available_bytes),
        m.read_bandwidth_gbs,
        m.bandwidth_array_bytes >> 20,
        m.os
    );
    let _ = writeln!(t, "## Sizes\n\n```\n{}\n```\n", ctx.sizes.describe());
    let _ = writeln!(t, "## Peers\n\n| peer | status | detail |\n|---|---|---|");
    for p in &ctx.peers.status {
        let _ = writeln!(
            t,
            "| {} | {} | {} |",
            p.name,
            if p.available { "measured" } else { "skipped" },
            cell(&p.detail)
        );
    }
    t.push('\n');

    let micro: Vec<&Measurement> = ms.iter().filter(|m| m.suite == "micro").collect();
    if !micro.is_empty() {
        let _ = writeln!(
            t,
            "## Micro patterns (Figures 9, 10, 13)\n\nMedian ms per evaluation over the runs \
             (each run the mean of the script's inner loop; ±: half the range as a percentage \
             of the median). Other columns also give their time ÷ lafuse gen's (above 1: \
             lafuse gen is faster). Read-bandwidth fraction: bytes a fused operator must read ÷ \
             time ÷ the read bandwidth measured at start (above 100%: the inputs fit in the \
             caches). Same process: the same bytes ÷ time, divided by the speed of a plain \
             `sum` over the same inputs timed in the same process after each evaluation (dense \
             cases; this machine's memory speed changes over seconds, and the policies' runs \
             alternate for the same reason). \
             Python peers generate their own data of the same shape.\n"
        );
        for p in super::micro::PATTERNS {
            let sel: Vec<&Measurement> = micro.iter().copied().filter(|m| m.case == p.id).collect();
            if sel.is_empty() {
                continue;
            }
            let _ = writeln!(t, "### {} — {}\n", p.figure, p.expression);
            comparison_table(&mut t, &sel, true);
            t.push('\n');
            let before = t.len();
            first_evaluation_table(&mut t, &sel);
            if t.len() > before {
                t.push('\n');
            }
        }
    }

    let compile: Vec<&Measurement> = ms.iter().filter(|m| m.suite == "compile").collect();
    if !compile.is_empty() {
        let _ = writeln!(
            t,
            "## Compilation (Table 3) and plans evaluated (Figure 15)\n\nPer script under `gen` \
             at {}: operators compiled and operator-cache hits, JIT and fusion-planning time, \
             compile and total time of the run. Plans: what the cost-based search costed over \
             all blocks (gen, with partitioning and pruning), the same search with cost and \
             structural pruning and the plan cache off (budgeted per partition), and the \
             exhaustive counts Σ2^|M_i| (partitioned) and 2^Σ|M_i| (not partitioned).\n",
            compile[0].variant
        );
        let _ = writeln!(
            t,
            "| script | operators compiled | cache hits | codegen ms | planning ms | compile ms | total ms | partitions | points | plans evaluated (gen) | skipped by cost | skipped by structure | unpruned run | Σ 2^(points of a partition) | 2^(all points) |"
        );
        let _ = writeln!(t, "{}|", "|---".repeat(15));
        for m in &compile {
            if m.status != Status::Ok {
                let _ = writeln!(
                    t,
                    "| {} | {}: {} |{}",
                    m.case,
                    m.status.name(),
                    cell(
                        m.error
                            .as_deref()
                            .unwrap_or("")
                            .lines()
                            .next()
                            .unwrap_or("")
                    ),
                    " |".repeat(13)
                );
                continue;
            }
            let f = |k: &str| count(m.figures.get(k));
            let _ = writeln!(
                t,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                m.case,
                f("operators_compiled"),
                f("operator_cache_hits"),
                f("codegen_ms"),
                f("fusion_planning_ms"),
                f("compile_ms"),
                f("total_ms"),
                f("partitions"),
                f("interesting_points"),
                f("plans_evaluated"),
                f("plans_skipped_by_cost"),
                f("plans_skipped_by_structure"),
                f("plans_evaluated_unpruned"),
                f("plans_partitioned_exhaustive"),
                f("plans_unpartitioned_exhaustive"),
            );
        }
        t.push('\n');
    }

    let algs: Vec<&Measurement> = ms.iter().filter(|m| m.suite == "algorithms").collect();
    if !algs.is_empty() {
        let _ = writeln!(
            t,
            "## Algorithms (Tables 4 and 5)\n\nThe scripts' own `time_ms` (median over runs; data \
             generation and reading excluded). Other columns also give their time ÷ lafuse \
             gen's.\n"
        );
        comparison_table(&mut t, &algs, false);
        let _ = writeln!(
            t,
            "\n| algorithm | data | system | time ms | objective | iterations | check | predicted cost (s) |\n|---|---|---|---|---|---|---|---|"
        );
        let mut sorted = algs.clone();
        sorted.sort_by_key(|m| (m.case.clone(), m.variant.clone(), who_rank(m)));
        for m in sorted {
            let _ = writeln!(
                t,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                m.case,
                m.variant,
                m.who(),
                if m.status == Status::Ok {
                    m.median_ms.map_or(String::new(), ms_text)
                } else {
                    m.status.name().to_string()
                },
                opt(m.objective),
                m.iterations.map_or(String::new(), |i| i.to_string()),
                cell(m.check.as_deref().unwrap_or("")),
                m.figures
                    .get("predicted_cost_s")
                    .map_or(String::new(), |c| format!("{c:.4e}"))
            );
        }
        t.push('\n');
    }

    t.push_str(&super::reuse::markdown(ms));

    t.push_str(&super::goals::markdown(goals));

    let flagged: Vec<&Measurement> = ms.iter().filter(|m| !m.notes.is_empty()).collect();
    let _ = writeln!(t, "## Flags\n");
    if flagged.is_empty() {
        let _ = writeln!(
            t,
            "None: results agree across policies, and no exception was seen.\n"
        );
    }
    for m in flagged {
        for n in &m.notes {
            let _ = writeln!(t, "- {} {} {}: {}", m.suite, m.label(), m.who(), cell(n));
        }
    }
    t.push('\n');

    let failed: Vec<&Measurement> = ms.iter().filter(|m| m.status != Status::Ok).collect();
    if !failed.is_empty() {
        let _ = writeln!(t, "## Failed and skipped measurements\n");
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for m in failed {
            let e = m.error.as_deref().unwrap_or("");
            let e: String = e.chars().take(400).collect();
            *seen.entry(e.clone()).or_default() += 1;
            let _ = writeln!(
                t,
                "- {} {} {}: {}: {}",
                m.suite,
                m.label(),
                m.who(),
                m.status.name(),
                cell(&e)
            );
        }
        t.push('\n');
    }

    if !figures.is_empty() || !figure_errors.is_empty() {
        let _ = writeln!(t, "## Figures\n");
        for f in figures {
            let _ = writeln!(t, "![{f}]({f})\n");
        }
        for e in figure_errors {
            let _ = writeln!(t, "- not drawn: {}", cell(e));
        }
    }
    let _ = writeln!(
        t,
        "\nEvery measurement with all repetitions: `results.csv`, `results.json`."
    );
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_has_header_and_one_row_per_measurement() {
        let mut m = Measurement::new("micro", "sum_xyz", "dense 10x10", "lafuse", "gen");
        m.times_ms = vec![1.0, 2.0];
        m.summarize();
        m.notes.push("a, \"quoted\" note".into());
        let text = String::from_utf8(csv_text(&[m.clone(), m]).unwrap()).unwrap();
        let mut r = csv::Reader::from_reader(text.as_bytes());
        assert_eq!(r.headers().unwrap().len(), CSV_HEADER.len());
        let rows: Vec<_> = r.records().map(|r| r.unwrap()).collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(&rows[0][11], "1 2");
        assert_eq!(count(Some(&3.0)), "3");
        assert_eq!(ms_text(0.5), "0.5000");
    }
}
