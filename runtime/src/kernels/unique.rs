//! `unique(X)`: the distinct values of a matrix, in the order SystemDS 3.4 returns them.
//!
//! SystemDS (`LibMatrixSketch.getUniqueValues`) adds the cells, row by row, to a
//! `java.util.HashSet<Double>` and writes out the set in its iteration order, so that order is
//! part of the result. [`JavaHashOrder`] reproduces that order: `Double.hashCode`, `HashMap`'s
//! hash spreading, a table of 16 buckets doubled when more than three quarters full or when a
//! bucket of a table under 64 buckets reaches 9 entries, entries appended to their bucket and
//! split in order on resizing. One case is not reproduced: a bucket of 9 or more entries in a
//! table of 64 or more buckets becomes a red-black tree in Java, whose iteration order within
//! that bucket differs; the values are the same then, their order within the bucket may not be.
//! With `dir="r"` (`"c"`) each row (column) gets its distinct values, padded with zeros to the
//! longest, the set being cleared (keeping its table size) between rows, as in SystemDS.

use super::dense_result;
use crate::error::{Result, RuntimeError};
use crate::matrix::Matrix;

/// A set of doubles that iterates in the order `java.util.HashSet<Double>` would.
struct JavaHashOrder {
    buckets: Vec<Vec<u64>>,
    len: usize,
}

/// `Double.doubleToLongBits`: every NaN as the canonical NaN; `-0.0` differs from `0.0`.
fn java_bits(v: f64) -> u64 {
    if v.is_nan() {
        0x7ff8_0000_0000_0000
    } else {
        v.to_bits()
    }
}

/// `HashMap.hash(Double)`: `Double.hashCode` spread by `h ^ (h >>> 16)`.
fn java_hash(bits: u64) -> u32 {
    let h = (bits ^ (bits >> 32)) as u32;
    h ^ (h >> 16)
}

impl JavaHashOrder {
    fn new() -> Self {
        JavaHashOrder {
            buckets: vec![Vec::new(); 16],
            len: 0,
        }
    }

    fn bucket(&self, bits: u64) -> usize {
        java_hash(bits) as usize & (self.buckets.len() - 1)
    }

    fn insert(&mut self, v: f64) {
        let bits = java_bits(v);
        let b = self.bucket(bits);
        if self.buckets[b].contains(&bits) {
            return;
        }
        self.buckets[b].push(bits);
        // `treeifyBin` resizes a small table instead of making a tree.
        if self.buckets[b].len() >= 9 && self.buckets.len() < 64 {
            self.resize();
        }
        self.len += 1;
        if self.len > self.buckets.len() / 4 * 3 {
            self.resize();
        }
    }

    /// Doubles the table; each bucket splits into two, keeping its order.
    fn resize(&mut self) {
        let old = std::mem::take(&mut self.buckets);
        self.buckets = vec![Vec::new(); old.len() * 2];
        for bits in old.into_iter().flatten() {
            let b = self.bucket(bits);
            self.buckets[b].push(bits);
        }
    }

    /// `HashSet.clear()`: empties the buckets, keeping the table's size.
    fn clear(&mut self) {
        self.buckets.iter_mut().for_each(Vec::clear);
        self.len = 0;
    }

    fn values(&self) -> impl Iterator<Item = f64> + '_ {
        self.buckets.iter().flatten().map(|&b| f64::from_bits(b))
    }
}

