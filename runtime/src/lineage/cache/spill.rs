//! Spilling of evicted matrices to disk (LIMA section 4.3; SystemDS `LineageCacheEviction`,
//! reference section 9.9): the decision whether a matrix is worth spilling, the cache's
//! private spill directory, and writing and reading back in lafuse's binary format.

use crate::io::binary::{read_binary, write_binary};
use crate::matrix::{prefers_sparse, Matrix};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Below this estimated I/O time (write plus read back) the estimate is not trusted, and a
/// matrix is spilled only if it took at least this long to compute (SystemDS
/// `MIN_SPILL_TIME_ESTIMATE`).
const MIN_SPILL_TIME: Duration = Duration::from_millis(10);
/// Only files at least this large update the bandwidth estimates: small ones measure the
/// file system's latency, not its bandwidth (SystemDS `MIN_SPILL_DATA`).
const MIN_MEASURED_BYTES: u64 = 2 << 20;
/// The weight of a new measurement in the bandwidths' exponential moving average (SystemDS).
const SMOOTHING: f64 = 0.5;
/// Bytes of the binary format around the arrays: header and checksum.
const FILE_OVERHEAD: u64 = crate::io::binary::MAGIC.len() as u64 + 4 + 4 + 24 + 4;
const MB: f64 = (1u64 << 20) as f64;

/// A spilled matrix: its file and what is needed to give back the very matrix written.
#[derive(Debug)]
pub(crate) struct SpillFile {
    pub path: PathBuf,
    /// The format the matrix had: the reader chooses the format by sparsity, the cache gives
    /// back the one that was put.
    pub sparse: bool,
    pub disk_bytes: u64,
}

/// Disk bandwidths in MB/s, starting from SystemDS's initial estimates and adapted to the
/// measured times (LIMA section 4.3: "we adjust these expected bandwidths ... as an
/// exponential moving average with the measured I/O times").
#[derive(Clone, Copy, Debug)]
struct Bandwidths {
    read_dense: f64,
    read_sparse: f64,
    write_dense: f64,
    write_sparse: f64,
}

impl Default for Bandwidths {
    fn default() -> Self {
        Bandwidths {
            read_dense: 500.0,
            read_sparse: 400.0,
            write_dense: 450.0,
            write_sparse: 225.0,
        }
    }
}

/// Where a cache spills; off once anything about its directory fails.
#[derive(Debug)]
pub(crate) struct Spiller {
    /// Off from the start (`CacheConfig::spill` false) or after a failure.
    enabled: bool,
    /// Where the private directory is made.
    parent: PathBuf,
    /// The private directory, made at the first spill; removed whole when the cache drops.
    dir: Option<PathBuf>,
    next_file: u64,
    bandwidth: Bandwidths,
}

/// Distinguishes the spill directories of the caches of one process.
static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

