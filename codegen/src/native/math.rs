//! Vector math primitives (`log`, `exp`, `tanh`) as IR, each stated operation for operation by a
//! scalar Rust function in [`scalar`] (the core's `math`: fdlibm's methods, which the
//! unfused kernels call too, so fused and unfused results agree to the bit).
//!
//! A call to a scalar library function per lane costs a call, spills of every live vector
//! register around it, and the loss of the loop's vectorization; the IR versions run on all
//! lanes at once (an Outer operator's `log(U %*% t(V) + eps)`, a Cell loop's `log(X)`, a GLM's
//! `exp`). They are compiled once per process into a library of their own that operators
//! call (`LibraryId` in the parent module, see `library`), so no operator pays their machine code.

use super::expr::{ierr, Fx};
use super::library::{self, Library};
use super::CodegenError;
use inkwell::values::VectorValue;
use inkwell::{FloatPredicate, IntPredicate};
use scalar::ln_consts as c;
use std::sync::OnceLock;

/// A call of the shared library's lane-wise `name` over a full vector ([`library`]):
/// a call per vector costs a few cycles next to the dozens of operations of `log` or `exp`,
/// and no operator pays their machine code. `name` gets the width: `_v8` for vector loops,
/// `_v1` for one lane (a scalar tail, an Outer operator's cell).
fn library_call<'c>(
    fx: &Fx<'_, 'c>,
    name: &str,
    x: VectorValue<'c>,
) -> Result<VectorValue<'c>, CodegenError> {
    let w = x.get_type().get_size();
    let name = format!("{name}_v{w}");
    let name = name.as_str();
    let f = match fx.module.get_function(name) {
        Some(f) => f,
        None => declare(fx.ctx, fx.module, name, w),
    };
    let r = fx.b.build_call(f, &[x.into()], name).map_err(ierr)?;
    match r.try_as_basic_value() {
        inkwell::values::ValueKind::Basic(v) => Ok(v.into_vector_value()),
        _ => Err(ierr("vector math returns nothing")),
    }
}

/// `<w x double> name(<w x double>)` (see [`library::declare`]).
fn declare<'c>(
    ctx: &'c inkwell::context::Context,
    module: &inkwell::module::Module<'c>,
    name: &str,
    w: u32,
) -> inkwell::values::FunctionValue<'c> {
    let vty = ctx.f64_type().vec_type(w);
    library::declare(ctx, module, name, vty.fn_type(&[vty.into()], false))
}

/// The vector math library: `lafuse_log_v{8,1}`, `lafuse_exp_v{8,1}` and `lafuse_tanh_v{8,1}`
/// (8 lanes and one).
static LIBRARY: OnceLock<Result<Library, CodegenError>> = OnceLock::new();

type VectorBody =
    for<'f, 'c> fn(&Fx<'f, 'c>, VectorValue<'c>) -> Result<VectorValue<'c>, CodegenError>;

/// The library's functions and the bodies that define them.
const LIBRARY_FUNCTIONS: [(&str, u32, VectorBody); 6] = [
    ("lafuse_log_v8", super::cell::W, ln_inline),
    ("lafuse_exp_v8", super::cell::W, exp_inline),
    ("lafuse_tanh_v8", super::cell::W, tanh_inline),
    ("lafuse_log_v1", 1, ln_inline),
    ("lafuse_exp_v1", 1, exp_inline),
    ("lafuse_tanh_v1", 1, tanh_inline),
];

/// Whether the library defines function `name`.
pub(crate) fn defines(name: &str) -> bool {
    LIBRARY_FUNCTIONS.iter().any(|(n, _, _)| *n == name)
}

/// Whether the library is built (or failed to build).
pub(crate) fn library_built() -> bool {
    LIBRARY.get().is_some()
}

/// The library, built on first use.
pub(crate) fn library(
    store: Option<&super::ObjectStore>,
) -> Result<&'static Library, CodegenError> {
    Library::get(
        &LIBRARY,
        "lafuse_math",
        |ctx, module| {
            for (name, width, body) in LIBRARY_FUNCTIONS {
                let f = declare(ctx, module, name, width);
                let fx = Fx::new(ctx, module, f);
                let arg = f
                    .get_nth_param(0)
                    .ok_or_else(|| ierr("vector math parameter"))?
                    .into_vector_value();
                let r = body(&fx, arg)?;
                fx.b.build_return(Some(&r)).map_err(ierr)?;
            }
            Ok(LIBRARY_FUNCTIONS
                .iter()
                .map(|(n, _, _)| n.to_string())
                .collect())
        },
        store,
    )
}

