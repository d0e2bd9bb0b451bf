//! The `lafuse` command: run DML scripts, explain their plans and generated code, cost them
//! under each fusion policy, benchmark fusion, and calibrate the cost model. A thin layer of
//! argument parsing over the `lafuse` library and this crate's `bench` and `calibrate`.

use clap::{Parser, Subcommand, ValueEnum};
use lafuse::{
    Engine, EngineConfig, ExplainFormat, ExplainLevel, ExplainOptions, FusionBackend, FusionPolicy,
    Jit, ScriptArgs,
};
use lafuse_cli::bound;
use std::path::PathBuf;
use std::process::ExitCode;

/// Large blocks aligned to cache lines, for the generated code's vector loads.
#[global_allocator]
static GLOBAL: lafuse::alloc::CacheAligned = lafuse::alloc::CacheAligned;

#[derive(Parser)]
#[command(
    name = "lafuse",
    version,
    about = "JIT code generator for fused linear-algebra operators",
    long_about = "lafuse runs scripts written in a subset of Apache SystemDS's DML.\n\
                  Each basic block is compiled into a HOP DAG with the actual sizes of its inputs \
                  just before it first runs; the fusion optimizer picks its fused operators, \
                  which run as native code generated with LLVM for this CPU, and everything \
                  else runs on lafuse's unfused kernels."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a DML script, or a HOP DAG in JSON (`*.json`, the serde form of the embedding API's
    /// `HopDag`, as `explain --level hops --format json` writes each block's `hop_dag`) on
    /// inputs given with --input.
    Run {
        /// The script (or DAG) to run.
        script: PathBuf,
        #[command(flatten)]
        args: ScriptArgsFlag,
        #[command(flatten)]
        bound: BoundArgs,
        /// Print compile and execution time and the heaviest instructions after the run.
        #[arg(long)]
        stats: bool,
        /// Write the same statistics as JSON to FILE.
        #[arg(long, value_name = "FILE")]
        stats_json: Option<PathBuf>,
        /// Fusion policy: cost-based (`gen`), fuse-all (`fa`), fuse-no-redundancy (`fnr`), or
        /// `none` (every operation on its unfused kernel).
        #[arg(long, value_enum, default_value_t = FusionArg::Gen)]
        fusion: FusionArg,
        /// What runs fused operators: `native` (code generated with LLVM for this CPU) or
        /// `reference` (the CPlan interpreter the native code is tested against; slow).
        #[arg(long, value_enum, default_value_t = BackendArg::default())]
        fusion_backend: BackendArg,
        /// The compiler of native operators: `tiered` (blocks start on the unfused kernels
        /// until fusing them pays for its compilation, --tier-compile-ms; then Cranelift,
        /// and LLVM compiled in the background for the operators that pass
        /// --tier-threshold; the default where lafuse was built with the `cranelift`
        /// feature, as it is by default; under --device gpu|auto on a machine with a GPU
        /// operators are compiled with LLVM), `llvm` (optimized code, milliseconds per operator, every block fused
        /// at its first run) or `cranelift` (a fraction of the compile time, results equal
        /// to the bit, CPU code only).
        #[arg(long, value_enum, default_value_t = JitArg::default())]
        jit: JitArg,
        /// Under `--jit tiered`: the cells of main input (rows × columns, or a tenth of a CSR
        /// input's non-zeros for a Row operator that reads its rows at those; summed over calls) an
        /// operator processes on Cranelift before LLVM compiles it in the background; 0
        /// promotes every operator at its first call.
        #[arg(long, value_name = "CELLS", default_value_t = lafuse::DEFAULT_TIER_THRESHOLD)]
        tier_threshold: u64,
        /// Under `--jit tiered`: the compile time expected per fused operator. A block whose
        /// fused operators the cost model expects to save less than that per run starts on
        /// the unfused kernels (the first tier) and is compiled fused once its runs have
        /// forgone as much as the compilation costs; 0 fuses every block at once. Without a
        /// machine profile the runs are priced by a reference machine's calibrated model
        /// (SystemDS's constants misprice them several times over); sparse values are priced
        /// as they are stored, at their non-zeros.
        #[arg(long, value_name = "MS", default_value_t = lafuse::DEFAULT_TIER_COMPILE_MS)]
        tier_compile_ms: f64,
        /// Under `--jit tiered`: fuse a block whose fusion has paid for its compilation on the
        /// run's own thread at the run it falls due. By default its fusion is planned and
        /// compiled on a background thread while the block runs on unfused, and the fused
        /// plan takes over after as many runs as the cost model expects that to take (a
        /// count, never a timing, so results are the same from run to run), unless four runs
        /// of the saving the model expects pay for fusing it at once.
        #[arg(long)]
        tier_in_foreground: bool,
        /// Keep native operators' machine code in DIR (created private if missing) and load it
        /// from there in later runs instead of compiling again: any script's operators,
        /// compiled on this CPU by this lafuse build and LLVM, each checked against its
        /// SHA-256 before use. A DIR another user owns or others may write is not used.
        /// Without it every run compiles its operators.
        #[arg(long, value_name = "DIR")]
        operator_cache_dir: Option<PathBuf>,
        /// Megabytes the operator cache directory may take: on start, the least recently used
        /// operators beyond this are deleted (only the cache's own files are touched).
        #[arg(long, value_name = "MB", default_value_t = lafuse::DEFAULT_OPERATOR_CACHE_LIMIT >> 20)]
        operator_cache_limit_mb: u64,
        /// Trace lineage: `lineage(X)` returns X's lineage log, and `write(X, f)` also writes
        /// `f.lineage`; --stats counts the items created and the time traced.
        #[arg(long)]
        lineage: bool,
        /// Trace lineage with deduplication of last-level loops and functions (LIMA section
        /// 3.2; implies --lineage): one dedup item per assigned variable per iteration or call,
        /// pointing to the patch of the path taken, and no per-operation tracing once a path
        /// has its patch; --stats counts the patches and dedup items.
        #[arg(long)]
        lineage_dedup: bool,
        /// Threads a `parfor` runs its iterations on (default: the available cores; 1 runs
        /// every parfor sequentially). A parfor whose iterations cannot be proven independent
        /// runs sequentially anyway; --stats says why.
        #[arg(long, value_name = "N")]
        parfor_threads: Option<usize>,
        #[command(flatten)]
        reuse: ReuseArgs,
        #[command(flatten)]
        cost_model: CostModelArgs,
        /// Where fused operators run: `cpu`; `gpu` (PTX kernels on an NVIDIA GPU for Cell,
        /// MultiAgg, Outer and Row operators; what the GPU backend does not generate runs on
        /// the CPU); or `auto` (the GPU where the placement cost model, transfers included,
        /// expects it to be faster). Without a GPU or its driver, lafuse says so and runs on
        /// the CPU.
        #[arg(long, value_enum, default_value_t = DeviceArg::Cpu)]
        device: DeviceArg,
    },
    /// Recompute a value from its lineage log (as `lineage(X)` returns it or `run --lineage`
    /// writes it beside `write(X, f)` as `f.lineage`): the log becomes one HOP DAG of the
    /// operations on the way to the value, compiled, fused and run. Unseeded `rand` uses the
    /// seed it recorded, `time()` returns the value it recorded, and files the value was read
    /// from must be unchanged; relative paths are taken from the current directory.
    Recompute {
        /// The lineage log.
        log: PathBuf,
        /// Write the value to FILE (`.mtx`/`.mm` MatrixMarket, `.bin` lafuse binary, else CSV;
        /// a matrix with a .mtd, a scalar as one line), or print it when FILE is `-` (the
        /// default), as `print(toString(X))` would.
        #[arg(long, value_name = "FILE", default_value = "-")]
        output: String,
        /// Fusion policy: cost-based (`gen`), fuse-all (`fa`), fuse-no-redundancy (`fnr`), or
        /// `none` (every operation on its unfused kernel).
        #[arg(long, value_enum, default_value_t = FusionArg::Gen)]
        fusion: FusionArg,
        /// What runs fused operators: `native` (code generated with LLVM for this CPU) or
        /// `reference` (the CPlan interpreter the native code is tested against; slow).
        #[arg(long, value_enum, default_value_t = BackendArg::default())]
        fusion_backend: BackendArg,
        /// The compiler of native operators: `llvm`, `cranelift` or `tiered` (as `run --jit`).
        #[arg(long, value_enum, default_value_t = JitArg::default())]
        jit: JitArg,
        #[command(flatten)]
        cost_model: CostModelArgs,
    },
    /// Show the plans a script compiles to. Runs the script (its output is discarded) so that
    /// every block is shown with the sizes it actually met, unless --static.
    Explain {
        /// The script to explain, or a HOP DAG in JSON (`*.json`; explained as given, with the
        /// sizes of the --input files where given, without running anything).
        script: PathBuf,
        #[command(flatten)]
        args: ScriptArgsFlag,
        /// For a DAG: the file of input NAME, whose stated size the DAG is explained with
        /// (repeatable).
        #[arg(long = "input", value_name = "NAME=FILE")]
        inputs: Vec<String>,
        /// What to show: `hops` = the HOP DAG of each basic block and predicate; `memo` = the
        /// fusion memo table after exploration; `plan` = the plan the policy selects; `cplan` =
        /// the fused operators constructed from it; `ir` / `asm` = the LLVM IR / machine code
        /// generated for each fused operator; `ptx` = the GPU kernels generated for each.
        #[arg(long, value_enum, default_value_t = LevelArg::Hops)]
        level: LevelArg,
        /// Plan selection policy for `--level plan|cplan`: cost-based (`gen`), fuse-all (`fa`),
        /// fuse-no-redundancy (`fnr`).
        #[arg(long, value_enum, default_value_t = PolicyArg::Gen)]
        policy: PolicyArg,
        /// Output format.
        #[arg(long, value_enum, default_value_t = FormatArg::Text)]
        format: FormatArg,
        #[command(flatten)]
        cost_model: CostModelArgs,
        /// Do not run the script: compile every block once with the sizes the compiler can
        /// infer (unknown where only execution would tell, e.g. after `read`).
        #[arg(long = "static")]
        static_only: bool,
        /// Show the main program's blocks writing back every variable they assign, as for an
        /// embedder reading them all after the run (for a block's `hop_dag` to export and run
        /// with `--output`). Without it, blocks are shown as `run` compiles them: a variable
        /// dead after its block (read by no later statement) is not written back
        #[arg(long)]
        all_variables_live: bool,
        /// Trace lineage while running the script (so that a script calling `lineage(X)` can
        /// be explained).
        #[arg(long)]
        lineage: bool,
    },
    /// Report the modelled cost of each fusion policy's plan per block, and what the
    /// cost-based search did (partitions, interesting points, plans evaluated and skipped,
    /// optimizer time).
    Cost(CostArgs),
    /// Benchmark fusion and reuse: the paper's micro patterns, compilation and optimizer
    /// effort, the ML algorithms under each fusion policy, and LIMA's lineage-reuse
    /// experiments, with optional peers (numpy, numexpr, JAX, SystemDS); writes report.md,
    /// results.csv, results.json and SVG figures, and checks the speed goals against the
    /// run's own measurements.
    Bench(BenchArgs),
    /// Measure this machine's memory bandwidth and per-operation compute rates and write them
    /// as a machine profile, which the cost model then uses instead of SystemDS's constants.
    Calibrate {
        /// Where to write the profile (default: $LAFUSE_PROFILE, else
        /// $XDG_CONFIG_HOME/lafuse/machine.json, else ~/.config/lafuse/machine.json).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Smaller arrays and fewer repetitions: a few seconds instead of about half a minute.
        #[arg(long)]
        quick: bool,
    },
}

