//! The memo table of partial fusion plans (paper section 3.1, reference section 2).
//!
//! One *group* per hop that is amenable to fusion; a group holds *entries*
//! `(template, input references, close state)`. An input reference at position `i` means "this
//! plan fuses the hop's i-th input, which has a compatible plan in its own group"; `None` means
//! the input is read materialized. The table is a compact encoding of all valid partial fusion
//! plans: exploration ([`crate::fusion::explore()`]) fills it, selection
//! ([`crate::fusion::select`]) reduces it to the chosen plan.
//!
//! Invariants: groups and entries iterate in a canonical order (groups by hop id, entries by
//! [`MemoEntry`]'s `Ord`), so dumps and JSON are byte-stable; a group never holds two equal
//! entries; an entry's reference at position `i` always names the hop's i-th input (MultiAgg
//! entries excepted, see [`TemplateKind::MAgg`]).

use crate::fusion::dag::FusionDag;
use crate::hops::{HopDag, HopId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write};

/// The four fused-operator templates (paper section 2.2).
///
/// Declared in SystemDS's preference order, so `Ord` is the template *rank*: when a hop has
/// plans of several templates, heuristics prefer the smaller one (reference 2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TemplateKind {
    /// Multi-aggregate: 2-3 full aggregates over shared inputs computed in one scan. Never
    /// opened by exploration; selection adds these entries (reference 4.7). In a MAgg entry,
    /// `inputs` lists the aggregate hops of the group (the entry's own hop among them), not
    /// the hop's inputs.
    #[serde(rename = "magg")]
    MAgg,
    /// Sparsity-exploiting outer-product template over `X ⊙ f(U %*% t(V))`.
    #[serde(rename = "outer")]
    Outer,
    /// Row-wise template: one row of the main input at a time, vector intermediates.
    #[serde(rename = "row")]
    Row,
    /// Cell-wise template: one cell of the main input at a time, optional aggregation.
    #[serde(rename = "cell")]
    Cell,
}

impl TemplateKind {
    /// Every template, in rank order.
    pub const ALL: [TemplateKind; 4] = [
        TemplateKind::MAgg,
        TemplateKind::Outer,
        TemplateKind::Row,
        TemplateKind::Cell,
    ];

    /// The preference rank (smaller is preferred): MAgg 0, Outer 1, Row 2, Cell 3.
    pub fn rank(self) -> u8 {
        self as u8
    }

    /// The one-letter code of dumps (paper Figure 6 writes `R(10,9)`).
    pub fn letter(self) -> char {
        match self {
            TemplateKind::MAgg => 'M',
            TemplateKind::Outer => 'O',
            TemplateKind::Row => 'R',
            TemplateKind::Cell => 'C',
        }
    }

    /// The full name.
    pub fn name(self) -> &'static str {
        match self {
            TemplateKind::MAgg => "magg",
            TemplateKind::Outer => "outer",
            TemplateKind::Row => "row",
            TemplateKind::Cell => "cell",
        }
    }

    /// Whether a plan of this template can absorb (reference) an open plan of `input` at one of
    /// its inputs: a template absorbs its own kind, and every template absorbs Cell plans
    /// ("compatible templates", reference 3.5).
    pub fn can_absorb(self, input: TemplateKind) -> bool {
        input == self || input == TemplateKind::Cell
    }
}

impl fmt::Display for TemplateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a partial plan may grow further and whether it may be the root of a fused operator
/// (paper section 3.1: "open valid, open invalid, closed valid, closed invalid").
///
/// There is no separate "not yet closed" state: exploration creates and closes a hop's entries
/// in the same step, so an entry is never observed before its close state is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum CloseState {
    /// Consumers may extend the plan, and it may end here as a fused operator.
    #[serde(rename = "open_valid")]
    OpenValid,
    /// Consumers may extend the plan, but it cannot end here (e.g. a bare `t(X)` of a Row plan,
    /// or `U %*% t(V)` of an Outer plan before a sparse driver masks it).
    #[serde(rename = "open_invalid")]
    OpenInvalid,
    /// The plan cannot grow further and is a valid fused operator (e.g. after an aggregation).
    #[serde(rename = "closed_valid")]
    ClosedValid,
    /// The plan cannot grow and is not a valid operator; such entries are dropped on creation.
    #[serde(rename = "closed_invalid")]
    ClosedInvalid,
}

