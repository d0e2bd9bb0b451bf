//! `lafuse calibrate`: measures the constants of the fusion cost model on this machine as a
//! machine profile (which `lafuse::profile` writes and loads), and the measuring primitives the
//! bench harness shares (a plain read of memory, the available memory).
//!
//! What is measured, and how it maps onto [`CostModel`]:
//! * `read_bandwidth`: a plain multithreaded sum (eight independent accumulators, so it is not
//!   latency bound) over a large dense array, as the `kernels` bench's read reference.
//! * `write_bandwidth`: filling a fresh output from [`try_alloc_zeroed`] (the runtime's output
//!   allocation) with every thread writing its share: allocation, page faults and the write.
//! * `compute_bandwidth`: cells per second of the runtime kernel `X * 2.5` on a cache-resident
//!   `X`, run by every thread at once on its own copy: the rate of weight-1 operations of the
//!   whole machine.
//! * `weights.*`: the same rate for each operation class through its runtime kernel, as the
//!   ratio to `X * 2.5` (a kernel that takes four times as long per cell weighs 4); the matrix
//!   multiply per multiply-add of a cache-sized `dgemm`; an Outer operator's dot products
//!   one non-zero at a time (`weights.outer_dot`) per multiply-add of dot products of rank
//!   [`OUTER_RANK`] between rows of two factors at the scattered non-zeros of a driver of
//!   density [`OUTER_DENSITY`], as the Outer skeleton's sparse path computes them.
//!
//! Every figure is the median of several repetitions after a warm-up run. The kernel timings
//! include what every unfused kernel pays per cell (its output write and non-zero count), so the
//! weights are those of unfused operations, measured, not the instruction counts of SystemDS.

use lafuse::error::{Internal, Usage};
use lafuse::Error;
use lafuse_compiler::fusion::cost::{MachineProfile, Provenance};
use lafuse_compiler::fusion::CostModel;
use lafuse_runtime::kernels::{self, Operand};
use lafuse_runtime::matrix::{try_alloc_zeroed, PAR_THRESHOLD};
use lafuse_runtime::ops::{AggOp, BinaryOp, Direction, UnaryOp};
use lafuse_runtime::Matrix;
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// How `calibrate` measures. The default is a full run (a few tens of seconds); `quick` keeps it
/// to a few seconds with smaller arrays, fewer repetitions and shorter samples.
#[derive(Clone, Debug, Default)]
pub struct CalibrateOptions {
    /// Smaller arrays, fewer repetitions, shorter samples.
    pub quick: bool,
    /// Threads to measure with (the cores the model covers); default: `RAYON_NUM_THREADS` when
    /// set, else the available parallelism, as the runtime's thread pool.
    pub threads: Option<usize>,
    /// Bytes of the large (memory-resident) array; default 256 MiB (quick: 128 MiB), at most an
    /// eighth of the available memory.
    pub large_bytes: Option<usize>,
    /// Cells of the cache-resident array of the compute measurements; default 16384 (128 KiB),
    /// kept below the kernels' parallel threshold so that each call runs on one thread.
    pub cache_cells: Option<usize>,
    /// Rows (= columns) of the matrix multiply; default 256 (quick: 128).
    pub matmul_size: Option<usize>,
    /// Repetitions per figure (the median is kept); default 7 (quick: 3).
    pub repetitions: Option<usize>,
    /// Target duration of one compute sample; default 20 ms (quick: 2 ms).
    pub sample_time: Option<Duration>,
}

/// The resolved sizes of one run.
struct Plan {
    threads: usize,
    large_cells: usize,
    cache_cells: usize,
    matmul_size: usize,
    reps: usize,
    sample: Duration,
}

impl Plan {
    fn new(o: &CalibrateOptions) -> Result<Plan, Error> {
        let threads = match o.threads {
            Some(0) => return Err(Error::Usage(Usage::CalibrateThreads)),
            Some(t) => t,
            None => default_threads(),
        };
        let default_large: usize = if o.quick { 128 << 20 } else { 256 << 20 };
        // Two large arrays live at once (the input and an output); keep well inside memory.
        let memory_bound = available_memory().map_or(default_large, |m| (m / 8).max(1 << 20));
        let large_bytes = o.large_bytes.unwrap_or(default_large.min(memory_bound));
        // At least one cell per thread so that every thread has a share.
        let large_cells = (large_bytes / 8).max(threads);
        let cache_cells = o.cache_cells.unwrap_or(16 * 1024);
        if cache_cells == 0 || cache_cells >= PAR_THRESHOLD {
            return Err(Error::Usage(Usage::CalibrateCacheCells {
                cells: cache_cells,
                max: PAR_THRESHOLD - 1,
            }));
        }
        let matmul_size = o.matmul_size.unwrap_or(if o.quick { 128 } else { 256 });
        // Below 2 the kernel takes its vector paths, not the dgemm whose rate is wanted.
        if matmul_size < 2 {
            return Err(Error::Usage(Usage::CalibrateMatmulSize {
                size: matmul_size,
            }));
        }
        let reps = o.repetitions.unwrap_or(if o.quick { 3 } else { 7 }).max(1);
        let sample = o.sample_time.unwrap_or(if o.quick {
            Duration::from_millis(2)
        } else {
            Duration::from_millis(20)
        });
        Ok(Plan {
            threads,
            large_cells,
            cache_cells,
            matmul_size,
            reps,
            sample,
        })
    }
}

