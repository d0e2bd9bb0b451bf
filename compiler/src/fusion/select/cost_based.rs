//! The cost-based selection policy `gen` (paper section 4, reference 4.6 and 4.8): per plan
//! partition, MPSkipEnum over the assignments of its interesting points, costed with the
//! [`CostModel`] of [`crate::fusion::cost`].
//!
//! For each partition the search space is the `2^|M|` assignments of its points (`true` =
//! materialize the producer for that consumer). The fuse-all (all `false`) and
//! no-fusion-across-points (all `true`) assignments are costed first; then the remaining
//! assignments are enumerated in the linearized order of the points (first point = most
//! significant bit). Cost-based skipping (paper Algorithm 2): when a plan's lower bound
//! (static read/compute/write plus the materialization cost of its active points) already
//! reaches the best cost, every plan that only adds active points after its last active one
//! is skipped at once. Graceful approximation stops large searches once the best heuristic
//! plan is within `epsilon` of the static lower bound, or after a budget of evaluated plans;
//! a plan cache keyed by a partition signature reuses the assignments of large partitions;
//! costing a plan stops as soon as it exceeds the best cost (reference 4.9).
//!
//! Structural pruning ([`super::reachability`]): when a cut set of the reachability graph is
//! materialized, the two halves it separates are optimized independently. Before the search,
//! the memo table is prepared as SystemDS does (reference 4.6): plans fusing one position of a
//! duplicated input but not the other are dropped, Row plans that merely duplicate Cell plans
//! are dropped, and within-partition MultiAgg plans are added (reference 4.7).
//!
//! After the search, as SystemDS does after `enumPlans` (reference 4.6 step 3e), selected Row
//! plans that lost every row-wise reason to exist under the chosen assignment become Cell
//! plans ([`convert_invalid_row_plans`]); after all partitions are selected, full aggregates of
//! different partitions that share an input are merged into across-partition MultiAggs
//! ([`cross_partition_multi_aggregates`], reference 4.7 second half), kept unless the cost
//! model rates the plan with them more expensive. Both are steps of the cost-based policy
//! only: SystemDS creates MultiAggs (within and across partitions) in
//! `PlanSelectionFuseCostBased` (V1) and `PlanSelectionFuseCostBasedV2`, and converts Row plans
//! in V2, never in the fuse-all or fuse-no-redundancy heuristics; lafuse applies both in `gen`
//! only.
//!
//! Not implemented: the Spark block-size constraint and eviction/broadcast terms (single-node
//! engine), the `tsmm` exception for materialization points.

use super::reachability::{find_cut_set, CutSet};
use super::{prepare_for_selection, select_fuse_all, selection_roots, PlanSelector, Selection};
use crate::fusion::cost::{self, cells, plan_cost, plan_cost_bounded, CostModel, MemoChooser};
use crate::fusion::dag::FusionDag;
use crate::fusion::memo::{MemoEntry, MemoTable, TemplateKind};
use crate::fusion::partition::{analyze_partitions, PlanPartition, PointKind};
use crate::hops::HopId;
use crate::Result;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Partitions with at least this many points skip the rest of the search once a heuristic
/// plan is within [`CostBased::epsilon`] of the lower bound (SystemDS `COST_MIN_EPS_NUM_POINTS`).
pub const EPSILON_MIN_POINTS: usize = 20;
/// Partitions with at least this many points use the plan cache (`PLAN_CACHE_NUM_POINTS`).
pub const PLAN_CACHE_MIN_POINTS: usize = 10;
/// Capacity of the partition plan cache, evicted oldest first.
pub const PLAN_CACHE_CAPACITY: usize = 1024;
/// Above this many points the integer enumeration is not attempted: only the two heuristic
/// assignments are costed (2^100 plans could never be enumerated, budget or not).
pub const MAX_ENUM_POINTS: usize = 100;
/// The default optimization budget: costed plans per partition with more than
/// [`EXACT_MAX_POINTS`] points, which stop at the budget with the best plan found so far
/// (graceful approximation, paper section 4.3).
pub const DEFAULT_MAX_EVALUATED: u64 = 1 << 12;
/// Partitions of up to this many points are always searched exhaustively (at most 4096
/// assignments), whatever the budget: their optimum is exact.
pub const EXACT_MAX_POINTS: usize = 12;

/// The cost-based selector (`gen`). Configuration is public; the plan cache is internal.
#[derive(Debug)]
pub struct CostBased {
    /// The cost model plans are costed with.
    pub model: CostModel,
    /// Skip plans whose lower bound reaches the best cost (paper Algorithm 2, lines 11-13).
    pub cost_pruning: bool,
    /// Split partitions at cut sets of the reachability graph and optimize the halves
    /// separately (paper section 4.3, reference 4.8).
    pub structural_pruning: bool,
    /// Reuse assignments of partitions with the same signature.
    pub plan_caching: bool,
    /// Graceful approximation: stop a partition's search once a heuristic plan is within
    /// this relative distance of the static lower bound (for partitions with at least
    /// [`EPSILON_MIN_POINTS`] points; SystemDS `COST_MIN_EPS` = 0.01).
    pub epsilon: f64,
    /// Graceful approximation: stop the search of a partition with more than
    /// `exact_points` points after this many costed plans.
    pub max_evaluated: Option<u64>,
    /// Partitions with at most this many points ignore `max_evaluated` (their search is
    /// exact); [`EXACT_MAX_POINTS`] by default.
    pub exact_points: usize,
    cache: Mutex<PlanCache>,
}

impl Default for CostBased {
    fn default() -> CostBased {
        CostBased::new(CostModel::default())
    }
}

impl Clone for CostBased {
    /// Copies the configuration; the clone starts with an empty plan cache.
    fn clone(&self) -> CostBased {
        CostBased {
            cache: Mutex::new(PlanCache::default()),
            ..*self
        }
    }
}

/// What one run of the search did (reference 4.6 statistics).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SearchStats {
    /// Partitions analyzed.
    pub partitions: usize,
    /// Interesting points over all partitions.
    pub points: usize,
    /// Plans costed (heuristic assignments included).
    pub evaluated: u64,
    /// Plans skipped by the cost lower bound without being costed.
    pub skipped_by_cost: u64,
    /// Plans skipped because a cut set split the search into independent halves (the
    /// halves' own plans are counted in `evaluated`).
    pub skipped_by_structure: u64,
    /// Partitions searched with a cut set.
    pub cut_sets: usize,
    /// Partitions answered from the plan cache.
    pub cache_hits: usize,
    /// Partitions whose search stopped early (epsilon, budget or too many points): their
    /// plan is the best found, not necessarily optimal.
    pub approximated: usize,
    /// Wall time of the search.
    pub elapsed: Duration,
}

