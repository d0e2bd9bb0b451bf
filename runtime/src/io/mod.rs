//! Reading and writing matrices: CSV, SystemDS's text (`i j v`) format, MatrixMarket, and a fast
//! binary format of our own; plus SystemDS's `.mtd` JSON metadata sidecar, written next to every
//! file and consulted on read to learn the format, the CSV header flag and the separator.
//!
//! Errors about files are user errors that name the path (and the line for parse errors).

pub mod binary;
pub mod csv;
pub mod matrix_market;
pub mod text;

pub use binary::{read_binary, write_binary};
pub use csv::{read_csv, write_csv};
pub use matrix_market::{read_matrix_market, write_matrix_market};
pub use text::{read_text, write_text};

use crate::error::{FileError, Internal, Result, RuntimeError, Unsupported};
use crate::matrix::Matrix;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// On-disk matrix formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FileFormat {
    /// Comma- (or `sep`-) separated values, one row per line.
    Csv,
    /// SystemDS's text cell format: one `row col value` line (1-based) per non-zero.
    Text,
    /// MatrixMarket (`coordinate` or `array`).
    MatrixMarket,
    /// lafuse's own binary format (see [`binary`]).
    Binary,
}

impl FileFormat {
    /// The name used in DML's `format=` argument and in `.mtd` files.
    pub fn name(&self) -> &'static str {
        match self {
            FileFormat::Csv => "csv",
            FileFormat::Text => "text",
            FileFormat::MatrixMarket => "mm",
            FileFormat::Binary => "binary",
        }
    }

    /// Inverse of [`FileFormat::name`] (also accepts `"ijv"` and `"matrixmarket"`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "csv" => Some(FileFormat::Csv),
            "text" | "ijv" => Some(FileFormat::Text),
            "mm" | "matrixmarket" => Some(FileFormat::MatrixMarket),
            "binary" => Some(FileFormat::Binary),
            _ => None,
        }
    }
}

/// CSV options (SystemDS defaults: no header, `,`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsvOptions {
    pub header: bool,
    pub sep: String,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions {
            header: false,
            sep: ",".into(),
        }
    }
}

/// The `.mtd` sidecar, as SystemDS writes it (unknown fields are ignored on read).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    #[serde(default = "matrix_str")]
    pub data_type: String,
    #[serde(default = "double_str")]
    pub value_type: String,
    #[serde(default)]
    pub rows: Option<i64>,
    #[serde(default)]
    pub cols: Option<i64>,
    #[serde(default)]
    pub nnz: Option<i64>,
    #[serde(default)]
    pub format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sep: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
}

fn matrix_str() -> String {
    "matrix".into()
}
fn double_str() -> String {
    "double".into()
}

/// The sidecar path of a data file: `path` + `.mtd`.
pub fn metadata_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".mtd");
    PathBuf::from(p)
}

/// Reads `path.mtd` if it exists.
pub fn read_metadata(path: &Path) -> Result<Option<Metadata>> {
    let mp = metadata_path(path);
    if !mp.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&mp).map_err(|e| io_error(&mp, e))?;
    serde_json::from_str(&text).map(Some).map_err(|e| {
        RuntimeError::file(
            &mp,
            FileError::Metadata {
                detail: e.to_string(),
            },
        )
    })
}

/// Writes `path.mtd` (atomically, as every file lafuse writes).
pub fn write_metadata(path: &Path, md: &Metadata) -> Result<()> {
    let mp = metadata_path(path);
    let text = serde_json::to_string_pretty(md).map_err(|e| {
        RuntimeError::Internal(Internal::MetadataSerialisation {
            detail: e.to_string(),
        })
    })?;
    write_atomically(&mp, |w| w.write_all((text + "\n").as_bytes()))
}

/// Writes `path` so that no reader and no failure ever sees a partial file: the bytes go into
/// a new temporary file in the same directory, are flushed to the disk, and the temporary
/// file is then renamed over `path` (one atomic step). A failure at any point (a full disk, a
/// write error) removes the temporary file and leaves `path` as it was.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Unique among concurrent writers of this process and of others.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let serial = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{serial}.tmp", std::process::id()));
    let result = (|| -> std::io::Result<()> {
        let file = std::fs::File::options()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        write(&mut w)?;
        w.flush()?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        // The rename itself is durable once the directory is.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_error(path, e)
    })
}