impl CloseState {
    /// No further fusion with consumers.
    pub fn is_closed(self) -> bool {
        matches!(self, CloseState::ClosedValid | CloseState::ClosedInvalid)
    }

    /// May be the root of a fused operator.
    pub fn is_valid(self) -> bool {
        matches!(self, CloseState::OpenValid | CloseState::ClosedValid)
    }

    /// The suffix of dumps: none for open valid, `|x` open invalid, `|c` closed valid, `|cx`
    /// closed invalid.
    pub fn suffix(self) -> &'static str {
        match self {
            CloseState::OpenValid => "",
            CloseState::OpenInvalid => "|x",
            CloseState::ClosedValid => "|c",
            CloseState::ClosedInvalid => "|cx",
        }
    }
}

/// One partial fusion plan of a hop: a memo-table entry `(type, {i_1, ..., i_k}, closed)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MemoEntry {
    /// The template this plan belongs to.
    pub template: TemplateKind,
    /// Per hop input (by position): `Some(input hop)` if the plan fuses that input's group,
    /// `None` if the input is read materialized. For [`TemplateKind::MAgg`], the aggregate hops
    /// sharing the scan.
    pub inputs: Vec<Option<HopId>>,
    /// Whether the plan may grow and whether it may end here.
    pub closed: CloseState,
}

impl MemoEntry {
    /// An entry of `template` over `num_inputs` inputs, all materialized.
    pub fn new(template: TemplateKind, num_inputs: usize, closed: CloseState) -> MemoEntry {
        MemoEntry {
            template,
            inputs: vec![None; num_inputs],
            closed,
        }
    }

    /// A copy with position `pos` referencing `input`.
    pub fn with_ref(mut self, pos: usize, input: HopId) -> MemoEntry {
        if let Some(slot) = self.inputs.get_mut(pos) {
            *slot = Some(input);
        }
        self
    }

    /// A multi-aggregate entry over the given aggregate hops (2 or 3, reference 4.7).
    pub fn magg(aggregates: &[HopId]) -> MemoEntry {
        MemoEntry {
            template: TemplateKind::MAgg,
            inputs: aggregates.iter().map(|&a| Some(a)).collect(),
            closed: CloseState::ClosedValid,
        }
    }

    /// Whether position `pos` is a fusion reference.
    pub fn is_ref(&self, pos: usize) -> bool {
        matches!(self.inputs.get(pos), Some(Some(_)))
    }

    /// The references as `(position, referenced hop)`.
    pub fn refs(&self) -> impl Iterator<Item = (usize, HopId)> + '_ {
        self.inputs
            .iter()
            .enumerate()
            .filter_map(|(p, r)| r.map(|h| (p, h)))
    }

    /// The number of references.
    pub fn num_refs(&self) -> usize {
        self.inputs.iter().filter(|r| r.is_some()).count()
    }

    /// Whether the plan fuses at least one input.
    pub fn has_refs(&self) -> bool {
        self.inputs.iter().any(Option::is_some)
    }

    /// Whether the plan references `hop` at any position.
    pub fn references(&self, hop: HopId) -> bool {
        self.inputs.contains(&Some(hop))
    }

    /// SystemDS `subsumes`: same template and every reference of `other` is also one of
    /// `self` (positions always name the same input hop, so positions suffice).
    pub fn subsumes(&self, other: &MemoEntry) -> bool {
        self.template == other.template
            && self.inputs.len() == other.inputs.len()
            && other
                .inputs
                .iter()
                .zip(&self.inputs)
                .all(|(o, s)| o.is_none() || s.is_some())
    }

    /// Whether the plan may be the root of a fused operator.
    pub fn is_valid(&self) -> bool {
        self.closed.is_valid()
    }

    /// Whether the plan cannot grow further.
    pub fn is_closed(&self) -> bool {
        self.closed.is_closed()
    }
}

impl fmt::Display for MemoEntry {
    /// `R(-1,9)`: template letter, then per input the referenced hop or `-1`, then the close
    /// suffix ([`CloseState::suffix`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(", self.template.letter())?;
        for (i, r) in self.inputs.iter().enumerate() {
            if i > 0 {
                f.write_char(',')?;
            }
            match r {
                Some(h) => write!(f, "{h}")?,
                None => f.write_str("-1")?,
            }
        }
        write!(f, "){}", self.closed.suffix())
    }
}

