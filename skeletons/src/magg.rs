//! The MultiAgg skeleton (reference 6.4): several full aggregates over one scan of the main
//! input, iterated as the Cell skeleton iterates (dense rows; the non-zeros of a sparse main
//! input when every body is sparse-safe and the CSR entry is offered; else densified blocks);
//! each task keeps one partial per aggregate, merged in task order.

use crate::cell::{full_aggs, Driver};
use crate::prep::Input;
use crate::{AggKind, InputUse, Result};
use lafuse_runtime::Matrix;

/// What a MultiAgg operator computes and how its generated code reads its inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MAggSpec {
    /// One aggregate per output.
    pub aggs: Vec<AggKind>,
    /// Every body is zero wherever the main input is zero (given finite side inputs).
    pub sparse_safe: bool,
    /// How each input position is read.
    pub uses: Vec<InputUse>,
    /// Lanes of each aggregate's partial (the generator's vector width plus one).
    pub lanes: usize,
}

/// The generated entry points of a MultiAgg operator: the same two as a Cell operator's
/// (partials are laid out per aggregate).
pub type MAggKernels<'a> = crate::CellKernels<'a>;

/// Runs a MultiAgg operator; one 1×1 matrix per aggregate.
pub fn execute(
    spec: &MAggSpec,
    kernels: &MAggKernels<'_>,
    inputs: &[Input<'_>],
) -> Result<Vec<Matrix>> {
    let mut views = Vec::new();
    let mut prepared = None;
    let d = Driver::new(
        inputs,
        &spec.uses,
        spec.sparse_safe,
        kernels,
        &mut views,
        &mut prepared,
    )?;
    Ok(full_aggs(&d, &spec.aggs, spec.lanes)?
        .into_iter()
        .map(Matrix::scalar)
        .collect())
}