/// A user error for a failed file operation, naming the path.
pub(crate) fn io_error(path: &Path, e: std::io::Error) -> RuntimeError {
    let cause = if e.kind() == std::io::ErrorKind::NotFound {
        FileError::NotFound
    } else {
        FileError::Io(e.into())
    };
    RuntimeError::file(path, cause)
}

/// Reads a matrix. The format is `format` if given, else the one in `path.mtd`, else guessed
/// from the content (binary magic, a MatrixMarket banner, otherwise CSV). CSV options come from
/// `csv` if given, else from the metadata, else SystemDS's defaults.
pub fn read_matrix(
    path: &Path,
    format: Option<FileFormat>,
    csv: Option<&CsvOptions>,
) -> Result<Matrix> {
    let md = read_metadata(path)?;
    let md_format = match md.as_ref().and_then(|m| m.format.as_deref()) {
        Some(name) => Some(FileFormat::from_name(name).ok_or_else(|| {
            RuntimeError::Unsupported(Unsupported::FileFormat {
                name: name.to_string(),
                metadata: metadata_path(path),
            })
        })?),
        None => None,
    };
    let format = match format.or(md_format) {
        Some(f) => f,
        None => sniff(path)?,
    };
    let m = match format {
        FileFormat::Csv => {
            let opts = match csv {
                Some(o) => o.clone(),
                None => CsvOptions {
                    header: md.as_ref().and_then(|m| m.header).unwrap_or(false),
                    sep: md
                        .as_ref()
                        .and_then(|m| m.sep.clone())
                        .unwrap_or_else(|| ",".into()),
                },
            };
            read_csv(path, opts.header, &opts.sep)?
        }
        FileFormat::Text => read_text(path, md.as_ref().and_then(known_dims))?,
        FileFormat::MatrixMarket => read_matrix_market(path)?,
        FileFormat::Binary => read_binary(path)?,
    };
    if let Some((r, c)) = md.as_ref().and_then(known_dims) {
        if (r, c) != m.shape() {
            // An empty CSV file cannot carry its shape; the metadata does.
            if m.cells() == 0 && r * c == 0 {
                return Matrix::zeros(r, c);
            }
            return Err(RuntimeError::file(
                path,
                FileError::MetadataShape {
                    metadata: (r, c),
                    file: m.shape(),
                },
            ));
        }
    }
    Ok(m)
}

/// What a matrix file states of its size without its data being read: rows, columns and,
/// where stated, non-zeros.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatedDims {
    pub rows: usize,
    pub cols: usize,
    pub nnz: Option<usize>,
}

/// The size the matrix file at `path` states, from its `.mtd` sidecar or else from the header
/// of a lafuse binary or MatrixMarket file, reading no data: what the compiler plans a block's
/// `read` with (as SystemDS reads sizes from metadata at compile time). `None` where neither
/// states it (a CSV without metadata) or the file cannot be read as far as that; reading the
/// file then says why, and a size beyond [`MAX_DIM`](crate::matrix::MAX_DIM) is left to it too.
pub fn stated_dims(path: &Path) -> Option<StatedDims> {
    use std::io::{BufRead, Read};
    let within = |d: StatedDims| {
        (d.rows <= crate::matrix::MAX_DIM && d.cols <= crate::matrix::MAX_DIM).then_some(d)
    };
    if let Some(md) = read_metadata(path).ok().flatten() {
        if let Some((rows, cols)) = known_dims(&md) {
            let nnz = md.nnz.and_then(|n| usize::try_from(n).ok());
            return within(StatedDims { rows, cols, nnz });
        }
    }
    let file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut r = std::io::BufReader::new(file);
    let head = r.fill_buf().ok()?;
    if head.starts_with(binary::MAGIC) {
        let mut bytes = [0u8; binary::HEADER_LEN];
        r.read_exact(&mut bytes).ok()?;
        let header = binary::Header::decode(&bytes)?;
        let dim = |x: u64| usize::try_from(x).ok();
        return within(StatedDims {
            rows: dim(header.rows)?,
            cols: dim(header.cols)?,
            nnz: dim(header.nnz),
        });
    }
    if head.starts_with(b"%%MatrixMarket") {
        // The size line is the first after the banner and comments. A `coordinate general`
        // file states how many entries it lists, which bounds its non-zeros (an explicit zero
        // among them is dropped on read); a symmetric one lists half of them, and an `array`
        // counts none, so only the shape is taken from those.
        let mut lines = r.lines();
        let banner = lines.next()?.ok()?.to_ascii_lowercase();
        let words: Vec<&str> = banner.split_whitespace().collect();
        let lists_every_entry =
            words.get(2) == Some(&"coordinate") && words.get(4) == Some(&"general");
        for line in lines.take(10_000) {
            let line = line.ok()?;
            let t = line.trim();
            if t.is_empty() || t.starts_with('%') {
                continue;
            }
            let mut w = t.split_whitespace().map(|x| x.parse::<usize>().ok());
            let (rows, cols) = (w.next()??, w.next()??);
            let entries = if lists_every_entry {
                w.next().flatten()
            } else {
                None
            };
            return within(StatedDims {
                rows,
                cols,
                nnz: entries.map(|n| n.min(rows.saturating_mul(cols))),
            });
        }
    }
    None
}

