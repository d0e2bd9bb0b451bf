//! The device helpers against the CPU's: the same IR bodies compiled for the host (through the
//! native backend's JIT) and called next to the CPU helpers (`helper_address`) on ordinary,
//! tiny, subnormal, huge and special inputs and on pairs of them; and a GPU kernel that uses
//! every helper, which must come out self-contained and pass `ptxas`.

use super::super::samples::{HELPER_BINARY, HELPER_UNARY};
use super::super::tests::{dump, ptxas};
use super::super::{generate, GpuMain};
use super::{define_helpers, defines, HELPERS};
use crate::native::expr::{helper_address, ierr, Fx};
use crate::native::llvm;
use lafuse_compiler::fusion::cplan::{Access, CNode, CPlan, InputKind, TemplateSpec};
use lafuse_compiler::fusion::template::CellType;
use lafuse_compiler::hops::BinaryOp;

fn binary(name: &str) -> bool {
    name == "lafuse_pow" || name == "lafuse_fmod" || name.starts_with("lafuse_bitw")
}

/// The helpers compiled for the host: `test_<name>` calls helper `name` the way a kernel
/// does (`Fx::helper`'s declaration, then [`define_helpers`]).
struct Host {
    jit: llvm::Jit,
}

impl Host {
    fn new() -> Host {
        let (jit, ()) = llvm::jit_module(
            "devmath_test",
            |ctx, module| {
                let f64t = ctx.f64_type();
                for (name, _, _) in HELPERS {
                    let arity = if binary(name) { 2 } else { 1 };
                    let params = vec![f64t.into(); arity];
                    let f = module.add_function(
                        &format!("test_{name}"),
                        f64t.fn_type(&params, false),
                        None,
                    );
                    let fx = Fx::new(ctx, module, f);
                    let mut args = Vec::new();
                    for k in 0..arity as u32 {
                        let p = fx.param(k)?.into_float_value();
                        args.push(fx.splat(p, 1)?);
                    }
                    let r = fx.helper(name, &args)?;
                    let r =
                        fx.b.build_extract_element(r, fx.i64c(0), "r")
                            .map_err(ierr)?;
                    fx.b.build_return(Some(&r)).map_err(ierr)?;
                }
                define_helpers(ctx, module)?;
                for f in module.get_functions() {
                    if f.count_basic_blocks() > 0 {
                        llvm::set_function_attributes(ctx, f);
                    }
                }
                llvm::verify(module, "devmath test module")
            },
            llvm::optimize,
            |_| None,
        )
        .expect("compiling the device helpers for the host");
        Host { jit }
    }

    fn unary(&self, name: &str) -> extern "C" fn(f64) -> f64 {
        let a = self.jit.function(&format!("test_{name}")).unwrap();
        // SAFETY: `test_<name>` is `double(double)`, compiled above and alive with `self`.
        unsafe { std::mem::transmute::<usize, extern "C" fn(f64) -> f64>(a) }
    }

    fn binary(&self, name: &str) -> extern "C" fn(f64, f64) -> f64 {
        let a = self.jit.function(&format!("test_{name}")).unwrap();
        // SAFETY: as in `unary`, `double(double, double)`.
        unsafe { std::mem::transmute::<usize, extern "C" fn(f64, f64) -> f64>(a) }
    }
}

fn cpu_unary(name: &str) -> extern "C" fn(f64) -> f64 {
    let a = helper_address(name).unwrap();
    // SAFETY: the CPU helper `name` is an `extern "C" fn(f64) -> f64`.
    unsafe { std::mem::transmute::<usize, extern "C" fn(f64) -> f64>(a) }
}

fn cpu_binary(name: &str) -> extern "C" fn(f64, f64) -> f64 {
    let a = helper_address(name).unwrap();
    // SAFETY: the CPU helper `name` is an `extern "C" fn(f64, f64) -> f64`.
    unsafe { std::mem::transmute::<usize, extern "C" fn(f64, f64) -> f64>(a) }
}

