//! `lafuse run|explain ... --input NAME=FILE --output NAME=FILE`: inputs bound from files (or,
//! for a DAG's scalar inputs, literal values) and outputs written to files or printed, for a
//! HOP DAG in JSON or a script run as a prepared script; and `lafuse recompute --output`.

use lafuse::crates::compiler::hops::construct::type_script_arg;
use lafuse::crates::compiler::hops::Literal;
use lafuse::crates::runtime::io::{self, CsvOptions, FileFormat};
use lafuse::crates::runtime::{format, value::Value};
use lafuse::{Bindings, HopDag, Matrix, Outputs};
use std::io::Write;
use std::path::{Path, PathBuf};

/// `NAME=VALUE` pairs of a flag, in order; a pair without `=` or with an empty name is refused.
pub fn pairs(values: &[String], flag: &str) -> Result<Vec<(String, String)>, String> {
    values
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) if !name.trim().is_empty() => {
                Ok((name.trim().to_string(), value.to_string()))
            }
            _ => Err(format!(
                "{flag} '{pair}' is not of the form NAME=FILE (e.g. {flag} X=data/X.csv)"
            )),
        })
        .collect()
}

/// Reads a HOP DAG in JSON (the serde form of `HopDag`).
pub fn read_dag(path: &Path) -> Result<HopDag, String> {
    let json = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the DAG '{}': {e}", path.display()))?;
    HopDag::from_json(&json).map_err(|e| format!("{}: {e}", path.display()))
}

/// The bindings `--input` gives: each NAME=FILE a matrix read from FILE (its format from its
/// `.mtd`, else its content); NAME=VALUE for the names in `scalars` a literal, typed as
/// `--nvargs` values are.
pub fn bindings(
    inputs: &[(String, String)],
    scalars: &[&str],
) -> Result<Bindings<'static>, String> {
    let mut b = Bindings::new();
    for (name, value) in inputs {
        if scalars.contains(&name.as_str()) {
            // Typed as `--nvargs` values are: as DML types the same literal.
            match type_script_arg(value) {
                Literal::Double(v) => b.scalar(name, v),
                Literal::Int(v) => b.scalar(name, v),
                Literal::Bool(v) => b.scalar(name, v),
                Literal::Str(v) => b.scalar(name, v),
            };
        } else {
            b.matrix(name, read(Path::new(value))?);
        }
    }
    Ok(b)
}

fn read(path: &Path) -> Result<Matrix, String> {
    io::read_matrix(path, None, None).map_err(|e| e.to_string())
}

/// Sets the transient reads of the inputs `inputs` names to the sizes their files state
/// (metadata or header; the file is read where neither states them), so that `explain` shows
/// the DAG as it would compile for that data.
pub fn size_inputs(dag: &mut HopDag, inputs: &[(String, String)]) -> Result<(), String> {
    for (name, file) in inputs {
        let path = Path::new(file);
        let (rows, cols, nnz) = match io::stated_dims(path) {
            Some(d) => (d.rows, d.cols, d.nnz),
            None => {
                let m = read(path)?;
                (m.rows(), m.cols(), Some(m.nnz()))
            }
        };
        let as_u64 = |n: usize| Some(n as u64);
        if !dag.size_input(name, as_u64(rows), as_u64(cols), nnz.and_then(as_u64)) {
            return Err(format!(
                "--input {name}: the DAG has no matrix input '{name}'"
            ));
        }
    }
    Ok(())
}

/// Writes the outputs `--output` names to their files (format by extension: `.mtx`/`.mm`
/// MatrixMarket, `.bin` lafuse binary, else CSV, each with its `.mtd`) and prints the others:
/// a scalar as `NAME = value`, a matrix as DML's `toString` shows it.
pub fn emit(
    outputs: &Outputs,
    writes: &[(String, String)],
    out: &mut dyn Write,
) -> Result<(), String> {
    for (name, file) in writes {
        write_value(outputs.value(name).map_err(|e| e.to_string())?, file)?;
    }
    let written = |n: &str| writes.iter().any(|(w, _)| w == n);
    let printing = |e: std::io::Error| format!("cannot print the outputs: {e}");
    for name in outputs.names().filter(|n| !written(n)) {
        match outputs.value(name).map_err(|e| e.to_string())? {
            Value::Matrix(m) => {
                let text = format::to_string_matrix(m, &format::ToStringOptions::default());
                write!(out, "{name} ({}x{}):\n{text}", m.rows(), m.cols()).map_err(printing)?;
            }
            scalar => writeln!(out, "{name} = {}", scalar.display_string()).map_err(printing)?,
        }
    }
    Ok(())
}

/// `lafuse recompute --output FILE`: writes `value` to FILE as `emit` writes an output, or
/// prints it as `print(toString(X))` would when FILE is `-`.
pub fn emit_value(value: &Value, file: &str, out: &mut dyn Write) -> Result<(), String> {
    if file != "-" {
        return write_value(value, file);
    }
    let text = match value {
        Value::Matrix(m) => format::to_string_matrix(m, &format::ToStringOptions::default()),
        scalar => scalar.display_string(),
    };
    writeln!(out, "{text}").map_err(|e| format!("cannot print the value: {e}"))
}

/// Writes a matrix to `file` in the format its extension names (with a .mtd), a scalar as
/// one line.
fn write_value(value: &Value, file: &str) -> Result<(), String> {
    match value {
        Value::Matrix(m) => {
            let path = PathBuf::from(file);
            io::write_matrix(m, &path, format_of(&path), &CsvOptions::default())
                .map_err(|e| e.to_string())
        }
        scalar => std::fs::write(file, scalar.display_string() + "\n")
            .map_err(|e| format!("cannot write '{file}': {e}")),
    }
}

fn format_of(path: &Path) -> FileFormat {
    match path.extension().and_then(|e| e.to_str()) {
        Some("mtx" | "mm") => FileFormat::MatrixMarket,
        Some("bin") => FileFormat::Binary,
        _ => FileFormat::Csv,
    }
}
