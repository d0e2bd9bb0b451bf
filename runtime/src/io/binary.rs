//! lafuse's binary matrix format: raw little-endian arrays behind a small header, so reading and
//! writing run at disk speed.
//!
//! Layout: `MAGIC` (8 bytes), version `u32`, format `u8` (0 dense, 1 CSR), 3 zero bytes, rows
//! `u64`, cols `u64`, nnz `u64`; then for dense `rows*cols` `f64` values (row-major), for CSR
//! `rows+1` `u64` row pointers, `nnz` `u32` column indices and `nnz` `f64` values; then (version
//! 2) the CRC-32 of everything before it, `u32`. A file whose checksum does not match is
//! refused: a changed byte in the values would otherwise read as a silently different matrix.
//! Version 1 files (no checksum) are still read.

use super::io_error;
use crate::error::{Corruption, FileError, Result, RuntimeError, Unsupported};
use crate::matrix::{DenseMatrix, Matrix};
use std::io::{Read, Write};
use std::path::Path;

/// The first bytes of every file in this format.
pub const MAGIC: &[u8; 8] = b"LAFUSEMX";
/// The current format version.
pub const VERSION: u32 = 2;
/// Bytes of the checksum trailer (version 2).
const CHECKSUM_LEN: usize = 4;

/// A writer that passes bytes through and keeps their CRC-32.
struct Checksummed<'w> {
    inner: &'w mut dyn Write,
    crc: crc32fast::Hasher,
}

impl Write for Checksummed<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
pub(crate) const HEADER_LEN: usize = 8 + 4 + 4 + 24;

/// The fixed-size header of a binary matrix file, decoded (the magic bytes already checked).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Header {
    pub version: u32,
    /// 0 dense, 1 CSR; anything else is a damaged file.
    pub format: u8,
    pub rows: u64,
    pub cols: u64,
    pub nnz: u64,
}

impl Header {
    /// The header's fields, or `None` where the bytes do not start with [`MAGIC`].
    pub(crate) fn decode(bytes: &[u8; HEADER_LEN]) -> Option<Header> {
        if &bytes[..8] != MAGIC {
            return None;
        }
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
        Some(Header {
            version: u32_at(8),
            format: bytes[12],
            rows: u64_at(16),
            cols: u64_at(24),
            nnz: u64_at(32),
        })
    }
}

/// Writes `m` in the binary format.
pub fn write_binary(m: &Matrix, path: &Path) -> Result<()> {
    super::write_atomically(path, |out| {
        let mut w = Checksummed {
            inner: out,
            crc: crc32fast::Hasher::new(),
        };
        let w = &mut w;
        w.write_all(MAGIC)?;
        w.write_all(&VERSION.to_le_bytes())?;
        w.write_all(&[m.is_sparse() as u8, 0, 0, 0])?;
        for x in [m.rows(), m.cols(), m.nnz()] {
            w.write_all(&(x as u64).to_le_bytes())?;
        }
        match m {
            Matrix::Dense(d) => write_f64s(w, &d.values)?,
            Matrix::Sparse(s) => {
                let mut buf = Vec::with_capacity(8 * 8192);
                for c in s.row_ptr.chunks(8192) {
                    buf.clear();
                    c.iter()
                        .for_each(|&p| buf.extend_from_slice(&(p as u64).to_le_bytes()));
                    w.write_all(&buf)?;
                }
                for c in s.col_idx.chunks(8192) {
                    buf.clear();
                    c.iter()
                        .for_each(|&j| buf.extend_from_slice(&j.to_le_bytes()));
                    w.write_all(&buf)?;
                }
                write_f64s(w, &s.values)?;
            }
        }
        let crc = w.crc.clone().finalize();
        w.inner.write_all(&crc.to_le_bytes())
    })
}

fn write_f64s(w: &mut dyn Write, vals: &[f64]) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(8 * 8192);
    for c in vals.chunks(8192) {
        buf.clear();
        c.iter()
            .for_each(|&v| buf.extend_from_slice(&v.to_le_bytes()));
        w.write_all(&buf)?;
    }
    Ok(())
}

