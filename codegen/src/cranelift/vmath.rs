//! `log`, `exp` and `tanh` on two lanes at once (`F64X2`), operation for operation as the LLVM
//! backend's vector library states them (`native::math`) and the core's scalar `math` computes
//! them, so every lane agrees with the unfused kernels to the bit.
//!
//! Called lane by lane, the scalar functions cost a call, the spills of every live vector
//! around it, and a move in and out of a vector per lane: `rowSums(exp(X) * Y - Z)` ran 5-11×
//! LLVM's time that way. Two integer conversions LLVM states as `sitofp`/`fptosi` are exact
//! here by the 2^52 + 2^51 rounding constant (the integers are below 2^51 in magnitude), which
//! needs no AVX-512 conversion instruction.

use super::fx::Fx;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, Endianness, InstBuilder, MemFlagsData, Value};
use lafuse_runtime::math::{exp_consts as e, ln_consts as c, tanh_consts as th};

/// 2^52 + 2^51: a double whose integer additions below 2^51 in magnitude are exact, with the
/// integer in the low bits of its mantissa.
const ROUNDING: f64 = 6_755_399_441_055_744.0;

/// Reinterpreting a vector's bits, lane order fixed (little-endian) as the verifier requires.
fn lanes_le() -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little)
}

/// Two-lane building blocks over `F64X2` values and `I64X2` integers and masks.
struct X2<'f, 'a> {
    fx: &'f mut Fx<'a>,
}

impl X2<'_, '_> {
    fn fc(&mut self, v: f64) -> Value {
        let s = self.fx.b.ins().f64const(v);
        self.fx.b.ins().splat(types::F64X2, s)
    }
    fn ic(&mut self, v: i64) -> Value {
        let s = self.fx.b.ins().iconst(types::I64, v);
        self.fx.b.ins().splat(types::I64X2, s)
    }
    fn bits(&mut self, x: Value) -> Value {
        self.fx.b.ins().bitcast(types::I64X2, lanes_le(), x)
    }
    fn float(&mut self, i: Value) -> Value {
        self.fx.b.ins().bitcast(types::F64X2, lanes_le(), i)
    }
    fn fadd(&mut self, a: Value, b: Value) -> Value {
        self.fx.b.ins().fadd(a, b)
    }
    fn fsub(&mut self, a: Value, b: Value) -> Value {
        self.fx.b.ins().fsub(a, b)
    }
    fn fmul(&mut self, a: Value, b: Value) -> Value {
        self.fx.b.ins().fmul(a, b)
    }
    fn fdiv(&mut self, a: Value, b: Value) -> Value {
        self.fx.b.ins().fdiv(a, b)
    }
    /// An all-ones `I64X2` mask per lane where `a cc b`.
    fn fcmp(&mut self, cc: FloatCC, a: Value, b: Value) -> Value {
        self.fx.b.ins().fcmp(cc, a, b)
    }
    fn icmp(&mut self, cc: IntCC, a: Value, b: Value) -> Value {
        self.fx.b.ins().icmp(cc, a, b)
    }
    /// `m ? a : b` on doubles, `m` an `I64X2` mask.
    fn select(&mut self, m: Value, a: Value, b: Value) -> Value {
        let m = self.float(m);
        self.fx.b.ins().bitselect(m, a, b)
    }
    /// `m ? a : b` on integers.
    fn iselect(&mut self, m: Value, a: Value, b: Value) -> Value {
        self.fx.b.ins().bitselect(m, a, b)
    }
    /// The double of each lane's integer `k` (|k| < 2^51), exactly: LLVM's `sitofp`.
    fn int_as_float(&mut self, k: Value) -> Value {
        let magic = self.ic(ROUNDING.to_bits() as i64);
        let sum = self.fx.b.ins().iadd(k, magic);
        let shifted = self.float(sum);
        let rounding = self.fc(ROUNDING);
        self.fsub(shifted, rounding)
    }
    /// Each lane's double truncated toward zero as an integer (|x| < 2^51): LLVM's `fptosi`.
    fn truncated_int(&mut self, x: Value) -> Value {
        let t = self.fx.b.ins().trunc(x);
        let rounding = self.fc(ROUNDING);
        let sum = self.fadd(t, rounding);
        let bits = self.bits(sum);
        let magic = self.ic(ROUNDING.to_bits() as i64);
        self.fx.b.ins().isub(bits, magic)
    }
}

