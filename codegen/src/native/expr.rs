//! Scalar emission of CNode bodies, on vectors of `w` doubles (`w == 1` for scalar code), with
//! the core's exact semantics (`lafuse_core::ops`): simple operators become inline IR
//! (IEEE arithmetic, comparisons as 1/0, Java `min`/`max` with NaN and signed zeros, `sign`,
//! Java's `round`, `ifelse`, `replace`), correctly rounded ones use LLVM intrinsics (`sqrt`,
//! `floor`, `ceil`, `fabs`, `trunc`), `exp` and `log` are IR too (`math`), and the other
//! transcendental or Java-specific ones call `extern "C"` helpers in this module that run the
//! very Rust code of the runtime (`java_pow`, `f64::sin`, `%`), mapped into the JIT by
//! address, so NaN and infinities behave identically.

use super::llvm::{self, f64_ptr, gep, load, load_vec};
use super::math;
use super::CodegenError;
use crate::backend::{Internal, Unsupported};
use inkwell::basic_block::BasicBlock;
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::{Linkage, Module};
use inkwell::values::{BasicMetadataValueEnum, FunctionValue, IntValue, PointerValue, VectorValue};
use inkwell::{FloatPredicate, IntPredicate};
use lafuse_compiler::fusion::cplan::{Access, CNode, CNodeId, CPlan, InputKind};
use lafuse_compiler::hops::{BinaryOp, Literal, NaryOp, TernaryOp, UnaryOp};
use lafuse_compiler::stack::with_stack;
use lafuse_runtime::ops::java_pow;
use std::collections::HashMap;

pub(crate) fn ierr(e: impl std::fmt::Display) -> CodegenError {
    CodegenError::Internal(Internal::IrBuilding {
        detail: e.to_string(),
    })
}

/// An LLVM intrinsic that could not be declared.
pub(crate) fn missing_intrinsic(name: &str) -> CodegenError {
    CodegenError::Internal(Internal::MissingIntrinsic {
        name: name.to_string(),
    })
}

macro_rules! helpers {
    ($($name:ident($($a:ident),+) => $body:expr;)*) => {
        $(
            extern "C" fn $name($($a: f64),+) -> f64 { $body }
        )*
        /// The address of a helper the generated code may call, by symbol name.
        pub(crate) fn helper_address(name: &str) -> Option<usize> {
            match name {
                $(stringify!($name) => Some($name as *const () as usize),)*
                _ => None,
            }
        }
    };
}

helpers! {
    lafuse_sin(x) => x.sin();
    lafuse_cos(x) => x.cos();
    lafuse_tan(x) => x.tan();
    lafuse_asin(x) => x.asin();
    lafuse_acos(x) => x.acos();
    lafuse_atan(x) => x.atan();
    lafuse_sinh(x) => x.sinh();
    lafuse_cosh(x) => x.cosh();
    lafuse_pow(x, y) => java_pow(x, y);
    lafuse_fmod(x, y) => x % y;
    lafuse_bitw_and(x, y) => BinaryOp::BitwAnd.apply(x, y);
    lafuse_bitw_or(x, y) => BinaryOp::BitwOr.apply(x, y);
    lafuse_bitw_xor(x, y) => BinaryOp::BitwXor.apply(x, y);
    lafuse_bitw_shift_l(x, y) => BinaryOp::BitwShiftL.apply(x, y);
    lafuse_bitw_shift_r(x, y) => BinaryOp::BitwShiftR.apply(x, y);
}

/// One function being built: builder, entry block for stack slots, and typed helpers.
pub(crate) struct Fx<'m, 'c> {
    pub ctx: &'c Context,
    pub module: &'m Module<'c>,
    pub b: Builder<'c>,
    pub func: FunctionValue<'c>,
    entry: BasicBlock<'c>,
}