/// Distance in ulp between two non-NaN doubles (across zero and into the infinities).
fn ulps(a: f64, b: f64) -> u64 {
    let ord = |x: f64| {
        let b = x.to_bits() as i64;
        if b < 0 {
            i64::MIN.wrapping_sub(b) as i128
        } else {
            b as i128
        }
    };
    (ord(a) - ord(b)).unsigned_abs().min(u64::MAX as u128) as u64
}

/// A deterministic stream of pseudo-random 64-bit words.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let x = self.0;
        (x ^ (x >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9) ^ (x >> 32)
    }
    /// A double with uniformly random significand and exponent in `[lo, hi]`, random sign.
    fn double(&mut self, lo: i64, hi: i64) -> f64 {
        let r = self.next();
        let e = lo + (r % (hi - lo + 1) as u64) as i64;
        let bits = ((e + 1023) as u64) << 52 | (self.next() >> 12) | (r & (1 << 63));
        f64::from_bits(bits)
    }
}

/// Inputs for the one-argument functions: ordinary values, values near 0 and subnormals,
/// near multiples of pi/2 (and their neighbours), huge values, the interval boundaries of the
/// methods, the specials, and random doubles of every magnitude.
fn unary_inputs() -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::MIN_POSITIVE,
        5e-324,
        1e-310,
        f64::MAX,
        1e10,
        1e15,
        1e22,
        1e100,
        1e200,
        1e300,
        0.5,
        0.55,
        0.975,
        7.0 / 16.0,
        11.0 / 16.0,
        19.0 / 16.0,
        39.0 / 16.0,
        0.6744,
        1.0,
        22.0,
        709.78,
        710.0,
        710.4758600739439,
        711.0,
        745.0,
        1e-8,
        2f64.powi(-26),
        2f64.powi(-27),
        2f64.powi(-28),
        2f64.powi(66),
        2f64.powi(20) * std::f64::consts::FRAC_PI_2,
        5_319_372_648_326_908.0 * 2f64.powi(-51),
    ];
    for i in -3000..=3000 {
        v.push(i as f64 * 0.0137);
        v.push(i as f64 / 3000.0);
    }
    for k in 1..=1074 {
        v.push(2f64.powi(-k.min(1022)) * if k > 1022 { 2f64.powi(1022 - k) } else { 1.0 });
    }
    for k in 0..1024 {
        v.push(1.5 * 2f64.powi(k));
    }
    for k in 1..=2000 {
        let m = k as f64 * std::f64::consts::FRAC_PI_2;
        for d in -2i64..=2 {
            v.push(f64::from_bits((m.to_bits() as i64 + d) as u64));
        }
    }
    for d in 1..=60u64 {
        v.push(f64::from_bits(1f64.to_bits() - d));
        v.push(f64::from_bits(0.5f64.to_bits() - d));
        v.push(f64::from_bits(0.5f64.to_bits() + d));
    }
    let mut rng = Lcg(42);
    for _ in 0..20000 {
        v.push(rng.double(-30, 12));
    }
    for _ in 0..5000 {
        v.push(rng.double(-1074, 1023));
    }
    for _ in 0..5000 {
        v.push(rng.double(-3, 0));
    }
    let negated: Vec<f64> = v.iter().map(|x| -x).collect();
    v.extend(negated);
    v
}

/// Largest ulp error of the host-compiled `name` over `inputs`, NaN-ness and zeros' signs
/// exactly as on the CPU.
fn max_ulps_unary(host: &Host, name: &str, inputs: &[f64]) -> (u64, f64) {
    let (dev, cpu) = (host.unary(name), cpu_unary(name));
    let mut worst = (0, 0.0);
    for &x in inputs {
        if x.abs() == CLOSEST_TO_PI_2 {
            continue;
        }
        let (d, c) = (dev(x), cpu(x));
        assert_eq!(d.is_nan(), c.is_nan(), "{name}({x:e}): {d:e} vs CPU {c:e}");
        if c.is_nan() {
            continue;
        }
        if c == 0.0 || c.is_infinite() {
            assert_eq!(
                d.to_bits(),
                c.to_bits(),
                "{name}({x:e}): {d:e} vs CPU {c:e}"
            );
        }
        let u = ulps(d, c);
        if u > worst.0 {
            worst = (u, x);
        }
    }
    worst
}