#[derive(clap::Args)]
struct BenchArgs {
    /// Which experiments: `micro` (Figures 9, 10, 13), `compile` (Table 3, Figure 15),
    /// `algorithms` (Tables 4, 5), `reuse` (LIMA's Figures 7-9: lineage reuse against none
    /// and against SystemDS's reuse_hybrid), `gpu` (GPU kernels checked against the CPU and
    /// timed against the device's copy bandwidth; needs an NVIDIA GPU) or `all` (every suite
    /// but `gpu`).
    #[arg(long, value_enum, default_value_t = SuiteArg::Micro)]
    suite: SuiteArg,
    /// A run of a few minutes: smaller sizes, policies `none` and `gen` in the micro suite.
    #[arg(long)]
    quick: bool,
    /// Sizes: `full`, `quick` (= --quick) or `tiny` (seconds; for testing the harness).
    #[arg(long, value_enum)]
    scale: Option<ScaleArg>,
    /// Report folder (default: bench-results/<UTC timestamp>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// A Python with numpy / numexpr / JAX: runs bench/python/peers.py beside lafuse.
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    /// SystemDS's jar folder (SystemDS.jar and lib/): runs the same scripts with codegen on
    /// and off (the reuse suite: without lineage and with -lineage reuse_hybrid).
    #[arg(long, value_name = "PATH")]
    systemds: Option<PathBuf>,
    /// Repetitions per measurement (default: by scale).
    #[arg(long, value_name = "N")]
    reps: Option<usize>,
    /// Only cases whose `case variant` text contains SUBSTR (e.g. `sum_xyz`, `dense`,
    /// `sp=0.01`, `l2svm`, ` 10000x`); repeat it for the cases matching any of several.
    #[arg(long, value_name = "SUBSTR")]
    filter: Vec<String>,
    /// The folder with micro/, algorithms/ and reuse/ scripts (default: the repository's examples/).
    #[arg(long, value_name = "DIR")]
    examples: Option<PathBuf>,
    /// Time limit of one child process, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 1800)]
    timeout: u64,
    /// The compiler of the native operators of every `lafuse run` the suites start: `llvm`,
    /// `cranelift` or `tiered` (the `gpu` suite's CPU operators are LLVM's either way).
    #[arg(long, value_enum, default_value_t = JitArg::default())]
    jit: JitArg,
}

