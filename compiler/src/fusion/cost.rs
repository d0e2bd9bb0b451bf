//! The analytical cost model of fusion plans (paper section 4.2, formula (3); reference 4.9),
//! kept in one place so that researchers can vary it: a [`CostModel`] value holds the
//! bandwidth and compute constants, and [`plan_cost`] costs a plan described by a
//! [`PlanChooser`] (the memo table under an assignment of interesting points, or a finished
//! [`Selection`]) with per-operator *cost vectors*.
//!
//! Per fused operator (and per unfused operation) the time is
//! `8·|out| / write_bw + max(Σ input bytes / read_bw, Σ flops / compute_bw)`, scaled by the
//! sparsity of the driver for Outer operators. Inside one operator an input read by several
//! fused operations is read once, and a common subexpression is computed once (cost vectors
//! keyed by hop); across operators, a hop fused into several operators is charged in each
//! (redundant compute), and a materialized hop is computed once, however many operators read it.

use crate::fusion::dag::FusionDag;
use crate::fusion::memo::{typed_score, MemoEntry, MemoTable, TemplateKind};
use crate::fusion::select::Selection;
use crate::hops::{
    AggOp, BinaryOp, CumulativeOp, Direction, HopId, NaryOp, OpKind, TernaryOp, UnaryOp,
};
use std::collections::{BTreeMap, BTreeSet};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// The constants of the cost model (reference 4.9 and 11.2; SystemDS
/// `PlanSelectionFuseCostBasedV2`). Bandwidths in bytes per second, compute in FLOP per second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostModel {
    /// Bandwidth of writing a materialized intermediate (allocation plus write), 2 GB/s.
    pub write_bandwidth: f64,
    /// Bandwidth of reading a materialized input from memory, 32 GB/s.
    pub read_bandwidth: f64,
    /// Peak compute rate: 2 GFLOP/s per core times [`CostModel::cores`].
    pub compute_bandwidth: f64,
    /// The sparsity assumed for an Outer operator's driver whose sparsity is unknown, 0.1.
    pub unknown_sparsity: f64,
}

impl CostModel {
    /// SystemDS's constants with `cores` cores of local parallelism (`cores` of 0 counts as 1).
    pub fn systemds(cores: u32) -> CostModel {
        CostModel {
            write_bandwidth: 2.0 * GIB,
            read_bandwidth: 32.0 * GIB,
            compute_bandwidth: 2.0 * GIB * f64::from(cores.max(1)),
            unknown_sparsity: 0.1,
        }
    }

    /// The time of one operator from its cost vector: `write + max(read, compute)`, scaled by
    /// `sparsity_scale` (1 except for Outer operators). Formula (3) of the paper, per operator.
    pub fn operator_time(&self, v: &CostVector, sparsity_scale: f64) -> f64 {
        let write = 8.0 * v.output_cells / self.write_bandwidth;
        let read = v.input_bytes.values().sum::<f64>() / self.read_bandwidth;
        let compute = v.flops / self.compute_bandwidth;
        (write + read.max(compute)) * sparsity_scale
    }

    /// The memory estimate of a hop's value in bytes: dense `8·cells`, or a CSR estimate when
    /// the non-zeros are known and that is smaller (reference 4.9 `getSafeMemEst`).
    pub fn bytes(&self, dag: &FusionDag<'_>, h: HopId) -> f64 {
        let dense = 8.0 * cells(dag, h);
        match (dag.dims(h), dag.hop(h).nnz) {
            (Some((r, _)), Some(nnz)) => dense.min(12.0 * nnz as f64 + 4.0 * (r as f64 + 1.0)),
            _ => dense,
        }
    }

    /// The sparsity of a hop's value, [`CostModel::unknown_sparsity`] when unknown.
    pub fn sparsity(&self, dag: &FusionDag<'_>, h: HopId) -> f64 {
        match (dag.dims(h), dag.hop(h).nnz) {
            (Some((r, c)), Some(nnz)) if r > 0 && c > 0 => {
                (nnz as f64 / (r as f64 * c as f64)).min(1.0)
            }
            _ => self.unknown_sparsity,
        }
    }
}

impl Default for CostModel {
    /// SystemDS's constants for one core: plans (and tests) do not depend on the machine.
    fn default() -> CostModel {
        CostModel::systemds(1)
    }
}

/// `max(rows, 1) · max(cols, 1)`, 1 for scalars and unknown sizes (reference 4.9).
pub fn cells(dag: &FusionDag<'_>, h: HopId) -> f64 {
    let hop = dag.hop(h);
    let r = hop.rows.unwrap_or(1).max(1) as f64;
    let c = hop.cols.unwrap_or(1).max(1) as f64;
    r * c
}

