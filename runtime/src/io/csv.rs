//! CSV reading (parallel parse) and writing.

use super::{fmt_f64, io_error, parse_f64};
use crate::error::{FileError, Result, RuntimeError};
use crate::matrix::Matrix;
use rayon::prelude::*;
use std::path::Path;

/// Lines per parallel parse task.
const LINES_PER_TASK: usize = 2048;

/// Reads a CSV file: one row per line, fields separated by `sep`, an optional header line to
/// skip. Empty fields read as 0 (SystemDS's default fill); blank lines are skipped. Malformed
/// numbers and ragged rows are user errors naming the file, line and column.
pub fn read_csv(path: &Path, header: bool, sep: &str) -> Result<Matrix> {
    if sep.is_empty() {
        return Err(RuntimeError::EmptyCsvSeparator);
    }
    let text = std::fs::read_to_string(path).map_err(|e| io_error(path, e))?;
    // (1-based line number, content) of each data line.
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .skip(header as usize)
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r')))
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    let Some(&(_, first)) = lines.first() else {
        return Matrix::zeros(0, 0);
    };
    let cols = first.split(sep).count();
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
    let blocks: Vec<Result<Vec<f64>>> = lines.par_chunks(LINES_PER_TASK).map(parse_block).collect();
    let mut values = crate::matrix::try_with_capacity(lines.len() * cols)?;
    for b in blocks {
        values.extend_from_slice(&b?);
    }
    Matrix::from_dense_values(lines.len(), cols, values)
}

/// Writes a matrix as CSV (SystemDS writes no header by default; with `header` a line
/// `C1,C2,...` is written first).
pub fn write_csv(m: &Matrix, path: &Path, header: bool, sep: &str) -> Result<()> {
    let (rows, cols) = m.shape();
    let d = m.dense_cow()?;
    let fmt_rows = |r0: usize, r1: usize| {
        let mut s = String::new();
        for i in r0..r1 {
            for (j, &v) in d.values[i * cols..(i + 1) * cols].iter().enumerate() {
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
    let chunks: Vec<String> = (0..rows.div_ceil(rows_per_task))
        .into_par_iter()
        .map(|b| fmt_rows(b * rows_per_task, ((b + 1) * rows_per_task).min(rows)))
        .collect();
    super::write_atomically(path, |w| {
        if header {
            let h: Vec<String> = (1..=cols).map(|j| format!("C{j}")).collect();
            writeln!(w, "{}", h.join(sep))?;
        }
        for c in chunks {
            w.write_all(c.as_bytes())?;
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
}
