//! How SystemDS prints values: Java's `Double.toString`, DML `toString` of matrices, `print`.
//!
//! Scripts are compared with SystemDS by their printed output, so these rules follow
//! SystemDS 3.4.0 on JDK 17 as observed (every rule below was checked against the real
//! system; the unit tests pin the observed strings):
//!
//! * **Doubles** (`print(x)`, string concatenation): Java's `Double.toString`. Plain decimal
//!   with at least one fraction digit for `1e-3 <= |x| < 1e7` (`2000.0`, `0.001`,
//!   `9999999.0`), otherwise `d.dddE±n` with no `+` (`1.0E7`, `1.0E-4`,
//!   `9.809842524581822E-7`); `NaN`, `Infinity`, `-Infinity`, `-0.0`. See [`format_double`].
//! * **Integers** (`print(3)`, `nrow(X)`, `7 %/% 2`, `100000 * 100000`): decimal without a
//!   fraction (`3`, `10000000000`). **Booleans**: `TRUE` / `FALSE`. **Strings**: as is.
//! * **Concatenation** `+` with a string operand renders the other operand by the same rules,
//!   on either side: `"a" + 1.5` is `a1.5`, `"a" + 1` is `a1`, `"a" + TRUE` is `aTRUE`,
//!   `1 + "a"` is `1a`. A matrix operand is a compile error in SystemDS. See [`concat_display`].
//! * **Value types decide the rendering**, not the value: `2.0 * 3`, `5 / 1`, `2^3`,
//!   `round(2.5)`, `sum(X)`, `mean(X)`, `as.scalar(X[1,1])` are doubles (`6.0`, `5.0`, `8.0`,
//!   `3.0`); `7 %% 2`, `length(X)`, `nrow(X)` are integers. (SystemDS quirk: it constant-folds
//!   `sum(matrix(1, 2, 2))` to the *integer* `4`, while `sum(matrix(1.5, 2, 2))` prints `6.0`.)
//! * **Matrices**: `print(X)` prints `toString(X)` with the default options.
//!   `toString(X, rows=100, cols=100, decimal=3, sparse=FALSE, sep=" ", linesep="\n")` (the
//!   parameter is `linesep`; `linebreak` is rejected by SystemDS) prints the leading
//!   `rows` x `cols` corner; every row ends with `linesep`, including the last, and values are
//!   joined by `sep` with none trailing. `print` then appends its own newline, so
//!   `print(toString(X))` ends in a blank line. A negative `rows`/`cols` means all.
//!   Cells are formatted with `java.text.DecimalFormat` (no grouping, exactly `decimal`
//!   fraction digits, HALF_EVEN): `-2.5` with `decimal=0` is `-2`, `0.125` with `decimal=2` is
//!   `0.12`, a negative value that rounds to zero keeps its sign (`-0.000`), an exact `-0.0`
//!   prints as `0.000`, NaN and infinities print as `NaN`, `Infinity`, `-Infinity`. Digits come
//!   from the shortest representation and are padded with zeros, never from the exact binary
//!   expansion: `3.14159` with `decimal=20` is `3.14159000000000000000`, `1e20` is
//!   `100000000000000000000.000`. A negative `decimal` keeps DecimalFormat's defaults: up to
//!   three fraction digits, trailing zeros dropped (`1`, `-2.5`, `3.142`).
//!   `sparse=TRUE` prints one `i sep j sep value linesep` line (1-based) per non-zero cell of
//!   the corner, in row-major order; an all-zero matrix prints the empty string.
//!
//! JDK 17's `Double.toString` (the pre-JDK 19 `FloatingDecimal`) is not always the shortest
//! round-trip form. We reproduce its two systematic deviations: integers below 2^63 print
//! their exact digits (`2.82879384806159E17` prints as `2.82879384806159008E17`), and an exact
//! tie between two shortest candidates takes the even last digit (`6.688377722273412E14`).
//! Checked against `Double.toString` and `DecimalFormat` of JDK 17 on 2 million doubles
//! (uniform, normal, random bit patterns, decimal ties, powers of ten): 7 differ, all of
//! magnitude at least 2^63, where JDK 17 picks another last digit. Subnormals whose shortest
//! form has one digit differ too (`Double.MIN_VALUE` is `4.9E-324` in Java, `5.0E-324` here).
//! Every such string still denotes the same double.

