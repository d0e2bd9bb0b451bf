//! lafuse core: what every layer shares and nothing else. The operation vocabulary with its
//! exact scalar semantics ([`ops`]), `exp`/`log`/`sigmoid` by fdlibm's methods ([`math`]),
//! the fault classes of errors ([`Fault`]), and the sparsity below which a matrix is stored
//! sparse ([`SPARSITY_TURN_POINT`]).
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

/// Below this sparsity (non-zeros over cells) a matrix with more than one column is stored
/// sparse, as SystemDS does (`MatrixBlock.SPARSITY_TURN_POINT = 0.4`): the runtime's choice of
/// format, and the format the cost model assumes where it prices values as they are stored.
pub const SPARSITY_TURN_POINT: f64 = 0.4;
