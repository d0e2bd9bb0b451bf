//! Runtime values: matrices and the scalar types of DML, as held in symbol tables and registers.

use crate::error::{Conversion, Result, RuntimeError};
use crate::frame::Frame;
use crate::matrix::Matrix;
use std::sync::Arc;

/// The type of a scalar value, as DML distinguishes them for printing and arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ScalarType {
    Double,
    Int,
    Bool,
    Str,
}

/// A value bound to a variable. Matrices are shared (`Arc`): assigning `Y = X` copies no data,
/// and kernels that update in place (left indexing) copy only when the matrix is shared.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Matrix(Arc<Matrix>),
    Double(f64),
    Int(i64),
    Bool(bool),
    Str(Arc<str>),
    /// A DML list (`list(...)`): shared like a matrix, its elements shared with it.
    List(Arc<List>),
    /// A DML frame (`as.frame(X)`, a transform's metadata), shared like a matrix.
    Frame(Arc<Frame>),
}

/// A DML list: its elements (matrices, scalars, lists) in order, and their names when the
/// list was made with named elements (`list(a=X, b=2)`; SystemDS names all or none).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct List {
    pub items: Vec<Value>,
    /// One name per item, or `None` for an unnamed list.
    pub names: Option<Vec<String>>,
}

impl List {
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The scalar type every item shares, if all items are scalars of one type (`None` for
    /// an empty list, or one holding matrices, lists or mixed types). Plans type an element
    /// taken from the list by it ([`crate::list`]).
    pub fn item_type(&self) -> Option<ScalarType> {
        let first = self.items.first()?.scalar_type()?;
        self.items
            .iter()
            .all(|v| v.scalar_type() == Some(first))
            .then_some(first)
    }

    /// The position of the item named `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.names.as_ref()?.iter().position(|n| n == name)
    }

    /// Items `lower..=upper` (1-based) as a list, with their names.
    pub fn slice(&self, lower: usize, upper: usize) -> List {
        List {
            items: self.items[lower - 1..upper].to_vec(),
            names: self.names.as_ref().map(|n| n[lower - 1..upper].to_vec()),
        }
    }
}

impl Value {
    pub fn matrix(m: Matrix) -> Value {
        Value::Matrix(Arc::new(m))
    }

    pub fn str(s: impl Into<Arc<str>>) -> Value {
        Value::Str(s.into())
    }

    pub fn is_matrix(&self) -> bool {
        matches!(self, Value::Matrix(_))
    }

    /// The scalar type, or `None` for a matrix.
    pub fn scalar_type(&self) -> Option<ScalarType> {
        match self {
            Value::Matrix(_) => None,
            Value::Double(_) => Some(ScalarType::Double),
            Value::Int(_) => Some(ScalarType::Int),
            Value::Bool(_) => Some(ScalarType::Bool),
            Value::Str(_) => Some(ScalarType::Str),
            Value::List(_) | Value::Frame(_) => None,
        }
    }

    pub fn is_list(&self) -> bool {
        matches!(self, Value::List(_))
    }

    pub fn is_frame(&self) -> bool {
        matches!(self, Value::Frame(_))
    }

    pub fn as_list(&self) -> Result<&Arc<List>> {
        match self {
            Value::List(l) => Ok(l),
            other => Err(RuntimeError::Conversion(Conversion::ExpectedList {
                found: other.type_name(),
            })),
        }
    }

    /// A short name of the value's type for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Matrix(_) => "matrix",
            Value::Double(_) => "double",
            Value::Int(_) => "integer",
            Value::Bool(_) => "boolean",
            Value::Str(_) => "string",
            Value::List(_) => "list",
            Value::Frame(_) => "frame",
        }
    }

    pub fn as_frame(&self) -> Result<&Arc<Frame>> {
        match self {
            Value::Frame(f) => Ok(f),
            other => Err(RuntimeError::Conversion(Conversion::ExpectedFrame {
                found: other.type_name(),
            })),
        }
    }

    pub fn as_matrix(&self) -> Result<&Arc<Matrix>> {
        match self {
            Value::Matrix(m) => Ok(m),
            other => Err(RuntimeError::Conversion(Conversion::ExpectedMatrix {
                found: other.type_name(),
            })),
        }
    }

    /// The numeric value of a scalar (booleans are 0/1; numeric strings are parsed, as DML
    /// casts them).
    pub fn as_f64(&self) -> Result<f64> {
        match self {
            Value::Double(v) => Ok(*v),
            Value::Int(v) => Ok(*v as f64),
            Value::Bool(b) => Ok(if *b { 1.0 } else { 0.0 }),
            Value::Str(s) => s.trim().parse::<f64>().map_err(|_| {
                RuntimeError::Conversion(Conversion::StringToNumber {
                    text: s.to_string(),
                })
            }),
            Value::Matrix(m) => Err(RuntimeError::Conversion(Conversion::ExpectedScalar {
                shape: m.shape(),
            })),
            Value::List(_) => Err(RuntimeError::Conversion(Conversion::ListAsScalar)),
            Value::Frame(_) => Err(RuntimeError::Conversion(Conversion::FrameAsScalar)),
        }
    }

    /// The value as an integer; doubles are truncated toward zero like Java's `(long)` cast
    /// (SystemDS's `as.integer`); NaN is an error.
    pub fn as_i64(&self) -> Result<i64> {
        match self {
            Value::Int(v) => Ok(*v),
            other => {
                let v = other.as_f64()?;
                if v.is_nan() {
                    return Err(RuntimeError::Conversion(Conversion::NanToInteger));
                }
                Ok(v as i64)
            }
        }
    }

    pub fn as_bool(&self) -> Result<bool> {
        match self {
            Value::Bool(b) => Ok(*b),
            Value::Str(s) => match s.as_ref() {
                "TRUE" | "true" => Ok(true),
                "FALSE" | "false" => Ok(false),
                _ => Err(RuntimeError::Conversion(Conversion::StringToBoolean {
                    text: s.to_string(),
                })),
            },
            other => Ok(other.as_f64()? != 0.0),
        }
    }

    /// Converts a scalar to the given scalar type (DML's implicit and explicit casts).
    pub fn cast_scalar(&self, to: ScalarType) -> Result<Value> {
        Ok(match to {
            ScalarType::Double => Value::Double(self.as_f64()?),
            ScalarType::Int => Value::Int(self.as_i64()?),
            ScalarType::Bool => Value::Bool(self.as_bool()?),
            ScalarType::Str => Value::str(self.display_string()),
        })
    }

    /// The text `print` shows for a scalar, in SystemDS's format (`2000.0`, `1.0E-7`, `TRUE`).
    pub fn display_string(&self) -> String {
        match self {
            Value::Double(v) => crate::format::format_double(*v),
            Value::Int(v) => v.to_string(),
            Value::Bool(b) => if *b { "TRUE" } else { "FALSE" }.to_string(),
            Value::Str(s) => s.to_string(),
            Value::Matrix(m) => crate::format::to_string_matrix(m, &Default::default()),
            Value::List(l) => crate::format::to_string_list(l, &Default::default()),
            Value::Frame(f) => crate::frame::to_string_frame(f, &Default::default()),
        }
    }
}