use crate::matrix::{DenseMatrix, Matrix};

/// Java's `Double.toString(x)`, as SystemDS prints doubles.
///
/// ```
/// use lafuse_runtime::format::format_double;
/// assert_eq!(format_double(2000.0), "2000.0");
/// assert_eq!(format_double(1e10), "1.0E10");
/// assert_eq!(format_double(9.809842524581822e-7), "9.809842524581822E-7");
/// assert_eq!(format_double(-0.0), "-0.0");
/// ```
pub fn format_double(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    let (digits, exp) = shortest_digits(x.abs());
    let mut out = String::with_capacity(digits.len() + 8);
    if x < 0.0 {
        out.push('-');
    }
    let abs = x.abs();
    if (1e-3..1e7).contains(&abs) {
        // Plain notation: `exp` is the power of ten of the first digit.
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', int_len - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
            out.push_str(&digits);
        }
    } else {
        out.push_str(&digits[..1]);
        out.push('.');
        if digits.len() > 1 {
            out.push_str(&digits[1..]);
        } else {
            out.push('0');
        }
        out.push('E');
        out.push_str(&exp.to_string());
    }
    out
}

/// The decimal digits JDK 17's `FloatingDecimal` produces for a finite `x > 0` (no trailing
/// zeros) and the power of ten of the first digit: `x ~ d1.d2d3... * 10^exp`.
///
/// JDK 17 (before the JDK 19 rewrite) takes a separate path for doubles holding an integer
/// below 2^63: it prints the exact integer, rounded only at the decimal positions that the
/// binary precision cannot resolve (`developLongDigits` with `insignificantDigitsForPow2`).
/// Above 2^53 this gives more digits than the shortest form (`2.82879384806159008E17`).
/// Every other value gets the shortest round-trip digits, with JDK 17's choice of the even
/// candidate when the value lies exactly halfway between two; JDK 17's general path then
/// agrees except for rare last digits beyond 2^63 (see the module docs).
fn shortest_digits(x: f64) -> (String, i32) {
    if let Some(d) = jdk_long_digits(x) {
        return d;
    }
    // Rust's `{:e}` is the shortest representation that round-trips (like ryu).
    let (digits, exp) = split_sci(&format!("{x:e}"));
    // When the exact value lies halfway between two shortest candidates, Rust takes the upper
    // one while JDK 17 takes the one with an even last digit.
    if !may_be_tie(x, digits.len(), exp) {
        return (digits, exp);
    }
    let exact_len = digits.len() + 1;
    // Enough digits to see that the exact binary value ends right after the tie digit.
    let (exact, exact_exp) = split_sci(&format!("{:.*e}", exact_len + 24, x));
    if exact_exp == exp && exact.len() == exact_len && exact.ends_with('5') {
        let lower = &exact[..digits.len()];
        let even = lower
            .bytes()
            .last()
            .is_some_and(|d| (d - b'0').is_multiple_of(2));
        if even && lower != digits {
            let candidate = format!("{}.{}e{}", &lower[..1], &lower[1..], exp);
            if candidate.parse::<f64>() == Ok(x) {
                let lower = lower.trim_end_matches('0');
                return (lower.to_string(), exp);
            }
        }
    }
    (digits, exp)
}