/// How [`MemoTable::prune_redundant`] treats dominated entries (reference 2.4 step 1c).
#[derive(Clone, Copy)]
pub enum DominancePruning<'a> {
    /// Keep dominated entries (cost-based selection before its structural analysis).
    Off,
    /// Drop an entry subsumed by another when every extra reference of the other fuses an input
    /// with a single consumer (fusing it can never cause redundant compute): heuristics.
    SingleConsumer,
    /// As `SingleConsumer`, but also drop it when each extra reference crosses an edge
    /// `(consumer, producer)` that the predicate says is *not* an interesting point (the
    /// cost-based selector once it knows its points).
    NotInteresting(&'a dyn Fn(HopId, HopId) -> bool),
}

/// The memo table: groups of partial fusion plans by hop id.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoTable {
    /// Non-empty groups by hop id.
    groups: BTreeMap<HopId, Vec<MemoEntry>>,
    /// Hops exploration has processed (with or without plans).
    explored: BTreeSet<HopId>,
    /// Hops whose plans must not become fused-operator roots, but stay available to consumers
    /// (SystemDS `plansExcludeList`, reference 2.2).
    excluded: BTreeSet<HopId>,
}

impl MemoTable {
    /// An empty table.
    pub fn new() -> MemoTable {
        MemoTable::default()
    }

    // ---- queries -------------------------------------------------------------------------

    /// Whether `hop` has at least one entry.
    pub fn contains(&self, hop: HopId) -> bool {
        self.groups.get(&hop).is_some_and(|g| !g.is_empty())
    }

    /// Whether `hop` has an entry of `template`.
    pub fn contains_template(&self, hop: HopId, template: TemplateKind) -> bool {
        self.group(hop).iter().any(|e| e.template == template)
    }

    /// Whether `hop` has an entry of one of `templates` that is still open (what a consumer's
    /// plan needs to reference it, reference 1.4 `enumPlans`).
    pub fn contains_open(&self, hop: HopId, templates: &[TemplateKind]) -> bool {
        self.group(hop)
            .iter()
            .any(|e| !e.is_closed() && templates.contains(&e.template))
    }

    /// Whether `hop`'s group holds exactly this entry.
    pub fn contains_entry(&self, hop: HopId, entry: &MemoEntry) -> bool {
        self.group(hop).contains(entry)
    }

    /// Whether `hop` has a valid entry with references of a template not in `templates`
    /// (SystemDS `containsNotIn`, used for template-switch points).
    pub fn contains_valid_ref_entry_not_in(&self, hop: HopId, templates: &[TemplateKind]) -> bool {
        self.group(hop)
            .iter()
            .any(|e| e.is_valid() && e.has_refs() && !templates.contains(&e.template))
    }

    /// The entries of `hop` (empty if none), in canonical order.
    pub fn group(&self, hop: HopId) -> &[MemoEntry] {
        self.groups.get(&hop).map_or(&[], Vec::as_slice)
    }

