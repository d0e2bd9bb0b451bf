//! DML frames at run time, in the subset lafuse has: a frame made from a matrix
//! (`as.frame(X)`), the string metadata frame of a transform encoding, their conversion back
//! to a matrix (`as.matrix(F)`), their shape and how `toString`/`print` show them. Frames are
//! immutable values shared like matrices.
//!
//! SystemDS types each column of `as.frame(X)` by the narrowest of BOOLEAN (0 and 1 only),
//! INT32, INT64, FP32 and FP64 that holds all its values (`FrameUtil.isType`), and that type
//! decides how a value is printed and spelled as a recode token (`true`, `3`, `2.5`). lafuse
//! types columns the same way but keeps every value as the double it was: SystemDS narrows an
//! FP32 column's values to `float` (`as.matrix(as.frame(0.1))` is `0.10000000149011612`
//! there), a loss of precision lafuse does not reproduce (tests/corpus/README.md).

use crate::error::{Conversion, Result, RuntimeError};
use crate::format::{format_double, CellFormat, ToStringOptions};
use crate::matrix::Matrix;
use crate::value::Value;
use std::sync::Arc;

/// A frame column's value type, by SystemDS's names (shown in the schema line of `toString`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ColumnType {
    Boolean,
    Int32,
    Int64,
    Fp32,
    Fp64,
    String,
}

impl ColumnType {
    /// SystemDS's name of the type.
    pub fn name(self) -> &'static str {
        match self {
            ColumnType::Boolean => "BOOLEAN",
            ColumnType::Int32 => "INT32",
            ColumnType::Int64 => "INT64",
            ColumnType::Fp32 => "FP32",
            ColumnType::Fp64 => "FP64",
            ColumnType::String => "STRING",
        }
    }

    /// The narrowest type at least `self` that holds `v`, as SystemDS's `FrameUtil.isType(v,
    /// min)` widens a column's type value by value (its cases fall through).
    fn widen_for(self, v: f64) -> ColumnType {
        use ColumnType::*;
        let fits_int = |lo: f64, hi: f64| v.fract() == 0.0 && (lo..=hi).contains(&v);
        match self {
            String => String,
            Boolean if v == 0.0 || v == 1.0 => Boolean,
            Boolean | Int32 if fits_int(i32::MIN as f64, i32::MAX as f64) => Int32,
            // Java's `(long) v == v` holds at 2^63 too: the cast saturates to Long.MAX_VALUE,
            // which compares as the double 2^63.
            Boolean | Int32 | Int64 if fits_int(-TWO_POW_63, TWO_POW_63) => Int64,
            Boolean | Int32 | Int64 | Fp32 if float_spells_the_same(v) => Fp32,
            _ => Fp64,
        }
    }
}

const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

/// Whether Java's `Float.toString((float) v)` equals `Double.toString(v)`, SystemDS's test for
/// an FP32 column (`FrameUtil.same`): the float's shortest digits and exponent are the
/// double's. (JDK 17 prints a few integers above 2^53 with more than the shortest digits;
/// those are typed INT64 before this test is reached.)
fn float_spells_the_same(v: f64) -> bool {
    if v.is_nan() {
        return true;
    }
    let f = v as f32;
    if f.is_infinite() != v.is_infinite() {
        return false;
    }
    if v.is_infinite() || v == 0.0 {
        return f as f64 == v;
    }
    format!("{f:e}") == format!("{v:e}")
}

/// One column of a frame.
#[derive(Clone, Debug)]
pub enum Column {
    /// Numbers of a numeric or boolean type (booleans as 0 and 1).
    Numbers { ty: ColumnType, values: Vec<f64> },
    /// Strings; `None` is a missing value (SystemDS's `null`).
    Strings(Vec<Option<Arc<str>>>),
}

