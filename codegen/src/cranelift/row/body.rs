//! One row of a Row plan in Cranelift IR: every reachable node in order (a scalar, a vector
//! in a buffer, an inlined element-wise loop, or a compact vector at a sparse row's
//! non-zeros), then the output statement, as `native::row::body` emits them.

use super::prims::{self, one};
use crate::backend::{CodegenError, Internal, Unsupported};
use crate::cranelift::body::{binary, unary, InputPtrs};
use crate::cranelift::cell::W;
use crate::cranelift::fx::{mem, Fx, V};
use crate::cranelift::outer::dot_products;
use crate::plan_info::{node_calls_helper, node_name};
use crate::row_plan::{
    pidx, read_by, Class, RowInfo, AUX, HOIST, LEN, OFF, P_FLIP, P_OUTC, ROW_BLOCK,
};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, InstBuilder, StackSlotData, StackSlotKind, Value};
use cranelift_frontend::Variable;
use lafuse_compiler::fusion::cplan::{Access, CNode, CNodeId};
use lafuse_compiler::hops::{AggOp, BinaryOp, NaryOp, TernaryOp};
use lafuse_compiler::stack::with_stack;
use lafuse_skeletons::row::{RowInput, RowKind};

type R<T> = Result<T, CodegenError>;

/// A plan the analysis should have refused (an internal error, not the user's).
pub(super) fn ierr(what: &'static str) -> CodegenError {
    CodegenError::Internal(Internal::MalformedPlan(what))
}

/// The non-zeros of the current CSR row (or of a compact vector beside them).
#[derive(Clone, Copy)]
pub(super) struct Sp {
    pub(super) vals: Value,
    pub(super) idx: Value,
    pub(super) nnz: Value,
}

/// A node's value in the current row.
#[derive(Clone)]
pub(super) enum RV {
    /// A scalar (one lane).
    S(V),
    /// A vector at `p` of `len` values; the CSR main row also carries its non-zeros (`p` is
    /// then the scattered row, valid only when the plan needs it).
    V {
        p: Value,
        len: Value,
        sp: Option<Sp>,
    },
    /// A whole matrix, transposed (k×l, row-major).
    Whole(Value),
    /// Consumed by the template (outer-product accumulation).
    Done,
    /// An inlined element-wise node, computed element by element inside its reader's loop.
    Inlined(CNodeId),
}

/// What every row of an entry point reads and writes.
pub(super) struct Em<'a> {
    pub(super) info: &'a RowInfo,
    pub(super) ins: InputPtrs,
    /// The layout parameters (`usize`s), loaded where used.
    pub(super) params: Value,
    pub(super) scratch: Value,
    pub(super) out: Value,
    pub(super) n: Value,
    /// FullAgg Kahan accumulator (sum, correction).
    pub(super) kahan: Option<[Variable; 2]>,
    pub(super) nnz: Variable,
    /// The dense entry of a [`RowInfo::defer_outer`] plan: rows whose outer-product update
    /// is pending.
    pub(super) pending: Option<Pending>,
}

/// The outer-product updates of up to [`ROW_BLOCK`] rows of a dense main input, kept until
/// one call of the block primitive adds them to the partial in row order (as the LLVM
/// backend's dense entry does; the same function computes them).
#[derive(Clone, Copy)]
pub(super) struct Pending {
    /// How many rows are pending.
    pub(super) count: Variable,
    /// The first pending row; the rest follow it.
    pub(super) first: Variable,
    /// Each pending row's `b`, `len(b)` values a row, in the scratch buffer.
    pub(super) bs: Value,
    /// The main input: its data, first row and row stride.
    pub(super) data: Value,
    pub(super) row0: Value,
    pub(super) stride: Value,
}

