// Scratch program (session 47): fdlibm's log as lafuse computed it before (no fused
// multiply-adds) and with fused multiply-adds (lafuse_core::math::ln since 426526c), against
// the C library's log on 60 million arguments (random bit patterns, values near 1, every
// binade of [2^-64, 2)): the worst distance in ulps and how many results the two forms
// differ on. Build and run: rustc -O -C target-cpu=native fma_accuracy_ln.rs && ./fma_accuracy_ln
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
const LG: [f64; 7] = [
    f64::from_bits(0x3fe5_5555_5555_5593), f64::from_bits(0x3fd9_9999_9997_fa04),
    f64::from_bits(0x3fd2_4924_9422_9359), f64::from_bits(0x3fcc_71c5_1d8e_78af),
    f64::from_bits(0x3fc7_4664_96cb_03de), f64::from_bits(0x3fc3_9a09_d078_c69f),
    f64::from_bits(0x3fc2_f112_df3e_5244)];
const HIGH_SHIFT: i64 = 0x3ff0_0000 - 0x3fe6_a09e;
const SQRT_HALF_HIGH: i64 = 0x3fe6_a09e;
fn red(x: f64) -> (f64, f64) {
    let (xs, k0) = if x < f64::MIN_POSITIVE { (x * 18014398509481984.0, -54) } else { (x, 0) };
    let bits = xs.to_bits() as i64;
    let hx = (bits >> 32) + HIGH_SHIFT;
    let k = (hx >> 20) - 0x3ff + k0;
    let r = f64::from_bits((((hx & 0x000f_ffff) + SQRT_HALF_HIGH) << 32 | (bits & 0xffff_ffff)) as u64);
    (r, k as f64)
}
fn ln_old(x: f64) -> f64 {
    let (r, dk) = red(x);
    let f = r - 1.0; let hfsq = 0.5 * f * f; let s = f / (2.0 + f); let z = s * s; let w = z * z;
    let t1 = w * (LG[1] + w * (LG[3] + w * LG[5]));
    let t2 = z * (LG[0] + w * (LG[2] + w * (LG[4] + w * LG[6])));
    let big_r = t2 + t1;
    s * (hfsq + big_r) + dk * LN2_LO - hfsq + f + dk * LN2_HI
}
#[target_feature(enable = "fma")]
unsafe fn ln_new(x: f64) -> f64 {
    let (r, dk) = red(x);
    let f = r - 1.0; let hfsq = 0.5 * f * f; let s = f / (2.0 + f); let z = s * s; let w = z * z;
    let t1 = w * w.mul_add(w.mul_add(LG[5], LG[3]), LG[1]);
    let big_r = z.mul_add(w.mul_add(w.mul_add(w.mul_add(LG[6], LG[4]), LG[2]), LG[0]), t1);
    let a = s.mul_add(hfsq + big_r, dk * LN2_LO);
    dk.mul_add(LN2_HI, (a - hfsq) + f)
}
fn ulps(a: f64, b: f64) -> i64 { a.to_bits() as i64 - b.to_bits() as i64 }
fn main() {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || { s ^= s << 13; s ^= s >> 7; s ^= s << 17; s };
    let (mut wo, mut wn, mut diff, mut n) = (0i64, 0i64, 0u64, 0u64);
    let mut hist_new = [0u64; 3]; let mut hist_old = [0u64; 3];
    for i in 0..60_000_000u64 {
        let x = match i % 3 {
            0 => f64::from_bits(next() >> 1),
            1 => 1.0 + ((next() >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 0.6,
            _ => f64::from_bits((next() >> 12) | 0x3ff0_0000_0000_0000) * 0.5f64.powi((next() % 64) as i32),
        };
        if !(x > 0.0 && x.is_finite()) { continue; }
        let c = x.ln(); let o = ln_old(x); let nw = unsafe { ln_new(x) };
        let (eo, en) = (ulps(o, c).abs(), ulps(nw, c).abs());
        wo = wo.max(eo); wn = wn.max(en); n += 1;
        hist_old[eo.min(2) as usize] += 1; hist_new[en.min(2) as usize] += 1;
        if o != nw { diff += 1; }
    }
    println!("n {n} worst vs glibc: old {wo} new {wn}; differ {diff}; old hist {hist_old:?} new hist {hist_new:?}");
}