/// The floating-point operations of one hop (SystemDS `ComputeCost.getHOPComputeCost`,
/// reference 4.9): a per-cell weight times the output cells; matrix multiplies
/// `2·ncol(left)·sparsity(left)` per output cell, aggregations their weight times the
/// reduced length. Leaves (inputs, literals) cost nothing.
pub fn flops(dag: &FusionDag<'_>, h: HopId) -> f64 {
    let out = cells(dag, h);
    let first = dag.input(h, 0);
    let weight = match dag.op(h) {
        OpKind::Literal(_)
        | OpKind::TransientRead { .. }
        | OpKind::PersistentRead { .. }
        | OpKind::TransientWrite { .. }
        | OpKind::PersistentWrite { .. } => return 0.0,
        OpKind::Unary(u) => match u {
            UnaryOp::Sqrt => 2.0,
            UnaryOp::Exp | UnaryOp::Sin => 18.0,
            UnaryOp::Sigmoid => 21.0,
            UnaryOp::Log => 32.0,
            UnaryOp::Cos => 22.0,
            UnaryOp::Tan => 42.0,
            UnaryOp::Asin | UnaryOp::Sinh => 93.0,
            UnaryOp::Acos | UnaryOp::Cosh => 103.0,
            UnaryOp::Atan | UnaryOp::Tanh => 40.0,
            _ => 1.0,
        },
        OpKind::Binary(b) => match b {
            BinaryOp::IntDiv => 6.0,
            BinaryOp::Mod => 8.0,
            BinaryOp::Div => 22.0,
            BinaryOp::Log => 32.0,
            BinaryOp::Pow => {
                let two = dag.input(h, 1).and_then(|e| dag.literal_f64(e)) == Some(2.0);
                if two {
                    1.0
                } else {
                    16.0
                }
            }
            _ => 1.0,
        },
        OpKind::Ternary(TernaryOp::IfElse) => 2.0,
        OpKind::Ternary(_) => 1.0,
        OpKind::Nary(NaryOp::Min | NaryOp::Max) => dag.inputs(h).len() as f64,
        OpKind::Cumulative(CumulativeOp::Cumsum | CumulativeOp::Cumprod) => 1.0,
        OpKind::MatMul => {
            let left = match first {
                Some(l) => l,
                None => return 0.0,
            };
            let k = dag.hop(left).cols.unwrap_or(1).max(1) as f64;
            let sp = match (dag.dims(left), dag.hop(left).nnz) {
                (Some((r, c)), Some(nnz)) if r > 0 && c > 0 => {
                    (nnz as f64 / (r as f64 * c as f64)).min(1.0)
                }
                _ => 1.0,
            };
            2.0 * k * sp
        }
        OpKind::AggUnary { op, dir } => {
            let w = match op {
                AggOp::Sum | AggOp::Mean => 4.0,
                AggOp::Var => 16.0,
                _ => 1.0,
            };
            let (r, c) = first.map_or((1.0, 1.0), |i| {
                let hop = dag.hop(i);
                (
                    hop.rows.unwrap_or(1).max(1) as f64,
                    hop.cols.unwrap_or(1).max(1) as f64,
                )
            });
            let reduced = match dir {
                Direction::Full => r * c,
                Direction::Row => c,
                Direction::Col => r,
            };
            w * reduced
        }
        _ => 1.0,
    };
    weight * out
}

/// The cost vector of one operator (paper section 4.2): output size, the distinct
/// materialized inputs it reads (keyed by hop, so a shared read counts once), and the
/// operations it computes (keyed by hop, so a CSE inside the operator counts once).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CostVector {
    /// Cells of the operator's output.
    pub output_cells: f64,
    /// Bytes of each distinct materialized matrix input.
    pub input_bytes: BTreeMap<HopId, f64>,
    /// Total FLOPs of the operations computed inside the operator.
    pub flops: f64,
}

/// How a costing walk finds the plan of a hop: as the root of an operator, or inside an
/// operator of a template. The rules are those of [`crate::fusion::select::select_fuse_all`],
/// so the cost of a plan is the cost of the selection that traversal builds from it.
pub trait PlanChooser {
    /// The plan of `h` when it starts an operator (`None`: computed unfused).
    fn root(&self, h: HopId) -> Option<&MemoEntry>;
    /// The plan of `h` when fused into an operator of `template` (`None`: `h` is read
    /// materialized and starts its own operator).
    fn within(&self, h: HopId, template: TemplateKind) -> Option<&MemoEntry>;
}

/// The memo table filtered by a `usable` predicate (an assignment of interesting points).
pub struct MemoChooser<'m> {
    /// The memo table.
    pub memo: &'m MemoTable,
    /// Which entries the plan may use.
    pub usable: &'m dyn Fn(HopId, &MemoEntry) -> bool,
}

