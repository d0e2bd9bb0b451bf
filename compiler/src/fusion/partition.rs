//! Plan partitions and interesting points (paper section 4.1, reference 4.5): the
//! independent sub-problems of cost-based plan selection and the binary decisions within each.
//!
//! A partition is a connected component of the memo table's fusion references; plans of
//! different partitions never share a fused operator, so each is optimized on its own. Its
//! interesting points are the edges `(consumer, producer)` where fusing or not fusing changes
//! the plan: consumers of a materialization point (a hop with several consumers, where fusion
//! means redundant compute) and template switches (a consumer's plans never reference a
//! template the producer has plans of).

use crate::fusion::cost::cells;
use crate::fusion::dag::FusionDag;
use crate::fusion::memo::{MemoEntry, MemoTable, TemplateKind};
use crate::hops::HopId;
use std::collections::{BTreeMap, BTreeSet};

/// Why an edge is an interesting point (SystemDS `InterestingPoint.DecisionType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PointKind {
    /// The consumer of a materialization point.
    MultiConsumer,
    /// A template switch between consumer and producer.
    TemplateChange,
}

/// One binary decision: materialize `to` for `from` (cut the fusion edge) or fuse it.
/// Equality is on the edge only (reference 4.5).
#[derive(Clone, Copy, Debug)]
pub struct InterestingPoint {
    /// The consuming hop.
    pub from: HopId,
    /// The producing hop (an input of `from`).
    pub to: HopId,
    /// Why the edge is a decision.
    pub kind: PointKind,
}

impl PartialEq for InterestingPoint {
    fn eq(&self, other: &Self) -> bool {
        (self.from, self.to) == (other.from, other.to)
    }
}
impl Eq for InterestingPoint {}

/// One plan partition (reference 4.5 `PlanPartition`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanPartition {
    /// The hops with memo entries in this component, ascending.
    pub hops: BTreeSet<HopId>,
    /// `R`: partition hops no entry of the partition references (always operator roots).
    pub roots: Vec<HopId>,
    /// `I`: hops outside the partition that feed partition hops.
    pub inputs: Vec<HopId>,
    /// `M`: non-root partition hops with at least two consumers and a matrix output.
    pub mat_points: Vec<HopId>,
    /// `Pnpc`: non-root partition hops consumed outside the partition (or block outputs);
    /// they are materialized under every plan.
    pub ext_consumed: Vec<HopId>,
    /// `Mext`: the interesting points, in search order (larger producers first, so that
    /// cost-based skipping prunes bigger regions, reference 4.8 step 5).
    pub points: Vec<InterestingPoint>,
    /// Whether any hop has an Outer entry (enables sparsity scaling of the lower bound).
    pub has_outer: bool,
}

impl PlanPartition {
    /// The materialized hops costing starts from: roots, externally consumed hops.
    pub fn starts(&self) -> Vec<HopId> {
        let mut s: Vec<HopId> = self.roots.clone();
        s.extend(self.ext_consumed.iter().copied());
        s.sort();
        s.dedup();
        s
    }

    /// Whether `entry` of `hop` is usable under `assignment` (one bit per point, `true` =
    /// materialize): it has no reference across an active point (SystemDS `isMatPoint`).
    pub fn is_usable(&self, assignment: &[bool], hop: HopId, entry: &MemoEntry) -> bool {
        entry.template == TemplateKind::MAgg
            || !self
                .points
                .iter()
                .zip(assignment)
                .any(|(p, &on)| on && p.from == hop && entry.references(p.to))
    }
}

/// The plan partitions of `memo` (reference 4.5 `analyzePlanPartitions`, with extended
/// interesting points), in order of their smallest hop.
///
/// Deviations from SystemDS: a multi-consumer point is recorded only when some entry of the
/// consumer references the producer (any other edge's bit cannot change a plan, and would only
/// double the search space), and the `tsmm` exception for materialization points is not
/// applied (lafuse has no fused `t(X)%*%X` operator yet).
pub fn analyze_partitions(dag: &FusionDag<'_>, memo: &MemoTable) -> Vec<PlanPartition> {
    // Undirected adjacency over references between hops with entries.
    let mut adj: BTreeMap<HopId, BTreeSet<HopId>> = BTreeMap::new();
    for (h, group) in memo.groups() {
        adj.entry(h).or_default();
        for e in group {
            for (_, r) in e.refs() {
                if memo.contains(r) {
                    adj.entry(h).or_default().insert(r);
                    adj.entry(r).or_default().insert(h);
                }
            }
        }
    }
    let outputs: BTreeSet<HopId> = crate::fusion::select::selection_roots(dag)
        .into_iter()
        .collect();
    let mut seen: BTreeSet<HopId> = BTreeSet::new();
    let mut parts = Vec::new();
    for &start in adj.keys() {
        if !seen.insert(start) {
            continue;
        }
        let mut hops = BTreeSet::from([start]);
        let mut stack = vec![start];
        while let Some(h) = stack.pop() {
            for &n in &adj[&h] {
                if seen.insert(n) {
                    hops.insert(n);
                    stack.push(n);
                }
            }
        }
        parts.push(build_partition(dag, memo, hops, &outputs));
    }
    parts
}

