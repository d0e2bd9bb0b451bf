//! The operation vocabulary every layer shares: element-wise unary and binary operators,
//! aggregation functions and directions, with their DML names and exact scalar semantics
//! (SystemDS's Java semantics where they differ from Rust's `f64` methods).
//!
//! There is one implementation of each operator's value: the compiler folds constants with
//! [`BinaryOp::apply`]/[`UnaryOp::apply`], the unfused kernels and the reference evaluator
//! compute cells with them, and generated code is tested against them to the bit. Names
//! (`name()`) are stable: they are the serde names of the HOP DAG's JSON and what `explain`
//! prints.

use crate::math;

/// Declares an op enum whose variants have stable short names, used both as serde names and
/// by `name()`, plus an `ALL` list (for tests and for embedders enumerating ops) and
/// `from_name` (the name, or one of the aliases written `= "name" | "alias"`, which are not
/// serde names).
#[macro_export]
macro_rules! named_ops {
    ($(#[$meta:meta])* $name:ident {
        $($(#[$vmeta:meta])* $variant:ident = $text:literal $(| $alias:literal)*,)*
    }) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord,
            ::serde::Serialize, ::serde::Deserialize,
        )]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)*
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The stable short name (serde name, explain).
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }

            /// Inverse of `name()` (also accepting the aliases of a variant).
            pub fn from_name(name: &str) -> Option<$name> {
                match name {
                    $($text $(| $alias)* => Some($name::$variant),)*
                    _ => None,
                }
            }
        }

        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

#[inline(always)]
fn b2f(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

/// Java `Math.pow`: a NaN exponent gives NaN (C's `pow(1, NaN)` is 1), `x^0 == 1` for every `x`,
/// and `(±1)^±Inf` is NaN (C gives 1).
#[inline(always)]
pub fn java_pow(x: f64, y: f64) -> f64 {
    if y == 2.0 {
        // HotSpot's intrinsic computes x^2 as x*x; so do we (exact, and fast).
        x * x
    } else if y.is_nan() {
        f64::NAN
    } else if y == 0.0 {
        1.0
    } else if y.is_infinite() && x.abs() == 1.0 {
        f64::NAN
    } else {
        x.powf(y)
    }
}

/// SystemDS's `UtilFunctions.toInt`: `(int) (signum(x) * floor(|x| + 2^-53))`, Java's cast
/// saturating at the `int` range and taking NaN to 0 (as Rust's `as` does).
#[inline(always)]
pub fn java_to_int(x: f64) -> i32 {
    const DOUBLE_EPS: f64 = 1.0 / 9_007_199_254_740_992.0; // 2^-53
    if x == 0.0 || x.is_nan() {
        return 0;
    }
    (x.signum() * (x.abs() + DOUBLE_EPS).floor()) as i32
}

/// Java `Math.min` (NaN propagates; -0.0 < 0.0).
#[inline(always)]
pub fn java_min(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        a
    } else if b.is_nan() {
        b
    } else if a == 0.0 && b == 0.0 {
        if a.is_sign_negative() {
            a
        } else {
            b
        }
    } else if a <= b {
        a
    } else {
        b
    }
}

/// Java `Math.max` (NaN propagates; 0.0 > -0.0).
#[inline(always)]
pub fn java_max(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        a
    } else if b.is_nan() {
        b
    } else if a == 0.0 && b == 0.0 {
        if a.is_sign_positive() {
            a
        } else {
            b
        }
    } else if a >= b {
        a
    } else {
        b
    }
}

/// Java `Math.round` as SystemDS applies it to doubles: `floor(x + 1/2)` computed exactly,
/// returned through Java's `long`, so NaN becomes 0, values beyond the `long` range saturate,
/// and `-0.0` becomes `0.0` (checked against SystemDS: `round(NaN)` prints `0.0`).
#[inline(always)]
pub fn java_round(x: f64) -> f64 {
    // Java's `(double) Long.MAX_VALUE`, i.e. 2^63.
    const LONG_LIMIT: f64 = i64::MAX as f64;
    if x.is_nan() {
        return 0.0;
    }
    if x >= LONG_LIMIT {
        return LONG_LIMIT;
    }
    if x <= -LONG_LIMIT {
        return -LONG_LIMIT;
    }
    let f = x.floor();
    // x - floor(x) is exact for every finite double, so this is floor(x + 0.5) without the
    // rounding error of the addition (Java 7+ semantics: round(0.49999999999999994) == 0).
    // `+ 0.0` turns -0.0 into 0.0, as the round trip through `long` does.
    if x - f >= 0.5 {
        f + 1.0
    } else {
        f + 0.0
    }
}