/// The result of one partition's search.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionResult {
    /// The partition.
    pub partition: PlanPartition,
    /// The chosen assignment, one bit per [`PlanPartition::points`] entry.
    pub assignment: Vec<bool>,
    /// Its modelled cost (the partition's share of the plan).
    pub cost: f64,
}

/// Everything the search found: per partition the assignment and cost, and statistics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CostReport {
    /// Per partition, in [`analyze_partitions`] order.
    pub partitions: Vec<PartitionResult>,
    /// Search statistics.
    pub stats: SearchStats,
}

impl CostReport {
    /// A text summary: the statistics (without the wall time, so the text is byte-stable),
    /// then per partition its roots, points with their chosen bits (`1` = materialized) and
    /// modelled cost, e.g. `  (7->5 mc)=1`.
    pub fn explain(&self) -> String {
        let st = &self.stats;
        let mut out = format!(
            "cost-based search: {} partitions, {} points, {} plans evaluated, {} skipped by cost, \
             {} skipped by structure, {} cut sets, {} cache hits, {} approximated\n",
            st.partitions,
            st.points,
            st.evaluated,
            st.skipped_by_cost,
            st.skipped_by_structure,
            st.cut_sets,
            st.cache_hits,
            st.approximated
        );
        for (i, r) in self.partitions.iter().enumerate() {
            let roots: Vec<String> = r.partition.roots.iter().map(|h| h.to_string()).collect();
            out.push_str(&format!(
                "partition {i}: {} hops, roots [{}], cost {:.6e} s\n",
                r.partition.hops.len(),
                roots.join(","),
                r.cost
            ));
            for (p, &on) in r.partition.points.iter().zip(&r.assignment) {
                let kind = match p.kind {
                    crate::fusion::partition::PointKind::MultiConsumer => "mc",
                    crate::fusion::partition::PointKind::TemplateChange => "tc",
                };
                out.push_str(&format!(
                    "  ({}->{} {kind})={}\n",
                    p.from,
                    p.to,
                    u8::from(on)
                ));
            }
        }
        out
    }
}

impl CostBased {
    /// A selector with cost model `model` and SystemDS's defaults: cost pruning and plan
    /// caching on, epsilon 0.01; budget [`DEFAULT_MAX_EVALUATED`] plans per partition.
    pub fn new(model: CostModel) -> CostBased {
        CostBased {
            model,
            cost_pruning: true,
            structural_pruning: true,
            plan_caching: true,
            epsilon: 0.01,
            max_evaluated: Some(DEFAULT_MAX_EVALUATED),
            exact_points: EXACT_MAX_POINTS,
            cache: Mutex::new(PlanCache::default()),
        }
    }

    /// The modelled cost of any selection of `dag` under this selector's model
    /// ([`cost::cost_of`]), e.g. to compare fuse-all and fuse-no-redundancy with `gen`.
    pub fn cost_of(&self, dag: &FusionDag<'_>, selection: &Selection) -> f64 {
        cost::cost_of(dag, &self.model, selection)
    }

    /// Prepares `memo` (reference 2.4 step 2), analyzes its partitions and searches each.
    /// `memo` is left prepared, not yet reduced to the plan ([`CostBased::select`] does that).
    pub fn search(&self, dag: &FusionDag<'_>, memo: &mut MemoTable) -> CostReport {
        let start = Instant::now();
        prepare_for_selection(dag, memo, false);
        prune_partially_fused_duplicates(dag, memo);
        for part in analyze_partitions(dag, memo) {
            prune_row_duplicates(dag, memo, &part);
        }
        // Pruning removes entries but never references, so partitions keep their hops; their
        // points are recomputed against the pruned entries.
        for part in analyze_partitions(dag, memo) {
            create_multi_aggregates(dag, memo, &part);
        }
        let parts = analyze_partitions(dag, memo);
        let mut report = CostReport::default();
        report.stats.partitions = parts.len();
        // The cost of the whole DAG under the better heuristic per partition: what a large
        // partition's possible improvement is measured against.
        let heuristics: Vec<(f64, f64)> = parts
            .iter()
            .map(|part| {
                let n = part.points.len();
                let c0 = partition_cost(dag, memo, part, &self.model, &vec![false; n]);
                let cn = partition_cost(dag, memo, part, &self.model, &vec![true; n]);
                (c0, cn)
            })
            .collect();
        let heuristic_total: f64 = heuristics.iter().map(|&(c0, cn)| c0.min(cn)).sum();
        for (mut part, heuristic) in parts.into_iter().zip(heuristics) {
            report.stats.points += part.points.len();
            let cut = if self.structural_pruning {
                find_cut_set(dag, &part).map(|c| linearize_cut(&mut part, c))
            } else {
                None
            };
            let (assignment, cost) = self.search_partition(
                dag,
                memo,
                &part,
                cut.as_ref(),
                (heuristic, heuristic_total),
                &mut report.stats,
            );
            report.partitions.push(PartitionResult {
                partition: part,
                assignment,
                cost,
            });
        }
        report.stats.elapsed = start.elapsed();
        report
    }

    /// Searches and selects: the selection of the best assignments (with its modelled cost of
    /// the whole DAG) and the search report. `memo` is reduced to the selection.
    pub fn optimize(&self, dag: &FusionDag<'_>, memo: &mut MemoTable) -> (Selection, CostReport) {
        let report = self.search(dag, memo);
        let mut selection = selection_for(dag, memo, &report.partitions);
        convert_invalid_row_plans(dag, &mut selection, &report.partitions);
        self.add_cross_partition_multi_aggregates(dag, memo, &report.partitions, &mut selection);
        selection.selector = self.name().to_string();
        selection.cost = Some(self.cost_of(dag, &selection));
        memo.prune_to_plan(&selection.plans);
        (selection, report)
    }