/// Defines the one-lane functions of the library (`lafuse_log_v1`, `lafuse_exp_v1`,
/// `lafuse_tanh_v1`) inside `module` with internal linkage, for a target with no shared
/// library to call (PTX): calls of [`ln`], [`exp`] and [`tanh`] then resolve to them, and the
/// optimizer inlines them.
#[cfg(feature = "ptx")]
pub(crate) fn define_one_lane<'c>(
    ctx: &'c inkwell::context::Context,
    module: &inkwell::module::Module<'c>,
) -> Result<(), CodegenError> {
    define_inline(ctx, module, &[1])
}

/// Defines the library's functions of the given widths inside `module` with internal linkage
/// and `alwaysinline`, so that calls of [`ln`] and [`exp`] there are inlined: for loops whose
/// body is little more than one of them over every cell (an Outer operator's tiles), where a
/// call's spills of the loop's accumulators cost as much as a third of the function.
pub(crate) fn define_inline<'c>(
    ctx: &'c inkwell::context::Context,
    module: &inkwell::module::Module<'c>,
    widths: &[u32],
) -> Result<(), CodegenError> {
    for (name, width, body) in LIBRARY_FUNCTIONS {
        if !widths.contains(&width) {
            continue;
        }
        let vty = ctx.f64_type().vec_type(width);
        let f = module.add_function(
            name,
            vty.fn_type(&[vty.into()], false),
            Some(inkwell::module::Linkage::Internal),
        );
        f.add_attribute(
            inkwell::attributes::AttributeLoc::Function,
            super::llvm::enum_attr(ctx, "alwaysinline"),
        );
        let fx = Fx::new(ctx, module, f);
        let arg = f
            .get_nth_param(0)
            .ok_or_else(|| ierr("vector math parameter"))?
            .into_vector_value();
        let r = body(&fx, arg)?;
        fx.b.build_return(Some(&r)).map_err(ierr)?;
    }
    Ok(())
}

/// Lane-wise natural logarithm: [`scalar::ln`] on every lane (a call of the shared library,
/// see [`library_call`]).
pub(crate) fn ln<'c>(fx: &Fx<'_, 'c>, x: VectorValue<'c>) -> Result<VectorValue<'c>, CodegenError> {
    library_call(fx, "lafuse_log", x)
}

/// Lane-wise `e^x`: [`scalar::exp`] on every lane (a call of the shared library, see
/// [`library_call`]).
pub(crate) fn exp<'c>(
    fx: &Fx<'_, 'c>,
    x: VectorValue<'c>,
) -> Result<VectorValue<'c>, CodegenError> {
    library_call(fx, "lafuse_exp", x)
}

/// Lane-wise hyperbolic tangent: [`scalar::tanh`] on every lane (a call of the shared library,
/// see [`library_call`]).
pub(crate) fn tanh<'c>(
    fx: &Fx<'_, 'c>,
    x: VectorValue<'c>,
) -> Result<VectorValue<'c>, CodegenError> {
    library_call(fx, "lafuse_tanh", x)
}

/// Lane-wise natural logarithm: [`scalar::ln`] on every lane, with the same operations in the
/// same order (see there for the method and its error bound). Vectors (of more than one lane)
/// whose lanes are all positive, normal and finite (nearly all, in practice) take the method
/// alone; any other vector takes the general form, which scales subnormals first and replaces
/// the special lanes last. The two give the same value on an ordinary lane, so the branch
/// changes no result.
fn ln_inline<'c>(fx: &Fx<'_, 'c>, x: VectorValue<'c>) -> Result<VectorValue<'c>, CodegenError> {
    unless_any_lane_is_special(
        fx,
        x,
        // NaN fails both comparisons.
        |l| {
            l.fx.and(
                l.fx.fcmp(FloatPredicate::OGE, x, l.fc(f64::MIN_POSITIVE))?,
                l.fx.fcmp(FloatPredicate::OLT, x, l.fc(f64::INFINITY))?,
            )
        },
        |fx| ln_method(fx, x, None),
        |fx| ln_any_lane(fx, x),
    )
}