#[derive(Clone, Copy, ValueEnum)]
enum SuiteArg {
    Micro,
    Compile,
    Algorithms,
    Reuse,
    Gpu,
    All,
}

#[derive(Clone, Copy, ValueEnum)]
enum ScaleArg {
    Full,
    Quick,
    Tiny,
}

/// Where the cost model's constants come from.
#[derive(clap::Args)]
struct CostModelArgs {
    /// A machine profile written by `lafuse calibrate`. Without it, the default profile is
    /// used if it exists ($LAFUSE_PROFILE, else ~/.config/lafuse/machine.json), else SystemDS's
    /// constants.
    #[arg(long, value_name = "FILE")]
    cost_profile: Option<PathBuf>,
    /// Override one cost-model constant, e.g. `--cost read_bandwidth=2e10` (repeatable). The
    /// names: write_bandwidth, read_bandwidth, compute_bandwidth (bytes or FLOP per second),
    /// unknown_sparsity, and weights.<op> (FLOP per cell of an operation: weights.exp,
    /// weights.log, weights.div, weights.matmul, ...; `lafuse calibrate` lists them all).
    #[arg(long = "cost", value_name = "NAME=VALUE")]
    overrides: Vec<String>,
}

impl CostModelArgs {
    fn load(&self) -> Result<lafuse::CostModel, String> {
        lafuse::profile::load_cost_model(self.cost_profile.as_deref(), &self.overrides)
            .map_err(|e| e.to_string())
    }
}

