//! CPlan construction from a selection (reference 1.5 `rConstructCPlans`), the cleanup rules
//! of reference 1.6, the simplification rewrites of 5.8, CSE (5.9) and the Row template's
//! vector-intermediate count (5.10), and the resulting list of fused operators (the data an
//! executor needs to rewire the DAG, reference 1.8, without changing the HOP IR).
//!
//! Construction has two passes per operator. The first walks the selected plans top-down from
//! the root and records hop operations as raw nodes over data inputs in first-use order; the
//! second, once the main input is known, assigns each data input its access kind, renumbers
//! inputs (main input first) and re-creates the nodes bottom-up through a hash-consing table,
//! applying the 5.8 rewrites on the way. Hash-consing *is* the CSE of 5.9: two structurally
//! equal nodes become one. Anything the first pass cannot express as a CNode makes the
//! operator's plan invalid; the operator is then dropped and its hops run unfused, which is
//! always correct (reference 1.6 drops invalid plans the same way).

use super::verify::verify;
use super::{Access, CNode, CNodeId, CPlan, InputKind, OuterType, RowType, TemplateSpec};
use crate::fusion::dag::FusionDag;
use crate::fusion::memo::{MemoEntry, MemoTable, TemplateKind};
use crate::fusion::select::{selection_roots, Selection};
use crate::fusion::sparsity::{
    choose_main_input, choose_shared_sparse_driver, is_zero_preserving, outer_cell_wise_part,
    outer_driver, outer_factors,
};
use crate::fusion::template::{cell_agg_kind, CellAgg, CellType};
use crate::hops::{AggOp, BinaryOp, Direction, HopDag, HopId, Literal, OpKind, ReorgOp};
use crate::stack::with_stack;
use crate::{CompileError, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};

/// One fused operator: its plan and how it replaces hops of the DAG (reference 1.8).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FusedOperator {
    /// The operator's plan.
    pub cplan: CPlan,
    /// The hops whose values the operator produces, by output position (one, or one per
    /// aggregate of a MultiAgg). Consumers of these hops read the operator's outputs instead.
    pub outputs: Vec<HopId>,
    /// The hops whose values are the operator's inputs, by CPlan input position.
    pub inputs: Vec<HopId>,
    /// Every hop the operator computes (outputs and fused interior), ascending. Interior hops
    /// still needed by other consumers stay computed unfused as well.
    pub covered: Vec<HopId>,
}

/// The fused operators of one DAG, in top-down construction order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FusedProgram {
    /// The operators.
    pub operators: Vec<FusedOperator>,
}

impl FusedProgram {
    /// Explain text (`explain --level cplan`): per operator its outputs, inputs and plan.
    pub fn explain(&self) -> String {
        let mut out = format!("fused operators: {}\n", self.operators.len());
        for (k, op) in self.operators.iter().enumerate() {
            let hops = |v: &[HopId]| {
                v.iter()
                    .map(|h| format!("({h})"))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            out.push_str(&format!(
                "op {k}: outputs {} inputs {}\n  {}",
                hops(&op.outputs),
                hops(&op.inputs),
                op.cplan.explain().replace('\n', "\n  ").trim_end()
            ));
            out.push('\n');
        }
        out
    }

    /// JSON: `{"operators": [{"template", "variant", "hash", "outputs", "inputs", "covered",
    /// "cplan"}...]}`.
    pub fn to_json(&self) -> String {
        let ops: Vec<serde_json::Value> = self
            .operators
            .iter()
            .map(|op| {
                serde_json::json!({
                    "template": op.cplan.template.name(),
                    "variant": op.cplan.template.variant(),
                    "hash": format!("{:016x}", op.cplan.structural_hash()),
                    "outputs": op.outputs,
                    "inputs": op.inputs,
                    "covered": op.covered,
                    "cplan": op.cplan,
                })
            })
            .collect();
        serde_json::to_string_pretty(&serde_json::json!({ "operators": ops })).unwrap_or_default()
    }
}

/// Builds the fused operators of `selection` (reduced `memo`, reference 1.5): top-down from
/// the DAG's roots, an operator per selected root, continuing into the operator's inputs.
/// Operators whose plans fail the validity rules of reference 1.6 are left out (their hops run
/// unfused).
pub fn construct_cplans(
    dag: &HopDag,
    memo: &MemoTable,
    selection: &Selection,
) -> Result<FusedProgram> {
    let view = FusionDag::new(dag)?;
    let mut program = FusedProgram::default();
    let mut visited = BTreeSet::new();
    let mut stack: Vec<HopId> = selection_roots(&view).into_iter().rev().collect();
    while let Some(h) = stack.pop() {
        if !visited.insert(h) {
            continue;
        }
        let op = match selection.roots.get(&h) {
            Some(entry) if !memo.is_excluded(h) => build_operator(&view, selection, h, entry),
            _ => None,
        };
        match op {
            Some(op) => {
                // Always, not only in debug builds: it is linear in the body, which
                // construction has just hash-consed node by node, and a plan that fails it
                // would reach generated code.
                verify(&op.cplan).map_err(|e| {
                    CompileError::internal(crate::error::Internal::ConstructedCPlan {
                        hop: h,
                        error: e,
                        plan: op.cplan.explain(),
                    })
                })?;
                // A MultiAgg produces all its aggregates: its other members are done too.
                visited.extend(op.outputs.iter().copied());
                stack.extend(op.inputs.iter().rev().copied());
                program.operators.push(op);
            }
            None => stack.extend(view.inputs(h).iter().rev().copied()),
        }
    }
    Ok(program)
}

/// A node of the first pass: data inputs are hop ids, not yet positions and accesses.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Raw {
    /// A data input; `Some(access)` when the use fixes it (matrix operands, Outer factors).
    Data(HopId, Option<Access>),
    /// Anything else, with operands referring to raw nodes.
    Node(CNode),
}

/// First-pass state of one operator.
struct Builder<'a, 'd> {
    dag: &'a FusionDag<'d>,
    selection: &'a Selection,
    template: TemplateKind,
    raw: Vec<Raw>,
    /// Where each node of `raw` is.
    index: HashMap<Raw, usize>,
    /// Raw node per (hop, context), so a hop used twice is built once.
    built: HashMap<HopId, usize>,
    covered: BTreeSet<HopId>,
    /// Row template: the hop SystemDS records as the main input `X` (`inHops2["X"]`), whose
    /// shape the row type is derived from. A hop registers after its operands are built, so
    /// the outermost registration wins, as in SystemDS's bottom-up construction.
    row_x: Option<HopId>,
    /// Row template: the second matrix `B1` of a row-times-matrix or final product.
    row_b1: Option<HopId>,
}

impl<'a, 'd> Builder<'a, 'd> {
    /// The position of `r`, pushed unless an equal node is there already (CSE by
    /// construction; looked up by hash, so a body of n nodes builds in O(n)).
    fn push(&mut self, r: Raw) -> usize {
        if let Some(&i) = self.index.get(&r) {
            return i;
        }
        self.raw.push(r.clone());
        self.index.insert(r, self.raw.len() - 1);
        self.raw.len() - 1
    }

