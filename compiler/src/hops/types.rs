//! Data and value type inference for hops: DML's scalar typing rules, shared by DAG
//! construction, the builder, constant folding and the verifier (one source of truth).
//!
//! Every rule below was checked against Apache SystemDS 3.4.0 (`print(v)` of each expression
//! and of compile errors) — see the table in [`crate::hops`].

use super::ir::{
    BinaryOp, CastOp, DataGenOp, DataType, Direction, LinAlgOp, NaryOp, OpKind, ParamOp, ReorgOp,
    StatOp, TernaryOp, UnaryOp, ValueType,
};
use crate::error::TypeRule;

/// The data and value type of a hop's inputs, as seen by type inference.
pub type Ty = (DataType, ValueType);

const MATRIX: Ty = (DataType::Matrix, ValueType::Double);

/// The type of a list of elements of types `items` (a list item stands for its elements): the
/// value type all share where all are scalars (or lists) of one, else `Double`.
fn list_of(items: &[Ty]) -> Ty {
    let mut vts = items.iter().map(|t| match t.0 {
        DataType::Matrix | DataType::Frame => None,
        DataType::Scalar | DataType::List => Some(t.1),
    });
    let shared = match vts.next() {
        Some(Some(first)) => vts.all(|v| v == Some(first)).then_some(first),
        _ => None,
    };
    (DataType::List, shared.unwrap_or(ValueType::Double))
}

fn scalar(vt: ValueType) -> Ty {
    (DataType::Scalar, vt)
}

/// Result type of an element-wise binary operator on two scalars, or an error message.
pub(crate) fn scalar_binary_type(
    op: BinaryOp,
    a: ValueType,
    b: ValueType,
) -> Result<ValueType, TypeRule> {
    use ValueType::*;
    let invalid = || {
        Err(TypeRule::ValueTypes {
            op: op.name(),
            left: a.name(),
            right: b.name(),
        })
    };
    if op.is_comparison() {
        return Ok(Bool);
    }
    // xor: two booleans give a boolean (SystemDS's `Xor.execute(boolean, boolean)`), numbers a
    // double; a boolean with a number is rejected ("Invalid Valuetypes for operation BOOLEAN
    // FP64"). SystemDS 3.4 fails at run time on two integers (`xor(1, 1)`: "should never get
    // called in the base class"); lafuse gives the double, as for any other numbers.
    if op == BinaryOp::Xor {
        return match (a, b) {
            (Bool, Bool) => Ok(Bool),
            (String | Bool, _) | (_, String | Bool) => invalid(),
            _ => Ok(Double),
        };
    }
    if op.is_logical() {
        return if a == String || b == String {
            invalid()
        } else {
            Ok(Bool)
        };
    }
    match (a, b) {
        (String, _) | (_, String) => {
            if op == BinaryOp::Add {
                Ok(String)
            } else {
                invalid()
            }
        }
        // SystemDS: boolean arithmetic is allowed between two booleans only, and gives a double.
        (Bool, Bool) => Ok(Double),
        (Bool, _) | (_, Bool) => invalid(),
        (Int, Int) => Ok(match op {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Mod | BinaryOp::IntDiv => Int,
            BinaryOp::Min | BinaryOp::Max => Int,
            // `bitwAnd(12, 10)` prints `8`; with a double operand `8.0`.
            op if op.is_bitwise() => Int,
            _ => Double,
        }),
        _ => Ok(Double),
    }
}

/// Result type of a unary operator on a scalar.
pub(crate) fn scalar_unary_type(op: UnaryOp, a: ValueType) -> Result<ValueType, TypeRule> {
    use ValueType::*;
    match (op, a) {
        (UnaryOp::Not, String) => Err(TypeRule::ValueType {
            op: "!",
            value_type: "string",
        }),
        (UnaryOp::Not, _) => Ok(Bool),
        // SystemDS prints `isNaN(TRUE)` and `isNaN(1)` as `0.0`.
        (UnaryOp::IsNaN | UnaryOp::IsInf, Int | Double | Bool) => Ok(Double),
        (_, String) | (_, Bool) => Err(TypeRule::ValueType {
            op: op.name(),
            value_type: a.name(),
        }),
        (UnaryOp::Neg | UnaryOp::Abs, Int) => Ok(Int),
        _ => Ok(Double),
    }
}

