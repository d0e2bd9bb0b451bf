//! Compile-time evaluation of scalar operators with DML semantics (as SystemDS 3.4.0 computes
//! them), used by constant folding. The value of an operator on doubles is the core's
//! ([`BinaryOp::apply`], [`UnaryOp::apply`]), the very function the kernels compute; this
//! module adds DML's scalar typing (integers, booleans, strings) around it.
//!
//! Folding must never change a result, so anything whose runtime behaviour is an error or
//! depends on formatting that lives in the runtime (string concatenation with a double) is left
//! unfolded: those functions return `None`.

use super::ir::{BinaryOp, CastOp, Literal, UnaryOp, ValueType};
use super::types::{scalar_binary_type, scalar_unary_type};

/// The truth value of a scalar in `&`, `|`, `!`, `ifelse` (numbers: non-zero).
///
/// SystemDS 3.4.0 treats every int or double operand of `&`, `|` and `!` as FALSE (`2 & 1`
/// is FALSE, `!1` is TRUE), a defect we do not reproduce.
pub fn truth(l: &Literal) -> Option<bool> {
    match l {
        Literal::Bool(b) => Some(*b),
        Literal::Int(v) => Some(*v != 0),
        Literal::Double(v) => Some(*v != 0.0),
        Literal::Str(_) => None,
    }
}

/// Folds a binary operator on two literals, or `None` where folding is not exact or would
/// hide a runtime error.
pub fn fold_binary(op: BinaryOp, a: &Literal, b: &Literal) -> Option<Literal> {
    let vt = scalar_binary_type(op, a.value_type(), b.value_type()).ok()?;
    match vt {
        ValueType::String => {
            // Concatenation; doubles are formatted by the runtime (Java's Double.toString).
            let text = |l: &Literal| match l {
                Literal::Str(s) => Some(s.clone()),
                Literal::Int(v) => Some(v.to_string()),
                Literal::Bool(v) => Some(if *v { "TRUE" } else { "FALSE" }.to_string()),
                Literal::Double(_) => None,
            };
            Some(Literal::Str(text(a)? + &text(b)?))
        }
        ValueType::Int => {
            let (Literal::Int(x), Literal::Int(y)) = (a, b) else {
                return None;
            };
            let (x, y) = (*x, *y);
            Some(Literal::Int(match op {
                BinaryOp::Add => x.wrapping_add(y),
                BinaryOp::Sub => x.wrapping_sub(y),
                BinaryOp::Mul => x.wrapping_mul(y),
                // SystemDS computes integer %% on doubles and casts back (5 %% 0 == 0).
                BinaryOp::Mod => ((x as f64) % (y as f64)) as i64,
                // Integer division by zero is a runtime error: leave it to the runtime.
                BinaryOp::IntDiv if y == 0 => return None,
                BinaryOp::IntDiv => x.wrapping_div(y),
                BinaryOp::Min => x.min(y),
                BinaryOp::Max => x.max(y),
                // A NaN (an overflowing `bitwShiftL`) becomes 0, as the runtime's int cast.
                op if op.is_bitwise() => {
                    let r = op.apply_long(x, y)?;
                    if r.is_nan() {
                        0
                    } else {
                        r as i64
                    }
                }
                _ => return None,
            }))
        }
        ValueType::Bool => {
            if op.is_logical() {
                let (x, y) = (truth(a)?, truth(b)?);
                return Some(Literal::Bool(if op == BinaryOp::And {
                    x && y
                } else {
                    x || y
                }));
            }
            let ord = match (a, b) {
                (Literal::Int(x), Literal::Int(y)) => x.cmp(y),
                (Literal::Str(x), Literal::Str(y)) if x.is_ascii() && y.is_ascii() => x.cmp(y),
                (Literal::Str(_), _) | (_, Literal::Str(_)) => return None,
                _ => {
                    let r = op.apply(a.as_f64()?, b.as_f64()?);
                    return Some(Literal::Bool(r != 0.0));
                }
            };
            use std::cmp::Ordering::*;
            Some(Literal::Bool(match op {
                BinaryOp::Lt => ord == Less,
                BinaryOp::Le => ord != Greater,
                BinaryOp::Gt => ord == Greater,
                BinaryOp::Ge => ord != Less,
                BinaryOp::Eq => ord == Equal,
                BinaryOp::Ne => ord != Equal,
                _ => return None,
            }))
        }
        ValueType::Double => Some(Literal::Double(op.apply(a.as_f64()?, b.as_f64()?))),
    }
}