/// Natural logarithm of both lanes of `x`: `lafuse_runtime::math::ln`, operation for
/// operation (`native::math::ln_inline` states the same in LLVM IR).
pub(super) fn ln_x2(fx: &mut Fx<'_>, x: Value) -> Value {
    let mut v = X2 { fx };
    // Subnormals are scaled into the normal range first (2^54 x, exponent - 54). Lanes that
    // are not positive and finite compute garbage here and are replaced at the end.
    let min_positive = v.fc(f64::MIN_POSITIVE);
    let sub = v.fcmp(FloatCC::LessThan, x, min_positive);
    let two_54 = v.fc(c::TWO_54);
    let scaled = v.fmul(x, two_54);
    let xs = v.select(sub, scaled, x);
    let (m54, zero) = (v.ic(-54), v.ic(0));
    let k0 = v.iselect(sub, m54, zero);
    let bits = v.bits(xs);

    // Reduce to r in [sqrt(2)/2, sqrt(2)) with x = 2^k r.
    let hx = v.fx.b.ins().ushr_imm_u(bits, 32);
    let shift = v.ic(c::HIGH_SHIFT);
    let hx = v.fx.b.ins().iadd(hx, shift);
    let ex = v.fx.b.ins().ushr_imm_u(hx, 20);
    let bias = v.ic(0x3ff);
    let k = v.fx.b.ins().isub(ex, bias);
    let k = v.fx.b.ins().iadd(k, k0);
    let mant_mask = v.ic(0x000f_ffff);
    let mant = v.fx.b.ins().band(hx, mant_mask);
    let sqrt_half = v.ic(c::SQRT_HALF_HIGH);
    let hr = v.fx.b.ins().iadd(mant, sqrt_half);
    let hr = v.fx.b.ins().ishl_imm_u(hr, 32);
    let low_mask = v.ic(0xffff_ffff);
    let lo = v.fx.b.ins().band(bits, low_mask);
    let rb = v.fx.b.ins().bor(hr, lo);
    let r = v.float(rb);

    // log(1 + f) = f - hfsq + s (hfsq + R(z)), s = f / (2 + f).
    let one = v.fc(1.0);
    let f = v.fsub(r, one);
    let half = v.fc(0.5);
    let hf = v.fmul(half, f);
    let hfsq = v.fmul(hf, f);
    let two = v.fc(2.0);
    let two_f = v.fadd(two, f);
    let s = v.fdiv(f, two_f);
    let z = v.fmul(s, s);
    let ww = v.fmul(z, z);
    let lg: Vec<Value> = c::LG.iter().map(|&g| v.fc(g)).collect();
    // t1 = w (Lg2 + w (Lg4 + w Lg6)); t2 = z (Lg1 + w (Lg3 + w (Lg5 + w Lg7))).
    let t = v.fmul(ww, lg[5]);
    let t = v.fadd(lg[3], t);
    let t1 = v.fmul(ww, t);
    let t = v.fadd(lg[1], t1);
    let t1 = v.fmul(ww, t);
    let t = v.fmul(ww, lg[6]);
    let t = v.fadd(lg[4], t);
    let t2 = v.fmul(ww, t);
    let t = v.fadd(lg[2], t2);
    let t2 = v.fmul(ww, t);
    let t = v.fadd(lg[0], t2);
    let t2 = v.fmul(z, t);
    let big_r = v.fadd(t2, t1);
    let dk = v.int_as_float(k);
    // s (hfsq + R) + dk ln2_lo - hfsq + f + dk ln2_hi, left to right.
    let t = v.fadd(hfsq, big_r);
    let y = v.fmul(s, t);
    let ln2_lo = v.fc(c::LN2_LO);
    let t = v.fmul(dk, ln2_lo);
    let y = v.fadd(y, t);
    let y = v.fsub(y, hfsq);
    let y = v.fadd(y, f);
    let ln2_hi = v.fc(c::LN2_HI);
    let t = v.fmul(dk, ln2_hi);
    let y = v.fadd(y, t);

    // Special lanes: log(±0) = -inf, log(negative) = NaN, log(inf) = inf, log(NaN) = NaN.
    let (fzero, neg_inf, nan, inf) = (
        v.fc(0.0),
        v.fc(f64::NEG_INFINITY),
        v.fc(f64::NAN),
        v.fc(f64::INFINITY),
    );
    let m = v.fcmp(FloatCC::Equal, x, fzero);
    let y = v.select(m, neg_inf, y);
    let m = v.fcmp(FloatCC::LessThan, x, fzero);
    let y = v.select(m, nan, y);
    let m = v.fcmp(FloatCC::Equal, x, inf);
    let y = v.select(m, inf, y);
    let m = v.fcmp(FloatCC::Unordered, x, x);
    v.select(m, x, y)
}

