//! Emission of CNode bodies at one position of `w` lanes for the Cranelift backend, operation
//! for operation as the LLVM backend's `native::expr` emits them (the core's semantics:
//! comparisons as 1/0, Java `min`/`max`, `sign`, Java's `round`, `ifelse`, `replace`;
//! `exp`/`log` through fdlibm as every other path; the transcendental and Java-specific
//! operations through the runtime's own Rust code), so results agree to the bit.

use super::fx::{Fx, V};
use super::helpers::Helper;
use crate::backend::{CodegenError, Internal, Unsupported};
use crate::plan_info::node_name;
use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::Value;
use lafuse_compiler::fusion::cplan::{Access, CNode, CNodeId, CPlan, InputKind};
use lafuse_compiler::hops::{BinaryOp, Literal, NaryOp, TernaryOp, UnaryOp};
use lafuse_compiler::stack::with_stack;
use lafuse_skeletons::abi::{DenseView, KernelArgs};
use std::collections::HashMap;
use std::mem::{offset_of, size_of};

/// Per-input values loaded once at function entry (`None` where the input is not read).
#[derive(Clone, Default)]
pub(super) struct InputPtrs {
    pub data: Vec<Option<Value>>,
    pub cols: Vec<Option<Value>>,
    /// The first row held at `data` (a streamed input's block), else 0.
    pub row0: Vec<Option<Value>>,
}

fn not_prepared(k: usize) -> CodegenError {
    CodegenError::Internal(Internal::InputNotPrepared { input: k })
}

impl InputPtrs {
    /// Input `k`'s data pointer and column count.
    pub(super) fn get(&self, k: usize) -> Result<(Value, Value), CodegenError> {
        match (
            self.data.get(k).copied().flatten(),
            self.cols.get(k).copied().flatten(),
        ) {
            (Some(p), Some(c)) => Ok((p, c)),
            _ => Err(not_prepared(k)),
        }
    }

    /// Input `k`'s data pointer and the offset of its row `i` (read aligned with the main
    /// input), rows counted from the view's first row.
    pub(super) fn aligned_row(
        &self,
        fx: &mut Fx<'_>,
        k: usize,
        i: Value,
    ) -> Result<(Value, Value), CodegenError> {
        let (p, c) = self.get(k)?;
        let r0 = self
            .row0
            .get(k)
            .copied()
            .flatten()
            .ok_or_else(|| not_prepared(k))?;
        let d = fx.isub(i, r0);
        Ok((p, fx.imul(d, c)))
    }
}

/// Where the body is evaluated: row `i`, `w` consecutive columns from `j`, and the main
/// input's value(s) there (already loaded).
#[derive(Clone)]
pub(super) struct At {
    pub i: Value,
    pub j: Value,
    pub w: u32,
    pub main: V,
}

/// Emits the value of plan nodes at one position, each node once (DAG-aware).
pub(super) struct Body<'p> {
    plan: &'p CPlan,
    ins: &'p InputPtrs,
    at: At,
    /// Outer: the dot product `u_i · v_j`, computed by the template.
    pub outer_dot: Option<V>,
    memo: HashMap<(CNodeId, bool), V>,
    /// Per node: whether its value is written as a matrix cell ([`CPlan::matrix_cell_nodes`]).
    matrix_cells: &'p [bool],
}

impl<'p> Body<'p> {
    pub(super) fn new(
        plan: &'p CPlan,
        ins: &'p InputPtrs,
        matrix_cells: &'p [bool],
        at: At,
    ) -> Self {
        Body {
            plan,
            ins,
            at,
            outer_dot: None,
            memo: HashMap::new(),
            matrix_cells,
        }
    }

    /// The value of node `n` (`swapped`: inside a transpose, row and column exchanged).
    pub(super) fn emit(
        &mut self,
        fx: &mut Fx<'_>,
        n: CNodeId,
        swapped: bool,
    ) -> Result<V, CodegenError> {
        with_stack(|| self.emit_step(fx, n, swapped))
    }