named_ops! {
    /// Element-wise unary functions (on a scalar or every cell of a matrix).
    UnaryOp {
        /// Unary minus `-x`.
        Neg = "neg",
        /// Logical not `!x`: 1 when `x == 0`, else 0.
        Not = "!",
        Abs = "abs",
        Exp = "exp",
        /// Natural logarithm (`log(x)` with one argument).
        Log = "log",
        Sqrt = "sqrt",
        /// Java `Math.round` on doubles as SystemDS applies it (see [`java_round`]).
        Round = "round",
        Floor = "floor",
        Ceil = "ceil",
        /// Java `Math.signum` (±0 and NaN kept).
        Sign = "sign",
        Sin = "sin",
        Cos = "cos",
        Tan = "tan",
        Asin = "asin",
        Acos = "acos",
        Atan = "atan",
        Sinh = "sinh",
        Cosh = "cosh",
        Tanh = "tanh",
        /// `1 / (1 + exp(-x))`.
        Sigmoid = "sigmoid",
        /// `isNaN(x)` (DML also spells it `is.na` and `is.nan`): 1 where `x` is NaN, else 0.
        IsNaN = "isNaN" | "is.na" | "is.nan",
        /// `isInf(x)` (also `is.infinite`): 1 where `x` is +-Infinity, else 0.
        IsInf = "isInf" | "is.infinite",
    }
}

impl UnaryOp {
    /// Applies the operator to a scalar.
    #[inline(always)]
    pub fn apply(self, x: f64) -> f64 {
        match self {
            UnaryOp::Neg => -x,
            UnaryOp::Not => b2f(x == 0.0),
            UnaryOp::Abs => x.abs(),
            UnaryOp::Exp => math::exp(x),
            UnaryOp::Log => math::ln(x),
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Round => java_round(x),
            UnaryOp::Floor => x.floor(),
            UnaryOp::Ceil => x.ceil(),
            UnaryOp::Sign => {
                if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    x
                }
            }
            UnaryOp::Sin => x.sin(),
            UnaryOp::Cos => x.cos(),
            UnaryOp::Tan => x.tan(),
            UnaryOp::Asin => x.asin(),
            UnaryOp::Acos => x.acos(),
            UnaryOp::Atan => x.atan(),
            UnaryOp::Sinh => x.sinh(),
            UnaryOp::Cosh => x.cosh(),
            UnaryOp::Tanh => math::tanh(x),
            UnaryOp::Sigmoid => math::sigmoid(x),
            UnaryOp::IsNaN => b2f(x.is_nan()),
            UnaryOp::IsInf => b2f(x.is_infinite()),
        }
    }

    /// `f(0) == 0`: zeros stay zeros, so sparse inputs only touch their non-zeros.
    pub fn is_sparse_safe(self) -> bool {
        self.apply(0.0) == 0.0
    }
}

named_ops! {
    /// Element-wise binary operators (scalar-scalar, matrix-scalar, matrix-matrix with
    /// broadcasting of row/column vectors).
    BinaryOp {
        Add = "+",
        Sub = "-",
        Mul = "*",
        Div = "/",
        /// `^`, with Java `Math.pow` semantics.
        Pow = "^",
        /// `%%`: Java's `%` as SystemDS computes it: the result has the dividend's sign
        /// (`-7 %% 3 == -1`); NaN when `y == 0`.
        Mod = "%%",
        /// `%/%`: the quotient truncated toward zero (`-7 %/% 3 == -2`), as SystemDS.
        IntDiv = "%/%",
        Lt = "<",
        Le = "<=",
        Gt = ">",
        Ge = ">=",
        Eq = "==",
        Ne = "!=",
        /// `&`: `(a != 0) && (b != 0)`.
        And = "&",
        /// `|`: `(a != 0) || (b != 0)`.
        Or = "|",
        /// `min(a, b)` / `pmin(a, b)`: NaN propagates.
        Min = "min" | "pmin",
        /// `max(a, b)` / `pmax(a, b)`: NaN propagates.
        Max = "max" | "pmax",
        /// `log(x, base)`: inputs `[x, base]`.
        Log = "log",
        /// `xor(a, b)`: `(a != 0) != (b != 0)`.
        Xor = "xor",
        /// `bitwAnd(a, b)` on the operands as Java `int`s (see [`java_to_int`]).
        BitwAnd = "bitwAnd",
        /// `bitwOr(a, b)`, as `bitwAnd`.
        BitwOr = "bitwOr",
        /// `bitwXor(a, b)`, as `bitwAnd`.
        BitwXor = "bitwXor",
        /// `bitwShiftL(a, n)`: Java's `int` shift (the count taken modulo 32); a result of
        /// `Integer.MIN_VALUE` is NaN (SystemDS's overflow marker, R returns NA there).
        BitwShiftL = "bitwShiftL",
        /// `bitwShiftR(a, n)`: Java's arithmetic `int` shift `>>`.
        BitwShiftR = "bitwShiftR",
    }
}