/// [`ln_inline`] on lanes of any value: subnormals are scaled into the normal range first
/// (2^54 x, exponent - 54); lanes that are not positive and finite compute garbage in the
/// method and are replaced at the end.
fn ln_any_lane<'c>(fx: &Fx<'_, 'c>, x: VectorValue<'c>) -> Result<VectorValue<'c>, CodegenError> {
    let l = Lanes {
        fx,
        w: x.get_type().get_size(),
    };
    let sub = fx.fcmp(FloatPredicate::OLT, x, l.fc(f64::MIN_POSITIVE))?;
    let xs = fx.select(sub, fx.fmul(x, l.fc(c::TWO_54))?, x)?;
    let k0 = fx.select(sub, l.fc(-54.0), l.fc(0.0))?;
    let y = ln_method(fx, xs, Some(k0))?;

    // Special lanes: log(±0) = -inf, log(negative) = NaN, log(inf) = inf, log(NaN) = NaN.
    let y = fx.select(
        fx.fcmp(FloatPredicate::OEQ, x, l.fc(0.0))?,
        l.fc(f64::NEG_INFINITY),
        y,
    )?;
    let y = fx.select(
        fx.fcmp(FloatPredicate::OLT, x, l.fc(0.0))?,
        l.fc(f64::NAN),
        y,
    )?;
    let y = fx.select(
        fx.fcmp(FloatPredicate::OEQ, x, l.fc(f64::INFINITY))?,
        l.fc(f64::INFINITY),
        y,
    )?;
    fx.select(fx.fcmp(FloatPredicate::UNO, x, x)?, x, y)
}

/// fdlibm's method on positive, normal, finite lanes `xs` (the others compute garbage), with
/// `k0` (a small integer, as a double) added to the exponent: `-54` where the caller scaled a
/// subnormal, `None` for none.
fn ln_method<'c>(
    fx: &Fx<'_, 'c>,
    xs: VectorValue<'c>,
    k0: Option<VectorValue<'c>>,
) -> Result<VectorValue<'c>, CodegenError> {
    let w = xs.get_type().get_size();
    let b = &fx.b;
    let it = fx.ctx.i64_type().vec_type(w);
    let l = Lanes { fx, w };
    let bits = b
        .build_bit_cast(xs, it, "bits")
        .map_err(ierr)?
        .into_vector_value();

    // Reduce to r in [sqrt(2)/2, sqrt(2)) with x = 2^k r.
    let hx = b
        .build_right_shift(bits, l.ic(32), false, "hi")
        .map_err(ierr)?;
    let hx = b
        .build_int_add(hx, l.ic(c::HIGH_SHIFT), "hx")
        .map_err(ierr)?;
    let e = b
        .build_right_shift(hx, l.ic(20), false, "e")
        .map_err(ierr)?;
    let mant = b.build_and(hx, l.ic(0x000f_ffff), "m").map_err(ierr)?;
    let hr = b
        .build_int_add(mant, l.ic(c::SQRT_HALF_HIGH), "hr")
        .map_err(ierr)?;
    let hr = b.build_left_shift(hr, l.ic(32), "hr").map_err(ierr)?;
    let lo = b.build_and(bits, l.ic(0xffff_ffff), "lo").map_err(ierr)?;
    let rb = b.build_or(hr, lo, "rb").map_err(ierr)?;
    let r = b
        .build_bit_cast(rb, fx.vty(w), "r")
        .map_err(ierr)?
        .into_vector_value();

    // log(1 + f) = f - hfsq + s (hfsq + R(z)), s = f / (2 + f).
    let f = fx.fsub(r, l.fc(1.0))?;
    let hfsq = fx.fmul(fx.fmul(l.fc(0.5), f)?, f)?;
    let s = fx.fdiv(f, fx.fadd(l.fc(2.0), f)?)?;
    let z = fx.fmul(s, s)?;
    let ww = fx.fmul(z, z)?;
    let lg = |i: usize| l.fc(c::LG[i - 1]);
    // t1 = w (Lg2 + w (Lg4 + w Lg6)); R = z (Lg1 + w (Lg3 + w (Lg5 + w Lg7))) + t1, every
    // `a * b + c` one fused multiply-add (the core's `ln`).
    let t1 = fx.fma(ww, fx.fma(ww, lg(6), lg(4))?, lg(2))?;
    let t1 = fx.fmul(ww, t1)?;
    let p2 = fx.fma(ww, fx.fma(ww, fx.fma(ww, lg(7), lg(5))?, lg(3))?, lg(1))?;
    let big_r = fx.fma(z, p2, t1)?;
    // k = e - 1023 (+ k0) as a double, exactly: the biased exponent `e` is below 2^12, so
    // the double with 2^52's exponent and `e` as its mantissa is 2^52 + e, and subtracting
    // 2^52 + 1023 leaves e - 1023 (what `sitofp` gives, without AVX-512's conversion of
    // 64-bit lanes, which AVX2 emulates lane by lane).
    let two_52_plus_e = b
        .build_bit_cast(
            b.build_or(e, l.ic(c::TWO_52_BITS), "2^52+e")
                .map_err(ierr)?,
            fx.vty(w),
            "2^52+e",
        )
        .map_err(ierr)?
        .into_vector_value();
    let dk = fx.fsub(two_52_plus_e, l.fc(c::TWO_52 + 1023.0))?;
    let dk = match k0 {
        Some(k0) => fx.fadd(dk, k0)?,
        None => dk,
    };
    // fma(dk, ln2_hi, fma(s, hfsq + R, dk ln2_lo) - hfsq + f), left to right.
    let y = fx.fma(s, fx.fadd(hfsq, big_r)?, fx.fmul(dk, l.fc(c::LN2_LO))?)?;
    let y = fx.fsub(y, hfsq)?;
    let y = fx.fadd(y, f)?;
    fx.fma(dk, l.fc(c::LN2_HI), y)
}