impl PlanChooser for MemoChooser<'_> {
    fn root(&self, h: HopId) -> Option<&MemoEntry> {
        if self.memo.is_excluded(h) {
            return None;
        }
        self.memo
            .group(h)
            .iter()
            .filter(|e| e.is_valid() && (self.usable)(h, e))
            .min_by_key(|e| (e.template.rank(), std::cmp::Reverse(e.num_refs())))
    }

    fn within(&self, h: HopId, template: TemplateKind) -> Option<&MemoEntry> {
        self.memo
            .group(h)
            .iter()
            .filter(|e| template.can_absorb(e.template) && (self.usable)(h, e))
            .min_by_key(|e| typed_score(e, template))
    }
}

/// A finished selection: roots start operators with their recorded plan; inside an operator
/// the hop's selected plan the template can absorb with the smallest typed score, as
/// [`crate::fusion::select::select_fuse_all`] chose it.
pub struct SelectionChooser<'s>(pub &'s Selection);

impl PlanChooser for SelectionChooser<'_> {
    fn root(&self, h: HopId) -> Option<&MemoEntry> {
        self.0.roots.get(&h)
    }

    fn within(&self, h: HopId, template: TemplateKind) -> Option<&MemoEntry> {
        self.0
            .plans
            .get(&h)?
            .iter()
            .filter(|e| template.can_absorb(e.template))
            .min_by_key(|e| typed_score(e, template))
    }
}

/// The modelled execution time (seconds) of the plan `chooser` describes, starting from the
/// materialized hops `starts`; with `scope`, hops outside it are not costed (a partition's
/// share of the plan, reference 4.9 `getPlanCost`).
///
/// Every materialized hop is computed once: as an operator root with its plan and the plans
/// of the hops it fuses (a fused hop charged once per operator that fuses it), or unfused
/// when it has no plan. Leaves cost nothing. A MultiAgg is one operator over the Cell bodies
/// of its aggregates, with one cost vector (shared reads counted once).
pub fn plan_cost(
    dag: &FusionDag<'_>,
    model: &CostModel,
    chooser: &dyn PlanChooser,
    starts: &[HopId],
    scope: Option<&BTreeSet<HopId>>,
) -> f64 {
    plan_cost_bounded(dag, model, chooser, starts, scope, f64::INFINITY)
}

/// [`plan_cost`] that gives up with `+∞` as soon as the running sum exceeds `bound` (the
/// best cost found so far; reference 4.9 early abort): such a plan cannot win.
pub fn plan_cost_bounded(
    dag: &FusionDag<'_>,
    model: &CostModel,
    chooser: &dyn PlanChooser,
    starts: &[HopId],
    scope: Option<&BTreeSet<HopId>>,
    bound: f64,
) -> f64 {
    let mut total = 0.0;
    let mut done: BTreeSet<HopId> = BTreeSet::new();
    let mut work: Vec<HopId> = starts.iter().rev().copied().collect();
    while let Some(h) = work.pop() {
        if scope.is_some_and(|s| !s.contains(&h)) || !done.insert(h) {
            continue;
        }
        let inputs = dag.inputs(h);
        if dag.op(h).is_sink() || inputs.is_empty() {
            work.extend(inputs.iter().rev());
            continue;
        }
        let mut v = CostVector {
            output_cells: cells(dag, h),
            ..CostVector::default()
        };
        let mut scale = 1.0;
        match chooser.root(h) {
            Some(e) if e.template == TemplateKind::MAgg => {
                // One operator computes every aggregate of the MultiAgg over shared reads;
                // its first member accounts for it (reference 4.9), the others are done.
                let members: Vec<HopId> = e.inputs.iter().flatten().copied().collect();
                let first = members.first().copied().unwrap_or(h);
                if first != h && !done.contains(&first) && scope.is_none_or(|s| s.contains(&first))
                {
                    // Cost the operator from its first member: visit it first, come back.
                    done.remove(&h);
                    work.insert(0, h);
                    work.push(first);
                    continue;
                }
                let todo: Vec<HopId> = members
                    .into_iter()
                    .filter(|&a| a == h || !done.contains(&a))
                    .collect();
                v.output_cells = 0.0;
                let mut body = BTreeSet::new();
                for a in todo {
                    done.insert(a);
                    v.output_cells += cells(dag, a);
                    match chooser.within(a, TemplateKind::Cell) {
                        Some(c) => {
                            cost_body(dag, model, chooser, a, c, &mut v, &mut body, &mut work)
                        }
                        None => {
                            body.insert(a);
                            v.flops += flops(dag, a);
                            for &c in dag.inputs(a) {
                                read_materialized(dag, model, c, &mut v, &mut work);
                            }
                        }
                    }
                }
            }
            Some(e) => {
                let mut body = BTreeSet::new();
                cost_body(dag, model, chooser, h, e, &mut v, &mut body, &mut work);
                if e.template == TemplateKind::Outer {
                    // The driver is the largest input; the operator only touches its non-zeros.
                    let driver = v
                        .input_bytes
                        .iter()
                        .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0)))
                        .map(|(&d, _)| d);
                    scale = driver.map_or(model.unknown_sparsity, |d| model.sparsity(dag, d));
                }
            }
            None => {
                v.flops = flops(dag, h);
                for &c in inputs {
                    read_materialized(dag, model, c, &mut v, &mut work);
                }
            }
        }
        total += model.operator_time(&v, scale);
        if total > bound {
            return f64::INFINITY;
        }
    }
    total
}

