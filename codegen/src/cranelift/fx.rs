//! Lane-wise arithmetic on `w` doubles for the Cranelift emitters: a value of `w` lanes is
//! `w / 2` Cranelift `F64X2` vectors (one `F64` for `w == 1`), so every lane is computed
//! exactly as the LLVM backend computes the same lane of its `<w x double>` (IEEE operations
//! lane by lane: the grouping of lanes into registers changes no bit of any of them).

use super::helpers::{self, Helper, LaneMap};
use crate::backend::{CodegenError, Internal};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, AbiParam, Endianness, InstBuilder, MemFlagsData, Signature, StackSlotData,
    StackSlotKind, Type, Value,
};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::{FunctionBuilder, Variable};

/// `w` doubles: one `F64` (`w == 1`) or `w / 2` `F64X2` parts, lane `l` in part `l / 2`.
#[derive(Clone, Debug)]
pub(super) struct V {
    pub parts: Vec<Value>,
    pub w: u32,
}

/// A condition per lane: an `I8` 0/1 for one lane, `I64X2` all-ones masks otherwise.
#[derive(Clone, Debug)]
pub(super) struct M {
    parts: Vec<Value>,
    w: u32,
}

impl M {
    /// The condition of a one-lane comparison, for a branch.
    pub(super) fn scalar(&self) -> Value {
        self.parts[0]
    }
}

/// Number of Cranelift values holding `w` lanes.
pub(super) fn parts_of(w: u32) -> usize {
    if w == 1 {
        1
    } else {
        (w / 2) as usize
    }
}

/// The Cranelift type of one part of `w` lanes of doubles.
pub(super) fn part_ty(w: u32) -> Type {
    if w == 1 {
        types::F64
    } else {
        types::F64X2
    }
}

/// Loads and stores the generated code makes: of memory the skeleton made valid for the call
/// (so they do not trap), and not necessarily aligned to a vector.
pub(super) fn mem() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// Reinterpreting a vector's bits: lane order fixed (little-endian) as the verifier requires.
fn lanes_le() -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little)
}

/// One function being built, with the call convention of its helper calls.
pub(super) struct Fx<'a> {
    pub b: FunctionBuilder<'a>,
    pub call_conv: CallConv,
}

