//! The HOP IR: one DAG of high-level operators per basic block, built from the AST with the
//! actual sizes of the block's inputs (lafuse compiles a block just before it first runs), plus
//! rewrites, size and sparsity propagation, a builder API for embedders, JSON import/export,
//! linearization and explain output.
//!
//! Pipeline: [`build_block_dag`] (or [`DagBuilder`], or [`HopDag::from_json`]) →
//! [`rewrite::optimize`] (constant folding, algebraic simplification, CSE; verifier between
//! passes in debug builds) → [`linearize`](fn@linearize) → execution. [`size::propagate_sizes`] can be re-run
//! after any change; [`verify::verify`] checks every invariant.
//!
//! Architecture invariant: hops live in an arena indexed by [`HopId`]; every op's inputs are
//! ordered as documented on [`OpKind`]; the same script and inputs give the same DAG, the same
//! explain bytes and the same [`HopDag::structural_hash`].
//!
//! # DML scalar typing (verified against Apache SystemDS 3.4.0)
//!
//! Each rule was checked by running `print(e)` (and, for errors, compiling `e`) on SystemDS.
//! `int` is a 64-bit integer with wrapping arithmetic; `double` is IEEE `f64`.
//!
//! | expression | result | example (SystemDS output) |
//! |---|---|---|
//! | literal without `.`/exponent | int | `7` |
//! | literal with `.` or exponent | double | `1e3` → `1000.0` |
//! | int `+ - *` int | int (wraps) | `5+2` → `7`; `9223372036854775807 + 1` → `-9223372036854775808` |
//! | int `/` int | double | `7/7` → `1.0` |
//! | int `^` int | double | `2^3` → `8.0` |
//! | int `%/%` int | int, truncated toward zero | `7 %/% 2` → `3`; `-7 %/% 2` → `-3`; `5 %/% 0` → runtime error |
//! | int `%%` int | int, sign of the dividend (Java `%`) | `-7 %% 2` → `-1`; `7 %% -2` → `1`; `5 %% 0` → `0` |
//! | double `%/%`, `%%` | double: `trunc(a/b)`, `fmod` | `7.5 %/% 2` → `3.0`; `5.0 %/% 0` → `Infinity`; `5.0 %% 0` → `NaN` |
//! | int with double (any arithmetic) | double | `5.0+2` → `7.0`; `nrow(X) + 0.5` → `3.5` |
//! | bool `+ - * / ^` bool, `min`/`max` of bools | double | `TRUE + TRUE` → `2.0`; `max(TRUE, FALSE)` → `1.0` |
//! | bool with int or double in arithmetic/`min`/`max` | compile error | `TRUE + 1`, `TRUE * 3`, `min(3, TRUE)` |
//! | `-` int / `-` double / `-` bool | int / double / error | `-5` → `-5`; `-TRUE` → error |
//! | comparisons (any numbers/bools, string vs string) | bool | `TRUE == 1` → `TRUE`; `3 == 3.0` → `TRUE`; `"a" < "b"` → `TRUE` |
//! | `& \| !` | bool | `TRUE & FALSE` → `FALSE` |
//! | string `+` anything, anything `+` string | string (concatenation) | `"a" + 1` → `a1`; `5 + 3 + "x"` → `8x`; `"x" + 5 + 3` → `x53` |
//! | string with other arithmetic | error (SystemDS: runtime error) | `2 * "a"` |
//! | `abs(int)` | int | `abs(-3)` → `3` |
//! | `round floor ceil sign sqrt exp log sin ...` of int | double | `round(3)` → `3.0`; `sign(-3)` → `-1.0` |
//! | `round` | half up (Java `Math.round`) | `round(2.5)` → `3.0`; `round(-2.5)` → `-2.0` |
//! | numeric unary functions of bool | error | `abs(TRUE)` |
//! | `min`/`max` of ints (2 or more) | int; with a double: double | `min(2, 3, 1)` → `1`; `min(2, 3.0, 1)` → `1.0` |
//! | `ifelse(c, a, b)` scalars | a's type if equal; int with double → double; bool with number → error | `ifelse(TRUE, 1, 2.5)` → `1.0` |
//! | `nrow ncol length` | int | `nrow(X)` → `3` |
//! | `sum mean ... as.scalar` | double | `sum(X)`, `as.scalar(X[1,1])` |
//! | `as.integer(x)` | int, truncated, saturating | `as.integer(3.7)` → `3`; `as.integer(-3.7)` → `-3`; `as.integer(1e20)` → `9223372036854775807` |
//! | `as.double`, `as.logical` | double, bool (numbers: `!= 0`) | `as.logical(0.5)` → `TRUE` |
//! | `time()` | int | |
//!
//! Deliberate difference: SystemDS 3.4.0 evaluates `&`, `|` and `!` on int or double operands
//! as if every such operand were FALSE (`2 & 1` → `FALSE`, `!1` → `TRUE`); lafuse uses the
//! evident meaning `x != 0`. Matrices always have value type double; arithmetic with matrices
//! gives matrices. Broadcasting follows SystemDS: the right operand may be a 1×1 matrix, a row vector
//! `1×n` or column vector `m×1` of the left's shape, or a scalar; nothing else.

pub mod builder;
pub mod construct;
pub mod eval;
pub mod explain;
pub mod ir;
pub mod json;
pub mod linearize;
pub mod rewrite;
pub mod size;
pub mod types;
pub mod verify;

pub use builder::DagBuilder;
pub use construct::{
    build_block_dag, build_expr_dag, BlockInputs, InputMeta, ScriptArgs, EXPR_RESULT,
};
pub use explain::{explain_dot, explain_json, explain_text};
pub use ir::{
    AggOp, BinaryOp, CastOp, CumulativeOp, DataGenOp, DataType, DecompOp, Direction, DnnOp, Hop,
    HopDag, HopId, LinAlgOp, Literal, MetaOp, NaryOp, OpKind, ParamOp, ReorgOp, StatOp, TernaryOp,
    UnaryOp, ValueType,
};
pub use linearize::linearize;
pub use rewrite::{optimize, Rewrite};
pub use size::propagate_sizes;
pub use verify::{verify, DagDefect, VerifyError};