/// `if every lane of `ordinary(x)` is set { common(fx) } else { general(fx) }` over the lanes
/// of `x`, as two blocks joined by a phi, the general one marked unlikely. For the vector math
/// whose special lanes (NaN, infinities, zeros, subnormals, overflow) cost a comparison and a
/// select each on every vector but almost never occur: `common` computes the method alone,
/// `general` the method and the replacements, and the two must agree on every ordinary lane.
/// One lane (a scalar tail's, a GPU thread's) takes `general` alone: there a branch's second
/// copy of the method would only add compile time.
fn unless_any_lane_is_special<'c>(
    fx: &Fx<'_, 'c>,
    x: VectorValue<'c>,
    ordinary: impl FnOnce(&Lanes<'_, '_, 'c>) -> Result<VectorValue<'c>, CodegenError>,
    common: impl FnOnce(&Fx<'_, 'c>) -> Result<VectorValue<'c>, CodegenError>,
    general: impl FnOnce(&Fx<'_, 'c>) -> Result<VectorValue<'c>, CodegenError>,
) -> Result<VectorValue<'c>, CodegenError> {
    let w = x.get_type().get_size();
    if w == 1 {
        return general(fx);
    }
    let ordinary = ordinary(&Lanes { fx, w })?;
    let b = &fx.b;
    let mask_ty = std::num::NonZeroU32::new(w)
        .and_then(|w| fx.ctx.custom_width_int_type(w).ok())
        .ok_or_else(|| ierr("a lane mask of no lanes"))?;
    let mask = b
        .build_bit_cast(ordinary, mask_ty, "lanes")
        .map_err(ierr)?
        .into_int_value();
    let all = b
        .build_int_compare(IntPredicate::EQ, mask, mask_ty.const_all_ones(), "all")
        .map_err(ierr)?;
    let expect = inkwell::intrinsics::Intrinsic::find("llvm.expect")
        .and_then(|i| i.get_declaration(fx.module, &[fx.ctx.bool_type().into()]))
        .ok_or_else(|| super::expr::missing_intrinsic("llvm.expect"))?;
    let all = match b
        .build_call(
            expect,
            &[all.into(), fx.ctx.bool_type().const_int(1, false).into()],
            "likely",
        )
        .map_err(ierr)?
        .try_as_basic_value()
    {
        inkwell::values::ValueKind::Basic(v) => v.into_int_value(),
        _ => return Err(ierr("llvm.expect returns nothing")),
    };
    let common_bb = fx.ctx.append_basic_block(fx.func, "ordinary");
    let general_bb = fx.ctx.append_basic_block(fx.func, "special");
    let joined = fx.ctx.append_basic_block(fx.func, "joined");
    b.build_conditional_branch(all, common_bb, general_bb)
        .map_err(ierr)?;
    b.position_at_end(common_bb);
    let c = common(fx)?;
    let c_end = b.get_insert_block().ok_or_else(|| ierr("no block"))?;
    b.build_unconditional_branch(joined).map_err(ierr)?;
    b.position_at_end(general_bb);
    let g = general(fx)?;
    let g_end = b.get_insert_block().ok_or_else(|| ierr("no block"))?;
    b.build_unconditional_branch(joined).map_err(ierr)?;
    b.position_at_end(joined);
    let phi = b.build_phi(c.get_type(), "lanes").map_err(ierr)?;
    phi.add_incoming(&[(&c, c_end), (&g, g_end)]);
    Ok(phi.as_basic_value().into_vector_value())
}