    /// Adds the across-partition MultiAgg groups of `selection`
    /// ([`cross_partition_multi_aggregates`]) one by one, each unless the selection with it
    /// costs more than without it under this selector's model; `selection` and `memo` are
    /// updated with every accepted group.
    ///
    /// SystemDS adds every group unconditionally (reference 4.7 has no cost check). Over
    /// members computed by Cell operators or unfused the shared scan never costs more
    /// (`Σw + max(R∪, ΣC) ≤ Σ(w + max(R, C))`), so the check only guards the invariant that
    /// `gen` never returns a plan its own model rates worse than the one it found; a tie
    /// (compute-bound aggregates) keeps the MultiAgg, which still saves the repeated reads.
    pub fn add_cross_partition_multi_aggregates(
        &self,
        dag: &FusionDag<'_>,
        memo: &mut MemoTable,
        results: &[PartitionResult],
        selection: &mut Selection,
    ) {
        let mut best = self.cost_of(dag, selection);
        for group in cross_partition_multi_aggregates(dag, memo, selection) {
            let mut trial = memo.clone();
            for &a in &group {
                if !trial.contains_template(a, TemplateKind::Cell) {
                    // An unfused aggregate (`sum(X)`) joins with its own Cell body.
                    trial.add(
                        a,
                        MemoEntry::new(
                            TemplateKind::Cell,
                            dag.inputs(a).len(),
                            crate::fusion::memo::CloseState::ClosedValid,
                        ),
                    );
                }
                trial.add(a, MemoEntry::magg(&group));
            }
            let mut candidate = selection_for(dag, &trial, results);
            convert_invalid_row_plans(dag, &mut candidate, results);
            let cost = self.cost_of(dag, &candidate);
            // A relative tolerance: equal costs are summed in a different order.
            if cost <= best * (1.0 + 1e-12) {
                best = cost;
                *memo = trial;
                *selection = candidate;
            }
        }
    }

    fn search_partition(
        &self,
        dag: &FusionDag<'_>,
        memo: &MemoTable,
        part: &PlanPartition,
        cut: Option<&CutSet>,
        ((c0, cn), heuristic_total): ((f64, f64), f64),
        stats: &mut SearchStats,
    ) -> (Vec<bool>, f64) {
        let n = part.points.len();
        if n == 0 {
            stats.evaluated += 1;
            return (Vec::new(), c0);
        }
        // The two heuristic plans, costed by the caller (for the DAG's heuristic total).
        stats.evaluated += 2;
        let fuse_all = vec![false; n];
        let no_fusion = vec![true; n];
        let mut eval = |a: &[bool]| {
            stats.evaluated += 1;
            partition_cost(dag, memo, part, &self.model, a)
        };
        let cut = cut.filter(|c| c.cut.iter().enumerate().all(|(i, &p)| i == p));
        let (mut best, mut best_cost) = if cn < c0 {
            (no_fusion, cn)
        } else {
            (fuse_all, c0)
        };
        // A third start, fuse-no-redundancy's choice at the points: materialize shared
        // intermediates, keep template switches fused. It can beat both others, and where the
        // search is cut short (budget, epsilon) starting from it keeps `gen` from returning a
        // plan worse than the fuse-no-redundancy heuristic's (found by the property test: a
        // 15-point partition whose budgeted search ended above it).
        let no_redundancy: Vec<bool> = part
            .points
            .iter()
            .map(|p| p.kind == PointKind::MultiConsumer)
            .collect();
        if no_redundancy.contains(&true) && no_redundancy.contains(&false) {
            let c = eval(&no_redundancy);
            if c < best_cost {
                (best, best_cost) = (no_redundancy, c);
            }
        }
        let bounds = StaticBounds::new(dag, part, &self.model);
        let key = PartitionKey::new(part, &bounds, c0, cn);
        let use_cache = self.plan_caching && n >= PLAN_CACHE_MIN_POINTS;
        if use_cache {
            let hit = self.cache.lock().ok().and_then(|c| c.get(&key));
            if let Some(a) = hit.filter(|a| a.len() == n) {
                stats.cache_hits += 1;
                let c = eval(&a);
                return (a, c);
            }
        }
        // Graceful approximation of a large partition: stop when the heuristic plan is within
        // epsilon of the partition's lower bound, or when all the search could still gain is
        // below epsilon of the whole DAG's cost (a partition of cheap vector operations next
        // to passes over large matrices).
        let near_bound = n >= EPSILON_MIN_POINTS
            && self.cost_pruning
            && (best_cost <= (1.0 + self.epsilon) * bounds.min_cost()
                || best_cost - bounds.min_cost() <= self.epsilon * heuristic_total);
        if near_bound || n > MAX_ENUM_POINTS {
            stats.approximated += 1;
        } else {
            let mut search = Enumeration {
                selector: self,
                dag,
                memo,
                part,
                bounds: &bounds,
                stats,
                evaluated: 2,
                budget_hit: false,
            };
            let free: Vec<usize> = (0..n).collect();
            let mut found = (best, best_cost);
            search.enumerate(&free, &vec![false; n], &mut found, cut, true);
            if search.budget_hit {
                search.stats.approximated += 1;
            }
            (best, best_cost) = found;
        }
        if use_cache {
            if let Ok(mut c) = self.cache.lock() {
                c.put(key, best.clone());
            }
        }
        (best, best_cost)
    }
}

/// Moves a cut set's points to the front of the partition's search order (reference 4.8
/// step 5) and returns the cut set in the new positions.
fn linearize_cut(part: &mut PlanPartition, c: CutSet) -> CutSet {
    let order: Vec<usize> = c
        .cut
        .iter()
        .copied()
        .chain((0..part.points.len()).filter(|i| !c.cut.contains(i)))
        .collect();
    let mut new_pos = vec![0; order.len()];
    for (new, &old) in order.iter().enumerate() {
        new_pos[old] = new;
    }
    part.points = order.iter().map(|&i| part.points[i]).collect();
    let map = |v: &[usize]| {
        let mut m: Vec<usize> = v.iter().map(|&i| new_pos[i]).collect();
        m.sort();
        m
    };
    CutSet {
        cut: map(&c.cut),
        left: map(&c.left),
        right: map(&c.right),
    }
}

/// One partition's enumeration state (paper Algorithm 2).
struct Enumeration<'s, 'd, 'a> {
    selector: &'s CostBased,
    dag: &'s FusionDag<'d>,
    memo: &'s MemoTable,
    part: &'s PlanPartition,
    bounds: &'s StaticBounds,
    stats: &'a mut SearchStats,
    evaluated: u64,
    budget_hit: bool,
}