/// Whether `x` might lie exactly halfway between two `len`-digit decimals whose first digit is
/// at `10^exp`, i.e. whether `x * 10^(len - exp)` can be an integer. A cheap necessary
/// condition that spares the exact expansion for almost every value.
fn may_be_tie(x: f64, len: usize, exp: i32) -> bool {
    // Shorter shortest forms cannot tie: the halfway decimal would itself be a shorter
    // exact representation of `x`.
    if len < 15 {
        return false;
    }
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i64;
    let (mantissa, e2) = if biased == 0 {
        (bits & ((1u64 << 52) - 1), -1074)
    } else {
        ((bits & ((1u64 << 52) - 1)) | (1u64 << 52), biased - 1075)
    };
    let scale = len as i64 - exp as i64;
    // x * 10^scale = mantissa * 5^scale * 2^(e2 + scale) is an integer iff enough twos remain.
    scale <= 0 || e2 + scale + mantissa.trailing_zeros() as i64 >= 0
}

/// Splits Rust's `{:e}` output of a positive number into its digits (trailing zeros removed)
/// and its decimal exponent.
fn split_sci(s: &str) -> (String, i32) {
    let (mantissa, exp) = s.split_once('e').unwrap_or((s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    (digits.to_string(), exp)
}

/// JDK 17 `FloatingDecimal.dtoa`'s path for integer values that fit a `long`.
fn jdk_long_digits(x: f64) -> Option<(String, i32)> {
    // insignificantDigitsNumber of FloatingDecimal: decimal digits below the binary precision.
    const INSIGNIFICANT: [u32; 64] = [
        0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 8, 8, 8,
        9, 9, 9, 9, 10, 10, 10, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 14, 14, 14, 15, 15, 15, 15,
        16, 16, 16, 17, 17, 17, 18, 18, 18, 19,
    ];
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    if biased == 0 {
        return None; // subnormal: never an integer
    }
    let bin_exp = biased - 1023;
    let fract = (bits & ((1u64 << 52) - 1)) | (1u64 << 52);
    let n_fract_bits = 53 - fract.trailing_zeros() as i32;
    let n_tiny_bits = (n_fract_bits - bin_exp - 1).max(0);
    if !(0..=62).contains(&bin_exp) || n_tiny_bits != 0 {
        return None;
    }
    let p2 = bin_exp - 53 - 1;
    let insignificant = if bin_exp > 53 && p2 > 1 && (p2 as usize) < INSIGNIFICANT.len() {
        INSIGNIFICANT[p2 as usize]
    } else {
        0
    };
    let mut value = if bin_exp >= 52 {
        fract << (bin_exp - 52)
    } else {
        fract >> (52 - bin_exp)
    };
    let mut dropped = 0;
    if insignificant != 0 {
        let pow10 = 10u64.pow(insignificant);
        let residue = value % pow10;
        value /= pow10;
        dropped = insignificant as i32;
        if residue >= pow10 / 2 {
            value += 1;
        }
    }
    let text = value.to_string();
    let exp = text.len() as i32 - 1 + dropped;
    let digits = text.trim_end_matches('0');
    Some((digits.to_string(), exp))
}

/// An integer as SystemDS prints it (`Long.toString`).
pub fn format_int(x: i64) -> String {
    x.to_string()
}

/// A boolean as SystemDS prints it.
pub fn format_bool(b: bool) -> &'static str {
    if b {
        "TRUE"
    } else {
        "FALSE"
    }
}

/// A scalar operand of DML's string concatenation or of `print`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar<'a> {
    /// A double (`FP64`).
    Double(f64),
    /// An integer (`INT64`).
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(&'a str),
}

/// Renders one scalar as `print` and string concatenation do.
pub fn display_scalar(v: Scalar<'_>) -> String {
    match v {
        Scalar::Double(x) => format_double(x),
        Scalar::Int(i) => format_int(i),
        Scalar::Bool(b) => format_bool(b).to_string(),
        Scalar::Str(s) => s.to_string(),
    }
}

/// DML `a + b` where at least one operand is a string: both operands rendered and joined
/// (`"a" + 1.5` is `a1.5`, `1 + "a"` is `1a`, `"x" + TRUE` is `xTRUE`).
pub fn concat_display(a: Scalar<'_>, b: Scalar<'_>) -> String {
    let mut s = display_scalar(a);
    s.push_str(&display_scalar(b));
    s
}

/// Options of DML `toString(X, rows=, cols=, decimal=, sparse=, sep=, linesep=)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToStringOptions {
    /// Rows to print; negative means all. DML default 100.
    pub rows: i64,
    /// Columns to print; negative means all. DML default 100.
    pub cols: i64,
    /// Fraction digits; negative keeps `DecimalFormat`'s default (0 to 3 digits). Default 3.
    pub decimal: i32,
    /// Print `i j value` triples of the non-zeros instead of the dense grid. Default false.
    pub sparse: bool,
    /// Separator between values (and between the fields of a sparse triple). Default `" "`.
    pub sep: String,
    /// Terminator of every row (or triple). Default `"\n"`.
    pub linesep: String,
}