/// Constants and integer steps on vectors of `w` lanes, for the bodies below.
struct Lanes<'f, 'm, 'c> {
    fx: &'f Fx<'m, 'c>,
    w: u32,
}

impl<'c> Lanes<'_, '_, 'c> {
    /// `v` on every lane, as a 64-bit integer.
    fn ic(&self, v: i64) -> VectorValue<'c> {
        let s = self.fx.ctx.i64_type().const_int(v as u64, true);
        inkwell::types::VectorType::const_vector(&vec![s; self.w as usize])
    }
    /// `v` on every lane.
    fn fc(&self, v: f64) -> VectorValue<'c> {
        self.fx.splat_const(v, self.w)
    }
    /// `a p v` per lane, on integers.
    fn icmp(
        &self,
        p: IntPredicate,
        a: VectorValue<'c>,
        v: i64,
    ) -> Result<VectorValue<'c>, CodegenError> {
        self.fx
            .b
            .build_int_compare(p, a, self.ic(v), "ic")
            .map_err(ierr)
    }
    /// `c ? a : o` per lane, on integers.
    fn iselect(
        &self,
        c: VectorValue<'c>,
        a: VectorValue<'c>,
        o: VectorValue<'c>,
    ) -> Result<VectorValue<'c>, CodegenError> {
        self.fx
            .b
            .build_select(c, a, o, "is")
            .map(|v| v.into_vector_value())
            .map_err(ierr)
    }
}

/// The `k` of the reduction `x = k ln2 + r` that `exp` and `tanh`'s `e^u - 1` share, as
/// integers and as doubles (`hx`: the high word of `|x|`): `x / ln2` rounded from 1.5 ln2 on,
/// +-1 above ln2 / 2, else 0.
fn ln2_multiple<'c>(
    fx: &Fx<'_, 'c>,
    x: VectorValue<'c>,
    hx: VectorValue<'c>,
) -> Result<(VectorValue<'c>, VectorValue<'c>), CodegenError> {
    use scalar::exp_consts as e;
    let w = x.get_type().get_size();
    let b = &fx.b;
    let it = fx.ctx.i64_type().vec_type(w);
    let l = Lanes { fx, w };
    let neg = fx.fcmp(FloatPredicate::OLT, x, l.fc(0.0))?;
    let half = fx.select(neg, l.fc(-0.5), l.fc(0.5))?;
    let kr = fx.fadd(fx.fmul(l.fc(e::INV_LN2), x)?, half)?;
    // |kr| < 1100 on every lane callers pass (clamped or saturated stand-ins), so truncating
    // through 32-bit lanes is exact and the same as through 64-bit ones, which AVX2 lacks
    // (LLVM would convert lane by lane).
    let i32v = fx.ctx.i32_type().vec_type(w);
    let k_round = b.build_float_to_signed_int(kr, i32v, "kr").map_err(ierr)?;
    let k_round = b.build_int_s_extend(k_round, it, "kr").map_err(ierr)?;
    let k_one = l.iselect(neg, l.ic(-1), l.ic(1))?;
    let k = l.iselect(
        l.icmp(IntPredicate::SGT, hx, e::HALF_LN2_HIGH)?,
        k_one,
        l.ic(0),
    )?;
    let k = l.iselect(
        l.icmp(IntPredicate::SGE, hx, e::THREE_HALF_LN2_HIGH)?,
        k_round,
        k,
    )?;
    // |k| < 1100: exact through 32-bit lanes (see above).
    let k32 = b.build_int_truncate(k, i32v, "k32").map_err(ierr)?;
    let kf = b
        .build_signed_int_to_float(k32, fx.vty(w), "kf")
        .map_err(ierr)?;
    Ok((k, kf))
}