impl Enumeration<'_, '_, '_> {
    /// The early-abort bound of a costing: the best cost with cost pruning, else none.
    fn bound(&self, best: f64) -> f64 {
        if self.selector.cost_pruning {
            best
        } else {
            f64::INFINITY
        }
    }

    /// The cost of `plan`, or `+∞` once it exceeds `bound` (early abort).
    fn eval(&mut self, plan: &[bool], bound: f64) -> f64 {
        self.evaluated += 1;
        self.stats.evaluated += 1;
        let usable = |h: HopId, e: &MemoEntry| self.part.is_usable(plan, h, e);
        let chooser = MemoChooser {
            memo: self.memo,
            usable: &usable,
        };
        plan_cost_bounded(
            self.dag,
            &self.selector.model,
            &chooser,
            &self.part.starts(),
            Some(&self.part.hops),
            bound,
        )
    }

    /// Enumerates the assignments of the `free` positions over `base` (first free position
    /// most significant), updating `best`. At the top level (`top`) the all-false and
    /// all-true assignments were costed already; `cut`, if given, occupies the first free
    /// positions.
    fn enumerate(
        &mut self,
        free: &[usize],
        base: &[bool],
        best: &mut (Vec<bool>, f64),
        cut: Option<&CutSet>,
        top: bool,
    ) {
        let f = free.len();
        let total: u128 = 1u128 << f;
        let (mut j, end) = if top { (1, total - 1) } else { (0, total) };
        while j < end {
            if self.part.points.len() > self.selector.exact_points
                && self
                    .selector
                    .max_evaluated
                    .is_some_and(|b| self.evaluated >= b)
            {
                self.budget_hit = true;
                return;
            }
            let mut plan = base.to_vec();
            for (t, &pos) in free.iter().enumerate() {
                plan[pos] = (j >> (f - 1 - t)) & 1 == 1;
            }
            if let Some(c) = cut.filter(|c| c.cut.iter().all(|&p| plan[p])) {
                // Every plan with the cut materialized: optimize the halves separately with
                // the cut fixed (paper section 4.3), then cost their combination.
                self.stats.cut_sets += 1;
                let mut fixed = vec![false; plan.len()];
                for &p in &c.cut {
                    fixed[p] = true;
                }
                let mut combined = fixed.clone();
                for side in [&c.left, &c.right] {
                    let c0 = self.eval(&fixed, f64::INFINITY);
                    let mut side_best = (fixed.clone(), c0);
                    self.enumerate(side, &fixed, &mut side_best, None, false);
                    for &p in side.iter() {
                        combined[p] = side_best.0[p];
                    }
                }
                let cost = self.eval(&combined, self.bound(best.1));
                if cost < best.1 {
                    *best = (combined, cost);
                }
                let span = (1u128 << (f - c.cut.len())).min(end - j);
                self.stats.skipped_by_structure = self
                    .stats
                    .skipped_by_structure
                    .saturating_add(u64::try_from(span).unwrap_or(u64::MAX));
                j += span;
                continue;
            }
            if self.selector.cost_pruning {
                let lb = self
                    .bounds
                    .lower_bound(self.dag, self.part, &self.selector.model, &plan);
                // Strictly above (with a relative margin for rounding): ties are costed, so
                // the first optimal plan in enumeration order is kept with or without pruning.
                if lb > best.1 * (1.0 + 1e-12) {
                    let last = free.iter().rposition(|&p| plan[p]).unwrap_or(f - 1);
                    // Every plan that only adds active points after the last active one has a
                    // bound at least as high.
                    let span = (1u128 << (f - last - 1)).min(end - j);
                    self.stats.skipped_by_cost = self
                        .stats
                        .skipped_by_cost
                        .saturating_add(u64::try_from(span).unwrap_or(u64::MAX));
                    j += span;
                    continue;
                }
            }
            let cost = self.eval(&plan, self.bound(best.1));
            if cost < best.1 {
                *best = (plan, cost);
            }
            j += 1;
        }
    }
}

impl PlanSelector for CostBased {
    fn name(&self) -> &'static str {
        "gen"
    }

    fn is_heuristic(&self) -> bool {
        false
    }

    fn select(&self, dag: &FusionDag<'_>, memo: &mut MemoTable) -> Result<Selection> {
        Ok(self.optimize(dag, memo).0)
    }
}

/// Within-partition MultiAgg plans (reference 4.7): the partition's roots that are full
/// aggregates (and inputs of no hop with plans), in order, in chunks of at most three; each
/// valid chunk gets a MultiAgg entry on every member. Aggregates in different partitions are
/// grouped after selection ([`cross_partition_multi_aggregates`]).
///
/// Unlike SystemDS, a member must have Cell plans only (after [`prune_row_duplicates`]): a
/// MultiAgg computes each aggregate with its Cell plan, and since it is preferred by rank it
/// would displace a Row plan that fuses more (the property test found such plans costing more
/// than fuse-all). Over Cell-only members it never costs more than separate operators:
/// `Σw + max(R∪, ΣC) ≤ Σ(w + max(R, C))`.
pub fn create_multi_aggregates(dag: &FusionDag<'_>, memo: &mut MemoTable, part: &PlanPartition) {
    use crate::fusion::template::{is_multi_agg_root, is_valid_multi_aggregate};
    let ref_hops: BTreeSet<HopId> = memo
        .hops()
        .flat_map(|h| dag.inputs(h).iter().copied())
        .collect();
    let aggs: Vec<HopId> = part
        .roots
        .iter()
        .copied()
        .filter(|&r| {
            is_multi_agg_root(dag, r)
                && !ref_hops.contains(&r)
                && memo.contains_template(r, TemplateKind::Cell)
                && memo
                    .group(r)
                    .iter()
                    .all(|e| e.template == TemplateKind::Cell)
        })
        .collect();
    for chunk in aggs.chunks(crate::fusion::template::MAX_MAGG_AGGREGATES) {
        if is_valid_multi_aggregate(dag, chunk) {
            for &a in chunk {
                memo.add(a, MemoEntry::magg(chunk));
            }
        }
    }
}

/// What SystemDS's `AggregateInfo` records of one group of full aggregates (reference 4.7).
#[derive(Clone, Debug)]
struct AggregateInfo {
    /// The aggregates of the group, in merge order.
    aggregates: Vec<HopId>,
    /// Every multi-aggregate root the group's aggregates (transitively) read.
    input_aggs: BTreeSet<HopId>,
    /// The matrices the group's fused bodies read.
    fused_inputs: BTreeSet<HopId>,
}

impl AggregateInfo {
    /// SystemDS `AggregateInfo.isMergable`: at most [`MAX_MAGG_AGGREGATES`] together, neither
    /// reads the other, at least one shared input (the point of the shared scan), and equally
    /// sized scans (one iteration space, result correctness).
    ///
    /// [`MAX_MAGG_AGGREGATES`]: crate::fusion::template::MAX_MAGG_AGGREGATES
    fn is_mergeable(&self, that: &AggregateInfo, dag: &FusionDag<'_>) -> bool {
        use crate::fusion::template::{is_valid_multi_aggregate, MAX_MAGG_AGGREGATES};
        let size_ok = self.aggregates.len() + that.aggregates.len() <= MAX_MAGG_AGGREGATES;
        let independent = that.aggregates.iter().all(|a| !self.input_aggs.contains(a))
            && self.aggregates.iter().all(|a| !that.input_aggs.contains(a));
        let shared = !self.fused_inputs.is_disjoint(&that.fused_inputs);
        // The pair check compares the scan sizes of the two groups' first aggregates.
        let same_scan = is_valid_multi_aggregate(dag, &[self.aggregates[0], that.aggregates[0]]);
        size_ok && independent && shared && same_scan
    }