#[test]
fn every_helper_the_generators_call_has_a_device_body() {
    for name in [
        "lafuse_sin",
        "lafuse_cos",
        "lafuse_tan",
        "lafuse_asin",
        "lafuse_acos",
        "lafuse_atan",
        "lafuse_sinh",
        "lafuse_cosh",
        "lafuse_pow",
        "lafuse_fmod",
        "lafuse_bitw_and",
        "lafuse_bitw_or",
        "lafuse_bitw_xor",
        "lafuse_bitw_shift_l",
        "lafuse_bitw_shift_r",
    ] {
        assert!(helper_address(name).is_some(), "{name} is no CPU helper");
        assert!(defines(name), "{name} has no device body");
    }
}

/// The bounds, in ulp of the CPU's result (the system libm, nearly correctly rounded).
const UNARY_BOUNDS: [(&str, u64); 8] = [
    ("lafuse_sin", 1),
    ("lafuse_cos", 1),
    ("lafuse_tan", 2),
    ("lafuse_asin", 1),
    ("lafuse_acos", 1),
    ("lafuse_atan", 1),
    ("lafuse_sinh", 2),
    ("lafuse_cosh", 2),
];

/// The double closest to a multiple of pi/2 (6381956970095103 2^797, after Kahan and
/// McDonald): its remainder is about 2^-61, so its cosine and tangent need every bit of the
/// reduction. The system libm misses them by 8 and 14 ulp; the values here are the correctly
/// rounded ones (computed with 2000-bit arithmetic).
const CLOSEST_TO_PI_2: f64 = 5.319_372_648_326_541e255;

#[test]
fn the_hardest_argument_reduction_is_exact() {
    assert_eq!(CLOSEST_TO_PI_2, 6_381_956_970_095_103.0 * 2f64.powi(797));
    let host = Host::new();
    for (name, bits) in [
        ("lafuse_sin", 0x3ff0_0000_0000_0000u64),
        ("lafuse_cos", 0xbc21_4ae7_2e6b_a22f),
        ("lafuse_tan", 0xc3bd_9ba9_a797_5636),
    ] {
        let r = host.unary(name)(CLOSEST_TO_PI_2);
        assert_eq!(
            r.to_bits(),
            bits,
            "{name}: {r:e} vs {:e}",
            f64::from_bits(bits)
        );
    }
}

