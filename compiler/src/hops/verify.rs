//! The DAG verifier, run between passes (cranelift style) and on every imported DAG: ids in
//! range, acyclic, arity per op kind, data and value types consistent with the inputs, sizes
//! consistent, outputs and side effects only as roots.

use super::ir::{DataType, HopDag, HopId, OpKind};
use super::size::{infer_dims, topological_order};
use super::types::{infer_type, Ty};
use crate::error::{CompileCause, TypeRule};
use std::fmt;
use thiserror::Error;

/// Why a DAG is malformed: the defect, at the offending hop if it is local to one.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyError {
    /// The offending hop, if the problem is local to one.
    pub hop: Option<HopId>,
    pub defect: DagDefect,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.hop {
            Some(h) => write!(f, "invalid HOP DAG at hop {h}: {}", self.defect),
            None => write!(f, "invalid HOP DAG: {}", self.defect),
        }
    }
}

impl std::error::Error for VerifyError {}

/// What is wrong with a DAG ([`VerifyError`]); `op` fields are an op's display name.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum DagDefect {
    #[error("too many hops")]
    TooManyHops,
    #[error("input {input} is out of range (the DAG has {len} hops)")]
    InputOutOfRange { input: HopId, len: usize },
    #[error("root {root} is out of range (the DAG has {len} hops)")]
    RootOutOfRange { root: HopId, len: usize },
    #[error("listed twice as a root")]
    RootTwice,
    #[error("{op} has {inputs} inputs")]
    Arity { op: String, inputs: usize },
    #[error("uses hop {input}, an output or side effect, as an input")]
    SinkInput { input: HopId },
    #[error("{op} is an output or side effect but not a root")]
    SinkNotRoot { op: String },
    #[error("empty variable name")]
    EmptyName,
    #[error("matrices have value type double")]
    MatrixValueType,
    /// A hop whose stored type is not the one its op and inputs give.
    #[error(
        "{op} should have type {} {}, has {} {}",
        .expected.0.name(),
        .expected.1.name(),
        .found.0.name(),
        .found.1.name()
    )]
    WrongType { op: String, expected: Ty, found: Ty },
    /// Inputs whose types the op does not take.
    #[error("{0}")]
    Type(TypeRule),
    #[error("scalars have rows = cols = 0 and no nnz")]
    ScalarSizes,
    #[error("nnz {nnz} exceeds the {cells} cells")]
    NnzExceedsCells { nnz: u64, cells: u64 },
    /// What ordering the hops or inferring a hop's sizes found.
    #[error("{}", bare(.0))]
    Inference(Box<CompileCause>),
    /// A stored `rows` or `cols` (`axis`) that is not what the inputs give.
    #[error("{axis} is {stored}, but its inputs give {inferred}")]
    SizeMismatch {
        axis: &'static str,
        stored: u64,
        inferred: u64,
    },
}

/// A cause's text without the class headline an internal error adds.
fn bare(cause: &CompileCause) -> String {
    match cause {
        CompileCause::Internal(i) => i.to_string(),
        c => c.to_string(),
    }
}

fn fail<T>(hop: Option<HopId>, defect: DagDefect) -> Result<T, VerifyError> {
    Err(VerifyError { hop, defect })
}