    /// The plan of `h` inside an operator of this builder's template (or a Cell plan it
    /// absorbs), if `h` is fused.
    fn fused_entry(&self, h: HopId) -> Option<&'a MemoEntry> {
        let entries = self.selection.plans.get(&h)?;
        entries
            .iter()
            .find(|e| e.template == self.template)
            .or_else(|| {
                entries
                    .iter()
                    .find(|e| self.template.can_absorb(e.template))
            })
    }

    /// The node for input position `pos` of `h` under `entry`: its fused body if referenced,
    /// a literal, or a data input.
    fn operand(&mut self, h: HopId, entry: &MemoEntry, pos: usize) -> Option<usize> {
        let c = self.dag.inputs(h)[pos];
        if entry.is_ref(pos) {
            if let Some(e) = self.fused_entry(c) {
                return self.hop(c, e);
            }
        }
        Some(self.leaf(c, None))
    }

    /// A materialized input `c` (or a literal).
    fn leaf(&mut self, c: HopId, access: Option<Access>) -> usize {
        if let Some(l) = self.dag.hop(c).literal() {
            if l.as_f64().is_some() {
                let value = match l {
                    Literal::Double(_) => l.clone(),
                    _ => Literal::Double(l.as_f64().unwrap_or(f64::NAN)),
                };
                return self.push(Raw::Node(CNode::Literal { value }));
            }
        }
        self.push(Raw::Data(c, access))
    }

    /// Builds the fused hop `h` with plan `entry`; `None` if it has no CNode form.
    fn hop(&mut self, h: HopId, entry: &MemoEntry) -> Option<usize> {
        with_stack(|| self.hop_step(h, entry))
    }

    fn hop_step(&mut self, h: HopId, entry: &MemoEntry) -> Option<usize> {
        if let Some(&i) = self.built.get(&h) {
            return Some(i);
        }
        if self.dag.op(h) == &OpKind::Index || self.dag.is_literal_seq(h) {
            // Column-range indexing `X[, a:b]` and a literal `seq(from, to, incr)` open, fuse
            // or merge in the memo (reference 3.2), but the body has no slicing node and no
            // row-index node (SystemDS's `SEQ_RIX`): the operator reads the slice or the
            // sequence as an input, which runs unfused (it stays uncovered) at the cost of an
            // m x (b-a+1) copy or one vector. Dropping the whole operator instead would leave
            // the plan the cost model chose unbuilt.
            return Some(self.leaf(h, None));
        }
        self.covered.insert(h);
        let ins = self.dag.inputs(h);
        let node = match self.dag.op(h) {
            OpKind::Unary(f) => CNode::Unary {
                f: *f,
                x: self.operand(h, entry, 0)?,
            },
            OpKind::Binary(f) => CNode::Binary {
                f: *f,
                a: self.operand(h, entry, 0)?,
                b: self.operand(h, entry, 1)?,
            },
            OpKind::Ternary(f) => CNode::Ternary {
                f: *f,
                a: self.operand(h, entry, 0)?,
                b: self.operand(h, entry, 1)?,
                c: self.operand(h, entry, 2)?,
            },
            OpKind::Nary(f) => CNode::Nary {
                f: *f,
                xs: (0..ins.len())
                    .map(|p| self.operand(h, entry, p))
                    .collect::<Option<Vec<_>>>()?,
            },
            OpKind::AggUnary {
                op,
                dir: Direction::Row,
            } if self.template == TemplateKind::Row => {
                let x = self.operand(h, entry, 0)?;
                self.register_row_x(h, entry);
                CNode::RowAgg { f: *op, x }
            }
            OpKind::MatMul if self.template == TemplateKind::Row => {
                if self.dag.is_transpose(ins[0]) {
                    // A final product inside the body (not at the root) has no row-wise form.
                    return None;
                }
                let a = self.operand(h, entry, 0)?;
                // The right side is read whole; a fused right side has no row-wise form.
                if entry.is_ref(1) {
                    return None;
                }
                let b = self.leaf(ins[1], Some(Access::Whole));
                // SystemDS records X and B1 for a matrix right side (`VECT_MATRIXMULT`); a
                // column vector is a dot product per row and records nothing.
                if self.dag.cols(ins[1]).is_some_and(|c| c > 1) {
                    self.row_x = Some(ins[0]);
                    self.row_b1 = Some(ins[1]);
                }
                CNode::VectMatMult { a, b }
            }
            OpKind::MatMul
                if self.template == TemplateKind::Outer && self.dag.is_outer_product_like_mm(h) =>
            {
                let (u, v) = (ins[0], ins[1]);
                if self.dag.is_transpose(u) {
                    return None;
                }
                let u = self.leaf(u, Some(Access::OuterU));
                let v = if self.dag.is_transpose(v) {
                    if entry.is_ref(1) {
                        self.covered.insert(v);
                    }
                    self.leaf(self.dag.inputs(v)[0], Some(Access::OuterV))
                } else {
                    self.leaf(v, Some(Access::Whole))
                };
                CNode::OuterDot { u, v }
            }
            OpKind::Reorg(ReorgOp::Transpose)
                if self.template == TemplateKind::Cell && self.dag.is_row_vector(h) =>
            {
                CNode::Transpose {
                    x: self.operand(h, entry, 0)?,
                }
            }
            _ => return None,
        };
        let i = self.push(Raw::Node(node));
        self.built.insert(h, i);
        Some(i)
    }

    /// Row template: records the input of `h` (a row aggregate) as `X` if it is read
    /// materialized, as SystemDS registers a data-node aggregate input.
    fn register_row_x(&mut self, h: HopId, entry: &MemoEntry) {
        let x = self.dag.inputs(h)[0];
        if !entry.is_ref(0) && self.dag.is_matrix(x) {
            self.row_x = Some(x);
        }
    }

    /// The body of a full/row/col aggregate or dot product rooted at `root` (Cell, MultiAgg):
    /// the value per cell before aggregation, with `sum(f^2)` computing `f` (SUM_SQ).
    fn cell_agg_body(
        &mut self,
        root: HopId,
        entry: &MemoEntry,
        agg: Option<CellAgg>,
    ) -> Option<usize> {
        self.covered.insert(root);
        let ins = self.dag.inputs(root);
        match self.dag.op(root) {
            OpKind::AggUnary { .. } => {
                let x = ins[0];
                if agg == Some(CellAgg::SumSq) {
                    // The square is applied by the aggregation; the body is the base of `x ^ 2`.
                    if entry.is_ref(0) {
                        let e = self.fused_entry(x)?;
                        self.covered.insert(x);
                        return self.operand(x, e, 0);
                    }
                    return Some(self.leaf(self.dag.inputs(x)[0], None));
                }
                self.operand(root, entry, 0)
            }
            OpKind::MatMul => {
                // t(x) %*% y: the product per cell, summed by the template.
                let t = ins[0];
                let a = if entry.is_ref(0) {
                    self.covered.insert(t);
                    let te = self.fused_entry(t)?;
                    self.operand(t, te, 0)?
                } else {
                    self.leaf(self.dag.inputs(t)[0], None)
                };
                let b = self.operand(root, entry, 1)?;
                Some(self.push(Raw::Node(CNode::DotCell { a, b })))
            }
            _ => self.hop(root, entry),
        }
    }
}

