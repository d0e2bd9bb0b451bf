//! `exp`, `ln`, `sigmoid` and `tanh` over the lanes of one vector, stated once for every
//! instruction set: [`vector_math_bodies!`] expands inside a module that defines the lane
//! primitives (`avx2.rs`, `avx512.rs`: the types `V` and `M`, a vector of doubles and a lane
//! mask, `I` for a vector's bits, the constant `LANES`, and `splat`, `load`, `store`,
//! `add`/`sub`/`mul`/`div`, `fma`/`fnma` (`a * b + c` and `c - a * b`, rounded once), the
//! comparisons, `pick`, the bit operations and `trunc_int`, `pow2`). Each body is the core's scalar function (`crate::math`) operation for operation:
//! every branch of the scalar code is computed and each lane's case chosen with `pick`, as
//! the generated code does, so results equal the scalar functions' to the bit.

/// Expands the bodies and the slice map `map` (behind `#[target_feature(enable = $feature)]`)
/// over the primitives in scope.
macro_rules! vector_math_bodies {
    ($feature:literal) => {
        use super::Vectorized;
        use crate::math::exp_consts as e;
        use crate::math::ln_consts as l;
        use crate::math::tanh_consts as th;

        /// `dst[i] = f(src[i])`: whole vectors, then the scalar function for the tail.
        ///
        /// # Safety
        /// As `super::map_raw`, and the CPU must have the instruction set.
        #[target_feature(enable = $feature)]
        pub(super) unsafe fn map(f: Vectorized, src: *const f64, dst: *mut f64, len: usize) {
            match f {
                Vectorized::Exp => map_with(f, src, dst, len, |x| exp_v(x)),
                Vectorized::Ln => map_with(f, src, dst, len, |x| ln_v(x)),
                Vectorized::Sigmoid => map_with(f, src, dst, len, |x| {
                    div(splat(1.0), add(splat(1.0), exp_v(neg(x))))
                }),
                Vectorized::Tanh => map_with(f, src, dst, len, |x| tanh_v(x)),
            }
        }

        #[inline(always)]
        unsafe fn map_with(
            f: Vectorized,
            src: *const f64,
            dst: *mut f64,
            len: usize,
            g: impl Fn(V) -> V,
        ) {
            let whole = len - len % LANES;
            let mut i = 0;
            while i < whole {
                store(dst.add(i), g(load(src.add(i))));
                i += LANES;
            }
            for j in whole..len {
                *dst.add(j) = f.scalar(*src.add(j));
            }
        }

        /// The smallest double whose high word is `high` (for non-negative doubles, the high
        /// word's order is the value's, so `high_word(|x|) >= h` is `|x| >= at_high(h)`).
        fn at_high(high: i64) -> f64 {
            f64::from_bits((high as u64) << 32)
        }

        /// The `k` of the reduction `x = k ln2 + r` that `exp` and `tanh`'s `e^u - 1` share
        /// (`ax` is `|x|`): `x / ln2` rounded from 1.5 ln2 on, +-1 above ln2 / 2, else 0.
        #[inline(always)]
        unsafe fn ln2_multiple(x: V, ax: V) -> V {
            let big = ge(ax, splat(at_high(e::THREE_HALF_LN2_HIGH)));
            let mid = ge(ax, splat(at_high(e::HALF_LN2_HIGH + 1)));
            let neg = lt(x, splat(0.0));
            let half = pick(neg, splat(-0.5), splat(0.5));
            // `(INV_LN2 * x + half) as i64`: |k| < 1100, so a 32-bit truncation is the same.
            let k_round = trunc_int(add(mul(splat(e::INV_LN2), x), half));
            let k_one = pick(neg, splat(-1.0), splat(1.0));
            pick(big, k_round, pick(mid, k_one, splat(0.0)))
        }

        /// [`crate::math::exp`]. A vector whose lanes all lie in (-708, 709) (no NaN, no
        /// overflow or underflow, `2^k` normal) takes the method alone; any other takes the
        /// clamps, the two-step scaling and the special lanes too. The two agree on an
        /// ordinary lane (its first scale is 1), so the branch changes no result.
        #[inline(always)]
        unsafe fn exp_v(x: V) -> V {
            if all(both(
                gt(x, splat(e::ORDINARY_LO)),
                lt(x, splat(e::ORDINARY_HI)),
            )) {
                exp_method(x, false)
            } else {
                exp_any_lane(x)
            }
        }

        /// [`exp_v`] on lanes of any value.
        #[inline(always)]
        unsafe fn exp_any_lane(x: V) -> V {
            let nan = unord(x, x);
            let lo_edge = splat(e::CLAMP_LO);
            let hi_edge = splat(e::CLAMP_HI);
            let xc = pick(lt(x, lo_edge), lo_edge, pick(gt(x, hi_edge), hi_edge, x));
            let xc = pick(nan, splat(0.0), xc);
            let out = exp_method(xc, true);
            let out = pick(lt(x, splat(e::UNDERFLOW)), splat(0.0), out);
            let out = pick(gt(x, splat(e::OVERFLOW)), splat(f64::INFINITY), out);
            pick(nan, x, out)
        }

        /// fdlibm's `exp` on finite lanes within the clamps; `beyond_normal`: whether a
        /// lane's `2^k` may not be a normal double, so that `y 2^k` is pre-scaled once.
        #[inline(always)]
        unsafe fn exp_method(xc: V, beyond_normal: bool) -> V {
            let ax = abs(xc);
            let tiny = lt(ax, splat(at_high(e::TINY_HIGH + 1)));
            let kf = ln2_multiple(xc, ax);
            let hi = fnma(kf, splat(e::LN2_HI), xc);
            let lo = mul(kf, splat(e::LN2_LO));
            let r = sub(hi, lo);
            let rr = mul(r, r);
            let mut p = fma(rr, splat(e::P[4]), splat(e::P[3]));
            p = fma(rr, p, splat(e::P[2]));
            p = fma(rr, p, splat(e::P[1]));
            p = fma(rr, p, splat(e::P[0]));
            let c = fnma(rr, p, r);
            let q = div(mul(r, c), sub(splat(2.0), c));
            let y = add(splat(1.0), add(sub(q, lo), hi));
            let scaled = if beyond_normal {
                let over = gt(kf, splat(1023.0));
                let under = lt(kf, splat(-1022.0));
                let pre = pick(
                    over,
                    splat(e::TWO_1023),
                    pick(under, splat(e::TWO_M969), splat(1.0)),
                );
                let k2 = pick(
                    over,
                    sub(kf, splat(1023.0)),
                    pick(under, add(kf, splat(969.0)), kf),
                );
                mul(mul(y, pre), pow2(k2))
            } else {
                mul(y, pow2(kf))
            };
            pick(tiny, add(splat(1.0), xc), scaled)
        }

        /// [`crate::math::ln`]. A vector whose lanes are all positive, normal and finite takes
        /// the method alone; any other scales its subnormals first and replaces its special
        /// lanes last. The two agree on an ordinary lane, so the branch changes no result.
        #[inline(always)]
        unsafe fn ln_v(x: V) -> V {
            if all(both(
                ge(x, splat(f64::MIN_POSITIVE)),
                lt(x, splat(f64::INFINITY)),
            )) {
                ln_method(x, None)
            } else {
                ln_any_lane(x)
            }
        }

        /// [`ln_v`] on lanes of any value.
        #[inline(always)]
        unsafe fn ln_any_lane(x: V) -> V {
            let valid = both(gt(x, splat(0.0)), lt(x, splat(f64::INFINITY)));
            // Other lanes compute on a stand-in and take their special value at the end.
            let xv = pick(valid, x, splat(1.0));
            let sub_normal = lt(xv, splat(f64::MIN_POSITIVE));
            let xs = pick(sub_normal, mul(xv, splat(l::TWO_54)), xv);
            let k0 = pick(sub_normal, splat(-54.0), splat(0.0));
            let out = ln_method(xs, Some(k0));
            // NaN and +inf give themselves, zeros -inf, negatives NaN.
            let keeps = either(unord(x, x), eq(x, splat(f64::INFINITY)));
            let zero = eq(x, splat(0.0));
            let special = pick(
                keeps,
                x,
                pick(zero, splat(f64::NEG_INFINITY), splat(f64::NAN)),
            );
            pick(valid, out, special)
        }

        /// fdlibm's `ln` on positive, normal, finite lanes `xs`, `k0` (-54 on a lane the caller
        /// scaled from a subnormal) added to the exponent.
        #[inline(always)]
        unsafe fn ln_method(xs: V, k0: Option<V>) -> V {
            let b = bits(xs);
            let hx = iadd(srl32(b), l::HIGH_SHIFT);
            // `k = (hx >> 20) - 0x3ff + k0` as a double: `hx >> 20` is a small non-negative
            // integer, turned into a double exactly through the bits of 2^52 + it.
            let two52 = splat(l::TWO_52);
            let exponent = sub(float(ior(srl20(hx), bits(two52))), two52);
            let dk = sub(exponent, splat(1023.0));
            let dk = match k0 {
                Some(k0) => add(dk, k0),
                None => dk,
            };
            let mantissa_high = iadd(iand(hx, 0x000f_ffff), l::SQRT_HALF_HIGH);
            let r = float(ior(sll32(mantissa_high), iand(b, 0xffff_ffff)));
            let f = sub(r, splat(1.0));
            let hfsq = mul(mul(splat(0.5), f), f);
            let s = div(f, add(splat(2.0), f));
            let z = mul(s, s);
            let w = mul(z, z);
            let lg = |i: usize| splat(l::LG[i]);
            let t1 = mul(w, fma(w, fma(w, lg(5), lg(3)), lg(1)));
            let p2 = fma(w, fma(w, fma(w, lg(6), lg(4)), lg(2)), lg(0));
            let big_r = fma(z, p2, t1);
            let a = fma(s, add(hfsq, big_r), mul(dk, splat(l::LN2_LO)));
            let a = add(sub(a, hfsq), f);
            fma(dk, splat(l::LN2_HI), a)
        }

        /// The core's `expm1_for_tanh` (fdlibm's `expm1` for `u` in `[-2, 0]` or `[2, 44]`).
        #[inline(always)]
        unsafe fn expm1_for_tanh_v(u: V) -> V {
            let kf = ln2_multiple(u, abs(u));
            let hi = sub(u, mul(kf, splat(th::LN2_HI)));
            let lo = mul(kf, splat(th::LN2_LO));
            let x = sub(hi, lo);
            let c = sub(sub(hi, x), lo);
            let hfx = mul(splat(0.5), x);
            let hxs = mul(x, hfx);
            let q = |i: usize| splat(th::Q[i]);
            let mut p = add(q(3), mul(hxs, q(4)));
            p = add(q(2), mul(hxs, p));
            p = add(q(1), mul(hxs, p));
            p = add(q(0), mul(hxs, p));
            let r1 = add(splat(1.0), mul(hxs, p));
            let t = sub(splat(3.0), mul(r1, hfx));
            let e = mul(hxs, div(sub(r1, t), sub(splat(6.0), mul(x, t))));
            let k0 = sub(x, sub(mul(x, e), hxs));
            let e = sub(mul(x, sub(e, c)), c);
            let e = sub(e, hxs);
            let two_k = pow2(kf);
            let two_minus_k = pow2(sub(splat(0.0), kf));
            let e_minus_x = sub(e, x);
            let k_minus_one = sub(mul(splat(0.5), sub(x, e)), splat(0.5));
            let far = sub(mul(sub(splat(1.0), e_minus_x), two_k), splat(1.0));
            let below_20 = mul(sub(sub(splat(1.0), two_minus_k), e_minus_x), two_k);
            let from_20 = mul(add(sub(x, add(e, two_minus_k)), splat(1.0)), two_k);
            let y = pick(lt(kf, splat(20.0)), below_20, from_20);
            let is_far = either(le(kf, splat(-2.0)), gt(kf, splat(56.0)));
            let y = pick(is_far, far, y);
            let y = pick(eq(kf, splat(-1.0)), k_minus_one, y);
            pick(eq(kf, splat(0.0)), k0, y)
        }

        /// [`crate::math::tanh`].
        #[inline(always)]
        unsafe fn tanh_v(x: V) -> V {
            let sign = sign_of(x);
            let a = abs(x);
            // NaN and saturated lanes compute on a stand-in and are replaced at the end.
            let in_range = lt(a, splat(th::SATURATED));
            let ac = pick(in_range, a, splat(1.0));
            let big = ge(ac, splat(1.0));
            let u = pick(big, mul(splat(2.0), ac), mul(splat(-2.0), ac));
            let t = expm1_for_tanh_v(u);
            let numerator = pick(big, splat(2.0), neg(t));
            let q = div(numerator, add(t, splat(2.0)));
            let z = pick(big, sub(splat(1.0), q), q);
            let z = pick(in_range, z, splat(1.0));
            let z = with_sign(z, sign);
            let keep = either(lt(a, splat(th::TINY)), unord(x, x));
            pick(keep, x, z)
        }
    };
}