/// Merges value types of alternatives (ifelse branches, n-ary min/max arguments).
fn join_numeric(op: &'static str, a: ValueType, b: ValueType) -> Result<ValueType, TypeRule> {
    use ValueType::*;
    match (a, b) {
        _ if a == b => Ok(if a == Bool && op != "ifelse" {
            Double
        } else {
            a
        }),
        (Int, Double) | (Double, Int) => Ok(Double),
        (String, _) | (_, String) if op == "ifelse" => Ok(String),
        _ => Err(TypeRule::ValueTypes {
            op,
            left: a.name(),
            right: b.name(),
        }),
    }
}

/// Infers `(data type, value type)` of a hop from its op and its inputs' types. Shapes are
/// checked separately (see [`crate::hops::size`]). Errors are messages for user errors.
pub(crate) fn infer_type(op: &OpKind, inputs: &[Ty]) -> Result<Ty, TypeRule> {
    if !op.arity_ok(inputs.len()) {
        return Err(TypeRule::Arity {
            op: op.display_name(),
            expected: arity_text(op),
            got: inputs.len(),
        });
    }
    let is_matrix = |i: usize| inputs[i].0 == DataType::Matrix;
    let need_scalar = |from: usize, what: &str| -> Result<(), TypeRule> {
        for (i, t) in inputs.iter().enumerate().skip(from) {
            if t.0 != DataType::Scalar {
                return Err(TypeRule::NeedScalar {
                    what: what.to_string(),
                    input: i + 1,
                });
            }
        }
        Ok(())
    };
    let need_matrix = |i: usize, what: &str| -> Result<(), TypeRule> {
        if is_matrix(i) {
            Ok(())
        } else if inputs[i].0 == DataType::Frame {
            Err(TypeRule::FrameForMatrix {
                what: what.to_string(),
            })
        } else {
            Err(TypeRule::NeedMatrix {
                what: what.to_string(),
            })
        }
    };
    let need_frame = |i: usize, what: &str| -> Result<(), TypeRule> {
        if inputs[i].0 == DataType::Frame {
            Ok(())
        } else {
            Err(TypeRule::NeedFrame {
                what: what.to_string(),
                input: i + 1,
            })
        }
    };
    // Frames go only where lafuse has operations on them; elsewhere they are a type error of
    // the script, not a failure when it runs.
    let takes_frames = matches!(
        op,
        OpKind::TransientWrite { .. }
            | OpKind::Index
            | OpKind::Cast(CastOp::AsMatrix | CastOp::AsFrame | CastOp::AsScalar)
            | OpKind::Meta(_)
            | OpKind::Print
            | OpKind::ToString
            | OpKind::TransformEncode { .. }
            | OpKind::TransformApply
            | OpKind::TransformDecode
            | OpKind::Colnames
            | OpKind::ListNew { .. }
            | OpKind::ListAppend
            | OpKind::ListSet
            | OpKind::Lineage
    );
    if !takes_frames && inputs.iter().any(|t| t.0 == DataType::Frame) {
        // SystemDS writes, binds and updates frames; lafuse does not yet.
        let systemds_has_it = match op {
            OpKind::PersistentWrite { .. } => Some("write"),
            OpKind::Nary(NaryOp::Cbind) => Some("cbind"),
            OpKind::Nary(NaryOp::Rbind) => Some("rbind"),
            OpKind::LeftIndex => Some("left indexing"),
            _ => None,
        };
        if let Some(what) = systemds_has_it {
            return Err(TypeRule::FrameUnsupported { what });
        }
        return Err(TypeRule::FrameOperand {
            op: match op {
                OpKind::Binary(b) => format!("'{}'", b.name()),
                _ => op.display_name(),
            },
        });
    }
    match op {
        OpKind::Literal(l) => Ok(scalar(l.value_type())),
        OpKind::TransientRead { .. } => Err(TypeRule::TransientRead),
        OpKind::TransientWrite { .. } => Ok(inputs[0]),
        OpKind::PersistentRead { .. } => {
            need_scalar(0, "read")?;
            Ok(MATRIX)
        }
        OpKind::PersistentWrite { .. } => {
            need_scalar(1, "write")?;
            Ok(inputs[0])
        }
        OpKind::DataGen(DataGenOp::Time) => Ok(scalar(ValueType::Int)),
        OpKind::DataGen(g) => {
            need_scalar(0, g.name())?;
            Ok(MATRIX)
        }
        OpKind::Unary(u) => {
            if is_matrix(0) {
                Ok(MATRIX)
            } else {
                Ok(scalar(scalar_unary_type(*u, inputs[0].1)?))
            }
        }
        OpKind::Binary(b) => {
            let (a, c) = (inputs[0], inputs[1]);
            if a.0 == DataType::Matrix || c.0 == DataType::Matrix {
                for t in [a, c] {
                    if t.0 == DataType::Scalar && t.1 == ValueType::String {
                        return Err(TypeRule::MatrixAndString { op: b.name() });
                    }
                }
                Ok(MATRIX)
            } else {
                Ok(scalar(scalar_binary_type(*b, a.1, c.1)?))
            }
        }
        OpKind::Ternary(TernaryOp::IfElse) => {
            if inputs.iter().any(|t| t.0 == DataType::Matrix) {
                if inputs.iter().any(|t| t.1 == ValueType::String) {
                    return Err(TypeRule::StringWithMatrix { op: "ifelse" });
                }
                Ok(MATRIX)
            } else {
                Ok(scalar(join_numeric("ifelse", inputs[1].1, inputs[2].1)?))
            }
        }
        OpKind::Ternary(TernaryOp::Replace) => {
            need_matrix(0, "replace")?;
            need_scalar(1, "replace")?;
            Ok(MATRIX)
        }
        OpKind::AggUnary { op, dir } => {
            if !op.is_hop_aggregate() {
                return Err(TypeRule::NotAnAggregation { op: op.to_string() });
            }
            need_matrix(0, "aggregation")?;
            Ok(if *dir == Direction::Full {
                scalar(ValueType::Double)
            } else {
                MATRIX
            })
        }
        OpKind::Stat(s) if s.is_distribution() => {
            for i in 0..inputs.len() {
                need_scalar(i, s.name())?;
            }
            Ok(scalar(ValueType::Double))
        }
        OpKind::Stat(s) => {
            let n = inputs.len();
            // The data (and weights) are matrices; `k` and `p` scalars, `p` also a column.
            let matrices = match s {
                StatOp::Quantile | StatOp::WeightedQuantile | StatOp::Moment => n - 1,
                StatOp::WeightedMoment => 2,
                _ => n,
            };
            for i in 0..matrices {
                need_matrix(i, s.name())?;
            }
            if matches!(s, StatOp::Moment | StatOp::WeightedMoment) {
                need_scalar(n - 1, s.name())?;
            }
            Ok(if s.matrix_result(is_matrix(n - 1)) {
                MATRIX
            } else {
                scalar(ValueType::Double)
            })
        }
        OpKind::Dnn(op) => {
            for i in 0..op.matrix_inputs() {
                need_matrix(i, op.name())?;
            }
            for i in op.matrix_inputs()..op.arity() {
                need_scalar(i, op.name())?;
            }
            Ok(MATRIX)
        }
        OpKind::LinAlg(op) => {
            need_matrix(0, op.name())?;
            Ok(if matches!(op, LinAlgOp::Det | LinAlgOp::Trace) {
                scalar(ValueType::Double)
            } else {
                MATRIX
            })
        }
        OpKind::TransformEncode { output } => {
            need_frame(0, "transformencode")?;
            need_scalar(1, "transformencode")?;
            Ok(if *output == 0 {
                MATRIX
            } else {
                (DataType::Frame, ValueType::String)
            })
        }
        OpKind::Colnames => {
            need_frame(0, "colnames")?;
            Ok((DataType::Frame, ValueType::String))
        }
        // `[target, spec, meta]`: a frame (apply) or a matrix (decode), a spec, a meta frame.
        OpKind::TransformApply | OpKind::TransformDecode => {
            let apply = *op == OpKind::TransformApply;
            let what = if apply {
                "transformapply"
            } else {
                "transformdecode"
            };
            if apply {
                need_frame(0, what)?;
            } else {
                need_matrix(0, what)?;
            }
            if inputs[1].0 != DataType::Scalar {
                return Err(TypeRule::NeedScalar {
                    what: what.to_string(),
                    input: 2,
                });
            }
            need_frame(2, what)?;
            Ok(if apply {
                MATRIX
            } else {
                (DataType::Frame, ValueType::String)
            })
        }
        OpKind::Decompose { op, output } => {
            need_matrix(0, op.name())?;
            if usize::from(*output) >= op.outputs() {
                return Err(TypeRule::Arity {
                    op: op.name().to_string(),
                    expected: format!("a result index below {}", op.outputs()),
                    got: usize::from(*output),
                });
            }
            Ok(MATRIX)
        }
        OpKind::MatMul | OpKind::Solve => {
            need_matrix(0, op.display_name().as_str())?;
            need_matrix(1, op.display_name().as_str())?;
            Ok(MATRIX)
        }
        OpKind::Reorg(r) => {
            need_matrix(0, r.name())?;
            if *r == ReorgOp::Reshape {
                need_scalar(1, "reshape")?;
            }
            Ok(MATRIX)
        }
        OpKind::Index => {
            need_scalar(1, "indexing")?;
            if inputs[0].0 == DataType::Frame {
                return Ok(inputs[0]);
            }
            need_matrix(0, "indexing")?;
            Ok(MATRIX)
        }
        OpKind::LeftIndex => {
            need_matrix(0, "left indexing")?;
            if inputs[1].1 == ValueType::String {
                return Err(TypeRule::LeftIndexString);
            }
            need_scalar(2, "left indexing")?;
            Ok(MATRIX)
        }
        // SystemDS binds the matrices of a list given alone (nested lists flattened).
        OpKind::Nary(bind @ (NaryOp::Cbind | NaryOp::Rbind)) if inputs.len() == 1 => {
            if inputs[0].0 != DataType::List {
                return Err(TypeRule::NeedList {
                    what: format!("{} of one argument", bind.name()),
                });
            }
            Ok(MATRIX)
        }
        OpKind::Nary(NaryOp::Cbind | NaryOp::Rbind) => {
            for i in 0..inputs.len() {
                need_matrix(i, op.display_name().as_str())?;
            }
            Ok(MATRIX)
        }
        OpKind::Nary(n @ (NaryOp::Min | NaryOp::Max)) => {
            if inputs.iter().any(|t| t.0 == DataType::Matrix) {
                if inputs.iter().any(|t| t.1 == ValueType::String) {
                    return Err(TypeRule::StringWithMatrix { op: n.name() });
                }
                return Ok(MATRIX);
            }
            let mut vt = inputs[0].1;
            for t in &inputs[1..] {
                vt = join_numeric(n.name(), vt, t.1)?;
                if vt == ValueType::String {
                    return Err(TypeRule::ValueType {
                        op: n.name(),
                        value_type: "string",
                    });
                }
            }
            Ok(scalar(vt))
        }
        // An element taken from a list is typed as SystemDS types a 1x1 matrix's cell: its
        // value type is known only at run time, where the instruction keeps the element's own.
        OpKind::Cast(CastOp::AsScalar | CastOp::AsMatrix) if inputs[0].0 == DataType::List => {
            Ok(if *op == OpKind::Cast(CastOp::AsScalar) {
                scalar(inputs[0].1)
            } else {
                MATRIX
            })
        }
        // SystemDS's list is a column: `nrow` is its length, `ncol` 1.
        OpKind::Meta(_) if matches!(inputs[0].0, DataType::List | DataType::Frame) => {
            Ok(scalar(ValueType::Int))
        }
        OpKind::ListNew { .. } => Ok(list_of(inputs)),
        OpKind::ListRemove { .. } | OpKind::ListUnnest => {
            if inputs[0].0 != DataType::List {
                return Err(TypeRule::NeedList {
                    what: op.display_name(),
                });
            }
            if *op != OpKind::ListUnnest && inputs[1].0 != DataType::Scalar {
                return Err(TypeRule::NeedScalar {
                    what: op.display_name(),
                    input: 2,
                });
            }
            Ok(inputs[0])
        }
        OpKind::ListIndex | OpKind::ListAppend | OpKind::ListSet => {
            if inputs[0].0 != DataType::List {
                return Err(TypeRule::NeedList {
                    what: op.display_name(),
                });
            }
            if *op != OpKind::ListAppend {
                for i in [1, 2] {
                    if inputs[i].0 != DataType::Scalar {
                        return Err(TypeRule::NeedScalar {
                            what: op.display_name(),
                            input: i + 1,
                        });
                    }
                }
            }
            Ok(match op {
                OpKind::ListIndex => inputs[0],
                OpKind::ListAppend => list_of(&[(DataType::Scalar, inputs[0].1), inputs[1]]),
                _ => list_of(&[(DataType::Scalar, inputs[0].1), inputs[3]]),
            })
        }
        OpKind::Cast(c) => match c {
            // A 1x1 frame's cell: its own type when it runs (a boolean, a string), else a
            // double, as SystemDS's.
            CastOp::AsScalar if inputs[0].0 == DataType::Frame => Ok(scalar(ValueType::Double)),
            CastOp::AsScalar => {
                need_matrix(0, "as.scalar")?;
                Ok(scalar(ValueType::Double))
            }
            CastOp::AsFrame => {
                // `as.frame(L[i])` takes a frame (or a matrix's) out of a list, a frame stays.
                if !matches!(inputs[0].0, DataType::List | DataType::Frame) {
                    need_matrix(0, "as.frame")?;
                }
                Ok((DataType::Frame, ValueType::String))
            }
            CastOp::AsMatrix => {
                if !is_matrix(0)
                    && inputs[0].0 != DataType::Frame
                    && inputs[0].1 == ValueType::String
                {
                    return Err(TypeRule::AsMatrixString);
                }
                Ok(MATRIX)
            }
            CastOp::AsDouble | CastOp::AsInt | CastOp::AsBool => {
                need_scalar(0, c.name())?;
                Ok(scalar(match c {
                    CastOp::AsDouble => ValueType::Double,
                    CastOp::AsInt => ValueType::Int,
                    _ => ValueType::Bool,
                }))
            }
        },
        OpKind::Cumulative(c) => {
            need_matrix(0, c.name())?;
            Ok(MATRIX)
        }
        OpKind::Param(p) => {
            match p {
                ParamOp::Table => {
                    if !is_matrix(0) && !is_matrix(1) {
                        return need_matrix(0, p.name()).map(|_| MATRIX);
                    }
                    need_scalar(3, p.name())?;
                }
                ParamOp::RemoveEmpty => {
                    need_matrix(0, p.name())?;
                    if inputs[1].0 != DataType::Scalar || inputs[2].0 != DataType::Scalar {
                        return Err(TypeRule::NeedScalar {
                            what: p.name().to_string(),
                            input: 2,
                        });
                    }
                    if inputs.len() == 4 {
                        need_matrix(3, p.name())?;
                    }
                }
                ParamOp::Aggregate => {
                    need_matrix(0, p.name())?;
                    need_matrix(1, p.name())?;
                    if inputs[2..5].iter().any(|t| t.0 != DataType::Scalar) {
                        return Err(TypeRule::NeedScalar {
                            what: p.name().to_string(),
                            input: 3,
                        });
                    }
                    if inputs.len() == 6 {
                        need_matrix(5, p.name())?;
                    }
                }
                ParamOp::Outer => {
                    need_matrix(0, p.name())?;
                    need_matrix(1, p.name())?;
                    need_scalar(2, p.name())?;
                }
                ParamOp::Order => {
                    // `by`: a column, or a matrix of columns.
                    need_matrix(0, p.name())?;
                    need_scalar(2, p.name())?;
                }
                ParamOp::RowIndexMax
                | ParamOp::RowIndexMin
                | ParamOp::Unique
                | ParamOp::LowerTri
                | ParamOp::UpperTri => {
                    need_matrix(0, p.name())?;
                    need_scalar(1, p.name())?;
                }
            }
            Ok(MATRIX)
        }
        OpKind::Meta(m) => {
            need_matrix(0, m.name())?;
            Ok(scalar(ValueType::Int))
        }
        OpKind::Print | OpKind::Stop | OpKind::Assert => {
            if *op == OpKind::Stop {
                need_scalar(0, "stop")?;
            }
            if *op == OpKind::Assert {
                need_scalar(0, "assert")?;
            }
            Ok(scalar(ValueType::String))
        }
        OpKind::ToString => {
            need_scalar(1, "toString")?;
            Ok(scalar(ValueType::String))
        }
        OpKind::Lineage => Ok(scalar(ValueType::String)),
    }
}