/// Columns are equal when they hold the same cells: NaN equals NaN here (a frame's cells are
/// data, as recode tokens treat them: `NaN` is a token like any other).
impl PartialEq for Column {
    fn eq(&self, other: &Column) -> bool {
        match (self, other) {
            (Column::Numbers { ty: a, values: x }, Column::Numbers { ty: b, values: y }) => {
                a == b
                    && x.len() == y.len()
                    && x.iter()
                        .zip(y)
                        .all(|(u, v)| u == v || (u.is_nan() && v.is_nan()))
            }
            (Column::Strings(x), Column::Strings(y)) => x == y,
            _ => false,
        }
    }
}

impl Column {
    pub fn column_type(&self) -> ColumnType {
        match self {
            Column::Numbers { ty, .. } => *ty,
            Column::Strings(_) => ColumnType::String,
        }
    }

    fn len(&self) -> usize {
        match self {
            Column::Numbers { values, .. } => values.len(),
            Column::Strings(s) => s.len(),
        }
    }

    /// The value at `row` as SystemDS's `FrameBlock.getString` spells it (a recode token):
    /// `true`/`false`, an integer without a fraction, a double as Java prints it; `None` for
    /// a missing or empty string.
    pub fn token(&self, row: usize) -> Option<String> {
        match self {
            Column::Numbers { ty, values } => {
                let v = values[row];
                Some(match ty {
                    ColumnType::Boolean => (if v != 0.0 { "true" } else { "false" }).to_string(),
                    ColumnType::Int32 | ColumnType::Int64 => format!("{}", v as i64),
                    _ => format_double(v),
                })
            }
            Column::Strings(s) => s[row]
                .as_deref()
                .filter(|t| !t.is_empty())
                .map(str::to_string),
        }
    }

    /// The value at `row` as a double, as SystemDS's `UtilFunctions.objectToDouble`: a missing
    /// string is NaN, an empty one 0, `T`/`true` and `F`/`false` 1 and 0 (any case).
    pub fn number(&self, row: usize) -> Result<f64> {
        match self {
            Column::Numbers { values, .. } => Ok(values[row]),
            Column::Strings(s) => {
                let Some(text) = s[row].as_deref() else {
                    return Ok(f64::NAN);
                };
                if text.is_empty() {
                    return Ok(0.0);
                }
                if let Ok(v) = text.trim().parse::<f64>() {
                    return Ok(v);
                }
                match text.to_ascii_lowercase().as_str() {
                    "t" | "true" => Ok(1.0),
                    "f" | "false" => Ok(0.0),
                    _ => Err(RuntimeError::Conversion(Conversion::StringToNumber {
                        text: text.to_string(),
                    })),
                }
            }
        }
    }
}

/// A frame: typed columns of equal length, named `C1`, `C2`, ... (SystemDS's default names,
/// which `transformencode`'s spec may use).
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    rows: usize,
    columns: Vec<Column>,
}

impl Frame {
    /// A frame of these columns, named `C1`, `C2`, ... as SystemDS names them by default.
    ///
    /// # Panics
    /// If the columns differ in length from `rows` (an internal error of the caller).
    pub fn new(rows: usize, columns: Vec<Column>) -> Frame {
        assert!(columns.iter().all(|c| c.len() == rows));
        Frame { rows, columns }
    }

    /// `as.frame(X)`: one column per column of X, typed as SystemDS types them.
    pub fn from_matrix(m: &Matrix) -> Frame {
        let (rows, cols) = m.shape();
        let columns = (0..cols)
            .map(|j| {
                let values: Vec<f64> = (0..rows).map(|i| m.get(i, j)).collect();
                let ty = values
                    .iter()
                    .fold(ColumnType::Boolean, |ty, &v| ty.widen_for(v));
                Column::Numbers { ty, values }
            })
            .collect();
        Frame::new(rows, columns)
    }

