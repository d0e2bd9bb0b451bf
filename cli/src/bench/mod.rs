//! `lafuse bench`: the paper's experiments scaled to the machine at hand, with peers side by
//! side and reports written into one folder.
//!
//! Suites:
//! * `micro` ([`micro`]): the fusion micro patterns of Figures 9, 10 and 13 under each fusion
//!   policy, as median and spread of repetitions, ratio to unfused, fraction of the read
//!   bandwidth measured at start, and (dense cases under `gen`) fraction of a plain read of the
//!   same inputs timed in the same process after each evaluation;
//! * `compile` ([`compile`]): operator cache, JIT and optimizer time per script (Table 3) and
//!   the plans the cost-based search evaluates with and without partitioning and pruning
//!   (Figure 15);
//! * `algorithms` ([`algorithms`]): the ML algorithm scripts under `none`, `fa`, `fnr` and
//!   `gen` (Tables 4 and 5), with objective agreement and the cost model's prediction where
//!   `gen` loses;
//! * `reuse` ([`reuse`]): LIMA's lineage-reuse experiments (Figures 7-9: partial and
//!   multi-level reuse, eviction policies, the pipelines HL2SVM, HLM, HCV, ENS and PCALM)
//!   under each reuse configuration against no reuse, and against SystemDS's `reuse_hybrid`.
//!
//! Every measurement runs a DML script in a child process of the lafuse binary itself
//! ([`runner`]), so runs never share memory or compiled operators. Peers ([`peers`]) are
//! optional: numpy, numexpr and JAX through `bench/python/peers.py`, and Apache SystemDS with
//! codegen on and off. [`report`] writes `report.md` (with the speed goals the run measured,
//! [`goals`]), `results.csv` and `results.json`, and [`plot`] the SVG figures.

pub mod algorithms;
pub mod compile;
pub mod goals;
#[cfg(feature = "cuda")]
pub mod gpu;
pub mod machine;
pub mod micro;
pub mod peers;
pub mod plot;
pub mod report;
pub mod results;
pub mod reuse;
pub mod runner;
pub mod sizes;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use lafuse::error::Usage;
use lafuse::Error;
use machine::Machine;
use peers::Peers;
use results::{Measurement, Status};
use runner::Runner;
pub use sizes::{Scale, Sizes};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Which experiments to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suite {
    Micro,
    Compile,
    Algorithms,
    Reuse,
    /// GPU kernels against the CPU and the device's copy bandwidth (not part of `All`).
    Gpu,
    All,
}

impl Suite {
    /// The suites `self` stands for, in run order.
    fn expand(self) -> Vec<Suite> {
        match self {
            Suite::All => vec![
                Suite::Micro,
                Suite::Compile,
                Suite::Algorithms,
                Suite::Reuse,
            ],
            s => vec![s],
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Suite::Micro => "micro",
            Suite::Compile => "compile",
            Suite::Algorithms => "algorithms",
            Suite::Reuse => "reuse",
            Suite::Gpu => "gpu",
            Suite::All => "all",
        }
    }
}

/// Everything `lafuse bench` is told.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub suite: Suite,
    pub scale: Scale,
    /// Report folder; default `bench-results/<UTC timestamp>`.
    pub out: Option<PathBuf>,
    /// A Python with numpy / numexpr / JAX for the Python peers.
    pub python: Option<PathBuf>,
    /// SystemDS's jar folder (`SystemDS.jar` and `lib/`).
    pub systemds: Option<PathBuf>,
    /// Repetitions per measurement (overrides the scale's).
    pub reps: Option<usize>,
    /// Only cases whose `case variant` text contains one of these (none: every case).
    pub filter: Vec<String>,
    /// The folder with `micro/`, `algorithms/` and `reuse/` scripts; default the repository's
    /// `examples/`.
    pub examples: Option<PathBuf>,
    /// The lafuse binary the measurements run; default this executable.
    pub exe: Option<PathBuf>,
    /// Time limit of one child process.
    pub timeout: Duration,
    /// The compiler of every lafuse run's native operators (`--jit`).
    pub jit: lafuse::Jit,
}