impl Em<'_> {
    /// Layout parameter `k`.
    pub(super) fn par(&self, fx: &mut Fx<'_>, k: usize) -> Value {
        fx.b.ins()
            .load(types::I64, mem(), self.params, (k * 8) as i32)
    }

    /// A value as a vector: its pointer, length and non-zeros (a scalar through a one-value
    /// stack slot).
    pub(super) fn as_vec(&self, fx: &mut Fx<'_>, v: &RV) -> R<(Value, Value, Option<Sp>)> {
        match v {
            RV::V { p, len, sp } => Ok((*p, *len, *sp)),
            RV::S(s) => {
                let slot = fx.b.create_sized_stack_slot(StackSlotData::new(
                    StackSlotKind::ExplicitSlot,
                    8,
                    3,
                ));
                let p = fx.b.ins().stack_addr(types::I64, slot, 0);
                fx.b.ins().store(mem(), s.parts[0], p, 0);
                Ok((p, fx.iconst(1), None))
            }
            _ => Err(ierr("a matrix used as a row value")),
        }
    }

    /// The products of the main row that [`RowInfo::hoisted`] marks, for the `rows` rows from
    /// `x` (`stride` apart), by the block primitive: into each node's block buffer, a row's
    /// values at `q * len` for its index `q` in the block.
    pub(super) fn hoist(&self, fx: &mut Fx<'_>, x: Value, stride: Value, rows: Value) -> R<()> {
        for (k, input) in self.info.hoisted_products()? {
            let bt = self.ins.get(input)?.0;
            let off = self.par(fx, pidx(k, HOIST));
            let o = fx.elem_addr(self.scratch, off);
            let l = self.par(fx, pidx(k, AUX));
            let cols = self.par(fx, pidx(k, LEN));
            let dot_rows = lafuse_skeletons::row_blocks::lafuse_row_dot_rows as *const () as usize;
            fx.call_void(dot_rows, &[x, stride, bt, l, cols, rows, o]);
        }
        Ok(())
    }

    /// The body of row `i` (`main`: its main-input row): every reachable node in order, then
    /// the output statement. `q`: the row's index in its block when the [`Em::hoist`]ed
    /// products are computed.
    pub(super) fn row(&self, fx: &mut Fx<'_>, i: Value, main: RV, q: Option<Value>) -> R<()> {
        let info = self.info;
        let plan = &info.plan;
        let out_node = plan.outputs[0];
        let outc = self.par(fx, P_OUTC);
        let orow_off = fx.imul(i, outc);
        let orow = fx.elem_addr(self.out, orow_off);
        let main_sp = match &main {
            RV::V { sp, .. } => *sp,
            _ => None,
        };
        let mut vals: Vec<RV> = vec![RV::Done; plan.nodes.len()];
        for (k, node) in plan.nodes.iter().enumerate() {
            if !info.reach[k] {
                continue;
            }
            if info.inlined[k] {
                vals[k] = RV::Inlined(k);
                continue;
            }
            let vector = matches!(info.classes[k], Class::Vector);
            let (len, buf) = if vector && !matches!(node, CNode::Data { .. }) {
                let len = self.par(fx, pidx(k, LEN));
                let buf = if info.direct && k == out_node {
                    orow
                } else {
                    let off = self.par(fx, pidx(k, OFF));
                    fx.elem_addr(self.scratch, off)
                };
                (len, buf)
            } else {
                let z = fx.iconst(0);
                (z, z)
            };
            vals[k] = match node {
                CNode::Data { input, access } => self.data(fx, k, *input, *access, i, &main)?,
                CNode::Literal { value } => RV::S(fx.fconst(value.as_f64().unwrap_or(f64::NAN), 1)),
                n if info.sparse[k] && main_sp.is_some() => {
                    let ops: Vec<RV> = n.operands().iter().map(|&o| vals[o].clone()).collect();
                    let sp = main_sp.ok_or_else(|| ierr("sparse main row"))?;
                    self.sparse_elementwise(fx, k, &ops, buf, len, sp)?
                }
                n if n.is_elementwise() => self.elementwise(fx, k, &vals, buf, len)?,
                CNode::Nary { xs, .. } => {
                    let mut off = fx.iconst(0);
                    for &x in xs {
                        match &vals[x] {
                            RV::S(s) => {
                                fx.store(buf, off, s);
                                off = fx.b.ins().iadd_imm_s(off, 1);
                            }
                            RV::V { p, len: l, .. } => {
                                let dst = fx.elem_addr(buf, off);
                                prims::copy(fx, dst, *p, *l, false)?;
                                off = fx.iadd(off, *l);
                            }
                            _ => return Err(ierr("cbind operand")),
                        }
                    }
                    RV::V {
                        p: buf,
                        len,
                        sp: None,
                    }
                }
                CNode::RowAgg { f, x } => RV::S(self.row_agg(fx, *f, false, &vals[*x])?),
                CNode::RowSumSq { x } => RV::S(self.row_agg(fx, AggOp::Sum, true, &vals[*x])?),
                CNode::VectMatMult { .. } if info.hoisted[k] && q.is_some() => {
                    let q = q.ok_or_else(|| ierr("block row"))?;
                    let hoist = self.par(fx, pidx(k, HOIST));
                    let at = fx.imul(q, len);
                    let base = fx.iadd(hoist, at);
                    let p = fx.elem_addr(self.scratch, base);
                    if info.direct && k == out_node {
                        // The output row is where the statement expects the values.
                        prims::copy(fx, buf, p, len, false)?;
                    }
                    RV::V { p, len, sp: None }
                }
                CNode::VectMatMult { a, b } => {
                    let RV::Whole(bt) = vals[*b] else {
                        return Err(ierr("row-times-matrix operand"));
                    };
                    let (ap, _, asp) = self.as_vec(fx, &vals[*a])?;
                    let l = self.par(fx, pidx(k, AUX));
                    self.vect_mat(fx, ap, asp, bt, l, buf, len)?;
                    RV::V {
                        p: buf,
                        len,
                        sp: None,
                    }
                }
                CNode::OuterMultAdd { a, b } => {
                    match self.pending {
                        Some(pd) if k == out_node => {
                            self.defer_outer_add(fx, pd, k, i, &vals[*b])?
                        }
                        _ => self.outer_add(fx, k, &vals[*a], &vals[*b])?,
                    }
                    RV::Done
                }
                other => {
                    return Err(CodegenError::Unsupported(Unsupported::NodeInRowPlan {
                        node: node_name(other),
                    }))
                }
            };
        }
        self.output(fx, &vals[out_node], orow, outc)
    }

    /// The outer-product update `t(X[i, ]) %*% b` of row `i`: `b` is kept, and every
    /// [`ROW_BLOCK`] rows [`Em::flush_outer`] adds the kept updates to the partial.
    fn defer_outer_add(&self, fx: &mut Fx<'_>, pd: Pending, k: CNodeId, i: Value, b: &RV) -> R<()> {
        let (bp, lb, _) = self.as_vec(fx, b)?;
        let cnt = fx.b.use_var(pd.count);
        let none = fx.b.ins().icmp_imm_u(IntCC::Equal, cnt, 0);
        let first = fx.b.use_var(pd.first);
        let first = fx.b.ins().select(none, i, first);
        fx.b.def_var(pd.first, first);
        let at = fx.imul(cnt, lb);
        let dst = fx.elem_addr(pd.bs, at);
        prims::copy(fx, dst, bp, lb, false)?;
        let cnt = fx.b.ins().iadd_imm_s(cnt, 1);
        fx.b.def_var(pd.count, cnt);
        let full = fx.b.ins().icmp_imm_u(IntCC::Equal, cnt, ROW_BLOCK as i64);
        fx.if_then(full, &mut |fx| self.flush_outer(fx, pd, k))
    }

    /// Adds the pending rows' outer-product updates to the partial, rows in order, by the
    /// block primitive.
    pub(super) fn flush_outer(&self, fx: &mut Fx<'_>, pd: Pending, k: CNodeId) -> R<()> {
        let cnt = fx.b.use_var(pd.count);
        let (la, lb) = (self.n, self.par(fx, pidx(k, AUX)));
        let first = fx.b.use_var(pd.first);
        let r = fx.isub(first, pd.row0);
        let at = fx.imul(r, pd.stride);
        let x = fx.elem_addr(pd.data, at);
        let flip_p = self.par(fx, P_FLIP);
        let flip = fx.b.ins().icmp_imm_u(IntCC::NotEqual, flip_p, 0);
        let mut sel = |a: Value, b: Value| fx.b.ins().select(flip, a, b);
        // Flipped, P[c, ] += Σ_r b_r[c] * X[r, ]: the rows of X scaled by the kept b's (lb
        // rows of P, la long). Else P[j, ] += Σ_r X[r, j] * b_r: the kept b's scaled by a
        // column of X's rows (la rows of P, lb long).
        let (rows, rows_stride) = (sel(x, pd.bs), sel(pd.stride, lb));
        let (scales, scales_stride) = (sel(pd.bs, x), sel(lb, pd.stride));
        let (cols, len) = (sel(lb, la), sel(la, lb));
        let axpy_rows = lafuse_skeletons::row_blocks::lafuse_row_axpy_rows as *const () as usize;
        fx.call_void(
            axpy_rows,
            &[
                self.out,
                rows,
                rows_stride,
                scales,
                scales_stride,
                cols,
                cnt,
                len,
            ],
        );
        let zero = fx.iconst(0);
        fx.b.def_var(pd.count, zero);
        Ok(())
    }

    /// A data node: the main row, a side input's row or vector, a whole matrix, a scalar.
    fn data(
        &self,
        fx: &mut Fx<'_>,
        k: CNodeId,
        input: usize,
        access: Access,
        i: Value,
        main: &RV,
    ) -> R<RV> {
        let info = self.info;
        Ok(match (info.classes[k], access) {
            (Class::Vector, Access::Main) => main.clone(),
            (Class::Vector, Access::Aligned) => {
                let (p, row) = self.ins.aligned_row(fx, input, i)?;
                RV::V {
                    p: fx.elem_addr(p, row),
                    len: self.par(fx, pidx(k, LEN)),
                    sp: None,
                }
            }
            (Class::Vector, _) => RV::V {
                p: self.ins.get(input)?.0,
                len: self.par(fx, pidx(k, LEN)),
                sp: None,
            },
            (Class::Whole, _) => RV::Whole(self.ins.get(input)?.0),
            (_, Access::ColVector) if info.inputs[input] == RowInput::ColVector => {
                let (p, c) = self.ins.get(input)?;
                let at = fx.imul(i, c);
                RV::S(fx.load(p, at, 1))
            }
            _ => {
                let p = self.ins.get(input)?.0;
                let z = fx.iconst(0);
                RV::S(fx.load(p, z, 1))
            }
        })
    }

    /// `buf[c] = a · B[, c]` for the `len` columns of the transposed `B` at `bt` (rows of
    /// `l`): over a CSR row's non-zeros, else in `dot_products`' order, two columns per pass
    /// over the row. (The dense entry's products of the main row are the block primitive's,
    /// [`Em::hoist`].)
    #[allow(clippy::too_many_arguments)]
    fn vect_mat(
        &self,
        fx: &mut Fx<'_>,
        ap: Value,
        asp: Option<Sp>,
        bt: Value,
        l: Value,
        buf: Value,
        len: Value,
    ) -> R<()> {
        let zero = fx.iconst(0);
        let c0 = fx.var(types::I64, zero);
        let brow = |fx: &mut Fx<'_>, c: Value, t: i64| {
            let ct = fx.b.ins().iadd_imm_s(c, t);
            let at = fx.imul(ct, l);
            fx.elem_addr(bt, at)
        };
        if asp.is_none() {
            fx.for_var(c0, len, 2, &mut |fx, c| {
                let bs = [brow(fx, c, 0), brow(fx, c, 1)];
                let d = dot_products(fx, ap, &bs, l)?;
                for (t, v) in d.into_iter().enumerate() {
                    let at = fx.b.ins().iadd_imm_s(c, t as i64);
                    fx.store(buf, at, &one(v));
                }
                Ok(())
            })?;
        }
        fx.for_var(c0, len, 1, &mut |fx, c| {
            let b = brow(fx, c, 0);
            let d = match asp {
                Some(sp) => prims::sdot(fx, sp.vals, sp.idx, b, sp.nnz)?,
                None => dot_products(fx, ap, &[b], l)?[0],
            };
            fx.store(buf, c, &one(d));
            Ok(())
        })
    }

    /// The output statement of the row type.
    fn output(&self, fx: &mut Fx<'_>, v: &RV, orow: Value, outc: Value) -> R<()> {
        match self.info.kind {
            RowKind::RowWise => {
                match v {
                    _ if self.info.direct => {}
                    RV::S(s) => {
                        let z = fx.iconst(0);
                        fx.store(orow, z, s);
                    }
                    RV::V { p, .. } => prims::copy(fx, orow, *p, outc, false)?,
                    _ => return Err(ierr("row output")),
                }
                let c = prims::count(fx, orow, outc, false)?;
                let cur = fx.b.use_var(self.nnz);
                let next = fx.iadd(cur, c);
                fx.b.def_var(self.nnz, next);
            }
            RowKind::ColSum => match v {
                RV::S(s) => {
                    let z = fx.iconst(0);
                    let cur = fx.load(self.out, z, 1);
                    let r = fx.fadd(&cur, s);
                    fx.store(self.out, z, &r);
                }
                RV::V { p, .. } => prims::copy(fx, self.out, *p, outc, true)?,
                _ => return Err(ierr("column aggregate output")),
            },
            RowKind::Outer => {}
            RowKind::FullAgg => {
                let x = match v {
                    RV::S(s) => s.clone(),
                    RV::V { p, len, .. } => {
                        one(prims::reduce_at(fx, *p, *len, 0.0, false, prims::add)?)
                    }
                    _ => return Err(ierr("full aggregate output")),
                };
                let [s, c] = self.kahan.ok_or_else(|| ierr("kahan"))?;
                let (sv, cv) = (fx.get(&[s], 1), fx.get(&[c], 1));
                let (sn, cn) = fx.kahan(&sv, &cv, &x);
                fx.set(&[s], &sn);
                fx.set(&[c], &cn);
            }
        }
        Ok(())
    }

    /// An element-wise node of [`RowInfo::sparse`] in the CSR entry: its values at the main
    /// row's non-zeros `sp` only, into `buf` compactly (beside the row's column indices).
    fn sparse_elementwise(
        &self,
        fx: &mut Fx<'_>,
        k: CNodeId,
        ops: &[RV],
        buf: Value,
        len: Value,
        sp: Sp,
    ) -> R<RV> {
        let zero = fx.iconst(0);
        fx.for_range(zero, sp.nnz, &mut |fx, p| {
            let j = prims::index(fx, sp.idx, p);
            let xs = ops
                .iter()
                .map(|v| match v {
                    RV::S(s) => Ok(s.clone()),
                    RV::V { sp: Some(o), .. } => Ok(fx.load(o.vals, p, 1)),
                    RV::V { p: dp, len: l, .. } => Ok(load_broadcast(fx, *dp, *l, j)),
                    _ => Err(ierr("operand")),
                })
                .collect::<R<Vec<_>>>()?;
            let v = self.apply(fx, k, &xs)?;
            fx.store(buf, p, &v);
            Ok(())
        })?;
        Ok(RV::V {
            p: buf,
            len,
            sp: Some(Sp {
                vals: buf,
                idx: sp.idx,
                nnz: sp.nnz,
            }),
        })
    }

    /// One element-wise node: a scalar, or a loop over its vector length ([`W`] lanes where
    /// every vector read has that length and no scalar helper is called, then one element at
    /// a time, a length-one vector broadcasting).
    fn elementwise(
        &self,
        fx: &mut Fx<'_>,
        k: CNodeId,
        vals: &[RV],
        buf: Value,
        len: Value,
    ) -> R<RV> {
        let plan = &self.info.plan;
        let node = &plan.nodes[k];
        let ops: Vec<RV> = node.operands().iter().map(|&o| vals[o].clone()).collect();
        if self.info.classes[k] == Class::Scalar {
            let xs = ops
                .iter()
                .map(|v| match v {
                    RV::S(s) => Ok(s.clone()),
                    _ => Err(ierr("scalar operand")),
                })
                .collect::<R<Vec<_>>>()?;
            return Ok(RV::S(self.apply(fx, k, &xs)?));
        }
        let zero = fx.iconst(0);
        let j = fx.var(types::I64, zero);
        if !node_calls_helper(plan, node) {
            let mut all = fx.b.ins().iconst(types::I8, 1);
            for o in read_by(&plan.nodes, &self.info.inlined, node.operands()) {
                if let RV::V { len: l, .. } = vals[o] {
                    let eq = fx.b.ins().icmp(IntCC::Equal, l, len);
                    all = fx.b.ins().band(all, eq);
                }
            }
            fx.if_then(all, &mut |fx| {
                fx.for_var(j, len, i64::from(W), &mut |fx, jv| {
                    let xs = ops
                        .iter()
                        .map(|v| self.element(fx, vals, v, jv, true))
                        .collect::<R<Vec<_>>>()?;
                    let v = self.apply(fx, k, &xs)?;
                    fx.store(buf, jv, &v);
                    Ok(())
                })
            })?;
        }
        fx.for_var(j, len, 1, &mut |fx, jv| {
            let xs = ops
                .iter()
                .map(|v| self.element(fx, vals, v, jv, false))
                .collect::<R<Vec<_>>>()?;
            let v = self.apply(fx, k, &xs)?;
            fx.store(buf, jv, &v);
            Ok(())
        })?;
        Ok(RV::V {
            p: buf,
            len,
            sp: None,
        })
    }

    /// Operand `v` of an element-wise loop at element `j`: [`W`] elements from `j` (`lanes`),
    /// else the one element `j` (index 0 of a length-one vector); an inlined operand computed
    /// here from its own operands.
    fn element(&self, fx: &mut Fx<'_>, vals: &[RV], v: &RV, j: Value, lanes: bool) -> R<V> {
        match v {
            RV::S(s) if lanes => Ok(fx.splat(s.parts[0], W)),
            RV::S(s) => Ok(s.clone()),
            RV::V { p, .. } if lanes => Ok(fx.load(*p, j, W)),
            RV::V { p, len, .. } => Ok(load_broadcast(fx, *p, *len, j)),
            RV::Inlined(k) => with_stack(|| {
                let node = &self.info.plan.nodes[*k];
                let xs = node
                    .operands()
                    .into_iter()
                    .map(|o| self.element(fx, vals, &vals[o], j, lanes))
                    .collect::<R<Vec<_>>>()?;
                self.apply(fx, *k, &xs)
            }),
            RV::Whole(_) | RV::Done => Err(ierr("operand of an element-wise node")),
        }
    }

    /// Element-wise node `k` on lane values of its operands, written as a matrix cell where it
    /// is one.
    fn apply(&self, fx: &mut Fx<'_>, k: CNodeId, xs: &[V]) -> R<V> {
        let plan = &self.info.plan;
        let v = match &plan.nodes[k] {
            CNode::Unary { f, .. } => unary(fx, *f, &xs[0]),
            CNode::Pow2 { .. } => fx.fmul(&xs[0], &xs[0]),
            CNode::Mult2 { .. } => fx.fadd(&xs[0], &xs[0]),
            CNode::Binary { f, b, .. } => {
                let lit2 = matches!(plan.nodes.get(*b), Some(CNode::Literal { value }) if value.as_f64() == Some(2.0));
                if *f == BinaryOp::Pow && lit2 {
                    // java_pow(x, 2) is x * x.
                    fx.fmul(&xs[0], &xs[0])
                } else {
                    binary(fx, *f, &xs[0], &xs[1])
                }
            }
            CNode::Ternary { f, .. } => {
                let (a, b, c) = (&xs[0], &xs[1], &xs[2]);
                match f {
                    TernaryOp::IfElse => {
                        let z = fx.fconst(0.0, a.w);
                        let cond = fx.fcmp(FloatCC::NotEqual, a, &z);
                        fx.select(&cond, b, c)
                    }
                    TernaryOp::Replace => {
                        let eq = fx.fcmp(FloatCC::Equal, a, b);
                        let an = fx.fcmp(FloatCC::Unordered, a, a);
                        let bn = fx.fcmp(FloatCC::Unordered, b, b);
                        let both = fx.and(&an, &bn);
                        let m = fx.or(&eq, &both);
                        fx.select(&m, c, a)
                    }
                }
            }
            CNode::Nary { f, .. } => {
                let max = *f == NaryOp::Max;
                let mut acc = xs[0].clone();
                for x in &xs[1..] {
                    acc = fx.java_minmax(max, &acc, x);
                }
                acc
            }
            other => {
                return Err(CodegenError::Unsupported(Unsupported::NotElementWise {
                    node: node_name(other),
                }))
            }
        };
        Ok(if self.info.matrix_cells[k] {
            fx.plus_zero(&v)
        } else {
            v
        })
    }
}

/// Element `j` of the vector at `p` of length `len`, one lane; a length-one vector broadcasts
/// its only element.
fn load_broadcast(fx: &mut Fx<'_>, p: Value, len: Value, j: Value) -> V {
    let is1 = fx.b.ins().icmp_imm_u(IntCC::Equal, len, 1);
    let z = fx.iconst(0);
    let idx = fx.b.ins().select(is1, z, j);
    fx.load(p, idx, 1)
}
