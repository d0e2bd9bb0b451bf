//! The plan-independent parts of a cost (reference 4.6 step 3b): what every plan of a
//! partition, or of a whole block, must read, compute and write. The cost-based search bounds
//! its plans with them; the tiered engine asks a block's floor before it plans it at all.

use super::selection_roots;
use crate::fusion::cost::{combine_times, CostModel};
use crate::fusion::dag::FusionDag;
use crate::fusion::partition::PlanPartition;
use crate::hops::HopId;
use std::collections::{BTreeMap, BTreeSet};

/// The plan-independent parts of a cost, in seconds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StaticBounds {
    pub(crate) read: f64,
    pub(crate) compute: f64,
    pub(crate) write: f64,
    min_sparsity: f64,
    /// Hops written under every plan (roots, externally consumed).
    always_written: BTreeSet<HopId>,
}

impl StaticBounds {
    /// A partition's: its inputs read, its hops computed, its starts written.
    pub(crate) fn of_partition(
        dag: &FusionDag<'_>,
        part: &PlanPartition,
        model: &CostModel,
    ) -> StaticBounds {
        StaticBounds::new(
            dag,
            model,
            &part.inputs,
            &part.hops,
            part.starts(),
            part.has_outer,
        )
    }

    /// A whole block's: its leaves read, every reachable operation computed, the outputs
    /// written. The block's hops outside every partition run unfused whatever the plan, and
    /// are costed by the same formula, so the bound holds for the block's whole cost.
    pub(crate) fn of_dag(dag: &FusionDag<'_>, model: &CostModel) -> StaticBounds {
        let (leaves, hops): (Vec<HopId>, Vec<HopId>) = dag
            .order()
            .iter()
            .copied()
            .filter(|&h| !dag.op(h).is_sink())
            .partition(|&h| dag.inputs(h).is_empty());
        // A leaf only a sink consumes (an output that is an input) is never read.
        let leaves: Vec<HopId> = leaves
            .into_iter()
            .filter(|&l| dag.consumers(l).iter().any(|&c| !dag.op(c).is_sink()))
            .collect();
        let hops: BTreeSet<HopId> = hops.into_iter().collect();
        // A leaf is read, not computed: an output that is one costs no write.
        let outputs = selection_roots(dag)
            .into_iter()
            .filter(|h| hops.contains(h))
            .collect();
        let has_outer = hops.iter().any(|&h| dag.is_outer_product_like_mm(h));
        StaticBounds::new(dag, model, &leaves, &hops, outputs, has_outer)
    }

    fn new(
        dag: &FusionDag<'_>,
        model: &CostModel,
        inputs: &[HopId],
        hops: &BTreeSet<HopId>,
        starts: Vec<HopId>,
        has_outer: bool,
    ) -> StaticBounds {
        // Every input is read, once (streamed, unless a reader may gather it: `least_read`);
        // a transpose that products read in place may be read as the matrix under it instead
        // (counted once with that matrix where the hops read it too, not at all where they
        // compute it), and is computed only where a plan fuses it.
        let streamed = |i: HopId| least_read(dag, model, hops, i);
        let mut reads: BTreeMap<HopId, f64> = BTreeMap::new();
        for &i in inputs.iter().filter(|&&i| dag.is_matrix(i)) {
            let (key, bytes) = if dag.is_read_in_place(i) {
                let under = dag.inputs(i)[0];
                if hops.contains(&under) {
                    continue;
                }
                (under, streamed(i).min(model.bytes(dag, under)))
            } else {
                (i, streamed(i))
            };
            let least = reads.entry(key).or_insert(bytes);
            *least = least.min(bytes);
        }
        let read = model.read_time(reads.values().sum::<f64>());
        let compute = model.compute_time(
            hops.iter()
                .filter(|&&h| !dag.is_read_in_place(h))
                .map(|&h| model.flops(dag, h))
                .sum::<f64>(),
        );
        let always_written: BTreeSet<HopId> = starts
            .into_iter()
            .filter(|&h| !dag.is_read_in_place(h))
            .collect();
        let write = model.write_time(
            always_written
                .iter()
                .map(|&h| model.written_cells(dag, h))
                .sum::<f64>(),
        );
        // An Outer operator scales its cost by its driver's sparsity; the driver is one of the
        // inputs or hops.
        let min_sparsity = if has_outer {
            inputs
                .iter()
                .chain(hops)
                .filter(|&&h| dag.is_matrix(h))
                .map(|&h| model.sparsity(dag, h))
                .fold(model.unknown_sparsity.min(1.0), f64::min)
        } else {
            1.0
        };
        StaticBounds {
            read,
            compute,
            write,
            min_sparsity,
            always_written,
        }
    }