fn arity_text(op: &OpKind) -> String {
    match op.fixed_arity() {
        Some(n) => n.to_string(),
        None => match op {
            OpKind::Nary(NaryOp::Min | NaryOp::Max) => "at least 2".to_string(),
            _ => "at least 1".to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::ir::MetaOp;
    use super::*;
    use ValueType::*;

    #[test]
    fn arithmetic_rules_match_systemds() {
        assert_eq!(scalar_binary_type(BinaryOp::Add, Int, Int), Ok(Int));
        assert_eq!(scalar_binary_type(BinaryOp::Pow, Int, Int), Ok(Double));
        assert_eq!(scalar_binary_type(BinaryOp::Div, Int, Int), Ok(Double));
        assert_eq!(scalar_binary_type(BinaryOp::IntDiv, Int, Int), Ok(Int));
        assert_eq!(
            scalar_binary_type(BinaryOp::IntDiv, Double, Int),
            Ok(Double)
        );
        assert_eq!(scalar_binary_type(BinaryOp::Mod, Int, Int), Ok(Int));
        assert_eq!(scalar_binary_type(BinaryOp::Add, Bool, Bool), Ok(Double));
        assert!(scalar_binary_type(BinaryOp::Add, Bool, Int).is_err());
        assert!(scalar_binary_type(BinaryOp::Max, Bool, Double).is_err());
        assert_eq!(scalar_binary_type(BinaryOp::Eq, Bool, Int), Ok(Bool));
        assert_eq!(
            scalar_binary_type(BinaryOp::Add, String, Double),
            Ok(String)
        );
        assert!(scalar_binary_type(BinaryOp::Mul, Int, String).is_err());
        assert_eq!(scalar_binary_type(BinaryOp::Min, Int, Int), Ok(Int));
        assert_eq!(scalar_binary_type(BinaryOp::Min, Int, Double), Ok(Double));
        assert_eq!(scalar_binary_type(BinaryOp::Max, Bool, Bool), Ok(Double));
    }

    #[test]
    fn unary_rules_match_systemds() {
        assert_eq!(scalar_unary_type(UnaryOp::Neg, Int), Ok(Int));
        assert_eq!(scalar_unary_type(UnaryOp::Abs, Int), Ok(Int));
        assert_eq!(scalar_unary_type(UnaryOp::Round, Int), Ok(Double));
        assert_eq!(scalar_unary_type(UnaryOp::Sqrt, Int), Ok(Double));
        assert!(scalar_unary_type(UnaryOp::Neg, Bool).is_err());
        assert_eq!(scalar_unary_type(UnaryOp::Not, Bool), Ok(Bool));
    }

    #[test]
    fn ifelse_and_nary_join() {
        let s = |v| (DataType::Scalar, v);
        let t = infer_type(
            &OpKind::Ternary(TernaryOp::IfElse),
            &[s(Bool), s(Int), s(Int)],
        )
        .unwrap();
        assert_eq!(t, s(Int));
        let t = infer_type(
            &OpKind::Ternary(TernaryOp::IfElse),
            &[s(Bool), s(Int), s(Double)],
        )
        .unwrap();
        assert_eq!(t, s(Double));
        assert!(infer_type(
            &OpKind::Ternary(TernaryOp::IfElse),
            &[s(Bool), s(Bool), s(Int)]
        )
        .is_err());
        let t = infer_type(&OpKind::Nary(NaryOp::Min), &[s(Int), s(Int), s(Int)]).unwrap();
        assert_eq!(t, s(Int));
        let t = infer_type(&OpKind::Nary(NaryOp::Min), &[s(Int), s(Double), s(Int)]).unwrap();
        assert_eq!(t, s(Double));
    }

    /// Frames reach only the ops that take them: where SystemDS has the op (binding,
    /// updating) lafuse's lack of it is `unsupported`, elsewhere it is the script's type error.
    #[test]
    fn frames_reach_only_the_ops_that_take_them() {
        let frame = (DataType::Frame, String);
        let s = (DataType::Scalar, Int);
        let bind = infer_type(&OpKind::Nary(NaryOp::Rbind), &[frame, frame]);
        assert_eq!(bind, Err(TypeRule::FrameUnsupported { what: "rbind" }));
        let cause =
            crate::error::CompileCause::Dag(crate::error::DagError::Type(bind.unwrap_err()));
        assert_eq!(cause.fault(), crate::Fault::Unsupported);
        let add = infer_type(&OpKind::Binary(BinaryOp::Add), &[frame, s]);
        assert!(matches!(add, Err(TypeRule::FrameOperand { .. })));
        let cause = crate::error::CompileCause::Dag(crate::error::DagError::Type(add.unwrap_err()));
        assert_eq!(cause.fault(), crate::Fault::User);
        assert_eq!(infer_type(&OpKind::Index, &[frame, s, s, s, s]), Ok(frame));
        assert_eq!(
            infer_type(&OpKind::Meta(MetaOp::Nrow), &[frame]),
            Ok(scalar(Int))
        );
        assert_eq!(
            infer_type(&OpKind::Cast(CastOp::AsMatrix), &[frame]),
            Ok(MATRIX)
        );
    }

    #[test]
    fn arity_is_checked() {
        let s = (DataType::Scalar, Int);
        assert!(infer_type(&OpKind::Binary(BinaryOp::Add), &[s]).is_err());
        assert!(infer_type(&OpKind::Index, &[MATRIX, s, s, s]).is_err());
    }
}
