//! CSV reading and writing, streamed in chunks of lines that are parsed and formatted in
//! parallel.

use super::{fmt_f64, io_error, parse_f64};
use crate::error::{FileError, Result, RuntimeError};
use crate::matrix::Matrix;
use rayon::prelude::*;
use std::io::Read;
use std::path::Path;

/// Lines per parallel parse task.
const LINES_PER_TASK: usize = 2048;

/// Bytes of text read, parsed and dropped at a time. Reading streams: the whole file is never
/// in memory, so reading a matrix takes about its own size plus a few of these chunks (it
/// took 3.4 times its size when the text was read whole).
const CHUNK_BYTES: usize = 8 << 20;

/// Reads a CSV file: one row per line, fields separated by `sep`, an optional header line to
/// skip. Empty fields read as 0 (SystemDS's default fill); blank lines are skipped. Malformed
/// numbers and ragged rows are user errors naming the file, line and column.
///
/// The file is read in chunks of whole lines ([`CHUNK_BYTES`]), each parsed in parallel and
/// appended to the values.
pub fn read_csv(path: &Path, header: bool, sep: &str) -> Result<Matrix> {
    read_csv_in_chunks(path, header, sep, CHUNK_BYTES)
}

/// [`read_csv`] reading `chunk_bytes` at a time (tests vary it so that lines straddle chunks).
fn read_csv_in_chunks(path: &Path, header: bool, sep: &str, chunk_bytes: usize) -> Result<Matrix> {
    if sep.is_empty() {
        return Err(RuntimeError::EmptyCsvSeparator);
    }
    let mut file = std::fs::File::open(path).map_err(|e| io_error(path, e))?;
    let mut parsed = Parsed {
        path,
        sep,
        header,
        lines_seen: 0,
        cols: None,
        rows: 0,
        values: Vec::new(),
    };
    let mut text: Vec<u8> = Vec::new();
    let mut eof = false;
    while !eof {
        // Top the chunk up by `chunk_bytes` past the partial line carried over (appended, not
        // zero-filled first).
        let n = (&mut file)
            .take(chunk_bytes.max(1) as u64)
            .read_to_end(&mut text)
            .map_err(|e| io_error(path, e))?;
        eof = n == 0;
        // Whole lines now; the last partial line waits for the next chunk (or ends the file).
        let cut = if eof {
            text.len()
        } else {
            match text.iter().rposition(|&b| b == b'\n') {
                Some(p) => p + 1,
                None => continue,
            }
        };
        let rest = text.split_off(cut);
        let chunk = std::str::from_utf8(&text).map_err(|_| {
            io_error(
                path,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "stream did not contain valid UTF-8",
                ),
            )
        })?;
        parsed.add_chunk(chunk)?;
        text = rest;
    }
    match parsed.cols {
        None => Matrix::zeros(0, 0),
        Some(cols) => Matrix::from_dense_values(parsed.rows, cols, parsed.values),
    }
}

/// What [`read_csv`] has read so far.
struct Parsed<'a> {
    path: &'a Path,
    sep: &'a str,
    header: bool,
    /// Lines of the file before the current chunk, blank ones included.
    lines_seen: usize,
    /// Fields per row, from the first data line.
    cols: Option<usize>,
    rows: usize,
    values: Vec<f64>,
}