#[derive(clap::Args)]
struct CostArgs {
    /// A DML script (run with its output discarded, so blocks are costed with the sizes they
    /// met) or a HOP DAG in JSON (`*.json`: the serde form of the embedding API's `HopDag`,
    /// which `explain --level hops --format json` writes as each block's `hop_dag`).
    input: PathBuf,
    #[command(flatten)]
    args: ScriptArgsFlag,
    /// Policies to cost, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [PolicyArg::Gen, PolicyArg::Fa, PolicyArg::Fnr])]
    policy: Vec<PolicyArg>,
    /// Output format: `text` or `json`.
    #[arg(long, value_enum, default_value_t = FormatArg::Text)]
    format: FormatArg,
    #[command(flatten)]
    cost_model: CostModelArgs,
    /// Trace lineage while running the script (so that a script calling `lineage(X)` can
    /// be costed).
    #[arg(long)]
    lineage: bool,
}

/// Values bound to a script's or DAG's inputs and where its outputs go.
#[derive(clap::Args)]
struct BoundArgs {
    /// Bind input NAME to the matrix in FILE (format from its .mtd, else its content); for a
    /// DAG's scalar input, NAME=VALUE. A script's `NAME = read(...)` of a bound input is
    /// skipped, as SystemDS's JMLC does (repeatable).
    #[arg(long = "input", value_name = "NAME=FILE")]
    inputs: Vec<String>,
    /// Return the variable NAME at the end and write it to FILE (`.mtx`/`.mm` MatrixMarket,
    /// `.bin` lafuse binary, else CSV; with a .mtd), or print it when FILE is `-`. A DAG's
    /// outputs (its transient writes) not named here are printed (repeatable).
    #[arg(long = "output", value_name = "NAME=FILE")]
    outputs: Vec<String>,
}

#[derive(clap::Args)]
struct ScriptArgsFlag {
    /// Script arguments as name=value pairs, read by the script as `$name`
    /// (like SystemDS's -nvargs: one flag followed by any number of pairs; the script may
    /// come before or after them).
    #[arg(long, num_args = 1.., value_name = "NAME=VALUE")]
    nvargs: Vec<String>,
    /// A directory of DML-bodied built-ins laid out as SystemDS's `scripts/builtin` (`f.dml`
    /// defining `m_f` or `s_f`): a call of a function `f` that neither the script nor lafuse
    /// defines loads `f.dml` from it, so `l2svm(X=X, Y=y)` runs as in SystemDS. Default:
    /// `scripts/builtin` under the working directory, if there is one (as SystemDS).
    #[arg(long, value_name = "DIR", env = "LAFUSE_BUILTIN_PATH")]
    builtin_path: Option<PathBuf>,
}

/// Lineage-based reuse (LIMA).
#[derive(clap::Args)]
struct ReuseArgs {
    /// Reuse values by their lineage: `full` reuses operations and fused operators whose
    /// outputs' lineage is cached, `multilevel` also whole calls of deterministic functions,
    /// `partial` computes operations that miss from cached parts (LIMA's compensation
    /// rewrites: `t(Z)%*%Z` and column aggregates over `cbind`, products over `rbind`/`cbind`
    /// and of slices) where that gives the same result, `hybrid` is `multilevel` and
    /// `partial`. Implies lineage tracing (without deduplication).
    #[arg(long, value_enum, default_value_t = ReuseArg::None)]
    reuse: ReuseArg,
    /// What goes first when the cache is full: least recently used, highest lineage DAG, or
    /// LIMA's cost and size score.
    #[arg(long, value_enum, default_value_t = EvictionArg::Costsize)]
    reuse_policy: EvictionArg,
    /// The most the cache holds in memory, in bytes with an optional K, M or G suffix
    /// (default: 5 % of the memory this process may use).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    reuse_budget: Option<u64>,
    /// The directory in which the cache makes its private spill directory (removed at the
    /// end) for evicted values that would cost more to recompute than to read back (default:
    /// the system's temporary directory).
    #[arg(long, value_name = "DIR")]
    reuse_spill: Option<PathBuf>,
    /// Keep a value once it has been asked for N times (MEMPHIS's delayed caching): 2 (the
    /// default) never caches intermediates used once; 1 caches every value computed.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    reuse_delay: u32,
}

#[derive(Clone, Copy, PartialEq, ValueEnum)]
enum ReuseArg {
    None,
    Full,
    Partial,
    Hybrid,
    Multilevel,
}

#[derive(Clone, Copy, ValueEnum)]
enum EvictionArg {
    Lru,
    Dagheight,
    Costsize,
}

