//! The machine a benchmark ran on: CPU model, cores, memory, and the memory read bandwidth
//! measured at the start of the run (the reference the micro patterns' bandwidth fractions are
//! taken of).

use crate::calibrate::{available_memory, plain_sum};
use serde::Serialize;
use std::hint::black_box;
use std::time::Instant;

/// What the report's header says about the machine.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub cpu: String,
    /// Hardware threads the runtime uses.
    pub cores: usize,
    pub memory_total_bytes: Option<u64>,
    pub memory_available_bytes: Option<u64>,
    /// Plain multithreaded sum over a large array (GB/s, 1e9 bytes).
    pub read_bandwidth_gbs: f64,
    /// Bytes of the array the bandwidth was measured over.
    pub bandwidth_array_bytes: usize,
    pub os: String,
}

impl Machine {
    /// Describes this machine and measures its read bandwidth over an array of at most
    /// `max_bytes` (kept to an eighth of the available memory).
    pub fn describe(max_bytes: usize) -> Machine {
        let available = available_memory();
        let bytes = available
            .map_or(max_bytes, |a| max_bytes.min(a / 8))
            .max(1 << 20);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Machine {
            cpu: cpu_model(),
            cores,
            memory_total_bytes: meminfo("MemTotal:"),
            memory_available_bytes: available.map(|b| b as u64),
            read_bandwidth_gbs: read_bandwidth(bytes, cores),
            bandwidth_array_bytes: bytes,
            os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        }
    }

    /// One line: `CPU, N cores, M GiB memory (A GiB available), read bandwidth B GB/s`.
    pub fn summary(&self) -> String {
        format!(
            "{}, {} cores, {} memory ({} available), read bandwidth {:.2} GB/s",
            self.cpu,
            self.cores,
            gib(self.memory_total_bytes),
            gib(self.memory_available_bytes),
            self.read_bandwidth_gbs
        )
    }
}

/// `12.3 GiB` or `unknown`.
pub fn gib(bytes: Option<u64>) -> String {
    bytes.map_or("unknown".into(), |b| {
        format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
    })
}

/// The CPU model string of `/proc/cpuinfo`, else the architecture.
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

/// A `/proc/meminfo` line in bytes.
fn meminfo(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// GB/s of [`plain_sum`] over `bytes` of doubles split over `threads` threads: the best of
/// nine runs after a warm-up, over each of three fresh allocations (the same reference the
/// `fusion` bench reports fractions of).
///
/// Three allocations, because on a virtual machine the same program over the same sizes
/// measures two distinct rates from one process to the next (on the AMD EPYC this was
/// written on: about 35 or about 58 GB/s), depending on where its pages land; the best is
/// what the memory can deliver, and what a fused operator's fraction should be taken of.
pub fn read_bandwidth(bytes: usize, threads: usize) -> f64 {
    (0..3)
        .map(|_| read_bandwidth_once(bytes, threads))
        .fold(0.0, f64::max)
}

fn read_bandwidth_once(bytes: usize, threads: usize) -> f64 {
    let cells = (bytes / 8).max(threads.max(1));
    // Non-zero values so that the pages are really backed, not the shared zero page; huge
    // pages where the kernel grants them, as the operators' inputs (`rand` outputs) have.
    let mut values = Vec::with_capacity(cells);
    lafuse_runtime::matrix::advise_huge_pages(&values);
    values.extend((0..cells).map(|i| (i % 7) as f64 + 0.5));
    let chunk = cells.div_ceil(threads.max(1));
    let time = || {
        let start = Instant::now();
        let total: f64 = std::thread::scope(|s| {
            let handles: Vec<_> = values
                .chunks(chunk)
                .map(|part| s.spawn(move || plain_sum(part)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
        });
        black_box(total);
        start.elapsed().as_secs_f64()
    };
    time();
    // The best of nine: the machine's capability (as STREAM reports it); on a shared machine
    // the median would measure the neighbours.
    let best = (0..9).map(|_| time()).fold(f64::INFINITY, f64::min);
    (cells * 8) as f64 / best.max(1e-9) / 1e9
}

/// Rows of the product [`multiply_reference_ms`] computes per block.
const REFERENCE_BLOCK_ROWS: usize = 2048;

/// Milliseconds of the plain product `U %*% t(V)` (`U` m×k, `V` n×k, dense), the reference a
/// dense Outer operator is measured against: computed by the runtime's blocked multiply
/// (faer) on `threads` threads at once, each taking blocks of [`REFERENCE_BLOCK_ROWS`] rows of
/// the product into one buffer of its own that it reuses. Every cell of the product is
/// computed, at the multiply's speed, without the page faults of a fresh m×n output (on this
/// project's machines a fresh 3.2 GB output costs more than the multiply), so it is the
/// fastest plain multiply the machine does. The best of `reps` runs.
pub fn multiply_reference_ms(m: usize, n: usize, k: usize, threads: usize, reps: usize) -> f64 {
    use lafuse_runtime::kernels::block_product::{block_product, Block, BlockMut};
    let fill = |len: usize, seed: u64| -> Vec<f64> {
        (0..len)
            .map(|i| ((i as u64 * 2_654_435_761 + seed) % 1000) as f64 / 1000.0)
            .collect()
    };
    let (u, v) = (fill(m * k, 2), fill(n * k, 3));
    let threads = threads.max(1);
    let blocks = m.div_ceil(REFERENCE_BLOCK_ROWS);
    let mut bufs: Vec<Vec<f64>> = (0..threads)
        .map(|_| vec![1.0; REFERENCE_BLOCK_ROWS.min(m) * n])
        .collect();
    let vt = Block {
        data: &v,
        rows: n,
        cols: k,
        row_stride: k,
        col_stride: 1,
    }
    .t();
    let mut best = f64::INFINITY;
    for _ in 0..reps.max(1) {
        let start = Instant::now();
        std::thread::scope(|s| {
            for (t, buf) in bufs.iter_mut().enumerate() {
                let u = &u;
                s.spawn(move || {
                    for b in (t..blocks).step_by(threads) {
                        let (r0, r1) = (
                            b * REFERENCE_BLOCK_ROWS,
                            ((b + 1) * REFERENCE_BLOCK_ROWS).min(m),
                        );
                        let a = Block {
                            data: &u[r0 * k..r1 * k],
                            rows: r1 - r0,
                            cols: k,
                            row_stride: k,
                            col_stride: 1,
                        };
                        let c = BlockMut {
                            data: &mut buf[..(r1 - r0) * n],
                            rows: r1 - r0,
                            cols: n,
                            row_stride: n,
                            col_stride: 1,
                        };
                        // The blocks fit their buffers by construction.
                        let _ = block_product(c, a, vt, false);
                    }
                    black_box(&buf[0]);
                });
            }
        });
        best = best.min(start.elapsed().as_secs_f64() * 1e3);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_is_positive_and_finite() {
        let bw = read_bandwidth(4 << 20, 2);
        assert!(bw.is_finite() && bw > 0.0, "{bw}");
        assert_eq!(gib(Some(1 << 30)), "1.0 GiB");
        assert_eq!(gib(None), "unknown");
    }
}