/// Builds one operator rooted at `h` (reference 1.5 `constructCplan` per template), then
/// validates and finalizes it (1.6). `None` drops it.
fn build_operator(
    dag: &FusionDag<'_>,
    selection: &Selection,
    h: HopId,
    entry: &MemoEntry,
) -> Option<FusedOperator> {
    let template = entry.template;
    let mut b = Builder {
        dag,
        selection,
        template: if template == TemplateKind::MAgg {
            TemplateKind::Cell
        } else {
            template
        },
        raw: Vec::new(),
        index: HashMap::new(),
        built: HashMap::new(),
        covered: BTreeSet::new(),
        row_x: None,
        row_b1: None,
    };
    let mut outputs_hops = vec![h];
    let (spec, raw_outputs) = match template {
        TemplateKind::Cell => {
            let (cell_type, agg) = cell_agg_kind(dag, h)?;
            let out = b.cell_agg_body(h, entry, agg)?;
            let spec = TemplateSpec::Cell {
                cell_type,
                agg,
                sparse_safe: false,
            };
            (spec, vec![out])
        }
        TemplateKind::MAgg => {
            outputs_hops = entry.inputs.iter().flatten().copied().collect();
            let mut aggs = Vec::new();
            let mut outs = Vec::new();
            for &a in &outputs_hops {
                let body = selection
                    .plans
                    .get(&a)?
                    .iter()
                    .find(|e| e.template == TemplateKind::Cell)?;
                let (CellType::FullAgg, Some(agg)) = cell_agg_kind(dag, a)? else {
                    return None;
                };
                aggs.push(agg);
                outs.push(b.cell_agg_body(a, body, Some(agg))?);
            }
            (
                TemplateSpec::MAgg {
                    aggs,
                    sparse_safe: false,
                },
                outs,
            )
        }
        TemplateKind::Row => {
            let ins = dag.inputs(h);
            let out = match dag.op(h) {
                OpKind::AggUnary { op, dir } => {
                    b.covered.insert(h);
                    let x = b.operand(h, entry, 0)?;
                    b.register_row_x(h, entry);
                    match (dir, op) {
                        (Direction::Row, _) => b.push(Raw::Node(CNode::RowAgg { f: *op, x })),
                        (Direction::Col | Direction::Full, AggOp::Sum) => x,
                        _ => return None,
                    }
                }
                OpKind::MatMul if dag.is_transpose(ins[0]) => {
                    b.covered.insert(h);
                    let t = ins[0];
                    // X of `t(X)` is read materialized unless the transpose is fused with
                    // a fused input (a fused transpose of a data input reads it all the same).
                    let (a, x_read) = if entry.is_ref(0) {
                        b.covered.insert(t);
                        let te = b.fused_entry(t)?;
                        (b.operand(t, te, 0)?, !te.is_ref(0))
                    } else {
                        (b.leaf(dag.inputs(t)[0], None), true)
                    };
                    let y = b.operand(h, entry, 1)?;
                    // `VECT_OUTERMULT_ADD` records B1 (and X, if read materialized) unless a
                    // row-times-matrix product below already did.
                    if dag.cols(ins[1]).is_some_and(|c| c > 1) && b.row_b1.is_none() {
                        if x_read {
                            b.row_x = Some(dag.inputs(t)[0]);
                        }
                        b.row_b1 = Some(ins[1]);
                    }
                    b.push(Raw::Node(CNode::OuterMultAdd { a, b: y }))
                }
                _ => b.hop(h, entry)?,
            };
            // The row type needs the main input; `finalize` derives it.
            (
                TemplateSpec::Row {
                    row_type: RowType::NoAgg,
                    num_vectors: 0,
                },
                vec![out],
            )
        }
        TemplateKind::Outer => outer_root(&mut b, h, entry)?,
    };
    finalize(dag, b, spec, raw_outputs, outputs_hops)
}

/// A Row plan whose body is cell-wise only, with no aggregate, a full `sum` or `colSums`, as
/// the Cell plan it equals. The template ranks pick Row over Cell for such plans, but the Cell
/// template's loop keeps the whole body in registers per cell, where Row runs each node over
/// the row into a vector buffer. Over a column vector (an m×1 main input) each row is one
/// cell, and the Cell loop runs vectors down the rows where Row runs one scalar per step;
/// SystemDS drops those plans where their output is a scalar (reference 1.6 rule 6) and runs
/// their operations unfused (an algorithm's vector arithmetic: `exp(-(eta^2)/2)`).
fn row_plan_as_cell(
    dag: &FusionDag<'_>,
    b: &Builder<'_, '_>,
    spec: &TemplateSpec,
    main_dims: (u64, u64),
    outputs: &[HopId],
) -> Option<TemplateSpec> {
    let TemplateSpec::Row { row_type, .. } = spec else {
        return None;
    };
    let cell_wise = b.raw.iter().all(|r| match r {
        Raw::Data(_, fixed) => fixed.is_none(),
        Raw::Node(n) => matches!(n, CNode::Literal { .. }) || n.is_elementwise(),
    });
    if !cell_wise || outputs.len() != 1 {
        return None;
    }
    let out_dims = dag.dims(outputs[0]);
    let (cell_type, agg) = match row_type {
        RowType::NoAgg if out_dims == Some(main_dims) => (CellType::NoAgg, None),
        RowType::FullAgg if dag.is_scalar(outputs[0]) => (CellType::FullAgg, Some(CellAgg::Sum)),
        RowType::ColAgg if out_dims == Some((1, main_dims.1)) => {
            (CellType::ColAgg, Some(CellAgg::Sum))
        }
        _ => return None,
    };
    Some(TemplateSpec::Cell {
        cell_type,
        agg,
        sparse_safe: false,
    })
}

/// The Outer operator's type and output (reference 3.4 `getOuterProductType`).
fn outer_root(
    b: &mut Builder<'_, '_>,
    h: HopId,
    entry: &MemoEntry,
) -> Option<(TemplateSpec, Vec<usize>)> {
    let dag = b.dag;
    let ins = dag.inputs(h);
    // A final product `W %*% V2` / `t(U2) %*% W` over the fused cell-wise part.
    let final_product = |b: &mut Builder<'_, '_>, mm: HopId, mm_entry: &MemoEntry| {
        b.covered.insert(mm);
        let mi = dag.inputs(mm);
        if mm_entry.is_ref(0) && !mm_entry.is_ref(1) {
            let g = b.operand(mm, mm_entry, 0)?;
            let w = b.leaf(mi[1], Some(Access::Whole));
            Some((OuterType::Right, g, w))
        } else if mm_entry.is_ref(1) && !mm_entry.is_ref(0) {
            let g = b.operand(mm, mm_entry, 1)?;
            // `t(U) %*% G` where G's outer product is `U %*% t(V)` (ALS-CG's update of V):
            // the operator reads the rows of U, as its dot products do, rather than taking
            // `t(U)` computed unfused and transposing it back.
            let factor = Some(mi[0])
                .filter(|&t| dag.is_transpose(t))
                .map(|t| dag.inputs(t)[0])
                .filter(|&u| dag.has_outer_product_of_left_factor(mi[1], u));
            let w = match factor {
                Some(u) => b.leaf(u, Some(Access::OuterU)),
                None => b.leaf(mi[0], Some(Access::Whole)),
            };
            Some((OuterType::LeftT, g, w))
        } else {
            None
        }
    };
    let (ty, out) = match dag.op(h) {
        OpKind::AggUnary {
            op: AggOp::Sum,
            dir: Direction::Full,
        } => {
            b.covered.insert(h);
            (OuterType::FullAgg, b.operand(h, entry, 0)?)
        }
        OpKind::Binary(_) => (OuterType::CellWise, b.hop(h, entry)?),
        OpKind::MatMul => {
            let (ty, g, w) = final_product(b, h, entry)?;
            (ty, b.push(Raw::Node(CNode::FinalProduct { g, w })))
        }
        OpKind::Reorg(ReorgOp::Transpose) if entry.is_ref(0) => {
            b.covered.insert(h);
            let mm = ins[0];
            let me = b.fused_entry(mm)?;
            let (OuterType::LeftT, g, w) = final_product(b, mm, me)? else {
                return None;
            };
            (
                OuterType::Left,
                b.push(Raw::Node(CNode::FinalProduct { g, w })),
            )
        }
        _ => return None,
    };
    Some((TemplateSpec::Outer { outer_type: ty }, vec![out]))
}