    /// The entries of `hop` of one template.
    pub fn entries_of(
        &self,
        hop: HopId,
        template: TemplateKind,
    ) -> impl Iterator<Item = &MemoEntry> + '_ {
        self.group(hop)
            .iter()
            .filter(move |e| e.template == template)
    }

    /// All groups in hop-id order.
    pub fn groups(&self) -> impl Iterator<Item = (HopId, &[MemoEntry])> + '_ {
        self.groups.iter().map(|(h, g)| (*h, g.as_slice()))
    }

    /// The hops that have entries, ascending.
    pub fn hops(&self) -> impl Iterator<Item = HopId> + '_ {
        self.groups.keys().copied()
    }

    /// The number of non-empty groups.
    pub fn num_groups(&self) -> usize {
        self.groups.len()
    }

    /// The total number of entries.
    pub fn num_entries(&self) -> usize {
        self.groups.values().map(Vec::len).sum()
    }

    /// The number of entries of `hop`.
    pub fn count_entries(&self, hop: HopId) -> usize {
        self.group(hop).len()
    }

    /// The distinct `(template, close state)` pairs of `hop`'s entries, sorted: the template
    /// instances exploration tries to extend from this hop (reference 1.4).
    pub fn distinct_templates(&self, hop: HopId) -> Vec<(TemplateKind, CloseState)> {
        let set: BTreeSet<_> = self
            .group(hop)
            .iter()
            .map(|e| (e.template, e.closed))
            .collect();
        set.into_iter().collect()
    }

    /// The distinct templates of `hop`'s entries that reference input position `pos`,
    /// optionally ignoring invalid Outer entries (SystemDS `getDistinctTemplateTypes`).
    pub fn distinct_templates_at(
        &self,
        hop: HopId,
        pos: usize,
        exclude_invalid_outer: bool,
    ) -> Vec<TemplateKind> {
        let set: BTreeSet<_> = self
            .group(hop)
            .iter()
            .filter(|e| e.is_ref(pos))
            .filter(|e| {
                !(exclude_invalid_outer && e.template == TemplateKind::Outer && !e.is_valid())
            })
            .map(|e| e.template)
            .collect();
        set.into_iter().collect()
    }

    /// Per input position of `hop`, the hop referenced by some entry, or `None` if no entry
    /// references that position. (SystemDS's `getAllRefs` writes 0 for "none", defect #11 of
    /// the reference; an explicit `None` cannot be confused with hop 0.)
    pub fn all_refs(&self, hop: HopId) -> Vec<Option<HopId>> {
        let n = self
            .group(hop)
            .iter()
            .map(|e| e.inputs.len())
            .max()
            .unwrap_or(0);
        let mut out = vec![None; n];
        for e in self.group(hop) {
            if e.template == TemplateKind::MAgg {
                continue;
            }
            for (p, r) in e.refs() {
                out[p] = Some(r);
            }
        }
        out
    }

    /// For every hop that some entry references, the number of entries referencing it
    /// (MultiAgg entries excluded: they name aggregates, not fused inputs).
    pub fn reference_counts(&self) -> BTreeMap<HopId, usize> {
        let mut counts = BTreeMap::new();
        for e in self.groups.values().flatten() {
            if e.template == TemplateKind::MAgg {
                continue;
            }
            for (_, r) in e.refs() {
                *counts.entry(r).or_insert(0) += 1;
            }
        }
        counts
    }

    /// The hops referenced by at least one (non-MultiAgg) entry.
    pub fn referenced_hops(&self) -> BTreeSet<HopId> {
        self.reference_counts().into_keys().collect()
    }

    /// The preferred valid plan of `hop` as the root of a fused operator: smallest template
    /// rank, then most references, then canonical order (SystemDS `BasicPlanComparator`).
    pub fn best(&self, hop: HopId) -> Option<&MemoEntry> {
        self.group(hop)
            .iter()
            .filter(|e| e.is_valid())
            .min_by_key(|e| (e.template.rank(), std::cmp::Reverse(e.num_refs())))
    }

    /// The preferred plan of `hop` inside an operator of template `current`: among entries of
    /// `current` or Cell, the minimal score `7 − 4·[template == current] − #refs` (reference
    /// 3.5), so the current template is kept and Cell sub-plans can be absorbed.
    pub fn best_within(&self, hop: HopId, current: TemplateKind) -> Option<&MemoEntry> {
        self.group(hop)
            .iter()
            .filter(|e| current.can_absorb(e.template))
            .min_by_key(|e| typed_score(e, current))
    }

    /// Whether `hop` has plans that may become a fused operator of their own (not excluded and
    /// with a valid entry; SystemDS `containsTopLevel`).
    pub fn contains_top_level(&self, hop: HopId) -> bool {
        !self.excluded.contains(&hop) && self.best(hop).is_some()
    }

    /// Whether exploration processed `hop`.
    pub fn is_explored(&self, hop: HopId) -> bool {
        self.explored.contains(&hop)
    }

    /// Whether `hop` is on the exclude list.
    pub fn is_excluded(&self, hop: HopId) -> bool {
        self.excluded.contains(&hop)
    }

    /// The exclude list, ascending.
    pub fn excluded(&self) -> impl Iterator<Item = HopId> + '_ {
        self.excluded.iter().copied()
    }

    // ---- mutation ------------------------------------------------------------------------

    /// Marks `hop` as processed by exploration.
    pub fn mark_explored(&mut self, hop: HopId) {
        self.explored.insert(hop);
    }

    /// Puts `hop` on the exclude list.
    pub fn exclude(&mut self, hop: HopId) {
        self.excluded.insert(hop);
    }

    /// Adds an entry unless the group already holds it.
    pub fn add(&mut self, hop: HopId, entry: MemoEntry) {
        let group = self.groups.entry(hop).or_default();
        if let Err(at) = group.binary_search(&entry) {
            group.insert(at, entry);
        }
    }

    /// Adds several entries (duplicates skipped).
    pub fn add_all(&mut self, hop: HopId, entries: impl IntoIterator<Item = MemoEntry>) {
        for e in entries {
            self.add(hop, e);
        }
    }

    /// Replaces `hop`'s group by the distinct entries given (SystemDS `setDistinct`); an empty
    /// list removes the group.
    pub fn set_distinct(&mut self, hop: HopId, entries: impl IntoIterator<Item = MemoEntry>) {
        self.groups.remove(&hop);
        self.add_all(hop, entries);
        self.drop_if_empty(hop);
    }

    /// Keeps only the entries of `hop` satisfying `keep`.
    pub fn retain(&mut self, hop: HopId, mut keep: impl FnMut(&MemoEntry) -> bool) {
        if let Some(g) = self.groups.get_mut(&hop) {
            g.retain(|e| keep(e));
        }
        self.drop_if_empty(hop);
    }

    /// Removes `hop`'s entries of one template.
    pub fn remove_template(&mut self, hop: HopId, template: TemplateKind) {
        self.retain(hop, |e| e.template != template);
    }

    /// Removes, everywhere, every entry that references `target` (of `template` only, if
    /// given): SystemDS `removeAllRefTo`.
    pub fn remove_all_refs_to(&mut self, target: HopId, template: Option<TemplateKind>) {
        let hops: Vec<HopId> = self.groups.keys().copied().collect();
        for h in hops {
            self.retain(h, |e| {
                !(e.template != TemplateKind::MAgg
                    && e.references(target)
                    && template.is_none_or(|t| t == e.template))
            });
        }
    }

    /// Removes every closed-invalid entry (exploration never keeps them; this restores the
    /// invariant after external edits such as a deserialized table).
    pub fn prune_closed_invalid(&mut self) {
        let hops: Vec<HopId> = self.groups.keys().copied().collect();
        for h in hops {
            self.retain(h, |e| e.closed != CloseState::ClosedInvalid);
        }
    }

    /// Removes every invalid entry that no other entry references: such a plan can neither be
    /// a fused operator nor part of one.
    pub fn prune_unreferenced_invalid(&mut self) {
        let referenced = self.referenced_hops();
        let hops: Vec<HopId> = self.groups.keys().copied().collect();
        for h in hops {
            if !referenced.contains(&h) {
                self.retain(h, MemoEntry::is_valid);
            }
        }
    }

    /// Removes every entry that references an input without an open plan the entry's template
    /// can absorb, hop by hop bottom-up so that removals propagate to consumers. Needed after
    /// any pruning that empties or closes a group other entries reference (e.g. fuse-no-
    /// redundancy dropping the plans that fuse shared inputs), so that no selected plan points
    /// at an input nobody computes inside the operator.
    pub fn prune_dangling_references(&mut self, dag: &FusionDag<'_>) {
        for &h in dag.order() {
            if !self.contains(h) {
                continue;
            }
            let group = self.group(h).to_vec();
            let keep: Vec<MemoEntry> = group
                .into_iter()
                .filter(|e| {
                    e.template == TemplateKind::MAgg
                        || e.refs()
                            .all(|(_, r)| self.contains_open(r, &[e.template, TemplateKind::Cell]))
                })
                .collect();
            self.set_distinct(h, keep);
        }
    }

    /// SystemDS `pruneRedundant` for one hop (reference 2.4 step 1): drops closed entries
    /// without references (a closed single-operation plan fuses nothing) and, depending on
    /// `dominance`, entries that a subsuming entry makes pointless.
    pub fn prune_redundant(
        &mut self,
        dag: &FusionDag<'_>,
        hop: HopId,
        dominance: DominancePruning<'_>,
    ) {
        self.retain(hop, |e| !e.is_closed() || e.has_refs());
        if matches!(dominance, DominancePruning::Off) {
            return;
        }
        let group = self.group(hop).to_vec();
        let dominated = |e1: &MemoEntry, e2: &MemoEntry| -> bool {
            if e1 == e2 || !e1.subsumes(e2) {
                return false;
            }
            e1.refs().filter(|(p, _)| !e2.is_ref(*p)).all(|(_, child)| {
                let single = dag.num_consumers(child) == 1;
                match dominance {
                    DominancePruning::Off => false,
                    DominancePruning::SingleConsumer => single,
                    DominancePruning::NotInteresting(is_point) => single || !is_point(hop, child),
                }
            })
        };
        let keep: Vec<MemoEntry> = group
            .iter()
            .filter(|e2| !group.iter().any(|e1| dominated(e1, e2)))
            .cloned()
            .collect();
        self.set_distinct(hop, keep);
    }

    /// SystemDS `pruneSuboptimal` step (a): removes the reference-free entries of every hop that
    /// no entry references, unless the hop alone is worth a fused operator
    /// ([`is_valid_single_operation`]); a lone operation gains nothing from fusion.
    pub fn prune_single_operation_plans(&mut self, dag: &FusionDag<'_>) {
        let referenced = self.referenced_hops();
        let hops: Vec<HopId> = self.groups.keys().copied().collect();
        for h in hops {
            if !referenced.contains(&h) && !is_valid_single_operation(dag, h) {
                self.retain(h, MemoEntry::has_refs);
            }
        }
    }

    /// Reduces the table to a selected plan: every hop in `plans` keeps exactly its selected
    /// entries, every other group is removed (what CPlan construction reads).
    pub fn prune_to_plan(&mut self, plans: &BTreeMap<HopId, Vec<MemoEntry>>) {
        self.groups.retain(|h, _| plans.contains_key(h));
        for (h, entries) in plans {
            self.set_distinct(*h, entries.iter().cloned());
        }
    }

    fn drop_if_empty(&mut self, hop: HopId) {
        if self.groups.get(&hop).is_some_and(Vec::is_empty) {
            self.groups.remove(&hop);
        }
    }

    // ---- output --------------------------------------------------------------------------

    /// A text dump in the style of the paper's Figure 6: one line per group, top-down (highest
    /// hop id first, as the figure lists the final operator first), e.g.
    /// `(11) ba(+*) [10,9]: R(-1,9)|c R(10,-1)|c R(10,9)|c`.
    ///
    /// The bracket lists the hop's inputs; `-1` marks a materialized input; suffixes: none open
    /// valid, `|x` open invalid, `|c` closed valid, `|cx` closed invalid. Excluded hops are
    /// marked `(excluded)`. Byte-stable for a given DAG and table.
    pub fn explain(&self, dag: &HopDag) -> String {
        let mut out = format!(
            "memo table: {} groups, {} entries\n",
            self.num_groups(),
            self.num_entries()
        );
        for (h, group) in self.groups.iter().rev() {
            let hop = dag.get(*h);
            let name = hop.map_or("?".to_string(), |x| x.op.display_name());
            let inputs: Vec<String> = hop
                .map(|x| x.inputs.iter().map(|i| i.to_string()).collect())
                .unwrap_or_default();
            let _ = write!(out, "({h}) {name} [{}]:", inputs.join(","));
            for e in group {
                let _ = write!(out, " {e}");
            }
            if self.excluded.contains(h) {
                out.push_str(" (excluded)");
            }
            out.push('\n');
        }
        out
    }

    /// The table as pretty JSON (groups by hop id with their entries, the explored hops and
    /// the exclude list).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Reads a table written by [`MemoTable::to_json`].
    pub fn from_json(text: &str) -> crate::Result<MemoTable> {
        serde_json::from_str(text).map_err(|e| {
            crate::CompileError::at(
                crate::error::DagError::MemoJson {
                    detail: e.to_string(),
                },
                crate::span::Span::default(),
            )
        })
    }
}