impl ReuseArgs {
    fn config(&self) -> Result<lafuse::ReuseConfig, String> {
        let mode = match self.reuse {
            ReuseArg::None => lafuse::ReuseMode::None,
            ReuseArg::Full => lafuse::ReuseMode::Full,
            ReuseArg::Multilevel => lafuse::ReuseMode::Multilevel,
            ReuseArg::Partial => lafuse::ReuseMode::Partial,
            ReuseArg::Hybrid => lafuse::ReuseMode::Hybrid,
        };
        Ok(lafuse::ReuseConfig {
            mode,
            policy: match self.reuse_policy {
                EvictionArg::Lru => lafuse::EvictionPolicy::Lru,
                EvictionArg::Dagheight => lafuse::EvictionPolicy::DagHeight,
                EvictionArg::Costsize => lafuse::EvictionPolicy::CostSize,
            },
            budget: self.reuse_budget,
            spill_dir: self.reuse_spill.clone(),
            delay: self.reuse_delay,
        })
    }
}

/// `SIZE` as bytes: a number with an optional K, M or G suffix (powers of 1024).
fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 10),
        Some((i, 'm' | 'M')) => (&t[..i], 20),
        Some((i, 'g' | 'G')) => (&t[..i], 30),
        _ => (t, 0),
    };
    digits
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| {
            format!("'{text}' is not a size: give bytes, optionally with K, M or G (e.g. 512M)")
        })
}

#[derive(Clone, Copy, ValueEnum)]
enum FusionArg {
    Gen,
    Fa,
    Fnr,
    None,
}

#[derive(Clone, Copy, ValueEnum)]
enum DeviceArg {
    Cpu,
    Gpu,
    Auto,
}

impl DeviceArg {
    fn placement(self) -> lafuse::Placement {
        match self {
            DeviceArg::Cpu => lafuse::Placement::Cpu,
            DeviceArg::Gpu => lafuse::Placement::Gpu,
            DeviceArg::Auto => lafuse::Placement::Auto,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum JitArg {
    Llvm,
    Cranelift,
    Tiered,
}

impl std::fmt::Display for JitArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(jit_of(*self).name())
    }
}

impl Default for JitArg {
    /// The library's default: tiered where this build has Cranelift and LLVM, else LLVM.
    fn default() -> JitArg {
        match Jit::default() {
            Jit::Llvm => JitArg::Llvm,
            Jit::Cranelift => JitArg::Cranelift,
            Jit::Tiered => JitArg::Tiered,
        }
    }
}

fn jit_of(j: JitArg) -> Jit {
    match j {
        JitArg::Llvm => Jit::Llvm,
        JitArg::Cranelift => Jit::Cranelift,
        JitArg::Tiered => Jit::Tiered,
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum BackendArg {
    Native,
    Reference,
}

impl Default for BackendArg {
    fn default() -> BackendArg {
        match FusionBackend::default() {
            FusionBackend::Native => BackendArg::Native,
            FusionBackend::Reference => BackendArg::Reference,
        }
    }
}

impl std::fmt::Display for BackendArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BackendArg::Native => "native",
            BackendArg::Reference => "reference",
        })
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum LevelArg {
    Hops,
    Memo,
    Plan,
    Cplan,
    Ir,
    Asm,
    Ptx,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum PolicyArg {
    Gen,
    Fa,
    Fnr,
}

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    Text,
    Json,
    Dot,
}

fn main() -> ExitCode {
    // Rust ignores SIGPIPE, so a write to a closed pipe (`lafuse run s.dml | head -1`) fails
    // with EPIPE, which the script's `print` would report as an error at its line. A
    // command-line filter should instead stop quietly when its reader goes away, as `cat` does.
    #[cfg(unix)]
    // SAFETY: called first thing in `main`, before any thread exists; restoring a signal's
    // default action has no other effect on the process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    keep_freed_memory();
    let (args, notes) = normalize_args(std::env::args_os().collect());
    for note in notes {
        eprintln!("note: {note}");
    }
    let cli = Cli::parse_from(args);
    match on_worker_thread(|| run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            // Script errors come rendered (`error: ...` and the line); every other error gets
            // the same headline.
            if message.starts_with("error") {
                eprintln!("{message}");
            } else {
                eprintln!("error: {message}");
            }
            ExitCode::FAILURE
        }
    }
}

/// How long glibc's allocator keeps freed memory for reuse; set before the first allocation
/// it is meant for.
///
/// By default glibc serves a block of 128 KiB or more with a fresh `mmap` and unmaps it when
/// freed (raising that threshold only as such blocks are freed), and gives a heap's free top
/// back to the system past 128 KiB. A script's intermediates are blocks of a few MiB,
/// allocated and freed over and over; each came back as fresh pages, zeroed by the kernel one
/// page fault at a time (ALS-CG at 2000 x 100: 100,000 page faults and a quarter of its run).
/// Blocks up to 32 MiB (glibc's own ceiling for its dynamic threshold) now come from the
/// heap, and up to 256 MiB of a heap's free top stays mapped for the next intermediate; a
/// larger matrix is still mapped and unmapped on its own.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only sets the allocator's parameters, and any value is valid for
    // these two.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