impl<'m, 'c> Fx<'m, 'c> {
    /// Parameter `k` of the function being built.
    pub(crate) fn param(
        &self,
        k: u32,
    ) -> Result<inkwell::values::BasicValueEnum<'c>, CodegenError> {
        self.func
            .get_nth_param(k)
            .ok_or(CodegenError::Internal(Internal::MissingParameter {
                index: k,
            }))
    }

    /// `s += x` with Kahan compensation on the slots `s` and `c`, lane-wise; a non-finite
    /// correction resets to 0 as in the runtime's `Kahan::add`.
    pub(crate) fn kahan_add(
        &self,
        s: PointerValue<'c>,
        c: PointerValue<'c>,
        x: VectorValue<'c>,
    ) -> Result<(), CodegenError> {
        self.kahan_add_resetting(s, c, x, true)
    }

    /// [`Fx::kahan_add`], or with `resets` false its step without the reset
    /// ([`Fx::kahan_step_unchecked`]).
    pub(crate) fn kahan_add_resetting(
        &self,
        s: PointerValue<'c>,
        c: PointerValue<'c>,
        x: VectorValue<'c>,
        resets: bool,
    ) -> Result<(), CodegenError> {
        let (sv, cv) = (self.load_v(s)?, self.load_v(c)?);
        let (t, cnew) = if resets {
            self.kahan_step(sv, cv, x)?
        } else {
            self.kahan_step_unchecked(sv, cv, x)?
        };
        self.store(c, cnew)?;
        self.store(s, t)
    }

    /// One compensated add of `x` to the sum `s` with correction `c`: the new sum and
    /// correction, the correction 0 where it would not be finite (the runtime's `Kahan::add`).
    pub(crate) fn kahan_step(
        &self,
        s: VectorValue<'c>,
        c: VectorValue<'c>,
        x: VectorValue<'c>,
    ) -> Result<(VectorValue<'c>, VectorValue<'c>), CodegenError> {
        let (t, cn) = self.kahan_step_unchecked(s, c, x)?;
        let w = x.get_type().get_size();
        let fin = self.fcmp(
            FloatPredicate::OLT,
            self.intrinsic("llvm.fabs", cn)?,
            self.splat_const(f64::INFINITY, w),
        )?;
        Ok((t, self.select(fin, cn, self.splat_const(0.0, w))?))
    }

    /// [`Fx::kahan_step`] without the reset: the same sum and correction wherever every sum
    /// met is finite (then every correction is: `t - s` is within an ulp of `y`), and a sum
    /// that stays NaN or infinite from the first one that is not (the next correction is then
    /// NaN or infinite). So a sum that is finite at the end was never reset. The loop-carried
    /// chain is the four adds alone, not a compare and a blend after them; callers check the
    /// sum at the end and, where it is not finite, add everything again with
    /// [`Fx::kahan_step`].
    pub(crate) fn kahan_step_unchecked(
        &self,
        s: VectorValue<'c>,
        c: VectorValue<'c>,
        x: VectorValue<'c>,
    ) -> Result<(VectorValue<'c>, VectorValue<'c>), CodegenError> {
        let y = self.fsub(x, c)?;
        let t = self.fadd(s, y)?;
        Ok((t, self.fsub(self.fsub(t, s)?, y)?))
    }

    /// Whether any lane of the vectors held in `slots` is NaN or infinite: the check after
    /// sums added with [`Fx::kahan_step_unchecked`], whose caller adds them again with resets
    /// where it holds.
    pub(crate) fn any_lane_not_finite(
        &self,
        slots: impl IntoIterator<Item = PointerValue<'c>>,
    ) -> Result<IntValue<'c>, CodegenError> {
        let mut any = self.ctx.bool_type().const_zero();
        for slot in slots {
            let s = self.load_v(slot)?;
            let w = s.get_type().get_size();
            let not_finite = self.fcmp(
                FloatPredicate::UGE,
                self.intrinsic("llvm.fabs", s)?,
                self.splat_const(f64::INFINITY, w),
            )?;
            for l in 0..w {
                let bit = self
                    .b
                    .build_extract_element(not_finite, self.i64c(u64::from(l)), "nf")
                    .map_err(ierr)?
                    .into_int_value();
                any = self.b.build_or(any, bit, "anf").map_err(ierr)?;
            }
        }
        Ok(any)
    }

    /// The total of an `i64` counter kept as a vector `v` plus a one-lane tail, summed in lane
    /// order (the number of non-zeros an entry point returns).
    pub(crate) fn sum_i64_lanes(
        &self,
        v: VectorValue<'c>,
        tail: VectorValue<'c>,
    ) -> Result<IntValue<'c>, CodegenError> {
        let lane = |v: VectorValue<'c>, l: u32| -> Result<IntValue<'c>, CodegenError> {
            Ok(self
                .b
                .build_extract_element(v, self.i64c(u64::from(l)), "lane")
                .map_err(ierr)?
                .into_int_value())
        };
        let mut total = lane(tail, 0)?;
        for l in 0..v.get_type().get_size() {
            total = self.add(total, lane(v, l)?)?;
        }
        Ok(total)
    }

    /// Starts a function body (positioned in its entry block).
    pub(crate) fn new(ctx: &'c Context, module: &'m Module<'c>, func: FunctionValue<'c>) -> Self {
        let entry = ctx.append_basic_block(func, "entry");
        let b = ctx.create_builder();
        b.position_at_end(entry);
        Fx {
            ctx,
            module,
            b,
            func,
            entry,
        }
    }

    pub(crate) fn i64c(&self, v: u64) -> IntValue<'c> {
        self.ctx.i64_type().const_int(v, false)
    }

    pub(crate) fn vty(&self, w: u32) -> inkwell::types::VectorType<'c> {
        self.ctx.f64_type().vec_type(w)
    }

    pub(crate) fn splat_const(&self, x: f64, w: u32) -> VectorValue<'c> {
        let c = self.ctx.f64_type().const_float(x);
        inkwell::types::VectorType::const_vector(&vec![c; w as usize])
    }

    /// Broadcasts a scalar double to `w` lanes.
    pub(crate) fn splat(
        &self,
        x: inkwell::values::FloatValue<'c>,
        w: u32,
    ) -> Result<VectorValue<'c>, CodegenError> {
        let mut v = self.vty(w).get_undef();
        for l in 0..w {
            v = self
                .b
                .build_insert_element(v, x, self.i64c(l as u64), "s")
                .map_err(ierr)?;
        }
        Ok(v)
    }

    /// A stack slot in the entry block (promoted to registers by the optimizer).
    pub(crate) fn slot(
        &self,
        ty: inkwell::types::BasicTypeEnum<'c>,
    ) -> Result<PointerValue<'c>, CodegenError> {
        let tmp = self.ctx.create_builder();
        match self.entry.get_first_instruction() {
            Some(i) => tmp.position_before(&i),
            None => tmp.position_at_end(self.entry),
        }
        tmp.build_alloca(ty, "slot").map_err(ierr)
    }

    pub(crate) fn load_i64(&self, p: PointerValue<'c>) -> Result<IntValue<'c>, CodegenError> {
        Ok(load(&self.b, p)?.into_int_value())
    }

    /// The column index `idx[p]` of a CSR non-zero (an `i32`), as an `i64`.
    pub(crate) fn load_index(
        &self,
        idx: PointerValue<'c>,
        p: IntValue<'c>,
    ) -> Result<IntValue<'c>, CodegenError> {
        let j32 = load(&self.b, gep(&self.b, idx, p)?)?.into_int_value();
        self.b
            .build_int_z_extend(j32, self.ctx.i64_type(), "j")
            .map_err(ierr)
    }

    /// Element `j` of the vector at `p` of length `len`, as one lane; a length-one vector
    /// broadcasts its only element.
    pub(crate) fn load_broadcast(
        &self,
        p: PointerValue<'c>,
        len: IntValue<'c>,
        j: IntValue<'c>,
    ) -> Result<VectorValue<'c>, CodegenError> {
        let one = self
            .b
            .build_int_compare(IntPredicate::EQ, len, self.i64c(1), "one")
            .map_err(ierr)?;
        let idx = self
            .b
            .build_select(one, self.i64c(0), j, "ix")
            .map_err(ierr)?
            .into_int_value();
        load_vec(&self.b, self.vty(1), p, idx)
    }

    pub(crate) fn load_v(&self, p: PointerValue<'c>) -> Result<VectorValue<'c>, CodegenError> {
        Ok(load(&self.b, p)?.into_vector_value())
    }

    pub(crate) fn store<V: inkwell::values::BasicValue<'c>>(
        &self,
        p: PointerValue<'c>,
        v: V,
    ) -> Result<(), CodegenError> {
        self.b.build_store(p, v).map_err(ierr)?;
        Ok(())
    }

    pub(crate) fn add(
        &self,
        a: IntValue<'c>,
        b: IntValue<'c>,
    ) -> Result<IntValue<'c>, CodegenError> {
        self.b.build_int_add(a, b, "a").map_err(ierr)
    }

    pub(crate) fn mul(
        &self,
        a: IntValue<'c>,
        b: IntValue<'c>,
    ) -> Result<IntValue<'c>, CodegenError> {
        self.b.build_int_mul(a, b, "m").map_err(ierr)
    }

    pub(crate) fn sub(
        &self,
        a: IntValue<'c>,
        b: IntValue<'c>,
    ) -> Result<IntValue<'c>, CodegenError> {
        self.b.build_int_sub(a, b, "s").map_err(ierr)
    }

    /// `for (; *iv + step <= hi; *iv += step) body(*iv)`; the slot keeps the next index.
    pub(crate) fn for_slot(
        &mut self,
        iv: PointerValue<'c>,
        hi: IntValue<'c>,
        step: u64,
        body: &mut dyn FnMut(&mut Self, IntValue<'c>) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        let head = self.ctx.append_basic_block(self.func, "head");
        let bodyb = self.ctx.append_basic_block(self.func, "body");
        let exit = self.ctx.append_basic_block(self.func, "exit");
        self.b.build_unconditional_branch(head).map_err(ierr)?;
        self.b.position_at_end(head);
        let i = self.load_i64(iv)?;
        let next = self.add(i, self.i64c(step))?;
        let c = self
            .b
            .build_int_compare(IntPredicate::ULE, next, hi, "c")
            .map_err(ierr)?;
        self.b
            .build_conditional_branch(c, bodyb, exit)
            .map_err(ierr)?;
        self.b.position_at_end(bodyb);
        body(self, i)?;
        self.store(iv, next)?;
        self.b.build_unconditional_branch(head).map_err(ierr)?;
        self.b.position_at_end(exit);
        Ok(())
    }

    /// `for i in lo..hi { body(i) }` with a fresh slot.
    pub(crate) fn for_range(
        &mut self,
        lo: IntValue<'c>,
        hi: IntValue<'c>,
        body: &mut dyn FnMut(&mut Self, IntValue<'c>) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        let iv = self.slot(self.ctx.i64_type().into())?;
        self.store(iv, lo)?;
        self.for_slot(iv, hi, 1, body)
    }

    pub(crate) fn fadd(
        &self,
        a: VectorValue<'c>,
        b: VectorValue<'c>,
    ) -> Result<VectorValue<'c>, CodegenError> {
        self.b.build_float_add(a, b, "fa").map_err(ierr)
    }
    pub(crate) fn fsub(
        &self,
        a: VectorValue<'c>,
        b: VectorValue<'c>,
    ) -> Result<VectorValue<'c>, CodegenError> {
        self.b.build_float_sub(a, b, "fs").map_err(ierr)
    }
    pub(crate) fn fmul(
        &self,
        a: VectorValue<'c>,
        b: VectorValue<'c>,
    ) -> Result<VectorValue<'c>, CodegenError> {
        self.b.build_float_mul(a, b, "fm").map_err(ierr)
    }
    /// `-a` (the sign flipped, exact).
    pub(crate) fn fneg(&self, a: VectorValue<'c>) -> Result<VectorValue<'c>, CodegenError> {
        self.b.build_float_neg(a, "fn").map_err(ierr)
    }
    pub(crate) fn fdiv(
        &self,
        a: VectorValue<'c>,
        b: VectorValue<'c>,
    ) -> Result<VectorValue<'c>, CodegenError> {
        self.b.build_float_div(a, b, "fd").map_err(ierr)
    }
    pub(crate) fn fcmp(
        &self,
        p: FloatPredicate,
        a: VectorValue<'c>,
        b: VectorValue<'c>,
    ) -> Result<VectorValue<'c>, CodegenError> {
        self.b.build_float_compare(p, a, b, "fc").map_err(ierr)
    }
    pub(crate) fn select(
        &self,
        c: VectorValue<'c>,
        a: VectorValue<'c>,
        b: VectorValue<'c>,
    ) -> Result<VectorValue<'c>, CodegenError> {
        Ok(self
            .b
            .build_select(c, a, b, "sel")
            .map_err(ierr)?
            .into_vector_value())
    }
    pub(crate) fn and(
        &self,
        a: VectorValue<'c>,
        b: VectorValue<'c>,
    ) -> Result<VectorValue<'c>, CodegenError> {
        self.b.build_and(a, b, "and").map_err(ierr)
    }
    pub(crate) fn or(
        &self,
        a: VectorValue<'c>,
        b: VectorValue<'c>,
    ) -> Result<VectorValue<'c>, CodegenError> {
        self.b.build_or(a, b, "or").map_err(ierr)
    }
    pub(crate) fn xor(
        &self,
        a: VectorValue<'c>,
        b: VectorValue<'c>,
    ) -> Result<VectorValue<'c>, CodegenError> {
        self.b.build_xor(a, b, "xor").map_err(ierr)
    }

    /// 1.0 where `c` holds, else 0.0.
    pub(crate) fn b2f(&self, c: VectorValue<'c>) -> Result<VectorValue<'c>, CodegenError> {
        let w = c.get_type().get_size();
        self.select(c, self.splat_const(1.0, w), self.splat_const(0.0, w))
    }

    /// A unary LLVM intrinsic on the vector type (`llvm.sqrt`, `llvm.floor`, ...).
    pub(crate) fn intrinsic(
        &self,
        name: &str,
        x: VectorValue<'c>,
    ) -> Result<VectorValue<'c>, CodegenError> {
        let f = Intrinsic::find(name)
            .and_then(|i| i.get_declaration(self.module, &[x.get_type().into()]))
            .ok_or_else(|| missing_intrinsic(name))?;
        let r = self.b.build_call(f, &[x.into()], "i").map_err(ierr)?;
        basic_vector(r)
    }

    /// `a * b + c` rounded once (`llvm.fma`): one instruction instead of two, and no rounding
    /// of the product, for dot products whose order of summation is the generator's own anyway.
    pub(crate) fn fma(
        &self,
        a: VectorValue<'c>,
        b: VectorValue<'c>,
        c: VectorValue<'c>,
    ) -> Result<VectorValue<'c>, CodegenError> {
        let f = Intrinsic::find("llvm.fma")
            .and_then(|i| i.get_declaration(self.module, &[a.get_type().into()]))
            .ok_or_else(|| missing_intrinsic("llvm.fma"))?;
        let r = self
            .b
            .build_call(f, &[a.into(), b.into(), c.into()], "fma")
            .map_err(ierr)?;
        basic_vector(r)
    }

    /// Calls a Rust helper lane by lane (helpers are scalar).
    pub(crate) fn helper(
        &self,
        name: &str,
        xs: &[VectorValue<'c>],
    ) -> Result<VectorValue<'c>, CodegenError> {
        let f64t = self.ctx.f64_type();
        let f = match self.module.get_function(name) {
            Some(f) => f,
            None => {
                let params: Vec<_> = xs.iter().map(|_| f64t.into()).collect();
                let f = self.module.add_function(
                    name,
                    f64t.fn_type(&params, false),
                    Some(Linkage::External),
                );
                f.add_attribute(
                    inkwell::attributes::AttributeLoc::Function,
                    llvm::enum_attr(self.ctx, "readnone"),
                );
                f.add_attribute(
                    inkwell::attributes::AttributeLoc::Function,
                    llvm::enum_attr(self.ctx, "nounwind"),
                );
                f
            }
        };
        let w = xs[0].get_type().get_size();
        let mut out = self.vty(w).get_undef();
        for l in 0..w {
            let idx = self.i64c(l as u64);
            let args: Vec<BasicMetadataValueEnum> = xs
                .iter()
                .map(|x| {
                    self.b
                        .build_extract_element(*x, idx, "e")
                        .map(|v| v.into())
                        .map_err(ierr)
                })
                .collect::<Result<_, _>>()?;
            let r = self.b.build_call(f, &args, "h").map_err(ierr)?;
            let r = match r.try_as_basic_value() {
                inkwell::values::ValueKind::Basic(v) => v,
                _ => {
                    return Err(CodegenError::Internal(Internal::NoReturnValue {
                        what: "helper",
                    }))
                }
            };
            out = self
                .b
                .build_insert_element(out, r, idx, "ins")
                .map_err(ierr)?;
        }
        Ok(out)
    }

    /// Loads `w` doubles at `ptr[idx + l * stride]` (a strided gather, lane by lane).
    pub(crate) fn gather(
        &self,
        ptr: PointerValue<'c>,
        idx: IntValue<'c>,
        stride: IntValue<'c>,
        w: u32,
    ) -> Result<VectorValue<'c>, CodegenError> {
        if w == 1 {
            return load_vec(&self.b, self.vty(1), ptr, idx);
        }
        let mut v = self.vty(w).get_undef();
        for l in 0..w {
            let off = self.mul(stride, self.i64c(l as u64))?;
            let p = gep(&self.b, ptr, self.add(idx, off)?)?;
            let x = load(&self.b, p)?.into_float_value();
            v = self
                .b
                .build_insert_element(v, x, self.i64c(l as u64), "g")
                .map_err(ierr)?;
        }
        Ok(v)
    }

    /// Loads one double and broadcasts it.
    pub(crate) fn load_splat(
        &self,
        ptr: PointerValue<'c>,
        idx: IntValue<'c>,
        w: u32,
    ) -> Result<VectorValue<'c>, CodegenError> {
        let p = gep(&self.b, ptr, idx)?;
        let x = load(&self.b, p)?.into_float_value();
        self.splat(x, w)
    }

    /// Java `Math.min`/`Math.max` (NaN propagates; -0.0 < 0.0), as `lafuse_core::ops`.
    pub(crate) fn java_minmax(
        &self,
        max: bool,
        a: VectorValue<'c>,
        b: VectorValue<'c>,
    ) -> Result<VectorValue<'c>, CodegenError> {
        let w = a.get_type().get_size();
        let le = self.fcmp(
            if max {
                FloatPredicate::OGE
            } else {
                FloatPredicate::OLE
            },
            a,
            b,
        )?;
        let mut r = self.select(le, a, b)?;
        let zero = self.splat_const(0.0, w);
        let az = self.fcmp(FloatPredicate::OEQ, a, zero)?;
        let bz = self.fcmp(FloatPredicate::OEQ, b, zero)?;
        let both = self.and(az, bz)?;
        let ity = self.ctx.i64_type().vec_type(w);
        let abits = self
            .b
            .build_bit_cast(a, ity, "bits")
            .map_err(ierr)?
            .into_vector_value();
        let izero = ity.const_zero();
        let aneg = self
            .b
            .build_int_compare(IntPredicate::SLT, abits, izero, "neg")
            .map_err(ierr)?;
        // min: the negative zero wins; max: the positive zero wins.
        let pick_a = if max {
            self.b.build_not(aneg, "pos").map_err(ierr)?
        } else {
            aneg
        };
        let zr = self.select(pick_a, a, b)?;
        r = self.select(both, zr, r)?;
        let bnan = self.fcmp(FloatPredicate::UNO, b, b)?;
        r = self.select(bnan, b, r)?;
        let anan = self.fcmp(FloatPredicate::UNO, a, a)?;
        self.select(anan, a, r)
    }
}

