//! Candidate exploration: the open-fuse-merge-close algorithm (paper section 3.2, Algorithm 1;
//! reference 1.4) that fills the memo table in one bottom-up pass over the DAG.
//!
//! For each hop `h` (inputs first, each hop once):
//! 1. *open*: every template whose `open(h)` holds starts a plan at `h`;
//! 2. *fuse*: for every input `c` and every template with an open plan at `c` whose
//!    `fuse(h, c)` holds, a plan extends from `c` to `h`;
//! 3. *merge*: each plan created in 1 or 2 is combined with every subset of the other inputs
//!    `k` for which `merge(h, k)` holds and `k` has an open plan the template can absorb
//!    ([`TemplateKind::can_absorb`]) — a cross product of at most `2^3` plans per template;
//! 4. *close*: each plan gets its template's close state at `h`; closed-invalid plans are
//!    dropped;
//! 5. redundant plans are pruned ([`MemoTable::prune_redundant`]).
//!
//! Template switches (reference 3.5) arise naturally: a plan of one template references an
//! input whose group also holds plans of other templates (e.g. a Row plan over a Cell plan, or
//! an Outer plan absorbing the Cell plan of `X != 0`); selection decides which one is used.
//!
//! Linear in the DAG: each hop is processed once and the conditions are local.

use crate::fusion::dag::FusionDag;
use crate::fusion::memo::{CloseState, DominancePruning, MemoEntry, MemoTable, TemplateKind};
use crate::fusion::template::{opening_templates, template, Template};
use crate::hops::HopId;

/// Only the first three inputs of a hop may be fused (SystemDS's three reference slots,
/// reference 4.10): this bounds the plans per hop by `|T| · 2^3` even for n-ary ops with many
/// inputs (paper section 3.2, "Algorithm Analysis").
pub const MAX_REFERENCE_POSITIONS: usize = 3;

/// Options of [`explore`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExploreOptions {
    /// Prune plans dominated by a plan that additionally fuses a single-consumer input
    /// (reference 2.4 step 1c). SystemDS does this for its heuristic selectors; the
    /// cost-based selector keeps every plan until it knows its interesting points. The paper's
    /// Figure 6 shows a table without it ("w/ basic pruning").
    pub prune_dominated: bool,
    /// Which templates may open plans (all by default); for experiments.
    pub templates: [bool; 4],
}

impl Default for ExploreOptions {
    fn default() -> ExploreOptions {
        ExploreOptions {
            prune_dominated: false,
            templates: [true; 4],
        }
    }
}

impl ExploreOptions {
    /// Whether template `kind` takes part.
    pub fn enabled(&self, kind: TemplateKind) -> bool {
        self.templates[kind.rank() as usize]
    }

    /// The options with one template switched off.
    pub fn without(mut self, kind: TemplateKind) -> ExploreOptions {
        self.templates[kind.rank() as usize] = false;
        self
    }
}

/// Explores every hop reachable from the DAG's roots and returns the populated memo table.
pub fn explore(dag: &FusionDag<'_>, options: &ExploreOptions) -> MemoTable {
    let mut memo = MemoTable::new();
    for &h in dag.order() {
        explore_hop(dag, &mut memo, h, options);
    }
    memo
}

/// Processes one hop whose inputs have all been explored (Algorithm 1, lines 7-20).
pub fn explore_hop(dag: &FusionDag<'_>, memo: &mut MemoTable, h: HopId, options: &ExploreOptions) {
    if memo.is_explored(h) {
        return;
    }
    let mut plans: Vec<MemoEntry> = Vec::new();
    // open
    for tpl in opening_templates() {
        if options.enabled(tpl.kind()) && tpl.open(dag, h) {
            plans.extend(enum_plans(dag, memo, h, None, tpl));
        }
    }
    // fuse (and merge)
    let inputs = dag.inputs(h);
    for (pos, &c) in inputs.iter().enumerate().take(MAX_REFERENCE_POSITIONS) {
        for (kind, close) in memo.distinct_templates(c) {
            // The open guard of every template's `fuse` lives here, once.
            if close.is_closed() || !options.enabled(kind) {
                continue;
            }
            let tpl = template(kind);
            if tpl.fuse(dag, h, c) {
                plans.extend(enum_plans(dag, memo, h, Some(pos), tpl));
            }
        }
    }
    // close
    for mut plan in plans {
        plan.closed = template(plan.template).close(dag, h);
        if plan.closed != CloseState::ClosedInvalid {
            memo.add(h, plan);
        }
    }
    let dominance = if options.prune_dominated {
        DominancePruning::SingleConsumer
    } else {
        DominancePruning::Off
    };
    memo.prune_redundant(dag, h, dominance);
    memo.mark_explored(h);
}