/// Runs `f` on a thread of the pool that runs the kernels' parallel loops. Called from the main
/// thread, each parallel loop would hand its work to the pool and sleep until the pool's
/// threads (woken through the kernel) finished it: on two cores, every kernel paid two
/// wake-ups and left the calling core idle. From a pool thread, the caller takes part in
/// its own loop and only the other threads are woken. The stack is as large as a main
/// thread's may grow (deep scripts recurse in the parser and the interpreter).
fn on_worker_thread<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    const STACK_BYTES: usize = 64 << 20;
    let built = rayon::ThreadPoolBuilder::new()
        .stack_size(STACK_BYTES)
        .build_global();
    if built.is_err() {
        // The pool exists already (built by someone else, with its own stack size): stay here.
        return f();
    }
    // Called outside the pool, `scope` runs its body on one of the pool's threads.
    rayon::scope(|_| f())
}

/// The command line as clap should read it, and notes on what was changed:
///
/// * SystemDS's single-dash `-nvargs` and `-stats` are taken as `--nvargs` and `--stats`;
/// * `--nvargs` takes every following `NAME=VALUE`, so a script path after the pairs
///   (`lafuse run --nvargs n=3 s.dml`) would be taken as one more pair; the first word after
///   them without `=` that is not an option is the script, moved before `--nvargs`.
fn normalize_args(args: Vec<std::ffi::OsString>) -> (Vec<std::ffi::OsString>, Vec<String>) {
    use std::ffi::OsString;
    let mut notes = Vec::new();
    let mut out: Vec<OsString> = Vec::with_capacity(args.len());
    for a in args {
        match a.to_str() {
            Some(single @ ("-nvargs" | "-stats")) => {
                notes.push(format!(
                    "`{single}` is SystemDS's spelling; lafuse's is `-{single}` (taken as such)"
                ));
                out.push(OsString::from(format!("-{single}")));
            }
            _ => out.push(a),
        }
    }
    if let Some(flag) = out.iter().position(|a| a == "--nvargs") {
        let pairs_end = out[flag + 1..]
            .iter()
            .position(|a| a.to_str().is_none_or(|s| !s.contains('=')))
            .map_or(out.len(), |k| flag + 1 + k);
        let moves = pairs_end < out.len()
            && pairs_end > flag + 1
            && out[pairs_end].to_str().is_some_and(|s| !s.starts_with('-'));
        if moves {
            let script = out.remove(pairs_end);
            out.insert(flag, script);
        }
    }
    (out, notes)
}

fn policy_of(p: PolicyArg) -> FusionPolicy {
    match p {
        PolicyArg::Gen => FusionPolicy::Gen,
        PolicyArg::Fa => FusionPolicy::FuseAll,
        PolicyArg::Fnr => FusionPolicy::FuseNoRedundancy,
    }
}

fn fusion_of(f: FusionArg) -> Option<FusionPolicy> {
    match f {
        FusionArg::Gen => Some(FusionPolicy::Gen),
        FusionArg::Fa => Some(FusionPolicy::FuseAll),
        FusionArg::Fnr => Some(FusionPolicy::FuseNoRedundancy),
        FusionArg::None => None,
    }
}

fn backend_of(b: BackendArg) -> FusionBackend {
    match b {
        BackendArg::Native => FusionBackend::Native,
        BackendArg::Reference => FusionBackend::Reference,
    }
}

fn format_of(f: FormatArg) -> ExplainFormat {
    match f {
        FormatArg::Text => ExplainFormat::Text,
        FormatArg::Json => ExplainFormat::Json,
        FormatArg::Dot => ExplainFormat::Dot,
    }
}

/// Whether the command's input is a HOP DAG in JSON rather than a script.
fn is_dag(path: &std::path::Path) -> bool {
    path.extension().is_some_and(|e| e == "json")
}

/// `lafuse run DAG.json --input ...`: the DAG executed on the inputs, its outputs written or
/// printed.
fn run_dag(
    engine: &Engine,
    path: &std::path::Path,
    bound: &BoundArgs,
    out: &mut dyn std::io::Write,
) -> Result<lafuse::Stats, String> {
    let prepared = engine
        .prepare_dag(bound::read_dag(path)?)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let scalars: Vec<&str> = prepared
        .inputs()
        .iter()
        .filter(|i| !i.matrix)
        .map(|i| i.name.as_str())
        .collect();
    let bindings = bound::bindings(&bound::pairs(&bound.inputs, "--input")?, &scalars)?;
    let outputs = prepared
        .execute_to(&bindings, out)
        .map_err(|e| e.to_string())?;
    let writes = file_outputs(&bound::pairs(&bound.outputs, "--output")?);
    bound::emit(&outputs, &writes, out)?;
    Ok(outputs.stats)
}

/// `lafuse run SCRIPT --input X=FILE --output Y=FILE`: the script prepared with those inputs
/// and outputs, as an embedder would run it.
fn run_prepared(
    engine: &Engine,
    path: &std::path::Path,
    args: &ScriptArgs,
    bound: &BoundArgs,
    out: &mut dyn std::io::Write,
) -> Result<lafuse::Stats, String> {
    let source = lafuse::load_script(path).map_err(|e| e.to_string())?;
    let inputs = bound::pairs(&bound.inputs, "--input")?;
    let outputs = bound::pairs(&bound.outputs, "--output")?;
    let input_names: Vec<&str> = inputs.iter().map(|(n, _)| n.as_str()).collect();
    let output_names: Vec<&str> = outputs.iter().map(|(n, _)| n.as_str()).collect();
    let prepared = engine
        .prepare(&source, args, &input_names, &output_names)
        .map_err(|e| e.render(&source))?;
    let bindings = bound::bindings(&inputs, &[])?;
    let values = prepared
        .execute_to(&bindings, out)
        .map_err(|e| e.render(&source))?;
    bound::emit(&values, &file_outputs(&outputs), out)?;
    Ok(values.stats)
}

