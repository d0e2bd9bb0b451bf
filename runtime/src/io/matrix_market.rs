//! MatrixMarket files: read `coordinate` (real, integer or pattern; general, symmetric or
//! skew-symmetric) and `array` (real or integer, general); write `coordinate real general`.

use super::text::{parse_triples, write_triples};
use super::{io_error, parse_f64};
use crate::error::{FileError, MatrixMarketFeature, Result, RuntimeError, Unsupported};
use crate::matrix::Matrix;
use std::path::Path;

/// Reads a MatrixMarket file.
pub fn read_matrix_market(path: &Path) -> Result<Matrix> {
    let text = std::fs::read_to_string(path).map_err(|e| io_error(path, e))?;
    let malformed = |cause: FileError| RuntimeError::file(path, cause);
    let unsupported = |feature: MatrixMarketFeature, value: &str| {
        RuntimeError::Unsupported(Unsupported::MatrixMarket {
            feature,
            value: value.to_string(),
            path: path.to_path_buf(),
        })
    };
    let mut lines = text.lines().enumerate();
    let banner = lines.next().map(|(_, l)| l).unwrap_or("");
    let words: Vec<String> = banner
        .split_whitespace()
        .map(|w| w.to_ascii_lowercase())
        .collect();
    if words.len() != 5 || words[0] != "%%matrixmarket" || words[1] != "matrix" {
        return Err(malformed(FileError::NotMatrixMarket {
            banner: banner.to_string(),
        }));
    }
    let (layout, field, symmetry) = (words[2].as_str(), words[3].as_str(), words[4].as_str());
    if !matches!(field, "real" | "integer" | "pattern" | "double") {
        return Err(unsupported(MatrixMarketFeature::Field, field));
    }
    if !matches!(symmetry, "general" | "symmetric" | "skew-symmetric") {
        return Err(unsupported(MatrixMarketFeature::Symmetry, symmetry));
    }
    // Skip comments up to the size line.
    let (size_ln, size_line) = lines
        .by_ref()
        .find(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('%'))
        .ok_or_else(|| malformed(FileError::MissingSizeLine))?;
    let size_ln = size_ln + 1;
    let dims: Vec<usize> = size_line
        .split_whitespace()
        .map(|w| w.parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| {
            malformed(FileError::BadSizeLine {
                line: size_ln,
                text: size_line.to_string(),
            })
        })?;
    // The body starts after the size line; find its byte offset to hand it over in one piece.
    let body_start = text
        .lines()
        .take(size_ln)
        .map(|l| l.len() + 1)
        .sum::<usize>()
        .min(text.len());
    let body = &text[body_start..];
    match layout {
        "coordinate" => {
            let [rows, cols, nnz] = dims[..] else {
                return Err(malformed(FileError::SizeLineFields {
                    line: size_ln,
                    expected: "rows cols nnz",
                    text: size_line.to_string(),
                }));
            };
            let mut triples = parse_triples(path, body, size_ln + 1, field == "pattern")?;
            if triples.len() != nnz {
                return Err(malformed(FileError::EntryCount {
                    announced: nnz,
                    found: triples.len(),
                }));
            }
            if symmetry != "general" {
                let sign = if symmetry == "skew-symmetric" {
                    -1.0
                } else {
                    1.0
                };
                let mirrored: Vec<_> = triples
                    .iter()
                    .filter(|&&(i, j, _)| i != j)
                    .map(|&(i, j, v)| (j, i, sign * v))
                    .collect();
                triples.extend(mirrored);
            }
            Matrix::from_triples(rows, cols, triples)
                .map_err(|e| malformed(FileError::Content { error: Box::new(e) }))
        }
        "array" => {
            if symmetry != "general" {
                return Err(unsupported(MatrixMarketFeature::ArraySymmetry, symmetry));
            }
            let [rows, cols] = dims[..] else {
                return Err(malformed(FileError::SizeLineFields {
                    line: size_ln,
                    expected: "rows cols",
                    text: size_line.to_string(),
                }));
            };
            // Grown from the file's values, not reserved from its header: a header may claim
            // any size.
            let mut vals = Vec::new();
            for (k, line) in body.lines().enumerate() {
                for f in line.split_whitespace() {
                    if f.starts_with('%') {
                        break;
                    }
                    let v = parse_f64(f).ok_or_else(|| {
                        malformed(FileError::BadArrayValue {
                            line: size_ln + 1 + k,
                            token: f.to_string(),
                        })
                    })?;
                    vals.push(v);
                }
            }
            if rows.checked_mul(cols) != Some(vals.len()) {
                return Err(malformed(FileError::ArrayValueCount {
                    shape: (rows, cols),
                    found: vals.len(),
                }));
            }
            // Array values are stored column by column.
            let mut out = crate::matrix::try_alloc_zeroed(rows * cols)?;
            for (p, v) in vals.into_iter().enumerate() {
                out[(p % rows.max(1)) * cols + p / rows.max(1)] = v;
            }
            Matrix::from_dense_values(rows, cols, out)
        }
        other => Err(unsupported(MatrixMarketFeature::Layout, other)),
    }
}