/// Whether a Cell or MultiAgg plan of `spec` can skip its main input's zeros where its body is
/// zero there: it aggregates, and only by sums (half of the rule that sets `sparse_safe`).
fn sums_only(spec: &TemplateSpec) -> bool {
    let sum = |a: &CellAgg| matches!(a, CellAgg::Sum | CellAgg::SumSq);
    match spec {
        TemplateSpec::Cell { cell_type, agg, .. } => {
            *cell_type != CellType::NoAgg && agg.as_ref().is_none_or(sum)
        }
        TemplateSpec::MAgg { aggs, .. } => aggs.iter().all(sum),
        _ => false,
    }
}

/// Second pass and validity rules (reference 1.6): choose the main input, assign accesses,
/// renumber inputs, rebuild through the hash-consing table with the 5.8 rewrites (5.9 CSE),
/// then drop invalid or trivial plans.
fn finalize(
    dag: &FusionDag<'_>,
    b: Builder<'_, '_>,
    mut spec: TemplateSpec,
    raw_outputs: Vec<usize>,
    outputs: Vec<HopId>,
) -> Option<FusedOperator> {
    if let TemplateSpec::Outer { outer_type } = spec {
        let has_outer_product = b
            .raw
            .iter()
            .any(|r| matches!(r, Raw::Node(CNode::OuterDot { .. })));
        if !has_outer_product {
            // The selection put `U %*% t(V)` in another operator (or left it unfused), so this
            // plan reads it materialized: no sparse driver makes its cells skippable, and the
            // Outer skeleton has no product to compute. Its cell-wise body is the Cell plan it
            // equals; a final product over it is no template's.
            spec = match outer_type {
                OuterType::CellWise => TemplateSpec::Cell {
                    cell_type: CellType::NoAgg,
                    agg: None,
                    sparse_safe: false,
                },
                OuterType::FullAgg => TemplateSpec::Cell {
                    cell_type: CellType::FullAgg,
                    agg: Some(CellAgg::Sum),
                    sparse_safe: false,
                },
                OuterType::Left | OuterType::LeftT | OuterType::Right => return None,
            };
        }
    }
    let data_hops: Vec<HopId> = b
        .raw
        .iter()
        .filter_map(|r| match r {
            Raw::Data(h, _) => Some(*h),
            _ => None,
        })
        .collect();
    let covered = b.covered.clone();
    let in_region = |x: HopId| covered.contains(&x);
    // Outer: the driver and the masks `X != 0` among the factors of the cell-wise part `G`
    // (`sparsity::outer_driver`, the rule costing names the driver by as well). An Outer
    // operator computes `0 * G` at its driver's zeros, which is the value there only where
    // the driver, or its mask, is a factor of the whole `G` (`X * f`, `(X != 0) * f`); a body
    // merely zero-preserving for finite values, such as `(X / Y)^2 & s` (1 where Y is 0 too),
    // is not. Only such masks are rewritten (to 1 on the driver), not masks elsewhere in `G`.
    // Rule 1: matrix inputs must exist (the main input is one).
    let (main, outer_masks) = match &spec {
        TemplateSpec::Outer { .. } => {
            let root = outputs[0];
            // None: no factor can drive `G` (`X + 1 / (U %*% t(V))`, SystemDS's
            // `wSparseUnsafeOuterProduct`), so no Outer plan: its hops run unfused.
            let driver = outer_driver(dag, root, &in_region)?;
            let g = outer_cell_wise_part(dag, root, &in_region)?;
            let masks: BTreeSet<usize> = outer_factors(dag, g, &in_region)
                .masks
                .iter()
                .filter_map(|m| b.built.get(m).copied())
                .collect();
            (driver, masks)
        }
        _ => {
            let candidates: Vec<HopId> = b
                .raw
                .iter()
                .filter_map(|r| match r {
                    Raw::Data(h, None) if dag.is_matrix(*h) => Some(*h),
                    _ => None,
                })
                .collect();
            // Where the operator can skip zeros (sums), a sparse input every output is zero
            // at drives it, as SystemDS's shared sparse-safe driver; else the first input in
            // main-input order. The sparsest input alone left `sum(X * Y), sum(X * Z)` over
            // equally sparse X, Y, Z on Y, which the second sum is not zero at, and so on
            // every cell (15 ms against 1 at 10000 x 1000, sparsity 0.01).
            let driver = sums_only(&spec)
                .then(|| choose_shared_sparse_driver(dag, &outputs, &candidates, &in_region))
                .flatten();
            (
                driver.or_else(|| choose_main_input(dag, &candidates))?,
                BTreeSet::new(),
            )
        }
    };
    let main_dims = dag.dims(main)?;
    if let TemplateSpec::Row { row_type, .. } = &mut spec {
        let x = b.row_x.filter(|&x| dag.dims_known(x)).unwrap_or(main);
        *row_type = derive_row_type(dag, outputs[0], Some(x), b.row_b1)?;
    }
    if let Some(cell) = row_plan_as_cell(dag, &b, &spec, main_dims, &outputs) {
        spec = cell;
    }
    // Sums only (a min or max would need the unseen zeros folded in, which the skeleton does,
    // but the bodies must also be zero there), and every body zero where the main input is.
    let skips_zeros = sums_only(&spec);
    match &mut spec {
        TemplateSpec::Cell { sparse_safe, .. } => {
            *sparse_safe = skips_zeros && is_zero_preserving(dag, outputs[0], main, &in_region);
        }
        TemplateSpec::MAgg { sparse_safe, .. } => {
            *sparse_safe = skips_zeros
                && outputs
                    .iter()
                    .all(|&o| is_zero_preserving(dag, o, main, &in_region));
        }
        _ => {}
    }
    // Inputs in first-use order, main input first.
    let mut order: Vec<HopId> = vec![main];
    for h in data_hops {
        if !order.contains(&h) {
            order.push(h);
        }
    }
    let access_of = |h: HopId, fixed: Option<Access>| -> Access {
        if let Some(a) = fixed {
            return a;
        }
        if h == main {
            return Access::Main;
        }
        match dag.dims(h) {
            _ if dag.is_scalar(h) || dag.is_1x1(h) => Access::Scalar,
            Some(d) if d == main_dims => Access::Aligned,
            Some((r, c))
                if matches!(spec, TemplateSpec::Row { .. }) && r == main_dims.0 && c > 1 =>
            {
                Access::Aligned
            }
            Some((_, 1)) => Access::ColVector,
            Some((1, _)) => Access::RowVector,
            _ => Access::Whole,
        }
    };
    let is_outer = matches!(spec, TemplateSpec::Outer { .. });
    let mut fin = Interner::default();
    let mut map: Vec<CNodeId> = Vec::with_capacity(b.raw.len());
    for (i, r) in b.raw.iter().enumerate() {
        let node = match r {
            Raw::Data(h, fixed) => CNode::Data {
                input: order.iter().position(|x| x == h)?,
                access: access_of(*h, *fixed),
            },
            Raw::Node(n) => remap(n, &map),
        };
        let id = fin.simplify(node, is_outer, outer_masks.contains(&i));
        map.push(id);
    }
    let outs: Vec<CNodeId> = raw_outputs.iter().map(|&o| map[o]).collect();
    let (nodes, outs) = fin.compact(&outs);
    let inputs_used: Vec<usize> = {
        let mut v: Vec<usize> = nodes
            .iter()
            .filter_map(|n| match n {
                CNode::Data { input, .. } => Some(*input),
                _ => None,
            })
            .collect();
        // The main input stays even if the body no longer reads it: it drives the iteration
        // (an Outer plan whose `X != 0` mask was simplified away, reference 3.4).
        v.push(0);
        v.sort_unstable();
        v.dedup();
        v
    };
    // Rule 3: only inputs still referenced (after simplification); renumber densely.
    let renum = |i: usize| inputs_used.iter().position(|&x| x == i).unwrap_or(i);
    let nodes: Vec<CNode> = nodes
        .into_iter()
        .map(|n| match n {
            CNode::Data { input, access } => CNode::Data {
                input: renum(input),
                access,
            },
            n => n,
        })
        .collect();
    let input_hops: Vec<HopId> = inputs_used.iter().map(|&i| order[i]).collect();
    if let TemplateSpec::Row { num_vectors, .. } = &mut spec {
        *num_vectors = count_vector_intermediates(&nodes, &outs);
    }
    let cplan = CPlan {
        template: spec,
        inputs: input_hops
            .iter()
            .map(|&h| {
                if dag.is_scalar(h) {
                    InputKind::Scalar
                } else {
                    InputKind::Matrix
                }
            })
            .collect(),
        nodes,
        outputs: outs,
    };
    if !is_worth_fusing(&cplan) {
        return None;
    }
    Some(FusedOperator {
        cplan,
        outputs,
        inputs: input_hops,
        covered: covered.into_iter().collect(),
    })
}