/// `unique(x, dir)`: `"rc"` all distinct values as a column vector; `"r"` per row, `"c"` per
/// column (padded with zeros). `"union"` (`unique(rbind(A, B))` of a column, which SystemDS
/// computes as its union operation): the distinct values of a column in the order they first
/// occur, equal as Java's `Double.equals` (NaN equals NaN, `-0.0` differs from `0.0`); of a
/// matrix of several columns, as `"rc"`.
pub fn unique(x: &Matrix, dir: &str) -> Result<Matrix> {
    let (r, c) = x.shape();
    if dir == "union" && c == 1 {
        let canonical = |v: f64| {
            if v.is_nan() {
                f64::NAN.to_bits()
            } else {
                v.to_bits()
            }
        };
        let mut seen = std::collections::HashSet::new();
        let out: Vec<f64> = (0..r)
            .map(|i| x.get(i, 0))
            .filter(|&v| seen.insert(canonical(v)))
            .collect();
        let (n, nnz) = (out.len(), crate::matrix::count_nnz(&out));
        return Ok(dense_result(n, 1, out, nnz));
    }
    let dir = if dir == "union" { "rc" } else { dir };
    let mut set = JavaHashOrder::new();
    match dir {
        "rc" => {
            for i in 0..r {
                for j in 0..c {
                    set.insert(x.get(i, j));
                }
            }
            let out: Vec<f64> = set.values().collect();
            let (n, nnz) = (out.len(), crate::matrix::count_nnz(&out));
            Ok(dense_result(n, 1, out, nnz))
        }
        "r" | "c" => {
            let rows = dir == "r";
            let (outer, inner) = if rows { (r, c) } else { (c, r) };
            let mut lists = Vec::with_capacity(outer);
            for k in 0..outer {
                set.clear();
                for l in 0..inner {
                    set.insert(if rows { x.get(k, l) } else { x.get(l, k) });
                }
                lists.push(set.values().collect::<Vec<f64>>());
            }
            let width = lists.iter().map(Vec::len).max().unwrap_or(0);
            let (or, oc) = if rows { (r, width) } else { (width, c) };
            let mut out = crate::matrix::try_alloc_zeroed(or * oc)?;
            for (k, list) in lists.iter().enumerate() {
                for (l, &v) in list.iter().enumerate() {
                    out[if rows { k * oc + l } else { l * oc + k }] = v;
                }
            }
            let nnz = crate::matrix::count_nnz(&out);
            Ok(dense_result(or, oc, out, nnz))
        }
        other => Err(RuntimeError::Argument {
            function: "unique",
            problem: format!("dir must be \"rc\", \"r\" or \"c\", found {other:?}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{both, m, same};
    use super::*;

    #[test]
    fn values_come_in_java_hash_set_order() {
        // Checked with SystemDS 3.4: 1, 2, 0 share bucket 0 (in insertion order), 3 and NaN 8.
        let x = m(&[
            &[3.0],
            &[1.0],
            &[3.0],
            &[2.0],
            &[1.0],
            &[f64::NAN],
            &[3.0],
            &[0.0],
        ]);
        for x in both(&x) {
            let u = unique(&x, "rc").unwrap();
            assert!(same(&u, &m(&[&[1.0], &[2.0], &[0.0], &[3.0], &[f64::NAN]])));
        }
        let y = m(&[&[1.0, 2.0], &[1.0, 2.0], &[3.0, 4.0], &[1.0, 2.0]]);
        assert!(same(
            &unique(&y, "rc").unwrap(),
            &m(&[&[1.0], &[2.0], &[4.0], &[3.0]])
        ));
        assert!(same(
            &unique(&y, "c").unwrap(),
            &m(&[&[1.0, 2.0], &[3.0, 4.0]])
        ));
        assert!(unique(&y, "x").is_err());
    }

    #[test]
    fn a_union_keeps_first_occurrences_in_order() {
        let x = m(&[
            &[3.0],
            &[1.0],
            &[f64::NAN],
            &[3.0],
            &[-0.0],
            &[0.0],
            &[f64::NAN],
            &[2.0],
        ]);
        // Dense only: a sparse matrix cannot hold -0.0 (it is an implicit zero there).
        let u = unique(&x, "union").unwrap();
        let want = m(&[&[3.0], &[1.0], &[f64::NAN], &[-0.0], &[0.0], &[2.0]]);
        assert!(same(&u, &want));
        let x = m(&[&[3.0], &[0.0], &[1.0], &[3.0], &[0.0], &[2.0]]);
        for x in both(&x) {
            let u = unique(&x, "union").unwrap();
            assert!(same(&u, &m(&[&[3.0], &[0.0], &[1.0], &[2.0]])));
        }
        // Of several columns, a union is the distinct values, as "rc".
        let y = m(&[&[1.0, 2.0], &[3.0, 4.0]]);
        assert!(same(
            &unique(&y, "union").unwrap(),
            &unique(&y, "rc").unwrap()
        ));
    }

    #[test]
    fn resizing_keeps_every_value_once() {
        let x =
            Matrix::from_dense_values(300, 1, (0..300).map(|i| (i % 97) as f64).collect()).unwrap();
        let u = unique(&x, "rc").unwrap();
        assert_eq!(u.shape(), (97, 1));
        let mut v: Vec<f64> = (0..97).map(|i| u.get(i, 0)).collect();
        v.sort_by(f64::total_cmp);
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as f64));
    }
}
