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
//! # The pipeline
//!
//! [`explore`](fn@explore) fills the memo table in one bottom-up pass; a [`PlanSelector`] chooses plans:
//! the heuristics [`FuseAll`] and [`FuseNoRedundancy`], or the cost-based [`CostBased`]
//! (`gen`: plan partitions and interesting points in [`partition`], the cost model of formula
//! (3) as a value in [`cost`], MPSkipEnum with cost-based skipping, structural pruning by cut
//! sets ([`select::reachability`]) and a plan cache in [`select::cost_based`]). [`cplan`] then
//! builds the fused operators' bodies from the reduced memo table, with their simplification
//! and CSE rewrites and a structural hash. Still missing (issue 3): MultiAggs across
//! partitions, conversion of Row plans back to Cell after selection, the calibrated machine
//! profile, `lafuse cost`, and the execution of fused operators.
//!
//! Architecture invariant: everything here is a pure function of the DAG (with its sizes) and
//! the options; iteration orders are canonical (`BTreeMap`/sorted vectors), so memo dumps and
//! selections are byte-stable.

pub mod cost;
pub mod cplan;
pub mod dag;
pub mod dot;
pub mod explore;
pub mod hop_set;
pub mod memo;
pub mod partition;
pub mod select;
pub mod sparsity;
pub mod template;

pub use cost::{CostModel, CostModelError};
pub use dag::FusionDag;
pub use explore::{explore, ExploreOptions, MAX_REFERENCE_POSITIONS};
pub use memo::{CloseState, DominancePruning, MemoEntry, MemoTable, TemplateKind};
pub use select::{cost_floor, CostBased, FuseAll, FuseNoRedundancy, PlanSelector, Selection};
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