impl Parsed<'_> {
    /// Parses the whole lines of `chunk` and appends their rows.
    fn add_chunk(&mut self, chunk: &str) -> Result<()> {
        let first_line = self.lines_seen + 1;
        let mut count = 0;
        // (1-based line number, content) of each data line.
        let lines: Vec<(usize, &str)> = chunk
            .lines()
            .enumerate()
            .inspect(|_| count += 1)
            .map(|(i, l)| (first_line + i, l.trim_end_matches('\r')))
            .filter(|&(ln, l)| {
                let header_line = self.header && ln == 1;
                !header_line && !l.trim().is_empty()
            })
            .collect();
        self.lines_seen += count;
        let Some(&(_, first)) = lines.first() else {
            return Ok(());
        };
        let cols = *self
            .cols
            .get_or_insert_with(|| first.split(self.sep).count());
        let (path, sep) = (self.path, self.sep);
        let parse_block = |block: &[(usize, &str)]| -> Result<Vec<f64>> {
            let mut out = Vec::with_capacity(block.len() * cols);
            for &(ln, line) in block {
                let mut n = 0;
                for (c, field) in line.split(sep).enumerate() {
                    let f = field.trim();
                    let v = if f.is_empty() {
                        0.0
                    } else {
                        parse_f64(f).ok_or_else(|| {
                            RuntimeError::file(
                                path,
                                FileError::BadNumber {
                                    line: ln,
                                    column: c + 1,
                                    token: f.to_string(),
                                },
                            )
                        })?
                    };
                    out.push(v);
                    n += 1;
                }
                if n != cols {
                    return Err(RuntimeError::file(
                        path,
                        FileError::RaggedRow {
                            line: ln,
                            expected: cols,
                            found: n,
                        },
                    ));
                }
            }
            Ok(out)
        };
        let blocks: Vec<Result<Vec<f64>>> =
            lines.par_chunks(LINES_PER_TASK).map(parse_block).collect();
        crate::matrix::try_grow(&mut self.values, lines.len() * cols)?;
        for b in blocks {
            self.values.extend_from_slice(&b?);
        }
        self.rows += lines.len();
        Ok(())
    }
}