/// `7 − 4·[template == current] − #refs` (reference 3.5).
pub fn typed_score(entry: &MemoEntry, current: TemplateKind) -> i64 {
    7 - 4 * i64::from(entry.template == current) - entry.num_refs() as i64
}

/// A hop whose operation alone is worth a fused operator (SystemDS
/// `TemplateUtils.isValidSingleOperation`): n-ary min/max (one pass instead of a chain of
/// binaries) and `exp`/`log` (compute-bound, so fusion's vectorized loop pays off).
pub fn is_valid_single_operation(dag: &FusionDag<'_>, hop: HopId) -> bool {
    use crate::hops::{NaryOp, OpKind, UnaryOp};
    matches!(
        dag.op(hop),
        OpKind::Nary(NaryOp::Min | NaryOp::Max) | OpKind::Unary(UnaryOp::Exp | UnaryOp::Log)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hops::{BinaryOp, DagBuilder};

    fn e(t: TemplateKind, refs: &[Option<u32>], c: CloseState) -> MemoEntry {
        MemoEntry {
            template: t,
            inputs: refs.iter().map(|r| r.map(HopId)).collect(),
            closed: c,
        }
    }

    #[test]
    fn entry_display_matches_figure_6_notation() {
        let x = e(TemplateKind::Row, &[None, Some(9)], CloseState::ClosedValid);
        assert_eq!(x.to_string(), "R(-1,9)|c");
        let y = e(TemplateKind::Outer, &[Some(3)], CloseState::OpenInvalid);
        assert_eq!(y.to_string(), "O(3)|x");
        assert_eq!(
            MemoEntry::new(TemplateKind::Cell, 2, CloseState::OpenValid).to_string(),
            "C(-1,-1)"
        );
    }

    #[test]
    fn subsumption_is_per_position_and_per_template() {
        let both = e(
            TemplateKind::Row,
            &[Some(1), Some(2)],
            CloseState::OpenValid,
        );
        let left = e(TemplateKind::Row, &[Some(1), None], CloseState::OpenValid);
        let cell = e(TemplateKind::Cell, &[Some(1), None], CloseState::OpenValid);
        assert!(both.subsumes(&left));
        assert!(!left.subsumes(&both));
        assert!(!both.subsumes(&cell));
        assert!(both.subsumes(&both));
    }

    #[test]
    fn add_deduplicates_and_orders_canonically() {
        let mut m = MemoTable::new();
        let h = HopId(5);
        m.add(h, e(TemplateKind::Cell, &[None], CloseState::OpenValid));
        m.add(h, e(TemplateKind::Row, &[Some(1)], CloseState::OpenValid));
        m.add(h, e(TemplateKind::Cell, &[None], CloseState::OpenValid));
        assert_eq!(m.count_entries(h), 2);
        assert_eq!(m.group(h)[0].template, TemplateKind::Row);
        assert_eq!(
            m.distinct_templates(h),
            vec![
                (TemplateKind::Row, CloseState::OpenValid),
                (TemplateKind::Cell, CloseState::OpenValid)
            ]
        );
    }

    #[test]
    fn best_prefers_rank_then_references_and_skips_invalid() {
        let mut m = MemoTable::new();
        let h = HopId(7);
        m.add(
            h,
            e(
                TemplateKind::Cell,
                &[Some(1), Some(2)],
                CloseState::OpenValid,
            ),
        );
        m.add(
            h,
            e(TemplateKind::Row, &[Some(1), None], CloseState::OpenValid),
        );
        m.add(
            h,
            e(
                TemplateKind::Row,
                &[Some(1), Some(2)],
                CloseState::OpenValid,
            ),
        );
        m.add(
            h,
            e(
                TemplateKind::Outer,
                &[Some(1), Some(2)],
                CloseState::OpenInvalid,
            ),
        );
        let best = m.best(h).unwrap();
        assert_eq!(best.template, TemplateKind::Row);
        assert_eq!(best.num_refs(), 2);
        // Inside a Cell operator only Cell entries qualify.
        let inner = m.best_within(h, TemplateKind::Cell).unwrap();
        assert_eq!(inner.template, TemplateKind::Cell);
        // Inside a Row operator, a Row entry with 1 ref (score 2) beats Cell with 2 (score 5).
        let inner = m.best_within(h, TemplateKind::Row).unwrap();
        assert_eq!(inner.template, TemplateKind::Row);
        assert_eq!(typed_score(inner, TemplateKind::Row), 1);
    }

    #[test]
    fn all_refs_uses_none_not_hop_zero() {
        let mut m = MemoTable::new();
        m.add(
            HopId(3),
            e(TemplateKind::Cell, &[None, Some(2)], CloseState::OpenValid),
        );
        assert_eq!(m.all_refs(HopId(3)), vec![None, Some(HopId(2))]);
        assert_eq!(m.all_refs(HopId(4)), Vec::<Option<HopId>>::new());
    }

    #[test]
    fn prune_redundant_drops_closed_single_ops_and_dominated_entries() {
        // Y = sum(X * Z): entries of the aggregate and of the product.
        let mut b = DagBuilder::new();
        let x = b.input("X", 10, 10, 100);
        let z = b.input("Z", 10, 10, 100);
        let p = b.binary(BinaryOp::Mul, x, z).unwrap();
        let s = b
            .agg(crate::hops::AggOp::Sum, crate::hops::Direction::Full, p)
            .unwrap();
        let shared = b.binary(BinaryOp::Add, p, p).unwrap();
        let t = b.binary(BinaryOp::Add, shared, x).unwrap();
        b.output("s", s).unwrap();
        b.output("t", t).unwrap();
        let dag = b.build().unwrap();
        let f = FusionDag::new(&dag).unwrap();
        let mut m = MemoTable::new();
        m.add(
            s,
            MemoEntry::new(TemplateKind::Cell, 1, CloseState::ClosedValid),
        );
        m.add(
            s,
            MemoEntry::new(TemplateKind::Cell, 1, CloseState::ClosedValid).with_ref(0, p),
        );
        m.prune_redundant(&f, s, DominancePruning::Off);
        assert_eq!(m.count_entries(s), 1);
        // `shared` is consumed once (by t), so fusing it dominates materializing it.
        let open = MemoEntry::new(TemplateKind::Cell, 2, CloseState::OpenValid);
        m.add(t, open.clone());
        m.add(t, open.clone().with_ref(0, shared));
        m.prune_redundant(&f, t, DominancePruning::Off);
        assert_eq!(m.count_entries(t), 2);
        m.prune_redundant(&f, t, DominancePruning::SingleConsumer);
        assert_eq!(m.group(t), &[open.clone().with_ref(0, shared)]);
        // `p` has two consumers (s and shared): no dominance.
        m.add(shared, open.clone());
        m.add(shared, open.clone().with_ref(0, p).with_ref(1, p));
        m.prune_redundant(&f, shared, DominancePruning::SingleConsumer);
        assert_eq!(m.count_entries(shared), 2);
        // ... unless the edge is known not to be an interesting point.
        let never = |_: HopId, _: HopId| false;
        m.prune_redundant(&f, shared, DominancePruning::NotInteresting(&never));
        assert_eq!(m.count_entries(shared), 1);
    }

    #[test]
    fn remove_all_refs_and_prune_to_plan() {
        let mut m = MemoTable::new();
        m.add(
            HopId(3),
            e(TemplateKind::Cell, &[Some(1), None], CloseState::OpenValid),
        );
        m.add(
            HopId(3),
            e(TemplateKind::Row, &[Some(1), None], CloseState::OpenValid),
        );
        m.add(
            HopId(3),
            e(TemplateKind::Cell, &[None, None], CloseState::OpenValid),
        );
        m.add(
            HopId(4),
            e(TemplateKind::Cell, &[Some(3)], CloseState::ClosedValid),
        );
        m.remove_all_refs_to(HopId(1), Some(TemplateKind::Row));
        assert_eq!(m.count_entries(HopId(3)), 2);
        m.remove_all_refs_to(HopId(1), None);
        assert_eq!(m.count_entries(HopId(3)), 1);
        let mut plan = BTreeMap::new();
        plan.insert(
            HopId(4),
            vec![e(TemplateKind::Cell, &[Some(3)], CloseState::ClosedValid)],
        );
        m.prune_to_plan(&plan);
        assert_eq!(m.num_groups(), 1);
        assert!(!m.contains(HopId(3)));
    }

    #[test]
    fn json_round_trips() {
        let mut m = MemoTable::new();
        m.add(
            HopId(3),
            e(
                TemplateKind::Outer,
                &[Some(1), None],
                CloseState::OpenInvalid,
            ),
        );
        m.mark_explored(HopId(3));
        m.exclude(HopId(1));
        let back = MemoTable::from_json(&m.to_json()).unwrap();
        assert_eq!(back, m);
        assert!(MemoTable::from_json("{").is_err());
    }
}