    /// The cost no plan can beat: every input read, every hop computed, roots written.
    pub(crate) fn min_cost(&self) -> f64 {
        combine_times(self.write, self.read, self.compute, self.min_sparsity)
    }

    /// A lower bound of the cost of `plan`: the static costs plus, per distinct producer of an
    /// active point, its write (if not always written) and one read. Unlike SystemDS (which
    /// adds the reads outside the `max`), the reads join the static reads inside
    /// `max(read, compute)`, so the bound is sound: a plan's cost is a sum of per-operator
    /// `write + max(read, compute)`, at least `Σwrite + max(Σread, Σcompute)`.
    pub(crate) fn lower_bound(
        &self,
        dag: &FusionDag<'_>,
        part: &PlanPartition,
        model: &CostModel,
        plan: &[bool],
    ) -> f64 {
        let tos: BTreeSet<HopId> = part
            .points
            .iter()
            .zip(plan)
            .filter(|(_, &on)| on)
            .map(|(p, _)| p.to)
            .collect();
        let mut write = self.write;
        let mut read = self.read;
        // A transpose that products read in place is not materialized by a cut before it.
        for &t in tos.iter().filter(|&&t| !dag.is_read_in_place(t)) {
            if !self.always_written.contains(&t) {
                write += model.write_time(model.written_cells(dag, t));
            }
            if dag.is_matrix(t) {
                read += model.read_time(least_read(dag, model, &part.hops, t));
            }
        }
        combine_times(write, read, self.compute, self.min_sparsity)
    }
}

/// The bytes of `i` every plan streams: all of them, or none where one of its readers among
/// `hops` may gather it instead ([`CostModel::gathers`]; an operator pays only the largest of
/// its gathers, so a bound cannot count any), so that a bound stays below every plan's reads.
fn least_read(dag: &FusionDag<'_>, model: &CostModel, hops: &BTreeSet<HopId>, i: HopId) -> f64 {
    let gathered = dag
        .consumers(i)
        .iter()
        .any(|&c| hops.contains(&c) && model.gathers(dag, c, i).is_some());
    if gathered {
        0.0
    } else {
        model.bytes(dag, i)
    }
}

/// The modelled cost no plan of the block `dag` can beat, whatever it fuses: its inputs read
/// once, each operation computed once, its outputs written ([`crate::fusion::cost::cost_of`]
/// of every selection is at least this). A walk over the hops, no exploration.
pub fn cost_floor(dag: &FusionDag<'_>, model: &CostModel) -> f64 {
    StaticBounds::of_dag(dag, model).min_cost()
}

#[cfg(test)]
mod tests {
    use super::cost_floor;
    use crate::fusion::cost::cost_of;
    use crate::fusion::template::test_util::{build, outer_log_sum, view};
    use crate::fusion::{plan_fusion, CostBased, CostModel, FuseAll, Selection};
    use crate::hops::{AggOp, BinaryOp, Direction, HopDag};

    /// `sum(X * log(U %*% t(V) + 1e-15))` over a sparse X: the Outer operator computes the
    /// product at X's non-zeros only, below the unfused multiply's FLOPs, so the floor scales
    /// by the least sparsity as the search's bounds do. `sum(X * X)` beside an output that is
    /// an input (`Y` passed through): `Y` is never read. The floor stays below every plan, and
    /// above zero.
    #[test]
    fn no_plan_costs_less_than_the_floor_outer_and_pass_through_included() {
        let pass_through = build(|b| {
            let x = b.input("X", 2000, 2000, 4_000_000);
            let y = b.input("Y", 2000, 2000, 4_000_000);
            let xx = b.binary(BinaryOp::Mul, x, x).unwrap();
            let s = b.agg(AggOp::Sum, Direction::Full, xx).unwrap();
            vec![s, y]
        });
        // The Outer DAG's cost is mostly its multiply's FLOPs; the pass-through one is costed
        // read-bound, so that an input counted but never read would lift its floor.
        let mut read_bound = CostModel::default();
        read_bound.set("compute_bandwidth", 1e13).unwrap();
        let dags: [(&str, HopDag, CostModel); 2] = [
            ("outer", outer_log_sum(4000).0, CostModel::default()),
            ("pass", pass_through, read_bound),
        ];
        for (what, dag, model) in &dags {
            let model = *model;
            let fdag = view(dag);
            let floor = cost_floor(&fdag, &model);
            assert!(floor > 0.0, "{what}");
            let gen = plan_fusion(dag, &CostBased::new(model)).unwrap().selection;
            let fa = plan_fusion(dag, &FuseAll).unwrap().selection;
            for (name, selection) in [("gen", gen), ("fa", fa), ("none", Selection::default())] {
                let cost = cost_of(&fdag, &model, &selection);
                assert!(floor <= cost, "{what}, {name}: floor {floor} above {cost}");
            }
        }
    }
}