impl Default for ToStringOptions {
    fn default() -> Self {
        ToStringOptions {
            rows: 100,
            cols: 100,
            decimal: 3,
            sparse: false,
            sep: " ".to_string(),
            linesep: "\n".to_string(),
        }
    }
}

/// DML `toString(X, ...)` (and `print(X)` with default options), byte for byte as SystemDS.
///
/// A zero-column corner (`cols=0`) makes SystemDS throw an index error; we print each row as
/// an empty line instead.
///
/// ```
/// use lafuse_runtime::format::{to_string_matrix, ToStringOptions};
/// use lafuse_runtime::{DenseMatrix, Matrix};
/// let m = Matrix::Dense(DenseMatrix { rows: 2, cols: 2, values: vec![1.0, -2.5, 0.0, 1e10].into(), nnz: 3 });
/// assert_eq!(to_string_matrix(&m, &ToStringOptions::default()), "1.000 -2.500\n0.000 10000000000.000\n");
/// ```
pub fn to_string_matrix(m: &Matrix, opts: &ToStringOptions) -> String {
    let (rows, cols) = match m {
        Matrix::Dense(d) => (d.rows, d.cols),
        Matrix::Sparse(s) => (s.rows, s.cols),
    };
    let limit = |n: usize, k: i64| if k < 0 { n } else { n.min(k as usize) };
    let (rlen, clen) = (limit(rows, opts.rows), limit(cols, opts.cols));
    let fmt = CellFormat::new(opts.decimal);
    let mut out = String::new();
    if opts.sparse {
        let mut emit = |i: usize, j: usize, v: f64| {
            out.push_str(&(i + 1).to_string());
            out.push_str(&opts.sep);
            out.push_str(&(j + 1).to_string());
            out.push_str(&opts.sep);
            out.push_str(&fmt.format(v));
            out.push_str(&opts.linesep);
        };
        match m {
            Matrix::Dense(d) => {
                for i in 0..rlen {
                    for (j, &v) in d.values[i * d.cols..i * d.cols + clen].iter().enumerate() {
                        if v != 0.0 {
                            emit(i, j, v);
                        }
                    }
                }
            }
            Matrix::Sparse(s) => {
                for i in 0..rlen {
                    let (idx, val) = s.row(i);
                    for (&j, &v) in idx.iter().zip(val) {
                        if (j as usize) < clen {
                            emit(i, j as usize, v);
                        }
                    }
                }
            }
        }
        return out;
    }
    let mut row = vec![0.0; clen];
    for i in 0..rlen {
        read_row(m, i, &mut row);
        for (j, &v) in row.iter().enumerate() {
            if j > 0 {
                out.push_str(&opts.sep);
            }
            // SystemDS prints an exact -0.0 as 0 in the grid.
            out.push_str(&fmt.format(if v == 0.0 { 0.0 } else { v }));
        }
        out.push_str(&opts.linesep);
    }
    out
}

/// Copies the first `out.len()` cells of row `i` into `out`.
fn read_row(m: &Matrix, i: usize, out: &mut [f64]) {
    match m {
        Matrix::Dense(DenseMatrix { cols, values, .. }) => {
            out.copy_from_slice(&values[i * cols..i * cols + out.len()]);
        }
        Matrix::Sparse(s) => {
            out.fill(0.0);
            let (idx, val) = s.row(i);
            for (&j, &v) in idx.iter().zip(val) {
                if let Some(o) = out.get_mut(j as usize) {
                    *o = v;
                }
            }
        }
    }
}