/// Lane-wise `e^x`: [`scalar::exp`] on every lane, with the same operations in the same order
/// (see there for the method and its error bound). Vectors (of more than one lane) whose lanes
/// all lie in (`exp_consts::ORDINARY_LO`, `ORDINARY_HI`) (no NaN, no overflow or underflow,
/// `2^k` a normal double) take the method alone; any other vector takes the general form, which
/// clamps its input, scales by `2^k` in two steps and replaces the special lanes. The two give
/// the same value on an ordinary lane (the general form's first scale is then 1), so the
/// branch changes no result.
fn exp_inline<'c>(fx: &Fx<'_, 'c>, x: VectorValue<'c>) -> Result<VectorValue<'c>, CodegenError> {
    use scalar::exp_consts as e;
    unless_any_lane_is_special(
        fx,
        x,
        // NaN fails both comparisons.
        |l| {
            l.fx.and(
                l.fx.fcmp(FloatPredicate::OGT, x, l.fc(e::ORDINARY_LO))?,
                l.fx.fcmp(FloatPredicate::OLT, x, l.fc(e::ORDINARY_HI))?,
            )
        },
        |fx| exp_method(fx, x, false),
        |fx| exp_any_lane(fx, x),
    )
}

/// [`exp_inline`] on lanes of any value: the method runs on a clamped stand-in (NaN as 0),
/// and special lanes are replaced last.
fn exp_any_lane<'c>(fx: &Fx<'_, 'c>, x: VectorValue<'c>) -> Result<VectorValue<'c>, CodegenError> {
    use scalar::exp_consts as e;
    let l = Lanes {
        fx,
        w: x.get_type().get_size(),
    };
    let nan = fx.fcmp(FloatPredicate::UNO, x, x)?;
    let xc = fx.select(
        fx.fcmp(FloatPredicate::OLT, x, l.fc(e::CLAMP_LO))?,
        l.fc(e::CLAMP_LO),
        x,
    )?;
    let xc = fx.select(
        fx.fcmp(FloatPredicate::OGT, xc, l.fc(e::CLAMP_HI))?,
        l.fc(e::CLAMP_HI),
        xc,
    )?;
    let xc = fx.select(nan, l.fc(0.0), xc)?;
    let out = exp_method(fx, xc, true)?;

    // Special lanes: NaN stays, overflow to infinity, underflow to 0.
    let out = fx.select(
        fx.fcmp(FloatPredicate::OLT, x, l.fc(e::UNDERFLOW))?,
        l.fc(0.0),
        out,
    )?;
    let out = fx.select(
        fx.fcmp(FloatPredicate::OGT, x, l.fc(e::OVERFLOW))?,
        l.fc(f64::INFINITY),
        out,
    )?;
    fx.select(nan, x, out)
}

