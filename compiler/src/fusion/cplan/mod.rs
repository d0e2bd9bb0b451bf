//! CPlans: the template-specific operator plans built from a fusion selection (paper sections
//! 2.2 and 4.4; reference 1.5, 1.6, 1.8 and 5), with a stable structural hash (the operator-cache
//! key), explain text, a JSON form and a verifier ([`verify()`]), plus the list of fused
//! operators an executor runs in place of the hops they cover.
//!
//! A CPlan is a small DAG of [`CNode`]s in an arena (`nodes`, inputs before users) under one
//! [`TemplateSpec`]. Nodes mirror the hop operations they come from; what a node means per cell
//! or per row is fixed by the template (see [`TemplateSpec`]'s variants), which is also how the
//! reference evaluator (`lafuse_codegen::reference`) interprets it. Hop ids never appear in a
//! CPlan: inputs are numbered in first-use order with the main input first, so structurally
//! equal operators from different DAGs are equal and hash equally (reference 1.6 step 9,
//! 1.7 plan cache).

mod construct;
mod signed_zero;
pub mod verify;

pub use construct::{construct_cplans, count_vector_intermediates, FusedOperator, FusedProgram};
pub use verify::{verify, PlanDefect, VerifyError};

use crate::fusion::template::{CellAgg, CellType};
use crate::hops::{AggOp, BinaryOp, Literal, NaryOp, TernaryOp, UnaryOp};
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// Index of a node in [`CPlan::nodes`].
pub type CNodeId = usize;

/// How a fused operator reads a data input relative to its iteration space (reference 5.7,
/// 6.1 side inputs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// The main input `a`: the current cell (Cell, MultiAgg, Outer) or row (Row).
    Main,
    /// A side input of the main input's shape, read at the same cell or row.
    Aligned,
    /// A column vector (m×1) read at the current row index.
    ColVector,
    /// A row vector (1×n) read at the current column index (Row: the whole vector).
    RowVector,
    /// A scalar value or a 1×1 matrix.
    Scalar,
    /// A matrix read as a whole, the right-hand side of a row-times-matrix product (Row), or
    /// the final-product operand of an Outer operator.
    Whole,
    /// Outer template: the left factor `U` of `U %*% t(V)`, read at the current row; as the
    /// matrix of a Left final product, the `U` of `t(U) %*% G` (the transpose not taken).
    OuterU,
    /// Outer template: the right factor `V` of `U %*% t(V)`, read at the current column.
    OuterV,
}

/// One operation of a CPlan body. Element-wise operators apply cell by cell (Cell, MultiAgg,
/// Outer) or to whole row vectors with scalar broadcasting (Row).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum CNode {
    /// Data input `input` (position in [`CPlan::inputs`]) read as `access`.
    Data { input: usize, access: Access },
    /// A compiled-in literal.
    Literal { value: Literal },
    /// An element-wise unary function.
    Unary { f: UnaryOp, x: CNodeId },
    /// `x * x` (reference 5.8 rewrite 3/4, from `x ^ 2`).
    Pow2 { x: CNodeId },
    /// `x + x` (reference 5.8 rewrite 5/6, from `x * 2`).
    Mult2 { x: CNodeId },
    /// An element-wise binary operator.
    Binary { f: BinaryOp, a: CNodeId, b: CNodeId },
    /// An element-wise ternary operator.
    Ternary {
        f: TernaryOp,
        a: CNodeId,
        b: CNodeId,
        c: CNodeId,
    },
    /// An element-wise n-ary `min`/`max`, or (Row) `cbind` of row vectors.
    Nary { f: NaryOp, xs: Vec<CNodeId> },
    /// Row template: an aggregate of the current row vector (a scalar per row).
    RowAgg { f: AggOp, x: CNodeId },
    /// Row template: the sum of squares of the current row vector (reference 5.8 rewrite 2).
    RowSumSq { x: CNodeId },
    /// Row template: the current row vector times a whole matrix (`VECT_MATRIXMULT`).
    VectMatMult { a: CNodeId, b: CNodeId },
    /// Row template: the final product `t(X) %*% Y` accumulated row by row,
    /// `out += t(a_i) %*% b_i` (`VECT_OUTERMULT_ADD` / `VECT_MULT_ADD`).
    OuterMultAdd { a: CNodeId, b: CNodeId },
    /// Cell template: the dot product `t(x) %*% y` of two column vectors, summed by the
    /// template's full aggregate: per cell the product `x_i * y_i`.
    DotCell { a: CNodeId, b: CNodeId },
    /// Outer template: the cell `(i, j)` of `U %*% t(V)`, i.e. `u_i · v_j`.
    OuterDot { u: CNodeId, v: CNodeId },
    /// Outer template: the final product of the cell-wise part `g` with the whole matrix `w`,
    /// oriented as the template's [`OuterType`] says.
    FinalProduct { g: CNodeId, w: CNodeId },
    /// Cell template: a column vector read as its transpose (same cells, swapped indexes).
    Transpose { x: CNodeId },
}