impl BinaryOp {
    /// The operator an `outer(u, v, op)` call names, as SystemDS 3.4 reads the string: an
    /// operator's symbol (`"+"`, `"<="`, `"%%"`, `"&&"`, `"||"`, ...; SystemDS rejects the
    /// single `"&"` and `"|"`), or the name of its `OpOp2` constant in any case (`"min"`,
    /// `"MULT"`, `"pow"`, `"log"`, ...).
    pub fn from_outer_name(name: &str) -> Option<BinaryOp> {
        use BinaryOp::*;
        Some(match name {
            "+" => Add,
            "-" => Sub,
            "*" => Mul,
            "/" => Div,
            "^" => Pow,
            "%%" => Mod,
            "%/%" => IntDiv,
            "<" => Lt,
            "<=" => Le,
            ">" => Gt,
            ">=" => Ge,
            "==" => Eq,
            "!=" => Ne,
            "&&" => And,
            "||" => Or,
            _ => match name.to_ascii_uppercase().as_str() {
                "PLUS" => Add,
                "MINUS" => Sub,
                "MULT" => Mul,
                "DIV" => Div,
                "POW" => Pow,
                "MODULUS" => Mod,
                "INTDIV" => IntDiv,
                "LESS" => Lt,
                "LESSEQUAL" => Le,
                "GREATER" => Gt,
                "GREATEREQUAL" => Ge,
                "EQUAL" => Eq,
                "NOTEQUAL" => Ne,
                "AND" => And,
                "OR" => Or,
                "MIN" => Min,
                "MAX" => Max,
                "LOG" => Log,
                _ => return None,
            },
        })
    }