fn basic_vector(r: inkwell::values::CallSiteValue<'_>) -> Result<VectorValue<'_>, CodegenError> {
    match r.try_as_basic_value() {
        inkwell::values::ValueKind::Basic(v) => Ok(v.into_vector_value()),
        _ => Err(CodegenError::Internal(Internal::NoReturnValue {
            what: "call",
        })),
    }
}

/// Per-input pointers loaded once at function entry.
#[derive(Clone, Default)]
pub(crate) struct InputPtrs<'c> {
    /// Data pointer per input position (`None` when not read).
    pub data: Vec<Option<PointerValue<'c>>>,
    /// Column count (row stride) per input position.
    pub cols: Vec<Option<IntValue<'c>>>,
    /// The first row held at `data` per input position: 0, or the first row of the block a
    /// task densified of a streamed (sparse, cell-aligned) side input.
    pub row0: Vec<Option<IntValue<'c>>>,
}

impl<'c> InputPtrs<'c> {
    /// Input `k`'s data pointer and column count.
    pub(crate) fn get(&self, k: usize) -> Result<(PointerValue<'c>, IntValue<'c>), CodegenError> {
        match (
            self.data.get(k).copied().flatten(),
            self.cols.get(k).copied().flatten(),
        ) {
            (Some(p), Some(c)) => Ok((p, c)),
            _ => Err(CodegenError::Internal(Internal::InputNotPrepared {
                input: k,
            })),
        }
    }