/// Reads a file in the binary format; truncated or corrupt files are user errors.
///
/// The header is read and checked against the file's length before anything is allocated;
/// the arrays are then read straight into the matrix's own buffers (allocated fallibly), with
/// the checksum computed on the way and compared before the matrix is built. Reading takes
/// about the matrix's size (it took twice that when the file was read whole first). Where the
/// header and the length disagree, a version 2 file is checksummed whole first: a damaged
/// byte is reported as damage, not as the wrong length it caused.
pub fn read_binary(path: &Path) -> Result<Matrix> {
    let file = std::fs::File::open(path).map_err(|e| io_error(path, e))?;
    let file_len = file.metadata().map_err(|e| io_error(path, e))?.len();
    let mut r = std::io::BufReader::with_capacity(1 << 20, file);
    let corrupt = |defect: Corruption| RuntimeError::file(path, FileError::Corrupt(defect));
    let mut header = [0u8; HEADER_LEN];
    let decoded = (file_len >= HEADER_LEN as u64 && r.read_exact(&mut header).is_ok())
        .then(|| Header::decode(&header))
        .flatten();
    let Some(Header {
        version,
        format: sparse,
        rows,
        cols,
        nnz,
    }) = decoded
    else {
        return Err(corrupt(Corruption::BadMagic));
    };
    let trailer = match version {
        VERSION => CHECKSUM_LEN as u64,
        1 => 0,
        _ => {
            return Err(RuntimeError::Unsupported(Unsupported::BinaryVersion {
                version,
                path: path.to_path_buf(),
            }))
        }
    };
    // The file's length as the header states it (in u128, checked: 2^64 x 2^64 x 8 overflows
    // even that); `None` for an unknown format flag or a length beyond any file.
    let (rows_, cols_, nnz_) = (rows as u128, cols as u128, nnz as u128);
    let body_len = match sparse {
        0 => rows_.checked_mul(cols_).and_then(|c| c.checked_mul(8)),
        1 => Some((rows_ + 1) * 8 + nnz_ * 12),
        _ => None,
    };
    let whole = body_len.and_then(|b| b.checked_add(HEADER_LEN as u128 + trailer as u128));
    if whole != Some(file_len as u128) {
        if version == VERSION && !checksum_matches(path, file_len)? {
            return Err(corrupt(Corruption::ChecksumMismatch));
        }
        return Err(corrupt(match sparse {
            0 | 1 => Corruption::LengthMismatch,
            _ => Corruption::UnknownFormatFlag,
        }));
    }
    let as_usize = |x: u64| usize::try_from(x).map_err(|_| corrupt(Corruption::DimensionsTooLarge));
    let (rows, cols, nnz) = (as_usize(rows)?, as_usize(cols)?, as_usize(nnz)?);
    let mut crc = crc32fast::Hasher::new();
    crc.update(&header);
    let mut body = ArrayReader {
        reader: &mut r,
        crc: &mut crc,
        path,
    };
    let m = match sparse {
        0 => {
            let cells = rows
                .checked_mul(cols)
                .ok_or_else(|| corrupt(Corruption::DimensionsTooLarge))?;
            let mut values = crate::matrix::try_vec_filled(cells, 0.0f64)?;
            body.read_into(&mut values, f64::from_le_bytes)?;
            Arrays::Dense { rows, cols, values }
        }
        _ => {
            let mut row_ptr = crate::matrix::try_vec_filled(rows + 1, 0usize)?;
            body.read_into(&mut row_ptr, |b: [u8; 8]| u64::from_le_bytes(b) as usize)?;
            let mut col_idx = crate::matrix::try_vec_filled(nnz, 0u32)?;
            body.read_into(&mut col_idx, u32::from_le_bytes)?;
            let mut values = crate::matrix::try_vec_filled(nnz, 0.0f64)?;
            body.read_into(&mut values, f64::from_le_bytes)?;
            Arrays::Sparse {
                row_ptr,
                col_idx,
                values,
            }
        }
    };
    if version == VERSION {
        let mut stored = [0u8; CHECKSUM_LEN];
        r.read_exact(&mut stored).map_err(|e| io_error(path, e))?;
        // Checked before any value read is used.
        if crc.finalize() != u32::from_le_bytes(stored) {
            return Err(corrupt(Corruption::ChecksumMismatch));
        }
    }
    match m {
        Arrays::Dense { rows, cols, values } => {
            let d = DenseMatrix::new(rows, cols, values)?;
            if d.nnz != nnz {
                return Err(corrupt(Corruption::NnzMismatch));
            }
            Matrix::Dense(d).examine_and_convert()
        }
        Arrays::Sparse {
            row_ptr,
            col_idx,
            values,
        } => Matrix::from_csr(rows, cols, row_ptr, col_idx, values)
            .map_err(|e| corrupt(Corruption::Content { error: Box::new(e) })),
    }
}