/// Dimensions from metadata when both are known (SystemDS writes -1 for unknown).
fn known_dims(md: &Metadata) -> Option<(usize, usize)> {
    match (md.rows, md.cols) {
        (Some(r), Some(c)) if r >= 0 && c >= 0 => Some((r as usize, c as usize)),
        _ => None,
    }
}

fn sniff(path: &Path) -> Result<FileFormat> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| io_error(path, e))?;
    let mut head = [0u8; 14];
    let n = f.read(&mut head).map_err(|e| io_error(path, e))?;
    let head = &head[..n];
    Ok(if head.starts_with(binary::MAGIC) {
        FileFormat::Binary
    } else if head.starts_with(b"%%MatrixMarket") {
        FileFormat::MatrixMarket
    } else {
        FileFormat::Csv
    })
}

/// Writes a matrix in `format` and its `.mtd` sidecar, each atomically
/// ([`write_atomically`]), the data first: a write that fails leaves the old file and its
/// metadata as they were. Missing parent directories are created, as SystemDS does
/// (`write(X, $out + "/X")` into a fresh directory works in both systems).
pub fn write_matrix(m: &Matrix, path: &Path, format: FileFormat, csv: &CsvOptions) -> Result<()> {
    if let Some(parent) = path.parent() {
        if !parent.as_os_str().is_empty() && !parent.exists() {
            std::fs::create_dir_all(parent).map_err(|e| io_error(parent, e))?;
        }
    }
    match format {
        FileFormat::Csv => write_csv(m, path, csv.header, &csv.sep)?,
        FileFormat::Text => write_text(m, path)?,
        FileFormat::MatrixMarket => write_matrix_market(m, path)?,
        FileFormat::Binary => write_binary(m, path)?,
    }
    let is_csv = format == FileFormat::Csv;
    write_metadata(
        path,
        &Metadata {
            data_type: matrix_str(),
            value_type: double_str(),
            rows: Some(m.rows() as i64),
            cols: Some(m.cols() as i64),
            nnz: Some(m.nnz() as i64),
            format: Some(format.name().into()),
            header: is_csv.then_some(csv.header),
            sep: is_csv.then(|| csv.sep.clone()),
            author: Some("lafuse".into()),
        },
    )
}

/// Formats a value so that Java's `Double.parseDouble` and Rust's `parse` read it back exactly
/// (shortest round-trip digits; `NaN`, `Infinity`, `-Infinity` as Java spells them).
pub(crate) fn fmt_f64(out: &mut String, v: f64) {
    use std::fmt::Write;
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "Infinity" } else { "-Infinity" });
    } else {
        let _ = write!(out, "{v:?}");
    }
}

/// Parses a number as SystemDS accepts it (also Java's `Infinity`/`NaN` spellings).
pub(crate) fn parse_f64(s: &str) -> Option<f64> {
    match s {
        "Infinity" | "+Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        _ => s.parse::<f64>().ok(),
    }
}

