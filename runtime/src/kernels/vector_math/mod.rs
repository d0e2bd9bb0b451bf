//! The runtime's `exp`, `ln`, `sigmoid` and `tanh` ([`crate::math`]) over slices, eight lanes
//! at a time with AVX-512 or AVX2 (two registers) where the CPU has them: the unfused kernels map
//! dense data through these, with results equal to the scalar functions' to the bit. (Kept
//! apart from `math.rs`, which the compiler's constant folder compiles too and which holds
//! the scalar functions only.)
//!
//! The methods are stated once (`bodies.rs`, a macro over a dozen lane primitives) and
//! instantiated per instruction set (`avx2.rs`, `avx512.rs`), so both compute the same
//! operations in the same order.

#[cfg(target_arch = "x86_64")]
#[macro_use]
mod bodies;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

use crate::math::{exp, ln, sigmoid, tanh};

/// The functions that have a vector form for slices: the unfused kernels map dense data
/// through it, at the speed of a vectorized C library, with results equal to the scalar
/// function's to the bit (the same operations in the same order on every lane; no fused
/// multiply-add, as in the scalar code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Vectorized {
    Exp,
    Ln,
    Sigmoid,
    Tanh,
}

impl Vectorized {
    /// The scalar function.
    #[inline]
    pub(crate) fn scalar(self, x: f64) -> f64 {
        match self {
            Vectorized::Exp => exp(x),
            Vectorized::Ln => ln(x),
            Vectorized::Sigmoid => sigmoid(x),
            Vectorized::Tanh => tanh(x),
        }
    }

    /// `dst[i] = f(src[i])`.
    ///
    /// # Panics
    /// If the slices' lengths differ.
    pub(crate) fn map(self, src: &[f64], dst: &mut [f64]) {
        assert_eq!(
            src.len(),
            dst.len(),
            "Vectorized::map: slice lengths differ"
        );
        // SAFETY: both pointers are valid for `len` elements, and `src` and `dst` do not
        // overlap (a shared and a mutable borrow).
        unsafe { map_raw(self, src.as_ptr(), dst.as_mut_ptr(), src.len()) }
    }

    /// `buf[i] = f(buf[i])`.
    pub(crate) fn map_in_place(self, buf: &mut [f64]) {
        let p = buf.as_mut_ptr();
        // SAFETY: `p` is valid for `len` elements; each element is read before it is written,
        // through raw pointers only.
        unsafe { map_raw(self, p, p, buf.len()) }
    }
}

/// `buf[i] = exp(buf[i])` ([`crate::math::exp`] to the bit, eight lanes at a time):
/// for generated code that hands the runtime a vector's lanes (Cranelift's operators).
pub fn exp_in_place(buf: &mut [f64]) {
    Vectorized::Exp.map_in_place(buf)
}

/// `buf[i] = ln(buf[i])` ([`crate::math::ln`] to the bit), as [`exp_in_place`].
pub fn ln_in_place(buf: &mut [f64]) {
    Vectorized::Ln.map_in_place(buf)
}

/// `buf[i] = tanh(buf[i])` ([`crate::math::tanh`] to the bit), as [`exp_in_place`].
pub fn tanh_in_place(buf: &mut [f64]) {
    Vectorized::Tanh.map_in_place(buf)
}