/// Checks every invariant of a [`HopDag`]. Never panics, whatever the DAG holds.
pub fn verify(dag: &HopDag) -> Result<(), VerifyError> {
    let n = dag.hops.len();
    if n > u32::MAX as usize {
        return fail(None, DagDefect::TooManyHops);
    }
    // Ids in range (before anything indexes with them).
    for id in dag.ids() {
        for &input in &dag.hop(id).inputs {
            if input.index() >= n {
                return fail(Some(id), DagDefect::InputOutOfRange { input, len: n });
            }
        }
    }
    let mut is_root = vec![false; n];
    for &r in &dag.roots {
        if r.index() >= n {
            return fail(None, DagDefect::RootOutOfRange { root: r, len: n });
        }
        if std::mem::replace(&mut is_root[r.index()], true) {
            return fail(Some(r), DagDefect::RootTwice);
        }
    }
    let order = topological_order(dag).map_err(|e| VerifyError {
        hop: None,
        defect: DagDefect::Inference(e.cause),
    })?;

    for &id in &order {
        let hop = dag.hop(id);
        let what = hop.op.display_name();
        if !hop.op.arity_ok(hop.inputs.len()) {
            return fail(
                Some(id),
                DagDefect::Arity {
                    op: what,
                    inputs: hop.inputs.len(),
                },
            );
        }
        for &input in &hop.inputs {
            if dag.hop(input).op.is_sink() {
                return fail(Some(id), DagDefect::SinkInput { input });
            }
        }
        if hop.op.is_sink() && !is_root[id.index()] {
            return fail(Some(id), DagDefect::SinkNotRoot { op: what });
        }
        if let OpKind::TransientRead { name } | OpKind::TransientWrite { name } = &hop.op {
            if name.is_empty() {
                return fail(Some(id), DagDefect::EmptyName);
            }
        }
        // Types.
        match &hop.op {
            OpKind::TransientRead { .. } => {
                if hop.data_type == DataType::Matrix
                    && hop.value_type != super::ir::ValueType::Double
                {
                    return fail(Some(id), DagDefect::MatrixValueType);
                }
            }
            op => {
                let input_types: Vec<_> = hop
                    .inputs
                    .iter()
                    .map(|&i| (dag.hop(i).data_type, dag.hop(i).value_type))
                    .collect();
                match infer_type(op, &input_types) {
                    Ok(t) if t == (hop.data_type, hop.value_type) => {}
                    Ok(expected) => {
                        return fail(
                            Some(id),
                            DagDefect::WrongType {
                                op: what,
                                expected,
                                found: (hop.data_type, hop.value_type),
                            },
                        )
                    }
                    Err(e) => return fail(Some(id), DagDefect::Type(e)),
                }
            }
        }
    }

    // Sizes, once types are known to be consistent.
    for &id in &order {
        let hop = dag.hop(id);
        if hop.is_scalar() {
            if hop.rows != Some(0) || hop.cols != Some(0) || hop.nnz.is_some() {
                return fail(Some(id), DagDefect::ScalarSizes);
            }
            continue;
        }
        if let (Some(nnz), Some(cells)) = (hop.nnz, hop.cells()) {
            if nnz > cells {
                return fail(Some(id), DagDefect::NnzExceedsCells { nnz, cells });
            }
        }
        let inferred = infer_dims(dag, id).map_err(|e| VerifyError {
            hop: Some(id),
            defect: DagDefect::Inference(e.cause),
        })?;
        for (axis, stored, inf) in [
            ("rows", hop.rows, inferred.rows),
            ("cols", hop.cols, inferred.cols),
        ] {
            if let (Some(s), Some(i)) = (stored, inf) {
                if s != i {
                    return fail(
                        Some(id),
                        DagDefect::SizeMismatch {
                            axis,
                            stored: s,
                            inferred: i,
                        },
                    );
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hops::ir::{BinaryOp, Hop, Literal, ValueType};
    use crate::span::Span;

    fn lit(dag: &mut HopDag, v: i64) -> HopId {
        dag.add(Hop::new(
            OpKind::Literal(Literal::Int(v)),
            vec![],
            DataType::Scalar,
            ValueType::Int,
            Span::default(),
        ))
    }

    #[test]
    fn accepts_a_small_dag_and_rejects_corruptions() {
        let mut dag = HopDag::new();
        let a = lit(&mut dag, 1);
        let b = lit(&mut dag, 2);
        let add = dag.add(Hop::new(
            OpKind::Binary(BinaryOp::Add),
            vec![a, b],
            DataType::Scalar,
            ValueType::Int,
            Span::default(),
        ));
        let w = dag.add(Hop::new(
            OpKind::TransientWrite { name: "x".into() },
            vec![add],
            DataType::Scalar,
            ValueType::Int,
            Span::default(),
        ));
        dag.roots.push(w);
        assert_eq!(verify(&dag), Ok(()));

        let mut bad = dag.clone();
        bad.hop_mut(add).value_type = ValueType::Double;
        assert!(verify(&bad)
            .unwrap_err()
            .defect
            .to_string()
            .contains("should have type"));

        let mut bad = dag.clone();
        bad.hop_mut(add).inputs.push(a);
        assert!(verify(&bad).is_err());

        let mut bad = dag.clone();
        bad.hop_mut(a).inputs = vec![add];
        bad.hop_mut(a).op = OpKind::Binary(BinaryOp::Add);
        bad.hop_mut(a).inputs.push(b);
        assert!(verify(&bad)
            .unwrap_err()
            .defect
            .to_string()
            .contains("cycle"));

        let mut bad = dag.clone();
        bad.roots.clear();
        assert!(verify(&bad)
            .unwrap_err()
            .defect
            .to_string()
            .contains("not a root"));

        let mut bad = dag.clone();
        bad.hop_mut(add).inputs[0] = HopId(99);
        assert!(verify(&bad)
            .unwrap_err()
            .defect
            .to_string()
            .contains("out of range"));
    }
}
