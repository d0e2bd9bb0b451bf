//! The DAG verifier, run between passes (cranelift style) and on every imported DAG: ids in
//! range, acyclic, arity per op kind, data and value types consistent with the inputs, sizes
//! consistent, outputs and side effects only as roots.

use super::ir::{DataType, HopDag, HopId, OpKind};
use super::size::{infer_dims, topological_order};
use super::types::infer_type;
use std::fmt;

/// Why a DAG is malformed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    /// The offending hop, if the problem is local to one.
    pub hop: Option<HopId>,
    pub message: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.hop {
            Some(h) => write!(f, "invalid HOP DAG at hop {h}: {}", self.message),
            None => write!(f, "invalid HOP DAG: {}", self.message),
        }
    }
}

impl std::error::Error for VerifyError {}

fn fail<T>(hop: Option<HopId>, message: impl Into<String>) -> Result<T, VerifyError> {
    Err(VerifyError {
        hop,
        message: message.into(),
    })
}

/// Checks every invariant of a [`HopDag`]. Never panics, whatever the DAG holds.
pub fn verify(dag: &HopDag) -> Result<(), VerifyError> {
    let n = dag.hops.len();
    if n > u32::MAX as usize {
        return fail(None, "too many hops");
    }
    // Ids in range (before anything indexes with them).
    for id in dag.ids() {
        for &input in &dag.hop(id).inputs {
            if input.index() >= n {
                return fail(
                    Some(id),
                    format!("input {input} is out of range (the DAG has {n} hops)"),
                );
            }
        }
    }
    let mut is_root = vec![false; n];
    for &r in &dag.roots {
        if r.index() >= n {
            return fail(
                None,
                format!("root {r} is out of range (the DAG has {n} hops)"),
            );
        }
        if std::mem::replace(&mut is_root[r.index()], true) {
            return fail(Some(r), "listed twice as a root");
        }
    }
    let order = topological_order(dag).map_err(|e| VerifyError {
        hop: None,
        message: e.message,
    })?;

    for &id in &order {
        let hop = dag.hop(id);
        let what = hop.op.display_name();
        if !hop.op.arity_ok(hop.inputs.len()) {
            return fail(Some(id), format!("{what} has {} inputs", hop.inputs.len()));
        }
        for &input in &hop.inputs {
            if dag.hop(input).op.is_sink() {
                return fail(
                    Some(id),
                    format!("uses hop {input}, an output or side effect, as an input"),
                );
            }
        }
        if hop.op.is_sink() && !is_root[id.index()] {
            return fail(
                Some(id),
                format!("{what} is an output or side effect but not a root"),
            );
        }
        if let OpKind::TransientRead { name } | OpKind::TransientWrite { name } = &hop.op {
            if name.is_empty() {
                return fail(Some(id), "empty variable name");
            }
        }
        // Types.
        match &hop.op {
            OpKind::TransientRead { .. } => {
                if hop.data_type == DataType::Matrix
                    && hop.value_type != super::ir::ValueType::Double
                {
                    return fail(Some(id), "matrices have value type double");
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
                    Ok((dt, vt)) => {
                        return fail(
                            Some(id),
                            format!(
                                "{what} should have type {} {}, has {} {}",
                                dt.name(),
                                vt.name(),
                                hop.data_type.name(),
                                hop.value_type.name()
                            ),
                        )
                    }
                    Err(m) => return fail(Some(id), m),
                }
            }
        }
    }

    // Sizes, once types are known to be consistent.
    for &id in &order {
        let hop = dag.hop(id);
        if hop.is_scalar() {
            if hop.rows != Some(0) || hop.cols != Some(0) || hop.nnz.is_some() {
                return fail(Some(id), "scalars have rows = cols = 0 and no nnz");
            }
            continue;
        }
        if let (Some(nnz), Some(cells)) = (hop.nnz, hop.cells()) {
            if nnz > cells {
                return fail(Some(id), format!("nnz {nnz} exceeds the {} cells", cells));
            }
        }
        let inferred = infer_dims(dag, id).map_err(|e| VerifyError {
            hop: Some(id),
            message: e.message,
        })?;
        for (axis, stored, inf) in [
            ("rows", hop.rows, inferred.rows),
            ("cols", hop.cols, inferred.cols),
        ] {
            if let (Some(s), Some(i)) = (stored, inf) {
                if s != i {
                    return fail(Some(id), format!("{axis} is {s}, but its inputs give {i}"));
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
            .message
            .contains("should have type"));

        let mut bad = dag.clone();
        bad.hop_mut(add).inputs.push(a);
        assert!(verify(&bad).is_err());

        let mut bad = dag.clone();
        bad.hop_mut(a).inputs = vec![add];
        bad.hop_mut(a).op = OpKind::Binary(BinaryOp::Add);
        bad.hop_mut(a).inputs.push(b);
        assert!(verify(&bad).unwrap_err().message.contains("cycle"));

        let mut bad = dag.clone();
        bad.roots.clear();
        assert!(verify(&bad).unwrap_err().message.contains("not a root"));

        let mut bad = dag.clone();
        bad.hop_mut(add).inputs[0] = HopId(99);
        assert!(verify(&bad).unwrap_err().message.contains("out of range"));
    }
}