impl CNode {
    /// An element-wise operation: its value at a cell (or a row's element) depends on its
    /// operands' values there only (unary, binary, ternary, n-ary `min`/`max`).
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            CNode::Unary { .. }
                | CNode::Pow2 { .. }
                | CNode::Mult2 { .. }
                | CNode::Binary { .. }
                | CNode::Ternary { .. }
                | CNode::Nary {
                    f: NaryOp::Min | NaryOp::Max,
                    ..
                }
        )
    }

    /// The node's operand ids, in order.
    pub fn operands(&self) -> Vec<CNodeId> {
        match self {
            CNode::Data { .. } | CNode::Literal { .. } => vec![],
            CNode::Unary { x, .. }
            | CNode::Pow2 { x }
            | CNode::Mult2 { x }
            | CNode::RowAgg { x, .. }
            | CNode::RowSumSq { x }
            | CNode::Transpose { x } => vec![*x],
            CNode::Binary { a, b, .. }
            | CNode::VectMatMult { a, b }
            | CNode::OuterMultAdd { a, b }
            | CNode::DotCell { a, b } => vec![*a, *b],
            CNode::OuterDot { u, v } => vec![*u, *v],
            CNode::FinalProduct { g, w } => vec![*g, *w],
            CNode::Ternary { a, b, c, .. } => vec![*a, *b, *c],
            CNode::Nary { xs, .. } => xs.clone(),
        }
    }

    /// A short operator label for explain output.
    pub(crate) fn label(&self) -> String {
        match self {
            CNode::Data { input, access } => {
                let name = if *input == 0 {
                    "a".to_string()
                } else {
                    format!("in{input}")
                };
                format!("{name}:{}", serde_plain(access))
            }
            CNode::Literal { value } => format!("lit {}", literal_text(value)),
            CNode::Unary { f, .. } => f.name().to_string(),
            CNode::Pow2 { .. } => "pow2".into(),
            CNode::Mult2 { .. } => "mult2".into(),
            CNode::Binary { f, .. } => f.name().to_string(),
            CNode::Ternary { f, .. } => f.name().to_string(),
            CNode::Nary { f, .. } => format!("n-ary {}", f.name()),
            CNode::RowAgg { f, .. } => format!("row_{}", f.name()),
            CNode::RowSumSq { .. } => "row_sumsq".into(),
            CNode::VectMatMult { .. } => "vect_matmult".into(),
            CNode::OuterMultAdd { .. } => "outer_mult_add".into(),
            CNode::DotCell { .. } => "dot".into(),
            CNode::OuterDot { .. } => "outer_dot".into(),
            CNode::FinalProduct { .. } => "final_product".into(),
            CNode::Transpose { .. } => "t".into(),
        }
    }
}

fn literal_text(l: &Literal) -> String {
    match l {
        Literal::Double(v) => format!("{v}"),
        Literal::Int(v) => format!("{v}"),
        Literal::Bool(v) => format!("{v}"),
        Literal::Str(s) => format!("{s:?}"),
    }
}