/// SystemDS `enumPlans` (reference 1.4): the plan of `tpl` at `h` fusing input `fused` (if
/// any), crossed with every subset of the other inputs it can merge.
fn enum_plans(
    dag: &FusionDag<'_>,
    memo: &MemoTable,
    h: HopId,
    fused: Option<usize>,
    tpl: &dyn Template,
) -> Vec<MemoEntry> {
    let inputs = dag.inputs(h);
    let kind = tpl.kind();
    let mut base = MemoEntry::new(kind, inputs.len(), CloseState::OpenValid);
    if let Some(p) = fused {
        base = base.with_ref(p, inputs[p]);
    }
    let mut set = vec![base];
    for (k, &input) in inputs.iter().enumerate().take(MAX_REFERENCE_POSITIONS) {
        if Some(k) == fused {
            continue;
        }
        let absorbable = [kind, TemplateKind::Cell];
        if memo.contains_open(input, &absorbable) && tpl.merge(dag, h, input) {
            let with: Vec<MemoEntry> = set.iter().map(|e| e.clone().with_ref(k, input)).collect();
            set.extend(with);
        }
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::template::test_util::{build, view};
    use crate::hops::{AggOp, BinaryOp as B, Direction};

    fn show(memo: &MemoTable, h: HopId) -> Vec<String> {
        memo.group(h).iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn sum_of_a_product_chain_is_example_a() {
        // Reference 3.6 example A: s = sum(X * Y * Z).
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input("X", 100, 100, 10_000);
            let y = b.input("Y", 100, 100, 10_000);
            let z = b.input("Z", 100, 100, 10_000);
            let h1 = b.binary(B::Mul, x, y).unwrap();
            let h2 = b.binary(B::Mul, h1, z).unwrap();
            let h3 = b.agg(AggOp::Sum, Direction::Full, h2).unwrap();
            ids.extend([h1, h2, h3]);
            vec![h3]
        });
        let f = view(&dag);
        let memo = explore(&f, &ExploreOptions::default());
        let (h1, h2, h3) = (ids[0], ids[1], ids[2]);
        assert_eq!(show(&memo, h1), ["R(-1,-1)", "C(-1,-1)"]);
        let r = format!("R({h1},-1)");
        let c = format!("C({h1},-1)");
        assert_eq!(
            show(&memo, h2),
            ["R(-1,-1)", r.as_str(), "C(-1,-1)", c.as_str()]
        );
        let r = format!("R({h2})|c");
        let c = format!("C({h2})|c");
        assert_eq!(show(&memo, h3), [r.as_str(), c.as_str()]);
        // With dominance pruning the single-consumer h1 is always fused.
        let memo = explore(
            &f,
            &ExploreOptions {
                prune_dominated: true,
                ..Default::default()
            },
        );
        assert_eq!(memo.count_entries(h2), 2);
    }

    #[test]
    fn disabled_templates_do_not_open() {
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input("X", 100, 100, 10_000);
            let e = b.unary(crate::hops::UnaryOp::Exp, x).unwrap();
            ids.push(e);
            vec![e]
        });
        let f = view(&dag);
        let memo = explore(&f, &ExploreOptions::default().without(TemplateKind::Row));
        assert_eq!(show(&memo, ids[0]), ["C(-1)"]);
    }
}