/// SystemDS `TemplateUtils.getRowType(out, X, B1)` (reference 3.2, rules listed at
/// [`RowType`]): the row type of a Row operator rooted at `out` with main input `x` and second
/// matrix `b1`; `None` where no rule matches (the plan is then dropped).
pub(crate) fn derive_row_type(
    dag: &FusionDag<'_>,
    out: HopId,
    x: Option<HopId>,
    b1: Option<HopId>,
) -> Option<RowType> {
    // A full aggregate is a scalar hop: a 1×1 output.
    let out_dims = if dag.is_scalar(out) {
        Some((1, 1))
    } else {
        dag.dims(out)
    };
    let (Some(x), Some((or, oc))) = (x, out_dims) else {
        return Some(RowType::NoAgg);
    };
    let Some((xr, xc)) = dag.dims(x) else {
        return Some(RowType::NoAgg);
    };
    let b1c = b1.and_then(|b| dag.cols(b));
    // `t(X) %*% ...`: a final product, never a row-wise output.
    let final_product = dag.is_matmul(out) && dag.is_transpose(dag.inputs(out)[0]);
    let full_agg = matches!(
        dag.op(out),
        OpKind::AggUnary {
            dir: Direction::Full,
            ..
        }
    );
    let col_agg = matches!(
        dag.op(out),
        OpKind::AggUnary {
            dir: Direction::Col,
            ..
        }
    );
    Some(if (or, oc) == (xr, xc) {
        RowType::NoAgg
    } else if !final_product
        && (b1c.is_some_and(|c| (or, oc) == (xr, c)) || dag.is_column_range_indexing(out))
    {
        RowType::NoAggB1
    } else if !final_product && (or, oc) == (xr, 1) {
        RowType::RowAgg
    } else if full_agg {
        RowType::FullAgg
    } else if (or, oc) == (xc, 1) && !col_agg {
        // (`colSums` of an m×1 input is 1×1 too: a column aggregate, not `t(X) %*% y`.)
        RowType::ColAggT
    } else if (or, oc) == (1, xc) {
        RowType::ColAgg
    } else if b1c.is_some_and(|c| (or, oc) == (xc, c)) {
        RowType::ColAggB1T
    } else if b1c.is_some_and(|c| (or, oc) == (c, xc)) {
        RowType::ColAggB1
    } else if b1c.is_some_and(|c| (or, oc) == (1, c)) {
        RowType::ColAggB1R
    } else if or == xr {
        RowType::NoAggConst
    } else if or == 1 {
        RowType::ColAggConst
    } else {
        return None;
    })
}

/// Reference 1.6 rules 7 and 8: a plan without operations, or a non-aggregating Cell/Row plan
/// with one operation over data inputs, gains nothing from fusion. A MultiAgg plan without
/// operations still gains where two of its aggregates read the same input (`min(X)`, `max(X)`
/// and `sum(X)` in one pass over X, as SystemDS fuses them).
fn is_worth_fusing(p: &CPlan) -> bool {
    if let TemplateSpec::MAgg { .. } = &p.template {
        let mut read = BTreeSet::new();
        let shared_read = p.outputs.iter().any(|&o| match &p.nodes[o] {
            CNode::Data { input, .. } => !read.insert(*input),
            _ => false,
        });
        if shared_read {
            return true;
        }
    }
    // `sum(X^2)` becomes a sum-of-squares aggregate over X with no body operation left; the
    // unfused plan materializes `X^2` first (lafuse has no unfused `sumsq`), so the squaring
    // counts as the operation fusion saves.
    let squares = match &p.template {
        TemplateSpec::Cell { agg, .. } => usize::from(*agg == Some(CellAgg::SumSq)),
        TemplateSpec::MAgg { aggs, .. } => aggs.iter().filter(|a| **a == CellAgg::SumSq).count(),
        _ => 0,
    };
    let ops = p.num_operations() + squares;
    if ops == 0 {
        return false;
    }
    let single = ops == 1;
    match &p.template {
        TemplateSpec::Cell {
            cell_type: CellType::NoAgg,
            ..
        } => !single,
        TemplateSpec::Row {
            row_type: RowType::NoAgg | RowType::NoAggB1 | RowType::RowAgg,
            ..
        } => !single || matches!(p.nodes[p.outputs[0]], CNode::VectMatMult { .. }),
        _ => true,
    }
}

fn remap(n: &CNode, map: &[CNodeId]) -> CNode {
    let m = |i: &CNodeId| map[*i];
    match n {
        CNode::Data { .. } | CNode::Literal { .. } => n.clone(),
        CNode::Unary { f, x } => CNode::Unary { f: *f, x: m(x) },
        CNode::Pow2 { x } => CNode::Pow2 { x: m(x) },
        CNode::Mult2 { x } => CNode::Mult2 { x: m(x) },
        CNode::Binary { f, a, b } => CNode::Binary {
            f: *f,
            a: m(a),
            b: m(b),
        },
        CNode::Ternary { f, a, b, c } => CNode::Ternary {
            f: *f,
            a: m(a),
            b: m(b),
            c: m(c),
        },
        CNode::Nary { f, xs } => CNode::Nary {
            f: *f,
            xs: xs.iter().map(m).collect(),
        },
        CNode::RowAgg { f, x } => CNode::RowAgg { f: *f, x: m(x) },
        CNode::RowSumSq { x } => CNode::RowSumSq { x: m(x) },
        CNode::VectMatMult { a, b } => CNode::VectMatMult { a: m(a), b: m(b) },
        CNode::OuterMultAdd { a, b } => CNode::OuterMultAdd { a: m(a), b: m(b) },
        CNode::DotCell { a, b } => CNode::DotCell { a: m(a), b: m(b) },
        CNode::OuterDot { u, v } => CNode::OuterDot { u: m(u), v: m(v) },
        CNode::FinalProduct { g, w } => CNode::FinalProduct { g: m(g), w: m(w) },
        CNode::Transpose { x } => CNode::Transpose { x: m(x) },
    }
}

