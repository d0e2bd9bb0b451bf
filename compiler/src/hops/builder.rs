//! The embedder's API for building HOP DAGs directly (no script needed), also used by DAG
//! construction from the AST. Every `add` infers types and sizes immediately, so shape errors
//! surface at the call that causes them.

use super::ir::{
    AggOp, BinaryOp, DataGenOp, DataType, Direction, Hop, HopDag, HopId, Literal, OpKind, ReorgOp,
    TernaryOp, UnaryOp, ValueType,
};
use super::rewrite::constant_fold::try_fold;
use super::size::{infer_dims, infer_known, propagate_sizes};
use super::types::infer_type;
use super::verify::verify;
use crate::error::{CompileCause, CompileError, DagError, Result};
use crate::span::Span;

/// Builds a [`HopDag`] hop by hop.
///
/// ```
/// use lafuse_compiler::hops::{AggOp, BinaryOp, DagBuilder, Direction, UnaryOp};
///
/// // Y = rowSums(exp(X * 2)) %*% t(v)
/// let mut b = DagBuilder::new();
/// let x = b.input("X", 1000, 10, 5000);
/// let v = b.input("v", 1, 3, 3);
/// let two = b.literal_f64(2.0);
/// let x2 = b.binary(BinaryOp::Mul, x, two)?;
/// let e = b.unary(UnaryOp::Exp, x2)?;
/// let r = b.agg(AggOp::Sum, Direction::Row, e)?;
/// let vt = b.transpose(v)?;
/// let bad = b.matmul(r, vt); // 1000x1 times 3x1: inner dimensions differ
/// assert!(bad.is_err());
/// let y = b.matmul(r, v)?;
/// b.output("Y", y)?;
/// let dag = b.build()?;
/// assert_eq!(dag.hop(y).dims(), Some((1000, 3)));
/// assert_eq!(dag.hop(x2).nnz, Some(5000)); // X * 2 keeps zeros zero
/// # Ok::<(), lafuse_compiler::CompileError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct DagBuilder {
    dag: HopDag,
    span: Span,
    fold: bool,
}

impl DagBuilder {
    /// An empty builder; hops are added exactly as requested (no folding).
    pub fn new() -> DagBuilder {
        DagBuilder::default()
    }

    /// Turns eager constant folding on or off: with it, a scalar op over literals is added as
    /// the literal it evaluates to (what construction from scripts does).
    pub fn set_folding(&mut self, fold: bool) {
        self.fold = fold;
    }

    /// The span attached to hops added from now on (for error messages).
    pub fn set_span(&mut self, span: Span) {
        self.span = span;
    }

    /// The DAG built so far (sizes are already propagated hop by hop).
    pub fn dag(&self) -> &HopDag {
        &self.dag
    }

    /// A matrix input (a variable live at block entry) with known sizes and non-zeros.
    pub fn input(&mut self, name: &str, rows: u64, cols: u64, nnz: u64) -> HopId {
        self.input_with(
            name,
            Some(rows),
            Some(cols),
            Some(nnz.min(rows.saturating_mul(cols))),
        )
    }

    /// A matrix input whose sizes may be unknown.
    pub fn input_with(
        &mut self,
        name: &str,
        rows: Option<u64>,
        cols: Option<u64>,
        nnz: Option<u64>,
    ) -> HopId {
        let mut hop = Hop::new(
            OpKind::TransientRead {
                name: name.to_string(),
            },
            vec![],
            DataType::Matrix,
            ValueType::Double,
            self.span,
        );
        hop.rows = rows;
        hop.cols = cols;
        hop.nnz = nnz;
        self.dag.add(hop)
    }

    /// An input of no known sizes (a read of the variable `name`).
    fn unsized_input(&mut self, name: &str, data_type: DataType, value_type: ValueType) -> HopId {
        let op = OpKind::TransientRead {
            name: name.to_string(),
        };
        self.dag
            .add(Hop::new(op, vec![], data_type, value_type, self.span))
    }

    /// A list input (its length and elements are known at run time only).
    pub fn list_input(&mut self, name: &str, value_type: ValueType) -> HopId {
        self.unsized_input(name, DataType::List, value_type)
    }

    /// A frame input (its sizes are known at run time only).
    pub fn frame_input(&mut self, name: &str) -> HopId {
        self.unsized_input(name, DataType::Frame, ValueType::String)
    }

    /// A scalar input of the given value type whose value is not known at compile time.
    pub fn scalar_input(&mut self, name: &str, value_type: ValueType) -> HopId {
        self.unsized_input(name, DataType::Scalar, value_type)
    }

    /// A scalar input whose current value is known to the compiler for size inference only
    /// ([`Hop::known`]): the code reads the variable, so the plan serves other values too.
    pub fn known_scalar_input(&mut self, name: &str, value: Literal) -> HopId {
        let id = self.scalar_input(name, value.value_type());
        self.dag.hop_mut(id).known = Some(value);
        id
    }

    /// A literal scalar.
    pub fn literal(&mut self, value: Literal) -> HopId {
        self.dag.add_literal(value, self.span)
    }

    pub fn literal_f64(&mut self, v: f64) -> HopId {
        self.literal(Literal::Double(v))
    }

    pub fn literal_i64(&mut self, v: i64) -> HopId {
        self.literal(Literal::Int(v))
    }

    pub fn literal_bool(&mut self, v: bool) -> HopId {
        self.literal(Literal::Bool(v))
    }

    pub fn literal_str(&mut self, v: &str) -> HopId {
        self.literal(Literal::Str(v.to_string()))
    }

    fn err(&self, cause: impl Into<CompileCause>) -> CompileError {
        CompileError::at(cause, self.span)
    }

