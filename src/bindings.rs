//! What an embedder hands a prepared script or DAG ([`Bindings`]: named matrices and scalars)
//! and what it gets back ([`Outputs`]: named values it owns, with the execution's statistics).

use crate::error::{Binding, Error};
use crate::interop::MatrixView;
use crate::Stats;
use lafuse_runtime::exec::SymbolTable;
use lafuse_runtime::value::Value;
use lafuse_runtime::Matrix;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A scalar input: a double, an integer, a boolean or a string, as DML has them.
#[derive(Clone, Debug, PartialEq)]
pub struct Scalar(Value);

impl From<f64> for Scalar {
    fn from(v: f64) -> Scalar {
        Scalar(Value::Double(v))
    }
}
impl From<i64> for Scalar {
    fn from(v: i64) -> Scalar {
        Scalar(Value::Int(v))
    }
}
impl From<bool> for Scalar {
    fn from(v: bool) -> Scalar {
        Scalar(Value::Bool(v))
    }
}
impl From<&str> for Scalar {
    fn from(v: &str) -> Scalar {
        Scalar(Value::str(v))
    }
}
impl From<String> for Scalar {
    fn from(v: String) -> Scalar {
        Scalar(Value::str(v))
    }
}

/// The inputs of one execution, by name. Matrices may borrow the caller's memory for `'a`
/// ([`MatrixView`]: slices, `ndarray` and `sprs` values read in place); an execution never
/// keeps anything of them past its return.
#[derive(Debug, Default)]
pub struct Bindings<'a> {
    bound: BTreeMap<String, Bound<'a>>,
}

#[derive(Debug)]
enum Bound<'a> {
    /// A matrix that may borrow the caller's memory (kept here, so that it outlives every
    /// execution on these bindings).
    View(MatrixView<'a>),
    Value(Value),
}

impl Bound<'_> {
    fn value(&self) -> Value {
        match self {
            Bound::View(view) => view.value(),
            Bound::Value(value) => value.clone(),
        }
    }
}

impl<'a> Bindings<'a> {
    pub fn new() -> Bindings<'a> {
        Bindings::default()
    }

    /// Binds `name` to a matrix the execution takes over (no copy).
    pub fn matrix(&mut self, name: &str, matrix: Matrix) -> &mut Self {
        self.bind(name, Bound::Value(Value::Matrix(Arc::new(matrix))))
    }

    /// Binds `name` to a matrix shared with the caller (no copy; lafuse never writes it).
    pub fn shared_matrix(&mut self, name: &str, matrix: Arc<Matrix>) -> &mut Self {
        self.bind(name, Bound::Value(Value::Matrix(matrix)))
    }

    /// Binds `name` to a matrix that may read the caller's memory in place for `'a` (no copy:
    /// [`MatrixView::dense`], [`MatrixView::csr`], or an `ndarray`/`sprs` value converted
    /// with `MatrixView::try_from`).
    pub fn view(&mut self, name: &str, view: MatrixView<'a>) -> &mut Self {
        self.bind(name, Bound::View(view))
    }

    /// Binds `name` to a scalar.
    pub fn scalar(&mut self, name: &str, value: impl Into<Scalar>) -> &mut Self {
        self.bind(name, Bound::Value(value.into().0))
    }

    fn bind(&mut self, name: &str, bound: Bound<'a>) -> &mut Self {
        self.bound.insert(name.to_string(), bound);
        self
    }

    /// The symbol table an execution with the inputs `inputs` starts from: every input bound,
    /// nothing else.
    pub(crate) fn symbols_for(&self, inputs: &[String]) -> Result<SymbolTable, Error> {
        if let Some(name) = self.bound.keys().find(|n| !inputs.contains(n)) {
            return Err(Error::Binding(Binding::UnknownInput {
                name: name.clone(),
                inputs: inputs.to_vec(),
            }));
        }
        let mut vars = SymbolTable::with_capacity(inputs.len());
        for name in inputs {
            let bound = self
                .bound
                .get(name)
                .ok_or_else(|| Error::Binding(Binding::Unbound { name: name.clone() }))?;
            vars.insert(name.clone(), bound.value());
        }
        Ok(vars)
    }

    /// The value bound to `name`.
    pub(crate) fn get(&self, name: &str) -> Option<Value> {
        self.bound.get(name).map(Bound::value)
    }
}