/// The runtime's thread count: rayon's global pool honours `RAYON_NUM_THREADS`, else uses the
/// available parallelism.
fn default_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&t| t > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// `MemAvailable` of `/proc/meminfo` in bytes, where there is one (also used by the benches
/// to size their inputs).
pub fn available_memory() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The CPU model string (`/proc/cpuinfo`), else the architecture.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| format!("unknown {} CPU", std::env::consts::ARCH))
}

/// Now as ISO 8601 UTC (`2024-05-06T07:08:09Z`), from the Unix time (civil-from-days).
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Pseudo-random values in (0.1, 0.9): inside the domain of every measured operation (`log`,
/// `asin`, `acos`, ...) and never zero, so outputs stay dense.
fn values(cells: usize, seed: u64) -> Vec<f64> {
    let mut s = seed | 1;
    // Backed by huge pages where the kernel grants them, as `rand` outputs are: a bandwidth
    // measured over 4 KiB pages pays TLB misses that the operators it calibrates for do not.
    let mut v = Vec::with_capacity(cells);
    lafuse_runtime::matrix::advise_huge_pages(&v);
    v.extend((0..cells).map(|_| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        0.1 + 0.8 * ((s >> 11) as f64 / (1u64 << 53) as f64)
    }));
    v
}

/// `v` rounded to six significant digits.
fn significant(v: f64) -> f64 {
    format!("{v:.5e}").parse().unwrap_or(v)
}

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Median seconds of `reps` runs of `f` after one warm-up run; `f` times itself (so that set-up
/// and clean-up stay outside) and returns its seconds.
fn median_of(reps: usize, mut f: impl FnMut() -> Result<f64, Error>) -> Result<f64, Error> {
    f()?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        times.push(f()?);
    }
    Ok(median(times))
}

fn runtime_error(e: lafuse_runtime::RuntimeError) -> Error {
    Error::Runtime {
        error: e,
        span: None,
    }
}

/// The read-bandwidth reference kernel: a plain sum with eight independent accumulators (not
/// latency bound, no compensation), so it runs at the memory's read bandwidth. The benches
/// measure against the same loop.
pub fn plain_sum(values: &[f64]) -> f64 {
    let mut acc = [0.0f64; 8];
    let mut lanes = values.chunks_exact(8);
    for lane in &mut lanes {
        for k in 0..8 {
            acc[k] += lane[k];
        }
    }
    acc.iter().sum::<f64>() + lanes.remainder().iter().sum::<f64>()
}

/// Seconds of a plain sum over `values` split over `threads` threads.
fn time_parallel_sum(values: &[f64], threads: usize) -> f64 {
    let chunk = values.len().div_ceil(threads).max(1);
    let start = Instant::now();
    let total: f64 = std::thread::scope(|s| {
        let handles: Vec<_> = values
            .chunks(chunk)
            .map(|part| s.spawn(move || plain_sum(part)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
    });
    let elapsed = start.elapsed().as_secs_f64();
    black_box(total);
    elapsed
}

/// Seconds to allocate a fresh `cells` output as the kernels do and fill it from `threads`
/// threads; freeing it is not timed.
fn time_parallel_fill(cells: usize, threads: usize) -> Result<f64, Error> {
    let chunk = cells.div_ceil(threads).max(1);
    let start = Instant::now();
    let mut out = try_alloc_zeroed(cells).map_err(runtime_error)?;
    std::thread::scope(|s| {
        for part in out.chunks_mut(chunk) {
            s.spawn(move || part.fill(2.5));
        }
    });
    let elapsed = start.elapsed().as_secs_f64();
    black_box(&out);
    drop(out);
    Ok(elapsed)
}

/// Seconds of `iters` calls of `kernel` on each of `threads` threads at once (the slowest
/// thread's time, all starting together).
fn time_concurrent(
    threads: usize,
    iters: usize,
    kernel: &(dyn Fn() -> lafuse_runtime::Result<Matrix> + Sync),
) -> Result<f64, Error> {
    let barrier = Barrier::new(threads);
    let results: Vec<Result<f64, lafuse_runtime::RuntimeError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        black_box(kernel()?);
                    }
                    Ok(start.elapsed().as_secs_f64())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(lafuse_runtime::RuntimeError::Internal(
                        lafuse_runtime::error::Internal::MeasuringThreadPanicked {
                            command: "calibrate",
                        },
                    ))
                })
            })
            .collect()
    });
    let mut slowest = 0.0f64;
    for r in results {
        slowest = slowest.max(r.map_err(runtime_error)?);
    }
    Ok(slowest)
}