#[cfg(test)]
pub(crate) mod testdir {
    //! Temporary directories for I/O tests (removed on drop).
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicUsize, Ordering};

    pub struct TempDir(PathBuf);

    impl TempDir {
        pub fn new() -> Self {
            static N: AtomicUsize = AtomicUsize::new(0);
            let p = std::env::temp_dir().join(format!(
                "lafuse-io-test-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::SeqCst)
            ));
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testdir::TempDir;
    use super::*;
    use crate::kernels::testutil::{rand, same};

    /// The names in `dir`, sorted.
    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_write_that_fails_half_way_leaves_the_old_file_and_metadata_intact() {
        let dir = TempDir::new();
        let old = rand(20, 7, 1.0, 3);
        for f in [
            FileFormat::Csv,
            FileFormat::Text,
            FileFormat::MatrixMarket,
            FileFormat::Binary,
        ] {
            let p = dir.path().join(format!("x.{}", f.name()));
            write_matrix(&old, &p, f, &CsvOptions::default()).unwrap();
            let (data, meta) = (
                std::fs::read(&p).unwrap(),
                std::fs::read(metadata_path(&p)).unwrap(),
            );
            let before = listing(dir.path());
            // The writer fails after part of the file went out, as a full disk would.
            for fail_after in [0usize, 1, 100, 4096] {
                let err = write_atomically(&p, |w| {
                    w.write_all(&vec![b'9'; fail_after])?;
                    Err(std::io::Error::other("no space left on device"))
                })
                .unwrap_err();
                assert!(err.to_string().contains("no space left"), "{err}");
                assert_eq!(std::fs::read(&p).unwrap(), data, "{f:?} after {fail_after}");
                assert_eq!(std::fs::read(metadata_path(&p)).unwrap(), meta);
                assert_eq!(listing(dir.path()), before, "no temporary file is left");
            }
            assert!(same(&read_matrix(&p, None, None).unwrap(), &old));
        }
    }

    #[test]
    fn readers_during_rewrites_see_a_whole_old_or_whole_new_file() {
        let dir = TempDir::new();
        let p = dir.path().join("x.bin");
        let (a, b) = (rand(300, 40, 1.0, 5), rand(300, 40, 0.2, 6));
        write_matrix(&a, &p, FileFormat::Binary, &CsvOptions::default()).unwrap();
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for i in 0..40 {
                    let m = if i % 2 == 0 { &b } else { &a };
                    write_binary(m, &p).unwrap();
                }
                done.store(true, std::sync::atomic::Ordering::Relaxed);
            });
            let mut reads = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) || reads < 20 {
                let got = read_binary(&p).unwrap();
                assert!(same(&got, &a) || same(&got, &b), "a partial file was read");
                reads += 1;
            }
        });
    }

    #[test]
    fn every_format_roundtrips_with_metadata() {
        let dir = TempDir::new();
        let mut vals = rand(13, 9, 0.3, 1).into_dense_values().unwrap();
        vals[3] = f64::NAN;
        vals[4] = f64::NEG_INFINITY;
        vals[5] = 1e-300;
        vals[6] = 0.1 + 0.2;
        let m = Matrix::from_dense_values(13, 9, vals).unwrap();
        for f in [
            FileFormat::Csv,
            FileFormat::Text,
            FileFormat::MatrixMarket,
            FileFormat::Binary,
        ] {
            for x in crate::kernels::testutil::both(&m) {
                let p = dir.path().join(format!("m.{}", f.name()));
                let opts = CsvOptions {
                    header: true,
                    sep: ";".into(),
                };
                write_matrix(&x, &p, f, &opts).unwrap();
                let md = read_metadata(&p).unwrap().unwrap();
                assert_eq!(
                    (md.rows, md.cols, md.nnz),
                    (Some(13), Some(9), Some(m.nnz() as i64))
                );
                assert_eq!(md.format.as_deref(), Some(f.name()));
                // Format, header and separator come from the metadata.
                let back = read_matrix(&p, None, None).unwrap();
                back.validate().unwrap();
                assert!(same(&back, &m), "{f:?}");
                assert_eq!(back.is_sparse(), m.is_sparse());
            }
        }
    }

    #[test]
    fn write_creates_missing_parent_directories() {
        let dir = TempDir::new();
        let m = rand(3, 2, 1.0, 3);
        let p = dir.path().join("fresh").join("deeper").join("X");
        write_matrix(&m, &p, FileFormat::Binary, &CsvOptions::default()).unwrap();
        assert!(same(&read_matrix(&p, None, None).unwrap(), &m));
        // A parent that is a file is a user error naming the path, not a panic.
        let blocker = dir.path().join("afile");
        std::fs::write(&blocker, b"x").unwrap();
        let e = write_matrix(
            &m,
            &blocker.join("X"),
            FileFormat::Csv,
            &CsvOptions::default(),
        )
        .unwrap_err();
        assert_eq!(e.fault(), lafuse_core::Fault::User, "{e}");
    }

    #[test]
    fn sniffing_without_metadata_and_missing_files() {
        let dir = TempDir::new();
        let m = rand(4, 3, 1.0, 2);
        let p = dir.path().join("b");
        write_binary(&m, &p).unwrap();
        assert!(same(&read_matrix(&p, None, None).unwrap(), &m));
        let p = dir.path().join("mm");
        write_matrix_market(&m, &p).unwrap();
        assert!(same(&read_matrix(&p, None, None).unwrap(), &m));
        let missing = dir.path().join("nope.csv");
        let e = read_matrix(&missing, None, None).unwrap_err();
        assert!(matches!(
            e,
            RuntimeError::File {
                cause: FileError::NotFound,
                ..
            }
        ));
        assert!(e.to_string().contains("nope.csv"), "{e}");
    }

    #[test]
    fn stated_dims_come_from_metadata_or_headers_never_from_data() {
        let dir = TempDir::new();
        let m = rand(7, 5, 0.3, 4);
        let csv = CsvOptions::default();
        for format in [
            FileFormat::Csv,
            FileFormat::Binary,
            FileFormat::MatrixMarket,
            FileFormat::Text,
        ] {
            let p = dir.path().join(format.name());
            write_matrix(&m, &p, format, &csv).unwrap();
            let stated = stated_dims(&p).unwrap();
            assert_eq!((stated.rows, stated.cols), (7, 5), "{format:?}");
            assert_eq!(stated.nnz, Some(m.nnz()), "{format:?}");
            // Without the sidecar only the binary and MatrixMarket headers state a size.
            std::fs::remove_file(metadata_path(&p)).unwrap();
            let header = stated_dims(&p);
            match format {
                FileFormat::Binary => assert_eq!(header, Some(stated)),
                // The header of a `coordinate general` file counts its entries.
                FileFormat::MatrixMarket => assert_eq!(header, Some(stated)),
                _ => assert_eq!(header, None, "{format:?}"),
            }
        }
        let huge = dir.path().join("huge.mtx");
        std::fs::write(
            &huge,
            "%%MatrixMarket matrix coordinate real general\n% c\n3000000000 2 1\n",
        )
        .unwrap();
        assert_eq!(
            stated_dims(&huge),
            None,
            "beyond MAX_DIM: left to the reader"
        );
        assert_eq!(stated_dims(&dir.path().join("missing.csv")), None);
    }

    /// A MatrixMarket file without metadata states its non-zeros where its header counts every
    /// entry (`coordinate general`, as lafuse and SystemDS write it): planned without them, a
    /// block reading it inside an expression chose other fused operators than for the same
    /// data with a `.mtd` (`tests/read_from_files.rs`, pipeline_linreg). A symmetric file lists
    /// half its non-zeros and an array file counts none; a count above the cells is capped.
    #[test]
    fn matrix_market_headers_state_nnz_where_they_count_every_entry() {
        let dir = TempDir::new();
        let mm = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            stated_dims(&p).map(|d| (d.rows, d.cols, d.nnz))
        };
        assert_eq!(
            mm(
                "sym.mtx",
                "%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n2 1 5\n3 3 1.5\n"
            ),
            Some((3, 3, None))
        );
        assert_eq!(
            mm(
                "array.mtx",
                "%%MatrixMarket matrix array real general\n2 1\n1\n0\n"
            ),
            Some((2, 1, None))
        );
        assert_eq!(
            mm(
                "general.mtx",
                "%%MatrixMarket matrix COORDINATE real GENERAL\n% c\n2 2 1\n1 2 4\n"
            ),
            Some((2, 2, Some(1)))
        );
        assert_eq!(
            mm(
                "duplicates.mtx",
                "%%MatrixMarket matrix coordinate real general\n1 2 3\n1 1 1\n1 1 2\n1 2 3\n"
            ),
            Some((1, 2, Some(2)))
        );
    }
}
