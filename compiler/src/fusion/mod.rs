//! The fusion optimizer, first half: the memo table of partial fusion plans, the four
//! templates (Cell, Row, MultiAgg, Outer) with their open-fuse-merge-close conditions, the
//! one-pass exploration that fills the memo table, and the heuristic selection policies
//! (paper "On Optimizing Operator Fusion Plans for Large-Scale Machine Learning in SystemML",
//! sections 3 and 4; the SystemDS reference, sections 2-4).
//!
//! Pipeline for one basic block's DAG (sizes known, DESIGN section 2):
//!
//! ```text
//! FusionDag::new(&dag)            verified view: bottom-up order, consumers, shape predicates
//!   → explore(&view, &options)    memo table of all valid partial plans (Algorithm 1)
//!   → selector.select(&view, &mut memo)   chosen plans; memo reduced to them
//!   → (CPlan construction, later)
//! ```
//!
//! [`plan_fusion`] runs the three steps with one policy.
//!
//! ```
//! use lafuse_compiler::fusion::{plan_fusion, FuseAll, TemplateKind};
//! use lafuse_compiler::hops::{AggOp, BinaryOp, DagBuilder, Direction};
//!
//! // s = sum(X * Y * Z)
//! let mut b = DagBuilder::new();
//! let x = b.input("X", 1000, 1000, 1_000_000);
//! let y = b.input("Y", 1000, 1000, 1_000_000);
//! let z = b.input("Z", 1000, 1000, 1_000_000);
//! let xy = b.binary(BinaryOp::Mul, x, y)?;
//! let xyz = b.binary(BinaryOp::Mul, xy, z)?;
//! let s = b.agg(AggOp::Sum, Direction::Full, xyz)?;
//! b.output("s", s)?;
//! let dag = b.build()?;
//!
//! let plan = plan_fusion(&dag, &FuseAll)?;
//! // One fused operator rooted at the sum; Row and Cell plans tie on references, Row has the
//! // smaller rank (the cost-based selector prunes such Row duplicates, reference 4.6).
//! assert_eq!(plan.selection.roots.len(), 1);
//! assert!(plan.selection.roots.contains_key(&s));
//! assert_eq!(plan.selection.root_plan(s).unwrap().template, TemplateKind::Row);
//! println!("{}", plan.memo.explain(&dag));
//! # Ok::<(), lafuse_compiler::CompileError>(())
//! ```
//!
//! # Extending: cost-based selection and CPlans
//!
//! The cost-based policy (MPSkipEnum, paper section 4) is another [`PlanSelector`] whose value
//! carries its cost model; [`PlanSelector::is_heuristic`] `false` keeps every plan through
//! exploration. It finds what it needs here: partitions are the connected components of the
//! reference graph ([`MemoTable::groups`], [`MemoEntry::refs`],
//! [`MemoTable::reference_counts`]); materialization points come from
//! [`FusionDag::consumers`]; template-switch points from [`MemoTable::all_refs`],
//! [`MemoTable::distinct_templates_at`] and [`MemoTable::contains_valid_ref_entry_not_in`];
//! dominance pruning that respects its points is [`MemoTable::prune_redundant`] with
//! [`DominancePruning::NotInteresting`]; MultiAgg candidates are checked with
//! [`template::is_multi_agg_root`] and [`template::is_valid_multi_aggregate`] and recorded as
//! [`MemoEntry::magg`]; and the final per-partition plan is
//! [`select::select_fuse_all`] restricted to the partition with a `usable` filter that drops
//! entries referencing across materialized points, followed by
//! [`MemoTable::prune_dangling_references`] and [`MemoTable::prune_to_plan`]. CPlan
//! construction reads the reduced memo table (one plan per hop and context,
//! [`Selection::roots`] for operator roots) and uses [`sparsity`] for the main input and
//! sparse-safety, [`template::cell_agg_kind`] for Cell aggregation types.
//!
//! Architecture invariant: everything here is a pure function of the DAG (with its sizes) and
//! the options; iteration orders are canonical (`BTreeMap`/sorted vectors), so memo dumps and
//! selections are byte-stable.

pub mod cost;
pub mod cplan;
pub mod dag;
pub mod explore;
pub mod memo;
pub mod partition;
pub mod select;
pub mod sparsity;
pub mod template;

pub use cost::CostModel;
pub use dag::FusionDag;
pub use explore::{explore, ExploreOptions, MAX_REFERENCE_POSITIONS};
pub use memo::{CloseState, DominancePruning, MemoEntry, MemoTable, TemplateKind};
pub use select::{CostBased, FuseAll, FuseNoRedundancy, PlanSelector, Selection};
pub use template::{template, Template};

use crate::hops::HopDag;
use crate::Result;

/// The result of [`plan_fusion`]: the memo table after exploration (for `explain --level
/// memo`), and the selection with the memo table reduced to it.
#[derive(Clone, Debug, PartialEq)]
pub struct FusionPlan {
    /// The memo table right after exploration.
    pub explored: MemoTable,
    /// The memo table reduced to the selected plans.
    pub memo: MemoTable,
    /// What the policy selected.
    pub selection: Selection,
}

/// Explores `dag` and selects plans with `selector`: exploration prunes dominated plans
/// early exactly when the policy is a heuristic (reference 1.4).
pub fn plan_fusion(dag: &HopDag, selector: &dyn PlanSelector) -> Result<FusionPlan> {
    let view = FusionDag::new(dag)?;
    let options = ExploreOptions {
        prune_dominated: selector.is_heuristic(),
        ..ExploreOptions::default()
    };
    let explored = explore(&view, &options);
    let mut memo = explored.clone();
    let selection = selector.select(&view, &mut memo)?;
    Ok(FusionPlan {
        explored,
        memo,
        selection,
    })
}
