//! Device versions of the scalar helpers the CPU backends call ([`crate::native::expr`]'s
//! `lafuse_sin`, `lafuse_pow`, `lafuse_fmod`, `lafuse_bitw_and`, ...), as LLVM IR function
//! bodies: a GPU kernel has no Rust runtime to call, and NVPTX turns `llvm.sin`, `llvm.pow` or
//! `frem` into calls of libdevice, which lafuse does not ship. So each helper the kernel
//! declares gets a body here, built only from IEEE arithmetic, integer operations and the
//! intrinsics NVPTX lowers to single instructions (`fabs`, `floor`, `sqrt`, `fma`, `ctlz`),
//! and the kernel's calls resolve inside its module.
//!
//! The bodies are target-independent IR: the tests compile them for the host too and compare
//! them with the CPU helpers bit for bit (bitwise operations, `%%`, `^`'s special cases) or
//! within a few ulp (the transcendental functions, whose methods are fdlibm's; the CPU calls
//! the system's libm, which rounds nearly correctly). See [`trig`], [`inverse`], [`pow`],
//! [`fmod`] and, here, the hyperbolic functions and the bit operations.

mod fmod;
mod inverse;
mod pow;
mod trig;

use crate::backend::CodegenError;
use crate::native::expr::{ierr, missing_intrinsic, Fx};
use crate::native::math;
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::{Linkage, Module};
use inkwell::types::IntType;
use inkwell::values::{BasicMetadataValueEnum, FloatValue, FunctionValue, IntValue};
use inkwell::{FloatPredicate, IntPredicate};

type F<'c> = FloatValue<'c>;
type I<'c> = IntValue<'c>;
type R<T> = Result<T, CodegenError>;

/// A helper's body: its result from its parameters.
type Body = for<'a, 'm, 'c> fn(&E<'a, 'm, 'c>, &[F<'c>]) -> R<F<'c>>;

/// The helpers defined here: name, body, and whether it is small enough to inline always.
const HELPERS: [(&str, Body, bool); 15] = [
    ("lafuse_sin", trig::sin, false),
    ("lafuse_cos", trig::cos, false),
    ("lafuse_tan", trig::tan, false),
    ("lafuse_asin", inverse::asin, false),
    ("lafuse_acos", inverse::acos, false),
    ("lafuse_atan", inverse::atan, false),
    ("lafuse_sinh", sinh, false),
    ("lafuse_cosh", cosh, false),
    ("lafuse_pow", pow::pow, false),
    ("lafuse_fmod", fmod::fmod, false),
    ("lafuse_bitw_and", bitw_and, true),
    ("lafuse_bitw_or", bitw_or, true),
    ("lafuse_bitw_xor", bitw_xor, true),
    ("lafuse_bitw_shift_l", bitw_shift_l, true),
    ("lafuse_bitw_shift_r", bitw_shift_r, true),
];

/// Whether `name` is a helper this module can define.
#[cfg(test)]
pub(super) fn defines(name: &str) -> bool {
    HELPERS.iter().any(|(n, _, _)| *n == name)
}

/// Gives every helper that `module` declares without a body (`Fx::helper`'s `double(double)`
/// or `double(double, double)`, external) a body, with internal linkage: the calls stay as
/// they are and now resolve inside the module. Declarations of other functions are left
/// alone (`nvptx::check_calls` refuses them later).
pub(super) fn define_helpers<'c>(ctx: &'c Context, module: &Module<'c>) -> R<()> {
    let mut todo = Vec::new();
    let mut f = module.get_first_function();
    while let Some(func) = f {
        if func.count_basic_blocks() == 0 {
            let name = func.get_name().to_string_lossy().into_owned();
            if let Some(&(_, body, inline)) = HELPERS.iter().find(|(n, _, _)| *n == name) {
                todo.push((func, body, inline));
            }
        }
        f = func.get_next_function();
    }
    if todo.is_empty() {
        return Ok(());
    }
    // The hyperbolic functions use the shared `exp` ([`math::exp`]), whose one-lane version
    // the PTX kernels define already.
    if module.get_function("lafuse_exp_v1").is_none() {
        math::define_one_lane(ctx, module)?;
    }
    for (func, body, inline) in todo {
        define(ctx, module, func, body, inline)?;
    }
    Ok(())
}

