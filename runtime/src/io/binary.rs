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
const HEADER_LEN: usize = 8 + 4 + 4 + 24;

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
pub fn read_binary(path: &Path) -> Result<Matrix> {
    let mut f = std::fs::File::open(path).map_err(|e| io_error(path, e))?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).map_err(|e| io_error(path, e))?;
    let corrupt = |defect: Corruption| RuntimeError::file(path, FileError::Corrupt(defect));
    if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
        return Err(corrupt(Corruption::BadMagic));
    }
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
    let version = u32_at(8);
    if version == VERSION {
        // Checked before anything else is read from the file.
        let (covered, trailer) = bytes.split_at(bytes.len().saturating_sub(CHECKSUM_LEN));
        let stored = <[u8; CHECKSUM_LEN]>::try_from(trailer)
            .map(u32::from_le_bytes)
            .map_err(|_| corrupt(Corruption::NoChecksum))?;
        if covered.len() < HEADER_LEN || crc32fast::hash(covered) != stored {
            return Err(corrupt(Corruption::ChecksumMismatch));
        }
    } else if version != 1 {
        return Err(RuntimeError::Unsupported(Unsupported::BinaryVersion {
            version,
            path: path.to_path_buf(),
        }));
    }
    let sparse = bytes[12];
    let (rows, cols, nnz) = (u64_at(16), u64_at(24), u64_at(32));
    let as_usize = |x: u64| usize::try_from(x).map_err(|_| corrupt(Corruption::DimensionsTooLarge));
    let (rows, cols, nnz) = (as_usize(rows)?, as_usize(cols)?, as_usize(nnz)?);
    let end = if version == VERSION {
        bytes.len() - CHECKSUM_LEN
    } else {
        bytes.len()
    };
    let body = &bytes[HEADER_LEN..end];
    let f64s = |b: &[u8]| -> Vec<f64> {
        b.chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect()
    };
    match sparse {
        0 => {
            let cells = rows
                .checked_mul(cols)
                .ok_or_else(|| corrupt(Corruption::DimensionsTooLarge))?;
            if Some(body.len()) != cells.checked_mul(8) {
                return Err(corrupt(Corruption::LengthMismatch));
            }
            let values = f64s(body);
            let d = DenseMatrix::new(rows, cols, values)?;
            if d.nnz != nnz {
                return Err(corrupt(Corruption::NnzMismatch));
            }
            Matrix::Dense(d).examine_and_convert()
        }
        1 => {
            let expected = (rows.checked_add(1))
                .and_then(|r| r.checked_mul(8))
                .and_then(|a| nnz.checked_mul(12).and_then(|b| a.checked_add(b)));
            if Some(body.len()) != expected {
                return Err(corrupt(Corruption::LengthMismatch));
            }
            let (ptr_b, rest) = body.split_at((rows + 1) * 8);
            let (idx_b, val_b) = rest.split_at(nnz * 4);
            let row_ptr: Vec<usize> = ptr_b
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")) as usize)
                .collect();
            let col_idx: Vec<u32> = idx_b
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect();
            Matrix::from_csr(rows, cols, row_ptr, col_idx, f64s(val_b))
                .map_err(|e| corrupt(Corruption::Content { error: Box::new(e) }))
        }
        _ => Err(corrupt(Corruption::UnknownFormatFlag)),
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