/// Writes `coordinate real general` with 1-based indices, row by row.
pub fn write_matrix_market(m: &Matrix, path: &Path) -> Result<()> {
    super::write_atomically(path, |w| {
        writeln!(w, "%%MatrixMarket matrix coordinate real general")?;
        writeln!(w, "{} {} {}", m.rows(), m.cols(), m.nnz())?;
        write_triples(m, w)
    })
}

#[cfg(test)]
mod tests {
    use super::super::testdir::TempDir;
    use super::*;

    #[test]
    fn reads_coordinate_symmetric_pattern_and_array() {
        let dir = TempDir::new();
        let p = dir.path().join("a.mtx");
        std::fs::write(
            &p,
            "%%MatrixMarket matrix coordinate real symmetric\n% c\n3 3 2\n2 1 5\n3 3 1.5\n",
        )
        .unwrap();
        let m = read_matrix_market(&p).unwrap();
        m.validate().unwrap();
        assert_eq!((m.get(1, 0), m.get(0, 1), m.get(2, 2)), (5.0, 5.0, 1.5));
        std::fs::write(
            &p,
            "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n",
        )
        .unwrap();
        assert_eq!(read_matrix_market(&p).unwrap().get(0, 1), 1.0);
        std::fs::write(
            &p,
            "%%MatrixMarket matrix array real general\n2 3\n1\n2\n3\n4\n5\n6\n",
        )
        .unwrap();
        let m = read_matrix_market(&p).unwrap();
        assert_eq!(
            m.into_dense_values().unwrap(),
            vec![1.0, 3.0, 5.0, 2.0, 4.0, 6.0]
        );
    }

    #[test]
    fn malformed_files_are_user_errors() {
        let dir = TempDir::new();
        let p = dir.path().join("bad.mtx");
        std::fs::write(
            &p,
            "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 x 3\n",
        )
        .unwrap();
        let e = read_matrix_market(&p).unwrap_err().to_string();
        assert!(e.contains("bad.mtx:3"), "{e}");
        std::fs::write(
            &p,
            "%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 3\n",
        )
        .unwrap();
        assert!(read_matrix_market(&p)
            .unwrap_err()
            .to_string()
            .contains("outside"));
        std::fs::write(&p, "hello\n").unwrap();
        assert!(read_matrix_market(&p).is_err());
        std::fs::write(
            &p,
            "%%MatrixMarket matrix coordinate complex general\n1 1 0\n",
        )
        .unwrap();
        assert!(matches!(
            read_matrix_market(&p).unwrap_err(),
            RuntimeError::Unsupported(_)
        ));
    }

    /// A header may claim any size: beyond SystemDS's limit it is an error before anything is
    /// allocated (a CSR of 3e9 rows needs 24 GB of row pointers), and an array's values are not
    /// reserved from its header (a terabyte for one value).
    #[test]
    fn headers_claiming_huge_sizes_are_user_errors() {
        let dir = TempDir::new();
        let p = dir.path().join("huge.mtx");
        std::fs::write(
            &p,
            "%%MatrixMarket matrix coordinate real general\n3000000000 3 1\n1 1 2\n",
        )
        .unwrap();
        let e = read_matrix_market(&p).unwrap_err().to_string();
        assert!(e.contains("at most 2147483647 rows"), "{e}");
        std::fs::write(
            &p,
            "%%MatrixMarket matrix array real general\n1000000 1000000\n1.5\n",
        )
        .unwrap();
        let e = read_matrix_market(&p).unwrap_err().to_string();
        assert!(e.contains("needs 1000000000000 values, found 1"), "{e}");
    }
}