/// `java.text.DecimalFormat` as SystemDS configures it for `toString`: no grouping, and
/// either exactly `decimal` fraction digits or, for a negative `decimal`, the defaults
/// (0 to 3 fraction digits); rounding HALF_EVEN.
#[derive(Clone, Copy, Debug)]
pub struct CellFormat {
    min_frac: usize,
    max_frac: usize,
}

impl CellFormat {
    /// The format for DML's `decimal=` argument.
    pub fn new(decimal: i32) -> CellFormat {
        if decimal >= 0 {
            CellFormat {
                min_frac: decimal as usize,
                max_frac: decimal as usize,
            }
        } else {
            CellFormat {
                min_frac: 0,
                max_frac: 3,
            }
        }
    }

    /// Formats one cell value.
    pub fn format(&self, x: f64) -> String {
        if !x.is_finite() {
            return format_double(x);
        }
        let mut s = decimal_format(x, self.max_frac);
        if self.min_frac < self.max_frac {
            if let Some(dot) = s.find('.') {
                let keep = (dot + 1 + self.min_frac).max(s.trim_end_matches('0').len());
                s.truncate(keep);
                if s.ends_with('.') {
                    s.pop();
                }
            }
        }
        s
    }
}

/// `x` (finite) with exactly `frac` fraction digits, as DecimalFormat renders it.
///
/// DecimalFormat starts from the shortest decimal digits of `x`. When those have at most
/// `frac` fraction digits it pads them with zeros (so large values show the shortest digits
/// followed by zeros, not their exact binary expansion). Otherwise it rounds HALF_EVEN, taking
/// into account whether the shortest digits were rounded up or down from the exact value,
/// which amounts to rounding the exact binary value HALF_EVEN; Rust's fixed-precision
/// formatting does exactly that.
fn decimal_format(x: f64, frac: usize) -> String {
    if x == 0.0 {
        let mut s = if x.is_sign_negative() { "-0" } else { "0" }.to_string();
        if frac > 0 {
            s.push('.');
            s.extend(std::iter::repeat_n('0', frac));
        }
        return s;
    }
    let (digits, exp) = shortest_digits(x.abs());
    let frac_digits = (digits.len() as i64 - 1 - exp as i64).max(0) as usize;
    if frac_digits > frac {
        // DecimalFormat quirk: below 1e-3 Java's digit string of a single-digit value is
        // `5.0E-n`, and the artificial trailing zero makes HALF_EVEN treat a lone 5 at the
        // rounding position as "followed by zeros only" and round down (0.0005 with three
        // decimals is `0.000`, although the double is slightly above the tie).
        if digits == "5" && exp <= -4 && frac as i64 == -(exp as i64) - 1 {
            return decimal_format(if x < 0.0 { -0.0 } else { 0.0 }, frac);
        }
        return format!("{x:.frac$}");
    }
    let mut s = String::with_capacity(digits.len() + frac + 8);
    if x < 0.0 {
        s.push('-');
    }
    if exp >= 0 {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            s.push_str(&digits);
            s.extend(std::iter::repeat_n('0', int_len - digits.len()));
        } else {
            s.push_str(&digits[..int_len]);
        }
        if frac > 0 {
            s.push('.');
            let given = digits.get(int_len..).unwrap_or("");
            s.push_str(given);
            s.extend(std::iter::repeat_n('0', frac - given.len()));
        }
    } else {
        s.push('0');
        if frac > 0 {
            s.push('.');
            let lead = (-exp - 1) as usize;
            s.extend(std::iter::repeat_n('0', lead));
            s.push_str(&digits);
            s.extend(std::iter::repeat_n('0', frac - lead - digits.len()));
        }
    }
    s
}