    /// Input `k`'s data pointer and the offset of its row `i` (read aligned with the main
    /// input), rows counted from the view's first row (a streamed input's block).
    pub(crate) fn aligned_row(
        &self,
        fx: &Fx<'_, 'c>,
        k: usize,
        i: IntValue<'c>,
    ) -> Result<(PointerValue<'c>, IntValue<'c>), CodegenError> {
        let (p, c) = self.get(k)?;
        let r0 = self
            .row0
            .get(k)
            .copied()
            .flatten()
            .ok_or(CodegenError::Internal(Internal::InputNotPrepared {
                input: k,
            }))?;
        Ok((p, fx.mul(fx.sub(i, r0)?, c)?))
    }
}

/// Where the body is evaluated: row `i`, `w` consecutive columns from `j`, and how to read the
/// main input there.
#[derive(Clone, Copy)]
pub(crate) struct At<'c> {
    pub i: IntValue<'c>,
    pub j: IntValue<'c>,
    pub w: u32,
    /// The main input's value(s) at the cell (already loaded).
    pub main: VectorValue<'c>,
}

/// Emits the value of plan nodes at one position, each node once (DAG-aware).
pub(crate) struct Body<'p, 'c> {
    pub plan: &'p CPlan,
    pub ins: &'p InputPtrs<'c>,
    pub at: At<'c>,
    /// Outer: the dot products `u_i · v_j` are computed by the template and passed in here.
    pub outer_dot: Option<VectorValue<'c>>,
    /// Values of nodes the template computed itself (a GPU Row kernel's row aggregates of the
    /// current row): the body reads them instead of emitting the node.
    pub given: HashMap<CNodeId, VectorValue<'c>>,
    memo: HashMap<(CNodeId, bool), VectorValue<'c>>,
    /// Per node: whether its value is written as a matrix cell ([`CPlan::matrix_cell_nodes`]).
    matrix_cells: Vec<bool>,
}

