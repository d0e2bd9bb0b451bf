//! The interface fused operators implement, so the executor can run them like any kernel.
//!
//! The runtime knows nothing of how an operator came to be (a CPlan interpreted or compiled
//! to native code): it hands over the operator's inputs by position and stores its outputs.

use crate::error::Result;
use crate::lineage::Lineage;
use crate::matrix::{Matrix, ValueRange};
use std::fmt;

/// An input of a fused operator.
#[derive(Clone, Copy, Debug)]
pub enum OperatorInput<'a> {
    /// A scalar (integers and booleans are passed as doubles).
    Scalar(f64),
    /// A matrix, with a range its values lie in if known (`None`: not scanned): its exact
    /// range, or a bound its producer knew (see `ValueRangeCache::bound`). Operators use it to
    /// prove facts of every value (finite, positive), never as the values' exact extremes.
    Matrix(&'a Matrix, Option<ValueRange>),
}

/// A fused operator: computes one or more outputs from its inputs in one pass.
///
/// Implementations must be callable from several threads and must produce the same values
/// as the unfused kernels of the operations they replace (up to the documented tolerance of
/// reordered sums).
pub trait Operator: Send + Sync + fmt::Debug {
    /// A short opcode for statistics, e.g. `fused_cell`.
    fn opcode(&self) -> &str;

    /// Computes the outputs, by output position. A full aggregate is a 1×1 matrix.
    fn execute(&self, inputs: &[OperatorInput<'_>]) -> Result<Vec<Matrix>>;

    /// [`Operator::execute`], told the lineage items of the inputs (by position; `None` or
    /// past the end: not traced), which identify their values exactly: an operator that keeps
    /// copies of its inputs elsewhere (GPU memory) reuses them by these. The default ignores
    /// them.
    fn execute_traced(
        &self,
        inputs: &[OperatorInput<'_>],
        lineage: &[Option<Lineage>],
    ) -> Result<Vec<Matrix>> {
        let _ = lineage;
        self.execute(inputs)
    }

    /// Whether the operator reads the value range of input `position` when it is a matrix
    /// (its finiteness decides how a call runs). The executor then hands the range over in
    /// [`OperatorInput::Matrix`] from a cache of its own, so that a loop calling the operator
    /// on the same matrix scans it once, not once per call. The default reads none.
    fn reads_value_range(&self, position: usize) -> bool {
        let _ = position;
        false
    }
}