/// `dst[i] = f(src[i])` for `i < len`, through raw pointers (`src == dst` allowed): eight lanes
/// at a time where the CPU has AVX-512 or AVX2 with FMA, the scalar function for the
/// rest.
///
/// # Safety
/// `src` must be valid for `len` reads and `dst` for `len` writes; they are either equal or
/// do not overlap.
unsafe fn map_raw(f: Vectorized, src: *const f64, dst: *mut f64, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return avx512::map(f, src, dst, len);
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return avx2::map(f, src, dst, len);
        }
    }
    for i in 0..len {
        *dst.add(i) = f.scalar(*src.add(i));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Doubles of every kind: random bit patterns (both signs, subnormals, NaN payloads,
    /// infinities), every reduction case of `exp` and of `tanh`'s `e^u - 1`, values near 1
    /// for `ln`, and the edges.
    fn every_kind_of_double() -> Vec<f64> {
        let mut s = 0x1234_5678_9abc_def1u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut xs: Vec<f64> = (0..40_000).map(|_| f64::from_bits(next())).collect();
        xs.extend(
            (0..40_000).map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64 * 1500.0 - 750.0),
        );
        xs.extend((0..10_000).map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0));
        xs.extend((0..20_000).map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64 * 50.0 - 25.0));
        xs.extend((0..10_000).map(|i| 1.0 + (i as f64 - 5000.0) * 1e-10));
        // Every power of two from its bits (`powi` of a subnormal's exponent gives 0), and
        // runs that fill whole vectors of one kind, which the bodies may take in one branch:
        // positive subnormals, the smallest normals, `exp`'s arguments either side of where its
        // ordinary range ends.
        xs.extend((-1074i64..1024).map(|e| {
            if e < -1022 {
                f64::from_bits(1u64 << (e + 1074))
            } else {
                f64::from_bits(((e + 1023) as u64) << 52)
            }
        }));
        xs.extend((0..64).map(|_| f64::from_bits((next() & 0x000f_ffff_ffff_ffff) | 1)));
        xs.extend((0..64).map(|i| f64::MIN_POSITIVE * (1.0 + i as f64 / 64.0)));
        xs.extend((0..480).map(|i| 700.0 + i as f64 / 40.0));
        xs.extend((0..480).map(|i| -700.0 - i as f64 / 40.0));
        xs.extend((-60..0).map(|e| -(2f64.powi(e))));
        xs.extend([
            0.0,
            -0.0,
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            5e-324,
            f64::MAX,
            f64::MIN,
            709.782712893383,
            709.8,
            -745.13,
            -745.2,
            0.34657359027997264,
            1.0397207708399179,
            -1.0397207708399179,
            1.0,
        ]);
        xs
    }

    /// A slice map of one instruction set (`map_raw`'s signature).
    type SliceMap = unsafe fn(Vectorized, *const f64, *mut f64, usize);

    /// Every instruction set this CPU has, each to the bit of the scalar functions.
    fn maps() -> Vec<(&'static str, SliceMap)> {
        let mut maps: Vec<(&'static str, SliceMap)> = vec![("dispatch", map_raw)];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                maps.push(("avx2", avx2::map));
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                maps.push(("avx512", avx512::map));
            }
        }
        maps
    }

    const EVERY: [Vectorized; 4] = [
        Vectorized::Exp,
        Vectorized::Ln,
        Vectorized::Sigmoid,
        Vectorized::Tanh,
    ];

    /// The same double, any NaN counting as any other.
    fn same_bits(got: f64, want: f64) -> bool {
        got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan())
    }

    #[test]
    fn every_instruction_set_maps_to_the_bit_of_the_scalar_functions() {
        let xs = every_kind_of_double();
        for (isa, map) in maps() {
            for f in EVERY {
                let mut out = vec![0.0; xs.len()];
                // SAFETY: both buffers hold xs.len() values and do not overlap.
                unsafe { map(f, xs.as_ptr(), out.as_mut_ptr(), xs.len()) };
                for (&x, &got) in xs.iter().zip(&out) {
                    let want = f.scalar(x);
                    assert!(
                        same_bits(got, want),
                        "{isa} {f:?}({x:e}) = {got:e}, scalar {want:e}"
                    );
                }
            }
        }
    }

    #[test]
    fn slices_map_to_the_bit_of_the_scalar_functions() {
        let xs = every_kind_of_double();
        for f in EVERY {
            let mut out = vec![0.0; xs.len()];
            f.map(&xs, &mut out);
            let mut in_place = xs.clone();
            f.map_in_place(&mut in_place);
            for (i, &x) in xs.iter().enumerate() {
                let want = f.scalar(x);
                for (what, got) in [("map", out[i]), ("map_in_place", in_place[i])] {
                    assert!(
                        same_bits(got, want),
                        "{f:?} {what}({x:e}) = {got:e}, scalar {want:e}"
                    );
                }
            }
            // Every length around the eight-lane step, so the scalar tail is covered.
            for len in 0..19 {
                let mut out = vec![0.0; len];
                f.map(&xs[..len], &mut out);
                for (o, &x) in out.iter().zip(&xs[..len]) {
                    assert!(o.to_bits() == f.scalar(x).to_bits() || o.is_nan());
                }
            }
        }
        assert_eq!(sigmoid(0.0), 0.5);
        assert_eq!(tanh(0.5).to_bits(), 0x3fdd_9353_d756_8af3);
    }
}
