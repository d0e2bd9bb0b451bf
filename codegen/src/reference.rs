//! The reference evaluator: a slow, obviously correct interpreter of a fused operator's CPlan
//! on runtime matrices, evaluating the body cell by cell (Cell, MultiAgg, Outer) or row by row
//! (Row), as the skeletons of reference section 6 do, and producing exactly what the unfused
//! hops it replaces compute (up to summation order). It is the oracle generated code is tested
//! against, so it favours clarity over speed: every cell or row is evaluated from scratch and
//! aggregations reuse the runtime's own kernels.
//!
//! Semantics per template (see [`lafuse_compiler::fusion::cplan::TemplateSpec`]):
//! * Cell: the body's value at every cell `(i, j)` of the main input, then the template's
//!   aggregation (none, row, column, full; `sum`, sum of squares, `min`, `max`).
//! * MultiAgg: as Cell with a full aggregate per output.
//! * Row: the body per row `i` of the main input, values being scalars or row vectors, then
//!   the row type's output: row `i` of the output (`no_agg`, `no_agg_b1`, `no_agg_const`,
//!   `row_agg`), the column sums of the rows' vectors (`col_agg`, `col_agg_b1r`,
//!   `col_agg_const`), the sum of their outer products `t(a_i) %*% b_i` (`col_agg_t`,
//!   `col_agg_b1`, `col_agg_b1_t`) or the full sum (`full_agg`).
//! * Outer: `G(i, j)` = the body at the non-zero cells of the main input (the sparse driver),
//!   `0 * body` elsewhere (0, or NaN where the body is not finite, as unfused); then `G`,
//!   `sum(G)` or the final product with the whole side matrix.

use crate::backend::{Backend, Built, CodegenError, Executable, Internal, Origin, Request};
use lafuse_compiler::fusion::cplan::{
    Access, CNode, CNodeId, CPlan, OuterType, RowType, TemplateSpec,
};
use lafuse_compiler::fusion::template::{CellAgg, CellType};
use lafuse_compiler::hops::{AggOp, BinaryOp, Direction, Literal, NaryOp, TernaryOp};
use lafuse_compiler::stack::with_stack;
use lafuse_core::Fault;
use lafuse_runtime::error::Shape;
use lafuse_runtime::kernels::{self, matrix_cell};
use lafuse_runtime::ops::{java_max, java_min};
use lafuse_runtime::{Matrix, RuntimeError, ValueRange};
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use thiserror::Error;

/// The operand type of every backend, here under the evaluator's path too.
pub use crate::backend::Operand;

/// The reference evaluator as a [`Backend`]: every plan builds (nothing is compiled), and
/// each call interprets it with [`evaluate`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ReferenceBackend;

impl Backend for ReferenceBackend {
    fn name(&self) -> &'static str {
        "reference"
    }

    fn build(&self, requests: &[Request<'_>]) -> Vec<std::result::Result<Built, CodegenError>> {
        requests
            .iter()
            .map(|r| {
                Ok(Built {
                    executable: Arc::new(Interpreted(Arc::clone(r.plan))),
                    origin: Origin::Interpreted,
                })
            })
            .collect()
    }
}

/// A CPlan run by the reference evaluator.
#[derive(Debug)]
struct Interpreted(Arc<CPlan>);

impl Executable for Interpreted {
    fn execute(
        &self,
        inputs: &[Operand<'_>],
        out_shapes: &[(usize, usize)],
        _known: &[Option<ValueRange>],
    ) -> std::result::Result<Vec<Matrix>, CodegenError> {
        evaluate(&self.0, inputs, out_shapes).map_err(CodegenError::from)
    }
}

impl From<EvalError> for CodegenError {
    fn from(e: EvalError) -> CodegenError {
        match e {
            EvalError::Runtime(e) => CodegenError::Runtime(e),
            EvalError::Invalid(why) => CodegenError::Internal(Internal::Reference(why)),
        }
    }
}

/// Why a CPlan could not be evaluated.
#[derive(Clone, Debug, PartialEq)]
pub enum EvalError {
    /// A malformed plan, or inputs that do not match it.
    Invalid(Invalid),
    /// A runtime kernel failed: an output (of a size the script decides) more memory than the
    /// machine can give, or a call of ours that does not match the kernel.
    Runtime(RuntimeError),
}

impl EvalError {
    /// Who has to act on this error: a plan that does not match its inputs is lafuse's bug;
    /// an output larger than memory is a resource error.
    pub fn fault(&self) -> Fault {
        match self {
            EvalError::Invalid(_) => Fault::Internal,
            EvalError::Runtime(RuntimeError::Resource(_)) => Fault::Resource,
            EvalError::Runtime(_) => Fault::Internal,
        }
    }
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::Invalid(why) => write!(f, "reference evaluation: {why}"),
            EvalError::Runtime(RuntimeError::Resource(why)) => write!(f, "{why}"),
            EvalError::Runtime(e) => write!(f, "reference evaluation: {e}"),
        }
    }
}

impl std::error::Error for EvalError {}

/// A plan that does not hold together, or inputs that do not match it ([`EvalError::Invalid`]).
#[derive(Clone, Debug, PartialEq, Error)]
pub enum Invalid {
    /// A plan whose structure does not fit its template, described.
    #[error("{0}")]
    Plan(&'static str),
    #[error("input or output count does not match the plan")]
    Counts,
    #[error("the main input must be a matrix")]
    MainNotMatrix,
    #[error(
        "output is {}x{}, expected {}x{}",
        .got.0,
        .got.1,
        .expected.0,
        .expected.1
    )]
    OutputShape { got: Shape, expected: Shape },
    /// An n-ary operation (by name) that has no value per cell.
    #[error("n-ary {op} is not cell-wise")]
    NaryNotCellWise { op: &'static str },
    #[error("input {input} missing")]
    InputMissing { input: usize },
    #[error("input {input} must be a matrix")]
    InputNotMatrix { input: usize },
    /// A cell `(row, col)` (0-based) outside an input of `shape`.
    #[error(
        "read ({}, {}) outside a {}x{} input",
        .cell.0,
        .cell.1,
        .shape.0,
        .shape.1
    )]
    ReadOutside { cell: (usize, usize), shape: Shape },
    /// A matrix input read per cell in a way that has no cell-wise meaning.
    #[error("{access:?} input read per cell")]
    AccessPerCell { access: Access },
    /// A node that has no value per cell.
    #[error("{node:?} has no cell-wise value")]
    NoCellValue { node: CNode },
    /// An input read in a way a row plan does not have.
    #[error("{access:?} input in a row plan")]
    AccessInRowPlan { access: Access },
    /// A node a row plan does not hold.
    #[error("{node:?} in a row plan")]
    NodeInRowPlan { node: CNode },
}

type Result<T> = std::result::Result<T, EvalError>;

fn err<T>(why: Invalid) -> Result<T> {
    Err(EvalError::Invalid(why))
}

fn rt<T>(r: lafuse_runtime::Result<T>) -> Result<T> {
    r.map_err(EvalError::Runtime)
}

