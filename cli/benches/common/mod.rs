//! Helpers shared by the benches: timing and the memory-bandwidth reference they report
//! fractions of (`harness = false` benches include this with `mod common;`).
#![allow(dead_code)] // each bench uses part of it

use rayon::prelude::*;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Median wall time of `reps` runs of `f` (at least one; the caller warms up).
pub fn median_time<T>(reps: usize, mut f: impl FnMut() -> T) -> Duration {
    let mut times: Vec<Duration> = (0..reps.max(1))
        .map(|_| {
            let start = Instant::now();
            black_box(f());
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// The read-bandwidth reference: `lafuse_cli::calibrate::plain_sum` over chunks on rayon's pool,
/// the pool the kernels and fused operators run on.
pub fn reference_sum(values: &[f64]) -> f64 {
    values
        .par_chunks(1 << 16)
        .map(lafuse_cli::calibrate::plain_sum)
        .sum()
}

/// MemAvailable in bytes (None where unreadable).
pub fn mem_available() -> Option<u64> {
    lafuse_cli::calibrate::available_memory().map(|b| b as u64)
}