    /// Applies the operator to two scalars.
    #[inline(always)]
    pub fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Pow => java_pow(a, b),
            // SystemDS computes %% and %/% as Java does: `%` keeps the dividend's sign, the
            // quotient is truncated toward zero (checked: -7 %% 3 == -1, -7 %/% 3 == -2).
            BinaryOp::Mod => a % b,
            BinaryOp::IntDiv => (a / b).trunc(),
            BinaryOp::Lt => b2f(a < b),
            BinaryOp::Le => b2f(a <= b),
            BinaryOp::Gt => b2f(a > b),
            BinaryOp::Ge => b2f(a >= b),
            BinaryOp::Eq => b2f(a == b),
            BinaryOp::Ne => b2f(a != b),
            BinaryOp::And => b2f(a != 0.0 && b != 0.0),
            BinaryOp::Or => b2f(a != 0.0 || b != 0.0),
            BinaryOp::Min => java_min(a, b),
            BinaryOp::Max => java_max(a, b),
            BinaryOp::Log => math::ln(a) / math::ln(b),
            BinaryOp::Xor => b2f((a != 0.0) != (b != 0.0)),
            BinaryOp::BitwAnd => (java_to_int(a) & java_to_int(b)) as f64,
            BinaryOp::BitwOr => (java_to_int(a) | java_to_int(b)) as f64,
            BinaryOp::BitwXor => (java_to_int(a) ^ java_to_int(b)) as f64,
            BinaryOp::BitwShiftL => {
                // Java masks an int shift count to its low five bits, as `wrapping_shl` does.
                let r = java_to_int(a).wrapping_shl(java_to_int(b) as u32);
                if r == i32::MIN {
                    f64::NAN
                } else {
                    r as f64
                }
            }
            BinaryOp::BitwShiftR => java_to_int(a).wrapping_shr(java_to_int(b) as u32) as f64,
        }
    }

    /// Comparison operators (result type bool).
    pub fn is_comparison(self) -> bool {
        use BinaryOp::*;
        matches!(self, Lt | Le | Gt | Ge | Eq | Ne)
    }

    /// A bit operation on two integer scalars, as SystemDS's `execute(long, long)`: the
    /// operands cast to `int` by dropping high bits (Java's `(int)` of a `long`), except
    /// `bitwShiftR`, a `long` shift. `None` for the other operators.
    pub fn apply_long(self, a: i64, b: i64) -> Option<f64> {
        let (x, y) = (a as i32, b as i32);
        Some(match self {
            BinaryOp::BitwAnd => (x & y) as f64,
            BinaryOp::BitwOr => (x | y) as f64,
            BinaryOp::BitwXor => (x ^ y) as f64,
            BinaryOp::BitwShiftL => match x.wrapping_shl(y as u32) {
                i32::MIN => f64::NAN,
                r => r as f64,
            },
            BinaryOp::BitwShiftR => a.wrapping_shr(b as u32) as f64,
            _ => return None,
        })
    }

    /// The bit operations (`bitwAnd`, ..., `bitwShiftR`), whose operands are Java `int`s.
    pub fn is_bitwise(self) -> bool {
        use BinaryOp::*;
        matches!(self, BitwAnd | BitwOr | BitwXor | BitwShiftL | BitwShiftR)
    }

    /// `&` and `|`.
    pub fn is_logical(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or)
    }

    /// `a op b == b op a` for all values (used by CSE to canonicalise operand order).
    pub fn is_commutative(self) -> bool {
        use BinaryOp::*;
        matches!(
            self,
            Add | Mul | Eq | Ne | And | Or | Min | Max | Xor | BitwAnd | BitwOr | BitwXor
        )
    }

    /// `op(0, 0) == 0`: with both operands sparse, only cells where at least one is non-zero
    /// need computing (union of the patterns).
    pub fn is_sparse_safe_both(self) -> bool {
        self.apply(0.0, 0.0) == 0.0
    }

    /// `op(0, y) == 0` for every `y` that can occur: a sparse left operand drives iteration and
    /// the right operand is only read at its non-zeros. `right_all_finite` says whether the right
    /// operand is free of NaN/±Inf (for `*`, `0 * Inf` is NaN).
    pub fn is_sparse_safe_left(self, right_all_finite: bool) -> bool {
        match self {
            BinaryOp::Mul => right_all_finite,
            // `0 & y` is 0 for every y, NaN included (Java's `(int) NaN` is 0).
            BinaryOp::And | BinaryOp::BitwAnd => true,
            _ => false,
        }
    }

    /// `op(x, 0) == 0` for every `x` that can occur (mirror of [`BinaryOp::is_sparse_safe_left`]).
    pub fn is_sparse_safe_right(self, left_all_finite: bool) -> bool {
        self.is_sparse_safe_left(left_all_finite)
    }

    /// With a scalar `s` on the right (`X op s`): whether zeros of `X` stay zero.
    pub fn is_sparse_safe_scalar_right(self, s: f64) -> bool {
        self.apply(0.0, s) == 0.0
    }

    /// With a scalar `s` on the left (`s op X`): whether zeros of `X` stay zero.
    pub fn is_sparse_safe_scalar_left(self, s: f64) -> bool {
        self.apply(s, 0.0) == 0.0
    }
}

named_ops! {
    /// Aggregation functions.
    AggOp {
        /// Kahan-compensated sum.
        Sum = "sum",
        Mean = "mean",
        Min = "min",
        Max = "max",
        Prod = "prod",
        /// Sample variance (denominator n-1), as DML's `var`, `rowVars`, `colVars`.
        Var = "var",
        /// Kahan-compensated sum of squares. A kernel aggregate: no hop carries it.
        SumSq = "sumsq",
        /// Sample standard deviation. A kernel aggregate: no hop carries it (DML's `sd` is
        /// built as `sqrt(var(X))`).
        Sd = "sd",
    }
}

impl AggOp {
    /// Whether a hop's aggregation may be this function (the HOP IR builds the others from
    /// these: `sd` as `sqrt(var)`).
    pub fn is_hop_aggregate(self) -> bool {
        !matches!(self, AggOp::SumSq | AggOp::Sd)
    }
}