    fn emit_step(&mut self, fx: &mut Fx<'_>, n: CNodeId, swapped: bool) -> Result<V, CodegenError> {
        if let Some(v) = self.memo.get(&(n, swapped)) {
            return Ok(v.clone());
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
                fx.fconst(x, w)
            }
            CNode::Unary { f, x } => {
                let x = self.emit(fx, *x, swapped)?;
                unary(fx, *f, &x)
            }
            CNode::Pow2 { x } => {
                let x = self.emit(fx, *x, swapped)?;
                fx.fmul(&x, &x)
            }
            CNode::Mult2 { x } => {
                let x = self.emit(fx, *x, swapped)?;
                fx.fadd(&x, &x)
            }
            CNode::Binary { f, a, b } => {
                let lit2 = matches!(self.plan.nodes.get(*b), Some(CNode::Literal { value }) if value.as_f64() == Some(2.0));
                let a = self.emit(fx, *a, swapped)?;
                let b = self.emit(fx, *b, swapped)?;
                if *f == BinaryOp::Pow && lit2 {
                    // java_pow(x, 2) is x * x.
                    fx.fmul(&a, &a)
                } else {
                    binary(fx, *f, &a, &b)
                }
            }
            CNode::Ternary { f, a, b, c } => {
                let a = self.emit(fx, *a, swapped)?;
                let b = self.emit(fx, *b, swapped)?;
                let c = self.emit(fx, *c, swapped)?;
                match f {
                    TernaryOp::IfElse => {
                        let z = fx.fconst(0.0, a.w);
                        let cond = fx.fcmp(FloatCC::NotEqual, &a, &z);
                        fx.select(&cond, &b, &c)
                    }
                    TernaryOp::Replace => {
                        let eq = fx.fcmp(FloatCC::Equal, &a, &b);
                        let an = fx.fcmp(FloatCC::Unordered, &a, &a);
                        let bn = fx.fcmp(FloatCC::Unordered, &b, &b);
                        let both = fx.and(&an, &bn);
                        let m = fx.or(&eq, &both);
                        fx.select(&m, &c, &a)
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
                let mut acc: Option<V> = None;
                for &x in xs {
                    let v = self.emit(fx, x, swapped)?;
                    acc = Some(match acc {
                        None => v,
                        Some(a) => fx.java_minmax(max, &a, &v),
                    });
                }
                acc.ok_or(CodegenError::Unsupported(Unsupported::Construct(
                    "n-ary op without operands",
                )))?
            }
            CNode::DotCell { a, b } => {
                let a = self.emit(fx, *a, swapped)?;
                let b = self.emit(fx, *b, swapped)?;
                fx.fmul(&a, &b)
            }
            CNode::Transpose { x } => self.emit(fx, *x, !swapped)?,
            CNode::OuterDot { .. } => {
                self.outer_dot
                    .clone()
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
            fx.plus_zero(&v)
        } else {
            v
        };
        self.memo.insert((n, swapped), v.clone());
        Ok(v)
    }

    fn data(
        &mut self,
        fx: &mut Fx<'_>,
        k: usize,
        access: Access,
        swapped: bool,
    ) -> Result<V, CodegenError> {
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
            let zero = fx.iconst(0);
            return Ok(fx.load_splat(p, zero, w));
        }
        match (access, swapped) {
            (Access::Main, false) if k == 0 => Ok(self.at.main.clone()),
            (Access::Aligned, false) => {
                let (p, row) = self.ins.aligned_row(fx, k, i)?;
                let idx = fx.iadd(row, j);
                Ok(fx.load(p, idx, w))
            }
            (Access::ColVector, false) => {
                let (p, c) = self.ins.get(k)?;
                let idx = fx.imul(i, c);
                Ok(fx.load_splat(p, idx, w))
            }
            (Access::RowVector, false) => {
                let (p, _) = self.ins.get(k)?;
                Ok(fx.load(p, j, w))
            }
            // Transposed reads: a column vector read along the columns, a row vector along
            // the rows (the skeleton checked the transposed shapes).
            (Access::ColVector, true) => {
                let (p, c) = self.ins.get(k)?;
                let idx = fx.imul(i, c);
                Ok(fx.gather(p, idx, c, w))
            }
            (Access::RowVector, true) => {
                let (p, _) = self.ins.get(k)?;
                Ok(fx.load_splat(p, j, w))
            }
            (access, transposed) => Err(CodegenError::Unsupported(Unsupported::CellInputAccess {
                input: k,
                access,
                transposed,
            })),
        }
    }
}

/// Whether `node` is lowered (at more than one lane) through a call that maps lanes with the
/// runtime's vector functions ([`Fx::exp`], [`Fx::ln`], [`Fx::tanh`]).
pub(super) fn maps_lanes(node: &CNode) -> bool {
    match node {
        CNode::Unary { f, .. } => matches!(
            f,
            UnaryOp::Exp | UnaryOp::Log | UnaryOp::Tanh | UnaryOp::Sigmoid
        ),
        CNode::Binary { f, .. } => *f == BinaryOp::Log,
        _ => false,
    }
}

pub(super) fn unary(fx: &mut Fx<'_>, f: UnaryOp, x: &V) -> V {
    let w = x.w;
    match f {
        UnaryOp::Neg => fx.fneg(x),
        UnaryOp::Not => {
            let z = fx.fconst(0.0, w);
            let c = fx.fcmp(FloatCC::Equal, x, &z);
            fx.b2f(&c)
        }
        UnaryOp::Abs => fx.fabs(x),
        UnaryOp::Sqrt => fx.sqrt(x),
        UnaryOp::Floor => fx.floor(x),
        UnaryOp::Ceil => fx.ceil(x),
        UnaryOp::Sign => {
            let z = fx.fconst(0.0, w);
            let gt = fx.fcmp(FloatCC::GreaterThan, x, &z);
            let lt = fx.fcmp(FloatCC::LessThan, x, &z);
            let m1 = fx.fconst(-1.0, w);
            let r = fx.select(&lt, &m1, x);
            let p1 = fx.fconst(1.0, w);
            fx.select(&gt, &p1, &r)
        }
        UnaryOp::Round => {
            // Java's Math.round as the runtime's `java_round` and the LLVM backend: floor,
            // plus one where the exact remainder is at least 0.5 (`+ 0.0` turns -0.0 into
            // 0.0), clamped to +-2^63, NaN to 0.
            let f = fx.floor(x);
            let rem = fx.fsub(x, &f);
            let half = fx.fconst(0.5, w);
            let up = fx.fcmp(FloatCC::GreaterThanOrEqual, &rem, &half);
            let one = fx.fconst(1.0, w);
            let zero = fx.fconst(0.0, w);
            let f1 = fx.fadd(&f, &one);
            let f0 = fx.fadd(&f, &zero);
            let r = fx.select(&up, &f1, &f0);
            let limit = i64::MAX as f64;
            let hi = fx.fconst(limit, w);
            let high = fx.fcmp(FloatCC::GreaterThanOrEqual, x, &hi);
            let r = fx.select(&high, &hi, &r);
            let lo = fx.fconst(-limit, w);
            let low = fx.fcmp(FloatCC::LessThanOrEqual, x, &lo);
            let r = fx.select(&low, &lo, &r);
            let nan = fx.fcmp(FloatCC::Unordered, x, x);
            fx.select(&nan, &zero, &r)
        }
        UnaryOp::Exp => fx.exp(x),
        UnaryOp::Log => fx.ln(x),
        UnaryOp::Sin => fx.helper(Helper::Sin, &[x]),
        UnaryOp::Cos => fx.helper(Helper::Cos, &[x]),
        UnaryOp::Tan => fx.helper(Helper::Tan, &[x]),
        UnaryOp::Asin => fx.helper(Helper::Asin, &[x]),
        UnaryOp::Acos => fx.helper(Helper::Acos, &[x]),
        UnaryOp::Atan => fx.helper(Helper::Atan, &[x]),
        UnaryOp::Sinh => fx.helper(Helper::Sinh, &[x]),
        UnaryOp::Cosh => fx.helper(Helper::Cosh, &[x]),
        UnaryOp::Tanh => fx.tanh(x),
        UnaryOp::Sigmoid => {
            // 1 / (1 + exp(-x)), operation for operation as the runtime.
            let nx = fx.fneg(x);
            let e = fx.exp(&nx);
            let one = fx.fconst(1.0, w);
            let d = fx.fadd(&one, &e);
            fx.fdiv(&one, &d)
        }
        UnaryOp::IsNaN => {
            let nan = fx.fcmp(FloatCC::Unordered, x, x);
            fx.b2f(&nan)
        }
        UnaryOp::IsInf => {
            let a = fx.fabs(x);
            let inf = fx.fconst(f64::INFINITY, w);
            let c = fx.fcmp(FloatCC::Equal, &a, &inf);
            fx.b2f(&c)
        }
    }
}

pub(super) fn binary(fx: &mut Fx<'_>, f: BinaryOp, a: &V, b: &V) -> V {
    let w = a.w;
    let cmp = |fx: &mut Fx<'_>, cc| {
        let c = fx.fcmp(cc, a, b);
        fx.b2f(&c)
    };
    let nz = |fx: &mut Fx<'_>, x: &V| {
        let z = fx.fconst(0.0, w);
        fx.fcmp(FloatCC::NotEqual, x, &z)
    };
    match f {
        BinaryOp::Add => fx.fadd(a, b),
        BinaryOp::Sub => fx.fsub(a, b),
        BinaryOp::Mul => fx.fmul(a, b),
        BinaryOp::Div => fx.fdiv(a, b),
        BinaryOp::Pow => fx.helper(Helper::Pow, &[a, b]),
        BinaryOp::Mod => fx.helper(Helper::Fmod, &[a, b]),
        BinaryOp::IntDiv => {
            let q = fx.fdiv(a, b);
            fx.trunc(&q)
        }
        BinaryOp::Lt => cmp(fx, FloatCC::LessThan),
        BinaryOp::Le => cmp(fx, FloatCC::LessThanOrEqual),
        BinaryOp::Gt => cmp(fx, FloatCC::GreaterThan),
        BinaryOp::Ge => cmp(fx, FloatCC::GreaterThanOrEqual),
        BinaryOp::Eq => cmp(fx, FloatCC::Equal),
        BinaryOp::Ne => cmp(fx, FloatCC::NotEqual),
        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => {
            let (na, nb) = (nz(fx, a), nz(fx, b));
            let c = match f {
                BinaryOp::And => fx.and(&na, &nb),
                BinaryOp::Or => fx.or(&na, &nb),
                _ => fx.xor(&na, &nb),
            };
            fx.b2f(&c)
        }
        BinaryOp::Min => fx.java_minmax(false, a, b),
        BinaryOp::Max => fx.java_minmax(true, a, b),
        BinaryOp::Log => {
            let la = fx.ln(a);
            let lb = fx.ln(b);
            fx.fdiv(&la, &lb)
        }
        BinaryOp::BitwAnd => fx.helper(Helper::BitwAnd, &[a, b]),
        BinaryOp::BitwOr => fx.helper(Helper::BitwOr, &[a, b]),
        BinaryOp::BitwXor => fx.helper(Helper::BitwXor, &[a, b]),
        BinaryOp::BitwShiftL => fx.helper(Helper::BitwShiftL, &[a, b]),
        BinaryOp::BitwShiftR => fx.helper(Helper::BitwShiftR, &[a, b]),
    }
}

/// Loads the data pointer, column count and first row of every input in `used` from the
/// `KernelArgs` at `args`.
pub(super) fn load_inputs(
    fx: &mut Fx<'_>,
    args: Value,
    used: &[bool],
) -> Result<InputPtrs, CodegenError> {
    let views = fx.load_i64(args, offset_of!(KernelArgs, inputs))?;
    let mut out = InputPtrs::default();
    for (k, &u) in used.iter().enumerate() {
        if !u {
            out.data.push(None);
            out.cols.push(None);
            out.row0.push(None);
            continue;
        }
        let (data, cols, row0) = fx.dense_view(views, k * size_of::<DenseView>())?;
        out.data.push(Some(data));
        out.cols.push(Some(cols));
        out.row0.push(Some(row0));
    }
    Ok(out)
}
