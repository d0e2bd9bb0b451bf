//! The reachability graph of a partition's interesting points and its cut sets, for the
//! structural pruning of MPSkipEnum (paper section 4.3, reference 4.8 `ReachabilityGraph`).
//!
//! Walking the partition top-down, every interesting point becomes a *link*; a link's
//! children are the points met below it before any other point. A cut set `C` is a set of
//! points whose materialization splits the partition into two independent halves: the points
//! reachable from the roots without passing `C` (left) and those below `C` (right). Once all
//! of `C` is materialized, the cost of a plan is the sum of a function of the left bits and a
//! function of the right bits, so the two halves are optimized separately instead of over the
//! product of their spaces.
//!
//! Beyond SystemDS's link-disjointness, a cut set here must also separate the *hops* (no hop
//! is reached both from the left and from the right): only then does no fused operator span
//! both halves, which is what makes the split exact under the cost model of
//! [`crate::fusion::cost`].

use crate::fusion::dag::FusionDag;
use crate::fusion::partition::PlanPartition;
use crate::hops::HopId;
use std::collections::{BTreeMap, BTreeSet};

/// A cut set over a partition's points (indices into [`PlanPartition::points`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CutSet {
    /// The points whose materialization separates the halves.
    pub cut: Vec<usize>,
    /// The points above the cut (reachable from the roots without passing it).
    pub left: Vec<usize>,
    /// The points below the cut.
    pub right: Vec<usize>,
}

impl CutSet {
    /// SystemDS's score (smaller is better): the share of the space the cut removes,
    /// `(2^|C| − 1)/2^|C| · 2^|M|` subtracted from the whole, plus the halves' spaces.
    fn score(&self, total: usize) -> f64 {
        let c = 2f64.powi(self.cut.len() as i32);
        (c - 1.0) / c * 2f64.powi(total as i32)
            + (2f64.powi(self.left.len() as i32) + 2f64.powi(self.right.len() as i32)) / c
    }
}