/// Machine-wide rate of `kernel` in units per second, `units` per call: every thread calls it
/// repeatedly at once, for about `plan.sample` per repetition.
fn concurrent_rate(
    plan: &Plan,
    units: f64,
    kernel: &(dyn Fn() -> lafuse_runtime::Result<Matrix> + Sync),
) -> Result<f64, Error> {
    // One call alone sizes the sample (and warms caches and the allocator).
    let once = {
        let start = Instant::now();
        black_box(kernel().map_err(runtime_error)?);
        start.elapsed().as_secs_f64().max(1e-9)
    };
    let iters = ((plan.sample.as_secs_f64() / once).ceil() as usize).clamp(1, 1 << 24);
    let seconds = median_of(plan.reps, || time_concurrent(plan.threads, iters, kernel))?;
    Ok(units * (plan.threads * iters) as f64 / seconds.max(1e-12))
}

/// The rank of the dot products `weights.outer_dot` is measured with (the paper's Outer
/// patterns use 100).
pub const OUTER_RANK: usize = 100;
/// The density of the driver whose non-zeros `weights.outer_dot` is measured at.
pub const OUTER_DENSITY: f64 = 0.01;

/// The multiply-adds per call, and the call, of `n`×`n` driver non-zeros at density
/// [`OUTER_DENSITY`] (columns scattered within each row, as a CSR row's), each a dot product of
/// a row of `U` and a row of `V` (both `n`×[`OUTER_RANK`]) through the runtime's dot product
/// (eight independent lanes, as the generated code's), summed into a scalar that is returned.
fn outer_dots(n: usize) -> (f64, impl Fn() -> lafuse_runtime::Result<Matrix> + Sync) {
    let k = OUTER_RANK;
    let u = values(n * k, 19);
    let v = values(n * k, 23);
    let per_row = ((n as f64 * OUTER_DENSITY).round() as usize).max(1);
    // A fixed scatter of columns per row (a multiplicative hash, sorted as in CSR).
    let cols: Vec<Vec<usize>> = (0..n)
        .map(|i| {
            let mut c: Vec<usize> = (0..per_row)
                .map(|t| (i * 7919 + t * 104_729 + t * t * 31) % n)
                .collect();
            c.sort_unstable();
            c
        })
        .collect();
    let dots = (n * per_row * k) as f64;
    let kernel = move || {
        let mut total = 0.0;
        for (i, row) in cols.iter().enumerate() {
            let ur = &u[i * k..(i + 1) * k];
            for &j in row {
                total += kernels::matmul::dot(ur, &v[j * k..(j + 1) * k]);
            }
        }
        Ok(Matrix::scalar(black_box(total)))
    };
    (dots, kernel)
}