/// Adds the operations an operator computes from `h` (with plan `e`) down its fusion
/// references to `v`, depth-first in input order with an explicit stack (fused chains can be
/// as deep as the DAG). A hop already in `body` is a CSE of this operator and counted once;
/// unfused inputs are read materialized and queued in `work`.
#[allow(clippy::too_many_arguments)]
fn cost_body<'c>(
    dag: &FusionDag<'_>,
    model: &CostModel,
    chooser: &'c dyn PlanChooser,
    h: HopId,
    e: &'c MemoEntry,
    v: &mut CostVector,
    body: &mut BTreeSet<HopId>,
    work: &mut Vec<HopId>,
) {
    let mut stack: Vec<(HopId, &MemoEntry)> = vec![(h, e)];
    while let Some((h, e)) = stack.pop() {
        if !body.insert(h) {
            continue;
        }
        v.flops += flops(dag, h);
        let mut fused = Vec::new();
        for (pos, &c) in dag.inputs(h).iter().enumerate() {
            let plan = if e.template != TemplateKind::MAgg && e.is_ref(pos) {
                chooser.within(c, e.template)
            } else {
                None
            };
            match plan {
                Some(ce) => fused.push((c, ce)),
                None => read_materialized(dag, model, c, v, work),
            }
        }
        stack.extend(fused.into_iter().rev());
    }
}

fn read_materialized(
    dag: &FusionDag<'_>,
    model: &CostModel,
    c: HopId,
    v: &mut CostVector,
    work: &mut Vec<HopId>,
) {
    if dag.is_matrix(c) {
        v.input_bytes.insert(c, model.bytes(dag, c));
    }
    work.push(c);
}

/// The modelled cost of a whole selection under `model` (all operators and all unfused
/// operations of the DAG), so that any policy's plan can be compared under one model.
pub fn cost_of(dag: &FusionDag<'_>, model: &CostModel, selection: &Selection) -> f64 {
    let starts = crate::fusion::select::selection_roots(dag);
    plan_cost(dag, model, &SelectionChooser(selection), &starts, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::template::test_util::{build, view};

    #[test]
    fn flops_follow_systemds_weights() {
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input("X", 10, 20, 200);
            let v = b.input("v", 20, 1, 20);
            let d = b.binary(BinaryOp::Div, x, x).unwrap();
            let two = b.literal_f64(2.0);
            let sq = b.binary(BinaryOp::Pow, x, two).unwrap();
            let mm = b.matmul(x, v).unwrap();
            let s = b.agg(AggOp::Sum, Direction::Row, x).unwrap();
            ids.extend([d, sq, mm, s]);
            vec![d, sq, mm, s]
        });
        let f = view(&dag);
        assert_eq!(flops(&f, ids[0]), 22.0 * 200.0);
        assert_eq!(flops(&f, ids[1]), 200.0);
        assert_eq!(flops(&f, ids[2]), 2.0 * 20.0 * 10.0);
        assert_eq!(flops(&f, ids[3]), 4.0 * 20.0 * 10.0);
    }

    #[test]
    fn operator_time_is_write_plus_max_of_read_and_compute() {
        let m = CostModel {
            write_bandwidth: 1.0,
            read_bandwidth: 2.0,
            compute_bandwidth: 4.0,
            unknown_sparsity: 0.1,
        };
        let mut v = CostVector {
            output_cells: 1.0,
            ..CostVector::default()
        };
        v.input_bytes.insert(HopId(0), 8.0);
        v.flops = 4.0;
        // write 8/1 + max(8/2, 4/4).
        assert_eq!(m.operator_time(&v, 1.0), 12.0);
        v.flops = 40.0;
        assert_eq!(m.operator_time(&v, 0.5), 9.0);
    }
}