/// The best-scoring valid cut set of `part`, if any (reference 4.8 steps 1-3; candidates are
/// single points with points below them and groups of points with identical children).
pub fn find_cut_set(dag: &FusionDag<'_>, part: &PlanPartition) -> Option<CutSet> {
    let n = part.points.len();
    if n < 3 {
        return None;
    }
    // Link 0 is the root; link i + 1 is point i.
    let point_at: BTreeMap<(HopId, HopId), usize> = part
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| ((p.from, p.to), i))
        .collect();
    let mut children: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n + 1];
    let mut hop_links: BTreeMap<HopId, BTreeSet<usize>> = BTreeMap::new();
    let mut seen: BTreeSet<(HopId, usize)> = BTreeSet::new();
    let mut stack: Vec<(HopId, usize)> = part.starts().into_iter().map(|h| (h, 0)).collect();
    while let Some((h, link)) = stack.pop() {
        if !seen.insert((h, link)) {
            continue;
        }
        hop_links.entry(h).or_default().insert(link);
        for &c in dag.inputs(h) {
            if !part.hops.contains(&c) {
                continue;
            }
            match point_at.get(&(h, c)) {
                Some(&p) => {
                    children[link].insert(p + 1);
                    stack.push((c, p + 1));
                }
                None => stack.push((c, link)),
            }
        }
    }
    let mut candidates: Vec<BTreeSet<usize>> = Vec::new();
    let mut groups: BTreeMap<&BTreeSet<usize>, BTreeSet<usize>> = BTreeMap::new();
    for (l, ch) in children.iter().enumerate().skip(1) {
        if !ch.is_empty() {
            candidates.push(BTreeSet::from([l]));
            groups.entry(ch).or_default().insert(l);
        }
    }
    candidates.extend(groups.into_values().filter(|g| g.len() > 1));
    let reach = |from: &[usize], blocked: &BTreeSet<usize>| -> BTreeSet<usize> {
        let mut out = BTreeSet::new();
        let mut st: Vec<usize> = from.to_vec();
        while let Some(l) = st.pop() {
            if blocked.contains(&l) || !out.insert(l) {
                continue;
            }
            st.extend(children[l].iter().copied());
        }
        out
    };
    let mut best: Option<(f64, CutSet)> = None;
    for cut in candidates {
        let left = reach(&[0], &cut);
        let below: Vec<usize> = cut
            .iter()
            .flat_map(|&c| children[c].iter().copied())
            .collect();
        let right = reach(&below, &cut);
        let left_points = left.iter().filter(|&&l| l > 0).count();
        if left_points == 0
            || right.is_empty()
            || !left.is_disjoint(&right)
            || left_points + right.len() + cut.len() != n
        {
            continue;
        }
        let side_hops = |links: &BTreeSet<usize>| -> BTreeSet<HopId> {
            hop_links
                .iter()
                .filter(|(_, ls)| !ls.is_disjoint(links))
                .map(|(&h, _)| h)
                .collect()
        };
        let right_links: BTreeSet<usize> = right.union(&cut).copied().collect();
        if !side_hops(&left).is_disjoint(&side_hops(&right_links)) {
            continue;
        }
        let cs = CutSet {
            cut: cut.iter().map(|l| l - 1).collect(),
            left: left.iter().filter(|&&l| l > 0).map(|l| l - 1).collect(),
            right: right.iter().map(|l| l - 1).collect(),
        };
        let s = cs.score(n);
        if best.as_ref().is_none_or(|(b, _)| s < *b) {
            best = Some((s, cs));
        }
    }
    best.map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::explore::{explore, ExploreOptions};
    use crate::fusion::partition::analyze_partitions;
    use crate::fusion::select::prepare_for_selection;
    use crate::fusion::template::test_util::{build, view};
    use crate::hops::{AggOp, BinaryOp, Direction, UnaryOp};

    /// Q1 shared below M, M shared by a1 and a2, a1 shared by T1 and exp(a1): materializing M
    /// for both its consumers separates the points on Q1 from those on a1.
    #[test]
    fn a_shared_bottleneck_is_a_cut_set_and_a_chain_is_not() {
        let mut mm = None;
        let dag = build(|b| {
            let x = b.input("X", 500, 50, 25_000);
            let y = b.input("Y", 500, 50, 25_000);
            let q1 = b.binary(BinaryOp::Mul, x, y).unwrap();
            let q2 = b.unary(UnaryOp::Exp, q1).unwrap();
            let q3 = b.binary(BinaryOp::Div, q1, q2).unwrap();
            let m = b.binary(BinaryOp::Add, q3, y).unwrap();
            let a1 = b.binary(BinaryOp::Mul, m, y).unwrap();
            let t1 = b.agg(AggOp::Sum, Direction::Full, a1).unwrap();
            let e = b.unary(UnaryOp::Exp, a1).unwrap();
            let t3 = b.agg(AggOp::Sum, Direction::Full, e).unwrap();
            let a2 = b.binary(BinaryOp::Div, m, y).unwrap();
            let t2 = b.agg(AggOp::Sum, Direction::Row, a2).unwrap();
            mm = Some(m);
            vec![t1, t2, t3]
        });
        let f = view(&dag);
        let mut memo = explore(&f, &ExploreOptions::default());
        prepare_for_selection(&f, &mut memo, false);
        let parts = analyze_partitions(&f, &memo);
        assert_eq!(parts.len(), 1);
        let part = &parts[0];
        let cut = find_cut_set(&f, part).expect("cut set");
        assert!(cut.cut.iter().all(|&i| Some(part.points[i].to) == mm));
        // The three groups partition the points.
        let mut all: Vec<usize> = cut
            .cut
            .iter()
            .chain(&cut.left)
            .chain(&cut.right)
            .copied()
            .collect();
        all.sort();
        assert_eq!(all, (0..part.points.len()).collect::<Vec<_>>());

        // sum(X*Y) and sum(exp(X*Y)): the shared product is reached from both roots; no cut.
        let dag = build(|b| {
            let x = b.input("X", 500, 50, 25_000);
            let y = b.input("Y", 500, 50, 25_000);
            let p = b.binary(BinaryOp::Mul, x, y).unwrap();
            let s1 = b.agg(AggOp::Sum, Direction::Full, p).unwrap();
            let e = b.unary(UnaryOp::Exp, p).unwrap();
            let s2 = b.agg(AggOp::Sum, Direction::Full, e).unwrap();
            vec![s1, s2]
        });
        let f = view(&dag);
        let mut memo = explore(&f, &ExploreOptions::default());
        prepare_for_selection(&f, &mut memo, false);
        for part in analyze_partitions(&f, &memo) {
            assert!(find_cut_set(&f, &part).is_none());
        }
    }
}