#[test]
fn transcendental_helpers_match_the_cpu_within_a_few_ulp() {
    let host = Host::new();
    let inputs = unary_inputs();
    let mut failures = Vec::new();
    for (name, bound) in UNARY_BOUNDS {
        let (u, x) = max_ulps_unary(&host, name, &inputs);
        eprintln!("{name}: max {u} ulp (at {x:e})");
        if u > bound {
            failures.push(format!("{name}: {u} ulp at {x:e} (bound {bound})"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Operands of the binary functions: specials, integers and fractions of both signs, tiny and
/// huge values.
fn operands() -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.0,
        -2.0,
        3.0,
        -3.0,
        0.5,
        -0.5,
        1.5,
        -2.5,
        7.0,
        -7.0,
        10.0,
        0.1,
        -0.1,
        std::f64::consts::PI,
        std::f64::consts::E,
        0.999_999_999_999_999_9,
        1.000_000_000_000_000_2,
        0.999_999_9,
        1.000_000_1,
        31.0,
        32.0,
        33.0,
        53.0,
        1023.0,
        -1074.0,
        123_456.789,
        2_147_483_647.0,
        2_147_483_647.9,
        2_147_483_648.0,
        -2_147_483_648.0,
        -2_147_483_648.5,
        -2_147_483_649.0,
        4_294_967_296.0,
        9_007_199_254_740_992.0,
        9_007_199_254_740_994.0,
        1e10,
        1e22,
        1e300,
        -1e300,
        f64::MAX,
        f64::MIN_POSITIVE,
        5e-324,
        -5e-324,
        1e-310,
        1e-300,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    let negated: Vec<f64> = v.iter().map(|x| -x).collect();
    v.extend(negated);
    v
}

#[test]
fn fmod_and_bit_operations_are_bit_exact() {
    let host = Host::new();
    let ops = operands();
    let mut rng = Lcg(7);
    let mut pairs: Vec<(f64, f64)> = ops
        .iter()
        .flat_map(|&a| ops.iter().map(move |&b| (a, b)))
        .collect();
    for _ in 0..20000 {
        pairs.push((rng.double(-1074, 1023), rng.double(-1074, 1023)));
        pairs.push((rng.double(-5, 40), rng.double(-5, 10)));
        let a = (rng.next() as i64 >> 20) as f64 + (rng.next() % 4) as f64 * 0.25;
        let b = (rng.next() % 80) as f64 - 20.0;
        pairs.push((a, b));
    }
    for name in [
        "lafuse_fmod",
        "lafuse_bitw_and",
        "lafuse_bitw_or",
        "lafuse_bitw_xor",
        "lafuse_bitw_shift_l",
        "lafuse_bitw_shift_r",
    ] {
        let (dev, cpu) = (host.binary(name), cpu_binary(name));
        for &(a, b) in &pairs {
            let (d, c) = (dev(a, b), cpu(a, b));
            assert!(
                d.to_bits() == c.to_bits() || (d.is_nan() && c.is_nan()),
                "{name}({a:e}, {b:e}): {d:e} vs CPU {c:e}"
            );
        }
    }
}

/// The bound of `pow`, in ulp of the CPU's (glibc's, correctly rounded) result.
const POW_BOUND: u64 = 1;

#[test]
fn pow_matches_the_cpu_exactly_in_special_cases_and_within_a_few_ulp_otherwise() {
    let host = Host::new();
    let (dev, cpu) = (host.binary("lafuse_pow"), cpu_binary("lafuse_pow"));
    let ops = operands();
    let mut pairs: Vec<(f64, f64)> = ops
        .iter()
        .flat_map(|&a| ops.iter().map(move |&b| (a, b)))
        .collect();
    let mut rng = Lcg(99);
    for _ in 0..30000 {
        pairs.push((rng.double(-10, 10), rng.double(-6, 6)));
        pairs.push((rng.double(-1074, 1023), rng.double(-8, 3)));
        // Near 1 with large exponents, and results near overflow and underflow.
        let x = 1.0 + rng.double(-40, -10);
        pairs.push((x, rng.double(10, 45)));
        let x = rng.double(-3, 8).abs();
        pairs.push((x, 700.0 / x.ln() * (1.0 + rng.double(-12, -3))));
        pairs.push((x, -740.0 / x.ln() * (1.0 + rng.double(-12, -3))));
    }
    for b in 2..=20 {
        for k in -12..=40 {
            pairs.push((b as f64, k as f64));
            pairs.push((-(b as f64), k as f64));
        }
    }
    let special = |v: f64| !v.is_finite() || v == 0.0;
    let (mut worst, mut at) = (0, (0.0, 0.0));
    for &(x, y) in &pairs {
        let (d, c) = (dev(x, y), cpu(x, y));
        assert_eq!(
            d.is_nan(),
            c.is_nan(),
            "pow({x:e}, {y:e}): {d:e} vs CPU {c:e}"
        );
        if c.is_nan() {
            continue;
        }
        // (Not y = -1 or 1/2: 1/x and sqrt(x) round correctly, the CPU's pow (glibc's,
        // within 0.52 ulp) not always.)
        if special(x) || special(y) || x.abs() == 1.0 || y == 1.0 || y == 2.0 || special(c) {
            assert_eq!(
                d.to_bits(),
                c.to_bits(),
                "pow({x:e}, {y:e}): {d:e} vs CPU {c:e}"
            );
        }
        // Integer powers that a double holds exactly come out exactly.
        if x.fract() == 0.0 && x.abs() < 1e6 && (0.0..64.0).contains(&y) && y.fract() == 0.0 {
            let exact = (x as i128).checked_pow(y as u32);
            if exact.is_some_and(|v| v.unsigned_abs() <= 1 << 53) {
                assert_eq!(d, c, "pow({x:e}, {y:e}) is an exact integer");
            }
        }
        let u = ulps(d, c);
        if u > worst {
            (worst, at) = (u, (x, y));
        }
    }
    eprintln!("lafuse_pow: max {worst} ulp (at {:e}, {:e})", at.0, at.1);
    assert!(worst <= POW_BOUND, "pow: {worst} ulp at {at:?}");
}

// ---- the GPU kernel --------------------------------------------------------------------------

/// `sum` of every helper the generators call, of `X` and `Y`: a NoAgg Cell plan.
fn every_helper_plan() -> CPlan {
    let mut nodes = vec![
        CNode::Data {
            input: 0,
            access: Access::Main,
        },
        CNode::Data {
            input: 1,
            access: Access::Aligned,
        },
    ];
    let mut terms = Vec::new();
    for (f, _) in HELPER_UNARY {
        nodes.push(CNode::Unary { f, x: 0 });
        terms.push(nodes.len() - 1);
    }
    for (f, _, _) in HELPER_BINARY {
        nodes.push(CNode::Binary { f, a: 0, b: 1 });
        terms.push(nodes.len() - 1);
    }
    let mut acc = terms[0];
    for &t in &terms[1..] {
        nodes.push(CNode::Binary {
            f: BinaryOp::Add,
            a: acc,
            b: t,
        });
        acc = nodes.len() - 1;
    }
    CPlan {
        template: TemplateSpec::Cell {
            cell_type: CellType::NoAgg,
            agg: None,
            sparse_safe: false,
        },
        inputs: vec![InputKind::Matrix, InputKind::Matrix],
        nodes,
        outputs: vec![acc],
    }
}

#[test]
fn a_kernel_calling_every_helper_is_self_contained_and_passes_ptxas() {
    let k = generate(&every_helper_plan(), GpuMain::Dense).expect("generating the kernel");
    let ptx = k.ptx.as_str().to_string();
    dump("", "devmath", &ptx);
    assert!(!ptx.contains(".extern"), "{ptx}");
    assert!(ptx.contains(".entry lafuse_kernel("), "{ptx}");
    // No library function of the device (libdevice's `__nv_*`) is referenced.
    assert!(!ptx.contains("__nv_"), "{ptx}");
    let Some(ptxas) = ptxas() else {
        assert!(
            std::env::var_os("LAFUSE_REQUIRE_PTXAS").is_none(),
            "LAFUSE_REQUIRE_PTXAS is set but no ptxas was found"
        );
        eprintln!("ptxas skipped: set LAFUSE_PTXAS");
        return;
    };
    let file = std::env::temp_dir().join(format!("lafuse-devmath-{}.ptx", std::process::id()));
    std::fs::write(&file, ptx.as_bytes()).unwrap();
    let out = std::process::Command::new(&ptxas)
        .args(["-arch=sm_80", "-o", "/dev/null"])
        .arg(&file)
        .output()
        .expect("running ptxas");
    let _ = std::fs::remove_file(&file);
    assert!(
        out.status.success(),
        "ptxas refused the kernel:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