/// Whether a version 2 file's trailer is the CRC-32 of the rest, read in a streaming pass.
fn checksum_matches(path: &Path, file_len: u64) -> Result<bool> {
    let Some(covered) = file_len.checked_sub(CHECKSUM_LEN as u64) else {
        return Ok(false);
    };
    let mut f = std::fs::File::open(path).map_err(|e| io_error(path, e))?;
    let mut crc = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut left = covered;
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        f.read_exact(&mut buf[..want])
            .map_err(|e| io_error(path, e))?;
        crc.update(&buf[..want]);
        left -= want as u64;
    }
    let mut stored = [0u8; CHECKSUM_LEN];
    f.read_exact(&mut stored).map_err(|e| io_error(path, e))?;
    Ok(crc.finalize() == u32::from_le_bytes(stored))
}

/// The arrays of a binary file, read.
enum Arrays {
    Dense {
        rows: usize,
        cols: usize,
        values: Vec<f64>,
    },
    Sparse {
        row_ptr: Vec<usize>,
        col_idx: Vec<u32>,
        values: Vec<f64>,
    },
}

/// Reads little-endian arrays straight into their buffers, keeping the CRC-32 of the bytes.
struct ArrayReader<'r> {
    reader: &'r mut dyn Read,
    crc: &'r mut crc32fast::Hasher,
    path: &'r Path,
}

impl ArrayReader<'_> {
    /// Fills `out` with values of `N` bytes each, decoded by `decode`.
    fn read_into<T, const N: usize>(
        &mut self,
        out: &mut [T],
        decode: fn([u8; N]) -> T,
    ) -> Result<()> {
        let mut buf = vec![0u8; N * 8192];
        for part in out.chunks_mut(8192) {
            let bytes = &mut buf[..part.len() * N];
            self.reader
                .read_exact(bytes)
                .map_err(|e| io_error(self.path, e))?;
            self.crc.update(bytes);
            for (o, b) in part.iter_mut().zip(bytes.chunks_exact(N)) {
                *o = decode(b.try_into().expect("N bytes"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testdir::TempDir;
    use super::*;

    #[test]
    fn roundtrip_and_corruption() {
        let dir = TempDir::new();
        let p = dir.path().join("m.bin");
        for m in [
            crate::kernels::testutil::rand(50, 40, 0.05, 1),
            crate::kernels::testutil::rand(50, 40, 0.9, 2),
            Matrix::zeros(0, 3).unwrap(),
        ] {
            write_binary(&m, &p).unwrap();
            let back = read_binary(&p).unwrap();
            back.validate().unwrap();
            assert_eq!(back, m);
        }
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 1]).unwrap();
        assert!(read_binary(&p).unwrap_err().to_string().contains("corrupt"));
        let mut bad = bytes.clone();
        bad[0] = b'X';
        std::fs::write(&p, &bad).unwrap();
        assert!(read_binary(&p).is_err());
    }

    #[test]
    fn a_byte_changed_anywhere_is_refused_not_read_as_other_values() {
        let dir = TempDir::new();
        let p = dir.path().join("m.bin");
        for m in [
            crate::kernels::testutil::rand(6, 5, 0.9, 3),
            crate::kernels::testutil::rand(9, 7, 0.1, 4),
        ] {
            write_binary(&m, &p).unwrap();
            let good = std::fs::read(&p).unwrap();
            for at in 0..good.len() {
                let mut bad = good.clone();
                bad[at] ^= 0x10;
                std::fs::write(&p, &bad).unwrap();
                let err = read_binary(&p).unwrap_err().to_string();
                assert!(
                    err.contains("corrupt") || err.contains("version"),
                    "byte {at}: {err}"
                );
            }
        }
    }

    #[test]
    fn version_1_files_without_a_checksum_are_still_read() {
        let dir = TempDir::new();
        let p = dir.path().join("m.bin");
        let m = crate::kernels::testutil::rand(8, 6, 0.2, 5);
        write_binary(&m, &p).unwrap();
        let mut v1 = std::fs::read(&p).unwrap();
        v1.truncate(v1.len() - CHECKSUM_LEN);
        v1[8..12].copy_from_slice(&1u32.to_le_bytes());
        std::fs::write(&p, &v1).unwrap();
        assert_eq!(read_binary(&p).unwrap(), m);
    }
}