/// Evaluates `plan` on `inputs` (by CPlan input position, main input first). `out_shapes`
/// gives the shape of each output (the shapes of the hops the operator replaces; full
/// aggregates are 1×1). Returns one matrix per output; full aggregates as 1×1 matrices.
///
/// The plan's dot products and outer-product updates multiply every pair of cells, as
/// generated code does; [`evaluate_as_unfused`] skips the left operands' zeros as `%*%` does.
pub fn evaluate(
    plan: &CPlan,
    inputs: &[Operand<'_>],
    out_shapes: &[(usize, usize)],
) -> Result<Vec<Matrix>> {
    evaluate_with(plan, inputs, out_shapes, false)
}

/// [`evaluate`] with the plan's products skipping their left operands' zeros, as the unfused
/// `%*%` does (`kernels::matmul`: `0 * Inf` is never formed): what a call whose right operands
/// hold NaN or infinities runs on.
pub fn evaluate_as_unfused(
    plan: &CPlan,
    inputs: &[Operand<'_>],
    out_shapes: &[(usize, usize)],
) -> Result<Vec<Matrix>> {
    evaluate_with(plan, inputs, out_shapes, true)
}

fn evaluate_with(
    plan: &CPlan,
    inputs: &[Operand<'_>],
    out_shapes: &[(usize, usize)],
    skip_left_zeros: bool,
) -> Result<Vec<Matrix>> {
    if inputs.len() != plan.inputs.len() || out_shapes.len() != plan.outputs.len() {
        return err(Invalid::Counts);
    }
    let Some(Operand::Matrix(main)) = inputs.first() else {
        return err(Invalid::MainNotMatrix);
    };
    let ev = Eval {
        plan,
        inputs,
        matrix_cells: plan.matrix_cell_nodes(),
        skip_left_zeros,
    };
    let out = match &plan.template {
        TemplateSpec::Cell { cell_type, agg, .. } => {
            vec![ev.cell_template(main, plan.outputs[0], *cell_type, *agg)?]
        }
        TemplateSpec::MAgg { aggs, .. } => aggs
            .iter()
            .zip(&plan.outputs)
            .map(|(&a, &o)| ev.cell_template(main, o, CellType::FullAgg, Some(a)))
            .collect::<Result<Vec<_>>>()?,
        TemplateSpec::Row { row_type, .. } => {
            vec![ev.row_template(main, *row_type, out_shapes[0])?]
        }
        TemplateSpec::Outer { outer_type } => vec![ev.outer_template(main, *outer_type)?],
    };
    for (m, &(r, c)) in out.iter().zip(out_shapes) {
        if m.shape() != (r, c) {
            return err(Invalid::OutputShape {
                got: m.shape(),
                expected: (r, c),
            });
        }
    }
    Ok(out)
}

/// A row-template value: a scalar or a row vector.
#[derive(Clone, Debug)]
enum RVal {
    Scalar(f64),
    Vector(Vec<f64>),
    /// A whole side matrix (only as an operand of a product).
    Whole(usize),
    /// `t(a_i) %*% b_i`, accumulated by the template.
    Outer(Vec<f64>, Vec<f64>),
}

struct Eval<'p, 'a> {
    plan: &'p CPlan,
    inputs: &'p [Operand<'a>],
    /// Per node: whether its value is written as a matrix cell, `-0.0` as `0.0`, as the
    /// unfused kernels do ([`CPlan::matrix_cell_nodes`], the runtime's [`matrix_cell`]).
    matrix_cells: Vec<bool>,
    /// Whether products skip their left operands' zeros ([`evaluate_as_unfused`]).
    skip_left_zeros: bool,
}

fn ternary(f: TernaryOp, a: f64, b: f64, c: f64) -> f64 {
    match f {
        TernaryOp::IfElse => {
            if a != 0.0 {
                b
            } else {
                c
            }
        }
        // replace(X, pattern, replacement): NaN matches NaN.
        TernaryOp::Replace => {
            if a == b || (a.is_nan() && b.is_nan()) {
                c
            } else {
                a
            }
        }
    }
}

fn nary(f: NaryOp, xs: &[f64]) -> Result<f64> {
    let fold = match f {
        NaryOp::Min => java_min,
        NaryOp::Max => java_max,
        _ => return err(Invalid::NaryNotCellWise { op: f.name() }),
    };
    xs.iter()
        .copied()
        .reduce(fold)
        .ok_or(EvalError::Invalid(Invalid::Plan(
            "n-ary op without operands",
        )))
}

/// The runtime aggregate of a vector (so fused and unfused aggregates agree in semantics).
fn agg_vector(f: AggOp, v: &[f64]) -> Result<f64> {
    let m = rt(Matrix::from_dense_values(1, v.len(), v.to_vec()))?;
    let r = rt(kernels::aggregate(&m, f, Direction::Full))?;
    Ok(r.get(0, 0))
}

fn literal(l: &Literal) -> Result<f64> {
    l.as_f64()
        .ok_or(EvalError::Invalid(Invalid::Plan("non-numeric literal")))
}

impl<'p, 'a> Eval<'p, 'a> {
    fn input(&self, k: usize) -> Result<Operand<'a>> {
        self.inputs
            .get(k)
            .copied()
            .ok_or(EvalError::Invalid(Invalid::InputMissing { input: k }))
    }

    fn matrix(&self, k: usize) -> Result<&'a Matrix> {
        match self.input(k)? {
            Operand::Matrix(m) => Ok(m),
            Operand::Scalar(_) => err(Invalid::InputNotMatrix { input: k }),
        }
    }

    /// A bounds-checked cell read.
    fn at(m: &Matrix, i: usize, j: usize) -> Result<f64> {
        if i < m.rows() && j < m.cols() {
            Ok(m.get(i, j))
        } else {
            err(Invalid::ReadOutside {
                cell: (i, j),
                shape: m.shape(),
            })
        }
    }

    // ---- cell-wise bodies (Cell, MultiAgg, Outer) -------------------------------------------

    /// The value of node `n` at cell `(i, j)`, each node of the body computed once (a body is
    /// a DAG: `s = s + s` repeated doubles the paths to the input at every step, so
    /// recomputing shared nodes would take exponential time). `memo` holds the cell's values
    /// so far, two per node (at `(i, j)`, and at `(j, i)` inside a transpose); it must hold
    /// no value from another cell ([`CellMemo::start`]).
    fn cell(&self, n: CNodeId, i: usize, j: usize, memo: &mut CellMemo) -> Result<f64> {
        self.cell_at(n, i, j, false, memo)
    }

    fn cell_at(
        &self,
        n: CNodeId,
        i: usize,
        j: usize,
        swapped: bool,
        memo: &mut CellMemo,
    ) -> Result<f64> {
        let slot = 2 * n + usize::from(swapped);
        if let Some(v) = memo.values.get(slot).copied().flatten() {
            return Ok(v);
        }
        let v = with_stack(|| self.cell_step(n, i, j, swapped, memo))?;
        if let Some(known) = memo.values.get_mut(slot) {
            *known = Some(v);
            memo.set.push(slot);
        }
        Ok(v)
    }

    fn cell_step(
        &self,
        n: CNodeId,
        i: usize,
        j: usize,
        swapped: bool,
        memo: &mut CellMemo,
    ) -> Result<f64> {
        let nodes = &self.plan.nodes;
        let mut at = |x: CNodeId| self.cell_at(x, i, j, swapped, memo);
        let v = match &nodes[n] {
            CNode::Data { input, access } => {
                let v = self.input(*input)?;
                match (v, access) {
                    (Operand::Scalar(s), _) => s,
                    (Operand::Matrix(m), Access::Main | Access::Aligned) => Self::at(m, i, j)?,
                    (Operand::Matrix(m), Access::ColVector) => Self::at(m, i, 0)?,
                    (Operand::Matrix(m), Access::RowVector) => Self::at(m, 0, j)?,
                    (Operand::Matrix(m), Access::Scalar) => Self::at(m, 0, 0)?,
                    (Operand::Matrix(_), &access) => return err(Invalid::AccessPerCell { access }),
                }
            }
            CNode::Literal { value } => literal(value)?,
            CNode::Unary { f, x } => f.apply(at(*x)?),
            CNode::Pow2 { x } => {
                let v = at(*x)?;
                v * v
            }
            CNode::Mult2 { x } => {
                let v = at(*x)?;
                v + v
            }
            CNode::Binary { f, a, b } => f.apply(at(*a)?, at(*b)?),
            CNode::Ternary { f, a, b, c } => ternary(*f, at(*a)?, at(*b)?, at(*c)?),
            CNode::Nary { f, xs } => {
                let vs = xs.iter().map(|&x| at(x)).collect::<Result<Vec<_>>>()?;
                nary(*f, &vs)?
            }
            // `t(a) %*% b`: unfused, a zero of the left operand is skipped, as `%*%` skips it.
            CNode::DotCell { a, b } => match at(*a)? {
                0.0 if self.skip_left_zeros => 0.0,
                x => x * at(*b)?,
            },
            CNode::Transpose { x } => self.cell_at(*x, j, i, !swapped, memo)?,
            CNode::OuterDot { u, v } => {
                let (
                    CNode::Data { input: ui, .. },
                    CNode::Data {
                        input: vi,
                        access: va,
                    },
                ) = (&nodes[*u], &nodes[*v])
                else {
                    return err(Invalid::Plan("outer dot over non-data operands"));
                };
                let (um, vm) = (self.matrix(*ui)?, self.matrix(*vi)?);
                let mut s = 0.0;
                for k in 0..um.cols() {
                    let vk = match va {
                        Access::OuterV => Self::at(vm, j, k)?,
                        _ => Self::at(vm, k, j)?,
                    };
                    // Unfused, `U %*% t(V)` skips the zeros of its left operand `U`.
                    let uk = Self::at(um, i, k)?;
                    if uk != 0.0 || !self.skip_left_zeros {
                        s += uk * vk;
                    }
                }
                s
            }
            other => {
                return err(Invalid::NoCellValue {
                    node: other.clone(),
                })
            }
        };
        Ok(if self.matrix_cells[n] {
            matrix_cell(v)
        } else {
            v
        })
    }

    /// The body at every cell of its shape (the main input's, or its transpose when the body
    /// transposes it, see [`CPlan::transposes_main`]), as a dense matrix.
    fn cell_values(&self, main: &Matrix, out: CNodeId) -> Result<Matrix> {
        let (m, n) = match self.plan.transposes_main(out) {
            Some(true) => (main.cols(), main.rows()),
            _ => main.shape(),
        };
        let mut vals = rt(lafuse_runtime::matrix::try_with_capacity(m * n))?;
        let mut memo = CellMemo::new(self.plan);
        for i in 0..m {
            for j in 0..n {
                memo.start();
                vals.push(self.cell(out, i, j, &mut memo)?);
            }
        }
        rt(Matrix::from_dense_values(m, n, vals))
    }

    fn cell_template(
        &self,
        main: &Matrix,
        out: CNodeId,
        ty: CellType,
        agg: Option<CellAgg>,
    ) -> Result<Matrix> {
        let mut vals = self.cell_values(main, out)?;
        let Some(agg) = agg else {
            return Ok(vals);
        };
        let op = match agg {
            CellAgg::Sum => AggOp::Sum,
            CellAgg::SumSq => {
                // The skeleton squares while summing (reference 3.1); `x ^ 2` as unfused.
                vals = rt(kernels::binary_scalar(&vals, 2.0, BinaryOp::Pow, false))?;
                AggOp::Sum
            }
            CellAgg::Min => AggOp::Min,
            CellAgg::Max => AggOp::Max,
        };
        let dir = match ty {
            CellType::NoAgg => return Ok(vals),
            CellType::RowAgg => Direction::Row,
            CellType::ColAgg => Direction::Col,
            CellType::FullAgg => Direction::Full,
        };
        rt(kernels::aggregate(&vals, op, dir))
    }

    // ---- Outer -------------------------------------------------------------------------------

    fn outer_template(&self, main: &Matrix, ty: OuterType) -> Result<Matrix> {
        let out = self.plan.outputs[0];
        let (g_node, w) = match (&self.plan.nodes[out], ty) {
            (
                CNode::FinalProduct { g, w },
                OuterType::Left | OuterType::LeftT | OuterType::Right,
            ) => {
                let CNode::Data { input, access } = self.plan.nodes[*w] else {
                    return err(Invalid::Plan("final product operand is not an input"));
                };
                let matrix = self.matrix(input)?;
                // A Left product's `t(U)` given as U (`Access::OuterU`).
                let operand = if access == Access::OuterU {
                    Cow::Owned(rt(kernels::transpose(matrix))?)
                } else {
                    Cow::Borrowed(matrix)
                };
                (*g, Some(operand))
            }
            (_, OuterType::CellWise | OuterType::FullAgg) => (out, None),
            _ => return err(Invalid::Plan("outer type does not match its output node")),
        };
        // G: the body at the driver's non-zeros (reference 6.5); elsewhere the unfused value
        // `0 * body` (the template's `X * f`, or `(X != 0) * f` with the mask simplified away):
        // 0, or NaN where the body is not finite.
        let (m, n) = main.shape();
        let mut vals = rt(lafuse_runtime::matrix::try_alloc_zeroed(m * n))?;
        let mut memo = CellMemo::new(self.plan);
        for i in 0..m {
            for j in 0..n {
                memo.start();
                let g = self.cell(g_node, i, j, &mut memo)?;
                vals[i * n + j] = if main.get(i, j) != 0.0 { g } else { 0.0 * g };
            }
        }
        let g = rt(Matrix::from_dense_values(m, n, vals))?;
        match (ty, w) {
            (OuterType::CellWise, _) => Ok(g),
            (OuterType::FullAgg, _) => rt(kernels::aggregate(&g, AggOp::Sum, Direction::Full)),
            (OuterType::Right, Some(w)) => rt(kernels::matmul(&g, &w)),
            (OuterType::LeftT, Some(w)) => rt(kernels::matmul(&w, &g)),
            (OuterType::Left, Some(w)) => rt(kernels::transpose(&rt(kernels::matmul(&w, &g))?)),
            _ => err(Invalid::Plan("final product without its matrix")),
        }
    }

    // ---- Row ---------------------------------------------------------------------------------

    /// All node values for row `i`, in node order (operands come first).
    fn row(&self, i: usize) -> Result<Vec<RVal>> {
        let mut vals: Vec<RVal> = Vec::with_capacity(self.plan.nodes.len());
        let row_of = |m: &Matrix, r: usize| -> Result<Vec<f64>> {
            (0..m.cols()).map(|j| Self::at(m, r, j)).collect()
        };
        for (n, node) in self.plan.nodes.iter().enumerate() {
            let v = match node {
                CNode::Data { input, access } => match (self.input(*input)?, access) {
                    (Operand::Scalar(s), _) => RVal::Scalar(s),
                    (Operand::Matrix(m), Access::Main | Access::Aligned) => {
                        RVal::Vector(row_of(m, i)?)
                    }
                    (Operand::Matrix(m), Access::ColVector) => RVal::Scalar(Self::at(m, i, 0)?),
                    (Operand::Matrix(m), Access::RowVector) => RVal::Vector(row_of(m, 0)?),
                    (Operand::Matrix(m), Access::Scalar) => RVal::Scalar(Self::at(m, 0, 0)?),
                    (Operand::Matrix(_), Access::Whole) => RVal::Whole(*input),
                    (_, &access) => return err(Invalid::AccessInRowPlan { access }),
                },
                CNode::Literal { value } => RVal::Scalar(literal(value)?),
                CNode::Unary { f, x } => map1(&vals[*x], |v| Ok(f.apply(v)))?,
                CNode::Pow2 { x } => map1(&vals[*x], |v| Ok(v * v))?,
                CNode::Mult2 { x } => map1(&vals[*x], |v| Ok(v + v))?,
                CNode::Binary { f, a, b } => {
                    mapn(&[&vals[*a], &vals[*b]], |xs| Ok(f.apply(xs[0], xs[1])))?
                }
                CNode::Ternary { f, a, b, c } => mapn(&[&vals[*a], &vals[*b], &vals[*c]], |xs| {
                    Ok(ternary(*f, xs[0], xs[1], xs[2]))
                })?,
                CNode::Nary {
                    f: NaryOp::Cbind,
                    xs,
                } => {
                    let mut out = Vec::new();
                    for &x in xs {
                        out.extend(as_vector(&vals[x])?);
                    }
                    RVal::Vector(out)
                }
                CNode::Nary { f, xs } => {
                    let ops: Vec<&RVal> = xs.iter().map(|&x| &vals[x]).collect();
                    mapn(&ops, |v| nary(*f, v))?
                }
                CNode::RowAgg { f, x } => RVal::Scalar(agg_vector(*f, &as_vector(&vals[*x])?)?),
                CNode::RowSumSq { x } => {
                    let v = as_vector(&vals[*x])?;
                    let sq: Vec<f64> = v.iter().map(|a| a * a).collect();
                    RVal::Scalar(agg_vector(AggOp::Sum, &sq)?)
                }
                CNode::VectMatMult { a, b } => {
                    let RVal::Whole(k) = vals[*b] else {
                        return err(Invalid::Plan("row-times-matrix without a whole matrix"));
                    };
                    let bm = self.matrix(k)?;
                    let av = as_vector(&vals[*a])?;
                    if av.len() != bm.rows() {
                        return err(Invalid::Plan("row-times-matrix size mismatch"));
                    }
                    let mut out = vec![0.0; bm.cols()];
                    for (c, o) in out.iter_mut().enumerate() {
                        // The row is the left operand, whose zeros `%*%` skips unfused.
                        let skip = self.skip_left_zeros;
                        for (l, x) in av.iter().enumerate().filter(|(_, x)| **x != 0.0 || !skip) {
                            *o += x * bm.get(l, c);
                        }
                    }
                    RVal::Vector(out)
                }
                CNode::OuterMultAdd { a, b } => {
                    RVal::Outer(as_vector(&vals[*a])?, as_vector(&vals[*b])?)
                }
                other => {
                    return err(Invalid::NodeInRowPlan {
                        node: other.clone(),
                    })
                }
            };
            let v = match v {
                RVal::Scalar(x) if self.matrix_cells[n] => RVal::Scalar(matrix_cell(x)),
                RVal::Vector(xs) if self.matrix_cells[n] => {
                    RVal::Vector(xs.into_iter().map(matrix_cell).collect())
                }
                v => v,
            };
            vals.push(v);
        }
        Ok(vals)
    }

    fn row_template(&self, main: &Matrix, ty: RowType, shape: (usize, usize)) -> Result<Matrix> {
        let (rows, cols) = shape;
        let mut out = rt(lafuse_runtime::matrix::try_alloc_zeroed(rows * cols))?;
        let out_node = self.plan.outputs[0];
        for i in 0..main.rows() {
            let vals = self.row(i)?;
            let v = &vals[out_node];
            match ty {
                RowType::NoAgg | RowType::NoAggB1 | RowType::NoAggConst | RowType::RowAgg => {
                    // Row i of the output.
                    let vec = as_vector(v)?;
                    if i >= rows || vec.len() != cols {
                        return err(Invalid::Plan("row output does not fit the output shape"));
                    }
                    out[i * cols..(i + 1) * cols].copy_from_slice(&vec);
                }
                RowType::ColAgg | RowType::ColAggB1R | RowType::ColAggConst => {
                    // The rows' vectors summed.
                    let vec = as_vector(v)?;
                    if rows != 1 || vec.len() != cols {
                        return err(Invalid::Plan(
                            "column aggregate does not fit the output shape",
                        ));
                    }
                    for (o, x) in out.iter_mut().zip(&vec) {
                        *o += x;
                    }
                }
                RowType::ColAggT | RowType::ColAggB1 | RowType::ColAggB1T => {
                    // `out += t(a_i) %*% b_i`.
                    let RVal::Outer(a, b) = v else {
                        return err(Invalid::Plan(
                            "final product output is not an outer accumulation",
                        ));
                    };
                    if a.len() != rows || b.len() != cols {
                        return err(Invalid::Plan("final product does not fit the output shape"));
                    }
                    // `t(a_i)` is the left operand, whose zeros `%*%` skips unfused.
                    let skip = self.skip_left_zeros;
                    for (r, x) in a.iter().enumerate().filter(|(_, x)| **x != 0.0 || !skip) {
                        for (c, y) in b.iter().enumerate() {
                            out[r * cols + c] += x * y;
                        }
                    }
                }
                RowType::FullAgg => {
                    if rows * cols != 1 {
                        return err(Invalid::Plan("full aggregate output must be 1x1"));
                    }
                    out[0] += as_vector(v)?.iter().sum::<f64>();
                }
            }
        }
        rt(Matrix::from_dense_values(rows, cols, out))
    }
}

