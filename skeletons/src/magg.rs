//! The MultiAgg skeleton (reference 6.4): several full aggregates over one scan of the main
//! input. Every cell is visited (dense rows, or densified blocks of a sparse main input); each
//! task keeps one partial per aggregate, merged in task order.

use crate::cell::{full_aggs, Driver};
use crate::prep::Input;
use crate::{AggKind, InputUse, KernelFn, Result};
use lafuse_runtime::Matrix;

/// What a MultiAgg operator computes and how its generated code reads its inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MAggSpec {
    /// One aggregate per output.
    pub aggs: Vec<AggKind>,
    /// How each input position is read.
    pub uses: Vec<InputUse>,
    /// Lanes of each aggregate's partial (the generator's vector width plus one).
    pub lanes: usize,
}

/// The generated entry point of a MultiAgg operator.
#[derive(Clone, Copy, Debug)]
pub struct MAggKernels {
    /// Rows of a dense main input (every cell); partials are laid out per aggregate.
    pub dense: KernelFn,
}

/// Runs a MultiAgg operator; one 1×1 matrix per aggregate.
pub fn execute(
    spec: &MAggSpec,
    kernels: &MAggKernels,
    inputs: &[Input<'_>],
) -> Result<Vec<Matrix>> {
    let mut views = Vec::new();
    let mut prepared = None;
    let d = Driver::new(
        inputs,
        &spec.uses,
        false,
        kernels.dense,
        None,
        &mut views,
        &mut prepared,
    )?;
    Ok(full_aggs(&d, &spec.aggs, spec.lanes)?
        .into_iter()
        .map(Matrix::scalar)
        .collect())
}