impl Spiller {
    pub fn new(enabled: bool, parent: Option<PathBuf>) -> Spiller {
        Spiller {
            enabled,
            parent: parent.unwrap_or_else(std::env::temp_dir),
            dir: None,
            next_file: 0,
            bandwidth: Bandwidths::default(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The private directory, if one was made.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Whether spilling `m`, which took `compute` to make, costs less than recomputing it:
    /// SystemDS's rule (`LineageCacheEviction.makeSpace`), where the I/O time is writing plus
    /// reading back the estimated file at the current bandwidths.
    pub fn worth_spilling(&self, m: &Matrix, compute: Duration) -> bool {
        let mb = disk_bytes(m) as f64 / MB;
        let b = &self.bandwidth;
        let (read, write) = if m.is_sparse() {
            (b.read_sparse, b.write_sparse)
        } else {
            (b.read_dense, b.write_dense)
        };
        let io = Duration::try_from_secs_f64(mb / read + mb / write).unwrap_or(Duration::MAX);
        if io < MIN_SPILL_TIME {
            compute >= MIN_SPILL_TIME
        } else {
            compute > io
        }
    }

    /// Writes `m` to a new file of the private directory, or `None` (and spilling off from
    /// then on) where the directory cannot be made or written.
    pub fn write(&mut self, m: &Matrix) -> Option<SpillFile> {
        if !self.enabled {
            return None;
        }
        let dir = match &self.dir {
            Some(d) => d.clone(),
            None => match make_private_dir(&self.parent) {
                Some(d) => self.dir.insert(d).clone(),
                None => {
                    self.enabled = false;
                    return None;
                }
            },
        };
        self.next_file += 1;
        let path = dir.join(format!("{}.lfb", self.next_file));
        let start = Instant::now();
        if write_binary(m, &path).is_err() {
            // A full disk or a directory removed under us: spilling stops, eviction goes on.
            let _ = std::fs::remove_file(&path);
            self.enabled = false;
            return None;
        }
        let disk_bytes = disk_bytes(m);
        let sparse = m.is_sparse();
        self.measured(disk_bytes, start.elapsed(), sparse, false);
        Some(SpillFile {
            path,
            sparse,
            disk_bytes,
        })
    }

    /// Folds a measured read or write into the bandwidth estimate.
    pub fn measured(&mut self, bytes: u64, took: Duration, sparse: bool, read: bool) {
        if bytes < MIN_MEASURED_BYTES || took.is_zero() {
            return;
        }
        let speed = bytes as f64 / MB / took.as_secs_f64();
        let b = &mut self.bandwidth;
        let estimate = match (read, sparse) {
            (true, false) => &mut b.read_dense,
            (true, true) => &mut b.read_sparse,
            (false, false) => &mut b.write_dense,
            (false, true) => &mut b.write_sparse,
        };
        *estimate = SMOOTHING * speed + (1.0 - SMOOTHING) * *estimate;
    }
}

impl Drop for Spiller {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            // Nothing to do about a failure here: the directory is in the temp dir's care.
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Reads a spilled matrix back in the format it was written from, and the time it took;
/// any error (a file damaged or removed) is the caller's cue to recompute.
pub(crate) fn read(file: &SpillFile) -> crate::error::Result<(Matrix, Duration)> {
    let start = Instant::now();
    let m = read_binary(&file.path)?;
    // `read_binary` chooses the format by sparsity; `round_trips_exactly` made sure the
    // conversion back is exact.
    let m = match (m, file.sparse) {
        (Matrix::Dense(d), true) => Matrix::Sparse(d.to_sparse()),
        (Matrix::Sparse(s), false) => Matrix::Dense(s.to_dense()?),
        (m, _) => m,
    };
    Ok((m, start.elapsed()))
}

/// Whether writing `m` and reading it back gives the very same matrix, bit for bit, in the
/// same format. The reader drops stored zeros of a CSR matrix (`-0.0` included) and converts
/// a matrix whose format does not fit its sparsity, which loses the sign of a dense matrix's
/// `-0.0` cells; it also recounts a dense matrix's non-zeros and refuses a file whose count
/// differs. A matrix failing this is evicted, not spilled.
pub(crate) fn round_trips_exactly(m: &Matrix) -> bool {
    match m {
        Matrix::Dense(d) => {
            let nnz = crate::matrix::count_nnz(&d.values);
            let converted = prefers_sparse(d.rows, d.cols, nnz);
            nnz == d.nnz
                && !(converted && d.values.iter().any(|v| v.to_bits() == (-0.0f64).to_bits()))
        }
        Matrix::Sparse(s) => s.check_structure().is_ok() && !s.values.contains(&0.0),
    }
}

/// The size of `m`'s file in the binary format.
pub(crate) fn disk_bytes(m: &Matrix) -> u64 {
    let body = match m {
        Matrix::Dense(d) => (d.values.len() as u64).saturating_mul(8),
        Matrix::Sparse(s) => ((s.rows as u64).saturating_add(1))
            .saturating_mul(8)
            .saturating_add((s.values.len() as u64).saturating_mul(12)),
    };
    body.saturating_add(FILE_OVERHEAD)
}

/// A new directory under `parent` (made first if missing), readable by this user only;
/// `None` where none can be made.
fn make_private_dir(parent: &Path) -> Option<PathBuf> {
    std::fs::create_dir_all(parent).ok()?;
    // A fresh name per attempt: `create_dir` fails on an existing path, so a directory some
    // other process placed there is never used.
    for _ in 0..16 {
        let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = parent.join(format!(
            "lafuse-reuse-{}-{n}-{nanos:08x}",
            std::process::id()
        ));
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        match builder.create(&dir) {
            Ok(()) => return Some(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(_) => return None,
        }
    }
    None
}