/// Writes a matrix as CSV (SystemDS writes no header by default; with `header` a line
/// `C1,C2,...` is written first).
///
/// Rows are formatted in parallel a batch of blocks at a time and written before the next
/// batch, so the text of the whole matrix is never in memory; a sparse matrix is formatted
/// row by row from its non-zeros, never densified whole.
pub fn write_csv(m: &Matrix, path: &Path, header: bool, sep: &str) -> Result<()> {
    let (rows, cols) = m.shape();
    let fmt_rows = |r0: usize, r1: usize| {
        let mut s = String::new();
        let mut scattered = Vec::new();
        for i in r0..r1 {
            let row: &[f64] = match m {
                Matrix::Dense(d) => &d.values[i * cols..(i + 1) * cols],
                Matrix::Sparse(sp) => {
                    scattered.clear();
                    scattered.resize(cols, 0.0);
                    let (idx, val) = sp.row(i);
                    for (&j, &v) in idx.iter().zip(val) {
                        scattered[j as usize] = v;
                    }
                    &scattered
                }
            };
            for (j, &v) in row.iter().enumerate() {
                if j > 0 {
                    s.push_str(sep);
                }
                fmt_f64(&mut s, v);
            }
            s.push('\n');
        }
        s
    };
    let rows_per_task = (LINES_PER_TASK * 16 / cols.max(1)).max(1);
    let tasks = rows.div_ceil(rows_per_task);
    let per_batch = 2 * rayon::current_num_threads().max(1);
    super::write_atomically(path, |w| {
        if header {
            let h: Vec<String> = (1..=cols).map(|j| format!("C{j}")).collect();
            writeln!(w, "{}", h.join(sep))?;
        }
        for first in (0..tasks).step_by(per_batch) {
            let chunks: Vec<String> = (first..(first + per_batch).min(tasks))
                .into_par_iter()
                .map(|b| fmt_rows(b * rows_per_task, ((b + 1) * rows_per_task).min(rows)))
                .collect();
            for c in chunks {
                w.write_all(c.as_bytes())?;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::super::testdir::TempDir;
    use super::*;

    #[test]
    fn parses_header_separator_blanks_and_specials() {
        let dir = TempDir::new();
        let p = dir.path().join("data.csv");
        std::fs::write(&p, "a;b;c\n1;2.5; 3\r\n\n-1e3;;NaN\nInfinity;-inf;0\n").unwrap();
        let m = read_csv(&p, true, ";").unwrap();
        m.validate().unwrap();
        assert_eq!(m.shape(), (3, 3));
        assert_eq!(m.get(0, 1), 2.5);
        assert_eq!(m.get(1, 0), -1000.0);
        assert_eq!(m.get(1, 1), 0.0);
        assert!(m.get(1, 2).is_nan());
        assert_eq!(m.get(2, 0), f64::INFINITY);
        assert_eq!(m.get(2, 1), f64::NEG_INFINITY);
    }

    #[test]
    fn lines_straddling_chunks_read_as_in_one_chunk() {
        let dir = TempDir::new();
        let p = dir.path().join("data.csv");
        let text = "a,b\r\n1,2.5\n\n  \n-3,4e-2\r\n5,\n7,8";
        std::fs::write(&p, text).unwrap();
        let whole = read_csv_in_chunks(&p, true, ",", 1 << 20).unwrap();
        assert_eq!(whole.shape(), (4, 2));
        for chunk in 1..text.len() + 2 {
            assert_eq!(
                read_csv_in_chunks(&p, true, ",", chunk).unwrap(),
                whole,
                "{chunk}"
            );
        }
        // Line numbers count every line of the file, across chunks.
        std::fs::write(&p, "1,2\n\n3,4\n5,x\n").unwrap();
        for chunk in [1, 3, 5, 64] {
            let e = read_csv_in_chunks(&p, false, ",", chunk)
                .unwrap_err()
                .to_string();
            assert!(
                e.ends_with("data.csv:4: column 2: cannot parse 'x' as a number"),
                "{e}"
            );
        }
        // A multi-byte character split between chunks is whole in one of them.
        std::fs::write(&p, "1,2\n3,\u{e9}\n").unwrap();
        for chunk in 1..12 {
            let e = read_csv_in_chunks(&p, false, ",", chunk)
                .unwrap_err()
                .to_string();
            assert!(e.contains("cannot parse '\u{e9}'"), "{chunk}: {e}");
        }
        std::fs::write(&p, b"1,2\n3,\xff\n").unwrap();
        assert!(read_csv_in_chunks(&p, false, ",", 2).is_err());
    }

    #[test]
    fn errors_name_file_line_and_column() {
        let dir = TempDir::new();
        let p = dir.path().join("data.csv");
        std::fs::write(&p, "1,2\n3,4\n5,abc\n").unwrap();
        let e = read_csv(&p, false, ",").unwrap_err().to_string();
        assert!(
            e.ends_with("data.csv:3: column 2: cannot parse 'abc' as a number"),
            "{e}"
        );
        std::fs::write(&p, "1,2\n3\n").unwrap();
        let e = read_csv(&p, false, ",").unwrap_err().to_string();
        assert!(
            e.ends_with("data.csv:2: expected 2 columns, found 1"),
            "{e}"
        );
        let e = read_csv(&dir.path().join("missing.csv"), false, ",")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("missing.csv") && e.contains("no such file"),
            "{e}"
        );
    }

    #[test]
    fn write_then_read() {
        let dir = TempDir::new();
        let p = dir.path().join("out.csv");
        let m = Matrix::from_dense_values(2, 2, vec![1.0, 0.0, f64::NAN, -2.5e-8]).unwrap();
        write_csv(&m, &p, false, ",").unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "1.0,0.0\nNaN,-2.5e-8\n"
        );
        let back = read_csv(&p, false, ",").unwrap();
        assert!(crate::kernels::testutil::same(&back, &m));
    }

    #[test]
    fn sparse_matrices_write_as_their_dense_form_in_many_batches() {
        let dir = TempDir::new();
        let (sp, dp) = (dir.path().join("s.csv"), dir.path().join("d.csv"));
        // Enough rows for several batches of tasks at three columns.
        let s = crate::kernels::testutil::rand(200_000, 3, 0.1, 9);
        assert!(s.is_sparse());
        let d = Matrix::Dense(s.to_dense().unwrap());
        write_csv(&s, &sp, true, ";").unwrap();
        write_csv(&d, &dp, true, ";").unwrap();
        assert_eq!(std::fs::read(&sp).unwrap(), std::fs::read(&dp).unwrap());
        assert!(crate::kernels::testutil::same(
            &read_csv(&sp, true, ";").unwrap(),
            &d
        ));
    }
}