/// A row value as a vector (a scalar is a vector of length one).
/// One cell's node values (see [`Eval::cell`]).
struct CellMemo {
    values: Vec<Option<f64>>,
    /// The slots set since [`CellMemo::start`], so that starting the next cell costs what the
    /// last one computed, not the body's size.
    set: Vec<usize>,
}

impl CellMemo {
    fn new(plan: &CPlan) -> CellMemo {
        CellMemo {
            values: vec![None; 2 * plan.nodes.len()],
            set: Vec::new(),
        }
    }

    /// Forgets the previous cell's values.
    fn start(&mut self) {
        for slot in self.set.drain(..) {
            self.values[slot] = None;
        }
    }
}

fn as_vector(v: &RVal) -> Result<Vec<f64>> {
    match v {
        RVal::Scalar(s) => Ok(vec![*s]),
        RVal::Vector(v) => Ok(v.clone()),
        _ => err(Invalid::Plan("a matrix or product used as a row value")),
    }
}

fn map1(v: &RVal, f: impl Fn(f64) -> Result<f64>) -> Result<RVal> {
    mapn(&[v], |xs| f(xs[0]))
}

/// Applies `f` element-wise over scalars and equal-length vectors (length-one vectors and
/// scalars broadcast, as DML broadcasts column vectors against a row).
fn mapn(vs: &[&RVal], f: impl Fn(&[f64]) -> Result<f64>) -> Result<RVal> {
    let mut len: Option<usize> = None;
    for v in vs {
        match v {
            RVal::Scalar(_) => {}
            RVal::Vector(x) => {
                len = Some(match len {
                    None | Some(1) => x.len(),
                    Some(l) if x.len() == 1 || x.len() == l => l,
                    Some(_) => {
                        return err(Invalid::Plan("element-wise operands of different lengths"))
                    }
                });
            }
            _ => return err(Invalid::Plan("a matrix or product used element-wise")),
        }
    }
    let get = |v: &RVal, k: usize| match v {
        RVal::Scalar(s) => *s,
        RVal::Vector(x) if x.len() == 1 => x[0],
        RVal::Vector(x) => x[k],
        _ => f64::NAN,
    };
    let at = |k: usize| f(&vs.iter().map(|v| get(v, k)).collect::<Vec<_>>());
    match len {
        None => Ok(RVal::Scalar(at(0)?)),
        Some(l) => (0..l).map(at).collect::<Result<Vec<_>>>().map(RVal::Vector),
    }
}

