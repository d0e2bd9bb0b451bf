//! SystemDS's text cell format (`format="text"`, also called IJV): one `row col value` line per
//! non-zero, 1-based.

use super::{fmt_f64, io_error, parse_f64};
use crate::error::{Axis, FileError, Result, RuntimeError};
use crate::matrix::Matrix;
use std::io::Write;
use std::path::Path;

/// Parses the `i j v` lines of a text-cell or MatrixMarket coordinate body into 0-based triples.
/// `first_line` is the 1-based number of the first line of `body`, for error messages.
pub(crate) fn parse_triples(
    path: &Path,
    body: &str,
    first_line: usize,
    pattern: bool,
) -> Result<Vec<(usize, usize, f64)>> {
    let mut out = Vec::new();
    for (k, line) in body.lines().enumerate() {
        let ln = first_line + k;
        let line = line.trim();
        if line.is_empty() || line.starts_with('%') {
            continue;
        }
        let mut it = line.split_whitespace();
        let mut index = |axis: Axis| -> Result<usize> {
            let f = it.next().ok_or_else(|| {
                RuntimeError::file(path, FileError::MissingIndex { line: ln, axis })
            })?;
            match f.parse::<usize>() {
                Ok(i) if i >= 1 => Ok(i - 1),
                _ => Err(RuntimeError::file(
                    path,
                    FileError::BadIndex {
                        line: ln,
                        axis,
                        token: f.to_string(),
                    },
                )),
            }
        };
        let i = index(Axis::Rows)?;
        let j = index(Axis::Columns)?;
        let v = if pattern {
            1.0
        } else {
            let f = it
                .next()
                .ok_or_else(|| RuntimeError::file(path, FileError::MissingValue { line: ln }))?;
            parse_f64(f).ok_or_else(|| {
                RuntimeError::file(
                    path,
                    FileError::BadNumber {
                        line: ln,
                        column: 3,
                        token: f.to_string(),
                    },
                )
            })?
        };
        out.push((i, j, v));
    }
    Ok(out)
}

/// Reads a text-cell file. Without known dimensions (from the `.mtd`), the largest indices
/// present define the shape.
pub fn read_text(path: &Path, dims: Option<(usize, usize)>) -> Result<Matrix> {
    let text = std::fs::read_to_string(path).map_err(|e| io_error(path, e))?;
    let triples = parse_triples(path, &text, 1, false)?;
    let (rows, cols) = dims.unwrap_or_else(|| {
        triples
            .iter()
            .fold((0, 0), |(r, c), &(i, j, _)| (r.max(i + 1), c.max(j + 1)))
    });
    Matrix::from_triples(rows, cols, triples)
        .map_err(|e| RuntimeError::file(path, FileError::Content { error: Box::new(e) }))
}

/// Writes the non-zeros as `i j v` lines (1-based), row by row.
pub fn write_text(m: &Matrix, path: &Path) -> Result<()> {
    super::write_atomically(path, |w| write_triples(m, w))
}

/// Writes the non-zeros of `m` as `i j v` lines (1-based).
pub(crate) fn write_triples(m: &Matrix, w: &mut dyn Write) -> std::io::Result<()> {
    let mut line = String::new();
    let mut emit = |i: usize, j: usize, v: f64, w: &mut dyn Write| -> std::io::Result<()> {
        line.clear();
        use std::fmt::Write as _;
        let _ = write!(line, "{} {} ", i + 1, j + 1);
        fmt_f64(&mut line, v);
        line.push('\n');
        w.write_all(line.as_bytes())
    };
    match m {
        Matrix::Dense(d) => {
            for i in 0..d.rows {
                for (j, &v) in d.row(i).iter().enumerate() {
                    if v != 0.0 {
                        emit(i, j, v, w)?;
                    }
                }
            }
        }
        Matrix::Sparse(s) => {
            for i in 0..s.rows {
                let (ci, cv) = s.row(i);
                for (&j, &v) in ci.iter().zip(cv) {
                    emit(i, j as usize, v, w)?;
                }
            }
        }
    }
    Ok(())
}
