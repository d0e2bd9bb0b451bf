//! Emission of a Row plan's body per row: each node a scalar or a vector (a buffer, an
//! inlined loop, or a compact vector at a sparse row's non-zeros).

use super::*;

// ---- entry points --------------------------------------------------------------------------

/// The non-zeros of the current CSR row.
#[derive(Clone, Copy)]
pub(super) struct Sp<'c> {
    pub(super) vals: PointerValue<'c>,
    pub(super) idx: PointerValue<'c>,
    pub(super) nnz: IntValue<'c>,
}

impl<'c> Sp<'c> {
    /// Writes the row's values at their columns of the zeroed dense row `dst`, or, with
    /// `clear`, zeros there again (the other cells stay 0 throughout).
    pub(super) fn scatter(
        self,
        fx: &mut Fx<'_, 'c>,
        dst: PointerValue<'c>,
        clear: bool,
    ) -> Result<(), CodegenError> {
        fx.for_range(fx.i64c(0), self.nnz, &mut |fx, p| {
            let j = fx.load_index(self.idx, p)?;
            let v = if clear {
                fx.splat_const(0.0, 1)
            } else {
                load_vec(&fx.b, fx.vty(1), self.vals, p)?
            };
            store_vec(&fx.b, dst, j, v)
        })
    }
}

/// A node's value in the current row.
#[derive(Clone, Copy)]
pub(super) enum RV<'c> {
    /// A scalar (`<1 x double>`).
    S(VectorValue<'c>),
    /// A vector at `p` of `len` values; the CSR main row also carries its non-zeros (`p` is
    /// then the scattered row, valid only when the plan needs it).
    V {
        p: PointerValue<'c>,
        len: IntValue<'c>,
        sp: Option<Sp<'c>>,
    },
    /// A whole matrix, transposed (k×l, row-major).
    Whole(PointerValue<'c>),
    /// Consumed by the template (outer-product accumulation).
    Done,
    /// An inlined element-wise node ([`RowInfo::inlined`]): computed element by element
    /// inside its reader's loop.
    Inlined(CNodeId),
}

pub(super) struct Em<'a, 'c> {
    pub(super) info: &'a RowInfo,
    pub(super) prims: &'a Prims<'c>,
    pub(super) ins: InputPtrs<'c>,
    pub(super) params: Vec<IntValue<'c>>,
    pub(super) scratch: PointerValue<'c>,
    pub(super) out: PointerValue<'c>,
    pub(super) n: IntValue<'c>,
    /// FullAgg Kahan accumulator (sum, correction).
    pub(super) kahan: Option<[PointerValue<'c>; 2]>,
    pub(super) nnz: PointerValue<'c>,
    /// The dense entry of a [`RowInfo::defer_outer`] plan: rows whose outer-product update
    /// is pending.
    pub(super) pending: Option<Pending<'c>>,
}

/// Outer-product updates not yet added to the partial (see [`ROW_BLOCK`]).
#[derive(Clone, Copy)]
pub(super) struct Pending<'c> {
    /// How many rows are pending (i64 slot).
    pub(super) count: PointerValue<'c>,
    /// The first pending row (i64 slot); the rest follow it.
    pub(super) first: PointerValue<'c>,
    /// Each pending row's `b`, `len(b)` values a row, in the scratch buffer.
    pub(super) bs: PointerValue<'c>,
    /// The dense main input: values, first row held, row stride.
    pub(super) data: PointerValue<'c>,
    pub(super) row0: IntValue<'c>,
    pub(super) stride: IntValue<'c>,
}

pub(super) fn call<'c>(
    fx: &Fx<'_, 'c>,
    f: FunctionValue<'c>,
    args: &[BasicMetadataValueEnum<'c>],
) -> Result<Option<inkwell::values::BasicValueEnum<'c>>, CodegenError> {
    let r = fx.b.build_call(f, args, "c").map_err(ierr)?;
    Ok(match r.try_as_basic_value() {
        inkwell::values::ValueKind::Basic(v) => Some(v),
        _ => None,
    })
}

pub(super) fn call_f<'c>(
    fx: &Fx<'_, 'c>,
    f: FunctionValue<'c>,
    args: &[BasicMetadataValueEnum<'c>],
) -> Result<VectorValue<'c>, CodegenError> {
    let v = call(fx, f, args)?.ok_or_else(|| ierr("primitive returns nothing"))?;
    fx.splat(v.into_float_value(), 1)
}