/// fdlibm's method on finite lanes `xc` within the clamps; `beyond_normal`: whether some lane's
/// `2^k` may not be a normal double, so that `y 2^k` is pre-scaled once (by 2^1023 or
/// 2^-969, and by 1 on the other lanes: the same value as unscaled there).
fn exp_method<'c>(
    fx: &Fx<'_, 'c>,
    xc: VectorValue<'c>,
    beyond_normal: bool,
) -> Result<VectorValue<'c>, CodegenError> {
    use scalar::exp_consts as e;
    let w = xc.get_type().get_size();
    let b = &fx.b;
    let it = fx.ctx.i64_type().vec_type(w);
    let l = Lanes { fx, w };
    let bits = b
        .build_bit_cast(xc, it, "bits")
        .map_err(ierr)?
        .into_vector_value();
    let hx = b
        .build_right_shift(bits, l.ic(32), false, "hi")
        .map_err(ierr)?;
    let hx = b.build_and(hx, l.ic(0x7fff_ffff), "hx").map_err(ierr)?;
    let (k, kf) = ln2_multiple(fx, xc, hx)?;
    // hi = xc - kf ln2_hi, the product exact; c = r - rr (P1 + rr (P2 + rr (P3 + rr (P4 +
    // rr P5)))); every `a * b + c` one fused multiply-add (the core's `exp`).
    let hi = fx.fma(fx.fneg(kf)?, l.fc(e::LN2_HI), xc)?;
    let lo = fx.fmul(kf, l.fc(e::LN2_LO))?;
    let r = fx.fsub(hi, lo)?;
    let rr = fx.fmul(r, r)?;
    let p = |i: usize| l.fc(e::P[i]);
    let poly = fx.fma(rr, p(4), p(3))?;
    let poly = fx.fma(rr, poly, p(2))?;
    let poly = fx.fma(rr, poly, p(1))?;
    let poly = fx.fma(rr, poly, p(0))?;
    let c = fx.fma(fx.fneg(rr)?, poly, r)?;
    // y = 1 + (r c / (2 - c) - lo + hi).
    let t = fx.fdiv(fx.fmul(r, c)?, fx.fsub(l.fc(2.0), c)?)?;
    let t = fx.fadd(fx.fsub(t, lo)?, hi)?;
    let y = fx.fadd(l.fc(1.0), t)?;

    // y 2^k, pre-scaled once when 2^k is not a normal double.
    let (y, k2) = if beyond_normal {
        let big = l.icmp(IntPredicate::SGT, k, 1023)?;
        let small = l.icmp(IntPredicate::SLT, k, -1022)?;
        let pre = fx.select(
            big,
            l.fc(e::TWO_1023),
            fx.select(small, l.fc(e::TWO_M969), l.fc(1.0))?,
        )?;
        let k_big = b.build_int_sub(k, l.ic(1023), "kb").map_err(ierr)?;
        let k_small = b.build_int_add(k, l.ic(969), "ks").map_err(ierr)?;
        (
            fx.fmul(y, pre)?,
            l.iselect(big, k_big, l.iselect(small, k_small, k)?)?,
        )
    } else {
        (y, k)
    };
    let e2 = b.build_int_add(k2, l.ic(0x3ff), "e2").map_err(ierr)?;
    let e2 = b.build_left_shift(e2, l.ic(52), "e2").map_err(ierr)?;
    let two_k = b
        .build_bit_cast(e2, fx.vty(w), "2k")
        .map_err(ierr)?
        .into_vector_value();
    let scaled = fx.fmul(y, two_k)?;
    let tiny = fx.fadd(l.fc(1.0), xc)?;
    fx.select(l.icmp(IntPredicate::SLE, hx, e::TINY_HIGH)?, tiny, scaled)
}