/// Folds a unary operator on a literal.
pub fn fold_unary(op: UnaryOp, a: &Literal) -> Option<Literal> {
    let vt = scalar_unary_type(op, a.value_type()).ok()?;
    match (vt, a) {
        (ValueType::Bool, _) => Some(Literal::Bool(!truth(a)?)),
        (ValueType::Int, Literal::Int(x)) => Some(Literal::Int(match op {
            UnaryOp::Neg => x.wrapping_neg(),
            UnaryOp::Abs => x.wrapping_abs(),
            _ => return None,
        })),
        (ValueType::Double, _) => Some(Literal::Double(op.apply(a.as_f64()?))),
        _ => None,
    }
}

/// Folds a scalar cast.
pub fn fold_cast(op: CastOp, a: &Literal) -> Option<Literal> {
    match op {
        CastOp::AsFrame => None,
        CastOp::AsInt => Some(Literal::Int(match a {
            Literal::Int(v) => *v,
            // Java's (long) cast: truncation, saturation, NaN → 0; Rust's `as` matches.
            Literal::Double(v) => *v as i64,
            Literal::Bool(b) => *b as i64,
            Literal::Str(s) => s.trim().parse().ok()?,
        })),
        CastOp::AsDouble => Some(Literal::Double(match a {
            Literal::Str(s) => s.trim().parse().ok().filter(|v: &f64| v.is_finite())?,
            other => other.as_f64()?,
        })),
        CastOp::AsBool => Some(Literal::Bool(match a {
            Literal::Str(s) if s.eq_ignore_ascii_case("true") => true,
            Literal::Str(s) if s.eq_ignore_ascii_case("false") => false,
            Literal::Str(_) => return None,
            other => truth(other)?,
        })),
        CastOp::AsScalar | CastOp::AsMatrix => None,
    }
}