/// `e^x` on both lanes of `x`: `lafuse_runtime::math::exp`, operation for operation
/// (`native::math::exp_inline` states the same in LLVM IR).
pub(super) fn exp_x2(fx: &mut Fx<'_>, x: Value) -> Value {
    let mut v = X2 { fx };
    // The main path runs on a clamped stand-in (NaN as 0); special lanes are replaced last.
    let nan = v.fcmp(FloatCC::Unordered, x, x);
    let lo_clamp = v.fc(e::CLAMP_LO);
    let m = v.fcmp(FloatCC::LessThan, x, lo_clamp);
    let xc = v.select(m, lo_clamp, x);
    let hi_clamp = v.fc(e::CLAMP_HI);
    let m = v.fcmp(FloatCC::GreaterThan, xc, hi_clamp);
    let xc = v.select(m, hi_clamp, xc);
    let fzero = v.fc(0.0);
    let xc = v.select(nan, fzero, xc);
    let bits = v.bits(xc);
    let hx = v.fx.b.ins().ushr_imm_u(bits, 32);
    let abs_mask = v.ic(0x7fff_ffff);
    let hx = v.fx.b.ins().band(hx, abs_mask);
    let neg = v.fcmp(FloatCC::LessThan, xc, fzero);

    // k: rounded x / ln2 from 1.5 ln2 on, +-1 above ln2 / 2, else 0.
    let (mhalf, phalf) = (v.fc(-0.5), v.fc(0.5));
    let half = v.select(neg, mhalf, phalf);
    let inv_ln2 = v.fc(e::INV_LN2);
    let t = v.fmul(inv_ln2, xc);
    let kr = v.fadd(t, half);
    let k_round = v.truncated_int(kr);
    let (m1, p1, i0) = (v.ic(-1), v.ic(1), v.ic(0));
    let k_one = v.iselect(neg, m1, p1);
    let half_ln2 = v.ic(e::HALF_LN2_HIGH);
    let m = v.icmp(IntCC::SignedGreaterThan, hx, half_ln2);
    let k = v.iselect(m, k_one, i0);
    let three_half = v.ic(e::THREE_HALF_LN2_HIGH);
    let m = v.icmp(IntCC::SignedGreaterThanOrEqual, hx, three_half);
    let k = v.iselect(m, k_round, k);
    let kf = v.int_as_float(k);
    let ln2_hi = v.fc(e::LN2_HI);
    let t = v.fmul(kf, ln2_hi);
    let hi = v.fsub(xc, t);
    let ln2_lo = v.fc(e::LN2_LO);
    let lo = v.fmul(kf, ln2_lo);
    let r = v.fsub(hi, lo);
    let rr = v.fmul(r, r);
    // c = r - rr (P1 + rr (P2 + rr (P3 + rr (P4 + rr P5)))).
    let p: Vec<Value> = e::P.iter().map(|&q| v.fc(q)).collect();
    let t = v.fmul(rr, p[4]);
    let poly = v.fadd(p[3], t);
    let t = v.fmul(rr, poly);
    let poly = v.fadd(p[2], t);
    let t = v.fmul(rr, poly);
    let poly = v.fadd(p[1], t);
    let t = v.fmul(rr, poly);
    let poly = v.fadd(p[0], t);
    let t = v.fmul(rr, poly);
    let cc = v.fsub(r, t);
    // y = 1 + (r c / (2 - c) - lo + hi).
    let rc = v.fmul(r, cc);
    let two = v.fc(2.0);
    let two_c = v.fsub(two, cc);
    let t = v.fdiv(rc, two_c);
    let t = v.fsub(t, lo);
    let t = v.fadd(t, hi);
    let one = v.fc(1.0);
    let y = v.fadd(one, t);

    // y 2^k, pre-scaled once when 2^k is not a normal double.
    let i1023 = v.ic(1023);
    let big = v.icmp(IntCC::SignedGreaterThan, k, i1023);
    let im1022 = v.ic(-1022);
    let small = v.icmp(IntCC::SignedLessThan, k, im1022);
    let (two_m969, fone) = (v.fc(e::TWO_M969), v.fc(1.0));
    let pre = v.select(small, two_m969, fone);
    let two_1023 = v.fc(e::TWO_1023);
    let pre = v.select(big, two_1023, pre);
    let k_big = v.fx.b.ins().isub(k, i1023);
    let i969 = v.ic(969);
    let k_small = v.fx.b.ins().iadd(k, i969);
    let k2 = v.iselect(small, k_small, k);
    let k2 = v.iselect(big, k_big, k2);
    let bias = v.ic(0x3ff);
    let e2 = v.fx.b.ins().iadd(k2, bias);
    let e2 = v.fx.b.ins().ishl_imm_u(e2, 52);
    let two_k = v.float(e2);
    let t = v.fmul(y, pre);
    let scaled = v.fmul(t, two_k);
    let tiny = v.fadd(one, xc);
    let tiny_high = v.ic(e::TINY_HIGH);
    let m = v.icmp(IntCC::SignedLessThanOrEqual, hx, tiny_high);
    let out = v.select(m, tiny, scaled);

    // Special lanes: NaN stays, overflow to infinity, underflow to 0.
    let underflow = v.fc(e::UNDERFLOW);
    let m = v.fcmp(FloatCC::LessThan, x, underflow);
    let out = v.select(m, fzero, out);
    let (overflow, inf) = (v.fc(e::OVERFLOW), v.fc(f64::INFINITY));
    let m = v.fcmp(FloatCC::GreaterThan, x, overflow);
    let out = v.select(m, inf, out);
    v.select(nan, x, out)
}