impl<'p, 'c> Body<'p, 'c> {
    pub(crate) fn new(plan: &'p CPlan, ins: &'p InputPtrs<'c>, at: At<'c>) -> Self {
        Body {
            plan,
            ins,
            at,
            outer_dot: None,
            given: HashMap::new(),
            memo: HashMap::new(),
            matrix_cells: plan.matrix_cell_nodes(),
        }
    }

    /// Leaves node `n`'s value as computed, `-0.0` kept, where a sum is all that reads it
    /// ([`crate::plan_info::summed_only`]). Nothing changes where another node reads `n`.
    pub(crate) fn summed_only(&mut self, n: CNodeId) {
        if crate::plan_info::summed_only(self.plan, n) {
            if let Some(m) = self.matrix_cells.get_mut(n) {
                *m = false;
            }
        }
    }

    /// The value of node `n` (`swapped`: inside a transpose, row and column exchanged).
    pub(crate) fn emit(
        &mut self,
        fx: &Fx<'_, 'c>,
        n: CNodeId,
        swapped: bool,
    ) -> Result<VectorValue<'c>, CodegenError> {
        with_stack(|| self.emit_step(fx, n, swapped))
    }

    fn emit_step(
        &mut self,
        fx: &Fx<'_, 'c>,
        n: CNodeId,
        swapped: bool,
    ) -> Result<VectorValue<'c>, CodegenError> {
        if let Some(v) = self.given.get(&n) {
            return Ok(*v);
        }
        if let Some(v) = self.memo.get(&(n, swapped)) {
            return Ok(*v);
        }
        let w = self.at.w;
        let node = self
            .plan
            .nodes
            .get(n)
            .ok_or(CodegenError::Internal(Internal::NodeMissing { node: n }))?;
        let v = match node {
            CNode::Data { input, access } => self.data(fx, *input, *access, swapped)?,
            CNode::Literal { value } => {
                let x = match value {
                    Literal::Str(s) => {
                        return Err(CodegenError::Unsupported(Unsupported::StringLiteral {
                            literal: s.to_string(),
                        }))
                    }
                    l => l.as_f64().unwrap_or(f64::NAN),
                };
                fx.splat_const(x, w)
            }
            CNode::Unary { f, x } => {
                let x = self.emit(fx, *x, swapped)?;
                unary(fx, *f, x)?
            }
            CNode::Pow2 { x } => {
                let x = self.emit(fx, *x, swapped)?;
                fx.fmul(x, x)?
            }
            CNode::Mult2 { x } => {
                let x = self.emit(fx, *x, swapped)?;
                fx.fadd(x, x)?
            }
            CNode::Binary { f, a, b } => {
                let lit2 = matches!(self.plan.nodes.get(*b), Some(CNode::Literal { value }) if value.as_f64() == Some(2.0));
                let a = self.emit(fx, *a, swapped)?;
                let b = self.emit(fx, *b, swapped)?;
                if *f == BinaryOp::Pow && lit2 {
                    // java_pow(x, 2) is x * x.
                    fx.fmul(a, a)?
                } else {
                    binary(fx, *f, a, b)?
                }
            }
            CNode::Ternary { f, a, b, c } => {
                let a = self.emit(fx, *a, swapped)?;
                let b = self.emit(fx, *b, swapped)?;
                let c = self.emit(fx, *c, swapped)?;
                let wz = a.get_type().get_size();
                match f {
                    TernaryOp::IfElse => {
                        let cond = fx.fcmp(FloatPredicate::UNE, a, fx.splat_const(0.0, wz))?;
                        fx.select(cond, b, c)?
                    }
                    TernaryOp::Replace => {
                        let eq = fx.fcmp(FloatPredicate::OEQ, a, b)?;
                        let an = fx.fcmp(FloatPredicate::UNO, a, a)?;
                        let bn = fx.fcmp(FloatPredicate::UNO, b, b)?;
                        let m = fx.or(eq, fx.and(an, bn)?)?;
                        fx.select(m, c, a)?
                    }
                }
            }
            CNode::Nary { f, xs } => {
                let max = match f {
                    NaryOp::Min => false,
                    NaryOp::Max => true,
                    other => {
                        return Err(CodegenError::Unsupported(Unsupported::NaryInCellBody {
                            op: other.name(),
                        }))
                    }
                };
                let mut acc: Option<VectorValue<'c>> = None;
                for &x in xs {
                    let v = self.emit(fx, x, swapped)?;
                    acc = Some(match acc {
                        None => v,
                        Some(a) => fx.java_minmax(max, a, v)?,
                    });
                }
                acc.ok_or(CodegenError::Unsupported(Unsupported::Construct(
                    "n-ary op without operands",
                )))?
            }
            CNode::DotCell { a, b } => {
                let a = self.emit(fx, *a, swapped)?;
                let b = self.emit(fx, *b, swapped)?;
                fx.fmul(a, b)?
            }
            CNode::Transpose { x } => self.emit(fx, *x, !swapped)?,
            CNode::OuterDot { .. } => {
                self.outer_dot
                    .ok_or(CodegenError::Unsupported(Unsupported::Construct(
                        "u_i · v_j outside an outer-product operator",
                    )))?
            }
            other => {
                return Err(CodegenError::Unsupported(Unsupported::NoCellValue {
                    node: node_name(other),
                }))
            }
        };
        let v = if self.matrix_cells.get(n).copied().unwrap_or(false) {
            matrix_cell(fx, v)?
        } else {
            v
        };
        self.memo.insert((n, swapped), v);
        Ok(v)
    }

    fn data(
        &mut self,
        fx: &Fx<'_, 'c>,
        k: usize,
        access: Access,
        swapped: bool,
    ) -> Result<VectorValue<'c>, CodegenError> {
        let w = self.at.w;
        let (i, j) = if swapped {
            (self.at.j, self.at.i)
        } else {
            (self.at.i, self.at.j)
        };
        let scalar =
            self.plan.inputs.get(k) == Some(&InputKind::Scalar) || access == Access::Scalar;
        if scalar {
            let (p, _) = self.ins.get(k)?;
            return fx.load_splat(p, fx.i64c(0), w);
        }
        match (access, swapped) {
            (Access::Main, false) if k == 0 => Ok(self.at.main),
            (Access::Aligned, false) => {
                let (p, row) = self.ins.aligned_row(fx, k, i)?;
                load_vec(&fx.b, fx.vty(w), p, fx.add(row, j)?)
            }
            (Access::ColVector, false) => {
                let (p, c) = self.ins.get(k)?;
                fx.load_splat(p, fx.mul(i, c)?, w)
            }
            (Access::RowVector, false) => {
                let (p, _) = self.ins.get(k)?;
                load_vec(&fx.b, fx.vty(w), p, j)
            }
            // Transposed reads: a column vector read along the columns, a row vector along
            // the rows (the skeleton checked the transposed shapes).
            (Access::ColVector, true) => {
                let (p, c) = self.ins.get(k)?;
                fx.gather(p, fx.mul(i, c)?, c, w)
            }
            (Access::RowVector, true) => {
                let (p, _) = self.ins.get(k)?;
                fx.load_splat(p, j, w)
            }
            (access, transposed) => Err(CodegenError::Unsupported(Unsupported::CellInputAccess {
                input: k,
                access,
                transposed,
            })),
        }
    }
}