/// Measures the cost model's constants on this machine ([module docs](self)) and returns them
/// as a machine profile with provenance and the raw measurements.
pub fn calibrate(options: &CalibrateOptions) -> Result<MachineProfile, Error> {
    let plan = Plan::new(options)?;
    let mut measured = std::collections::BTreeMap::new();
    let mut model = CostModel::systemds(plan.threads as u32);

    // Bandwidths on a large array.
    let n = plan.large_cells;
    let bytes = 8.0 * n as f64;
    let big = Matrix::from_dense_values(n, 1, values(n, 7)).map_err(runtime_error)?;
    let big_values = match &big {
        Matrix::Dense(d) => &d.values,
        Matrix::Sparse(_) => return Err(Error::Internal(Internal::CalibrationNotDense)),
    };
    let t_read = median_of(plan.reps, || {
        Ok(time_parallel_sum(big_values, plan.threads))
    })?;
    let t_write = median_of(plan.reps, || time_parallel_fill(n, plan.threads))?;
    model.read_bandwidth = bytes / t_read.max(1e-12);
    model.write_bandwidth = bytes / t_write.max(1e-12);
    // An unfused kernel end to end, to compare with what the model predicts for it.
    let t_scale_large = median_of(plan.reps, || {
        let start = Instant::now();
        let out = kernels::binary_scalar(&big, 2.5, BinaryOp::Mul, false).map_err(runtime_error)?;
        let elapsed = start.elapsed().as_secs_f64();
        drop(black_box(out));
        Ok(elapsed)
    })?;
    drop(big);
    measured.insert("large_array_bytes".to_string(), bytes);
    measured.insert("read_seconds".to_string(), t_read);
    measured.insert("write_seconds".to_string(), t_write);
    measured.insert("x_times_2_5_large_seconds".to_string(), t_scale_large);

    // Compute rates on a cache-resident array, every thread at once.
    let c = plan.cache_cells;
    let x = Matrix::from_dense_values(c, 1, values(c, 11)).map_err(runtime_error)?;
    let cells = c as f64;
    let base = concurrent_rate(&plan, cells, &|| {
        kernels::binary_scalar(&x, 2.5, BinaryOp::Mul, false)
    })?;
    model.compute_bandwidth = base;
    measured.insert("cells_per_second.mul".to_string(), base);

    let x = &x;
    type Kernel<'a> = Box<dyn Fn() -> lafuse_runtime::Result<Matrix> + Sync + 'a>;
    let unary = |op: UnaryOp| -> Kernel<'_> { Box::new(move || kernels::unary(x, op)) };
    let scalar = |op: BinaryOp, s: f64| -> Kernel<'_> {
        Box::new(move || kernels::binary_scalar(x, s, op, false))
    };
    // (parameter, kernel): divisors keep `%/%` and `%%` results non-zero for x in (0.1, 0.9).
    let classes: Vec<(&str, Kernel<'_>)> = vec![
        ("weights.sqrt", unary(UnaryOp::Sqrt)),
        ("weights.exp", unary(UnaryOp::Exp)),
        ("weights.sin", unary(UnaryOp::Sin)),
        ("weights.sigmoid", unary(UnaryOp::Sigmoid)),
        ("weights.log", unary(UnaryOp::Log)),
        ("weights.cos", unary(UnaryOp::Cos)),
        ("weights.tan", unary(UnaryOp::Tan)),
        ("weights.asin", unary(UnaryOp::Asin)),
        ("weights.sinh", unary(UnaryOp::Sinh)),
        ("weights.acos", unary(UnaryOp::Acos)),
        ("weights.cosh", unary(UnaryOp::Cosh)),
        ("weights.atan", unary(UnaryOp::Atan)),
        ("weights.tanh", unary(UnaryOp::Tanh)),
        ("weights.int_div", scalar(BinaryOp::IntDiv, 0.05)),
        ("weights.modulus", scalar(BinaryOp::Mod, 0.07)),
        ("weights.div", scalar(BinaryOp::Div, 1.7)),
        ("weights.pow", scalar(BinaryOp::Pow, 1.7)),
        (
            "weights.if_else",
            Box::new(|| {
                kernels::ifelse(Operand::Matrix(x), Operand::Matrix(x), Operand::Scalar(0.5))
            }),
        ),
        (
            "weights.sum",
            Box::new(|| kernels::aggregate(x, AggOp::Sum, Direction::Full)),
        ),
        (
            "weights.var",
            Box::new(|| kernels::aggregate(x, AggOp::Var, Direction::Full)),
        ),
    ];
    for (name, kernel) in &classes {
        let rate = concurrent_rate(&plan, cells, kernel.as_ref())?;
        let op = name.trim_start_matches("weights.");
        measured.insert(format!("cells_per_second.{op}"), rate);
        model
            .set(name, base / rate)
            .map_err(|source| Error::Internal(Internal::CalibratedConstant { source }))?;
    }

    // The matrix multiply runs with the kernel's own threads, called from one thread.
    let m = plan.matmul_size;
    let a = Matrix::from_dense_values(m, m, values(m * m, 13)).map_err(runtime_error)?;
    let b = Matrix::from_dense_values(m, m, values(m * m, 17)).map_err(runtime_error)?;
    let multiply_adds = (m * m * m) as f64;
    let t_matmul = median_of(plan.reps, || {
        let start = Instant::now();
        let out = kernels::matmul(&a, &b).map_err(runtime_error)?;
        let elapsed = start.elapsed().as_secs_f64();
        drop(black_box(out));
        Ok(elapsed)
    })?;
    let mm_rate = multiply_adds / t_matmul.max(1e-12);
    measured.insert("multiply_adds_per_second.matmul".to_string(), mm_rate);
    model
        .set("weights.matmul", base / mm_rate)
        .map_err(|source| Error::Internal(Internal::CalibratedConstant { source }))?;

    // An Outer operator's dot products one non-zero at a time, every thread at once.
    let (dots, kernel) = outer_dots(plan.matmul_size * 8);
    let dot_rate = concurrent_rate(&plan, dots, &kernel)?;
    measured.insert("multiply_adds_per_second.outer_dot".to_string(), dot_rate);
    model
        .set("weights.outer_dot", base / dot_rate)
        .map_err(|source| Error::Internal(Internal::CalibratedConstant { source }))?;

    // What the calibrated model predicts for the large `X * 2.5` it did not fit to.
    let predicted = bytes / model.write_bandwidth
        + (bytes / model.read_bandwidth).max(n as f64 / model.compute_bandwidth);
    measured.insert("x_times_2_5_large_model_seconds".to_string(), predicted);

    // Six significant digits: far below the measurements' noise, and short decimals read
    // back from the JSON file to exactly the same values.
    for p in CostModel::PARAMETERS {
        if let Some(v) = model.get(p.name) {
            let _ = model.set(p.name, significant(v));
        }
    }
    model
        .validate()
        .map_err(|source| Error::Internal(Internal::CalibratedModel { source }))?;
    let mut profile = MachineProfile::new(
        model,
        Provenance {
            source: "measured by lafuse calibrate".to_string(),
            lafuse_version: env!("CARGO_PKG_VERSION").to_string(),
            cpu: cpu_model(),
            cores: plan.threads as u32,
            date: utc_now(),
        },
    );
    profile.measurements = measured;
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> CalibrateOptions {
        CalibrateOptions {
            quick: true,
            threads: Some(2),
            large_bytes: Some(1 << 20),
            cache_cells: Some(1024),
            matmul_size: Some(16),
            repetitions: Some(3),
            sample_time: Some(Duration::from_micros(200)),
        }
    }

    #[test]
    fn quick_calibration_gives_positive_finite_constants() {
        let profile = calibrate(&tiny()).unwrap();
        let model = profile.model;
        for p in CostModel::PARAMETERS {
            let v = model.get(p.name).unwrap();
            assert!(v.is_finite() && v > 0.0, "{} = {v}", p.name);
        }
        // Measured, not SystemDS's: bandwidths are not the reference constants.
        assert_ne!(model.read_bandwidth, CostModel::default().read_bandwidth);
        assert_eq!(model.unknown_sparsity, 0.1);
        assert_eq!(profile.provenance.cores, 2);
        assert_eq!(profile.provenance.source, "measured by lafuse calibrate");
        assert!(
            profile.provenance.date.ends_with('Z'),
            "{}",
            profile.provenance.date
        );
        assert!(profile
            .measurements
            .values()
            .all(|v| v.is_finite() && *v > 0.0));
        assert!(profile.measurements.contains_key("cells_per_second.exp"));
        // The profile survives its file format.
        let back = MachineProfile::from_json(&profile.to_json()).unwrap();
        assert_eq!(back.model, model);
    }

    /// This machine's figures: `cargo test -p lafuse-cli --lib calibrate::tests::show -- --ignored
    /// --nocapture` (a real quick calibration, a few seconds).
    #[test]
    #[ignore = "measures this machine for a few seconds; run by hand"]
    fn show_quick_calibration() {
        let profile = calibrate(&CalibrateOptions {
            quick: true,
            ..CalibrateOptions::default()
        })
        .unwrap();
        print!("{}{}", profile.model.explain(), profile.to_json());
        let m = &profile.measurements;
        let ratio = m["x_times_2_5_large_model_seconds"] / m["x_times_2_5_large_seconds"];
        assert!(
            ratio > 0.1 && ratio < 10.0,
            "model/measured of X*2.5: {ratio}"
        );
    }

    #[test]
    fn bad_options_are_usage_errors() {
        let mut o = tiny();
        o.cache_cells = Some(PAR_THRESHOLD);
        assert!(
            matches!(calibrate(&o), Err(Error::Usage(m)) if m.to_string().contains("cache-resident"))
        );
        let mut o = tiny();
        o.threads = Some(0);
        assert!(matches!(calibrate(&o), Err(Error::Usage(_))));
    }

    #[test]
    fn utc_dates_are_civil() {
        let d = utc_now();
        assert_eq!(d.len(), 20, "{d}");
        let year: i32 = d[0..4].parse().unwrap();
        assert!(year >= 2024, "{d}");
    }
}