/// The `--output` pairs that name a file (`NAME=-` prints).
fn file_outputs(outputs: &[(String, String)]) -> Vec<(String, String)> {
    outputs.iter().filter(|(_, f)| f != "-").cloned().collect()
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Bench(b) => {
            use lafuse_cli::bench::{self, Scale, Suite};
            if b.reps == Some(0) {
                return Err("error: --reps must be at least 1".into());
            }
            let options = bench::BenchOptions {
                suite: match b.suite {
                    SuiteArg::Micro => Suite::Micro,
                    SuiteArg::Compile => Suite::Compile,
                    SuiteArg::Algorithms => Suite::Algorithms,
                    SuiteArg::Reuse => Suite::Reuse,
                    SuiteArg::Gpu => Suite::Gpu,
                    SuiteArg::All => Suite::All,
                },
                scale: match (b.scale, b.quick) {
                    (Some(ScaleArg::Tiny), _) => Scale::Tiny,
                    (Some(ScaleArg::Quick), _) | (None, true) => Scale::Quick,
                    (Some(ScaleArg::Full), _) | (None, false) => Scale::Full,
                },
                out: b.out,
                python: b.python,
                systemds: b.systemds,
                reps: b.reps,
                filter: b.filter,
                examples: b.examples,
                exe: None,
                timeout: std::time::Duration::from_secs(b.timeout.max(1)),
                jit: jit_of(b.jit),
            };
            let outcome = bench::run(&options).map_err(|e| format!("error: {e}"))?;
            let failed = outcome
                .measurements
                .iter()
                .filter(|m| m.status == bench::results::Status::Failed)
                .count();
            println!(
                "{} measurements ({failed} failed) in {:.0} s; report: {}",
                outcome.measurements.len(),
                outcome.wall_s,
                outcome.out.join("report.md").display()
            );
            for f in &outcome.files {
                println!("  {}", outcome.out.join(f).display());
            }
            for g in &outcome.goals {
                let verdict = if g.met { "met" } else { "MISSED" };
                println!("goal {verdict}: {}: {}", g.goal, g.measured);
            }
            Ok(())
        }
        Command::Calibrate { out, quick } => {
            use lafuse::profile;
            use lafuse_cli::calibrate;
            let path = out.or_else(profile::default_profile_path).ok_or_else(|| {
                "error: no place for the profile: give --out FILE (neither $LAFUSE_PROFILE, \
                 $XDG_CONFIG_HOME nor $HOME is set)"
                    .to_string()
            })?;
            eprintln!(
                "calibrating (this takes {})...",
                if quick {
                    "a few seconds"
                } else {
                    "about half a minute"
                }
            );
            let profile = calibrate::calibrate(&calibrate::CalibrateOptions {
                quick,
                ..Default::default()
            })
            .map_err(|e| e.to_string())?;
            profile::write_profile(&path, &profile).map_err(|e| e.to_string())?;
            print!("{}", profile.model.explain());
            println!("profile written to {}", path.display());
            Ok(())
        }
        Command::Cost(cost) => {
            let policies: Vec<FusionPolicy> = cost.policy.iter().copied().map(policy_of).collect();
            let model = cost.cost_model.load()?;
            let text = if cost.input.extension().is_some_and(|e| e == "json") {
                let json = std::fs::read_to_string(&cost.input)
                    .map_err(|e| format!("error: cannot read '{}': {e}", cost.input.display()))?;
                let dag = lafuse_compiler::hops::HopDag::from_json(&json)
                    .map_err(|e| format!("error: {}: {e}", cost.input.display()))?;
                let label = cost.input.display().to_string();
                lafuse::cost_report(&[(label, &dag)], &policies, &model, format_of(cost.format))
                    .map_err(|e| e.to_string())?
            } else {
                let script_args =
                    ScriptArgs::parse_pairs(&cost.args.nvargs).map_err(|e| e.to_string())?;
                let source = lafuse::load_script(&cost.input).map_err(|e| e.to_string())?;
                Engine::new(EngineConfig {
                    cost_model: model,
                    lineage: cost.lineage,
                    builtin_path: cost.args.builtin_path.clone(),
                    ..EngineConfig::default()
                })
                .cost(&source, &script_args, &policies, format_of(cost.format))
                .map_err(|e| e.render(&source))?
            };
            print!("{text}");
            Ok(())
        }
        Command::Run {
            script,
            args,
            bound,
            stats,
            stats_json,
            fusion,
            fusion_backend,
            jit,
            tier_threshold,
            tier_compile_ms,
            tier_in_foreground,
            operator_cache_dir,
            operator_cache_limit_mb,
            lineage,
            lineage_dedup,
            parfor_threads,
            reuse,
            cost_model,
            device,
        } => {
            let reuse = reuse.config()?;
            if !(tier_compile_ms.is_finite() && tier_compile_ms >= 0.0) {
                return Err(format!(
                    "error: --tier-compile-ms {tier_compile_ms}: give a number of milliseconds, \
                     0 or more"
                ));
            }
            let script_args = ScriptArgs::parse_pairs(&args.nvargs).map_err(|e| e.to_string())?;
            if let Some(dir) = &operator_cache_dir {
                std::fs::create_dir_all(dir).map_err(|e| {
                    format!(
                        "error: cannot use '{}' as the operator cache directory: {e}",
                        dir.display()
                    )
                })?;
            }
            let engine = Engine::new(EngineConfig {
                collect_stats: stats || stats_json.is_some(),
                fusion: fusion_of(fusion),
                backend: backend_of(fusion_backend),
                jit: jit_of(jit),
                tier_threshold,
                tier_compile_ms,
                tier_in_background: !tier_in_foreground,
                cost_model: cost_model.load()?,
                operator_cache_dir,
                operator_cache_limit: operator_cache_limit_mb.saturating_mul(1 << 20),
                lineage: lineage || lineage_dedup,
                lineage_dedup,
                reuse,
                parfor_threads,
                builtin_path: args.builtin_path.clone(),
                placement: device.placement(),
            });
            let mut stdout = std::io::stdout().lock();
            let report_stats = if is_dag(&script) {
                run_dag(&engine, &script, &bound, &mut stdout)?
            } else if !bound.inputs.is_empty() || !bound.outputs.is_empty() {
                run_prepared(&engine, &script, &script_args, &bound, &mut stdout)?
            } else {
                let source = lafuse::load_script(&script).map_err(|e| e.to_string())?;
                let report = engine
                    .run(&source, &script_args, &mut stdout)
                    .map_err(|e| e.render(&source))?;
                report.stats
            };
            let report = lafuse::RunReport {
                stats: report_stats,
                lineage: Default::default(),
                variables: Default::default(),
            };
            if stats {
                eprint!("{}", report.stats.to_text());
                if let Some(gpu) = lafuse::gpu::stats_text() {
                    eprint!("{gpu}");
                }
            }
            if let Some(path) = stats_json {
                let json =
                    serde_json::to_string_pretty(&report.stats).map_err(|e| e.to_string())?;
                std::fs::write(&path, json).map_err(|e| {
                    format!("cannot write the statistics to '{}': {e}", path.display())
                })?;
            }
            Ok(())
        }
        Command::Recompute {
            log,
            output,
            fusion,
            fusion_backend,
            jit,
            cost_model,
        } => {
            let text = std::fs::read_to_string(&log)
                .map_err(|e| format!("cannot read the lineage log '{}': {e}", log.display()))?;
            let engine = Engine::new(EngineConfig {
                fusion: fusion_of(fusion),
                backend: backend_of(fusion_backend),
                jit: jit_of(jit),
                cost_model: cost_model.load()?,
                ..EngineConfig::default()
            });
            let value = engine
                .recompute(&text)
                .map_err(|e| format!("{}: {e}", log.display()))?;
            bound::emit_value(&value, &output, &mut std::io::stdout().lock())
        }
        Command::Explain {
            script,
            args,
            inputs,
            level,
            format,
            policy,
            cost_model,
            static_only,
            all_variables_live,
            lineage,
        } => {
            let script_args = ScriptArgs::parse_pairs(&args.nvargs).map_err(|e| e.to_string())?;
            let engine = Engine::new(EngineConfig {
                cost_model: cost_model.load()?,
                lineage,
                builtin_path: args.builtin_path.clone(),
                ..EngineConfig::default()
            });
            let level = match level {
                LevelArg::Hops => ExplainLevel::Hops,
                LevelArg::Memo => ExplainLevel::Memo,
                LevelArg::Plan => ExplainLevel::Plan,
                LevelArg::Cplan => ExplainLevel::Cplan,
                LevelArg::Ir => ExplainLevel::Ir,
                LevelArg::Asm => ExplainLevel::Asm,
                LevelArg::Ptx => ExplainLevel::Ptx,
            };
            let options = ExplainOptions {
                level,
                format: format_of(format),
                policy: policy_of(policy),
                static_only,
                all_variables_live,
            };
            let text = if is_dag(&script) {
                let mut dag = bound::read_dag(&script)?;
                bound::size_inputs(&mut dag, &bound::pairs(&inputs, "--input")?)?;
                engine
                    .explain_dag(&dag, &options)
                    .map_err(|e| e.to_string())?
            } else {
                if !inputs.is_empty() {
                    return Err(
                        "--input applies to DAGs (*.json); a script's inputs are the \
                                files it reads"
                            .into(),
                    );
                }
                let source = lafuse::load_script(&script).map_err(|e| e.to_string())?;
                engine
                    .explain(&source, &script_args, &options)
                    .map_err(|e| e.render(&source))?
            };
            print!("{text}");
            Ok(())
        }
    }
}