    fn merge(&mut self, that: AggregateInfo) {
        self.aggregates.extend(that.aggregates);
        self.input_aggs.extend(that.input_aggs);
        self.fused_inputs.extend(that.fused_inputs);
    }
}

/// Across-partition MultiAgg groups (reference 4.7 second half, SystemDS
/// `createAndAddMultiAggPlans(memo, roots)`): full aggregates anywhere in the DAG that read
/// common inputs and can share one scan, though no fused intermediate connects them (so they
/// are in different partitions, e.g. `sum(X*Y)` and `sum(X*Z)`).
///
/// Candidates are the multi-aggregate roots without a MultiAgg plan that `selection` computes
/// as operators of their own: with a Cell plan (the MultiAgg reuses it as the aggregate's
/// body) or unfused with no plan at all (`sum(X)`, read through a plain Cell body). Aggregates
/// selected as Row or Outer operators stay as they are (a MultiAgg would displace a plan
/// fusing more, see [`create_multi_aggregates`]), as do aggregates fused into a consumer. Per
/// candidate: its input aggregates (every multi-aggregate root below it) and its fused inputs
/// (the matrices at the boundary of its selected Cell plan; without a plan its input, or both
/// vectors of `t(x) %*% y`). Candidates sorted by number of input aggregates are merged
/// greedily while `AggregateInfo::is_mergeable`; every group of two or more that passes
/// [`crate::fusion::template::is_valid_multi_aggregate`] is returned, in DAG order.
pub fn cross_partition_multi_aggregates(
    dag: &FusionDag<'_>,
    memo: &MemoTable,
    selection: &Selection,
) -> Vec<Vec<HopId>> {
    use crate::fusion::template::CellType;
    use crate::fusion::template::{cell_agg_kind, is_multi_agg_root, is_valid_multi_aggregate};
    let all_roots: Vec<HopId> = dag
        .order()
        .iter()
        .copied()
        .filter(|&h| is_multi_agg_root(dag, h))
        .collect();
    let candidates: Vec<HopId> = all_roots
        .iter()
        .copied()
        .filter(|&h| !memo.contains_template(h, TemplateKind::MAgg))
        .filter(
            |&h| match (selection.roots.get(&h), selection.plans.get(&h)) {
                (Some(e), _) => e.template == TemplateKind::Cell,
                (None, None) => {
                    !memo.contains(h)
                        && matches!(cell_agg_kind(dag, h), Some((CellType::FullAgg, Some(_))))
                }
                (None, Some(_)) => false,
            },
        )
        .collect();
    if candidates.len() < 2 {
        return Vec::new();
    }
    let mut infos: Vec<AggregateInfo> = candidates
        .iter()
        .map(|&h| {
            let input_aggs: BTreeSet<HopId> = all_roots
                .iter()
                .copied()
                .filter(|&o| o != h && dag.inputs(h).iter().any(|&i| dag.contains(i, o)))
                .collect();
            AggregateInfo {
                aggregates: vec![h],
                input_aggs,
                fused_inputs: fused_inputs(dag, selection, h),
            }
        })
        .collect();
    infos.sort_by_key(|a| a.input_aggs.len());
    loop {
        let mut merged = false;
        let mut i = 0;
        while i < infos.len() {
            let mut j = i + 1;
            while j < infos.len() {
                if infos[i].is_mergeable(&infos[j], dag) {
                    let that = infos.remove(j);
                    infos[i].merge(that);
                    merged = true;
                } else {
                    j += 1;
                }
            }
            i += 1;
        }
        if !merged {
            break;
        }
    }
    let position = |h: &HopId| dag.order().iter().position(|x| x == h);
    let mut groups: Vec<Vec<HopId>> = infos
        .into_iter()
        .map(|i| i.aggregates)
        .filter(|g| is_valid_multi_aggregate(dag, g))
        .collect();
    groups.sort_by_key(|g| g.iter().filter_map(position).min());
    groups
}

/// The matrices the selected Cell body of aggregate `agg` reads (SystemDS
/// `rExtractAggregateInfo` fused inputs): walking the selected plans from `agg` through its
/// references, every materialized matrix input; the transposed vector of a dot product
/// `t(x) %*% y` counts as `x`. Without any, the aggregate's own input (both vectors of a dot
/// product).
fn fused_inputs(dag: &FusionDag<'_>, selection: &Selection, agg: HopId) -> BTreeSet<HopId> {
    let cell_plan = |h: HopId| {
        selection
            .plans
            .get(&h)
            .and_then(|es| es.iter().find(|e| e.template == TemplateKind::Cell))
    };
    let base = |h: HopId, pos: usize| {
        let c = dag.inputs(h)[pos];
        if dag.is_matmul(h) && pos == 0 && dag.is_transpose(c) {
            dag.inputs(c)[0]
        } else {
            c
        }
    };
    let mut out = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut stack = vec![agg];
    while let Some(h) = stack.pop() {
        if !seen.insert(h) {
            continue;
        }
        let plan = cell_plan(h);
        for pos in 0..dag.inputs(h).len() {
            match plan {
                Some(e) if e.is_ref(pos) => stack.push(dag.inputs(h)[pos]),
                _ => {
                    let c = base(h, pos);
                    if dag.is_matrix(c) {
                        out.insert(c);
                    }
                }
            }
        }
    }
    if out.is_empty() {
        out.insert(base(agg, 0));
        if dag.is_matmul(agg) {
            out.insert(dag.inputs(agg)[1]);
        }
    }
    out
}