pub(crate) use crate::plan_info::{node_calls_helper, node_name};

pub(crate) fn unary<'c>(
    fx: &Fx<'_, 'c>,
    f: UnaryOp,
    x: VectorValue<'c>,
) -> Result<VectorValue<'c>, CodegenError> {
    let w = x.get_type().get_size();
    Ok(match f {
        UnaryOp::Neg => fx.b.build_float_neg(x, "neg").map_err(ierr)?,
        UnaryOp::Not => {
            let z = fx.fcmp(FloatPredicate::OEQ, x, fx.splat_const(0.0, w))?;
            fx.b2f(z)?
        }
        UnaryOp::Abs => fx.intrinsic("llvm.fabs", x)?,
        UnaryOp::Sqrt => fx.intrinsic("llvm.sqrt", x)?,
        UnaryOp::Floor => fx.intrinsic("llvm.floor", x)?,
        UnaryOp::Ceil => fx.intrinsic("llvm.ceil", x)?,
        UnaryOp::Sign => {
            let gt = fx.fcmp(FloatPredicate::OGT, x, fx.splat_const(0.0, w))?;
            let lt = fx.fcmp(FloatPredicate::OLT, x, fx.splat_const(0.0, w))?;
            let r = fx.select(lt, fx.splat_const(-1.0, w), x)?;
            fx.select(gt, fx.splat_const(1.0, w), r)?
        }
        UnaryOp::Round => {
            // Java's Math.round as the runtime's `java_round`, in IR so that the loop stays
            // vectorized (a helper call per cell ran 5x slower): floor, plus one where the
            // exact remainder x - floor(x) is at least 0.5 (`+ 0.0` turns -0.0 into 0.0), then
            // the round trip through `long`: clamped to +-2^63, NaN to 0.
            let f = fx.intrinsic("llvm.floor", x)?;
            let up = fx.fcmp(FloatPredicate::OGE, fx.fsub(x, f)?, fx.splat_const(0.5, w))?;
            let r = fx.select(
                up,
                fx.fadd(f, fx.splat_const(1.0, w))?,
                fx.fadd(f, fx.splat_const(0.0, w))?,
            )?;
            let limit = i64::MAX as f64;
            let high = fx.fcmp(FloatPredicate::OGE, x, fx.splat_const(limit, w))?;
            let r = fx.select(high, fx.splat_const(limit, w), r)?;
            let low = fx.fcmp(FloatPredicate::OLE, x, fx.splat_const(-limit, w))?;
            let r = fx.select(low, fx.splat_const(-limit, w), r)?;
            let nan = fx.fcmp(FloatPredicate::UNO, x, x)?;
            fx.select(nan, fx.splat_const(0.0, w), r)?
        }
        UnaryOp::Exp => math::exp(fx, x)?,
        UnaryOp::Log => math::ln(fx, x)?,
        UnaryOp::Sin => fx.helper("lafuse_sin", &[x])?,
        UnaryOp::Cos => fx.helper("lafuse_cos", &[x])?,
        UnaryOp::Tan => fx.helper("lafuse_tan", &[x])?,
        UnaryOp::Asin => fx.helper("lafuse_asin", &[x])?,
        UnaryOp::Acos => fx.helper("lafuse_acos", &[x])?,
        UnaryOp::Atan => fx.helper("lafuse_atan", &[x])?,
        UnaryOp::Sinh => fx.helper("lafuse_sinh", &[x])?,
        UnaryOp::Cosh => fx.helper("lafuse_cosh", &[x])?,
        UnaryOp::Tanh => math::tanh(fx, x)?,
        UnaryOp::Sigmoid => {
            // 1 / (1 + exp(-x)), operation for operation as the runtime.
            let nx = fx.b.build_float_neg(x, "neg").map_err(ierr)?;
            let e = math::exp(fx, nx)?;
            let d = fx.fadd(fx.splat_const(1.0, w), e)?;
            fx.fdiv(fx.splat_const(1.0, w), d)?
        }
        UnaryOp::IsNaN => {
            let nan = fx.fcmp(FloatPredicate::UNO, x, x)?;
            fx.b2f(nan)?
        }
        UnaryOp::IsInf => {
            let a = fx.intrinsic("llvm.fabs", x)?;
            let inf = fx.fcmp(FloatPredicate::OEQ, a, fx.splat_const(f64::INFINITY, w))?;
            fx.b2f(inf)?
        }
    })
}

