//! The two primitives of a Row operator's CSR rows that Cranelift's entry points call (the
//! LLVM backend emits the same operations inline): a sparse dot product and a sparse `axpy`.
//! Cranelift's scalar code for these gathers ran 2-2.5x slower than LLVM's; compiled here
//! they run at LLVM's speed and in the order the LLVM backend's `lafuse_row_sdot` states.

/// `Σ vals[p] * q[idx[p]]` over `nz` non-zeros: four accumulators (non-zero `p` adds to
/// accumulator `p mod 4`, over the whole groups of four), combined as `(a0 + a1) + (a2 + a3)`,
/// then the remaining non-zeros in order.
///
/// # Safety
/// `vals` and `idx` hold `nz` values; `q` holds every `idx[p]`.
pub unsafe extern "C" fn lafuse_row_sdot(
    vals: *const f64,
    idx: *const u32,
    q: *const f64,
    nz: i64,
) -> f64 {
    let nz = nz as usize;
    // SAFETY: the caller's bounds.
    let term = |p: usize| unsafe { *vals.add(p) * *q.add(*idx.add(p) as usize) };
    let mut acc = [0.0f64; 4];
    let mut p = 0;
    while p + 4 <= nz {
        for (t, a) in acc.iter_mut().enumerate() {
            *a += term(p + t);
        }
        p += 4;
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    while p < nz {
        s += term(p);
        p += 1;
    }
    s
}

/// `o[idx[p]] += s * vals[p]` over `nz` non-zeros (a row's column indices are distinct, so
/// the updates are independent).
///
/// # Safety
/// `vals` and `idx` hold `nz` values; `o` holds every `idx[p]` and overlaps neither.
pub unsafe extern "C" fn lafuse_row_saxpy(
    o: *mut f64,
    vals: *const f64,
    idx: *const u32,
    s: f64,
    nz: i64,
) {
    for p in 0..nz as usize {
        // SAFETY: the caller's bounds.
        unsafe {
            let j = *idx.add(p) as usize;
            *o.add(j) += s * *vals.add(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dot product groups four non-zeros at a time and adds the rest in order; the
    /// update touches only the indexed cells. (Magnitudes apart so that another order
    /// rounds differently.)
    #[test]
    fn sparse_dot_and_axpy_follow_their_definitions() {
        let q: Vec<f64> = (0..40).map(|k| 1.0 + k as f64 * 1e-3).collect();
        for nz in [0usize, 1, 3, 4, 5, 11, 16] {
            let vals: Vec<f64> = (0..nz)
                .map(|p| [1e16, 1.0, -1e16, 3.0][p % 4] + p as f64)
                .collect();
            let idx: Vec<u32> = (0..nz as u32).map(|p| (p * 7) % 40).collect();
            let t = |p: usize| vals[p] * q[idx[p] as usize];
            let mut a = [0.0f64; 4];
            let full = nz / 4 * 4;
            for p in 0..full {
                a[p % 4] += t(p);
            }
            let mut want = (a[0] + a[1]) + (a[2] + a[3]);
            for p in full..nz {
                want += t(p);
            }
            // SAFETY: the sizes above.
            let got =
                unsafe { lafuse_row_sdot(vals.as_ptr(), idx.as_ptr(), q.as_ptr(), nz as i64) };
            assert_eq!(got.to_bits(), want.to_bits(), "{nz} non-zeros");
            let mut o = vec![0.5f64; 40];
            // SAFETY: the sizes above.
            unsafe {
                lafuse_row_saxpy(o.as_mut_ptr(), vals.as_ptr(), idx.as_ptr(), 2.0, nz as i64)
            };
            for (j, &v) in o.iter().enumerate() {
                let hit = idx.iter().position(|&i| i as usize == j);
                let want = hit.map_or(0.5, |p| 0.5 + 2.0 * vals[p]);
                assert_eq!(v.to_bits(), want.to_bits(), "{nz} non-zeros, cell {j}");
            }
        }
    }
}