/// SystemDS `rPruneInvalidPlans` (reference 4.6 step 3e), applied to the selected plans of
/// the hops in partitions with interesting points, once the search has chosen their
/// assignments: bottom-up, a selected Row plan is pointless when it is a leaf over no true
/// matrix (pure vector operations) or an inner plan at a hop the Row template does not open
/// whose fused inputs have no selected Row plan (they were cut at materialization points,
/// dropped as Row duplicates, or converted themselves). Such a plan becomes the Cell plan with
/// the same references where the operation is cell-wise (not a `cbind` nor a matrix product
/// with a matrix output, SystemDS `isValidRow2CellOp`) and the Cell template accepts it (opens
/// at it, or fuses each referenced input into it). A Row consumer absorbs the Cell plan.
///
/// Deviation: SystemDS converts memo entries before its final fuse-all traversal, and removes
/// the plans it cannot convert. Converting the memo before the traversal lets a converted
/// entry lose to another Cell entry that fuses more than the search chose (found by the
/// property test: a plan costing more than fuse-no-redundancy), so lafuse relabels the
/// selected plans instead: the same operators, with the same references and modelled cost,
/// built by the cheaper and more general Cell template. A plan that cannot be converted stays
/// a Row plan, which computes the same values (removing it after selection would un-fuse it).
pub fn convert_invalid_row_plans(
    dag: &FusionDag<'_>,
    selection: &mut Selection,
    results: &[PartitionResult],
) {
    use crate::fusion::template::{CellTemplate, RowTemplate, Template};
    let scope: BTreeSet<HopId> = results
        .iter()
        .filter(|r| !r.partition.points.is_empty())
        .flat_map(|r| r.partition.hops.iter().copied())
        .collect();
    let has_row_plan = |sel: &Selection, h: HopId| {
        sel.plans
            .get(&h)
            .is_some_and(|es| es.iter().any(|e| e.template == TemplateKind::Row))
    };
    for &h in dag.order() {
        if !scope.contains(&h) || !has_row_plan(selection, h) {
            continue;
        }
        let has_matrix_input = dag.inputs(h).iter().any(|&i| dag.is_full_matrix(i));
        let row_open = RowTemplate.open(dag, h);
        let convertible_op = is_valid_row_to_cell_op(dag, h);
        let convert = |sel: &Selection, e: &MemoEntry| -> MemoEntry {
            if e.template != TemplateKind::Row {
                return e.clone();
            }
            let leaf = !e.has_refs() && !has_matrix_input;
            let inner = !leaf && !row_open && e.refs().all(|(_, c)| !has_row_plan(sel, c));
            let cell_ok = if e.has_refs() {
                e.refs().all(|(_, c)| CellTemplate.fuse(dag, h, c))
            } else {
                CellTemplate.open(dag, h)
            };
            if (leaf || inner) && convertible_op && cell_ok {
                MemoEntry {
                    template: TemplateKind::Cell,
                    ..e.clone()
                }
            } else {
                e.clone()
            }
        };
        let mut entries: Vec<MemoEntry> = selection.plans[&h]
            .iter()
            .map(|e| convert(selection, e))
            .collect();
        entries.sort();
        entries.dedup();
        if let Some(root) = selection.roots.get(&h) {
            let root = convert(selection, root);
            selection.roots.insert(h, root);
        }
        selection.plans.insert(h, entries);
    }
}

/// SystemDS `isValidRow2CellOp`: anything but a `cbind` or a matrix product with a true
/// matrix output.
fn is_valid_row_to_cell_op(dag: &FusionDag<'_>, h: HopId) -> bool {
    use crate::hops::{NaryOp, OpKind};
    !(matches!(dag.op(h), OpKind::Nary(NaryOp::Cbind))
        || (dag.is_matmul(h) && dag.is_full_matrix(h)))
}

/// Removes the entries that fuse an input at one position but read the same hop materialized
/// at another (`O(-1,19)` of `19 * 19`): such a plan both computes the hop inside the operator
/// and forces it to be materialized, which no assignment of interesting points can undo, and
/// the found plans then lose to heuristics that leave the hop unfused (property test (c)).
pub fn prune_partially_fused_duplicates(dag: &FusionDag<'_>, memo: &mut MemoTable) {
    let hops: Vec<HopId> = memo.hops().collect();
    for h in hops {
        let inputs = dag.inputs(h);
        memo.retain(h, |e| {
            e.template == TemplateKind::MAgg
                || e.refs().all(|(_, r)| {
                    inputs
                        .iter()
                        .enumerate()
                        .all(|(p, &i)| i != r || e.is_ref(p))
                })
        });
    }
    memo.prune_dangling_references(dag);
}

/// Removes the Row plans of partition hops whose Row and Cell plans fuse exactly the same
/// inputs, unless a row-wise operation depends on them or they on one (reference 4.6
/// `pruneInvalidAndSpecialCasePlans`, "Row vs. Cell duplicates"): a cell-wise operator is
/// cheaper and more general, and the cost model cannot tell the two apart.
pub fn prune_row_duplicates(dag: &FusionDag<'_>, memo: &mut MemoTable, part: &PlanPartition) {
    let mut blacklist = BTreeSet::new();
    let mut visited = BTreeSet::new();
    for &r in &part.roots {
        collect_row_ops(dag, memo, part, r, &mut blacklist, &mut visited);
    }
    // Bottom-up, on the table before removal: a Row plan is replaceable only if every hop it
    // fuses is replaceable too (or has no Row plans). SystemDS checks each hop alone, which
    // can turn `R(15)` into `C(15)` where 15's Cell plan fuses less than its Row plan and so
    // cut a Row chain in two operators (found by the property test against fuse-all).
    let mut replaceable: BTreeSet<HopId> = BTreeSet::new();
    for &h in dag.order() {
        if !part.hops.contains(&h)
            || blacklist.contains(&h)
            || !memo.contains_template(h, TemplateKind::Row)
            || !only_exact_matches(memo, h)
        {
            continue;
        }
        let inner_ok = memo.entries_of(h, TemplateKind::Row).all(|e| {
            e.refs().all(|(_, r)| {
                !memo.contains_template(r, TemplateKind::Row) || replaceable.contains(&r)
            })
        });
        if inner_ok {
            replaceable.insert(h);
        }
    }
    for h in replaceable {
        memo.remove_template(h, TemplateKind::Row);
    }
}

/// Whether every Row entry of `h` has a Cell entry with the same references and vice versa
/// (SystemDS `hasOnlyExactMatches`).
fn only_exact_matches(memo: &MemoTable, h: HopId) -> bool {
    let rows: Vec<&MemoEntry> = memo.entries_of(h, TemplateKind::Row).collect();
    let cells: Vec<&MemoEntry> = memo.entries_of(h, TemplateKind::Cell).collect();
    rows.len() == cells.len()
        && rows
            .iter()
            .all(|r| cells.iter().any(|c| c.inputs == r.inputs))
}