impl Default for BenchOptions {
    fn default() -> BenchOptions {
        BenchOptions {
            suite: Suite::Micro,
            scale: Scale::Full,
            out: None,
            python: None,
            systemds: None,
            reps: None,
            filter: Vec::new(),
            examples: None,
            exe: None,
            timeout: Duration::from_secs(1800),
            jit: lafuse::Jit::default(),
        }
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct BenchOutcome {
    /// The report folder.
    pub out: PathBuf,
    pub measurements: Vec<Measurement>,
    /// Files written, relative to `out`.
    pub files: Vec<String>,
    pub wall_s: f64,
    /// The speed goals the measurements cover ([`goals::evaluate`]), as the report lists them.
    pub goals: Vec<goals::Goal>,
}

/// What the suites share: where scripts are, how to run them, sizes, peers, progress.
pub struct Ctx {
    pub runner: Runner,
    pub sizes: Sizes,
    /// The `examples/` folder.
    pub examples: PathBuf,
    pub filter: Vec<String>,
    pub machine: Machine,
    pub peers: Peers,
    progress: ProgressBar,
}

impl Ctx {
    /// Whether a case passes `--filter` (contains one of its texts, or there are none).
    pub fn selected(&self, label: &str) -> bool {
        passes_filter(&self.filter, label)
    }

    /// A script under the examples folder, or a clear error naming where it was looked for.
    pub fn script(&self, relative: &str) -> Result<PathBuf, String> {
        let path = self.examples.join(relative);
        if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "missing script {} (examples folder {}; use --examples DIR to point elsewhere)",
                path.display(),
                self.examples.display()
            ))
        }
    }

    /// Announces planned work (progress bar length).
    pub fn plan(&self, steps: usize) {
        self.progress.inc_length(steps as u64);
    }

    /// Shows what runs now.
    pub fn step(&self, what: &str) {
        self.progress.set_message(what.to_string());
    }

    /// Counts a finished measurement and logs one line about it.
    pub fn done(&self, m: &Measurement) {
        self.progress.inc(1);
        let line = match (m.status, m.median_ms) {
            (Status::Ok, Some(t)) => format!(
                "  {:<10} {:<34} {:<18} {:>12.3} ms",
                m.suite,
                m.label(),
                m.who(),
                t
            ),
            (Status::Ok, None) => {
                format!("  {:<10} {:<34} {:<18} done", m.suite, m.label(), m.who())
            }
            (s, _) => format!(
                "  {:<10} {:<34} {:<18} {}: {}",
                m.suite,
                m.label(),
                m.who(),
                s.name(),
                m.error
                    .as_deref()
                    .unwrap_or("")
                    .lines()
                    .next()
                    .unwrap_or("")
            ),
        };
        self.log(&line);
    }

    /// Prints a line on stderr above the progress bar.
    pub fn log(&self, line: &str) {
        self.progress.suspend(|| eprintln!("{line}"));
    }
}

/// The repository root the binary was built from (scripts, `bench/python/peers.py`): the
/// workspace root, one level above this crate's `cli/`.
pub fn repository_root() -> PathBuf {
    let cli = Path::new(env!("CARGO_MANIFEST_DIR"));
    cli.parent().unwrap_or(cli).to_path_buf()
}