/// `toString` of a list, as SystemDS's `DataConverter.toString(ListObject, ...)`: a header
/// line, then the items between brackets separated by `", "`; a matrix item is introduced by
/// `"\nMatrix:\n"` and printed with `opts`, a scalar as `print` shows it, a nested list
/// likewise. (SystemDS drops the two characters before the closing bracket, so an empty list
/// prints as `List containing:]`.)
pub fn to_string_list(list: &crate::value::List, opts: &ToStringOptions) -> String {
    use crate::value::Value;
    let mut out = String::from("List containing:\n[");
    for item in &list.items {
        match item {
            Value::Matrix(m) => {
                out.push_str("\nMatrix:\n");
                out.push_str(&to_string_matrix(m, opts));
            }
            Value::List(l) => out.push_str(&to_string_list(l, opts)),
            scalar => out.push_str(&scalar.display_string()),
        }
        out.push_str(", ");
    }
    out.truncate(out.len() - 2);
    out.push(']');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datagen::{rand, Pdf};
    use crate::matrix::SparseMatrix;

    fn dense(rows: usize, cols: usize, values: Vec<f64>) -> Matrix {
        let nnz = values.iter().filter(|v| **v != 0.0).count();
        Matrix::Dense(DenseMatrix {
            rows,
            cols,
            values: values.into(),
            nnz,
        })
    }

    /// The 4x3 matrix of the SystemDS probes:
    /// `X = matrix("1 -2.5 0 3.14159 0 1e10 0 0.0005 1e-20 123456789.123 -7 0.9995", rows=4,
    /// cols=3); X[2,2] = 0/0; X[3,1] = -0.0; X[1,3] = -0.0004`.
    #[allow(clippy::approx_constant)] // 3.14159 is the probe's literal, not an approximation
    fn probe_x() -> Matrix {
        dense(
            4,
            3,
            vec![
                1.0,
                -2.5,
                -0.0004,
                3.14159,
                f64::NAN,
                1e10,
                -0.0,
                0.0005,
                1e-20,
                123456789.123,
                -7.0,
                0.9995,
            ],
        )
    }

    /// `Y = matrix("0.5 1.5 2.5 3.5 0.125 0.375 -0.5 -1.5 1e20 2.82879384806159E17 1e-5 0.15",
    /// rows=3, cols=4)`.
    fn probe_y() -> Matrix {
        dense(
            3,
            4,
            vec![
                0.5,
                1.5,
                2.5,
                3.5,
                0.125,
                0.375,
                -0.5,
                -1.5,
                1e20,
                2.82879384806159e17,
                1e-5,
                0.15,
            ],
        )
    }

    fn opts() -> ToStringOptions {
        ToStringOptions::default()
    }

    fn to_csr(m: &Matrix) -> Matrix {
        let Matrix::Dense(d) = m else {
            unreachable!("probes are dense")
        };
        let mut row_ptr = vec![0];
        let (mut col_idx, mut values) = (Vec::new(), Vec::new());
        for r in 0..d.rows {
            for c in 0..d.cols {
                let v = d.values[r * d.cols + c];
                if v != 0.0 {
                    col_idx.push(c as u32);
                    values.push(v);
                }
            }
            row_ptr.push(values.len());
        }
        Matrix::Sparse(SparseMatrix {
            rows: d.rows,
            cols: d.cols,
            row_ptr: row_ptr.into(),
            col_idx: col_idx.into(),
            values: values.into(),
        })
    }

    // Expected strings below are SystemDS 3.4.0's output (`print(...)` minus its newline).

    #[test]
    fn double_to_string_matches_java() {
        let cases = [
            (2000.0, "2000.0"),
            (1.0 / 3.0, "0.3333333333333333"),
            (1e10, "1.0E10"),
            (0.0001, "1.0E-4"),
            (0.001, "0.001"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (f64::NAN, "NaN"),
            (6.0, "6.0"),
            (1e7, "1.0E7"),
            (9999999.0, "9999999.0"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e-7, "1.0E-7"),
            (9.809842524581822e-7, "9.809842524581822E-7"),
            (2f64.sqrt(), "1.4142135623730951"),
            (2.82879384806159e17, "2.82879384806159008E17"),
            (1e301, "1.0E301"),
            (123456789.0, "1.23456789E8"),
            (1234567.0, "1234567.0"),
            (0.00123, "0.00123"),
            (-1.5e-5, "-1.5E-5"),
            (-963.7882608452237, "-963.7882608452237"),
            // JDK 17 FloatingDecimal quirks (probed with Double.toString on JDK 17).
            (f64::from_bits(0x4303026f6e9b986a), "6.688377722273412E14"),
            (f64::from_bits(0x438980704d624d84), "2.29699015703900288E17"),
        ];
        for (x, want) in cases {
            assert_eq!(format_double(x), want, "Double.toString({x:e})");
        }
    }

    #[test]
    fn scalars_and_concatenation() {
        assert_eq!(format_int(10_000_000_000), "10000000000");
        assert_eq!(format_int(-5), "-5");
        assert_eq!(format_bool(true), "TRUE");
        assert_eq!(
            concat_display(Scalar::Str("a"), Scalar::Double(1.5)),
            "a1.5"
        );
        assert_eq!(concat_display(Scalar::Str("a"), Scalar::Int(1)), "a1");
        assert_eq!(
            concat_display(Scalar::Str("a"), Scalar::Bool(true)),
            "aTRUE"
        );
        assert_eq!(concat_display(Scalar::Int(1), Scalar::Str("a")), "1a");
        assert_eq!(
            concat_display(Scalar::Double(2.5), Scalar::Str(" b")),
            "2.5 b"
        );
        assert_eq!(
            concat_display(Scalar::Str("x="), Scalar::Double(2000.0)),
            "x=2000.0"
        );
    }

    #[test]
    fn to_string_defaults_and_decimals() {
        let x = probe_x();
        assert_eq!(
            to_string_matrix(&x, &opts()),
            "1.000 -2.500 -0.000\n3.142 NaN 10000000000.000\n0.000 0.000 0.000\n123456789.123 -7.000 1.000\n"
        );
        let with = |decimal| ToStringOptions { decimal, ..opts() };
        assert_eq!(
            to_string_matrix(&x, &with(0)),
            "1 -2 -0\n3 NaN 10000000000\n0 0 0\n123456789 -7 1\n"
        );
        assert_eq!(
            to_string_matrix(&x, &with(1)),
            "1.0 -2.5 -0.0\n3.1 NaN 10000000000.0\n0.0 0.0 0.0\n123456789.1 -7.0 1.0\n"
        );
        assert_eq!(
            to_string_matrix(&x, &with(-1)),
            "1 -2.5 -0\n3.142 NaN 10000000000\n0 0 0\n123456789.123 -7 1\n"
        );
        assert_eq!(
            to_string_matrix(&x, &with(20)),
            "1.00000000000000000000 -2.50000000000000000000 -0.00040000000000000000\n\
             3.14159000000000000000 NaN 10000000000.00000000000000000000\n\
             0.00000000000000000000 0.00050000000000000000 0.00000000000000000001\n\
             123456789.12300000000000000000 -7.00000000000000000000 0.99950000000000000000\n"
        );
    }

    #[test]
    fn to_string_rounds_half_even_from_shortest_digits() {
        let y = probe_y();
        let with = |decimal| ToStringOptions { decimal, ..opts() };
        assert_eq!(
            to_string_matrix(&y, &with(0)),
            "0 2 2 4\n0 0 -0 -2\n100000000000000000000 282879384806159008 0 0\n"
        );
        assert_eq!(
            to_string_matrix(&y, &with(2)),
            "0.50 1.50 2.50 3.50\n0.12 0.38 -0.50 -1.50\n100000000000000000000.00 282879384806159008.00 0.00 0.15\n"
        );
        assert_eq!(
            to_string_matrix(&y, &opts()),
            "0.500 1.500 2.500 3.500\n0.125 0.375 -0.500 -1.500\n100000000000000000000.000 282879384806159008.000 0.000 0.150\n"
        );
    }

    #[test]
    fn to_string_corner_separators_and_sparse_triples() {
        for x in [probe_x(), to_csr(&probe_x())] {
            let corner = ToStringOptions {
                rows: 2,
                cols: 2,
                ..opts()
            };
            assert_eq!(to_string_matrix(&x, &corner), "1.000 -2.500\n3.142 NaN\n");
            let seps = ToStringOptions {
                sep: ",".into(),
                linesep: "|".into(),
                ..opts()
            };
            assert_eq!(
                to_string_matrix(&x, &seps),
                "1.000,-2.500,-0.000|3.142,NaN,10000000000.000|0.000,0.000,0.000|123456789.123,-7.000,1.000|"
            );
            let sparse = ToStringOptions {
                sparse: true,
                ..opts()
            };
            assert_eq!(
                to_string_matrix(&x, &sparse),
                "1 1 1.000\n1 2 -2.500\n1 3 -0.000\n2 1 3.142\n2 2 NaN\n2 3 10000000000.000\n\
                 3 2 0.000\n3 3 0.000\n4 1 123456789.123\n4 2 -7.000\n4 3 1.000\n"
            );
            let first_row = ToStringOptions {
                rows: 1,
                sparse: true,
                sep: "|".into(),
                ..opts()
            };
            assert_eq!(
                to_string_matrix(&x, &first_row),
                "1|1|1.000\n1|2|-2.500\n1|3|-0.000\n"
            );
            let all = ToStringOptions {
                rows: -1,
                cols: -1,
                ..opts()
            };
            assert_eq!(to_string_matrix(&x, &all), to_string_matrix(&x, &opts()));
            let none = ToStringOptions { rows: 0, ..opts() };
            assert_eq!(to_string_matrix(&x, &none), "");
        }
    }

    #[test]
    fn to_string_of_empty_and_generated_matrices() {
        let zeros = dense(2, 2, vec![0.0; 4]);
        let sparse = ToStringOptions {
            sparse: true,
            ..opts()
        };
        assert_eq!(to_string_matrix(&zeros, &sparse), "");
        assert_eq!(
            to_string_matrix(&zeros, &opts()),
            "0.000 0.000\n0.000 0.000\n"
        );

        // print(toString(rand(rows=3, cols=3, sparsity=0.3, seed=3)[, sparse=TRUE]))
        let r = rand(3, 3, 0.0, 1.0, 0.3, 3, Pdf::Uniform).unwrap();
        assert_eq!(to_string_matrix(&r, &sparse), "1 1 0.689\n1 3 0.413\n");
        assert_eq!(
            to_string_matrix(&r, &opts()),
            "0.689 0.000 0.413\n0.000 0.000 0.000\n0.000 0.000 0.000\n"
        );
        // print(toString(rand(rows=3, cols=3, seed=7), decimal=17))
        let r = rand(3, 3, 0.0, 1.0, 1.0, 7, Pdf::Uniform).unwrap();
        let d17 = ToStringOptions {
            decimal: 17,
            ..opts()
        };
        assert_eq!(
            to_string_matrix(&r, &d17),
            "0.45324353322292277 0.01592030416320278 0.08606588879859611\n\
             0.59663605973140190 0.05575396305254521 0.05475426466690947\n\
             0.46103776231317370 0.77709061434543000 0.40737390321617917\n"
        );
        // print(toString(rand(rows=150, cols=2, seed=1))) prints the first 100 rows.
        let r = rand(150, 2, 0.0, 1.0, 1.0, 1, Pdf::Uniform).unwrap();
        let s = to_string_matrix(&r, &opts());
        assert_eq!(s.lines().count(), 100);
        assert!(s.starts_with("0.454 0.783\n0.361 0.112\n"));
        assert!(s.ends_with("0.716 0.272\n0.614 0.036\n"));
    }

    #[test]
    fn zero_column_corner_does_not_panic() {
        let narrow = ToStringOptions { cols: 0, ..opts() };
        assert_eq!(to_string_matrix(&probe_x(), &narrow), "\n\n\n\n");
    }
}