/// SystemDS `rCollectDependentRowOps`: the hops that are row-wise operations, fused (inside
/// Row plans) below one, or whose Row plan fuses such a hop. Top-down from `root` with an
/// explicit stack (the walk is as deep as the partition); a hop's bottom-up check runs after
/// its inputs'.
fn collect_row_ops(
    dag: &FusionDag<'_>,
    memo: &MemoTable,
    part: &PlanPartition,
    root: HopId,
    blacklist: &mut BTreeSet<HopId>,
    visited: &mut BTreeSet<(HopId, bool, Option<TemplateKind>)>,
) {
    enum Step<'m> {
        Enter(HopId, Option<TemplateKind>, bool),
        Exit(
            HopId,
            Option<&'m MemoEntry>,
            (HopId, bool, Option<TemplateKind>),
        ),
    }
    let mut stack = vec![Step::Enter(root, None, false)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Enter(h, context, mut found) => {
                let key = (h, found, context);
                if !part.hops.contains(&h) || visited.contains(&key) {
                    continue;
                }
                let me = match context {
                    None => memo.best(h),
                    Some(t) => memo.best_within(h, t),
                };
                let in_row = me.is_some_and(|m| m.template == TemplateKind::Row)
                    && context == Some(TemplateKind::Row);
                let diff_plans = !part.points.is_empty()
                    && memo.contains_template(h, TemplateKind::Row)
                    && !only_exact_matches(memo, h);
                if in_row && found {
                    blacklist.insert(h);
                }
                if is_row_op(dag, h, in_row) || diff_plans {
                    blacklist.insert(h);
                    found = true;
                }
                stack.push(Step::Exit(h, me, key));
                for (i, &c) in dag.inputs(h).iter().enumerate().rev() {
                    let child_found = found && me.is_some_and(|m| m.is_ref(i));
                    stack.push(Step::Enter(c, me.map(|m| m.template), child_found));
                }
            }
            Step::Exit(h, me, key) => {
                if let Some(m) = me.filter(|m| m.template == TemplateKind::Row) {
                    if m.refs().any(|(_, c)| blacklist.contains(&c)) {
                        blacklist.insert(h);
                    }
                }
                visited.insert(key);
            }
        }
    }
}

/// SystemDS `isRowAggOp`: operations only the Row template can compute.
fn is_row_op(dag: &FusionDag<'_>, h: HopId, in_row: bool) -> bool {
    use crate::hops::{DataGenOp, NaryOp, OpKind};
    let not_vector = |h: HopId| {
        let hop = dag.hop(h);
        hop.rows != Some(1) && hop.cols != Some(1)
    };
    match dag.op(h) {
        OpKind::Nary(NaryOp::Cbind) => true,
        OpKind::MatMul => in_row || dag.dims(h).is_none() || not_vector(h),
        OpKind::AggUnary { .. } => in_row,
        _ if dag.is_transpose(h) => {
            not_vector(h)
                && !dag
                    .input(h, 0)
                    .is_some_and(|i| matches!(dag.op(i), OpKind::DataGen(DataGenOp::Seq)))
        }
        _ => false,
    }
}

/// Assignment `i` of `n` points: bit `j` (point `j`) is bit `n − 1 − j` of `i`, so the first
/// point is the most significant (reference 4.8 `createAssignment`).
pub fn assignment(i: u128, n: usize) -> Vec<bool> {
    (0..n).map(|j| (i >> (n - 1 - j)) & 1 == 1).collect()
}

/// The modelled cost of `part` under `assignment` (its share of the plan: the operators and
/// unfused operations rooted at its hops). Partitions are independent, so the cost of a
/// whole plan is the sum over partitions plus the fixed cost of the hops outside them.
pub fn partition_cost(
    dag: &FusionDag<'_>,
    memo: &MemoTable,
    part: &PlanPartition,
    model: &CostModel,
    assignment: &[bool],
) -> f64 {
    let usable = |h: HopId, e: &MemoEntry| part.is_usable(assignment, h, e);
    let chooser = MemoChooser {
        memo,
        usable: &usable,
    };
    plan_cost(dag, model, &chooser, &part.starts(), Some(&part.hops))
}

/// The selection of the given per-partition assignments: the fuse-all traversal from the
/// DAG's roots, using in each partition only the entries its assignment allows.
pub fn selection_for(
    dag: &FusionDag<'_>,
    memo: &MemoTable,
    results: &[PartitionResult],
) -> Selection {
    let mut cut: BTreeMap<HopId, BTreeSet<HopId>> = BTreeMap::new();
    for r in results {
        for (p, &on) in r.partition.points.iter().zip(&r.assignment) {
            if on {
                cut.entry(p.from).or_default().insert(p.to);
            }
        }
    }
    let usable = |h: HopId, e: &MemoEntry| {
        e.template == TemplateKind::MAgg
            || cut
                .get(&h)
                .is_none_or(|tos| !e.refs().any(|(_, r)| tos.contains(&r)))
    };
    let mut selection = Selection::default();
    select_fuse_all(
        dag,
        memo,
        &selection_roots(dag),
        None,
        &usable,
        &mut selection,
    );
    selection
}

/// The plan-independent parts of a partition's cost (reference 4.6 step 3b), in seconds.
#[derive(Clone, Debug, PartialEq)]
struct StaticBounds {
    read: f64,
    compute: f64,
    write: f64,
    min_sparsity: f64,
    /// Hops written under every plan (roots, externally consumed).
    always_written: BTreeSet<HopId>,
}

impl StaticBounds {
    fn new(dag: &FusionDag<'_>, part: &PlanPartition, model: &CostModel) -> StaticBounds {
        let read = part
            .inputs
            .iter()
            .filter(|&&i| dag.is_matrix(i))
            .map(|&i| model.bytes(dag, i))
            .sum::<f64>()
            / model.read_bandwidth;
        let compute =
            part.hops.iter().map(|&h| model.flops(dag, h)).sum::<f64>() / model.compute_bandwidth;
        let always_written: BTreeSet<HopId> = part.starts().into_iter().collect();
        let write = always_written
            .iter()
            .map(|&h| 8.0 * cells(dag, h))
            .sum::<f64>()
            / model.write_bandwidth;
        // An Outer operator scales its cost by its driver's sparsity; the driver is an input
        // of the partition or one of its hops.
        let min_sparsity = if part.has_outer {
            part.inputs
                .iter()
                .chain(&part.hops)
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
    fn min_cost(&self) -> f64 {
        (self.write + self.read.max(self.compute)) * self.min_sparsity
    }

    /// A lower bound of the cost of `plan`: the static costs plus, per distinct producer of an
    /// active point, its write (if not always written) and one read. Unlike SystemDS (which
    /// adds the reads outside the `max`), the reads join the static reads inside
    /// `max(read, compute)`, so the bound is sound: a plan's cost is a sum of per-operator
    /// `write + max(read, compute)`, at least `Σwrite + max(Σread, Σcompute)`.
    fn lower_bound(
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
        for &t in &tos {
            if !self.always_written.contains(&t) {
                write += 8.0 * cells(dag, t) / model.write_bandwidth;
            }
            if dag.is_matrix(t) {
                read += model.bytes(dag, t) / model.read_bandwidth;
            }
        }
        (write + read.max(self.compute)) * self.min_sparsity
    }
}

/// The approximate identity of a partition across compilations (reference 4.8
/// `PartitionSignature`): sizes of its parts and its static and heuristic costs (bitwise).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PartitionKey {
    hops: usize,
    inputs: usize,
    roots: usize,
    points: usize,
    costs: [u64; 5],
}

impl PartitionKey {
    fn new(part: &PlanPartition, b: &StaticBounds, c0: f64, cn: f64) -> PartitionKey {
        PartitionKey {
            hops: part.hops.len(),
            inputs: part.inputs.len(),
            roots: part.roots.len(),
            points: part.points.len(),
            costs: [
                b.compute.to_bits(),
                b.read.to_bits(),
                b.write.to_bits(),
                c0.to_bits(),
                cn.to_bits(),
            ],
        }
    }
}

/// FIFO-evicted map from partition signatures to assignments.
#[derive(Debug, Default)]
struct PlanCache {
    map: HashMap<PartitionKey, Vec<bool>>,
    order: VecDeque<PartitionKey>,
}

impl PlanCache {
    fn get(&self, k: &PartitionKey) -> Option<Vec<bool>> {
        self.map.get(k).cloned()
    }