/// Runs the requested suites and writes the reports.
pub fn run(options: &BenchOptions) -> Result<BenchOutcome, Error> {
    let started = Instant::now();
    let examples = options
        .examples
        .clone()
        .unwrap_or_else(|| repository_root().join("examples"));
    if !examples.is_dir() {
        return Err(Error::Usage(Usage::BenchExamples { path: examples }));
    }
    let exe = match &options.exe {
        Some(e) => e.clone(),
        None => std::env::current_exe()
            .map_err(|source| Error::Usage(Usage::BenchExecutable { source }))?,
    };
    let out = options
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("bench-results").join(timestamp()));
    let scratch = out.join("scratch");
    std::fs::create_dir_all(&scratch).map_err(|source| {
        Error::Usage(Usage::BenchReportFolder {
            path: out.clone(),
            source,
        })
    })?;

    eprintln!("lafuse bench: measuring the machine...");
    let bw_bytes = match options.scale {
        Scale::Tiny => 16 << 20,
        Scale::Quick => 128 << 20,
        // Twice this machine's 480 MiB last-level cache: a reference that fits in it would
        // measure the cache, not the memory.
        Scale::Full => 1 << 30,
    };
    let machine = Machine::describe(bw_bytes);
    eprintln!("machine: {}", machine.summary());
    let sizes = Sizes::choose(
        options.scale,
        crate::calibrate::available_memory(),
        options.reps,
    );
    eprintln!("sizes: {}", sizes.describe().replace('\n', "\n  "));

    let mut runner = Runner::new(exe, scratch.clone(), options.timeout);
    runner.run_options = vec!["--jit".to_string(), options.jit.name().to_string()];
    eprintln!("native operators compiled with {}", options.jit.name());
    // Peers.py lives beside examples/ in the repository.
    let repo = examples
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(repository_root);
    let peers = Peers::detect(
        options.python.as_deref(),
        options.systemds.as_deref(),
        &repo,
        &runner,
    );
    for p in &peers.status {
        eprintln!(
            "peer {:<9} {}",
            p.name,
            if p.available {
                format!("available ({})", p.detail)
            } else {
                format!("skipped: {}", p.detail)
            }
        );
    }
    let progress = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
    progress.set_style(
        ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let ctx = Ctx {
        runner,
        sizes,
        examples,
        filter: options.filter.clone(),
        machine,
        peers,
        progress,
    };

    let mut measurements = Vec::new();
    for suite in options.suite.expand() {
        ctx.log(&format!("suite {}", suite.name()));
        let ms = match suite {
            Suite::Micro => micro::run(&ctx),
            Suite::Compile => compile::run(&ctx),
            Suite::Algorithms => algorithms::run(&ctx),
            Suite::Reuse => reuse::run(&ctx),
            #[cfg(feature = "cuda")]
            Suite::Gpu => gpu::run(&ctx),
            #[cfg(not(feature = "cuda"))]
            Suite::Gpu => {
                let mut m = Measurement::new("gpu", "all", "", "lafuse-gpu", "");
                m.fail(
                    Status::Skipped,
                    "lafuse was built without the `cuda` feature, so it has no GPU backend",
                );
                vec![m]
            }
            Suite::All => Vec::new(),
        };
        measurements.extend(ms);
    }
    ctx.progress.finish_and_clear();
    if measurements.is_empty() && !options.filter.is_empty() {
        // Nothing ran: say so instead of writing an empty report (the folder goes too, when
        // this run created it empty).
        let _ = std::fs::remove_dir_all(&scratch);
        let _ = std::fs::remove_dir(&out);
        return Err(Error::Usage(Usage::BenchNoMatch {
            suite: options.suite.name(),
            filter: options.filter_text(),
        }));
    }
    results::fill_unfused_ratios(&mut measurements);
    let wall_s = started.elapsed().as_secs_f64();
    let goals = goals::evaluate(&measurements);
    let files = report::write_all(&out, &ctx, options, &measurements, &goals, wall_s)
        .map_err(|source| Error::Usage(Usage::BenchReport { source }))?;
    // Generated data and statistics files are not part of the report.
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(BenchOutcome {
        out,
        measurements,
        files,
        wall_s,
        goals,
    })
}

impl BenchOptions {
    /// The `--filter` texts as the report and messages name them: `` `a` or `b` ``.
    pub fn filter_text(&self) -> String {
        let quoted: Vec<String> = self.filter.iter().map(|f| format!("`{f}`")).collect();
        quoted.join(" or ")
    }
}

/// Whether `label` contains one of `filter`'s texts (an empty filter passes everything).
fn passes_filter(filter: &[String], label: &str) -> bool {
    filter.is_empty() || filter.iter().any(|f| label.contains(f.as_str()))
}

/// `YYYYMMDD-HHMMSS` (UTC) for the default report folder.
fn timestamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (date, rem) = civil(secs);
    format!(
        "{}-{:02}{:02}{:02}",
        date.replace('-', ""),
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `(YYYY-MM-DD, seconds of the day)` of a Unix time (Howard Hinnant's days-to-civil).
pub fn civil(secs: i64) -> (String, i64) {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (format!("{year:04}-{month:02}-{day:02}"), rem)
}

/// Now as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (date, rem) = civil(secs);
    format!(
        "{date} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_passes_the_filter_when_it_contains_any_of_its_texts() {
        let f = |texts: &[&str]| texts.iter().map(|t| t.to_string()).collect::<Vec<_>>();
        assert!(passes_filter(&[], "outer sp=1e-4 20000^2 k=100"));
        let both = f(&["dense 100000x1000", "outer"]);
        assert!(passes_filter(&both, "outer sp=1e-4 20000^2 k=100"));
        assert!(passes_filter(&both, "sum_xyz dense 100000x1000"));
        assert!(!passes_filter(&both, "sum_xyz sp=0.01 100000x1000"));
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil(0), ("1970-01-01".to_string(), 0));
        assert_eq!(civil(951_782_400 + 3_661).0, "2000-02-29");
        assert_eq!(timestamp().len(), "20260101-120000".len());
    }
}
