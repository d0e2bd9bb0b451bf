//! HOP DAG rewrites: small passes behind the [`Rewrite`] trait, one per file (DataFusion style),
//! each followed by size propagation and (in debug builds and tests) the verifier.

pub mod comparison_chain;
pub mod constant_fold;
pub mod cse;
pub mod simplify;
pub mod transpose_pushdown;
pub mod unit_extent;

pub use comparison_chain::ComparisonChain;
pub use constant_fold::ConstantFolding;
pub use cse::CommonSubexpressionElimination;
pub use simplify::AlgebraicSimplification;
pub use transpose_pushdown::TransposePushdown;
pub use unit_extent::UnitExtent;

use super::ir::HopDag;
use super::size::propagate_sizes;
use super::verify::verify;
use crate::error::{CompileError, Internal, Result};

/// One DAG-to-DAG pass. Rewrites must preserve results exactly (bit for bit) and must leave a
/// DAG that passes the verifier once sizes are propagated. The one exception is
/// [`ComparisonChain`], SystemDS's own rewrite of comparison chains, which changes NaN results
/// as it does in SystemDS (scripts must print SystemDS's numbers).
pub trait Rewrite {
    /// A short, stable name (for explain, statistics and verifier messages).
    fn name(&self) -> &'static str;

    /// Rewrites the DAG in place; returns whether anything changed.
    fn rewrite(&self, dag: &mut HopDag) -> Result<bool>;
}

/// The default pass list, in order.
pub fn default_rewrites() -> Vec<Box<dyn Rewrite>> {
    vec![
        Box::new(ConstantFolding),
        Box::new(UnitExtent),
        Box::new(AlgebraicSimplification),
        Box::new(TransposePushdown),
        Box::new(CommonSubexpressionElimination),
        // After CSE, as in SystemDS: `!(A < B)` stays when the comparison is read elsewhere.
        Box::new(ComparisonChain),
    ]
}

/// Runs `passes` in order until none changes the DAG (at most `MAX_ROUNDS` rounds), then
/// removes dead hops and renumbers ([`HopDag::compact`]). After every pass sizes are
/// re-propagated; with `verify_each` (on in debug builds via [`optimize`]) the verifier runs too
/// and a failure is reported as an internal error naming the pass.
pub fn run_rewrites(
    dag: &mut HopDag,
    passes: &[Box<dyn Rewrite>],
    verify_each: bool,
) -> Result<()> {
    const MAX_ROUNDS: usize = 8;
    for _ in 0..MAX_ROUNDS {
        let mut changed = false;
        for pass in passes {
            if pass.rewrite(dag)? {
                changed = true;
                propagate_sizes(dag)?;
                if verify_each {
                    verify(dag).map_err(|e| {
                        CompileError::internal(Internal::RewrittenDag {
                            pass: pass.name(),
                            error: e,
                        })
                    })?;
                }
            }
        }
        if !changed {
            break;
        }
    }
    dag.compact();
    Ok(())
}

/// The default rewrites with verification between passes in debug builds.
pub fn optimize(dag: &mut HopDag) -> Result<()> {
    run_rewrites(dag, &default_rewrites(), cfg!(debug_assertions))
}

/// Hops for the rewrites' unit tests.
#[cfg(test)]
pub(crate) mod test_util {
    use crate::hops::ir::{DataType, Hop, HopDag, HopId, OpKind, ValueType};
    use crate::span::Span;

    /// A matrix variable `name` of known size, live at block entry.
    pub(crate) fn leaf(dag: &mut HopDag, name: &str, rows: u64, cols: u64) -> HopId {
        let mut h = Hop::new(
            OpKind::TransientRead {
                name: name.to_string(),
            },
            vec![],
            DataType::Matrix,
            ValueType::Double,
            Span::default(),
        );
        h.rows = Some(rows);
        h.cols = Some(cols);
        dag.add(h)
    }

    /// A double matrix computed by `op` from `inputs`.
    pub(crate) fn node(dag: &mut HopDag, op: OpKind, inputs: Vec<HopId>) -> HopId {
        dag.add(Hop::new(
            op,
            inputs,
            DataType::Matrix,
            ValueType::Double,
            Span::default(),
        ))
    }
}