/// The hash-consing table of the second pass: structurally equal nodes are created once
/// (reference 5.9 CSE; keys are the nodes' canonical JSON).
#[derive(Default)]
struct Interner {
    nodes: Vec<CNode>,
    index: HashMap<String, CNodeId>,
}

impl Interner {
    fn intern(&mut self, n: CNode) -> CNodeId {
        let key = serde_json::to_string(&n).unwrap_or_default();
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        self.nodes.push(n);
        self.index.insert(key, self.nodes.len() - 1);
        self.nodes.len() - 1
    }

    fn literal(&self, i: CNodeId) -> Option<f64> {
        match &self.nodes[i] {
            CNode::Literal { value } => value.as_f64(),
            _ => None,
        }
    }

    /// Interns `n` after the node-local rewrites of reference 5.8 (operands are already
    /// rewritten), and for Outer plans the template-level rewrite: `X != 0` on the main input
    /// is 1 where it is a factor of the whole cell-wise part (`top_factor`; the operator gives
    /// `0 * G` at X's zeros) and `1 * e` is `e`.
    fn simplify(&mut self, n: CNode, is_outer: bool, top_factor: bool) -> CNodeId {
        match n {
            CNode::Binary {
                f: BinaryOp::Ne,
                a,
                b,
            } if top_factor
                && matches!(
                    self.nodes[a],
                    CNode::Data {
                        access: Access::Main,
                        ..
                    }
                )
                && self.literal(b) == Some(0.0) =>
            {
                self.intern(CNode::Literal {
                    value: Literal::Double(1.0),
                })
            }
            CNode::Binary {
                f: BinaryOp::Mul,
                a,
                b,
            } if is_outer && (self.literal(a) == Some(1.0) || self.literal(b) == Some(1.0)) => {
                if self.literal(a) == Some(1.0) {
                    b
                } else {
                    a
                }
            }
            CNode::Binary {
                f: BinaryOp::Pow,
                a,
                b,
            } if self.literal(b) == Some(2.0) => self.intern(CNode::Pow2 { x: a }),
            CNode::Binary {
                f: BinaryOp::Mul,
                a,
                b,
            } if self.literal(b) == Some(2.0) => self.intern(CNode::Mult2 { x: a }),
            CNode::RowAgg { f: AggOp::Sum, x } if matches!(self.nodes[x], CNode::Pow2 { .. }) => {
                let CNode::Pow2 { x: base } = self.nodes[x] else {
                    return x;
                };
                self.intern(CNode::RowSumSq { x: base })
            }
            n => self.intern(n),
        }
    }

    /// The nodes reachable from `outputs`, renumbered in order (rewrites may orphan nodes).
    fn compact(self, outputs: &[CNodeId]) -> (Vec<CNode>, Vec<CNodeId>) {
        let mut live = vec![false; self.nodes.len()];
        let mut stack: Vec<CNodeId> = outputs.to_vec();
        while let Some(i) = stack.pop() {
            if !live[i] {
                live[i] = true;
                stack.extend(self.nodes[i].operands());
            }
        }
        let mut new_id = vec![usize::MAX; self.nodes.len()];
        let mut out = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if live[i] {
                new_id[i] = out.len();
                out.push(remap(n, &new_id));
            }
        }
        (out, outputs.iter().map(|&o| new_id[o]).collect())
    }
}

/// Whether a Row plan node produces a vector per row (reference 5.10): data rows read as
/// vectors, element-wise operations over a vector, row-times-matrix products.
fn is_vector_node(nodes: &[CNode], i: CNodeId, memo: &mut Vec<Option<bool>>) -> bool {
    if let Some(v) = memo[i] {
        return v;
    }
    let v = match &nodes[i] {
        CNode::Data { access, .. } => {
            matches!(access, Access::Main | Access::Aligned | Access::RowVector)
        }
        CNode::Literal { .. } | CNode::RowAgg { .. } | CNode::RowSumSq { .. } => false,
        CNode::VectMatMult { .. } | CNode::OuterMultAdd { .. } => true,
        n => n.operands().iter().any(|&o| is_vector_node(nodes, o, memo)),
    };
    memo[i] = Some(v);
    v
}

