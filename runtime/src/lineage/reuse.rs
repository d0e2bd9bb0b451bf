//! The executor's side of lineage-based full reuse (LIMA section 4.1, MEMPHIS Figure 4): after
//! the TRACE step has built the items of an instruction's outputs, REUSE probes the cache with
//! them; where every output hits, the cached values take the registers and the instruction
//! does not run, and the cache's own items take the outputs' items (compaction, MEMPHIS
//! Figure 5: later items then share the cached sub-DAGs, and later probes compare by
//! identity). Otherwise the instruction runs and PUT fills the cache.
//!
//! Where an operation's output misses, partial reuse (LIMA section 4.2) may still compute it
//! from cached parts: the executor asks the run's [`Compensations`] (the rewrites know the
//! hops items are made of, so they live with the compiler's crate) before running it.
//!
//! A fused operator is reused by the lineage of its outputs, which is the lineage of the
//! unfused operations it covers: a value computed unfused in one block is reused by a fused
//! operator in another, and the other way round.

use super::cache::{Probe, Reservation, ReuseCache};
use super::Lineage;
use crate::error::{Internal, Result, RuntimeError};
use crate::exec::{Instruction, Op};
use crate::value::Value;
use std::time::{Duration, Instant};

/// Reuse state the executor works on: the cache, the hits counted by level, and partial reuse
/// where it is on.
pub struct Reuse<'a> {
    pub cache: &'a ReuseCache,
    pub hits: &'a mut ReuseHits,
    pub partial: Option<&'a dyn Compensations>,
}

/// Partial reuse's rewrites (LIMA section 4.2): given an operation whose output missed, that
/// output's item and the values of its operands, the output computed from parts found in the cache
/// plus a compensation, or `None` where no rewrite applies. A compensation must give the value
/// the operation would, bit for bit: reuse never changes a result.
pub trait Compensations: Sync {
    fn compensate(
        &self,
        op: &Op,
        item: &Lineage,
        operands: &[&Value],
        cache: &ReuseCache,
    ) -> Result<Option<Value>>;
}

/// Whether every matrix among `operands` is dense with finite values (what
/// [`ReuseCache::put_computed`] records): the dense kernels the compensations continue.
/// NaN/±Inf in a product's right operand take the zero-skipping product instead of dgemm
/// ([`crate::kernels::matmul`]), whose order of summation no compensation reproduces.
pub fn dense_operands<'v>(operands: impl IntoIterator<Item = &'v Value>) -> bool {
    operands.into_iter().all(|v| match v {
        Value::Matrix(m) => match &**m {
            crate::matrix::Matrix::Dense(d) => crate::matrix::all_finite(&d.values),
            crate::matrix::Matrix::Sparse(_) => false,
        },
        _ => true,
    })
}

/// Hits by level, for `--stats` (misses, evictions and spills are the cache's own counts).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReuseHits {
    /// Instructions of one operation whose outputs came from the cache.
    pub operations: u64,
    /// Fused operators whose outputs came from the cache.
    pub fused: u64,
    /// Function calls whose results came from the cache (multi-level reuse).
    pub functions: u64,
    /// Basic blocks whose assignments came from the cache (multi-level reuse).
    pub blocks: u64,
    /// Operations computed from cached parts and a compensation (partial reuse).
    pub partial: u64,
    /// Operations run without a probe: unmarked by the compiler (not hits; counted here to
    /// show what compiler assistance skipped).
    pub unmarked: u64,
}

/// Whether `op` computes a value worth caching: the operations LIMA's reusable opcodes cover
/// (products, element-wise operations, aggregates, reorganizations, indexing, `solve`) and
/// fused operators. Data movement, generators, casts, size queries, I/O and side effects are
/// not; nor is left indexing, whose target may be updated in place.
fn reusable(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary(_)
            | Op::Binary(_)
            | Op::IfElse
            | Op::Replace
            | Op::Aggregate(..)
            | Op::Cumsum
            | Op::Cumulative(_)
            | Op::Cumsumprod
            | Op::Rev
            | Op::Table
            | Op::RemoveEmpty
            | Op::Order
            | Op::RowIndex(_)
            | Op::Outer
            | Op::Unique
            | Op::GroupedAggregate
            | Op::Triangle(_)
            | Op::MatMul
            | Op::TransposeSelfMatMul
            | Op::TransposeSelfMatMulOfCbind
            | Op::TransposedLeftMatMulOfRbind
            | Op::TransposedLeftMatMul
            | Op::TransposedRightMatMul
            | Op::TransposedOutMatMul { .. }
            | Op::Transpose
            | Op::Diag
            | Op::Reshape
            | Op::Solve
            | Op::Stat(_)
            | Op::LinAlg(_)
            | Op::Dnn(_)
            | Op::Decompose { .. }
            | Op::Slice
            | Op::Cbind
            | Op::Rbind
            | Op::NaryMinMax(_)
            | Op::Fused { .. }
    )
}