    /// Adds a hop of any kind with inputs in the order documented on [`OpKind`]; infers its
    /// types and sizes. Outputs, side effects and `time()` become roots (in call order).
    pub fn add(&mut self, op: OpKind, inputs: &[HopId]) -> Result<HopId> {
        let n = self.dag.len();
        for &i in inputs {
            if i.index() >= n {
                return Err(self.err(DagError::NoSuchHop { id: i, len: n }));
            }
            if self.dag.hop(i).op.is_sink() {
                return Err(self.err(DagError::SinkInput { id: i }));
            }
        }
        if matches!(op, OpKind::TransientRead { .. }) {
            return Err(self.err(DagError::TransientRead));
        }
        let types: Vec<_> = inputs
            .iter()
            .map(|&i| (self.dag.hop(i).data_type, self.dag.hop(i).value_type))
            .collect();
        let (dt, vt) = infer_type(&op, &types).map_err(|e| self.err(DagError::Type(e)))?;
        if self.fold && dt == DataType::Scalar {
            if let Some(l) = try_fold(&self.dag, &op, inputs, vt) {
                return Ok(self.literal(l));
            }
        }
        let is_root = op.is_sink() || op == OpKind::DataGen(DataGenOp::Time);
        let id = self
            .dag
            .add(Hop::new(op, inputs.to_vec(), dt, vt, self.span));
        match infer_dims(&self.dag, id) {
            Ok(d) => {
                let known = infer_known(&self.dag, id);
                let hop = self.dag.hop_mut(id);
                hop.rows = d.rows;
                hop.cols = d.cols;
                hop.nnz = d.nnz;
                hop.known = known;
            }
            Err(e) => {
                self.dag.hops.pop();
                return Err(e);
            }
        }
        if is_root {
            self.dag.roots.push(id);
        }
        Ok(id)
    }

    /// An element-wise unary op.
    pub fn unary(&mut self, op: UnaryOp, x: HopId) -> Result<HopId> {
        self.add(OpKind::Unary(op), &[x])
    }

    /// An element-wise binary op (with broadcasting of a right-hand row/column vector).
    pub fn binary(&mut self, op: BinaryOp, a: HopId, b: HopId) -> Result<HopId> {
        self.add(OpKind::Binary(op), &[a, b])
    }

    /// `ifelse(cond, yes, no)` or `replace(X, pattern, replacement)`.
    pub fn ternary(&mut self, op: TernaryOp, a: HopId, b: HopId, c: HopId) -> Result<HopId> {
        self.add(OpKind::Ternary(op), &[a, b, c])
    }

    /// An aggregation over everything, each row or each column.
    pub fn agg(&mut self, op: AggOp, dir: Direction, x: HopId) -> Result<HopId> {
        self.add(OpKind::AggUnary { op, dir }, &[x])
    }

    /// Matrix multiply `a %*% b`.
    pub fn matmul(&mut self, a: HopId, b: HopId) -> Result<HopId> {
        self.add(OpKind::MatMul, &[a, b])
    }

    /// `t(x)`.
    pub fn transpose(&mut self, x: HopId) -> Result<HopId> {
        self.add(OpKind::Reorg(ReorgOp::Transpose), &[x])
    }

    /// Right indexing with 1-based inclusive literal bounds `x[rl:ru, cl:cu]`.
    pub fn index(&mut self, x: HopId, rows: (u64, u64), cols: (u64, u64)) -> Result<HopId> {
        let b: Vec<HopId> = [rows.0, rows.1, cols.0, cols.1]
            .iter()
            .map(|&v| self.literal_i64(v.min(i64::MAX as u64) as i64))
            .collect();
        self.add(OpKind::Index, &[x, b[0], b[1], b[2], b[3]])
    }

    /// `rand(rows, cols, min, max, sparsity, seed)` with a uniform distribution.
    pub fn rand(
        &mut self,
        rows: u64,
        cols: u64,
        min: f64,
        max: f64,
        sparsity: f64,
        seed: i64,
    ) -> Result<HopId> {
        let clamp = |v: u64| v.min(i64::MAX as u64) as i64;
        let ins = [
            self.literal_i64(clamp(rows)),
            self.literal_i64(clamp(cols)),
            self.literal_f64(min),
            self.literal_f64(max),
            self.literal_f64(sparsity),
            self.literal_i64(seed),
            self.literal_str("uniform"),
            self.literal_f64(1.0),
        ];
        self.add(OpKind::DataGen(DataGenOp::Rand), &ins)
    }

    /// Binds `h`'s value to the variable `name` at the end of the block (a root).
    pub fn output(&mut self, name: &str, h: HopId) -> Result<HopId> {
        self.add(
            OpKind::TransientWrite {
                name: name.to_string(),
            },
            &[h],
        )
    }

    /// `print(h)` (a side-effect root).
    pub fn print(&mut self, h: HopId) -> Result<HopId> {
        self.add(OpKind::Print, &[h])
    }

    /// Finishes the DAG: re-runs size propagation and the verifier.
    pub fn build(self) -> Result<HopDag> {
        let mut dag = self.dag;
        propagate_sizes(&mut dag)?;
        verify(&dag).map_err(|e| CompileError::at(DagError::Invalid(e), Span::default()))?;
        Ok(dag)
    }

    /// Gives up the DAG without the final checks (construction verifies after its rewrites).
    pub(crate) fn into_dag(self) -> HopDag {
        self.dag
    }

    /// Mutable access for construction (e.g. to reorder roots).
    pub(crate) fn dag_mut(&mut self) -> &mut HopDag {
        &mut self.dag
    }
}