pub(crate) fn binary<'c>(
    fx: &Fx<'_, 'c>,
    f: BinaryOp,
    a: VectorValue<'c>,
    b: VectorValue<'c>,
) -> Result<VectorValue<'c>, CodegenError> {
    let w = a.get_type().get_size();
    let cmp = |p| fx.fcmp(p, a, b).and_then(|c| fx.b2f(c));
    let nz = |x| fx.fcmp(FloatPredicate::UNE, x, fx.splat_const(0.0, w));
    Ok(match f {
        BinaryOp::Add => fx.fadd(a, b)?,
        BinaryOp::Sub => fx.fsub(a, b)?,
        BinaryOp::Mul => fx.fmul(a, b)?,
        BinaryOp::Div => fx.fdiv(a, b)?,
        BinaryOp::Pow => fx.helper("lafuse_pow", &[a, b])?,
        BinaryOp::Mod => fx.helper("lafuse_fmod", &[a, b])?,
        BinaryOp::IntDiv => {
            let q = fx.fdiv(a, b)?;
            fx.intrinsic("llvm.trunc", q)?
        }
        BinaryOp::Lt => cmp(FloatPredicate::OLT)?,
        BinaryOp::Le => cmp(FloatPredicate::OLE)?,
        BinaryOp::Gt => cmp(FloatPredicate::OGT)?,
        BinaryOp::Ge => cmp(FloatPredicate::OGE)?,
        BinaryOp::Eq => cmp(FloatPredicate::OEQ)?,
        BinaryOp::Ne => cmp(FloatPredicate::UNE)?,
        BinaryOp::And => fx.b2f(fx.and(nz(a)?, nz(b)?)?)?,
        BinaryOp::Or => fx.b2f(fx.or(nz(a)?, nz(b)?)?)?,
        BinaryOp::Min => fx.java_minmax(false, a, b)?,
        BinaryOp::Max => fx.java_minmax(true, a, b)?,
        BinaryOp::Log => {
            let la = math::ln(fx, a)?;
            let lb = math::ln(fx, b)?;
            fx.fdiv(la, lb)?
        }
        BinaryOp::Xor => fx.b2f(fx.xor(nz(a)?, nz(b)?)?)?,
        BinaryOp::BitwAnd => fx.helper("lafuse_bitw_and", &[a, b])?,
        BinaryOp::BitwOr => fx.helper("lafuse_bitw_or", &[a, b])?,
        BinaryOp::BitwXor => fx.helper("lafuse_bitw_xor", &[a, b])?,
        BinaryOp::BitwShiftL => fx.helper("lafuse_bitw_shift_l", &[a, b])?,
        BinaryOp::BitwShiftR => fx.helper("lafuse_bitw_shift_r", &[a, b])?,
    })
}

/// An element-wise node's value as the unfused kernels write it into a matrix: `-0.0` as
/// `0.0` (`x + 0.0`, which LLVM keeps: it is not an identity for `-0.0`). See the runtime's
/// `matrix_cell` and the signed-zero rule in `runtime/src/matrix.rs`.
pub(crate) fn matrix_cell<'c>(
    fx: &Fx<'_, 'c>,
    v: VectorValue<'c>,
) -> Result<VectorValue<'c>, CodegenError> {
    fx.fadd(v, fx.splat_const(0.0, v.get_type().get_size()))
}

/// `if c { then } else { els }` with both arms emitted.
pub(crate) fn if_else<'c>(
    fx: &mut Fx<'_, 'c>,
    c: IntValue<'c>,
    then: &mut dyn FnMut(&mut Fx<'_, 'c>) -> Result<(), CodegenError>,
    els: &mut dyn FnMut(&mut Fx<'_, 'c>) -> Result<(), CodegenError>,
) -> Result<(), CodegenError> {
    let tb = fx.ctx.append_basic_block(fx.func, "then");
    let eb = fx.ctx.append_basic_block(fx.func, "else");
    let cont = fx.ctx.append_basic_block(fx.func, "cont");
    fx.b.build_conditional_branch(c, tb, eb).map_err(ierr)?;
    fx.b.position_at_end(tb);
    then(fx)?;
    fx.b.build_unconditional_branch(cont).map_err(ierr)?;
    fx.b.position_at_end(eb);
    els(fx)?;
    fx.b.build_unconditional_branch(cont).map_err(ierr)?;
    fx.b.position_at_end(cont);
    Ok(())
}

/// Prefetches, with LLVM's `locality` (see [`prefetch_to`]), the cache line holding element
/// `elems` of the doubles at `base`. The address is a plain GEP on i8, without `inbounds`: it
/// may lie past the end of the data, as it is only ever prefetched.
pub(crate) fn prefetch_element<'c>(
    fx: &Fx<'_, 'c>,
    base: PointerValue<'c>,
    elems: IntValue<'c>,
    locality: u64,
) -> Result<(), CodegenError> {
    let bytes =
        fx.b.build_pointer_cast(base, llvm::i8_ptr(fx.ctx), "pfb")
            .map_err(ierr)?;
    let off = fx.mul(elems, fx.i64c(8))?;
    // SAFETY (of the IR): a plain GEP on i8, only ever prefetched.
    let addr = unsafe { fx.b.build_gep(bytes, &[off], "pf") }.map_err(ierr)?;
    prefetch_to(fx, addr, locality)
}