impl Fx<'_> {
    pub(super) fn iconst(&mut self, v: i64) -> Value {
        self.b.ins().iconst(types::I64, v)
    }

    pub(super) fn iadd(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().iadd(a, b)
    }

    pub(super) fn isub(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().isub(a, b)
    }

    pub(super) fn imul(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().imul(a, b)
    }

    /// A new variable of type `ty` holding `init`.
    pub(super) fn var(&mut self, ty: Type, init: Value) -> Variable {
        let v = self.b.declare_var(ty);
        self.b.def_var(v, init);
        v
    }

    /// Variables holding the lanes of `x` (one per part).
    pub(super) fn vars(&mut self, x: &V) -> Vec<Variable> {
        x.parts.iter().map(|&p| self.var(part_ty(x.w), p)).collect()
    }

    pub(super) fn get(&mut self, vars: &[Variable], w: u32) -> V {
        let parts = vars.iter().map(|&v| self.b.use_var(v)).collect();
        V { parts, w }
    }

    pub(super) fn set(&mut self, vars: &[Variable], x: &V) {
        for (&v, &p) in vars.iter().zip(&x.parts) {
            self.b.def_var(v, p);
        }
    }

    /// `x` in every one of `w` lanes.
    pub(super) fn fconst(&mut self, x: f64, w: u32) -> V {
        let s = self.b.ins().f64const(x);
        self.splat(s, w)
    }

    /// The scalar double `s` in every one of `w` lanes.
    pub(super) fn splat(&mut self, s: Value, w: u32) -> V {
        let parts = if w == 1 {
            vec![s]
        } else {
            let v = self.b.ins().splat(types::F64X2, s);
            vec![v; parts_of(w)]
        };
        V { parts, w }
    }

    /// Lane `l` of `x` as a scalar double.
    pub(super) fn lane(&mut self, x: &V, l: u32) -> Value {
        if x.w == 1 {
            x.parts[0]
        } else {
            self.b
                .ins()
                .extractlane(x.parts[(l / 2) as usize], (l % 2) as u8)
        }
    }

    /// `w` lanes from scalar doubles, lane by lane.
    pub(super) fn of_lanes(&mut self, lanes: &[Value]) -> V {
        let w = lanes.len() as u32;
        if w == 1 {
            return V {
                parts: vec![lanes[0]],
                w,
            };
        }
        let parts = lanes
            .chunks(2)
            .map(|pair| {
                let v = self.b.ins().scalar_to_vector(types::F64X2, pair[0]);
                self.b.ins().insertlane(v, pair[1], 1)
            })
            .collect();
        V { parts, w }
    }

    fn map1(&mut self, x: &V, f: impl Fn(&mut Self, Value) -> Value) -> V {
        let parts = x.parts.iter().map(|&p| f(self, p)).collect();
        V { parts, w: x.w }
    }

    fn map2(&mut self, a: &V, b: &V, f: impl Fn(&mut Self, Value, Value) -> Value) -> V {
        let parts = a
            .parts
            .iter()
            .zip(&b.parts)
            .map(|(&x, &y)| f(self, x, y))
            .collect();
        V { parts, w: a.w }
    }

    pub(super) fn fadd(&mut self, a: &V, b: &V) -> V {
        self.map2(a, b, |s, x, y| s.b.ins().fadd(x, y))
    }
    pub(super) fn fsub(&mut self, a: &V, b: &V) -> V {
        self.map2(a, b, |s, x, y| s.b.ins().fsub(x, y))
    }
    pub(super) fn fmul(&mut self, a: &V, b: &V) -> V {
        self.map2(a, b, |s, x, y| s.b.ins().fmul(x, y))
    }
    pub(super) fn fdiv(&mut self, a: &V, b: &V) -> V {
        self.map2(a, b, |s, x, y| s.b.ins().fdiv(x, y))
    }
    pub(super) fn fneg(&mut self, x: &V) -> V {
        self.map1(x, |s, p| s.b.ins().fneg(p))
    }
    pub(super) fn fabs(&mut self, x: &V) -> V {
        self.map1(x, |s, p| s.b.ins().fabs(p))
    }
    pub(super) fn sqrt(&mut self, x: &V) -> V {
        self.map1(x, |s, p| s.b.ins().sqrt(p))
    }
    pub(super) fn floor(&mut self, x: &V) -> V {
        self.map1(x, |s, p| s.b.ins().floor(p))
    }
    pub(super) fn ceil(&mut self, x: &V) -> V {
        self.map1(x, |s, p| s.b.ins().ceil(p))
    }
    /// `a * b + c` rounded once, lane by lane (the LLVM backend's `llvm.fma`).
    pub(super) fn fma(&mut self, a: &V, b: &V, c: &V) -> V {
        let parts = (0..a.parts.len())
            .map(|k| self.b.ins().fma(a.parts[k], b.parts[k], c.parts[k]))
            .collect();
        V { parts, w: a.w }
    }
    pub(super) fn trunc(&mut self, x: &V) -> V {
        self.map1(x, |s, p| s.b.ins().trunc(p))
    }

    /// The comparison `a cc b` lane by lane (`FloatCC::LessThan` is LLVM's ordered `olt`,
    /// `NotEqual` its unordered `une`, `Unordered` its `uno`).
    pub(super) fn fcmp(&mut self, cc: FloatCC, a: &V, b: &V) -> M {
        let parts = a
            .parts
            .iter()
            .zip(&b.parts)
            .map(|(&x, &y)| self.b.ins().fcmp(cc, x, y))
            .collect();
        M { parts, w: a.w }
    }

    /// `c ? a : b` lane by lane.
    pub(super) fn select(&mut self, c: &M, a: &V, b: &V) -> V {
        let mut parts = Vec::with_capacity(a.parts.len());
        for ((&m, &x), &y) in c.parts.iter().zip(&a.parts).zip(&b.parts) {
            parts.push(if c.w == 1 {
                self.b.ins().select(m, x, y)
            } else {
                let m = self.b.ins().bitcast(types::F64X2, lanes_le(), m);
                self.b.ins().bitselect(m, x, y)
            });
        }
        V { parts, w: a.w }
    }

    fn mask2(&mut self, a: &M, b: &M, f: impl Fn(&mut Self, Value, Value) -> Value) -> M {
        let parts = a
            .parts
            .iter()
            .zip(&b.parts)
            .map(|(&x, &y)| f(self, x, y))
            .collect();
        M { parts, w: a.w }
    }
    pub(super) fn and(&mut self, a: &M, b: &M) -> M {
        self.mask2(a, b, |s, x, y| s.b.ins().band(x, y))
    }
    pub(super) fn or(&mut self, a: &M, b: &M) -> M {
        self.mask2(a, b, |s, x, y| s.b.ins().bor(x, y))
    }
    pub(super) fn xor(&mut self, a: &M, b: &M) -> M {
        self.mask2(a, b, |s, x, y| s.b.ins().bxor(x, y))
    }

    /// 1.0 where `c` holds, else 0.0.
    pub(super) fn b2f(&mut self, c: &M) -> V {
        let (one, zero) = (self.fconst(1.0, c.w), self.fconst(0.0, c.w));
        self.select(c, &one, &zero)
    }

    /// `x + 0.0`: `-0.0` becomes `0.0` (an element-wise value written as a matrix cell).
    pub(super) fn plus_zero(&mut self, x: &V) -> V {
        let z = self.fconst(0.0, x.w);
        self.fadd(x, &z)
    }

    /// The bits of `a` and `b` combined by `f` (`band`/`bor` on the integer view).
    fn bits2(&mut self, a: &V, b: &V, or: bool) -> V {
        self.map2(a, b, |s, x, y| {
            let (ity, fty, fl) = if s_is_vec(s, x) {
                (types::I64X2, types::F64X2, lanes_le())
            } else {
                (types::I64, types::F64, MemFlagsData::new())
            };
            let xi = s.b.ins().bitcast(ity, fl, x);
            let yi = s.b.ins().bitcast(ity, fl, y);
            let r = if or {
                s.b.ins().bor(xi, yi)
            } else {
                s.b.ins().band(xi, yi)
            };
            s.b.ins().bitcast(fty, fl, r)
        })
    }

    /// Java `Math.min`/`Math.max` (NaN propagates; -0.0 < 0.0), as `lafuse_core::ops` and the
    /// LLVM backend's `java_minmax`: where both are zeros, min takes the negative one (the
    /// sign bits or-ed) and max the positive one (and-ed), which is the LLVM backend's choice
    /// of `a` or `b` by `a`'s sign, bit for bit.
    pub(super) fn java_minmax(&mut self, max: bool, a: &V, b: &V) -> V {
        let w = a.w;
        let le = self.fcmp(
            if max {
                FloatCC::GreaterThanOrEqual
            } else {
                FloatCC::LessThanOrEqual
            },
            a,
            b,
        );
        let r = self.select(&le, a, b);
        let zero = self.fconst(0.0, w);
        let az = self.fcmp(FloatCC::Equal, a, &zero);
        let bz = self.fcmp(FloatCC::Equal, b, &zero);
        let both = self.and(&az, &bz);
        let zr = self.bits2(a, b, !max);
        let r = self.select(&both, &zr, &r);
        let bnan = self.fcmp(FloatCC::Unordered, b, b);
        let r = self.select(&bnan, b, &r);
        let anan = self.fcmp(FloatCC::Unordered, a, a);
        self.select(&anan, a, &r)
    }

    /// The runtime's min/max step of an aggregate: NaN wins, else the strictly better value
    /// (the LLVM backend's `pick`).
    pub(super) fn pick(&mut self, max: bool, acc: &V, x: &V) -> V {
        let p = if max {
            FloatCC::GreaterThan
        } else {
            FloatCC::LessThan
        };
        let better = self.fcmp(p, x, acc);
        let nan = self.fcmp(FloatCC::Unordered, x, x);
        let c = self.or(&better, &nan);
        self.select(&c, x, acc)
    }

    /// One Kahan step `s += x` with correction `c`, lane-wise; a non-finite correction resets
    /// to 0 as in the runtime's `Kahan::add`. Returns the new `(s, c)`.
    pub(super) fn kahan(&mut self, s: &V, c: &V, x: &V) -> (V, V) {
        let y = self.fsub(x, c);
        let t = self.fadd(s, &y);
        let d = self.fsub(&t, s);
        let cn = self.fsub(&d, &y);
        let a = self.fabs(&cn);
        let inf = self.fconst(f64::INFINITY, x.w);
        let fin = self.fcmp(FloatCC::LessThan, &a, &inf);
        let zero = self.fconst(0.0, x.w);
        let cnew = self.select(&fin, &cn, &zero);
        (t, cnew)
    }

    /// Calls the scalar helper `which` (`f64 -> f64` or `(f64, f64) -> f64`) lane by lane.
    pub(super) fn helper(&mut self, which: Helper, xs: &[&V]) -> V {
        let addr = helpers::address(which);
        let mut sig = Signature::new(self.call_conv);
        for _ in xs {
            sig.params.push(AbiParam::new(types::F64));
        }
        sig.returns.push(AbiParam::new(types::F64));
        let sig = self.b.import_signature(sig);
        let w = xs[0].w;
        let mut lanes = Vec::with_capacity(w as usize);
        for l in 0..w {
            let args: Vec<Value> = xs.iter().map(|x| self.lane(x, l)).collect();
            let callee = self.iconst(addr as i64);
            let call = self.b.ins().call_indirect(sig, callee, &args);
            lanes.push(self.b.inst_results(call)[0]);
        }
        self.of_lanes(&lanes)
    }

    /// Calls the C function at `addr` with `args` (its parameters have their types: pointers
    /// and integers as `I64`, doubles as `F64`), returning nothing.
    pub(super) fn call_void(&mut self, addr: usize, args: &[Value]) {
        self.call_c(addr, args, None);
    }

    /// Calls the C function at `addr` with `args`, returning a double.
    pub(super) fn call_f64(&mut self, addr: usize, args: &[Value]) -> Value {
        self.call_c(addr, args, Some(types::F64))[0]
    }

    fn call_c(&mut self, addr: usize, args: &[Value], ret: Option<Type>) -> Vec<Value> {
        let mut sig = Signature::new(self.call_conv);
        for &a in args {
            let ty = self.b.func.dfg.value_type(a);
            sig.params.push(AbiParam::new(ty));
        }
        sig.returns.extend(ret.map(AbiParam::new));
        let sig = self.b.import_signature(sig);
        let callee = self.iconst(addr as i64);
        let call = self.b.ins().call_indirect(sig, callee, args);
        self.b.inst_results(call).to_vec()
    }

    /// `exp`, `ln` and `tanh` of the core's `math` (the functions the LLVM backend states in IR
    /// operation for operation): a vector's lanes mapped by the runtime's vector math in one
    /// call ([`helpers::LaneMap`]), one lane a call of the scalar function.
    pub(super) fn exp(&mut self, x: &V) -> V {
        if x.w == 1 {
            return self.helper(Helper::Exp, &[x]);
        }
        self.lane_map(LaneMap::Exp, x)
    }
    pub(super) fn ln(&mut self, x: &V) -> V {
        if x.w == 1 {
            return self.helper(Helper::Ln, &[x]);
        }
        self.lane_map(LaneMap::Ln, x)
    }
    pub(super) fn tanh(&mut self, x: &V) -> V {
        if x.w == 1 {
            return self.helper(Helper::Tanh, &[x]);
        }
        self.lane_map(LaneMap::Tanh, x)
    }

    /// `which` over the lanes of `x`: its parts stored to a stack slot, mapped in place by one
    /// call, loaded back.
    fn lane_map(&mut self, which: LaneMap, x: &V) -> V {
        let bytes = 16 * x.parts.len() as u32;
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            bytes,
            4,
        ));
        let addr = self.b.ins().stack_addr(types::I64, slot, 0);
        for (k, &p) in x.parts.iter().enumerate() {
            self.b.ins().store(mem(), p, addr, (16 * k) as i32);
        }
        let count = self.iconst(i64::from(x.w));
        self.call_void(helpers::lane_map_address(which), &[addr, count]);
        let ty = part_ty(x.w);
        let parts = (0..x.parts.len())
            .map(|k| self.b.ins().load(ty, mem(), addr, (16 * k) as i32))
            .collect();
        V { parts, w: x.w }
    }

    /// `w` doubles at `base[idx..idx + w]`.
    pub(super) fn load(&mut self, base: Value, idx: Value, w: u32) -> V {
        let addr = self.elem_addr(base, idx);
        let ty = part_ty(w);
        let parts = (0..parts_of(w))
            .map(|k| self.b.ins().load(ty, mem(), addr, (k * 16) as i32))
            .collect();
        V { parts, w }
    }

    /// Stores `x` at `base[idx..idx + w]`.
    pub(super) fn store(&mut self, base: Value, idx: Value, x: &V) {
        let addr = self.elem_addr(base, idx);
        for (k, &p) in x.parts.iter().enumerate() {
            self.b.ins().store(mem(), p, addr, (k * 16) as i32);
        }
    }

    /// `base[idx]` broadcast to `w` lanes.
    pub(super) fn load_splat(&mut self, base: Value, idx: Value, w: u32) -> V {
        let addr = self.elem_addr(base, idx);
        let s = self.b.ins().load(types::F64, mem(), addr, 0);
        self.splat(s, w)
    }

    /// `w` doubles at `base[idx + l * stride]` (a strided gather, lane by lane).
    pub(super) fn gather(&mut self, base: Value, idx: Value, stride: Value, w: u32) -> V {
        let mut lanes = Vec::with_capacity(w as usize);
        for l in 0..w {
            let lc = self.iconst(i64::from(l));
            let off = self.imul(stride, lc);
            let at = self.iadd(idx, off);
            let addr = self.elem_addr(base, at);
            lanes.push(self.b.ins().load(types::F64, mem(), addr, 0));
        }
        self.of_lanes(&lanes)
    }

    /// The address of element `idx` of the doubles (or 64-bit integers) at `base`.
    pub(super) fn elem_addr(&mut self, base: Value, idx: Value) -> Value {
        let off = self.b.ins().ishl_imm_u(idx, 3);
        self.iadd(base, off)
    }

    /// The 64-bit value at byte offset `off` of `base`.
    pub(super) fn load_i64(&mut self, base: Value, off: usize) -> Result<Value, CodegenError> {
        let off = i32::try_from(off).map_err(|_| {
            CodegenError::Internal(Internal::IrBuilding {
                detail: format!("field offset {off}"),
            })
        })?;
        Ok(self.b.ins().load(types::I64, mem(), base, off))
    }

    /// The `data` pointer, `cols` (the row stride) and `row0` of the `DenseView` at
    /// `base + off`.
    pub(super) fn dense_view(
        &mut self,
        base: Value,
        off: usize,
    ) -> Result<(Value, Value, Value), CodegenError> {
        use lafuse_skeletons::abi::DenseView;
        use std::mem::offset_of;
        Ok((
            self.load_i64(base, off + offset_of!(DenseView, data))?,
            self.load_i64(base, off + offset_of!(DenseView, cols))?,
            self.load_i64(base, off + offset_of!(DenseView, row0))?,
        ))
    }

    /// Adds 1 per lane where `c` holds to the counter `cnt` (one `I64` for one lane, an
    /// `I64X2` per part otherwise).
    /// Adds the true lanes of `c` to the counters `cnt`, its parts taken in turn (a mask wider
    /// than the counters folds onto them: a count has no order).
    pub(super) fn count(&mut self, cnt: &[Variable], c: &M) {
        for (&v, &m) in cnt.iter().cycle().zip(&c.parts) {
            let cur = self.b.use_var(v);
            let next = if c.w == 1 {
                let one = self.b.ins().uextend(types::I64, m);
                self.b.ins().iadd(cur, one)
            } else {
                // A true lane is all ones, -1.
                self.b.ins().isub(cur, m)
            };
            self.b.def_var(v, next);
        }
    }

    /// `for (; var + step <= hi; var += step) body(var)` (unsigned); `var` keeps the next
    /// index after the loop.
    pub(super) fn for_var(
        &mut self,
        var: Variable,
        hi: Value,
        step: i64,
        body: &mut dyn FnMut(&mut Self, Value) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        let head = self.b.create_block();
        let bodyb = self.b.create_block();
        let exit = self.b.create_block();
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(head);
        let i = self.b.use_var(var);
        let next = self.b.ins().iadd_imm_s(i, step);
        let c = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, next, hi);
        self.b.ins().brif(c, bodyb, &[], exit, &[]);
        self.b.switch_to_block(bodyb);
        body(self, i)?;
        self.b.def_var(var, next);
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(exit);
        Ok(())
    }

    /// `if c { then() }` (`c` an integer, true where non-zero).
    pub(super) fn if_then(
        &mut self,
        c: Value,
        then: &mut dyn FnMut(&mut Self) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        let tb = self.b.create_block();
        let cont = self.b.create_block();
        self.b.ins().brif(c, tb, &[], cont, &[]);
        self.b.switch_to_block(tb);
        then(self)?;
        self.b.ins().jump(cont, &[]);
        self.b.switch_to_block(cont);
        Ok(())
    }

    /// `if c { then() } else { els() }` (`c` an integer, true where non-zero).
    pub(super) fn if_else(
        &mut self,
        c: Value,
        then: &mut dyn FnMut(&mut Self) -> Result<(), CodegenError>,
        els: &mut dyn FnMut(&mut Self) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        let tb = self.b.create_block();
        let eb = self.b.create_block();
        let cont = self.b.create_block();
        self.b.ins().brif(c, tb, &[], eb, &[]);
        self.b.switch_to_block(tb);
        then(self)?;
        self.b.ins().jump(cont, &[]);
        self.b.switch_to_block(eb);
        els(self)?;
        self.b.ins().jump(cont, &[]);
        self.b.switch_to_block(cont);
        Ok(())
    }

    /// `for i in lo..hi { body(i) }` with a fresh variable.
    pub(super) fn for_range(
        &mut self,
        lo: Value,
        hi: Value,
        body: &mut dyn FnMut(&mut Self, Value) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        let iv = self.var(types::I64, lo);
        self.for_var(iv, hi, 1, body)
    }
}

/// Whether `x` is a vector value.
fn s_is_vec(s: &Fx<'_>, x: Value) -> bool {
    s.b.func.dfg.value_type(x).is_vector()
}