/// What REUSE decided for one instruction.
pub(crate) enum Decision {
    /// Not probed (not reusable, or an operation on scalars only): run as usual.
    Run,
    /// Every output hit: the single output's value (`None` for a fused operator, whose
    /// registers are already set); the instruction does not run.
    Reused(Option<Value>),
    /// Run, then put the outputs that missed (one reservation per output, `None` where it hit;
    /// whether every matrix operand was dense, read before the run may move them).
    RunAndPut(Vec<Option<Reservation>>, bool),
}

/// REUSE: probes the cache with the items of `instr`'s outputs (`outputs`, which take the
/// cache's items on a hit).
pub(crate) fn before(
    instr: &Instruction,
    regs: &mut [Option<Value>],
    outputs: &mut [Lineage],
    reuse: &mut Reuse<'_>,
) -> Result<Decision> {
    // Cheap scalar arithmetic is not worth a probe: only operations reading a matrix are.
    let reads_matrix = instr
        .inputs
        .iter()
        .any(|&r| matches!(regs.get(r as usize), Some(Some(Value::Matrix(_)))));
    if !reusable(&instr.op) || !reads_matrix || outputs.is_empty() {
        return Ok(Decision::Run);
    }
    if !instr.cacheable {
        reuse.hits.unmarked += 1;
        return Ok(Decision::Run);
    }
    let mut hits = Vec::with_capacity(outputs.len());
    let mut reservations = Vec::with_capacity(outputs.len());
    for item in outputs.iter() {
        match reuse.cache.probe(item) {
            Probe::Hit { key, value } => {
                hits.push(Some((key, value)));
                reservations.push(None);
            }
            Probe::Miss(reservation) => {
                hits.push(None);
                reservations.push(Some(reservation));
            }
        }
    }
    if reservations.iter().any(Option::is_some) {
        if let (Some(partial), [item], false) = (
            reuse.partial,
            &outputs[..],
            instr.op.result_registers().is_some(),
        ) {
            let operands: Vec<&Value> = instr
                .inputs
                .iter()
                .filter_map(|&r| regs.get(r as usize).and_then(Option::as_ref))
                .collect();
            let started = Instant::now();
            if operands.len() == instr.inputs.len() {
                if let Some(value) = partial.compensate(&instr.op, item, &operands, reuse.cache)? {
                    if let Some(Some(reservation)) = reservations.pop() {
                        // The compensations continue the dense kernels' arithmetic.
                        reuse
                            .cache
                            .put_computed(reservation, &value, started.elapsed(), true);
                    }
                    reuse.hits.partial += 1;
                    return Ok(Decision::Reused(Some(value)));
                }
            }
        }
        let dense = dense_operands(
            instr
                .inputs
                .iter()
                .filter_map(|&r| regs.get(r as usize).and_then(Option::as_ref)),
        );
        return Ok(Decision::RunAndPut(reservations, dense));
    }
    let mut values = Vec::with_capacity(hits.len());
    for (slot, hit) in outputs.iter_mut().zip(hits.into_iter().flatten()) {
        let (key, value) = hit;
        *slot = key;
        values.push(value);
    }
    match instr.op.result_registers() {
        Some(targets) => {
            for (reg, value) in targets.into_iter().zip(values) {
                let slot = regs.get_mut(reg as usize).ok_or(RuntimeError::Internal(
                    Internal::RegisterOutOfRange { register: reg },
                ))?;
                *slot = Some(value);
            }
            if matches!(instr.op, Op::Fused { .. }) {
                reuse.hits.fused += 1;
            } else {
                reuse.hits.operations += 1;
            }
            Ok(Decision::Reused(None))
        }
        None => {
            reuse.hits.operations += 1;
            Ok(Decision::Reused(values.into_iter().next()))
        }
    }
}

/// PUT: after `instr` ran (taking `compute`), fills the reservations with its outputs' values
/// (`value` for an instruction with one output; a fused operator's are in its registers).
pub(crate) fn after(
    instr: &Instruction,
    regs: &[Option<Value>],
    value: Option<&Value>,
    reservations: Vec<Option<Reservation>>,
    dense: bool,
    compute: Duration,
    cache: &ReuseCache,
) {
    match instr.op.result_registers() {
        Some(targets) => {
            // A fused operator's or a decomposition's arithmetic is its own, not a dense
            // kernel's that partial reuse could continue.
            for (reg, reservation) in targets.into_iter().zip(reservations) {
                if let (Some(reservation), Some(Some(v))) = (reservation, regs.get(reg as usize)) {
                    cache.put_computed(reservation, v, compute, false);
                }
            }
        }
        None => {
            if let (Some(Some(reservation)), Some(v)) = (reservations.into_iter().next(), value) {
                cache.put_computed(reservation, v, compute, dense);
            }
        }
    }
    // The budget holds after every put (the tests' tiny budgets exercise eviction and
    // spilling on almost every instruction).
    debug_assert!(
        cache.bytes() <= cache.budget(),
        "the reuse cache holds {} bytes over its budget of {}",
        cache.bytes(),
        cache.budget()
    );
}
