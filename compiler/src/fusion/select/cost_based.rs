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
//! plans ([`super::rules::RowPlansToCell`]); after all partitions are selected, full aggregates of
//! different partitions that share an input are merged into across-partition MultiAggs
//! ([`super::rules::CrossPartitionMultiAggregates`], reference 4.7 second half), kept unless the cost
//! model rates the plan with them more expensive. Both are steps of the cost-based policy
//! only: SystemDS creates MultiAggs (within and across partitions) in
//! `PlanSelectionFuseCostBased` (V1) and `PlanSelectionFuseCostBasedV2`, and converts Row plans
//! in V2, never in the fuse-all or fuse-no-redundancy heuristics; lafuse applies both in `gen`
//! only.
//!
//! Not implemented: the Spark block-size constraint and eviction/broadcast terms (single-node
//! engine), the `tsmm` exception for materialization points.

use super::reachability::{find_cut_set, CutSet};
use super::rules::{SelectionContext, MEMO_RULES, SELECTION_RULES};
use super::static_bounds::StaticBounds;
use super::{prepare_for_selection, select_fuse_all, selection_roots, PlanSelector, Selection};
use crate::fusion::cost::{self, plan_cost_bounded, CostModel, CostScope, MemoChooser};
use crate::fusion::dag::FusionDag;
use crate::fusion::memo::{MemoEntry, MemoTable, TemplateKind};
use crate::fusion::partition::{analyze_partitions, PlanPartition, PointKind};
use crate::hops::HopId;
use crate::Result;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
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

/// The cost-based selector (`gen`): configuration only. The plan cache lives for one search
/// ([`CostBased::search`]), so a block's plan is a function of its DAG and this configuration,
/// never of the blocks optimized before it.
#[derive(Clone, Debug)]
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
}

impl Default for CostBased {
    fn default() -> CostBased {
        CostBased::new(CostModel::default())
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
        for rule in MEMO_RULES {
            rule.apply(dag, memo);
        }
        let parts = analyze_partitions(dag, memo);
        let mut report = CostReport::default();
        report.stats.partitions = parts.len();
        // Scoped to this DAG: partitions of the same signature within it share an assignment
        // (reference 4.8), while other DAGs' searches cannot steer this one.
        let mut cache = PlanCache::default();
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
            let task = PartitionTask {
                part: &part,
                cut: cut.as_ref(),
                heuristic,
                heuristic_total,
            };
            let (assignment, cost) =
                self.search_partition(dag, memo, &task, &mut cache, &mut report.stats);
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
        let ctx = SelectionContext {
            dag,
            model: &self.model,
            partitions: &report.partitions,
        };
        for rule in SELECTION_RULES {
            rule.apply(&ctx, memo, &mut selection);
        }
        selection.selector = self.name().to_string();
        selection.cost = Some(self.cost_of(dag, &selection));
        memo.prune_to_plan(&selection.plans);
        (selection, report)
    }

    fn search_partition(
        &self,
        dag: &FusionDag<'_>,
        memo: &MemoTable,
        task: &PartitionTask<'_>,
        cache: &mut PlanCache,
        stats: &mut SearchStats,
    ) -> (Vec<bool>, f64) {
        let PartitionTask {
            part,
            cut,
            heuristic: (c0, cn),
            heuristic_total,
        } = *task;
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
        let bounds = StaticBounds::of_partition(dag, part, &self.model);
        let key = PartitionKey::new(part, &bounds, c0, cn);
        let use_cache = self.plan_caching && n >= PLAN_CACHE_MIN_POINTS;
        if use_cache {
            if let Some(a) = cache.get(&key).filter(|a| a.len() == n) {
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
                walk: PartitionWalk::new(dag, part, &self.model),
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
            cache.put(key, best.clone());
        }
        (best, best_cost)
    }
}

/// One partition to search, with what the caller costed for it: its fuse-all and no-fusion
/// plans, and the heuristic cost of the whole DAG.
#[derive(Clone, Copy)]
struct PartitionTask<'p> {
    part: &'p PlanPartition,
    cut: Option<&'p CutSet>,
    heuristic: (f64, f64),
    heuristic_total: f64,
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
    /// The partition's starts and hops, computed once for the many plans costed.
    walk: PartitionWalk,
    stats: &'a mut SearchStats,
    evaluated: u64,
    budget_hit: bool,
}

/// What every costing of one partition walks from and within: its starts ([`PlanPartition::starts`])
/// and its hops as a [`CostScope`].
struct PartitionWalk {
    starts: Vec<HopId>,
    scope: CostScope,
}

impl PartitionWalk {
    fn new(dag: &FusionDag<'_>, part: &PlanPartition, model: &CostModel) -> PartitionWalk {
        PartitionWalk {
            starts: part.starts(),
            scope: CostScope::new(dag, model, part.hops.iter().copied()),
        }
    }

    /// The cost of `part` under `assignment`, or `+∞` once it exceeds `bound`.
    fn cost(
        &self,
        dag: &FusionDag<'_>,
        memo: &MemoTable,
        part: &PlanPartition,
        model: &CostModel,
        assignment: &[bool],
        bound: f64,
    ) -> f64 {
        // The points this assignment materializes, once: the chooser asks for every memo
        // entry it considers whether it references across one.
        let cut: Vec<(HopId, HopId)> = part
            .points
            .iter()
            .zip(assignment)
            .filter(|(_, &on)| on)
            .map(|(p, _)| (p.from, p.to))
            .collect();
        let usable = |h: HopId, e: &MemoEntry| {
            e.template == TemplateKind::MAgg
                || !cut.iter().any(|&(from, to)| from == h && e.references(to))
        };
        let chooser = MemoChooser {
            memo,
            usable: &usable,
        };
        plan_cost_bounded(dag, model, &chooser, &self.starts, Some(&self.scope), bound)
    }
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
        self.walk.cost(
            self.dag,
            self.memo,
            self.part,
            &self.selector.model,
            plan,
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
    PartitionWalk::new(dag, part, model).cost(dag, memo, part, model, assignment, f64::INFINITY)
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
