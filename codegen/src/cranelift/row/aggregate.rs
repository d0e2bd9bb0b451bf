//! What a row adds up, in Cranelift IR: row aggregates of a vector (sums, extremes,
//! products, variances; a sparse row's sums and extremes from its non-zeros) and the
//! outer-product accumulation `P += t(a) %*% b` into the task's partial, as
//! `native::row::body` computes them.

use super::body::{ierr, Em, Sp, RV};
use super::prims::{self, one};
use crate::backend::{CodegenError, Unsupported};
use crate::cranelift::fx::{Fx, V};
use crate::row_plan::{is_main_row, sparse_agg, P_FLIP};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use lafuse_compiler::fusion::cplan::{CNode, CNodeId};
use lafuse_compiler::hops::AggOp;

type R<T> = Result<T, CodegenError>;

impl Em<'_> {
    /// A row aggregate of a value (`sq`: the sum of squares), as the runtime aggregates the
    /// row vector; a sparse row's sums and extremes from its non-zeros.
    pub(super) fn row_agg(&self, fx: &mut Fx<'_>, f: AggOp, sq: bool, x: &RV) -> R<V> {
        let (p, len, sp) = match x {
            RV::S(s) => {
                return Ok(match f {
                    _ if sq => fx.fmul(s, s),
                    AggOp::Var => fx.fconst(0.0, 1),
                    _ => s.clone(),
                })
            }
            RV::V { p, len, sp } => (*p, *len, sp.filter(|_| sparse_agg(f))),
            _ => return Err(ierr("row aggregate operand")),
        };
        // Sparse rows: reduce the non-zeros (contiguous values), then account for the zeros.
        let (rp, rlen) = match sp {
            Some(s) => (s.vals, s.nnz),
            None => (p, len),
        };
        Ok(match f {
            AggOp::Sum => one(prims::reduce_at(fx, rp, rlen, 0.0, sq, prims::add)?),
            AggOp::Mean => {
                let s = one(prims::reduce_at(fx, rp, rlen, 0.0, false, prims::add)?);
                let n = to_f64(fx, len);
                fx.fdiv(&s, &n)
            }
            AggOp::Min | AggOp::Max => {
                let max = f == AggOp::Max;
                let (init, step): (f64, prims::Step) = if max {
                    (f64::NEG_INFINITY, prims::max)
                } else {
                    (f64::INFINITY, prims::min)
                };
                let r = one(prims::reduce_at(fx, rp, rlen, init, false, step)?);
                match sp {
                    Some(s) => {
                        let zeros = fx.b.ins().icmp(IntCC::UnsignedLessThan, s.nnz, len);
                        let z = fx.fconst(0.0, 1);
                        let with0 = fx.pick(max, &r, &z);
                        one(fx.b.ins().select(zeros, with0.parts[0], r.parts[0]))
                    }
                    None => r,
                }
            }
            AggOp::Prod => {
                // As the runtime: a zero wins over overflow, unless a value is non-finite.
                let prod = prims::reduce_at(fx, rp, rlen, 1.0, false, prims::mul)?;
                let nz = prims::count(fx, rp, rlen, false)?;
                let nf = prims::count(fx, rp, rlen, true)?;
                let zero = fx.b.ins().icmp(IntCC::UnsignedLessThan, nz, len);
                let nonfin = fx.b.ins().icmp_imm_u(IntCC::NotEqual, nf, 0);
                let nan = fx.b.ins().f64const(f64::NAN);
                let z = fx.b.ins().f64const(0.0);
                let zv = fx.b.ins().select(nonfin, nan, z);
                one(fx.b.ins().select(zero, zv, prod))
            }
            AggOp::Var => {
                let nf = to_f64(fx, len);
                let s = one(prims::reduce_at(fx, rp, rlen, 0.0, false, prims::add)?);
                let mean = fx.fdiv(&s, &nf);
                let m2 = one(prims::m2(fx, p, len, mean.parts[0])?);
                let o = fx.fconst(1.0, 1);
                let d = fx.fsub(&nf, &o);
                let var = fx.fdiv(&m2, &d);
                let is0 = fx.b.ins().icmp_imm_u(IntCC::Equal, len, 0);
                let is1 = fx.b.ins().icmp_imm_u(IntCC::Equal, len, 1);
                let z = fx.b.ins().f64const(0.0);
                let nan = fx.b.ins().f64const(f64::NAN);
                let v = fx.b.ins().select(is1, z, var.parts[0]);
                one(fx.b.ins().select(is0, nan, v))
            }
            // Kernel aggregates no hop carries, so no construction puts them in a plan.
            AggOp::SumSq | AggOp::Sd => {
                return Err(CodegenError::Unsupported(Unsupported::RowAggregate {
                    op: f,
                }))
            }
        })
    }

    /// `P += t(a) %*% b` into the task's partial (la×lb, or lb×la when flipped), row by row;
    /// over a CSR row's non-zeros where the other operand is finite (else densely, the main
    /// row scattered for it where nothing else needed it so).
    pub(super) fn outer_add(&self, fx: &mut Fx<'_>, k: CNodeId, a: &RV, b: &RV) -> R<()> {
        let (ap, la, asp) = self.as_vec(fx, a)?;
        let (bp, lb, bsp) = self.as_vec(fx, b)?;
        let out = self.out;
        let flip_p = self.par(fx, P_FLIP);
        let flip = fx.b.ins().icmp_imm_u(IntCC::NotEqual, flip_p, 0);
        // P's rows are indexed by one operand (`a`, or `b` when flipped) and take that
        // operand's value times the other one; with `sparse`, the sparse operand (and whether
        // it is `a`) updates only the rows of its non-zeros as the row operand, every row by
        // a sparse axpy as the column operand.
        let update = |fx: &mut Fx<'_>, rows_of_a: bool, sparse: Option<(Sp, bool)>| -> R<()> {
            let (rv, rl, cv, cl) = if rows_of_a {
                (ap, la, bp, lb)
            } else {
                (bp, lb, ap, la)
            };
            let zero = fx.iconst(0);
            match sparse {
                Some((sp, a_sparse)) if rows_of_a == a_sparse => {
                    fx.for_range(zero, sp.nnz, &mut |fx, p| {
                        let r = prims::index(fx, sp.idx, p);
                        let s = fx.load(sp.vals, p, 1).parts[0];
                        let at = fx.imul(r, cl);
                        let o = fx.elem_addr(out, at);
                        prims::axpy(fx, o, cv, s, cl)
                    })
                }
                _ => fx.for_range(zero, rl, &mut |fx, r| {
                    let s = fx.load(rv, r, 1).parts[0];
                    let at = fx.imul(r, cl);
                    let o = fx.elem_addr(out, at);
                    match sparse {
                        Some((sp, _)) => prims::saxpy(fx, o, sp.vals, sp.idx, s, sp.nnz),
                        None => prims::axpy(fx, o, cv, s, cl),
                    }
                }),
            }
        };
        let oriented = |fx: &mut Fx<'_>, sparse: Option<(Sp, bool)>| -> R<()> {
            fx.if_else(flip, &mut |fx| update(fx, false, sparse), &mut |fx| {
                update(fx, true, sparse)
            })
        };
        let Some((sp, a_sparse)) = asp.map(|s| (s, true)).or(bsp.map(|s| (s, false))) else {
            return oriented(fx, None);
        };
        // Sparse X: skipped zeros contribute 0 only when the other side is finite.
        let (op, ol) = if a_sparse { (bp, lb) } else { (ap, la) };
        let nf = prims::count(fx, op, ol, true)?;
        let finite = fx.b.ins().icmp_imm_u(IntCC::Equal, nf, 0);
        let CNode::OuterMultAdd { a: an, b: bn } = self.info.plan.nodes[k] else {
            return Err(ierr("outer_add of a node that is not an outer product"));
        };
        let sparse_node = if a_sparse { an } else { bn };
        let scatter_here =
            self.info.scatter_on_demand && is_main_row(&self.info.plan.nodes[sparse_node]);
        let dense_p = if a_sparse { ap } else { bp };
        fx.if_else(
            finite,
            &mut |fx| oriented(fx, Some((sp, a_sparse))),
            &mut |fx| {
                if scatter_here {
                    prims::scatter(fx, sp.vals, sp.idx, sp.nnz, dense_p, false)?;
                }
                oriented(fx, None)?;
                if scatter_here {
                    prims::scatter(fx, sp.vals, sp.idx, sp.nnz, dense_p, true)?;
                }
                Ok(())
            },
        )
    }
}

/// An unsigned length as a one-lane double.
fn to_f64(fx: &mut Fx<'_>, len: Value) -> V {
    one(fx.b.ins().fcvt_from_uint(types::F64, len))
}