named_ops! {
    /// What an aggregation reduces: everything (scalar result), each row (m×1), each column (1×n).
    Direction {
        /// All cells: a 1x1 result.
        Full = "full",
        /// Each row: an m x 1 result (`rowSums`, ...).
        Row = "row",
        /// Each column: a 1 x n result (`colSums`, ...).
        Col = "col",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_roundtrip() {
        for &op in BinaryOp::ALL {
            assert_eq!(BinaryOp::from_name(op.name()), Some(op));
        }
        for &op in UnaryOp::ALL {
            assert_eq!(UnaryOp::from_name(op.name()), Some(op));
        }
        for &op in AggOp::ALL {
            assert_eq!(AggOp::from_name(op.name()), Some(op));
        }
        for &d in Direction::ALL {
            assert_eq!(Direction::from_name(d.name()), Some(d));
        }
        assert_eq!(BinaryOp::from_name("pmax"), Some(BinaryOp::Max));
        assert_eq!(BinaryOp::from_name("nope"), None);
    }

    #[test]
    fn java_modulus_and_integer_division() {
        use BinaryOp::*;
        // Values printed by SystemDS 3.4 for the same operations.
        assert_eq!(Mod.apply(5.0, 3.0), 2.0);
        assert_eq!(Mod.apply(-7.0, 3.0), -1.0);
        assert_eq!(Mod.apply(7.0, -3.0), 1.0);
        assert_eq!(Mod.apply(-7.5, 2.0), -1.5);
        assert!(Mod.apply(5.0, 0.0).is_nan());
        assert_eq!(IntDiv.apply(-7.0, 2.0), -3.0);
        assert_eq!(IntDiv.apply(-7.5, 2.0), -3.0);
        assert_eq!(IntDiv.apply(7.0, 2.0), 3.0);
        assert_eq!(IntDiv.apply(1.0, 0.0), f64::INFINITY);
        assert_eq!(Div.apply(-1.0, 0.0), f64::NEG_INFINITY);
        assert!(Div.apply(0.0, 0.0).is_nan());
    }

    #[test]
    fn java_pow_min_max_semantics() {
        use BinaryOp::*;
        assert_eq!(Pow.apply(f64::NAN, 0.0), 1.0);
        assert!(Pow.apply(1.0, f64::NAN).is_nan());
        assert!(Pow.apply(-1.0, f64::INFINITY).is_nan());
        assert_eq!(Pow.apply(3.0, 2.0), 9.0);
        assert_eq!(Pow.apply(2.0, -1.0), 0.5);
        assert!(Min.apply(f64::NAN, 1.0).is_nan());
        assert!(Max.apply(1.0, f64::NAN).is_nan());
        assert_eq!(Min.apply(2.0, -1.0), -1.0);
        assert!(Min.apply(0.0, -0.0).is_sign_negative());
        assert!(Max.apply(-0.0, 0.0).is_sign_positive());
        assert_eq!(Log.apply(8.0, 2.0), 3.0);
    }

    #[test]
    fn comparisons_and_logicals() {
        use BinaryOp::*;
        assert_eq!(Lt.apply(1.0, 2.0), 1.0);
        assert_eq!(Lt.apply(f64::NAN, 2.0), 0.0);
        assert_eq!(Ne.apply(f64::NAN, f64::NAN), 1.0);
        assert_eq!(Eq.apply(f64::NAN, f64::NAN), 0.0);
        assert_eq!(And.apply(f64::NAN, 2.0), 1.0);
        assert_eq!(And.apply(0.0, f64::NAN), 0.0);
        assert_eq!(Or.apply(0.0, 0.0), 0.0);
    }

    #[test]
    fn unary_semantics() {
        use UnaryOp::*;
        assert_eq!(Round.apply(2.5), 3.0);
        assert_eq!(Round.apply(-2.5), -2.0);
        assert_eq!(Round.apply(0.49999999999999994), 0.0);
        // Through Java's long: NaN is 0 (SystemDS prints `round(NaN)` as 0.0), infinities
        // saturate, and -0.0 loses its sign.
        assert_eq!(Round.apply(f64::NAN), 0.0);
        assert_eq!(Round.apply(f64::NEG_INFINITY), -(i64::MAX as f64));
        assert!(Round.apply(-0.0).is_sign_positive());
        assert_eq!(Sign.apply(-3.0), -1.0);
        assert!(Sign.apply(-0.0).is_sign_negative() && Sign.apply(-0.0) == 0.0);
        assert!(Sign.apply(f64::NAN).is_nan());
        assert_eq!(Not.apply(0.0), 1.0);
        assert_eq!(Not.apply(f64::NAN), 0.0);
        assert_eq!(Sigmoid.apply(0.0), 0.5);
        let safe: Vec<_> = UnaryOp::ALL.iter().filter(|o| o.is_sparse_safe()).collect();
        assert!(safe.contains(&&Abs) && safe.contains(&&Sqrt) && !safe.contains(&&Exp));
        assert!(!Cos.is_sparse_safe() && !Not.is_sparse_safe() && !Sigmoid.is_sparse_safe());
        // The sparse-safe functions are exactly these (the compiler's sparsity estimates and
        // the kernels' iteration both rely on it).
        assert_eq!(
            safe,
            [
                Neg, Abs, Sqrt, Round, Floor, Ceil, Sign, Sin, Tan, Asin, Atan, Sinh, Tanh, IsNaN,
                IsInf
            ]
            .iter()
            .collect::<Vec<_>>()
        );
    }

    #[test]
    fn predicates_and_bit_operations_as_systemds() {
        use BinaryOp::*;
        // Values printed by SystemDS 3.4 for the same calls.
        assert_eq!(UnaryOp::IsNaN.apply(f64::NAN), 1.0);
        assert_eq!(UnaryOp::IsNaN.apply(f64::INFINITY), 0.0);
        assert_eq!(UnaryOp::IsInf.apply(f64::NEG_INFINITY), 1.0);
        assert_eq!(UnaryOp::IsInf.apply(f64::NAN), 0.0);
        assert_eq!(UnaryOp::from_name("is.na"), Some(UnaryOp::IsNaN));
        assert_eq!(UnaryOp::from_name("is.infinite"), Some(UnaryOp::IsInf));
        assert_eq!(Xor.apply(2.5, 0.0), 1.0);
        assert_eq!(Xor.apply(1.0, 1.0), 0.0);
        assert_eq!(Xor.apply(f64::NAN, 0.0), 1.0);
        assert_eq!(BitwAnd.apply(12.0, 10.0), 8.0);
        assert_eq!(BitwOr.apply(12.0, 10.0), 14.0);
        assert_eq!(BitwXor.apply(12.0, 10.0), 6.0);
        assert_eq!(BitwAnd.apply(-1.5, 7.0), 7.0);
        assert_eq!(BitwAnd.apply(f64::NAN, 255.0), 0.0);
        assert_eq!(BitwAnd.apply(1e12, 255.0), 255.0);
        assert_eq!(BitwShiftL.apply(3.0, 2.0), 12.0);
        assert!(BitwShiftL.apply(1.0, 31.0).is_nan());
        assert_eq!(BitwShiftL.apply(1.0, 33.0), 2.0);
        assert_eq!(BitwShiftR.apply(-8.0, 1.0), -4.0);
        assert_eq!(BitwShiftR.apply(12.0, 2.0), 3.0);
        assert_eq!(java_to_int(-0.0), 0);
        assert_eq!(java_to_int(2.9999999999999996), 2);
        assert_eq!(java_to_int(-1e300), i32::MIN);
        assert!(BitwAnd.is_sparse_safe_left(false) && BitwShiftL.is_sparse_safe_both());
        assert!(!Xor.is_sparse_safe_left(true) && Xor.is_sparse_safe_both());
    }

    #[test]
    fn sparse_safety_queries() {
        use BinaryOp::*;
        assert!(Add.is_sparse_safe_both() && Mul.is_sparse_safe_both());
        assert!(!Div.is_sparse_safe_both() && !Eq.is_sparse_safe_both());
        assert!(Mul.is_sparse_safe_left(true) && !Mul.is_sparse_safe_left(false));
        assert!(!Add.is_sparse_safe_left(true));
        assert!(Div.is_sparse_safe_scalar_right(2.0) && !Div.is_sparse_safe_scalar_right(0.0));
        assert!(!Pow.is_sparse_safe_scalar_right(0.0) && Pow.is_sparse_safe_scalar_right(2.0));
    }
}