/// Prefetches the cache line at `addr` for reading with LLVM's `locality` (3: into every
/// level, the L1 included; 2: into the L2 and beyond, leaving the L1 to the data in use).
fn prefetch_to<'c>(
    fx: &Fx<'_, 'c>,
    addr: PointerValue<'c>,
    locality: u64,
) -> Result<(), CodegenError> {
    let i8p = llvm::i8_ptr(fx.ctx);
    let f = Intrinsic::find("llvm.prefetch")
        .and_then(|f| f.get_declaration(fx.module, &[i8p.into()]))
        .ok_or_else(|| missing_intrinsic("llvm.prefetch"))?;
    let addr = fx.b.build_pointer_cast(addr, i8p, "pf").map_err(ierr)?;
    let i32t = fx.ctx.i32_type();
    fx.b.build_call(
        f,
        &[
            addr.into(),
            i32t.const_zero().into(),
            i32t.const_int(locality, false).into(),
            i32t.const_int(1, false).into(),
        ],
        "",
    )
    .map_err(ierr)?;
    Ok(())
}

/// Loads the data pointer and column count of every input in `used` from the `KernelArgs`
/// at `args` (inputs array at `inputs_off`).
pub(crate) fn load_inputs<'c>(
    fx: &Fx<'_, 'c>,
    args: PointerValue<'c>,
    used: &[bool],
) -> Result<InputPtrs<'c>, CodegenError> {
    use lafuse_skeletons::abi::{DenseView, KernelArgs};
    use std::mem::{offset_of, size_of};
    let ctx = fx.ctx;
    let views = llvm::load_field(
        ctx,
        &fx.b,
        args,
        offset_of!(KernelArgs, inputs),
        llvm::i8_ptr(ctx).ptr_type(inkwell::AddressSpace::default()),
    )?
    .into_pointer_value();
    let mut out = InputPtrs::default();
    for (k, &u) in used.iter().enumerate() {
        if !u {
            out.data.push(None);
            out.cols.push(None);
            out.row0.push(None);
            continue;
        }
        let base = k * size_of::<DenseView>();
        let d = llvm::load_field(
            ctx,
            &fx.b,
            views,
            base + offset_of!(DenseView, data),
            f64_ptr(ctx).ptr_type(inkwell::AddressSpace::default()),
        )?;
        let c = llvm::load_field(
            ctx,
            &fx.b,
            views,
            base + offset_of!(DenseView, cols),
            ctx.i64_type().ptr_type(inkwell::AddressSpace::default()),
        )?;
        let r0 = llvm::load_field(
            ctx,
            &fx.b,
            views,
            base + offset_of!(DenseView, row0),
            ctx.i64_type().ptr_type(inkwell::AddressSpace::default()),
        )?;
        out.data.push(Some(d.into_pointer_value()));
        out.cols.push(Some(c.into_int_value()));
        out.row0.push(Some(r0.into_int_value()));
    }
    Ok(out)
}

/// Declares an internal always-inline function (a vector primitive, emitted into the module
/// of the entry points that call it) and starts its body.
pub(crate) fn declare_primitive<'m, 'c>(
    ctx: &'c Context,
    module: &'m Module<'c>,
    name: &str,
    params: &[inkwell::types::BasicMetadataTypeEnum<'c>],
    ret: Option<inkwell::types::BasicTypeEnum<'c>>,
) -> Fx<'m, 'c> {
    use inkwell::types::BasicTypeEnum;
    let fnty = match ret {
        Some(BasicTypeEnum::FloatType(t)) => t.fn_type(params, false),
        Some(BasicTypeEnum::IntType(t)) => t.fn_type(params, false),
        _ => ctx.void_type().fn_type(params, false),
    };
    let f = module.add_function(name, fnty, Some(Linkage::Internal));
    llvm::set_function_attributes(ctx, f);
    f.add_attribute(
        inkwell::attributes::AttributeLoc::Function,
        llvm::enum_attr(ctx, "alwaysinline"),
    );
    Fx::new(ctx, module, f)
}

/// An entry point `i64 name(i8* args, i64 rl, i64 ru)` (the skeletons' `KernelFn` ABI) with
/// the host attributes, and its parameters: the builder context, `args`, `rl` and `ru`.
pub(crate) fn declare_entry<'a, 'c>(
    ctx: &'c Context,
    module: &'a Module<'c>,
    name: &str,
) -> Result<(Fx<'a, 'c>, PointerValue<'c>, IntValue<'c>, IntValue<'c>), CodegenError> {
    let i64t = ctx.i64_type();
    let fnty = i64t.fn_type(&[llvm::i8_ptr(ctx).into(), i64t.into(), i64t.into()], false);
    let f = module.add_function(name, fnty, None);
    llvm::set_function_attributes(ctx, f);
    let param = |k: u32| {
        f.get_nth_param(k)
            .ok_or(CodegenError::Internal(Internal::EntryPointParameter {
                index: k,
            }))
    };
    let args = param(0)?.into_pointer_value();
    let rl = param(1)?.into_int_value();
    let ru = param(2)?.into_int_value();
    Ok((Fx::new(ctx, module, f), args, rl, ru))
}

/// The CSR main input's arrays from the `KernelArgs` at `args`: row pointers (`i64*`), column
/// indexes (`i32*`) and values (`double*`).
pub(crate) fn load_main_csr<'c>(
    fx: &Fx<'_, 'c>,
    args: PointerValue<'c>,
) -> Result<(PointerValue<'c>, PointerValue<'c>, PointerValue<'c>), CodegenError> {
    use inkwell::AddressSpace;
    use lafuse_skeletons::abi::{CsrView, KernelArgs};
    use std::mem::offset_of;
    let ctx = fx.ctx;
    let o = offset_of!(KernelArgs, main_csr);
    let ptr_to = |t: inkwell::types::PointerType<'c>| t.ptr_type(AddressSpace::default());
    let field = |off: usize, ty| llvm::load_field(ctx, &fx.b, args, o + off, ty);
    let rp = field(
        offset_of!(CsrView, row_ptr),
        ptr_to(ctx.i64_type().ptr_type(AddressSpace::default())),
    )?;
    let ci = field(
        offset_of!(CsrView, col_idx),
        ptr_to(ctx.i32_type().ptr_type(AddressSpace::default())),
    )?;
    let va = field(offset_of!(CsrView, values), ptr_to(f64_ptr(ctx)))?;
    Ok((
        rp.into_pointer_value(),
        ci.into_pointer_value(),
        va.into_pointer_value(),
    ))
}
