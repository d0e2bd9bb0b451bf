//! lafuse core: what every layer shares and nothing else. The operation vocabulary with its
//! exact scalar semantics ([`ops`]), `exp`/`log`/`sigmoid` by fdlibm's methods ([`math`]), and
//! the fault classes of errors ([`Fault`]).
//!
//! Architecture invariant: this crate depends on no other lafuse crate; the compiler and the
//! runtime use its enums as their own, so an operator means the same thing, to the bit, when
//! it is folded, executed unfused or generated.

pub mod fault;
pub mod math;
pub mod matrix_ops;
pub mod ops;

pub use fault::Fault;
pub use matrix_ops::{DecompOp, DnnOp, LinAlgOp, StatOp};
pub use ops::{AggOp, BinaryOp, Direction, UnaryOp};