fn build_partition(
    dag: &FusionDag<'_>,
    memo: &MemoTable,
    hops: BTreeSet<HopId>,
    outputs: &BTreeSet<HopId>,
) -> PlanPartition {
    let referenced: BTreeSet<HopId> = hops
        .iter()
        .flat_map(|&h| memo.group(h).iter())
        .filter(|e| e.template != TemplateKind::MAgg)
        .flat_map(|e| e.refs().map(|(_, r)| r).collect::<Vec<_>>())
        .collect();
    let roots: Vec<HopId> = hops
        .iter()
        .copied()
        .filter(|h| !referenced.contains(h))
        .collect();
    let inputs: Vec<HopId> = hops
        .iter()
        .flat_map(|&h| dag.inputs(h).iter().copied())
        .filter(|i| !hops.contains(i))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let non_roots = || hops.iter().copied().filter(|h| referenced.contains(h));
    let mat_points: Vec<HopId> = non_roots()
        .filter(|&h| dag.num_consumers(h) >= 2 && dag.is_matrix(h))
        .collect();
    let ext_consumed: Vec<HopId> = non_roots()
        .filter(|&h| outputs.contains(&h) || dag.consumers(h).iter().any(|c| !hops.contains(c)))
        .collect();
    let mut points: Vec<InterestingPoint> = Vec::new();
    let mut push = |p: InterestingPoint| {
        if !points.contains(&p) {
            points.push(p);
        }
    };
    for &p in &mat_points {
        for &c in dag.consumers(p) {
            if hops.contains(&c) && memo.group(c).iter().any(|e| e.references(p)) {
                push(InterestingPoint {
                    from: c,
                    to: p,
                    kind: PointKind::MultiConsumer,
                });
            }
        }
    }
    for &h in &hops {
        for (pos, r) in memo.all_refs(h).into_iter().enumerate() {
            let Some(child) = r else { continue };
            let types = memo.distinct_templates_at(h, pos, true);
            if memo.contains_valid_ref_entry_not_in(child, &types) {
                push(InterestingPoint {
                    from: h,
                    to: child,
                    kind: PointKind::TemplateChange,
                });
            }
        }
    }
    points.sort_by(|a, b| {
        cells(dag, b.to)
            .total_cmp(&cells(dag, a.to))
            .then((a.from, a.to).cmp(&(b.from, b.to)))
    });
    let has_outer = hops
        .iter()
        .any(|&h| memo.contains_template(h, TemplateKind::Outer));
    PlanPartition {
        hops,
        roots,
        inputs,
        mat_points,
        ext_consumed,
        points,
        has_outer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::explore::{explore, ExploreOptions};
    use crate::fusion::select::prepare_for_selection;
    use crate::fusion::template::test_util::{build, view};
    use crate::hops::{AggOp, BinaryOp, Direction};

    #[test]
    fn a_shared_product_is_a_materialization_point_with_one_point_per_consumer() {
        // s1 = sum(X*Y), s2 = sum((X*Y)^2 ... ) : P = X*Y feeds two aggregates.
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input("X", 100, 100, 10_000);
            let y = b.input("Y", 100, 100, 10_000);
            let p = b.binary(BinaryOp::Mul, x, y).unwrap();
            let s1 = b.agg(AggOp::Sum, Direction::Full, p).unwrap();
            let q = b.binary(BinaryOp::Add, p, x).unwrap();
            let s2 = b.agg(AggOp::Sum, Direction::Full, q).unwrap();
            ids.extend([p, s1, q, s2]);
            vec![s1, s2]
        });
        let f = view(&dag);
        let mut memo = explore(&f, &ExploreOptions::default());
        prepare_for_selection(&f, &mut memo, false);
        let parts = analyze_partitions(&f, &memo);
        assert_eq!(parts.len(), 1);
        let part = &parts[0];
        let (p, s1, q, s2) = (ids[0], ids[1], ids[2], ids[3]);
        assert_eq!(part.roots, vec![s1, s2]);
        assert_eq!(part.mat_points, vec![p]);
        let edges: BTreeSet<(HopId, HopId)> = part
            .points
            .iter()
            .filter(|x| x.kind == PointKind::MultiConsumer)
            .map(|x| (x.from, x.to))
            .collect();
        assert_eq!(edges, BTreeSet::from([(s1, p), (q, p)]));
        assert!(part.inputs.len() == 2 && part.ext_consumed.is_empty());
        // An entry of s1 fusing p is unusable once (s1, p) is materialized.
        let at = part.points.iter().position(|x| (x.from, x.to) == (s1, p));
        let mut assignment = vec![false; part.points.len()];
        assignment[at.unwrap()] = true;
        let fusing = memo.group(s1).iter().find(|e| e.references(p)).unwrap();
        assert!(!part.is_usable(&assignment, s1, fusing));
        assert!(part.is_usable(&vec![false; part.points.len()], s1, fusing));
    }
}