fn define<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    func: FunctionValue<'c>,
    body: Body,
    inline: bool,
) -> R<()> {
    let f64t = ctx.f64_type();
    let params = func.get_params();
    if func.get_type().get_return_type() != Some(f64t.into())
        || params.is_empty()
        || params.iter().any(|p| !p.is_float_value())
    {
        return Err(ierr(format!(
            "helper {:?} is not declared as a function of doubles",
            func.get_name()
        )));
    }
    func.set_linkage(Linkage::Internal);
    if inline {
        func.add_attribute(
            inkwell::attributes::AttributeLoc::Function,
            crate::native::llvm::enum_attr(ctx, "alwaysinline"),
        );
    }
    let fx = Fx::new(ctx, module, func);
    let e = E { fx: &fx };
    let args: Vec<F<'c>> = params.iter().map(|p| p.into_float_value()).collect();
    let r = body(&e, &args)?;
    fx.b.build_return(Some(&r)).map_err(ierr)?;
    Ok(())
}

/// Scalar IR emission for one helper body: thin wrappers over the builder with short names,
/// so that the bodies read like the C they follow.
pub(super) struct E<'a, 'm, 'c> {
    pub fx: &'a Fx<'m, 'c>,
}

impl<'a, 'm, 'c> E<'a, 'm, 'c> {
    fn b(&self) -> &Builder<'c> {
        &self.fx.b
    }
    fn c(&self, v: f64) -> F<'c> {
        self.fx.ctx.f64_type().const_float(v)
    }
    fn i64t(&self) -> IntType<'c> {
        self.fx.ctx.i64_type()
    }
    /// An `i64` constant.
    fn i(&self, v: i64) -> I<'c> {
        self.i64t().const_int(v as u64, true)
    }
    fn add(&self, a: F<'c>, b: F<'c>) -> R<F<'c>> {
        self.b().build_float_add(a, b, "a").map_err(ierr)
    }
    fn sub(&self, a: F<'c>, b: F<'c>) -> R<F<'c>> {
        self.b().build_float_sub(a, b, "s").map_err(ierr)
    }
    fn mul(&self, a: F<'c>, b: F<'c>) -> R<F<'c>> {
        self.b().build_float_mul(a, b, "m").map_err(ierr)
    }
    fn div(&self, a: F<'c>, b: F<'c>) -> R<F<'c>> {
        self.b().build_float_div(a, b, "d").map_err(ierr)
    }
    fn neg(&self, a: F<'c>) -> R<F<'c>> {
        self.b().build_float_neg(a, "n").map_err(ierr)
    }
    /// `a * b + c` rounded once.
    fn fma(&self, a: F<'c>, b: F<'c>, c: F<'c>) -> R<F<'c>> {
        self.call(
            "llvm.fma",
            a.get_type().into(),
            &[a.into(), b.into(), c.into()],
        )
        .map(|v| v.into_float_value())
    }
    /// An overloaded intrinsic of one type `ty`.
    fn call(
        &self,
        name: &str,
        ty: inkwell::types::BasicTypeEnum<'c>,
        args: &[BasicMetadataValueEnum<'c>],
    ) -> R<inkwell::values::BasicValueEnum<'c>> {
        let f = Intrinsic::find(name)
            .and_then(|i| i.get_declaration(self.fx.module, &[ty]))
            .ok_or_else(|| missing_intrinsic(name))?;
        let r = self.b().build_call(f, args, "i").map_err(ierr)?;
        match r.try_as_basic_value() {
            inkwell::values::ValueKind::Basic(v) => Ok(v),
            _ => Err(ierr("intrinsic returns nothing")),
        }
    }
    fn unary(&self, name: &str, x: F<'c>) -> R<F<'c>> {
        self.call(name, x.get_type().into(), &[x.into()])
            .map(|v| v.into_float_value())
    }
    fn abs(&self, x: F<'c>) -> R<F<'c>> {
        self.unary("llvm.fabs", x)
    }
    fn floor(&self, x: F<'c>) -> R<F<'c>> {
        self.unary("llvm.floor", x)
    }
    fn sqrt(&self, x: F<'c>) -> R<F<'c>> {
        self.unary("llvm.sqrt", x)
    }
    /// Leading zero bits of an integer (its width for 0).
    fn ctlz(&self, x: I<'c>) -> R<I<'c>> {
        let no = self.fx.ctx.bool_type().const_zero();
        self.call("llvm.ctlz", x.get_type().into(), &[x.into(), no.into()])
            .map(|v| v.into_int_value())
    }
    fn fcmp(&self, p: FloatPredicate, a: F<'c>, b: F<'c>) -> R<I<'c>> {
        self.b().build_float_compare(p, a, b, "fc").map_err(ierr)
    }
    fn lt(&self, a: F<'c>, b: F<'c>) -> R<I<'c>> {
        self.fcmp(FloatPredicate::OLT, a, b)
    }
    fn gt(&self, a: F<'c>, b: F<'c>) -> R<I<'c>> {
        self.fcmp(FloatPredicate::OGT, a, b)
    }
    fn eq(&self, a: F<'c>, b: F<'c>) -> R<I<'c>> {
        self.fcmp(FloatPredicate::OEQ, a, b)
    }
    fn is_nan(&self, a: F<'c>) -> R<I<'c>> {
        self.fcmp(FloatPredicate::UNO, a, a)
    }
    fn sel(&self, c: I<'c>, a: F<'c>, b: F<'c>) -> R<F<'c>> {
        Ok(self
            .b()
            .build_select(c, a, b, "sel")
            .map_err(ierr)?
            .into_float_value())
    }
    fn isel(&self, c: I<'c>, a: I<'c>, b: I<'c>) -> R<I<'c>> {
        Ok(self
            .b()
            .build_select(c, a, b, "isel")
            .map_err(ierr)?
            .into_int_value())
    }
    fn icmp(&self, p: IntPredicate, a: I<'c>, b: I<'c>) -> R<I<'c>> {
        self.b().build_int_compare(p, a, b, "ic").map_err(ierr)
    }
    fn iadd(&self, a: I<'c>, b: I<'c>) -> R<I<'c>> {
        self.b().build_int_add(a, b, "ia").map_err(ierr)
    }
    fn isub(&self, a: I<'c>, b: I<'c>) -> R<I<'c>> {
        self.b().build_int_sub(a, b, "is").map_err(ierr)
    }
    fn imul(&self, a: I<'c>, b: I<'c>) -> R<I<'c>> {
        self.b().build_int_mul(a, b, "im").map_err(ierr)
    }
    fn and(&self, a: I<'c>, b: I<'c>) -> R<I<'c>> {
        self.b().build_and(a, b, "and").map_err(ierr)
    }
    fn or(&self, a: I<'c>, b: I<'c>) -> R<I<'c>> {
        self.b().build_or(a, b, "or").map_err(ierr)
    }
    fn xor(&self, a: I<'c>, b: I<'c>) -> R<I<'c>> {
        self.b().build_xor(a, b, "xor").map_err(ierr)
    }
    fn not(&self, a: I<'c>) -> R<I<'c>> {
        self.b().build_not(a, "not").map_err(ierr)
    }
    fn shl(&self, a: I<'c>, b: I<'c>) -> R<I<'c>> {
        self.b().build_left_shift(a, b, "shl").map_err(ierr)
    }
    fn lshr(&self, a: I<'c>, b: I<'c>) -> R<I<'c>> {
        self.b()
            .build_right_shift(a, b, false, "lshr")
            .map_err(ierr)
    }
    fn ashr(&self, a: I<'c>, b: I<'c>) -> R<I<'c>> {
        self.b().build_right_shift(a, b, true, "ashr").map_err(ierr)
    }
    fn trunc(&self, a: I<'c>, ty: IntType<'c>) -> R<I<'c>> {
        self.b().build_int_truncate(a, ty, "tr").map_err(ierr)
    }
    fn zext(&self, a: I<'c>, ty: IntType<'c>) -> R<I<'c>> {
        self.b().build_int_z_extend(a, ty, "zx").map_err(ierr)
    }
    /// The bits of a double as an `i64`.
    fn bits(&self, x: F<'c>) -> R<I<'c>> {
        Ok(self
            .b()
            .build_bit_cast(x, self.i64t(), "bits")
            .map_err(ierr)?
            .into_int_value())
    }
    /// The double of 64 bits.
    fn double_of(&self, i: I<'c>) -> R<F<'c>> {
        Ok(self
            .b()
            .build_bit_cast(i, self.fx.ctx.f64_type(), "f")
            .map_err(ierr)?
            .into_float_value())
    }
    /// fdlibm's `ix`: the high word of `|x|` (sign bit cleared), as an `i64`.
    fn ix(&self, x: F<'c>) -> R<I<'c>> {
        let hi = self.lshr(self.bits(x)?, self.i(32))?;
        self.and(hi, self.i(0x7fff_ffff))
    }
    /// `x` with its low 32 bits cleared (fdlibm's `SET_LOW_WORD(x, 0)`).
    fn zero_low(&self, x: F<'c>) -> R<F<'c>> {
        self.double_of(self.and(self.bits(x)?, self.i(0xffff_ffff_0000_0000u64 as i64))?)
    }
    /// `x` with the sign of `s`.
    fn copysign(&self, x: F<'c>, s: F<'c>) -> R<F<'c>> {
        let sign = self.and(self.bits(s)?, self.i(i64::MIN))?;
        let mag = self.and(self.bits(x)?, self.i(i64::MAX))?;
        self.double_of(self.or(mag, sign)?)
    }
    /// Whether the sign bit of `x` is set (also for -0 and NaN).
    fn sign_bit(&self, x: F<'c>) -> R<I<'c>> {
        self.icmp(IntPredicate::SLT, self.bits(x)?, self.i(0))
    }
    fn sitofp(&self, i: I<'c>) -> R<F<'c>> {
        self.b()
            .build_signed_int_to_float(i, self.fx.ctx.f64_type(), "sf")
            .map_err(ierr)
    }
    fn uitofp(&self, i: I<'c>) -> R<F<'c>> {
        self.b()
            .build_unsigned_int_to_float(i, self.fx.ctx.f64_type(), "uf")
            .map_err(ierr)
    }
    /// `fptosi`; callers make sure `x` is in range (out of range is poison).
    fn fptosi(&self, x: F<'c>, ty: IntType<'c>) -> R<I<'c>> {
        self.b()
            .build_float_to_signed_int(x, ty, "fi")
            .map_err(ierr)
    }
    /// `2^k` for `k` (an `i64`) in the normal exponent range.
    fn pow2(&self, k: I<'c>) -> R<F<'c>> {
        self.double_of(self.shl(self.iadd(k, self.i(1023))?, self.i(52))?)
    }
    /// `c[0] + z (c[1] + z (c[2] + ...))`.
    fn poly(&self, z: F<'c>, c: &[f64]) -> R<F<'c>> {
        let (last, rest) = c.split_last().ok_or_else(|| ierr("empty polynomial"))?;
        let mut acc = self.c(*last);
        for &k in rest.iter().rev() {
            acc = self.add(self.c(k), self.mul(z, acc)?)?;
        }
        Ok(acc)
    }
    /// The shared `exp` of the CPU and GPU kernels ([`math::exp`], fdlibm's method) on one
    /// double.
    fn exp(&self, x: F<'c>) -> R<F<'c>> {
        let zero = self.i(0);
        let v = self.fx.vty(1).get_undef();
        let v = self
            .b()
            .build_insert_element(v, x, zero, "v")
            .map_err(ierr)?;
        let r = math::exp(self.fx, v)?;
        Ok(self
            .b()
            .build_extract_element(r, zero, "x")
            .map_err(ierr)?
            .into_float_value())
    }
    /// `e^(hi + lo)` for a small tail `lo` (`|lo| <= ulp(hi)`): fdlibm's `exp` with `lo` taken
    /// into its reduced argument, so `pow` and the large `sinh`/`cosh` keep the precision of
    /// an argument that one double cannot hold. Error below 1 ulp, as fdlibm's.
    fn exp_dd(&self, hi: F<'c>, lo: F<'c>) -> R<F<'c>> {
        const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
        const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
        const INV_LN2: f64 = f64::from_bits(0x3ff7_1547_652b_82fe);
        const P: [f64; 5] = [
            f64::from_bits(0x3fc5_5555_5555_553e),
            -f64::from_bits(0x3f66_c16c_16be_bd93),
            f64::from_bits(0x3f11_566a_af25_de2c),
            -f64::from_bits(0x3ebb_bd41_c5d2_6bf1),
            f64::from_bits(0x3e66_3769_72be_a4d0),
        ];
        // The main path runs on a NaN-free stand-in clamped to [-746, 710], where e^x is 0 or
        // infinite (after rounding) at both ends: so overflow and underflow come out of the
        // final scaling (with `lo` taken into account), and NaN is put back last.
        let nan = self.is_nan(hi)?;
        let x = self.sel(nan, self.c(0.0), hi)?;
        let x = self.sel(self.lt(x, self.c(-746.0))?, self.c(-746.0), x)?;
        let x = self.sel(self.gt(x, self.c(710.0))?, self.c(710.0), x)?;
        let lo = self.sel(self.is_nan(lo)?, self.c(0.0), lo)?;
        // k = round(x / ln2); h - l = x + lo - k ln2, h exact.
        let half = self.copysign(self.c(0.5), x)?;
        let k = self.fptosi(self.fma(x, self.c(INV_LN2), half)?, self.i64t())?;
        let kf = self.sitofp(k)?;
        let h = self.sub(x, self.mul(kf, self.c(LN2_HI))?)?;
        let l = self.sub(self.mul(kf, self.c(LN2_LO))?, lo)?;
        let r = self.sub(h, l)?;
        let rr = self.mul(r, r)?;
        let c = self.sub(r, self.mul(rr, self.poly(rr, &P)?)?)?;
        // y = 1 - ((l - r c / (2 - c)) - h).
        let t = self.div(self.mul(r, c)?, self.sub(self.c(2.0), c)?)?;
        let y = self.sub(self.c(1.0), self.sub(self.sub(l, t)?, h)?)?;
        // y 2^k with k in [-1077, 1024]: two exact-or-final scalings (one rounding at most).
        let big = self.icmp(IntPredicate::SGT, k, self.i(1000))?;
        let small = self.icmp(IntPredicate::SLT, k, self.i(-1000))?;
        let pre = self.isel(
            big,
            self.i(1000),
            self.isel(small, self.i(-1000), self.i(0))?,
        )?;
        let out = self.mul(
            self.mul(y, self.pow2(pre)?)?,
            self.pow2(self.isub(k, pre)?)?,
        )?;
        self.sel(nan, hi, out)
    }
}

// ---- hyperbolic functions -------------------------------------------------------------------

/// `sinh(x)/x - 1 = x^2/3! + x^4/5! + ...`: the Taylor coefficients `1/(2k+1)!` from 3!,
/// enough for `|x| < 1` to 2^-60.
const SINH_SERIES: [f64; 10] = [
    1.0 / 6.0,
    1.0 / 120.0,
    1.0 / 5040.0,
    1.0 / 362_880.0,
    1.0 / 39_916_800.0,
    1.0 / 6_227_020_800.0,
    1.0 / 1_307_674_368_000.0,
    1.0 / 355_687_428_096_000.0,
    1.0 / 121_645_100_408_832_000.0,
    1.0 / 51_090_942_171_709_440_000.0,
];
/// `(cosh(x) - 1)/x^2 = 1/2! + x^2/4! + ...`, for `|x| < 1` to 2^-60.
const COSH_SERIES: [f64; 10] = [
    1.0 / 2.0,
    1.0 / 24.0,
    1.0 / 720.0,
    1.0 / 40320.0,
    1.0 / 3_628_800.0,
    1.0 / 479_001_600.0,
    1.0 / 87_178_291_200.0,
    1.0 / 20_922_789_888_000.0,
    1.0 / 6_402_373_705_728_000.0,
    1.0 / 2_432_902_008_176_640_000.0,
];
/// Above this `|x|`, `e^-|x|` is below half an ulp of `e^|x|`.
const HYPERBOLIC_BIG: f64 = 22.0;
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);

/// `sinh(x) = x + t` by its Taylor series (`|x| < 1`), no cancellation as in
/// `(e^x - e^-x)/2`: `(x, t)` unevaluated.
fn sinh_parts<'c>(e: &E<'_, '_, 'c>, x: F<'c>) -> R<(F<'c>, F<'c>)> {
    let z = e.mul(x, x)?;
    Ok((x, e.mul(e.mul(z, x)?, e.poly(z, &SINH_SERIES)?)?))
}

/// `cosh(x) = 1 + u` by its Taylor series (`|x| < 1`): `u`.
fn cosh_tail<'c>(e: &E<'_, '_, 'c>, x: F<'c>) -> R<F<'c>> {
    let z = e.mul(x, x)?;
    e.mul(z, e.poly(z, &COSH_SERIES)?)
}

/// `e^|x| / 2` for large `|x|`, as `e^(|x| - ln2)` (`|x| - LN2_HI` is exact there), so that
/// it overflows only where the result does (`|x|` about 710.47, not 709.78).
fn half_exp_big<'c>(e: &E<'_, '_, 'c>, a: F<'c>) -> R<F<'c>> {
    e.exp_dd(e.sub(a, e.c(LN2_HI))?, e.c(-LN2_LO))
}

fn sinh<'c>(e: &E<'_, '_, 'c>, args: &[F<'c>]) -> R<F<'c>> {
    let x = args[0];
    let a = e.abs(x)?;
    let ex = e.exp(a)?;
    let mid = e.mul(e.c(0.5), e.sub(ex, e.div(e.c(1.0), ex)?)?)?;
    let r = e.sel(e.lt(a, e.c(HYPERBOLIC_BIG))?, mid, half_exp_big(e, a)?)?;
    let r = e.copysign(r, x)?;
    let (x0, t) = sinh_parts(e, x)?;
    let r = e.sel(e.lt(a, e.c(1.0))?, e.add(x0, t)?, r)?;
    e.sel(e.is_nan(x)?, x, r)
}

fn cosh<'c>(e: &E<'_, '_, 'c>, args: &[F<'c>]) -> R<F<'c>> {
    let x = args[0];
    let a = e.abs(x)?;
    let ex = e.exp(a)?;
    let mid = e.mul(e.c(0.5), e.add(ex, e.div(e.c(1.0), ex)?)?)?;
    let r = e.sel(e.lt(a, e.c(HYPERBOLIC_BIG))?, mid, half_exp_big(e, a)?)?;
    let r = e.sel(e.lt(a, e.c(1.0))?, e.add(e.c(1.0), cosh_tail(e, a)?)?, r)?;
    e.sel(e.is_nan(x)?, x, r)
}

// ---- bit operations ---------------------------------------------------------------------------

/// `lafuse_core::ops::java_to_int` as IR: 0 for 0 and NaN, else
/// `signum(x) * floor(|x| + 2^-53)` saturated to the `i32` range (Java's cast).
fn java_to_int<'c>(e: &E<'_, '_, 'c>, x: F<'c>) -> R<I<'c>> {
    // `signum(x) * v` for v >= 0 is `copysign(v, x)` (a multiplication by +-1 is exact).
    let v = e.floor(e.add(e.abs(x)?, e.c(1.0 / 9_007_199_254_740_992.0))?)?;
    let v = e.copysign(v, x)?;
    let v = e.sel(
        e.fcmp(FloatPredicate::OGE, v, e.c(2_147_483_647.0))?,
        e.c(2_147_483_647.0),
        v,
    )?;
    let v = e.sel(
        e.fcmp(FloatPredicate::OLE, v, e.c(-2_147_483_648.0))?,
        e.c(-2_147_483_648.0),
        v,
    )?;
    // UEQ: equal to 0 or NaN (then 0, and no out-of-range conversion).
    let v = e.sel(e.fcmp(FloatPredicate::UEQ, x, e.c(0.0))?, e.c(0.0), v)?;
    e.fptosi(v, e.fx.ctx.i32_type())
}

fn bitw<'c>(
    e: &E<'_, '_, 'c>,
    args: &[F<'c>],
    op: fn(&E<'_, '_, 'c>, I<'c>, I<'c>) -> R<I<'c>>,
) -> R<F<'c>> {
    let a = java_to_int(e, args[0])?;
    let b = java_to_int(e, args[1])?;
    e.sitofp(op(e, a, b)?)
}

fn bitw_and<'c>(e: &E<'_, '_, 'c>, args: &[F<'c>]) -> R<F<'c>> {
    bitw(e, args, |e, a, b| e.and(a, b))
}

fn bitw_or<'c>(e: &E<'_, '_, 'c>, args: &[F<'c>]) -> R<F<'c>> {
    bitw(e, args, |e, a, b| e.or(a, b))
}

fn bitw_xor<'c>(e: &E<'_, '_, 'c>, args: &[F<'c>]) -> R<F<'c>> {
    bitw(e, args, |e, a, b| e.xor(a, b))
}

/// The shift count as Java takes it: the low five bits.
fn shift_count<'c>(e: &E<'_, '_, 'c>, b: I<'c>) -> R<I<'c>> {
    e.and(b, e.fx.ctx.i32_type().const_int(31, false))
}

/// `a << (b & 31)`, NaN where the result is `i32::MIN` (as `BinaryOp::BitwShiftL`).
fn bitw_shift_l<'c>(e: &E<'_, '_, 'c>, args: &[F<'c>]) -> R<F<'c>> {
    let a = java_to_int(e, args[0])?;
    let b = java_to_int(e, args[1])?;
    let r = e.shl(a, shift_count(e, b)?)?;
    let min = e.fx.ctx.i32_type().const_int(i32::MIN as u32 as u64, false);
    let is_min = e.icmp(IntPredicate::EQ, r, min)?;
    e.sel(is_min, e.c(f64::NAN), e.sitofp(r)?)
}

/// `a >> (b & 31)`, arithmetic.
fn bitw_shift_r<'c>(e: &E<'_, '_, 'c>, args: &[F<'c>]) -> R<F<'c>> {
    let a = java_to_int(e, args[0])?;
    let b = java_to_int(e, args[1])?;
    e.sitofp(e.ashr(a, shift_count(e, b)?)?)
}

#[cfg(test)]
mod tests;