/// Lane-wise hyperbolic tangent: [`scalar::tanh`] on every lane, with the same operations in
/// the same order (its `e^u - 1` is fdlibm's `expm1` for the arguments `tanh` passes; every
/// case is computed and the lane's chosen, as the runtime's slice form does).
fn tanh_inline<'c>(fx: &Fx<'_, 'c>, x: VectorValue<'c>) -> Result<VectorValue<'c>, CodegenError> {
    use scalar::tanh_consts as th;
    let w = x.get_type().get_size();
    let b = &fx.b;
    let it = fx.ctx.i64_type().vec_type(w);
    let l = Lanes { fx, w };
    let as_bits = |v: VectorValue<'c>| {
        b.build_bit_cast(v, it, "bits")
            .map(|v| v.into_vector_value())
            .map_err(ierr)
    };
    let as_float = |v: VectorValue<'c>| {
        b.build_bit_cast(v, fx.vty(w), "f")
            .map(|v| v.into_vector_value())
            .map_err(ierr)
    };
    let bits = as_bits(x)?;
    let sign = b.build_and(bits, l.ic(i64::MIN), "sign").map_err(ierr)?;
    let a = as_float(b.build_and(bits, l.ic(i64::MAX), "abs").map_err(ierr)?)?;

    // NaN and saturated lanes compute on a stand-in and are replaced at the end.
    let in_range = fx.fcmp(FloatPredicate::OLT, a, l.fc(th::SATURATED))?;
    let ac = fx.select(in_range, a, l.fc(1.0))?;
    let big = fx.fcmp(FloatPredicate::OGE, ac, l.fc(1.0))?;
    let u = fx.select(big, fx.fmul(l.fc(2.0), ac)?, fx.fmul(l.fc(-2.0), ac)?)?;

    // e^u - 1: k as `exp`'s, u = k ln2 + (x - c).
    let hu = b
        .build_right_shift(as_bits(u)?, l.ic(32), false, "hi")
        .map_err(ierr)?;
    let hu = b.build_and(hu, l.ic(0x7fff_ffff), "hu").map_err(ierr)?;
    let (k, kf) = ln2_multiple(fx, u, hu)?;
    let hi = fx.fsub(u, fx.fmul(kf, l.fc(th::LN2_HI))?)?;
    let lo = fx.fmul(kf, l.fc(th::LN2_LO))?;
    let xr = fx.fsub(hi, lo)?;
    let c = fx.fsub(fx.fsub(hi, xr)?, lo)?;
    let hfx = fx.fmul(l.fc(0.5), xr)?;
    let hxs = fx.fmul(xr, hfx)?;
    // r1 = 1 + hxs (Q1 + hxs (Q2 + hxs (Q3 + hxs (Q4 + hxs Q5)))).
    let q = |i: usize| l.fc(th::Q[i]);
    let p = fx.fadd(q(3), fx.fmul(hxs, q(4))?)?;
    let p = fx.fadd(q(2), fx.fmul(hxs, p)?)?;
    let p = fx.fadd(q(1), fx.fmul(hxs, p)?)?;
    let p = fx.fadd(q(0), fx.fmul(hxs, p)?)?;
    let r1 = fx.fadd(l.fc(1.0), fx.fmul(hxs, p)?)?;
    let t = fx.fsub(l.fc(3.0), fx.fmul(r1, hfx)?)?;
    let e = fx.fmul(
        hxs,
        fx.fdiv(fx.fsub(r1, t)?, fx.fsub(l.fc(6.0), fx.fmul(xr, t)?)?)?,
    )?;
    let k0 = fx.fsub(xr, fx.fsub(fx.fmul(xr, e)?, hxs)?)?;
    let e = fx.fsub(fx.fmul(xr, fx.fsub(e, c)?)?, c)?;
    let e = fx.fsub(e, hxs)?;
    let two_k = b.build_int_add(k, l.ic(0x3ff), "ek").map_err(ierr)?;
    let two_k = as_float(b.build_left_shift(two_k, l.ic(52), "ek").map_err(ierr)?)?;
    let two_minus_k = b.build_int_sub(l.ic(0x3ff), k, "emk").map_err(ierr)?;
    let two_minus_k = as_float(
        b.build_left_shift(two_minus_k, l.ic(52), "emk")
            .map_err(ierr)?,
    )?;
    let e_minus_x = fx.fsub(e, xr)?;
    let k_minus_one = fx.fsub(fx.fmul(l.fc(0.5), fx.fsub(xr, e)?)?, l.fc(0.5))?;
    let far = fx.fsub(fx.fmul(fx.fsub(l.fc(1.0), e_minus_x)?, two_k)?, l.fc(1.0))?;
    let below_20 = fx.fmul(fx.fsub(fx.fsub(l.fc(1.0), two_minus_k)?, e_minus_x)?, two_k)?;
    let from_20 = fx.fmul(
        fx.fadd(fx.fsub(xr, fx.fadd(e, two_minus_k)?)?, l.fc(1.0))?,
        two_k,
    )?;
    let y = fx.select(l.icmp(IntPredicate::SLT, k, 20)?, below_20, from_20)?;
    let is_far = b
        .build_or(
            l.icmp(IntPredicate::SLE, k, -2)?,
            l.icmp(IntPredicate::SGT, k, 56)?,
            "far",
        )
        .map_err(ierr)?;
    let y = fx.select(is_far, far, y)?;
    let y = fx.select(l.icmp(IntPredicate::EQ, k, -1)?, k_minus_one, y)?;
    let t = fx.select(l.icmp(IntPredicate::EQ, k, 0)?, k0, y)?;

    // 1 - 2 / (t + 2) from 1 on, -t / (t + 2) below; the sign of x; x itself where tiny or NaN.
    let minus_t = as_float(
        b.build_xor(as_bits(t)?, l.ic(i64::MIN), "neg")
            .map_err(ierr)?,
    )?;
    let numerator = fx.select(big, l.fc(2.0), minus_t)?;
    let qt = fx.fdiv(numerator, fx.fadd(t, l.fc(2.0))?)?;
    let z = fx.select(big, fx.fsub(l.fc(1.0), qt)?, qt)?;
    let z = fx.select(in_range, z, l.fc(1.0))?;
    let z = as_float(b.build_or(as_bits(z)?, sign, "signed").map_err(ierr)?)?;
    let keep = b
        .build_or(
            fx.fcmp(FloatPredicate::OLT, a, l.fc(th::TINY))?,
            fx.fcmp(FloatPredicate::UNO, x, x)?,
            "keep",
        )
        .map_err(ierr)?;
    fx.select(keep, x, z)
}

/// The scalar statements of the vector primitives: what each lane computes, in Rust (the
/// runtime's shared numerics, which the unfused kernels use too).
pub use lafuse_runtime::math as scalar;
