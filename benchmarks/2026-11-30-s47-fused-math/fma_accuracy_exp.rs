// Scratch program (session 47): fdlibm's exp before and with fused multiply-adds
// (lafuse_core::math::exp since 426526c) against the C library's exp on 60 million arguments
// over the normal range, [-1, 1] and [-5e-7, 5e-7]. rustc -O -C target-cpu=native fma_accuracy_exp.rs && ./fma_accuracy_exp
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
const INV_LN2: f64 = f64::from_bits(0x3ff7_1547_652b_82fe);
const P: [f64; 5] = [f64::from_bits(0x3fc5_5555_5555_553e), f64::from_bits(0xbf66_c16c_16be_bd93), f64::from_bits(0x3f11_566a_af25_de2c), f64::from_bits(0xbebb_bd41_c5d2_6bf1), f64::from_bits(0x3e66_3769_72be_a4d0)];
fn k_of(x: f64) -> i64 { let hx = ((x.to_bits() >> 32) & 0x7fff_ffff) as i64;
    if hx >= 0x3ff0_a2b2 { (INV_LN2 * x + if x < 0.0 { -0.5 } else { 0.5 }) as i64 } else if hx > 0x3fd6_2e42 { if x < 0.0 { -1 } else { 1 } } else { 0 } }
fn fin(y: f64, k: i64) -> f64 { let (pre, k2) = if k > 1023 { (f64::from_bits(0x7fe0_0000_0000_0000), k - 1023) } else if k < -1022 { (f64::from_bits(0x0360_0000_0000_0000), k + 969) } else { (1.0, k) }; (y * pre) * f64::from_bits(((0x3ff + k2) as u64) << 52) }
fn old(x: f64) -> f64 { let k = k_of(x); let kf = k as f64; let hi = x - kf * LN2_HI; let lo = kf * LN2_LO; let r = hi - lo; let rr = r * r;
    let c = r - rr * (P[0] + rr * (P[1] + rr * (P[2] + rr * (P[3] + rr * P[4])))); fin(1.0 + (r * c / (2.0 - c) - lo + hi), k) }
#[target_feature(enable = "fma")] unsafe fn new(x: f64) -> f64 { let k = k_of(x); let kf = k as f64; let hi = (-kf).mul_add(LN2_HI, x); let lo = kf * LN2_LO; let r = hi - lo; let rr = r * r;
    let p = rr.mul_add(rr.mul_add(rr.mul_add(rr.mul_add(P[4], P[3]), P[2]), P[1]), P[0]); let c = (-rr).mul_add(p, r); fin(1.0 + (r * c / (2.0 - c) - lo + hi), k) }
fn main() { let mut s = 0x2545_f491_4f6c_dd1du64; let mut next = || { s ^= s << 13; s ^= s >> 7; s ^= s << 17; s };
  let (mut wo, mut wn, mut d, mut n) = (0i64, 0i64, 0u64, 0u64);
  for i in 0..60_000_000u64 { let u = (next() >> 11) as f64 / (1u64 << 53) as f64;
    let x = match i % 3 { 0 => -745.0 + u * 1454.0, 1 => (u - 0.5) * 2.0, _ => (u - 0.5) * 1e-6 };
    if x.abs() < 3.7e-9 { continue; }
    let c = x.exp(); let o = old(x); let nw = unsafe { new(x) }; if c == 0.0 || !c.is_finite() || c < 2.3e-308 { continue; }
    let eo = (o.to_bits() as i64 - c.to_bits() as i64).abs(); let en = (nw.to_bits() as i64 - c.to_bits() as i64).abs();
    wo = wo.max(eo); wn = wn.max(en); n += 1; if o != nw { d += 1; } }
  println!("n {n} worst old {wo} new {wn} differ {d}"); }