#[cfg(test)]
mod tests {
    //! Differential tests: each pattern's DAG is planned with fuse-all, its CPlans built, and
    //! every fused operator evaluated on the inputs the unfused DAG computes for it; the
    //! outputs must match what the unfused kernels compute for the hops it replaces.
    use super::*;
    use lafuse_compiler::fusion::cplan::{construct_cplans, FusedProgram};
    use lafuse_compiler::fusion::ExploreOptions;
    use lafuse_compiler::fusion::{
        explore, plan_fusion, CostBased, FuseAll, FusionDag, MemoEntry, PlanSelector, Selection,
        TemplateKind,
    };
    use lafuse_compiler::hops::{
        AggOp, BinaryOp as B, DagBuilder, DataType, Direction, HopDag, HopId, OpKind, ReorgOp,
        UnaryOp as U,
    };
    use std::collections::HashMap;

    #[derive(Clone, Debug)]
    enum Val {
        S(f64),
        M(Matrix),
    }

    /// The unfused value of `h`, computed with the runtime kernels.
    fn unfused(
        dag: &HopDag,
        env: &HashMap<&str, Matrix>,
        h: HopId,
        memo: &mut HashMap<HopId, Val>,
    ) -> Val {
        if let Some(v) = memo.get(&h) {
            return v.clone();
        }
        let hop = dag.hop(h);
        let ins: Vec<Val> = hop
            .inputs
            .iter()
            .map(|&i| unfused(dag, env, i, memo))
            .collect();
        let v = match (&hop.op, ins.as_slice()) {
            (OpKind::TransientRead { name }, _) => Val::M(env[name.as_str()].clone()),
            (OpKind::Literal(l), _) => Val::S(l.as_f64().unwrap()),
            (OpKind::TransientWrite { .. }, [x]) => x.clone(),
            (OpKind::Unary(f), [Val::M(x)]) => Val::M(kernels::unary(x, *f).unwrap()),
            (OpKind::Binary(f), [Val::M(a), Val::M(b)]) => {
                Val::M(kernels::binary(a, b, *f).unwrap())
            }
            (OpKind::Binary(f), [Val::M(a), Val::S(s)]) => {
                Val::M(kernels::binary_scalar(a, *s, *f, false).unwrap())
            }
            (OpKind::Binary(f), [Val::S(s), Val::M(a)]) => {
                Val::M(kernels::binary_scalar(a, *s, *f, true).unwrap())
            }
            (OpKind::Binary(f), [Val::S(a), Val::S(b)]) => Val::S(f.apply(*a, *b)),
            (OpKind::AggUnary { op, dir }, [Val::M(x)]) => {
                let r = kernels::aggregate(x, *op, *dir).unwrap();

                if hop.data_type == DataType::Scalar {
                    Val::S(r.get(0, 0))
                } else {
                    Val::M(r)
                }
            }
            (OpKind::MatMul, [Val::M(a), Val::M(b)]) => Val::M(kernels::matmul(a, b).unwrap()),
            (OpKind::Nary(lafuse_compiler::hops::NaryOp::Cbind), ms) => {
                let ms: Vec<&Matrix> = ms
                    .iter()
                    .map(|v| match v {
                        Val::M(m) => m,
                        Val::S(_) => panic!("cbind of a scalar"),
                    })
                    .collect();
                Val::M(kernels::cbind(&ms).unwrap())
            }
            (OpKind::Reorg(ReorgOp::Transpose), [Val::M(x)]) => {
                Val::M(kernels::transpose(x).unwrap())
            }
            (op, _) => panic!("test oracle lacks {op:?}"),
        };
        memo.insert(h, v.clone());
        v
    }