/// A value as an execution returns it: never borrowing the caller's memory (an output that is
/// an input view, `Y = X`, is copied), so it outlives the bindings. Only a view's own matrix
/// can borrow (`Matrix::clone` copies borrowed data), so checking the top level (and a list's
/// elements) suffices.
pub(crate) fn detach(value: Value) -> Result<Value, Error> {
    match value {
        Value::Matrix(m) if m.is_borrowed() => {
            let owned = m
                .try_clone()
                .map_err(|error| Error::Runtime { error, span: None })?;
            Ok(Value::Matrix(Arc::new(owned)))
        }
        // A list may hold an input view's matrix (`list(X)`): its elements are detached too.
        Value::List(l) => {
            let mut list = Arc::unwrap_or_clone(l);
            list.items = list
                .items
                .into_iter()
                .map(detach)
                .collect::<Result<_, _>>()?;
            Ok(Value::List(Arc::new(list)))
        }
        other => Ok(other),
    }
}

/// The named outputs of one execution, owned by the caller, with its statistics.
#[derive(Debug)]
pub struct Outputs {
    values: BTreeMap<String, Value>,
    /// What the execution did: blocks compiled (none when every block's plan was reused),
    /// fused operators run, times. Fused-operator counts are the engine's over the
    /// execution's duration, so with several threads executing at once they include the
    /// others' operators; block counts and times are the execution's own.
    pub stats: Stats,
    /// What the script printed ([`crate::PreparedScript::execute`]; empty for
    /// `execute_to`, which wrote it out, and for DAGs, unless they print).
    pub printed: String,
}

impl Outputs {
    pub(crate) fn new(values: BTreeMap<String, Value>, stats: Stats) -> Outputs {
        Outputs {
            values,
            stats,
            printed: String::new(),
        }
    }

    /// The output `name`, matrix or scalar.
    pub fn value(&self, name: &str) -> Result<&Value, Error> {
        self.values
            .get(name)
            .ok_or_else(|| self.unknown_output(name))
    }

    fn unknown_output(&self, name: &str) -> Error {
        Error::Binding(Binding::UnknownOutput {
            name: name.to_string(),
            outputs: self.values.keys().cloned().collect(),
        })
    }

    /// The matrix output `name`.
    pub fn matrix(&self, name: &str) -> Result<&Matrix, Error> {
        match self.value(name)? {
            Value::Matrix(m) => Ok(m),
            other => Err(Error::Binding(Binding::OutputType {
                name: name.to_string(),
                expected: "matrix",
                found: other.type_name(),
            })),
        }
    }

    /// Takes the matrix output `name` out (without a copy where nothing else holds it).
    pub fn take_matrix(&mut self, name: &str) -> Result<Matrix, Error> {
        match self.values.remove(name) {
            Some(Value::Matrix(m)) => Ok(Arc::try_unwrap(m).unwrap_or_else(|m| (*m).clone())),
            Some(other) => {
                let found = other.type_name();
                self.values.insert(name.to_string(), other);
                Err(Error::Binding(Binding::OutputType {
                    name: name.to_string(),
                    expected: "matrix",
                    found,
                }))
            }
            None => Err(self.unknown_output(name)),
        }
    }

    /// The scalar output `name` as a double (integers and booleans converted as DML does; a
    /// 1x1 matrix is not a scalar: take it with [`Outputs::matrix`]).
    pub fn scalar(&self, name: &str) -> Result<f64, Error> {
        let value = self.value(name)?;
        if value.is_matrix() || matches!(value, Value::Str(_) | Value::List(_)) {
            return Err(Error::Binding(Binding::OutputType {
                name: name.to_string(),
                expected: "number",
                found: value.type_name(),
            }));
        }
        value
            .as_f64()
            .map_err(|error| Error::Runtime { error, span: None })
    }

    /// The names of the outputs.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }
}

/// `execute` of a prepared script or DAG: `execute_to` with what it prints kept in
/// [`Outputs::printed`].
pub(crate) fn capturing_prints(
    execute_to: impl FnOnce(&mut dyn std::io::Write) -> Result<Outputs, Error>,
) -> Result<Outputs, Error> {
    let mut printed = Vec::new();
    let mut outputs = execute_to(&mut printed)?;
    outputs.printed = String::from_utf8_lossy(&printed).into_owned();
    Ok(outputs)
}