/// Converts a literal to the value type of an `ifelse` result (int → double when joined).
pub fn convert(l: &Literal, vt: ValueType) -> Option<Literal> {
    if l.value_type() == vt {
        return Some(l.clone());
    }
    match (l, vt) {
        (Literal::Int(v), ValueType::Double) => Some(Literal::Double(*v as f64)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Literal::*;

    #[test]
    fn integer_arithmetic_matches_systemds() {
        assert_eq!(fold_binary(BinaryOp::Add, &Int(5), &Int(2)), Some(Int(7)));
        assert_eq!(
            fold_binary(BinaryOp::Pow, &Int(2), &Int(3)),
            Some(Double(8.0))
        );
        assert_eq!(
            fold_binary(BinaryOp::Div, &Int(7), &Int(7)),
            Some(Double(1.0))
        );
        assert_eq!(
            fold_binary(BinaryOp::IntDiv, &Int(7), &Int(2)),
            Some(Int(3))
        );
        assert_eq!(
            fold_binary(BinaryOp::IntDiv, &Int(-7), &Int(2)),
            Some(Int(-3))
        );
        assert_eq!(fold_binary(BinaryOp::Mod, &Int(-7), &Int(2)), Some(Int(-1)));
        assert_eq!(fold_binary(BinaryOp::Mod, &Int(7), &Int(-2)), Some(Int(1)));
        assert_eq!(fold_binary(BinaryOp::Mod, &Int(5), &Int(0)), Some(Int(0)));
        assert_eq!(fold_binary(BinaryOp::IntDiv, &Int(5), &Int(0)), None);
        assert_eq!(
            fold_binary(BinaryOp::Add, &Int(i64::MAX), &Int(1)),
            Some(Int(i64::MIN))
        );
        assert_eq!(
            fold_binary(BinaryOp::Mul, &Int(1_000_000), &Int(1_000_000)),
            Some(Int(1_000_000_000_000))
        );
    }

    #[test]
    fn double_arithmetic_matches_systemds() {
        assert_eq!(
            fold_binary(BinaryOp::IntDiv, &Double(7.5), &Int(2)),
            Some(Double(3.0))
        );
        assert_eq!(
            fold_binary(BinaryOp::Mod, &Double(7.5), &Int(2)),
            Some(Double(1.5))
        );
        assert_eq!(
            fold_binary(BinaryOp::IntDiv, &Double(5.0), &Int(0)),
            Some(Double(f64::INFINITY))
        );
        assert_eq!(
            fold_binary(BinaryOp::IntDiv, &Int(1), &Double(0.3)),
            Some(Double(3.0))
        );
        assert_eq!(
            fold_binary(BinaryOp::Add, &Bool(true), &Bool(true)),
            Some(Double(2.0))
        );
        assert_eq!(fold_binary(BinaryOp::Add, &Bool(true), &Int(1)), None);
        assert_eq!(
            fold_binary(BinaryOp::Max, &Int(3), &Double(4.0)),
            Some(Double(4.0))
        );
        assert_eq!(
            fold_binary(BinaryOp::Log, &Int(8), &Int(2)),
            Some(Double(3.0))
        );
    }

    #[test]
    fn comparisons_logic_and_strings() {
        assert_eq!(
            fold_binary(BinaryOp::Eq, &Bool(true), &Int(1)),
            Some(Bool(true))
        );
        assert_eq!(
            fold_binary(BinaryOp::Eq, &Int(3), &Double(3.0)),
            Some(Bool(true))
        );
        assert_eq!(
            fold_binary(BinaryOp::Lt, &Str("a".into()), &Str("b".into())),
            Some(Bool(true))
        );
        assert_eq!(
            fold_binary(BinaryOp::And, &Bool(true), &Bool(false)),
            Some(Bool(false))
        );
        assert_eq!(
            fold_binary(BinaryOp::Add, &Str("a".into()), &Int(1)),
            Some(Str("a1".into()))
        );
        assert_eq!(
            fold_binary(BinaryOp::Add, &Str("a".into()), &Bool(true)),
            Some(Str("aTRUE".into()))
        );
        assert_eq!(
            fold_binary(BinaryOp::Add, &Str("a".into()), &Double(1.5)),
            None
        );
    }

    #[test]
    fn unary_and_casts() {
        assert_eq!(fold_unary(UnaryOp::Neg, &Int(5)), Some(Int(-5)));
        assert_eq!(fold_unary(UnaryOp::Abs, &Int(-3)), Some(Int(3)));
        assert_eq!(fold_unary(UnaryOp::Round, &Double(2.5)), Some(Double(3.0)));
        assert_eq!(
            fold_unary(UnaryOp::Round, &Double(-2.5)),
            Some(Double(-2.0))
        );
        assert_eq!(fold_unary(UnaryOp::Round, &Int(3)), Some(Double(3.0)));
        assert_eq!(fold_unary(UnaryOp::Sign, &Int(-3)), Some(Double(-1.0)));
        assert_eq!(fold_unary(UnaryOp::Neg, &Bool(true)), None);
        assert_eq!(fold_unary(UnaryOp::Not, &Bool(true)), Some(Bool(false)));
        assert_eq!(fold_cast(CastOp::AsInt, &Double(3.7)), Some(Int(3)));
        assert_eq!(fold_cast(CastOp::AsInt, &Double(-3.7)), Some(Int(-3)));
        assert_eq!(fold_cast(CastOp::AsInt, &Double(1e20)), Some(Int(i64::MAX)));
        assert_eq!(fold_cast(CastOp::AsInt, &Str("12".into())), Some(Int(12)));
        assert_eq!(fold_cast(CastOp::AsBool, &Double(0.5)), Some(Bool(true)));
        assert_eq!(
            fold_cast(CastOp::AsBool, &Str("TRUE".into())),
            Some(Bool(true))
        );
        assert_eq!(fold_cast(CastOp::AsDouble, &Bool(true)), Some(Double(1.0)));
    }
}