/// The number of row-vector buffers a Row operator needs (reference 5.10, exact dynamic
/// count): the maximum number of simultaneously live vector intermediates when nodes are
/// evaluated in order and each is released after its last use. Data inputs are views, not
/// buffers. Unlike SystemDS's static-buffer simulation this keeps no spare slot (reference
/// defect #10).
pub fn count_vector_intermediates(nodes: &[CNode], outputs: &[CNodeId]) -> usize {
    let mut memo = vec![None; nodes.len()];
    let mut remaining = vec![0usize; nodes.len()];
    for n in nodes {
        for o in n.operands() {
            remaining[o] += 1;
        }
    }
    for &o in outputs {
        remaining[o] += 1;
    }
    let mut live = 0usize;
    let mut peak = 0usize;
    for (i, n) in nodes.iter().enumerate() {
        let is_buffer = is_vector_node(nodes, i, &mut memo) && !matches!(n, CNode::Data { .. });
        if is_buffer {
            live += 1;
            peak = peak.max(live);
        }
        for o in n.operands() {
            remaining[o] -= 1;
            if remaining[o] == 0
                && is_vector_node(nodes, o, &mut memo)
                && !matches!(nodes[o], CNode::Data { .. })
            {
                live -= 1;
            }
        }
    }
    peak
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::template::test_util::build;
    use crate::fusion::{plan_fusion, FuseAll};
    use crate::hops::{BinaryOp as B, DagBuilder, UnaryOp as U};

    fn program(dag: &HopDag) -> FusedProgram {
        let plan = plan_fusion(dag, &FuseAll).unwrap();
        construct_cplans(dag, &plan.memo, &plan.selection).unwrap()
    }

    /// sum(X * Y * Z) after `pad` unrelated hops, so hop ids differ between calls.
    fn sum_xyz(pad: usize, plus_z: bool) -> (HopDag, HopId) {
        let mut root = HopId(0);
        let dag = build(|b: &mut DagBuilder| {
            let mut outs = Vec::new();
            for k in 0..pad {
                let p = b.input(&format!("P{k}"), 10, 10, 100);
                outs.push(b.unary(U::Abs, p).unwrap());
            }
            let x = b.input("X", 100, 100, 10_000);
            let y = b.input("Y", 100, 100, 10_000);
            let z = b.input("Z", 100, 100, 10_000);
            let xy = b.binary(B::Mul, x, y).unwrap();
            let op = if plus_z { B::Add } else { B::Mul };
            let xyz = b.binary(op, xy, z).unwrap();
            root = b.agg(AggOp::Sum, Direction::Full, xyz).unwrap();
            outs.push(root);
            outs
        });
        (dag, root)
    }

    fn op_at(p: &FusedProgram, root: HopId) -> &FusedOperator {
        p.operators
            .iter()
            .find(|o| o.outputs == [root])
            .unwrap_or_else(|| panic!("no operator at ({root}):\n{}", p.explain()))
    }

    #[test]
    fn row_types_follow_the_systemds_rules_and_serde_names() {
        // X 100×10, B1 10×3 (row-times-matrix) and Y 100×3 (final-product right side).
        let mut h = Vec::new();
        let dag = build(|b: &mut DagBuilder| {
            let x = b.input("X", 100, 10, 1000);
            let bm = b.input("B", 10, 3, 30);
            let y = b.input("Y", 100, 3, 300);
            let v = b.input("v", 10, 1, 10);
            let c = b.input("c", 100, 5, 500);
            let two = b.literal_f64(2.0);
            let x2 = b.binary(B::Mul, x, two).unwrap(); // 100×10
            let xb = b.matmul(x, bm).unwrap(); // 100×3
            let xv = b.matmul(x, v).unwrap(); // 100×1
            let s = b.agg(AggOp::Sum, Direction::Full, x).unwrap(); // scalar
            let xt = b.transpose(x).unwrap();
            let tv = b.matmul(xt, xv).unwrap(); // 10×1
            let cs = b.agg(AggOp::Sum, Direction::Col, x).unwrap(); // 1×10
            let ty = b.matmul(xt, y).unwrap(); // 10×3
            let tb = b.transpose(xb).unwrap();
            let tbx = b.matmul(tb, x).unwrap(); // 3×10
            let csb = b.agg(AggOp::Sum, Direction::Col, xb).unwrap(); // 1×3
            let cb = b
                .add(OpKind::Nary(crate::hops::NaryOp::Cbind), &[x, c])
                .unwrap(); // 100×15
            let csc = b.agg(AggOp::Sum, Direction::Col, cb).unwrap(); // 1×15
            let ix = b.index(x, (1, 100), (1, 4)).unwrap(); // 100×4
            h.extend([x, bm, y, x2, xb, xv, s, tv, cs, ty, tbx, csb, cb, csc, ix]);
            vec![x2, xv, s, tv, cs, ty, tbx, csb, csc, ix]
        });
        let f = FusionDag::new(&dag).unwrap();
        let [x, bm, y, x2, xb, xv, s, tv, cs, ty, tbx, csb, cb, csc, ix] =
            <[HopId; 15]>::try_from(h).unwrap();
        let rt = |out, b1| derive_row_type(&f, out, Some(x), b1);
        assert_eq!(rt(x2, None), Some(RowType::NoAgg));
        assert_eq!(rt(xb, Some(bm)), Some(RowType::NoAggB1));
        assert_eq!(rt(ix, None), Some(RowType::NoAggB1));
        assert_eq!(rt(cb, None), Some(RowType::NoAggConst));
        assert_eq!(rt(s, None), Some(RowType::FullAgg));
        assert_eq!(rt(xv, None), Some(RowType::RowAgg));
        assert_eq!(rt(cs, None), Some(RowType::ColAgg));
        assert_eq!(rt(tv, None), Some(RowType::ColAggT));
        assert_eq!(rt(tbx, Some(bm)), Some(RowType::ColAggB1));
        assert_eq!(rt(ty, Some(y)), Some(RowType::ColAggB1T));
        assert_eq!(rt(csb, Some(bm)), Some(RowType::ColAggB1R));
        assert_eq!(rt(csc, None), Some(RowType::ColAggConst));
        // Without B1 a 10×3 output fits no rule: no row type, the plan is dropped.
        assert_eq!(rt(ty, None), None);
        // Without a known X everything is NO_AGG (rule 1).
        assert_eq!(derive_row_type(&f, csb, None, None), Some(RowType::NoAgg));

        let names: Vec<String> = [
            RowType::NoAgg,
            RowType::NoAggB1,
            RowType::NoAggConst,
            RowType::FullAgg,
            RowType::RowAgg,
            RowType::ColAgg,
            RowType::ColAggT,
            RowType::ColAggB1,
            RowType::ColAggB1T,
            RowType::ColAggB1R,
            RowType::ColAggConst,
        ]
        .into_iter()
        .map(|row_type| {
            let spec = TemplateSpec::Row {
                row_type,
                num_vectors: 0,
            };
            let json = serde_json::to_value(&spec).unwrap();
            assert_eq!(json["row_type"], spec.variant());
            let back: TemplateSpec = serde_json::from_value(json).unwrap();
            assert_eq!(back, spec);
            spec.variant()
        })
        .collect();
        assert_eq!(
            names,
            [
                "no_agg",
                "no_agg_b1",
                "no_agg_const",
                "full_agg",
                "row_agg",
                "col_agg",
                "col_agg_t",
                "col_agg_b1",
                "col_agg_b1_t",
                "col_agg_b1r",
                "col_agg_const"
            ]
        );
        assert!(RowType::ColAggB1R.is_col_sum() && !RowType::ColAggB1R.is_row_wise());
        assert!(RowType::ColAggB1.is_outer_accumulation() && RowType::NoAggConst.is_row_wise());
    }

    /// Element-wise work, which the template ranks give to Row, becomes Cell (no aggregate, a
    /// full sum or column sums), over column vectors and matrices alike; a column vector's row
    /// sums (a row aggregate node) stay Row.
    #[test]
    fn row_plans_with_cell_wise_bodies_are_cell_plans() {
        let mut h = Vec::new();
        let dag = build(|b: &mut DagBuilder| {
            let v = b.input("v", 1000, 1, 1000);
            let y = b.input("y", 1000, 1, 1000);
            let x = b.input("X", 1000, 10, 10_000);
            let two = b.literal_f64(2.0);
            let sq = b.binary(B::Pow, v, two).unwrap();
            let neg = b.unary(U::Neg, sq).unwrap();
            let e = b.unary(U::Exp, neg).unwrap();
            h.push(b.binary(B::Mul, e, y).unwrap()); // exp(-(v^2)) * y
            let l = b.unary(U::Log, y).unwrap();
            let yl = b.binary(B::Mul, v, l).unwrap();
            h.push(b.agg(AggOp::Sum, Direction::Full, yl).unwrap()); // sum(v * log(y))
            let xn = b.unary(U::Neg, x).unwrap();
            let xe = b.unary(U::Exp, xn).unwrap();
            h.push(b.binary(B::Mul, xe, two).unwrap()); // exp(-X) * 2
            let ve = b.unary(U::Abs, v).unwrap();
            let vs = b.unary(U::Sqrt, ve).unwrap();
            h.push(b.agg(AggOp::Sum, Direction::Row, vs).unwrap()); // rowSums(sqrt(abs(v)))
            let xa = b.unary(U::Abs, x).unwrap();
            let xs = b.unary(U::Sqrt, xa).unwrap();
            h.push(b.agg(AggOp::Sum, Direction::Col, xs).unwrap()); // colSums(sqrt(abs(X)))
                                                                    // colSums(abs(v) - (v > 1.5)): 1×1 like `t(v) %*% y`, but a column aggregate.
            let va = b.unary(U::Abs, v).unwrap();
            let lim = b.literal_f64(1.5);
            let vg = b.binary(B::Gt, v, lim).unwrap();
            let vd = b.binary(B::Sub, va, vg).unwrap();
            h.push(b.agg(AggOp::Sum, Direction::Col, vd).unwrap());
            h.clone()
        });
        let p = program(&dag);
        let name = |k: usize| {
            let c = &op_at(&p, h[k]).cplan;
            c.explain().lines().next().unwrap_or_default().to_string()
        };
        assert!(name(0).starts_with("cell no_agg"), "{}", p.explain());
        assert!(name(1).starts_with("cell full_agg"), "{}", p.explain());
        assert!(name(2).starts_with("cell no_agg"), "{}", p.explain());
        // (The row sums of an m×1 input have its shape: a Row no_agg plan with a row sum.)
        assert!(name(3).starts_with("row no_agg"), "{}", p.explain());
        assert!(name(4).starts_with("cell col_agg"), "{}", p.explain());
        assert!(name(5).starts_with("cell col_agg"), "{}", p.explain());
        // Every input of the converted plans is read aligned with the main input.
        for k in [0, 1, 2, 4, 5] {
            let c = &op_at(&p, h[k]).cplan;
            assert!(c.nodes.iter().all(|n| !matches!(
                n,
                CNode::Data {
                    access: Access::ColVector | Access::RowVector | Access::Whole,
                    ..
                }
            )));
        }
    }

    #[test]
    fn the_structural_hash_ignores_hop_ids_but_not_structure() {
        let (d1, r1) = sum_xyz(0, false);
        let (d2, r2) = sum_xyz(3, false);
        let (d3, r3) = sum_xyz(0, true);
        let (p1, p2, p3) = (program(&d1), program(&d2), program(&d3));
        let (o1, o2, o3) = (op_at(&p1, r1), op_at(&p2, r2), op_at(&p3, r3));
        assert_ne!(r1, r2);
        assert_eq!(o1.cplan, o2.cplan);
        assert_eq!(o1.cplan.structural_hash(), o2.cplan.structural_hash());
        assert_ne!(o1.cplan.structural_hash(), o3.cplan.structural_hash());
        // The operator replaces the two products and the sum; its inputs are X, Y, Z.
        assert_eq!(o1.covered.len(), 3);
        assert_eq!(o1.inputs.len(), 3);
        assert_eq!(o1.cplan.inputs, vec![InputKind::Matrix; 3]);
    }

    #[test]
    fn cplans_round_trip_through_json_and_explain_names_template_and_variant() {
        let (d, r) = sum_xyz(0, false);
        let p = program(&d);
        let c = &op_at(&p, r).cplan;
        let back: CPlan = serde_json::from_str(&serde_json::to_string(c).unwrap()).unwrap();
        assert_eq!(&back, c);
        assert!(
            c.explain().starts_with("cell full_agg (3 inputs"),
            "{}",
            c.explain()
        );
        let json: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
        assert_eq!(json["operators"][0]["template"], "cell");
        assert_eq!(json["operators"][0]["variant"], "full_agg");
        assert!(p.explain().contains("op 0: outputs"));
    }

    #[test]
    fn simplification_rewrites_of_reference_5_8() {
        // rowSums(exp(X) ^ 2) → row sum of squares; exp(X) * 2 → x + x. (A bare
        // rowSums(X ^ 2) becomes a single operation and is left unfused, reference 1.6.)
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input("X", 100, 50, 5000);
            let two = b.literal_f64(2.0);
            let e = b.unary(U::Exp, x).unwrap();
            let sq = b.binary(B::Pow, e, two).unwrap();
            ids.push(b.agg(AggOp::Sum, Direction::Row, sq).unwrap());
            let m2 = b.binary(B::Mul, e, two).unwrap();
            ids.push(b.agg(AggOp::Sum, Direction::Col, m2).unwrap());
            ids.clone()
        });
        let p = program(&dag);
        let rs = &op_at(&p, ids[0]).cplan;
        assert!(
            matches!(rs.nodes[rs.outputs[0]], CNode::RowSumSq { .. }),
            "{}",
            rs.explain()
        );
        let cs = &op_at(&p, ids[1]).cplan;
        assert!(
            matches!(cs.nodes[cs.outputs[0]], CNode::Mult2 { .. }),
            "{}",
            cs.explain()
        );
        assert!(!cs.nodes.iter().any(|n| matches!(n, CNode::Literal { .. })));
    }

    #[test]
    fn outer_plans_drop_the_not_equal_zero_mask_of_their_driver() {
        // sum((X != 0) * log(U %*% t(V) + 1e-15)): the mask is implied by the sparse driver.
        let mut root = HopId(0);
        let dag = build(|b| {
            let x = b.input("X", 1000, 900, 9000);
            let u = b.input("U", 1000, 10, 10_000);
            let v = b.input("V", 900, 10, 9000);
            let zero = b.literal_f64(0.0);
            let nz = b.binary(B::Ne, x, zero).unwrap();
            let vt = b.transpose(v).unwrap();
            let uv = b.matmul(u, vt).unwrap();
            let eps = b.literal_f64(1e-15);
            let pe = b.binary(B::Add, uv, eps).unwrap();
            let lg = b.unary(U::Log, pe).unwrap();
            let m = b.binary(B::Mul, nz, lg).unwrap();
            root = b.agg(AggOp::Sum, Direction::Full, m).unwrap();
            vec![root]
        });
        let p = program(&dag);
        let op = op_at(&p, root);
        let c = &op.cplan;
        assert_eq!(c.template.name(), "outer", "{}", c.explain());
        assert!(
            !c.nodes.iter().any(|n| matches!(
                n,
                CNode::Binary {
                    f: BinaryOp::Ne | BinaryOp::Mul,
                    ..
                }
            )),
            "{}",
            c.explain()
        );
        assert!(matches!(
            c.nodes[c.outputs[0]],
            CNode::Unary { f: U::Log, .. }
        ));
        // X stays input 0 although the body no longer reads it: it drives the iteration.
        assert_eq!(op.inputs.len(), 3);
        assert_eq!(
            dag.hop(op.inputs[0]).op,
            crate::hops::OpKind::TransientRead { name: "X".into() }
        );
    }

    #[test]
    fn hash_consing_eliminates_common_subexpressions() {
        let mut t = Interner::default();
        let a = t.intern(CNode::Data {
            input: 0,
            access: Access::Main,
        });
        let e1 = t.simplify(CNode::Unary { f: U::Exp, x: a }, false, false);
        let e2 = t.simplify(CNode::Unary { f: U::Exp, x: a }, false, false);
        assert_eq!(e1, e2);
        let m = t.simplify(
            CNode::Binary {
                f: BinaryOp::Mul,
                a: e1,
                b: e2,
            },
            false,
            false,
        );
        let (nodes, outs) = t.compact(&[m]);
        assert_eq!(nodes.len(), 3);
        assert_eq!(outs, vec![2]);
    }

    #[test]
    fn vector_intermediates_are_counted_exactly() {
        let data = |input| CNode::Data {
            input,
            access: Access::Main,
        };
        // A unary chain needs one buffer at a time plus the one being written: 2.
        let chain = vec![
            data(0),
            CNode::Unary { f: U::Exp, x: 0 },
            CNode::Unary { f: U::Abs, x: 1 },
            CNode::Unary { f: U::Sqrt, x: 2 },
        ];
        assert_eq!(count_vector_intermediates(&chain, &[3]), 2);
        // exp(a) kept alive across abs(a) and their product: 3 live at the product.
        let diamond = vec![
            data(0),
            CNode::Unary { f: U::Exp, x: 0 },
            CNode::Unary { f: U::Abs, x: 0 },
            CNode::Binary {
                f: BinaryOp::Mul,
                a: 1,
                b: 2,
            },
            CNode::RowAgg {
                f: AggOp::Sum,
                x: 3,
            },
        ];
        assert_eq!(count_vector_intermediates(&diamond, &[4]), 3);
        // Scalars only: no buffers.
        let scalars = vec![CNode::Literal {
            value: Literal::Double(1.0),
        }];
        assert_eq!(count_vector_intermediates(&scalars, &[0]), 0);
    }

    #[test]
    fn trivial_operators_are_dropped() {
        // Z = X * Y alone gains nothing from fusion (reference 1.6 rule 7).
        let dag = build(|b| {
            let x = b.input("X", 100, 100, 10_000);
            let y = b.input("Y", 100, 100, 10_000);
            vec![b.binary(B::Mul, x, y).unwrap()]
        });
        assert!(program(&dag).operators.is_empty());
    }
}