fn serde_plain<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|j| j.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Serde mirror of [`CellType`] (defined with the Cell template's conditions).
#[allow(clippy::enum_variant_names)]
#[derive(Serialize, Deserialize)]
#[serde(remote = "CellType", rename_all = "snake_case")]
enum CellTypeDef {
    NoAgg,
    RowAgg,
    ColAgg,
    FullAgg,
}

/// Serde mirror of [`CellAgg`].
#[derive(Serialize, Deserialize)]
#[serde(remote = "CellAgg", rename_all = "snake_case")]
enum CellAggDef {
    Sum,
    SumSq,
    Min,
    Max,
}

mod opt_cell_agg {
    //! Serde for `Option<CellAgg>` through its remote definition.
    use super::{CellAgg, CellAggDef};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct W(#[serde(with = "CellAggDef")] CellAgg);

    pub fn serialize<S: Serializer>(v: &Option<CellAgg>, s: S) -> Result<S::Ok, S::Error> {
        v.map(W).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<CellAgg>, D::Error> {
        Ok(Option::<W>::deserialize(d)?.map(|w| w.0))
    }
}

mod vec_cell_agg {
    //! Serde for `Vec<CellAgg>` through its remote definition.
    use super::{CellAgg, CellAggDef};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct W(#[serde(with = "CellAggDef")] CellAgg);

    pub fn serialize<S: Serializer>(v: &[CellAgg], s: S) -> Result<S::Ok, S::Error> {
        v.iter().map(|&a| W(a)).collect::<Vec<_>>().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<CellAgg>, D::Error> {
        Ok(Vec::<W>::deserialize(d)?.into_iter().map(|w| w.0).collect())
    }
}

/// What a Row operator writes per row of its main input `X` (reference 5.6, 6.3), in
/// SystemDS's `SpoofRowwise.RowType` order. CPlan construction derives it from the shapes of
/// the output, `X` and the second matrix `B1` (the right side of a row-times-matrix product
/// or of the final product `t(X) %*% B1`) exactly as SystemDS `TemplateUtils.getRowType`
/// does (reference 3.2, "RowType derivation"; first match wins):
///
/// 1. `X` unknown or the output has `X`'s shape: [`RowType::NoAgg`];
/// 2. `B1` and an `nrow(X)×ncol(B1)` output, or a column-range indexing output, not a final
///    product: [`RowType::NoAggB1`];
/// 3. an `nrow(X)×1` output, not a final product: [`RowType::RowAgg`];
/// 4. a full aggregate: [`RowType::FullAgg`];
/// 5. `ncol(X)×1`: [`RowType::ColAggT`]; 6. `1×ncol(X)`: [`RowType::ColAgg`];
/// 7. `B1` and `ncol(X)×ncol(B1)`: [`RowType::ColAggB1T`]; 8. `B1` and `ncol(B1)×ncol(X)`:
///    [`RowType::ColAggB1`]; 9. `B1` and `1×ncol(B1)`: [`RowType::ColAggB1R`];
/// 10. `nrow(X)` rows of another width: [`RowType::NoAggConst`]; 11. one row of another
///     width: [`RowType::ColAggConst`]; otherwise the plan has no row type and is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowType {
    /// The output vector of row i becomes row i of an m×n output (`X / rowSums(X)`).
    NoAgg,
    /// The output vector of row i becomes row i of an m×ncol(B1) output (`f(X) %*% B`, B
    /// skinny; `X[, 1:k]`).
    NoAggB1,
    /// The output vector of row i becomes row i of an m×c output of another width
    /// (`cbind(f(X), Y)`).
    NoAggConst,
    /// The output scalars are summed into one value (`sum(f(X))`).
    FullAgg,
    /// The output scalar of row i becomes cell i of an m×1 output (`rowSums(f(X))`,
    /// `f(X) %*% v`).
    RowAgg,
    /// The output vectors are summed over rows into a 1×n output (`colSums(f(X))`).
    ColAgg,
    /// `t(X) %*% v` accumulated row by row into an n×1 output (column-vector right side).
    ColAggT,
    /// An outer-product accumulation into an ncol(B1)×n output
    /// (`t(f(X) %*% B) %*% X`).
    ColAggB1,
    /// `t(X) %*% B1` accumulated row by row into an n×ncol(B1) output (matrix right side).
    ColAggB1T,
    /// The row-times-matrix vectors summed over rows into a 1×ncol(B1) output
    /// (`colSums(f(X) %*% B)`).
    #[serde(rename = "col_agg_b1r")]
    ColAggB1R,
    /// The output vectors of another width summed into a 1×c output
    /// (`colSums(cbind(X, Y))`).
    ColAggConst,
}

impl RowType {
    /// Whether the operator sums the rows' vectors into one output row (`COL_AGG`,
    /// `COL_AGG_B1R`, `COL_AGG_CONST`).
    pub fn is_col_sum(self) -> bool {
        matches!(
            self,
            RowType::ColAgg | RowType::ColAggB1R | RowType::ColAggConst
        )
    }

    /// Whether the operator accumulates outer products `t(a_i) %*% b_i` (`COL_AGG_T`,
    /// `COL_AGG_B1`, `COL_AGG_B1_T`).
    pub fn is_outer_accumulation(self) -> bool {
        matches!(
            self,
            RowType::ColAggT | RowType::ColAggB1 | RowType::ColAggB1T
        )
    }

    /// Whether row i of the output is the body's value for row i of `X` (the `NO_AGG` types
    /// and `ROW_AGG`).
    pub fn is_row_wise(self) -> bool {
        matches!(
            self,
            RowType::NoAgg | RowType::NoAggB1 | RowType::NoAggConst | RowType::RowAgg
        )
    }
}

/// The final step of an Outer operator over `G = X ⊙ f(U %*% t(V))` (reference 3.4, 6.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OuterType {
    /// `G` itself.
    CellWise,
    /// `sum(G)`.
    FullAgg,
    /// `t(G) %*% U2` (or `t(t(U2) %*% G)`), an n×k result.
    Left,
    /// `t(U2) %*% G`, a k×n result (the left product not transposed back).
    LeftT,
    /// `G %*% V2`, an m×k result.
    Right,
}

/// The template of a CPlan and its output variant (reference 5.6); part of the cache key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "template", rename_all = "snake_case")]
pub enum TemplateSpec {
    /// Cell-wise: the body is evaluated per cell of the main input; the result is aggregated
    /// as `cell_type`/`agg` say. `sparse_safe`: the body is zero for zero main-input cells
    /// and the aggregation is a sum, so only non-zeros need visiting.
    Cell {
        #[serde(with = "CellTypeDef")]
        cell_type: CellType,
        #[serde(with = "opt_cell_agg")]
        agg: Option<CellAgg>,
        sparse_safe: bool,
    },
    /// Row-wise: the body is evaluated per row of the main input.
    Row {
        row_type: RowType,
        num_vectors: usize,
    },
    /// Multi-aggregate: one full aggregate per output over the same cell-wise scan.
    #[serde(rename = "magg")]
    MAgg {
        #[serde(with = "vec_cell_agg")]
        aggs: Vec<CellAgg>,
        /// Every body is zero for zero main-input cells (given finite side inputs) and every
        /// aggregate is a sum, so a sparse main input needs only its non-zeros visited.
        #[serde(default)]
        sparse_safe: bool,
    },
    /// Outer product: the body is evaluated per non-zero cell of the sparse driver (input 0).
    Outer { outer_type: OuterType },
}

impl TemplateSpec {
    /// `"cell"`, `"row"`, `"magg"` or `"outer"`.
    pub fn name(&self) -> &'static str {
        match self {
            TemplateSpec::Cell { .. } => "cell",
            TemplateSpec::Row { .. } => "row",
            TemplateSpec::MAgg { .. } => "magg",
            TemplateSpec::Outer { .. } => "outer",
        }
    }

    /// The output variant name (`"full_agg"`, `"col_agg_t"`, `"left"`, ...).
    pub fn variant(&self) -> String {
        match self {
            TemplateSpec::Cell { cell_type, .. } => serde_json::to_value(CellTypeRef(*cell_type))
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            TemplateSpec::Row { row_type, .. } => serde_plain(row_type),
            TemplateSpec::MAgg { .. } => "full_agg".into(),
            TemplateSpec::Outer { outer_type } => serde_plain(outer_type),
        }
    }
}

#[derive(Serialize)]
struct CellTypeRef(#[serde(with = "CellTypeDef")] CellType);

/// The shape class of a CPlan input (hash-relevant, size-independent, reference 1.7: rows and
/// columns are not part of the cache key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// A scalar value.
    Scalar,
    /// A matrix.
    Matrix,
}

/// A fused operator's plan: template, inputs (main input first) and body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CPlan {
    /// The template and its output variant.
    pub template: TemplateSpec,
    /// The kinds of the inputs, by position (0 is the main input).
    pub inputs: Vec<InputKind>,
    /// The body, operands before users.
    pub nodes: Vec<CNode>,
    /// The output nodes: one, or one per aggregate of a MultiAgg.
    pub outputs: Vec<CNodeId>,
}

impl CPlan {
    /// Whether node `n`'s cells are the main input's transposed: it reaches the main input
    /// through an odd number of transposes. A Cell plan transposes only vectors, a relabelling
    /// of the same cells: `t(exp(x)) + r` over a column vector `x` is a row vector, whose
    /// side inputs are read in the transposed frame. `None` where `n` does not read the main
    /// input.
    pub fn transposes_main(&self, n: CNodeId) -> Option<bool> {
        // Operands precede users, so one pass in order answers every operand before its
        // users (no recursion, however deep the body).
        let mut found: Vec<Option<bool>> = Vec::with_capacity(n + 1);
        for node in self.nodes.iter().take(n.saturating_add(1)) {
            let answer = match node {
                CNode::Data { access, .. } => (*access == Access::Main).then_some(false),
                CNode::Transpose { x } => found.get(*x).copied().flatten().map(|t| !t),
                node => node
                    .operands()
                    .into_iter()
                    .find_map(|x| found.get(x).copied().flatten()),
            };
            found.push(answer);
        }
        found.get(n).copied().flatten()
    }

    /// Per node: whether it writes its value as a matrix cell, `-0.0` as `0.0` (the runtime's
    /// signed-zero rule): the element-wise nodes that read a matrix input. Unfused execution
    /// computes those with matrix kernels, which never write `-0.0`, and the scalar-only ones
    /// as scalars, which keep it; generated code and the reference evaluator do the same.
    /// Left out (see `signed_zero.rs`), as the rule changes no result there: nodes whose value
    /// can never be `-0.0` (`log(x)`, `x + 1e-15`), and nodes whose zero's sign nothing
    /// observes (`X * Y` in `sum(X * Y * Z)`, or under a product a later node normalises).
    pub fn matrix_cell_nodes(&self) -> Vec<bool> {
        let never_negative_zero = signed_zero::never_negative_zero(self);
        // Whether each node reads a matrix input; operands precede users: one pass in order.
        let mut matrix = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            let answer = match node {
                CNode::Data { input, .. } => self.inputs.get(*input) == Some(&InputKind::Matrix),
                CNode::Literal { .. } => false,
                node if node.is_elementwise() || matches!(node, CNode::Transpose { .. }) => node
                    .operands()
                    .into_iter()
                    .any(|x| matrix.get(x).copied().unwrap_or(true)),
                _ => true,
            };
            matrix.push(answer);
        }
        // Where the rule would apply if the node's sign were observed; a node it applies to
        // fixes its sign, as does one that is never -0.0.
        let candidate: Vec<bool> = self
            .nodes
            .iter()
            .zip(&matrix)
            .zip(&never_negative_zero)
            .map(|((node, &matrix), &never)| matrix && node.is_elementwise() && !never)
            .collect();
        let sign_fixed: Vec<bool> = candidate
            .iter()
            .zip(&never_negative_zero)
            .map(|(&c, &never)| c || never)
            .collect();
        let observed = signed_zero::zero_sign_observed(self, &sign_fixed);
        candidate
            .into_iter()
            .zip(observed)
            .map(|(c, seen)| c && seen)
            .collect()
    }

    /// The stable structural hash: FNV-1a over the canonical JSON form. Independent of hop
    /// ids and variable names (inputs are positional), so it is the operator-cache key.
    pub fn structural_hash(&self) -> u64 {
        use std::hash::Hasher;
        let mut h = crate::hops::json::Fnv64::new();
        h.write(serde_json::to_string(self).unwrap_or_default().as_bytes());
        h.finish()
    }

    /// The number of operation nodes (everything but data and literals).
    pub fn num_operations(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| !matches!(n, CNode::Data { .. } | CNode::Literal { .. }))
            .count()
    }

    /// Explain text: a header line and one line per node, `%k = op(%i, %j)`, outputs marked.
    pub fn explain(&self) -> String {
        let mut out = format!(
            "{} {} ({} inputs, hash {:016x})",
            self.template.name(),
            self.template.variant(),
            self.inputs.len(),
            self.structural_hash()
        );
        match &self.template {
            TemplateSpec::Cell {
                agg, sparse_safe, ..
            } => {
                if let Some(a) = agg {
                    let _ = write!(out, " agg={a:?}");
                }
                if *sparse_safe {
                    out.push_str(" sparse_safe");
                }
            }
            TemplateSpec::Row { num_vectors, .. } => {
                let _ = write!(out, " vectors={num_vectors}");
            }
            TemplateSpec::MAgg { aggs, sparse_safe } => {
                let _ = write!(out, " aggs={aggs:?}");
                if *sparse_safe {
                    out.push_str(" sparse_safe");
                }
            }
            TemplateSpec::Outer { .. } => {}
        }
        out.push('\n');
        for (i, n) in self.nodes.iter().enumerate() {
            let args: Vec<String> = n.operands().iter().map(|o| format!("%{o}")).collect();
            let mark = if self.outputs.contains(&i) {
                "  <- out"
            } else {
                ""
            };
            if args.is_empty() {
                let _ = writeln!(out, "  %{i} = {}{mark}", n.label());
            } else {
                let _ = writeln!(out, "  %{i} = {}({}){mark}", n.label(), args.join(", "));
            }
        }
        out
    }
}