pub(super) fn call_i<'c>(
    fx: &Fx<'_, 'c>,
    f: FunctionValue<'c>,
    args: &[BasicMetadataValueEnum<'c>],
) -> Result<IntValue<'c>, CodegenError> {
    Ok(call(fx, f, args)?
        .ok_or_else(|| ierr("primitive returns nothing"))?
        .into_int_value())
}

pub(super) fn scalar0<'c>(
    fx: &Fx<'_, 'c>,
    v: VectorValue<'c>,
) -> Result<FloatValue<'c>, CodegenError> {
    Ok(fx
        .b
        .build_extract_element(v, fx.i64c(0), "s")
        .map_err(ierr)?
        .into_float_value())
}

pub(super) fn to_f64<'c>(
    fx: &Fx<'_, 'c>,
    i: IntValue<'c>,
) -> Result<VectorValue<'c>, CodegenError> {
    let f =
        fx.b.build_unsigned_int_to_float(i, fx.ctx.f64_type(), "f")
            .map_err(ierr)?;
    fx.splat(f, 1)
}

impl<'a, 'c> Em<'a, 'c> {
    pub(super) fn par(&self, i: usize) -> IntValue<'c> {
        self.params[i]
    }

    /// A value as a vector (a scalar goes through a one-value stack slot).
    pub(super) fn as_vec(
        &self,
        fx: &Fx<'_, 'c>,
        v: RV<'c>,
    ) -> Result<(PointerValue<'c>, IntValue<'c>, Option<Sp<'c>>), CodegenError> {
        match v {
            RV::V { p, len, sp } => Ok((p, len, sp)),
            RV::S(s) => {
                let slot = fx.slot(fx.ctx.f64_type().into())?;
                fx.store(slot, scalar0(fx, s)?)?;
                Ok((slot, fx.i64c(1), None))
            }
            _ => Err(ierr("a matrix used as a row value")),
        }
    }

    /// The products of the main row that [`RowInfo::hoisted`] marks, for the `rows` rows from
    /// `i` (at `x`, `stride` apart): into each node's block buffer, a row's values at
    /// `q * len` for its index `q` in the block.
    pub(super) fn hoist(
        &self,
        fx: &mut Fx<'_, 'c>,
        x: PointerValue<'c>,
        stride: IntValue<'c>,
        rows: IntValue<'c>,
    ) -> Result<(), CodegenError> {
        for (k, input) in self.info.hoisted_products()? {
            let bt = self.ins.get(input)?.0;
            let o = gep(&fx.b, self.scratch, self.par(pidx(k, HOIST)))?;
            let (l, cols) = (self.par(pidx(k, AUX)), self.par(pidx(k, LEN)));
            call(
                fx,
                self.prims
                    .dot_rows
                    .ok_or_else(|| ierr("dot_rows not emitted"))?,
                &[
                    x.into(),
                    stride.into(),
                    bt.into(),
                    l.into(),
                    cols.into(),
                    rows.into(),
                    o.into(),
                ],
            )?;
        }
        Ok(())
    }

    /// The body of one row: every reachable node in order, then the output statement. `q`:
    /// the row's index in its block when the [`Em::hoist`]ed products are computed.
    pub(super) fn row(
        &self,
        fx: &mut Fx<'_, 'c>,
        i: IntValue<'c>,
        main: RV<'c>,
        q: Option<IntValue<'c>>,
    ) -> Result<(), CodegenError> {
        let info = self.info;
        let plan = &info.plan;
        let out_node = plan.outputs[0];
        let outc = self.par(P_OUTC);
        let orow = gep(&fx.b, self.out, fx.mul(i, outc)?)?;
        let mut vals: Vec<RV<'c>> = vec![RV::Done; plan.nodes.len()];
        let main_sp = match main {
            RV::V { sp, .. } => sp,
            _ => None,
        };
        for (k, node) in plan.nodes.iter().enumerate() {
            if !info.reach[k] {
                continue;
            }
            if info.inlined[k] {
                vals[k] = RV::Inlined(k);
                continue;
            }
            let len = self.par(pidx(k, LEN));
            let buf = if info.direct && k == out_node {
                orow
            } else {
                gep(&fx.b, self.scratch, self.par(pidx(k, OFF)))?
            };
            vals[k] = match node {
                CNode::Data { input, access } => match (info.classes[k], access) {
                    (Class::Vector, Access::Main) => main,
                    (Class::Vector, Access::Aligned) => {
                        let (p, row) = self.ins.aligned_row(fx, *input, i)?;
                        RV::V {
                            p: gep(&fx.b, p, row)?,
                            len,
                            sp: None,
                        }
                    }
                    (Class::Vector, _) => RV::V {
                        p: self.ins.get(*input)?.0,
                        len,
                        sp: None,
                    },
                    (Class::Whole, _) => RV::Whole(self.ins.get(*input)?.0),
                    (_, Access::ColVector) if info.inputs[*input] == RowInput::ColVector => {
                        let (p, c) = self.ins.get(*input)?;
                        RV::S(fx.load_splat(p, fx.mul(i, c)?, 1)?)
                    }
                    _ => RV::S(fx.load_splat(self.ins.get(*input)?.0, fx.i64c(0), 1)?),
                },
                CNode::Literal { value } => {
                    RV::S(fx.splat_const(value.as_f64().unwrap_or(f64::NAN), 1))
                }
                n if info.sparse[k] && main_sp.is_some() => {
                    let ops: Vec<RV<'c>> = n.operands().iter().map(|&o| vals[o]).collect();
                    let sp = main_sp.ok_or_else(|| ierr("sparse main row"))?;
                    self.sparse_elementwise(fx, k, &ops, buf, len, sp)?
                }
                n if n.is_elementwise() => {
                    self.elementwise(fx, k, &vals, info.classes[k], buf, len)?
                }
                CNode::Nary { xs, .. } => {
                    let mut off = fx.i64c(0);
                    for &x in xs {
                        match vals[x] {
                            RV::S(s) => {
                                store_vec(&fx.b, buf, off, s)?;
                                off = fx.add(off, fx.i64c(1))?;
                            }
                            RV::V { p, len: l, .. } => {
                                let dst = gep(&fx.b, buf, off)?;
                                call(fx, self.prims.copy, &[dst.into(), p.into(), l.into()])?;
                                off = fx.add(off, l)?;
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
                CNode::RowAgg { f, x } => RV::S(self.row_agg(fx, *f, false, vals[*x])?),
                CNode::RowSumSq { x } => RV::S(self.row_agg(fx, AggOp::Sum, true, vals[*x])?),
                CNode::VectMatMult { .. } if info.hoisted[k] && q.is_some() => {
                    let q = q.ok_or_else(|| ierr("block row"))?;
                    let base = fx.add(self.par(pidx(k, HOIST)), fx.mul(q, len)?)?;
                    let p = gep(&fx.b, self.scratch, base)?;
                    if info.direct && k == out_node {
                        // The output row is where the statement expects the values.
                        call(fx, self.prims.copy, &[buf.into(), p.into(), len.into()])?;
                    }
                    RV::V { p, len, sp: None }
                }
                CNode::VectMatMult { a, b } => {
                    let RV::Whole(bt) = vals[*b] else {
                        return Err(ierr("row-times-matrix operand"));
                    };
                    let (ap, _, asp) = self.as_vec(fx, vals[*a])?;
                    let l = self.par(pidx(k, AUX));
                    let prims = self.prims;
                    // Dense rows: two columns of B per pass over the row (pairs, then the
                    // last odd column alone); each result is computed as the single dot
                    // computes it, so the pairing does not change any value.
                    let c0 = fx.slot(fx.ctx.i64_type().into())?;
                    fx.store(c0, fx.i64c(0))?;
                    if asp.is_none() {
                        fx.for_slot(c0, len, 2, &mut |fx, c| {
                            let b0 = gep(&fx.b, bt, fx.mul(c, l)?)?;
                            let b1 = gep(&fx.b, bt, fx.mul(fx.add(c, fx.i64c(1))?, l)?)?;
                            let o = gep(&fx.b, buf, c)?;
                            call(
                                fx,
                                prims.dot2,
                                &[ap.into(), b0.into(), b1.into(), l.into(), o.into()],
                            )?;
                            Ok(())
                        })?;
                    }
                    fx.for_slot(c0, len, 1, &mut |fx, c| {
                        let brow = gep(&fx.b, bt, fx.mul(c, l)?)?;
                        let d = match asp {
                            Some(sp) => call_f(
                                fx,
                                prims.sdot,
                                &[sp.vals.into(), sp.idx.into(), brow.into(), sp.nnz.into()],
                            )?,
                            None => call_f(fx, prims.dot, &[ap.into(), brow.into(), l.into()])?,
                        };
                        store_vec(&fx.b, buf, c, d)
                    })?;
                    RV::V {
                        p: buf,
                        len,
                        sp: None,
                    }
                }
                CNode::OuterMultAdd { a, b } => {
                    match self.pending {
                        Some(pd) if k == out_node => {
                            self.defer_outer_add(fx, pd, k, i, vals[*b])?
                        }
                        _ => self.outer_add(fx, k, vals[*a], vals[*b])?,
                    }
                    RV::Done
                }
                other => {
                    return unsupported(Unsupported::NodeInRowPlan {
                        node: expr::node_name(other),
                    })
                }
            };
        }
        // The output statement.
        let v = vals[out_node];
        match info.kind {
            RowKind::RowWise => {
                match v {
                    _ if info.direct => {}
                    RV::S(s) => store_vec(&fx.b, orow, fx.i64c(0), s)?,
                    RV::V { p, .. } => {
                        call(fx, self.prims.copy, &[orow.into(), p.into(), outc.into()])?;
                    }
                    _ => return Err(ierr("row output")),
                }
                let c = call_i(fx, self.prims.nnz, &[orow.into(), outc.into()])?;
                let cur = fx.load_i64(self.nnz)?;
                fx.store(self.nnz, fx.add(cur, c)?)?;
            }
            RowKind::ColSum => match v {
                RV::S(s) => {
                    let cur = load_vec(&fx.b, fx.vty(1), self.out, fx.i64c(0))?;
                    store_vec(&fx.b, self.out, fx.i64c(0), fx.fadd(cur, s)?)?;
                }
                RV::V { p, .. } => {
                    call(
                        fx,
                        self.prims.vadd,
                        &[self.out.into(), p.into(), outc.into()],
                    )?;
                }
                _ => return Err(ierr("column aggregate output")),
            },
            RowKind::Outer => {}
            RowKind::FullAgg => {
                let x = match v {
                    RV::S(s) => s,
                    RV::V { p, len, .. } => call_f(fx, self.prims.sum, &[p.into(), len.into()])?,
                    _ => return Err(ierr("full aggregate output")),
                };
                let [s, c] = self.kahan.ok_or_else(|| ierr("kahan"))?;
                fx.kahan_add(s, c, x)?;
            }
        }
        Ok(())
    }

    /// An element-wise node of [`RowInfo::sparse`] in the CSR entry: its values at the main
    /// row's non-zeros `sp` only, into `buf` compactly (beside the row's column indices).
    /// Sparse operands give their value at the same position, dense vectors theirs at the
    /// column (a length-one vector its only one), scalars theirs.
    pub(super) fn sparse_elementwise(
        &self,
        fx: &mut Fx<'_, 'c>,
        k: CNodeId,
        ops: &[RV<'c>],
        buf: PointerValue<'c>,
        len: IntValue<'c>,
        sp: Sp<'c>,
    ) -> Result<RV<'c>, CodegenError> {
        fx.for_range(fx.i64c(0), sp.nnz, &mut |fx, p| {
            let j = fx.load_index(sp.idx, p)?;
            let xs = ops
                .iter()
                .map(|v| match v {
                    RV::S(s) => Ok(*s),
                    RV::V { sp: Some(o), .. } => load_vec(&fx.b, fx.vty(1), o.vals, p),
                    RV::V { p: dp, len: l, .. } => fx.load_broadcast(*dp, *l, j),
                    _ => Err(ierr("operand")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            store_vec(&fx.b, buf, p, self.apply(fx, k, &xs)?)
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

    /// One element-wise node: scalar, or a loop over its vector length. `vals`: every node's
    /// value so far (its operands', and those of inlined operands).
    pub(super) fn elementwise(
        &self,
        fx: &mut Fx<'_, 'c>,
        k: CNodeId,
        vals: &[RV<'c>],
        class: Class,
        buf: PointerValue<'c>,
        len: IntValue<'c>,
    ) -> Result<RV<'c>, CodegenError> {
        let plan = &self.info.plan;
        let node = &plan.nodes[k];
        let ops: Vec<RV<'c>> = node.operands().iter().map(|&o| vals[o]).collect();
        if class == Class::Scalar {
            let xs: Vec<VectorValue<'c>> = ops
                .iter()
                .map(|v| match v {
                    RV::S(s) => Ok(*s),
                    _ => Err(ierr("scalar operand")),
                })
                .collect::<Result<_, _>>()?;
            return Ok(RV::S(self.apply(fx, k, &xs)?));
        }
        // Fast path: every vector operand has the node's length; `W` lanes at a time. Not for
        // an operation computed by a scalar helper (one call per lane either way): its vector
        // loop would only add machine code, and so compile time.
        let j = fx.slot(fx.ctx.i64_type().into())?;
        fx.store(j, fx.i64c(0))?;
        if !expr::node_calls_helper(plan, node) {
            let mut all = fx.ctx.bool_type().const_int(1, false);
            // The vectors read, through inlined operands.
            let lens = read_by(&plan.nodes, &self.info.inlined, node.operands())
                .into_iter()
                .filter_map(|o| match vals[o] {
                    RV::V { len, .. } => Some(len),
                    _ => None,
                });
            for l in lens {
                let eq =
                    fx.b.build_int_compare(IntPredicate::EQ, l, len, "eq")
                        .map_err(ierr)?;
                all = fx.b.build_and(all, eq, "all").map_err(ierr)?;
            }
            if_else(
                fx,
                all,
                &mut |fx| {
                    fx.for_slot(j, len, u64::from(W), &mut |fx, j| {
                        let xs = ops
                            .iter()
                            .map(|v| self.element(fx, vals, *v, j, true))
                            .collect::<Result<Vec<_>, _>>()?;
                        store_vec(&fx.b, buf, j, self.apply(fx, k, &xs)?)
                    })
                },
                &mut |_| Ok(()),
            )?;
        }
        // The rest one element at a time: the fast path's tail, or every element when a
        // length-one vector broadcasts (index 0 for such operands). One loop serves both, which
        // keeps the machine code (and its generation time) smaller than a loop for each.
        fx.for_slot(j, len, 1, &mut |fx, j| {
            let xs = ops
                .iter()
                .map(|v| self.element(fx, vals, *v, j, false))
                .collect::<Result<Vec<_>, _>>()?;
            store_vec(&fx.b, buf, j, self.apply(fx, k, &xs)?)
        })?;
        Ok(RV::V {
            p: buf,
            len,
            sp: None,
        })
    }

    /// Element-wise node `k` on lane vectors of its operands, written as a matrix cell where
    /// it is one ([`RowInfo::matrix_cells`]).
    pub(super) fn apply(
        &self,
        fx: &Fx<'_, 'c>,
        k: CNodeId,
        xs: &[VectorValue<'c>],
    ) -> Result<VectorValue<'c>, CodegenError> {
        let plan = &self.info.plan;
        let v = apply(fx, plan, &plan.nodes[k], xs)?;
        if self.info.matrix_cells[k] {
            expr::matrix_cell(fx, v)
        } else {
            Ok(v)
        }
    }

    /// Operand `v` of an element-wise loop at element `j`: `W` elements from `j` on the fast
    /// path (`lanes`, where every vector has the loop's length), else the one element `j`
    /// (index 0 of a length-one vector, which broadcasts). An inlined operand is computed
    /// here from its own operands, the same operations its own loop would have run.
    pub(super) fn element(
        &self,
        fx: &Fx<'_, 'c>,
        vals: &[RV<'c>],
        v: RV<'c>,
        j: IntValue<'c>,
        lanes: bool,
    ) -> Result<VectorValue<'c>, CodegenError> {
        match v {
            RV::S(s) if lanes => fx.splat(scalar0(fx, s)?, W),
            RV::S(s) => Ok(s),
            RV::V { p, .. } if lanes => load_vec(&fx.b, fx.vty(W), p, j),
            RV::V { p, len, .. } => fx.load_broadcast(p, len, j),
            RV::Inlined(k) => with_stack(|| {
                let plan = &self.info.plan;
                let node = &plan.nodes[k];
                let xs = node
                    .operands()
                    .into_iter()
                    .map(|o| self.element(fx, vals, vals[o], j, lanes))
                    .collect::<Result<Vec<_>, _>>()?;
                self.apply(fx, k, &xs)
            }),
            RV::Whole(_) | RV::Done => Err(ierr("operand of an element-wise node")),
        }
    }

    /// A row aggregate of a value (reference: the runtime's aggregate of the row vector);
    /// `sq`: the sum of squares.
    pub(super) fn row_agg(
        &self,
        fx: &mut Fx<'_, 'c>,
        f: AggOp,
        sq: bool,
        x: RV<'c>,
    ) -> Result<VectorValue<'c>, CodegenError> {
        let pr = self.prims;
        let (p, len, sp) = match x {
            RV::S(s) => {
                return Ok(match f {
                    _ if sq => fx.fmul(s, s)?,
                    AggOp::Var => fx.splat_const(0.0, 1),
                    _ => s,
                })
            }
            RV::V { p, len, sp } => (p, len, sp.filter(|_| sparse_agg(f))),
            _ => return Err(ierr("row aggregate operand")),
        };
        // Sparse rows: reduce the non-zeros (contiguous values), then account for the zeros.
        let (rp, rlen) = match sp {
            Some(s) => (s.vals, s.nnz),
            None => (p, len),
        };
        let args: [BasicMetadataValueEnum<'c>; 2] = [rp.into(), rlen.into()];
        Ok(match f {
            AggOp::Sum if sq => call_f(fx, pr.sumsq, &args)?,
            AggOp::Sum => call_f(fx, pr.sum, &args)?,
            AggOp::Mean => fx.fdiv(call_f(fx, pr.sum, &args)?, to_f64(fx, len)?)?,
            AggOp::Min | AggOp::Max => {
                let max = f == AggOp::Max;
                let r = call_f(fx, if max { pr.max } else { pr.min }, &args)?;
                match sp {
                    Some(s) => {
                        let zeros =
                            fx.b.build_int_compare(IntPredicate::ULT, s.nnz, len, "z")
                                .map_err(ierr)?;
                        let with0 = pick(fx, max, r, fx.splat_const(0.0, 1))?;
                        fx.b.build_select(zeros, with0, r, "mm")
                            .map_err(ierr)?
                            .into_vector_value()
                    }
                    None => r,
                }
            }
            AggOp::Prod => {
                // As the runtime: a zero wins over overflow, unless a value is non-finite.
                let prod = call_f(fx, pr.prod, &args)?;
                let nz = call_i(fx, pr.nnz, &args)?;
                let nf = call_i(fx, pr.nonfinite, &args)?;
                let zero =
                    fx.b.build_int_compare(IntPredicate::ULT, nz, len, "zero")
                        .map_err(ierr)?;
                let nonfin =
                    fx.b.build_int_compare(IntPredicate::NE, nf, fx.i64c(0), "nf")
                        .map_err(ierr)?;
                let zv =
                    fx.b.build_select(
                        nonfin,
                        fx.splat_const(f64::NAN, 1),
                        fx.splat_const(0.0, 1),
                        "zv",
                    )
                    .map_err(ierr)?
                    .into_vector_value();
                fx.b.build_select(zero, zv, prod, "prod")
                    .map_err(ierr)?
                    .into_vector_value()
            }
            AggOp::Var => {
                let nf = to_f64(fx, len)?;
                let mean = fx.fdiv(call_f(fx, pr.sum, &args)?, nf)?;
                let m2 = call_f(
                    fx,
                    pr.m2,
                    &[p.into(), len.into(), scalar0(fx, mean)?.into()],
                )?;
                let var = fx.fdiv(m2, fx.fsub(nf, fx.splat_const(1.0, 1))?)?;
                let is0 =
                    fx.b.build_int_compare(IntPredicate::EQ, len, fx.i64c(0), "l0")
                        .map_err(ierr)?;
                let is1 =
                    fx.b.build_int_compare(IntPredicate::EQ, len, fx.i64c(1), "l1")
                        .map_err(ierr)?;
                let v =
                    fx.b.build_select(is1, fx.splat_const(0.0, 1), var, "v")
                        .map_err(ierr)?
                        .into_vector_value();
                fx.b.build_select(is0, fx.splat_const(f64::NAN, 1), v, "v")
                    .map_err(ierr)?
                    .into_vector_value()
            }
            // Kernel aggregates no hop carries, so no construction puts them in a plan.
            AggOp::SumSq | AggOp::Sd => return unsupported(Unsupported::RowAggregate { op: f }),
        })
    }

    /// The outer-product update `t(X[i, ]) %*% b` of row `i`: `b` is kept, and every
    /// [`ROW_BLOCK`] rows [`Em::flush_outer`] adds the kept updates to the partial.
    pub(super) fn defer_outer_add(
        &self,
        fx: &mut Fx<'_, 'c>,
        pd: Pending<'c>,
        k: CNodeId,
        i: IntValue<'c>,
        b: RV<'c>,
    ) -> Result<(), CodegenError> {
        let (bp, lb, _) = self.as_vec(fx, b)?;
        let cnt = fx.load_i64(pd.count)?;
        let none =
            fx.b.build_int_compare(IntPredicate::EQ, cnt, fx.i64c(0), "none")
                .map_err(ierr)?;
        let first =
            fx.b.build_select(none, i, fx.load_i64(pd.first)?, "first")
                .map_err(ierr)?;
        fx.store(pd.first, first)?;
        let dst = gep(&fx.b, pd.bs, fx.mul(cnt, lb)?)?;
        call(fx, self.prims.copy, &[dst.into(), bp.into(), lb.into()])?;
        let cnt = fx.add(cnt, fx.i64c(1))?;
        fx.store(pd.count, cnt)?;
        let full =
            fx.b.build_int_compare(IntPredicate::EQ, cnt, fx.i64c(ROW_BLOCK), "full")
                .map_err(ierr)?;
        if_else(fx, full, &mut |fx| self.flush_outer(fx, pd, k), &mut |_| {
            Ok(())
        })
    }

    /// Adds the pending rows' outer-product updates to the partial, rows in order.
    pub(super) fn flush_outer(
        &self,
        fx: &mut Fx<'_, 'c>,
        pd: Pending<'c>,
        k: CNodeId,
    ) -> Result<(), CodegenError> {
        let cnt = fx.load_i64(pd.count)?;
        let (la, lb) = (self.n, self.par(pidx(k, AUX)));
        let first = fx.load_i64(pd.first)?;
        let x = gep(&fx.b, pd.data, fx.mul(fx.sub(first, pd.row0)?, pd.stride)?)?;
        let flip =
            fx.b.build_int_compare(IntPredicate::NE, self.par(P_FLIP), fx.i64c(0), "flip")
                .map_err(ierr)?;
        let sel_p = |a: PointerValue<'c>, b: PointerValue<'c>| {
            fx.b.build_select(flip, a, b, "p")
                .map(|v| v.into_pointer_value())
                .map_err(ierr)
        };
        let sel_i = |a: IntValue<'c>, b: IntValue<'c>| {
            fx.b.build_select(flip, a, b, "i")
                .map(|v| v.into_int_value())
                .map_err(ierr)
        };
        // Flipped, P[c, ] += Σ_r b_r[c] * X[r, ]: the rows of X scaled by the kept b's (lb
        // rows of P, la long). Else P[j, ] += Σ_r X[r, j] * b_r: the kept b's scaled by a
        // column of X's rows (la rows of P, lb long).
        let (rows, rows_stride) = (sel_p(x, pd.bs)?, sel_i(pd.stride, lb)?);
        let (scales, scales_stride) = (sel_p(pd.bs, x)?, sel_i(lb, pd.stride)?);
        let (cols, len) = (sel_i(lb, la)?, sel_i(la, lb)?);
        let axpy_rows = self
            .prims
            .axpy_rows
            .ok_or_else(|| ierr("axpy_rows not emitted"))?;
        call(
            fx,
            axpy_rows,
            &[
                self.out.into(),
                rows.into(),
                rows_stride.into(),
                scales.into(),
                scales_stride.into(),
                cols.into(),
                cnt.into(),
                len.into(),
            ],
        )?;
        fx.store(pd.count, fx.i64c(0))
    }

    /// `P += t(a) %*% b` into the task's partial (la×lb, or lb×la when flipped), at once (the
    /// CSR entry, and a dense entry whose `a` is not the main row).
    pub(super) fn outer_add(
        &self,
        fx: &mut Fx<'_, 'c>,
        k: CNodeId,
        a: RV<'c>,
        b: RV<'c>,
    ) -> Result<(), CodegenError> {
        let pr = self.prims;
        let (ap, la, asp) = self.as_vec(fx, a)?;
        let (bp, lb, bsp) = self.as_vec(fx, b)?;
        let _ = (self.par(pidx(k, LEN)), self.par(pidx(k, AUX)));
        let out = self.out;
        let flip =
            fx.b.build_int_compare(IntPredicate::NE, self.par(P_FLIP), fx.i64c(0), "flip")
                .map_err(ierr)?;
        // P's rows are indexed by one operand (`a`, or `b` when flipped: a column-major
        // partial) and take that operand's value times the other one. With `sparse`, the
        // operand that is sparse (and whether it is `a`): as the row operand it updates only the
        // rows of its non-zeros (dense axpy of the other); as the column operand it updates
        // every row (sparse axpy of it). Without, every row takes a dense axpy.
        let update = |fx: &mut Fx<'_, 'c>,
                      rows_of_a: bool,
                      sparse: Option<(Sp<'c>, bool)>|
         -> Result<(), CodegenError> {
            let (rv, rl, cv, cl) = if rows_of_a {
                (ap, la, bp, lb)
            } else {
                (bp, lb, ap, la)
            };
            match sparse {
                Some((sp, a_sparse)) if rows_of_a == a_sparse => {
                    fx.for_range(fx.i64c(0), sp.nnz, &mut |fx, p| {
                        let k = fx.load_index(sp.idx, p)?;
                        let s = load(&fx.b, gep(&fx.b, sp.vals, p)?)?;
                        let o = gep(&fx.b, out, fx.mul(k, cl)?)?;
                        call(fx, pr.axpy, &[o.into(), cv.into(), s.into(), cl.into()])?;
                        Ok(())
                    })
                }
                _ => fx.for_range(fx.i64c(0), rl, &mut |fx, k| {
                    let s = load(&fx.b, gep(&fx.b, rv, k)?)?;
                    let o = gep(&fx.b, out, fx.mul(k, cl)?)?;
                    match sparse {
                        Some((sp, _)) => {
                            let args = [
                                o.into(),
                                sp.vals.into(),
                                sp.idx.into(),
                                s.into(),
                                sp.nnz.into(),
                            ];
                            call(fx, pr.saxpy, &args)?;
                        }
                        None => {
                            call(fx, pr.axpy, &[o.into(), cv.into(), s.into(), cl.into()])?;
                        }
                    }
                    Ok(())
                }),
            }
        };
        let oriented =
            |fx: &mut Fx<'_, 'c>, sparse: Option<(Sp<'c>, bool)>| -> Result<(), CodegenError> {
                if_else(fx, flip, &mut |fx| update(fx, false, sparse), &mut |fx| {
                    update(fx, true, sparse)
                })
            };
        let Some((sp, a_sparse)) = asp.map(|s| (s, true)).or(bsp.map(|s| (s, false))) else {
            return oriented(fx, None);
        };
        // Sparse X: skipped zeros contribute 0 only when the other side is finite.
        let (op_, ol) = if a_sparse { (bp, lb) } else { (ap, la) };
        let nf = call_i(fx, pr.nonfinite, &[op_.into(), ol.into()])?;
        let finite =
            fx.b.build_int_compare(IntPredicate::EQ, nf, fx.i64c(0), "fin")
                .map_err(ierr)?;
        // The dense update reads the sparse operand densely: the main row, when nothing
        // else needed it scattered, is scattered for it here and cleared after.
        let CNode::OuterMultAdd { a: an, b: bn } = self.info.plan.nodes[k] else {
            return Err(ierr("outer_add of a node that is not an outer product"));
        };
        let sparse_node = if a_sparse { an } else { bn };
        let scatter_here =
            self.info.scatter_on_demand && is_main_row(&self.info.plan.nodes[sparse_node]);
        let dense_p = if a_sparse { ap } else { bp };
        if_else(
            fx,
            finite,
            &mut |fx| oriented(fx, Some((sp, a_sparse))),
            &mut |fx| {
                if scatter_here {
                    sp.scatter(fx, dense_p, false)?;
                }
                oriented(fx, None)?;
                if scatter_here {
                    sp.scatter(fx, dense_p, true)?;
                }
                Ok(())
            },
        )
    }
}

/// The node's operation on lane vectors (all of one width).
pub(super) fn apply<'c>(
    fx: &Fx<'_, 'c>,
    plan: &CPlan,
    node: &CNode,
    xs: &[VectorValue<'c>],
) -> Result<VectorValue<'c>, CodegenError> {
    let w = xs[0].get_type().get_size();
    Ok(match node {
        CNode::Unary { f, .. } => expr::unary(fx, *f, xs[0])?,
        CNode::Pow2 { .. } => fx.fmul(xs[0], xs[0])?,
        CNode::Mult2 { .. } => fx.fadd(xs[0], xs[0])?,
        CNode::Binary { f, b, .. } => {
            let lit2 = matches!(plan.nodes.get(*b), Some(CNode::Literal { value }) if value.as_f64() == Some(2.0));
            if *f == BinaryOp::Pow && lit2 {
                // java_pow(x, 2) is x * x.
                fx.fmul(xs[0], xs[0])?
            } else {
                expr::binary(fx, *f, xs[0], xs[1])?
            }
        }
        CNode::Ternary { f, .. } => {
            let (a, b, c) = (xs[0], xs[1], xs[2]);
            match f {
                TernaryOp::IfElse => {
                    let cond = fx.fcmp(FloatPredicate::UNE, a, fx.splat_const(0.0, w))?;
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
        CNode::Nary { f, .. } => {
            let max = *f == NaryOp::Max;
            let mut acc = xs[0];
            for &x in &xs[1..] {
                acc = fx.java_minmax(max, acc, x)?;
            }
            acc
        }
        other => {
            return unsupported(Unsupported::NotElementWise {
                node: expr::node_name(other),
            })
        }
    })
}