/// `tanh` on both lanes of `x`: `lafuse_runtime::math::tanh`, operation for operation
/// (`native::math::tanh_inline` states the same in LLVM IR): every case of its `e^u - 1`
/// computed and the lane's chosen.
pub(super) fn tanh_x2(fx: &mut Fx<'_>, x: Value) -> Value {
    let mut v = X2 { fx };
    let bits = v.bits(x);
    let sign_mask = v.ic(i64::MIN);
    let sign = v.fx.b.ins().band(bits, sign_mask);
    let abs_mask = v.ic(i64::MAX);
    let abs_bits = v.fx.b.ins().band(bits, abs_mask);
    let a = v.float(abs_bits);

    // NaN and saturated lanes compute on a stand-in and are replaced at the end.
    let saturated = v.fc(th::SATURATED);
    let in_range = v.fcmp(FloatCC::LessThan, a, saturated);
    let one = v.fc(1.0);
    let ac = v.select(in_range, a, one);
    let big = v.fcmp(FloatCC::GreaterThanOrEqual, ac, one);
    let (two, minus_two) = (v.fc(2.0), v.fc(-2.0));
    let up = v.fmul(two, ac);
    let down = v.fmul(minus_two, ac);
    let u = v.select(big, up, down);

    // e^u - 1: k as `exp`'s, u = k ln2 + (x - c).
    let ubits = v.bits(u);
    let hu = v.fx.b.ins().ushr_imm_u(ubits, 32);
    let high_mask = v.ic(0x7fff_ffff);
    let hu = v.fx.b.ins().band(hu, high_mask);
    let fzero = v.fc(0.0);
    let neg = v.fcmp(FloatCC::LessThan, u, fzero);
    let (mhalf, phalf) = (v.fc(-0.5), v.fc(0.5));
    let half = v.select(neg, mhalf, phalf);
    let inv_ln2 = v.fc(th::INV_LN2);
    let t = v.fmul(inv_ln2, u);
    let kr = v.fadd(t, half);
    let k_round = v.truncated_int(kr);
    let (m1, p1, i0) = (v.ic(-1), v.ic(1), v.ic(0));
    let k_one = v.iselect(neg, m1, p1);
    let half_ln2 = v.ic(th::HALF_LN2_HIGH);
    let m = v.icmp(IntCC::SignedGreaterThan, hu, half_ln2);
    let k = v.iselect(m, k_one, i0);
    let three_half = v.ic(th::THREE_HALF_LN2_HIGH);
    let m = v.icmp(IntCC::SignedGreaterThanOrEqual, hu, three_half);
    let k = v.iselect(m, k_round, k);
    let kf = v.int_as_float(k);
    let ln2_hi = v.fc(th::LN2_HI);
    let t = v.fmul(kf, ln2_hi);
    let hi = v.fsub(u, t);
    let ln2_lo = v.fc(th::LN2_LO);
    let lo = v.fmul(kf, ln2_lo);
    let xr = v.fsub(hi, lo);
    let t = v.fsub(hi, xr);
    let c = v.fsub(t, lo);
    let hfx = v.fmul(phalf, xr);
    let hxs = v.fmul(xr, hfx);
    // r1 = 1 + hxs (Q1 + hxs (Q2 + hxs (Q3 + hxs (Q4 + hxs Q5)))).
    let q: Vec<Value> = th::Q.iter().map(|&g| v.fc(g)).collect();
    let t = v.fmul(hxs, q[4]);
    let p = v.fadd(q[3], t);
    let t = v.fmul(hxs, p);
    let p = v.fadd(q[2], t);
    let t = v.fmul(hxs, p);
    let p = v.fadd(q[1], t);
    let t = v.fmul(hxs, p);
    let p = v.fadd(q[0], t);
    let t = v.fmul(hxs, p);
    let r1 = v.fadd(one, t);
    let t = v.fmul(r1, hfx);
    let three = v.fc(3.0);
    let t = v.fsub(three, t);
    let num = v.fsub(r1, t);
    let xt = v.fmul(xr, t);
    let six = v.fc(6.0);
    let den = v.fsub(six, xt);
    let ratio = v.fdiv(num, den);
    let e = v.fmul(hxs, ratio);
    let xe = v.fmul(xr, e);
    let t = v.fsub(xe, hxs);
    let k0 = v.fsub(xr, t);
    let t = v.fsub(e, c);
    let t = v.fmul(xr, t);
    let e = v.fsub(t, c);
    let e = v.fsub(e, hxs);
    let bias = v.ic(0x3ff);
    let ek = v.fx.b.ins().iadd(k, bias);
    let ek = v.fx.b.ins().ishl_imm_u(ek, 52);
    let two_k = v.float(ek);
    let emk = v.fx.b.ins().isub(bias, k);
    let emk = v.fx.b.ins().ishl_imm_u(emk, 52);
    let two_minus_k = v.float(emk);
    let e_minus_x = v.fsub(e, xr);
    let t = v.fsub(xr, e);
    let t = v.fmul(phalf, t);
    let k_minus_one = v.fsub(t, phalf);
    let t = v.fsub(one, e_minus_x);
    let t = v.fmul(t, two_k);
    let far = v.fsub(t, one);
    let t = v.fsub(one, two_minus_k);
    let t = v.fsub(t, e_minus_x);
    let below_20 = v.fmul(t, two_k);
    let t = v.fadd(e, two_minus_k);
    let t = v.fsub(xr, t);
    let t = v.fadd(t, one);
    let from_20 = v.fmul(t, two_k);
    let i20 = v.ic(20);
    let m = v.icmp(IntCC::SignedLessThan, k, i20);
    let y = v.select(m, below_20, from_20);
    let im2 = v.ic(-2);
    let low = v.icmp(IntCC::SignedLessThanOrEqual, k, im2);
    let i56 = v.ic(56);
    let high = v.icmp(IntCC::SignedGreaterThan, k, i56);
    let m = v.fx.b.ins().bor(low, high);
    let y = v.select(m, far, y);
    let m = v.icmp(IntCC::Equal, k, m1);
    let y = v.select(m, k_minus_one, y);
    let m = v.icmp(IntCC::Equal, k, i0);
    let t = v.select(m, k0, y);

    // 1 - 2 / (t + 2) from 1 on, -t / (t + 2) below; the sign of x; x itself where tiny or NaN.
    let tbits = v.bits(t);
    let neg_bits = v.fx.b.ins().bxor(tbits, sign_mask);
    let minus_t = v.float(neg_bits);
    let numerator = v.select(big, two, minus_t);
    let den = v.fadd(t, two);
    let qt = v.fdiv(numerator, den);
    let one_minus = v.fsub(one, qt);
    let z = v.select(big, one_minus, qt);
    let z = v.select(in_range, z, one);
    let zbits = v.bits(z);
    let signed = v.fx.b.ins().bor(zbits, sign);
    let z = v.float(signed);
    let tiny = v.fc(th::TINY);
    let small = v.fcmp(FloatCC::LessThan, a, tiny);
    let nan = v.fcmp(FloatCC::Unordered, x, x);
    let keep = v.fx.b.ins().bor(small, nan);
    v.select(keep, x, z)
}