    /// `as.matrix(F)`: every cell as a double ([`Column::number`]).
    pub fn to_matrix(&self) -> Result<Matrix> {
        let mut values = Vec::with_capacity(self.rows * self.columns.len());
        for i in 0..self.rows {
            for c in &self.columns {
                values.push(c.number(i)?);
            }
        }
        Matrix::from_dense_values(self.rows, self.columns.len(), values)
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.columns.len()
    }

    /// The column names: `C1`, `C2`, ...
    pub fn names(&self) -> Vec<String> {
        (1..=self.cols()).map(|j| format!("C{j}")).collect()
    }

    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// `colnames(F)`: one row of F's column names (strings).
    pub fn colnames(&self) -> Frame {
        let columns = self
            .names()
            .into_iter()
            .map(|n| Column::Strings(vec![Some(Arc::from(n))]))
            .collect();
        Frame::new(1, columns)
    }

    /// `F[rows, cols]` (0-based ranges within the frame). Its columns get the default names
    /// of their new positions, as SystemDS's do (lafuse's frames have no other names).
    pub fn slice(&self, rows: std::ops::Range<usize>, cols: std::ops::Range<usize>) -> Frame {
        let columns = self.columns[cols]
            .iter()
            .map(|c| match c {
                Column::Numbers { ty, values } => Column::Numbers {
                    ty: *ty,
                    values: values[rows.clone()].to_vec(),
                },
                Column::Strings(s) => Column::Strings(s[rows.clone()].to_vec()),
            })
            .collect();
        Frame::new(rows.len(), columns)
    }

    /// `as.scalar(F)` of a 1x1 frame, as SystemDS gives it: a boolean column's cell as a
    /// boolean, a string (a missing one as `null`), any other number as a double.
    pub fn scalar(&self) -> Result<Value> {
        if (self.rows, self.cols()) != (1, 1) {
            return Err(RuntimeError::Conversion(Conversion::ExpectedScalar {
                shape: (self.rows, self.cols()),
            }));
        }
        Ok(match &self.columns[0] {
            Column::Numbers {
                ty: ColumnType::Boolean,
                values,
            } => Value::Bool(values[0] != 0.0),
            Column::Numbers { values, .. } => Value::Double(values[0]),
            Column::Strings(s) => Value::str(s[0].as_deref().unwrap_or("null")),
        })
    }

    /// The bytes the frame's cells occupy (8 a number; a string's bytes and its pointer).
    pub fn bytes(&self) -> usize {
        self.columns
            .iter()
            .map(|c| match c {
                Column::Numbers { values, .. } => values.len() * 8,
                Column::Strings(s) => s
                    .iter()
                    .map(|t| 16 + t.as_ref().map_or(0, |t| t.len()))
                    .sum(),
            })
            .sum()
    }

    /// The position of the column named `name`.
    pub fn column_named(&self, name: &str) -> Option<usize> {
        let j: usize = name.strip_prefix('C')?.parse().ok()?;
        (1..=self.cols()).contains(&j).then(|| j - 1)
    }
}