    fn put(&mut self, k: PartitionKey, v: Vec<bool>) {
        if self.map.insert(k.clone(), v).is_none() {
            self.order.push_back(k);
            while self.order.len() > PLAN_CACHE_CAPACITY {
                if let Some(old) = self.order.pop_front() {
                    self.map.remove(&old);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::explore::{explore, ExploreOptions};
    use crate::fusion::template::test_util::{build, view};
    use crate::hops::{AggOp, BinaryOp, Direction, NaryOp, OpKind, UnaryOp};

    #[test]
    fn row_plans_without_row_work_become_cell_plans_after_selection() {
        // c = exp(v) over a column vector v, h1 = c + 1, h2 = c * 2 (c has two consumers: an
        // interesting point), sums of both, and cbind(c, v). Row opens at exp(v) and cbind;
        // nothing here reads a true matrix.
        let mut ids = Vec::new();
        let dag = build(|b| {
            let v = b.input("v", 100, 1, 100);
            let c = b.unary(UnaryOp::Exp, v).unwrap();
            let one = b.literal_f64(1.0);
            let two = b.literal_f64(2.0);
            let h1 = b.binary(BinaryOp::Add, c, one).unwrap();
            let h2 = b.binary(BinaryOp::Mul, c, two).unwrap();
            let s1 = b.agg(AggOp::Sum, Direction::Full, h1).unwrap();
            let s2 = b.agg(AggOp::Sum, Direction::Full, h2).unwrap();
            let cb = b.add(OpKind::Nary(NaryOp::Cbind), &[c, v]).unwrap();
            ids.extend([c, h1, s1, cb]);
            vec![s1, s2, cb]
        });
        let f = view(&dag);
        let [c, h1, s1, cb] = [ids[0], ids[1], ids[2], ids[3]];
        let memo = explore(&f, &ExploreOptions::default());
        let results: Vec<PartitionResult> = analyze_partitions(&f, &memo)
            .into_iter()
            .map(|p| PartitionResult {
                assignment: vec![false; p.points.len()],
                partition: p,
                cost: 0.0,
            })
            .collect();
        assert!(results.iter().any(|r| !r.partition.points.is_empty()));
        // The fuse-all traversal prefers Row plans (rank) all the way down.
        let fuse_all = |results: &[PartitionResult]| {
            let mut sel = selection_for(&f, &memo, results);
            // A leaf cbind plan as a separate operator, for the removal rule below.
            sel.plans.insert(
                cb,
                vec![MemoEntry::new(
                    TemplateKind::Row,
                    2,
                    crate::fusion::memo::CloseState::OpenValid,
                )],
            );
            sel.roots.insert(cb, sel.plans[&cb][0].clone());
            sel
        };
        let templates = |sel: &Selection, h: HopId| -> Vec<(TemplateKind, Vec<Option<HopId>>)> {
            sel.plans[&h]
                .iter()
                .map(|e| (e.template, e.inputs.clone()))
                .collect()
        };
        let mut sel = fuse_all(&results);
        assert_eq!(templates(&sel, c), [(TemplateKind::Row, vec![None])]);
        assert_eq!(
            templates(&sel, h1),
            [(TemplateKind::Row, vec![Some(c), None])]
        );
        assert_eq!(sel.roots[&s1].template, TemplateKind::Row);
        let cost = crate::fusion::cost::cost_of(&f, &CostModel::default(), &sel);
        convert_invalid_row_plans(&f, &mut sel, &results);
        // Leaf exp(v): pure vector operations.
        assert_eq!(templates(&sel, c), [(TemplateKind::Cell, vec![None])]);
        // Inner c + 1 (Row does not open at it) fusing c, which has no Row plan left; and so
        // on up to the root sum, whose operator is now a Cell operator.
        assert_eq!(
            templates(&sel, h1),
            [(TemplateKind::Cell, vec![Some(c), None])]
        );
        assert_eq!(sel.roots[&s1].template, TemplateKind::Cell);
        assert_eq!(sel.roots[&s1].inputs, vec![Some(h1)]);
        // A cbind is no cell-wise operation: its plan stays a Row plan.
        assert_eq!(sel.roots[&cb].template, TemplateKind::Row);
        // Same operators, same references: the same modelled cost.
        assert_eq!(
            crate::fusion::cost::cost_of(&f, &CostModel::default(), &sel),
            cost
        );

        // Only partitions with interesting points are converted (as in SystemDS).
        let mut sel = fuse_all(&[]);
        convert_invalid_row_plans(&f, &mut sel, &[]);
        assert_eq!(templates(&sel, c), [(TemplateKind::Row, vec![None])]);
    }

    #[test]
    fn assignments_put_the_first_point_in_the_most_significant_bit() {
        assert_eq!(assignment(1, 3), [false, false, true]);
        assert_eq!(assignment(4, 3), [true, false, false]);
        assert_eq!(assignment(6, 3), [true, true, false]);
    }

    #[test]
    fn the_plan_cache_evicts_oldest_first() {
        let mut c = PlanCache::default();
        let key = |i: usize| PartitionKey {
            hops: i,
            inputs: 0,
            roots: 0,
            points: 0,
            costs: [0; 5],
        };
        for i in 0..=PLAN_CACHE_CAPACITY {
            c.put(key(i), vec![i % 2 == 0]);
        }
        assert!(c.get(&key(0)).is_none());
        assert_eq!(c.get(&key(1)), Some(vec![false]));
        assert_eq!(c.map.len(), PLAN_CACHE_CAPACITY);
    }
}