    fn close(a: f64, b: f64) -> bool {
        (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()))
    }

    fn assert_same(fused: &Matrix, want: &Val, what: &str) {
        let want = match want {
            Val::S(s) => Matrix::scalar(*s),
            Val::M(m) => m.clone(),
        };
        assert_eq!(fused.shape(), want.shape(), "{what}: shape");
        for i in 0..want.rows() {
            for j in 0..want.cols() {
                let (f, w) = (fused.get(i, j), want.get(i, j));
                assert!(close(f, w), "{what}: ({i},{j}) fused {f} vs unfused {w}");
            }
        }
    }

    /// Plans `dag` with fuse-all, once with every template and once without Row (so Cell
    /// plans are built where Row would win), checks every operator against the unfused DAG on
    /// `env`, and returns both programs.
    fn check(dag: &HopDag, env: &HashMap<&str, Matrix>) -> [FusedProgram; 2] {
        let all = ExploreOptions {
            prune_dominated: true,
            ..ExploreOptions::default()
        };
        [all, all.without(TemplateKind::Row)].map(|options| {
            let view = FusionDag::new(dag).unwrap();
            let mut memo = explore(&view, &options);
            let sel = FuseAll.select(&view, &mut memo).unwrap();
            let prog = construct_cplans(dag, &memo, &sel).unwrap();
            run(dag, &prog, env);
            println!("{}", prog.explain());
            prog
        })
    }

    fn run(dag: &HopDag, prog: &FusedProgram, env: &HashMap<&str, Matrix>) {
        let mut memo = HashMap::new();
        for op in &prog.operators {
            let inputs: Vec<Val> = op
                .inputs
                .iter()
                .map(|&h| unfused(dag, env, h, &mut memo))
                .collect();
            let operands: Vec<Operand<'_>> = inputs
                .iter()
                .map(|v| match v {
                    Val::S(s) => Operand::Scalar(*s),
                    Val::M(m) => Operand::Matrix(m),
                })
                .collect();
            let wants: Vec<Val> = op
                .outputs
                .iter()
                .map(|&h| unfused(dag, env, h, &mut memo))
                .collect();
            let shapes: Vec<(usize, usize)> = wants
                .iter()
                .map(|w| match w {
                    Val::S(_) => (1, 1),
                    Val::M(m) => m.shape(),
                })
                .collect();
            let got = evaluate(&op.cplan, &operands, &shapes)
                .unwrap_or_else(|e| panic!("{e}\n{}", op.cplan.explain()));
            for (g, w) in got.iter().zip(&wants) {
                assert_same(g, w, &op.cplan.explain());
            }
        }
    }

    /// A deterministic pseudo-random dense or sparse matrix.
    fn mat(rows: usize, cols: usize, density: f64, seed: u64) -> Matrix {
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64) / ((1u64 << 53) as f64)
        };
        let vals: Vec<f64> = (0..rows * cols)
            .map(|_| {
                let keep = next() < density;
                let v = next() * 2.0 - 0.5;
                if keep {
                    v
                } else {
                    0.0
                }
            })
            .collect();
        Matrix::from_dense_values(rows, cols, vals)
            .unwrap()
            .examine_and_convert()
            .unwrap()
    }

    fn nnz(m: &Matrix) -> u64 {
        m.nnz() as u64
    }

    fn templates(p: &FusedProgram) -> Vec<(String, String)> {
        p.operators
            .iter()
            .map(|o| {
                (
                    o.cplan.template.name().to_string(),
                    o.cplan.template.variant(),
                )
            })
            .collect()
    }

    #[test]
    fn sum_of_a_three_way_product_with_sparse_and_special_values() {
        let x = mat(40, 30, 0.1, 1);
        let mut yv = mat(40, 30, 1.0, 2).into_dense_values().unwrap();
        yv[5] = f64::INFINITY;
        yv[77] = f64::NAN;
        let y = Matrix::from_dense_values(40, 30, yv).unwrap();
        let z = mat(40, 30, 1.0, 3);
        let mut b = DagBuilder::new();
        let (hx, hy, hz) = (
            b.input("X", 40, 30, nnz(&x)),
            b.input("Y", 40, 30, 1200),
            b.input("Z", 40, 30, 1200),
        );
        let xy = b.binary(B::Mul, hx, hy).unwrap();
        let xyz = b.binary(B::Mul, xy, hz).unwrap();
        let s = b.agg(AggOp::Sum, Direction::Full, xyz).unwrap();
        b.output("s", s).unwrap();
        let dag = b.build().unwrap();
        let env: HashMap<&str, Matrix> = [("X", x), ("Y", y), ("Z", z)].into_iter().collect();
        let [row, cell] = check(&dag, &env);
        // With Row allowed the template ranks pick a Row plan, built as the Cell plan it
        // equals (a cell-wise body).
        assert_eq!(
            templates(&row),
            [("cell".to_string(), "full_agg".to_string())]
        );
        assert_eq!(
            templates(&cell),
            [("cell".to_string(), "full_agg".to_string())]
        );
        assert_eq!(row.operators[0].outputs, vec![s]);
        // The special values reach the result as in the unfused DAG (NaN in Y).
        let mut memo = HashMap::new();
        assert!(matches!(unfused(&dag, &env, s, &mut memo), Val::S(v) if v.is_nan()));
    }

    #[test]
    fn row_sums_col_sums_and_the_row_final_product() {
        let x = mat(50, 20, 0.3, 4);
        let y = mat(50, 20, 1.0, 5);
        let v = mat(20, 1, 1.0, 6);
        let w = mat(50, 1, 1.0, 7);
        let mut b = DagBuilder::new();
        let hx = b.input("X", 50, 20, nnz(&x));
        let hy = b.input("Y", 50, 20, 1000);
        let hv = b.input("v", 20, 1, 20);
        let hw = b.input("w", 50, 1, 50);
        let xy = b.binary(B::Mul, hx, hy).unwrap();
        let rs = b.agg(AggOp::Sum, Direction::Row, xy).unwrap();
        let ex = b.unary(U::Exp, hx).unwrap();
        let cs = b.agg(AggOp::Sum, Direction::Col, ex).unwrap();
        let xv = b.matmul(hx, hv).unwrap();
        let wxv = b.binary(B::Mul, hw, xv).unwrap();
        let xt = b.transpose(hx).unwrap();
        let r = b.matmul(xt, wxv).unwrap();
        b.output("rs", rs).unwrap();
        b.output("cs", cs).unwrap();
        b.output("r", r).unwrap();
        let dag = b.build().unwrap();
        let env: HashMap<&str, Matrix> = [("X", x), ("Y", y), ("v", v), ("w", w)]
            .into_iter()
            .collect();
        let [prog, cell] = check(&dag, &env);
        let t = templates(&prog);
        assert!(t.contains(&("row".into(), "col_agg_t".into())), "{t:?}");
        let tc = templates(&cell);
        assert!(tc.contains(&("cell".into(), "row_agg".into())), "{tc:?}");
        assert!(tc.contains(&("cell".into(), "col_agg".into())), "{tc:?}");
        assert!(
            prog.operators.iter().any(|o| o.outputs == vec![rs]),
            "{t:?}"
        );
        assert!(
            prog.operators.iter().any(|o| o.outputs == vec![cs]),
            "{t:?}"
        );
    }

    #[test]
    fn multi_aggregate_of_two_sums() {
        let x = mat(30, 30, 0.5, 8);
        let y = mat(30, 30, 1.0, 9);
        let z = mat(30, 30, 1.0, 10);
        let mut b = DagBuilder::new();
        let hx = b.input("X", 30, 30, nnz(&x));
        let hy = b.input("Y", 30, 30, 900);
        let hz = b.input("Z", 30, 30, 900);
        let xy = b.binary(B::Mul, hx, hy).unwrap();
        let xz = b.binary(B::Mul, hx, hz).unwrap();
        let s1 = b.agg(AggOp::Sum, Direction::Full, xy).unwrap();
        let s2 = b.agg(AggOp::Sum, Direction::Full, xz).unwrap();
        let s = b.binary(B::Add, s1, s2).unwrap();
        b.output("s", s).unwrap();
        let dag = b.build().unwrap();
        let env: HashMap<&str, Matrix> = [("X", x), ("Y", y), ("Z", z)].into_iter().collect();
        // Fuse-all builds two structurally equal operators: one operator-cache key.
        let [prog, _] = check(&dag, &env);
        assert_eq!(prog.operators.len(), 2);
        assert_eq!(
            prog.operators[0].cplan.structural_hash(),
            prog.operators[1].cplan.structural_hash()
        );
        // The MultiAgg plan (which only cost-based selection creates): both sums over the
        // Cell bodies of their inputs, in one scan.
        let view = FusionDag::new(&dag).unwrap();
        let memo = explore(&view, &ExploreOptions::default());
        let mut sel = Selection::default();
        sel.roots.insert(s1, MemoEntry::magg(&[s1, s2]));
        for (agg, prod) in [(s1, xy), (s2, xz)] {
            let body = |h: HopId| {
                memo.group(h)
                    .iter()
                    .filter(|e| e.template == TemplateKind::Cell)
                    .max_by_key(|e| e.num_refs())
                    .unwrap()
                    .clone()
            };
            sel.plans.insert(agg, vec![body(agg)]);
            sel.plans.insert(prod, vec![body(prod)]);
        }
        let magg = construct_cplans(&dag, &memo, &sel).unwrap();
        assert_eq!(
            templates(&magg),
            [("magg".to_string(), "full_agg".to_string())]
        );
        let op = &magg.operators[0];
        assert_eq!(op.outputs, vec![s1, s2]);
        // X is shared: three inputs, the main input read once by both outputs (CSE).
        assert_eq!(op.inputs.len(), 3);
        let mains = op
            .cplan
            .nodes
            .iter()
            .filter(|n| {
                matches!(
                    n,
                    CNode::Data {
                        access: Access::Main,
                        ..
                    }
                )
            })
            .count();
        assert_eq!(mains, 1);
        run(&dag, &magg, &env);
        let json = magg.to_json();
        assert!(json.contains("\"template\": \"magg\""), "{json}");
        assert!(json.contains("\"variant\": \"full_agg\""), "{json}");
        // The same through the cost-based policy: the two sums are in different plan
        // partitions (no fused intermediate connects them), so `gen` merges them with an
        // across-partition MultiAgg (reference 4.7), whose two outputs equal the unfused sums.
        let plan = plan_fusion(&dag, &CostBased::default()).unwrap();
        let gen = construct_cplans(&dag, &plan.memo, &plan.selection).unwrap();
        assert_eq!(
            templates(&gen),
            [("magg".to_string(), "full_agg".to_string())]
        );
        assert_eq!(gen.operators[0].outputs, vec![s1, s2]);
        run(&dag, &gen, &env);
    }

    #[test]
    fn outer_product_with_a_sparse_driver() {
        let (m, n, k) = (300, 280, 4);
        let x = mat(m, n, 0.02, 11);
        // Positive factors keep the log finite.
        let (u, v) = factors(m, n, k);
        let mut b = DagBuilder::new();
        let hx = b.input("X", m as u64, n as u64, nnz(&x));
        let hu = b.input("U", m as u64, k as u64, (m * k) as u64);
        let hv = b.input("V", n as u64, k as u64, (n * k) as u64);
        let vt = b.transpose(hv).unwrap();
        let uv = b.matmul(hu, vt).unwrap();
        let eps = b.literal_f64(1e-15);
        let pe = b.binary(B::Add, uv, eps).unwrap();
        let lg = b.unary(U::Log, pe).unwrap();
        let xl = b.binary(B::Mul, hx, lg).unwrap();
        let s = b.agg(AggOp::Sum, Direction::Full, xl).unwrap();
        b.output("s", s).unwrap();
        let dag = b.build().unwrap();
        let env: HashMap<&str, Matrix> = [("X", x), ("U", u), ("V", v)].into_iter().collect();
        let [prog, _] = check(&dag, &env);
        assert_eq!(
            templates(&prog),
            vec![("outer".to_string(), "full_agg".to_string())]
        );
    }

    fn factors(m: usize, n: usize, k: usize) -> (Matrix, Matrix) {
        let u = Matrix::from_dense_values(
            m,
            k,
            (0..m * k).map(|i| 0.1 + (i % 7) as f64 * 0.05).collect(),
        )
        .unwrap();
        let v = Matrix::from_dense_values(
            n,
            k,
            (0..n * k).map(|i| 0.2 + (i % 5) as f64 * 0.03).collect(),
        )
        .unwrap();
        (u, v)
    }

    #[test]
    fn outer_final_products_and_the_dropped_mask() {
        let (m, n, k) = (300, 270, 3);
        let x = mat(m, n, 0.02, 12);
        let (u, v) = factors(m, n, k);
        let mut b = DagBuilder::new();
        let hx = b.input("X", m as u64, n as u64, nnz(&x));
        let hu = b.input("U", m as u64, k as u64, (m * k) as u64);
        let hv = b.input("V", n as u64, k as u64, (n * k) as u64);
        // R = (X * (U %*% t(V))) %*% V; L = t(t(U) %*% (X * (U %*% t(V))));
        // M = (X != 0) * exp(U %*% t(V)) (the mask simplified away).
        let vt = b.transpose(hv).unwrap();
        let uv = b.matmul(hu, vt).unwrap();
        let w = b.binary(B::Mul, hx, uv).unwrap();
        let r = b.matmul(w, hv).unwrap();
        let ut = b.transpose(hu).unwrap();
        let vt2 = b.transpose(hv).unwrap();
        let uv2 = b.matmul(hu, vt2).unwrap();
        let w2 = b.binary(B::Mul, hx, uv2).unwrap();
        let utw = b.matmul(ut, w2).unwrap();
        let l = b.transpose(utw).unwrap();
        let vt3 = b.transpose(hv).unwrap();
        let uv3 = b.matmul(hu, vt3).unwrap();
        let e = b.unary(U::Exp, uv3).unwrap();
        let zero = b.literal_f64(0.0);
        let nz = b.binary(B::Ne, hx, zero).unwrap();
        let mk = b.binary(B::Mul, nz, e).unwrap();
        b.output("R", r).unwrap();
        b.output("L", l).unwrap();
        b.output("M", mk).unwrap();
        let dag = b.build().unwrap();
        let env: HashMap<&str, Matrix> = [("X", x), ("U", u), ("V", v)].into_iter().collect();
        let [prog, _] = check(&dag, &env);
        let t = templates(&prog);
        assert!(t.contains(&("outer".into(), "right".into())), "{t:?}");
        assert!(t.contains(&("outer".into(), "cell_wise".into())), "{t:?}");
        assert!(
            t.iter()
                .any(|(tpl, v)| tpl == "outer" && v.starts_with("left")),
            "{t:?}"
        );
    }

    #[test]
    fn cell_dot_products_vectors_and_special_values() {
        let n = 60;
        let mut xv = mat(n, 1, 1.0, 13).into_dense_values().unwrap();
        xv[3] = f64::NEG_INFINITY;
        let xs = Matrix::from_dense_values(n, 1, xv).unwrap();
        let y = mat(n, 1, 0.5, 14);
        let z = mat(n, 1, 1.0, 15);
        let a = mat(n, 40, 1.0, 16);
        let mut cv = mat(1, 40, 1.0, 17).into_dense_values().unwrap();
        cv[7] = f64::NAN;
        let c = Matrix::from_dense_values(1, 40, cv).unwrap();
        let mut b = DagBuilder::new();
        let hx = b.input("x", n as u64, 1, n as u64);
        let hy = b.input("y", n as u64, 1, nnz(&y));
        let hz = b.input("z", n as u64, 1, n as u64);
        let ha = b.input("A", n as u64, 40, (n * 40) as u64);
        let hc = b.input("c", 1, 40, 40);
        // d = t(x) %*% (exp(y) * z); B = (A - c) * exp(A) + x; m = max(abs(A) / c)
        let xt = b.transpose(hx).unwrap();
        let ey = b.unary(U::Exp, hy).unwrap();
        let eyz = b.binary(B::Mul, ey, hz).unwrap();
        let d = b.matmul(xt, eyz).unwrap();
        let amc = b.binary(B::Sub, ha, hc).unwrap();
        let ea = b.unary(U::Exp, ha).unwrap();
        let p = b.binary(B::Mul, amc, ea).unwrap();
        let bm = b.binary(B::Add, p, hx).unwrap();
        let ab = b.unary(U::Abs, ha).unwrap();
        let q = b.binary(B::Div, ab, hc).unwrap();
        let mx = b.agg(AggOp::Max, Direction::Full, q).unwrap();
        b.output("d", d).unwrap();
        b.output("B", bm).unwrap();
        b.output("m", mx).unwrap();
        let dag = b.build().unwrap();
        let env: HashMap<&str, Matrix> = [("x", xs), ("y", y), ("z", z), ("A", a), ("c", c)]
            .into_iter()
            .collect();
        let [_, cell] = check(&dag, &env);
        let t = templates(&cell);
        assert!(t.contains(&("cell".into(), "no_agg".into())), "{t:?}");
        assert!(t.contains(&("cell".into(), "full_agg".into())), "{t:?}");
        assert!(
            cell.operators.iter().any(|o| o
                .cplan
                .nodes
                .iter()
                .any(|n| matches!(n, CNode::DotCell { .. }))),
            "{}",
            cell.explain()
        );
    }

    #[test]
    fn row_matrix_products_and_row_aggregates() {
        let x = mat(200, 10, 0.4, 18);
        let y = mat(200, 4, 1.0, 19);
        let bm = mat(10, 3, 1.0, 20);
        let mut b = DagBuilder::new();
        let hx = b.input("X", 200, 10, nnz(&x));
        let hy = b.input("Y", 200, 4, 800);
        let hb = b.input("B", 10, 3, 30);
        // G = t(X) %*% exp(Y); H = exp(X %*% B) - rowMaxs(X); k = rowMins(sqrt(abs(X)) * 3)
        let xt = b.transpose(hx).unwrap();
        let ey = b.unary(U::Exp, hy).unwrap();
        let g = b.matmul(xt, ey).unwrap();
        let xb = b.matmul(hx, hb).unwrap();
        let exb = b.unary(U::Exp, xb).unwrap();
        let rm = b.agg(AggOp::Max, Direction::Row, hx).unwrap();
        let h = b.binary(B::Sub, exb, rm).unwrap();
        let ab = b.unary(U::Abs, hx).unwrap();
        let sq = b.unary(U::Sqrt, ab).unwrap();
        let three = b.literal_f64(3.0);
        let s3 = b.binary(B::Mul, sq, three).unwrap();
        let k = b.agg(AggOp::Min, Direction::Row, s3).unwrap();
        b.output("G", g).unwrap();
        b.output("H", h).unwrap();
        b.output("k", k).unwrap();
        let dag = b.build().unwrap();
        let env: HashMap<&str, Matrix> = [("X", x), ("Y", y), ("B", bm)].into_iter().collect();
        let [prog, _] = check(&dag, &env);
        let t = templates(&prog);
        assert!(t.contains(&("row".into(), "col_agg_b1_t".into())), "{t:?}");
        // H is 200×3 = nrow(X)×ncol(B): the B1 variant of a row-wise output.
        assert!(t.contains(&("row".into(), "no_agg_b1".into())), "{t:?}");
        assert!(t.contains(&("row".into(), "row_agg".into())), "{t:?}");
    }

    /// One Row operator per row type (reference 3.2 "RowType derivation", 6.3): each DAG is
    /// planned with fuse-all, must produce the named variant, and every operator must match
    /// the unfused kernels on random data.
    #[test]
    fn every_row_type_matches_the_unfused_kernels() {
        type Build = fn(&mut DagBuilder, &[HopId]) -> HopId;
        /// (variant, inputs as (name, rows, cols), the pattern over those inputs)
        type Case = (&'static str, Vec<(&'static str, usize, usize)>, Build);
        let cases: Vec<Case> = vec![
            // X / rowSums(X): m×n, X's shape.
            ("no_agg", vec![("X", 50, 8)], |b, i| {
                let rs = b.agg(AggOp::Sum, Direction::Row, i[0]).unwrap();
                b.binary(B::Div, i[0], rs).unwrap()
            }),
            // (X * 2) %*% B: m×ncol(B).
            ("no_agg_b1", vec![("X", 50, 8), ("B", 8, 3)], |b, i| {
                let two = b.literal_f64(2.0);
                let x2 = b.binary(B::Mul, i[0], two).unwrap();
                b.matmul(x2, i[1]).unwrap()
            }),
            // cbind(X * 2, Y): m rows of another width.
            ("no_agg_const", vec![("X", 50, 8), ("Y", 50, 3)], |b, i| {
                let two = b.literal_f64(2.0);
                let x2 = b.binary(B::Mul, i[0], two).unwrap();
                b.add(
                    OpKind::Nary(lafuse_compiler::hops::NaryOp::Cbind),
                    &[x2, i[1]],
                )
                .unwrap()
            }),
            // sum(X / rowSums(X)).
            ("full_agg", vec![("X", 50, 8)], |b, i| {
                let rs = b.agg(AggOp::Sum, Direction::Row, i[0]).unwrap();
                let d = b.binary(B::Div, i[0], rs).unwrap();
                b.agg(AggOp::Sum, Direction::Full, d).unwrap()
            }),
            // (X * 2) %*% v: m×1.
            ("row_agg", vec![("X", 50, 8), ("v", 8, 1)], |b, i| {
                let two = b.literal_f64(2.0);
                let x2 = b.binary(B::Mul, i[0], two).unwrap();
                b.matmul(x2, i[1]).unwrap()
            }),
            // colSums(X / rowSums(X)): 1×n.
            ("col_agg", vec![("X", 50, 8)], |b, i| {
                let rs = b.agg(AggOp::Sum, Direction::Row, i[0]).unwrap();
                let d = b.binary(B::Div, i[0], rs).unwrap();
                b.agg(AggOp::Sum, Direction::Col, d).unwrap()
            }),
            // t(X) %*% (w * (X %*% v)): n×1.
            (
                "col_agg_t",
                vec![("X", 50, 8), ("v", 8, 1), ("w", 50, 1)],
                |b, i| {
                    let xv = b.matmul(i[0], i[1]).unwrap();
                    let p = b.binary(B::Mul, i[2], xv).unwrap();
                    let xt = b.transpose(i[0]).unwrap();
                    b.matmul(xt, p).unwrap()
                },
            ),
            // t(X %*% B) %*% X: ncol(B)×n (X long enough for the transpose-product chain).
            ("col_agg_b1", vec![("X", 1300, 10), ("B", 10, 3)], |b, i| {
                let xb = b.matmul(i[0], i[1]).unwrap();
                let t = b.transpose(xb).unwrap();
                b.matmul(t, i[0]).unwrap()
            }),
            // t(X) %*% exp(Y): n×ncol(Y).
            ("col_agg_b1_t", vec![("X", 50, 8), ("Y", 50, 3)], |b, i| {
                let ey = b.unary(U::Exp, i[1]).unwrap();
                let xt = b.transpose(i[0]).unwrap();
                b.matmul(xt, ey).unwrap()
            }),
            // colSums(X %*% B): 1×ncol(B).
            ("col_agg_b1r", vec![("X", 50, 8), ("B", 8, 3)], |b, i| {
                let xb = b.matmul(i[0], i[1]).unwrap();
                b.agg(AggOp::Sum, Direction::Col, xb).unwrap()
            }),
            // colSums(cbind(X, Y)): one row of another width.
            ("col_agg_const", vec![("X", 50, 8), ("Y", 50, 3)], |b, i| {
                let cb = b
                    .add(
                        OpKind::Nary(lafuse_compiler::hops::NaryOp::Cbind),
                        &[i[0], i[1]],
                    )
                    .unwrap();
                b.agg(AggOp::Sum, Direction::Col, cb).unwrap()
            }),
        ];
        for (k, (variant, inputs, pattern)) in cases.into_iter().enumerate() {
            let mut b = DagBuilder::new();
            let mut env: HashMap<&str, Matrix> = HashMap::new();
            let mut ids = Vec::new();
            for (j, &(name, r, c)) in inputs.iter().enumerate() {
                let m = mat(r, c, 0.9, 100 + 10 * k as u64 + j as u64);
                ids.push(b.input(name, r as u64, c as u64, nnz(&m)));
                env.insert(name, m);
            }
            let out = pattern(&mut b, &ids);
            b.output("R", out).unwrap();
            let dag = b.build().unwrap();
            let [prog, _] = check(&dag, &env);
            let t = templates(&prog);
            assert!(
                t.contains(&("row".into(), variant.into())),
                "{variant}: {t:?}\n{}",
                prog.explain()
            );
            // The JSON names are the variant names.
            let json = prog.to_json();
            assert!(
                json.contains(&format!("\"row_type\": \"{variant}\"")),
                "{json}"
            );
        }
    }

    #[test]
    fn sums_of_squares() {
        let x = mat(30, 20, 0.3, 21);
        let mut b = DagBuilder::new();
        let hx = b.input("X", 30, 20, nnz(&x));
        // sum((X + 1) ^ 2), rowSums(exp(X) ^ 2)
        let one = b.literal_f64(1.0);
        let two = b.literal_f64(2.0);
        let x1 = b.binary(B::Add, hx, one).unwrap();
        let p = b.binary(B::Pow, x1, two).unwrap();
        let s = b.agg(AggOp::Sum, Direction::Full, p).unwrap();
        let e = b.unary(U::Exp, hx).unwrap();
        let p2 = b.binary(B::Pow, e, two).unwrap();
        let r = b.agg(AggOp::Sum, Direction::Row, p2).unwrap();
        b.output("s", s).unwrap();
        b.output("r", r).unwrap();
        let dag = b.build().unwrap();
        let env: HashMap<&str, Matrix> = [("X", x)].into_iter().collect();
        let [row, cell] = check(&dag, &env);
        assert!(row.operators.iter().any(|o| o
            .cplan
            .nodes
            .iter()
            .any(|n| matches!(n, CNode::RowSumSq { .. }))));
        assert!(cell.operators.iter().any(|o| matches!(
            o.cplan.template,
            TemplateSpec::Cell {
                agg: Some(CellAgg::SumSq),
                ..
            }
        )));
    }

    #[test]
    fn plans_are_size_independent_and_evaluate_on_1x1_and_empty_inputs() {
        // rowSums(X * Y) planned at 50x20, evaluated at 1x1 and 0x3.
        let mut b = DagBuilder::new();
        let hx = b.input("X", 50, 20, 1000);
        let hy = b.input("Y", 50, 20, 1000);
        let xy = b.binary(B::Mul, hx, hy).unwrap();
        let e = b.unary(U::Exp, xy).unwrap();
        let cs = b.agg(AggOp::Sum, Direction::Col, e).unwrap();
        b.output("cs", cs).unwrap();
        let dag = b.build().unwrap();
        let plan = plan_fusion(&dag, &FuseAll).unwrap();
        let prog = construct_cplans(&dag, &plan.memo, &plan.selection).unwrap();
        assert_eq!(prog.operators.len(), 1);
        let p = &prog.operators[0].cplan;
        let one = Matrix::scalar(f64::INFINITY);
        let two = Matrix::scalar(-1.0);
        let out = evaluate(
            p,
            &[Operand::Matrix(&one), Operand::Matrix(&two)],
            &[(1, 1)],
        )
        .unwrap();
        assert_eq!(out[0].get(0, 0), 0.0); // exp(-inf)
        let e0 = Matrix::zeros(0, 3).unwrap();
        let out = evaluate(p, &[Operand::Matrix(&e0), Operand::Matrix(&e0)], &[(1, 3)]).unwrap();
        assert_eq!(out[0].shape(), (1, 3));
        assert_eq!(out[0].get(0, 2), 0.0);
    }

    #[test]
    fn malformed_calls_are_errors_not_panics() {
        let mut b = DagBuilder::new();
        let hx = b.input("X", 50, 20, 1000);
        let hy = b.input("Y", 50, 20, 1000);
        let xy = b.binary(B::Mul, hx, hy).unwrap();
        let s = b.agg(AggOp::Sum, Direction::Full, xy).unwrap();
        b.output("s", s).unwrap();
        let dag = b.build().unwrap();
        let plan = plan_fusion(&dag, &FuseAll).unwrap();
        let prog = construct_cplans(&dag, &plan.memo, &plan.selection).unwrap();
        let p = &prog.operators[0].cplan;
        let a = Matrix::zeros(3, 3).unwrap();
        let c = Matrix::zeros(2, 2).unwrap();
        assert!(evaluate(p, &[Operand::Matrix(&a)], &[(1, 1)]).is_err());
        assert!(evaluate(p, &[Operand::Scalar(1.0), Operand::Matrix(&a)], &[(1, 1)]).is_err());
        assert!(evaluate(p, &[Operand::Matrix(&a), Operand::Matrix(&c)], &[(1, 1)]).is_err());
    }
}