/// `toString(F, ...)` (and `print(F)`) as SystemDS's `DataConverter.toString(FrameBlock, ...)`:
/// a `# FRAME: nrow = r, ncol = c` line, the column names and the schema each after `#`, then
/// the leading `rows` x `cols` corner. FP64 cells take the matrix format (`decimal`), other
/// numbers print as Java prints them, booleans as `TRUE`/`FALSE`, missing strings as `null`.
/// (`sparse=TRUE` is ignored for frames, as in SystemDS.)
pub fn to_string_frame(f: &Frame, opts: &ToStringOptions) -> String {
    let limit = |n: usize, k: i64| if k < 0 { n } else { n.min(k as usize) };
    let (rlen, clen) = (limit(f.rows, opts.rows), limit(f.cols(), opts.cols));
    let cell_format = CellFormat::new(opts.decimal);
    let (sep, linesep) = (opts.sep.as_str(), opts.linesep.as_str());
    let mut out = format!("# FRAME: nrow = {}, ncol = {}{linesep}", f.rows, f.cols());
    let header = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        out.push('#');
        out.push_str(sep);
        out.push_str(&cells.collect::<Vec<_>>().join(sep));
        out.push_str(linesep);
    };
    let names = f.names();
    header(&mut out, &mut names[..clen].iter().map(String::as_str));
    header(
        &mut out,
        &mut f.columns[..clen].iter().map(|c| c.column_type().name()),
    );
    for i in 0..rlen {
        let cells: Vec<String> = f.columns[..clen]
            .iter()
            .map(|c| match c {
                Column::Numbers { ty, values } => match ty {
                    ColumnType::Fp64 => cell_format.format(values[i]),
                    ColumnType::Boolean => {
                        (if values[i] != 0.0 { "TRUE" } else { "FALSE" }).to_string()
                    }
                    _ => c.token(i).unwrap_or_default(),
                },
                Column::Strings(s) => s[i].as_deref().unwrap_or("null").to_string(),
            })
            .collect();
        out.push_str(&cells.join(sep));
        out.push_str(linesep);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(rows: usize, cols: usize, v: &[f64]) -> Matrix {
        Matrix::from_dense_values(rows, cols, v.to_vec()).unwrap()
    }

    /// SystemDS 3.4 printed these schemas for `as.frame` of such columns.
    #[test]
    fn as_frame_types_columns_as_systemds() {
        let nan = f64::NAN;
        let cases: &[(&[f64], ColumnType)] = &[
            (&[1.0, 0.0, -0.0], ColumnType::Boolean),
            (&[1.0, 3.0], ColumnType::Int32),
            (&[16777217.0, 2.0], ColumnType::Int32),
            (&[3e9, 1.0], ColumnType::Int64),
            (&[0.1, 2.0], ColumnType::Fp32),
            (&[1.5, nan, 7.0], ColumnType::Fp32),
            (&[3.0, 1e-5], ColumnType::Fp32),
            (&[1e300, 5.0], ColumnType::Fp64),
            (&[1.0 / 3.0], ColumnType::Fp64),
            (&[], ColumnType::Boolean),
        ];
        for (values, ty) in cases {
            let f = Frame::from_matrix(&matrix(values.len(), 1, values));
            assert_eq!(f.columns()[0].column_type(), *ty, "{values:?}");
        }
    }

    #[test]
    fn tokens_spell_values_by_column_type() {
        let f = Frame::from_matrix(&matrix(2, 3, &[1.0, 3.0, 2.5, 0.0, -4.0, f64::NAN]));
        let tokens: Vec<_> = (0..3).map(|j| f.columns()[j].token(1)).collect();
        assert_eq!(
            tokens,
            [Some("false".into()), Some("-4".into()), Some("NaN".into())]
        );
    }

    #[test]
    fn to_string_matches_systemds_layout() {
        let f = Frame::from_matrix(&matrix(2, 3, &[1.0, 0.1, 1e300, 3.0, 2.0, 5.0]));
        let s = to_string_frame(&f, &ToStringOptions::default());
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "# FRAME: nrow = 2, ncol = 3");
        assert_eq!(lines[1], "# C1 C2 C3");
        assert_eq!(lines[2], "# INT32 FP32 FP64");
        assert_eq!(lines[4], "3 2.0 5.000");
    }

    #[test]
    fn strings_convert_to_numbers_as_systemds() {
        let col = Column::Strings(vec![
            None,
            Some("".into()),
            Some("T".into()),
            Some("2.5".into()),
        ]);
        let f = Frame::new(4, vec![col]);
        let m = f.to_matrix().unwrap();
        assert!(m.get(0, 0).is_nan());
        assert_eq!([m.get(1, 0), m.get(2, 0), m.get(3, 0)], [0.0, 1.0, 2.5]);
        let bad = Frame::new(1, vec![Column::Strings(vec![Some("x".into())])]);
        assert!(bad.to_matrix().is_err());
    }
}
