//! `transformencode` and `transformapply` of a frame into a matrix, in the subset lafuse has:
//! recoding (each distinct token of a column gets a code 1, 2, ... in order of first
//! appearance) and dummy coding (a recoded column expanded into one 0/1 column per code), with
//! the metadata frame SystemDS produces (`token·code` strings) and reads back.
//!
//! The spec is SystemDS's JSON, keys unquoted or quoted (`{ids:true, recode:[1,2]}`,
//! `{"dummycode":["C3"]}`): `ids: true` names columns by 1-based position, else by name.
//! Binning, hashing, imputation, omitting and word embeddings are "unsupported" errors.
//!
//! The encoded matrix has the frame's columns in order, each dummy-coded column widened in
//! place to its codes; other columns pass through as numbers. A token the recode map lacks
//! (or a missing value) codes as NaN, and dummy codes as a row of zeros, as in SystemDS.

use crate::error::{Result, RuntimeError, Unsupported};
use crate::frame::{Column, ColumnType, Frame};
use crate::matrix::Matrix;
use std::collections::HashMap;
use std::sync::Arc;

/// Separates a token from its code in a metadata cell (SystemDS's `Lop.DATATYPE_PREFIX`).
const TOKEN_CODE_SEPARATOR: char = '·';

/// What the spec asks of each column.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Spec {
    /// Per column: recoded (dummy-coded columns are recoded first).
    recode: Vec<bool>,
    /// Per column: dummy-coded.
    dummycode: Vec<bool>,
}

fn spec_error(spec: &str, problem: impl Into<String>) -> RuntimeError {
    RuntimeError::TransformSpec {
        spec: spec.to_string(),
        problem: problem.into(),
    }
}

/// SystemDS's lenient JSON as strict JSON: unquoted object keys and unquoted string values
/// (`method:equi-width`) get quotes; `true`, `false`, `null` and numbers stay.
fn quote_bare_words(spec: &str) -> String {
    let chars: Vec<char> = spec.chars().collect();
    let mut out = String::with_capacity(spec.len() + 16);
    let (mut i, mut in_string) = (0, false);
    while i < chars.len() {
        let c = chars[i];
        if in_string {
            out.push(c);
            if c == '\\' && i + 1 < chars.len() {
                out.push(chars[i + 1]);
                i += 1;
            } else if c == '"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        if c == '"' {
            in_string = true;
            out.push(c);
            i += 1;
            continue;
        }
        if c.is_ascii_digit() {
            // A number, its exponent included (`2e-3`).
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '.' | '+' | '-'))
            {
                out.push(chars[i]);
                i += 1;
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '_' | '-' | '.'))
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            if matches!(word.as_str(), "true" | "false" | "null") {
                out.push_str(&word);
            } else {
                out.push('"');
                out.push_str(&word);
                out.push('"');
            }
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

impl Spec {
    fn parse(spec: &str, frame: &Frame) -> Result<Spec> {
        let json: serde_json::Value = serde_json::from_str(&quote_bare_words(spec))
            .map_err(|e| spec_error(spec, format!("it is not JSON ({e})")))?;
        let object = json
            .as_object()
            .ok_or_else(|| spec_error(spec, "it is not a JSON object"))?;
        let ids = match object.get("ids") {
            None => false,
            Some(serde_json::Value::Bool(b)) => *b,
            Some(other) => {
                return Err(spec_error(spec, format!("'ids' is {other}, not a boolean")))
            }
        };
        let n = frame.cols();
        let mut out = Spec {
            recode: vec![false; n],
            dummycode: vec![false; n],
        };
        for (key, value) in object {
            let flags = match key.as_str() {
                "ids" => continue,
                "recode" => &mut out.recode,
                "dummycode" => &mut out.dummycode,
                other => {
                    return Err(RuntimeError::Unsupported(Unsupported::Transform {
                        name: other.to_string(),
                    }))
                }
            };
            let list = value
                .as_array()
                .ok_or_else(|| spec_error(spec, format!("'{key}' is not a list of columns")))?;
            for item in list {
                let column = match (ids, item) {
                    (true, serde_json::Value::Number(k)) => k
                        .as_u64()
                        .filter(|&k| k >= 1 && k as usize <= n)
                        .map(|k| k as usize - 1)
                        .ok_or_else(|| {
                            spec_error(spec, format!("column {k} is not one of the frame's 1..{n}"))
                        })?,
                    (false, serde_json::Value::String(name)) => {
                        frame.column_named(name).ok_or_else(|| {
                            spec_error(
                                spec,
                                format!(
                                    "the frame has no column '{name}' (its columns: {})",
                                    frame.names().join(", ")
                                ),
                            )
                        })?
                    }
                    (true, other) => {
                        return Err(spec_error(
                            spec,
                            format!("{other} in '{key}' is not a column number (ids: true)"),
                        ))
                    }
                    (false, other) => {
                        return Err(spec_error(
                            spec,
                            format!(
                                "{other} in '{key}' is not a column name (give ids: true to \
                                 name columns by number)"
                            ),
                        ))
                    }
                };
                flags[column] = true;
            }
        }
        for j in 0..n {
            out.recode[j] |= out.dummycode[j];
        }
        Ok(out)
    }
}

impl Spec {
    /// The recode map of each recoded column, read from a metadata frame of as many columns
    /// as the spec's.
    fn maps_from_meta(&self, meta: &Frame) -> Result<Vec<Option<RecodeMap>>> {
        (0..self.recode.len())
            .map(|j| {
                self.recode[j]
                    .then(|| RecodeMap::from_meta(meta, j))
                    .transpose()
            })
            .collect()
    }
}

/// One column's recode map: its tokens in code order (code = position + 1).
#[derive(Default)]
struct RecodeMap {
    tokens: Vec<String>,
    codes: HashMap<String, usize>,
}

impl RecodeMap {
    fn build(column: &Column, rows: usize) -> RecodeMap {
        let mut map = RecodeMap::default();
        for i in 0..rows {
            if let Some(t) = column.token(i) {
                if !map.codes.contains_key(&t) {
                    map.tokens.push(t.clone());
                    map.codes.insert(t, map.tokens.len());
                }
            }
        }
        map
    }

    /// The map stored in column `j` of a metadata frame.
    fn from_meta(meta: &Frame, j: usize) -> Result<RecodeMap> {
        let mut entries = Vec::new();
        if let Column::Strings(cells) = &meta.columns()[j] {
            for cell in cells.iter().flatten() {
                let bad = || RuntimeError::TransformMeta {
                    problem: format!("column {} has the cell '{cell}', not token·code", j + 1),
                };
                let (token, code) = cell.rsplit_once(TOKEN_CODE_SEPARATOR).ok_or_else(bad)?;
                let code: usize = code.parse().map_err(|_| bad())?;
                entries.push((code, token.to_string()));
            }
        }
        entries.sort();
        let mut map = RecodeMap::default();
        for (k, (code, token)) in entries.into_iter().enumerate() {
            if code != k + 1 {
                return Err(RuntimeError::TransformMeta {
                    problem: format!(
                        "column {} does not hold the codes 1, 2, ... once each",
                        j + 1
                    ),
                });
            }
            map.codes.insert(token.clone(), code);
            map.tokens.push(token);
        }
        Ok(map)
    }

    fn code(&self, column: &Column, row: usize) -> f64 {
        column
            .token(row)
            .and_then(|t| self.codes.get(&t).copied())
            .map_or(f64::NAN, |c| c as f64)
    }
}

/// The encoded matrix of `frame` under `spec` with these recode maps (one per recoded column).
fn encode_with(frame: &Frame, spec: &Spec, maps: &[Option<RecodeMap>]) -> Result<Matrix> {
    let width: usize = (0..frame.cols())
        .map(|j| match &maps[j] {
            Some(map) if spec.dummycode[j] => map.tokens.len(),
            _ => 1,
        })
        .sum();
    let rows = frame.rows();
    let mut values = vec![0.0; rows * width];
    let mut at = 0;
    for (j, column) in frame.columns().iter().enumerate() {
        match &maps[j] {
            Some(map) if spec.dummycode[j] => {
                for i in 0..rows {
                    let code = map.code(column, i);
                    if !code.is_nan() {
                        values[i * width + at + code as usize - 1] = 1.0;
                    }
                }
                at += map.tokens.len();
            }
            Some(map) => {
                for i in 0..rows {
                    values[i * width + at] = map.code(column, i);
                }
                at += 1;
            }
            None => {
                for i in 0..rows {
                    values[i * width + at] = column.number(i)?;
                }
                at += 1;
            }
        }
    }
    Matrix::from_dense_values(rows, width, values)
}

/// Java's `String.hashCode` (over UTF-16 code units).
fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// The order in which a `java.util.HashMap` built by inserting `tokens` in order (default
/// capacity 16, load factor 0.75) iterates them: by bucket of the spread hash at the final
/// capacity, and within a bucket in insertion order (a resize splits a bucket keeping its
/// order). SystemDS writes a recode map's metadata rows in this order. (A bucket of 8 or more
/// colliding tokens becomes a tree in Java, whose order can differ; not modelled.)
fn java_hash_map_order(tokens: &[String]) -> Vec<usize> {
    let mut capacity: usize = 16;
    while tokens.len() > capacity / 4 * 3 {
        capacity *= 2;
    }
    let bucket = |t: &String| {
        let h = java_string_hash(t) as u32;
        (h ^ (h >> 16)) as usize & (capacity - 1)
    };
    let mut order: Vec<usize> = (0..tokens.len()).collect();
    order.sort_by_key(|&k| (bucket(&tokens[k]), k));
    order
}

/// `[X, M] = transformencode(target=F, spec=S)`: the encoded matrix and the metadata frame
/// (per recoded column, its `token·code` cells in the order SystemDS's hash map lists them,
/// [`java_hash_map_order`]; missing elsewhere).
pub fn encode(frame: &Frame, spec: &str) -> Result<(Matrix, Frame)> {
    let spec = Spec::parse(spec, frame)?;
    let maps: Vec<Option<RecodeMap>> = (0..frame.cols())
        .map(|j| spec.recode[j].then(|| RecodeMap::build(&frame.columns()[j], frame.rows())))
        .collect();
    let encoded = encode_with(frame, &spec, &maps)?;
    let meta_rows = maps
        .iter()
        .flatten()
        .map(|m| m.tokens.len())
        .max()
        .unwrap_or(0);
    let meta_columns = maps
        .iter()
        .map(|map| {
            let mut cells: Vec<Option<Arc<str>>> = vec![None; meta_rows];
            if let Some(map) = map {
                for (row, k) in java_hash_map_order(&map.tokens).into_iter().enumerate() {
                    let token = &map.tokens[k];
                    cells[row] = Some(format!("{token}{TOKEN_CODE_SEPARATOR}{}", k + 1).into());
                }
            }
            Column::Strings(cells)
        })
        .collect();
    Ok((encoded, Frame::new(meta_rows, meta_columns)))
}

/// `transformapply(target=F, spec=S, meta=M)`: F encoded with the recode maps of M, a
/// metadata frame of `transformencode` over a frame of as many columns.
pub fn apply(frame: &Frame, spec: &str, meta: &Frame) -> Result<Matrix> {
    let spec = Spec::parse(spec, frame)?;
    if meta.cols() != frame.cols() {
        return Err(RuntimeError::TransformMeta {
            problem: format!(
                "it has {} columns, the frame to encode {}",
                meta.cols(),
                frame.cols()
            ),
        });
    }
    let maps = spec.maps_from_meta(meta)?;
    encode_with(frame, &spec, &maps)
}

/// `transformdecode(target=X, spec=S, meta=M)`: the frame `transformencode` would have
/// encoded into X, as SystemDS's decoders rebuild it. A recoded column's code (truncated
/// toward zero, as `UtilFunctions.toLong`) becomes its token, a dummy-coded group's first
/// non-zero column its code's token, a code without a token (NaN, 0, beyond the map) a missing
/// value; other columns pass through as FP64. Without dummy coding the frame has the meta
/// frame's columns up to X's width, with it all of the meta frame's.
pub fn decode(encoded: &Matrix, spec: &str, meta: &Frame) -> Result<Frame> {
    let spec = Spec::parse(spec, meta)?;
    let maps = spec.maps_from_meta(meta)?;
    let dummy = spec.dummycode.iter().any(|&d| d);
    let cols = if dummy {
        meta.cols()
    } else {
        meta.cols().min(encoded.cols())
    };
    let rows = encoded.rows();
    let mut columns = Vec::with_capacity(cols);
    let mut at = 0; // the first encoded column of frame column j
    for (j, map) in maps.iter().enumerate().take(cols) {
        let width = match map {
            Some(map) if spec.dummycode[j] => map.tokens.len(),
            _ => 1,
        };
        if at + width > encoded.cols() {
            return Err(RuntimeError::TransformMeta {
                problem: format!(
                    "it describes more than the {} columns of the matrix to decode",
                    encoded.cols()
                ),
            });
        }
        let token_of = |map: &RecodeMap, code: usize| -> Option<Arc<str>> {
            code.checked_sub(1)
                .and_then(|k| map.tokens.get(k))
                .map(|t| Arc::from(t.as_str()))
        };
        columns.push(match map {
            Some(map) if spec.dummycode[j] => Column::Strings(
                (0..rows)
                    .map(|i| {
                        (0..width)
                            .find(|&k| encoded.get(i, at + k) != 0.0)
                            .and_then(|k| token_of(map, k + 1))
                    })
                    .collect(),
            ),
            Some(map) => Column::Strings(
                (0..rows)
                    .map(|i| {
                        let v = encoded.get(i, at);
                        // UtilFunctions.toLong: toward zero past a small epsilon; NaN is 0.
                        let code = (v.abs() + 1e-14).floor();
                        if v.is_nan() || v < 0.0 || code > usize::MAX as f64 {
                            None
                        } else {
                            token_of(map, code as usize)
                        }
                    })
                    .collect(),
            ),
            None => Column::Numbers {
                ty: ColumnType::Fp64,
                values: (0..rows).map(|i| encoded.get(i, at)).collect(),
            },
        });
        at += width;
    }
    Ok(Frame::new(rows, columns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::format_double;

    fn frame(rows: usize, cols: usize, v: &[f64]) -> Frame {
        Frame::from_matrix(&Matrix::from_dense_values(rows, cols, v.to_vec()).unwrap())
    }

    fn rows(m: &Matrix) -> Vec<Vec<f64>> {
        (0..m.rows())
            .map(|i| (0..m.cols()).map(|j| m.get(i, j)).collect())
            .collect()
    }

    /// Decoding inverts encoding: tokens come back as strings, pass-through columns as
    /// numbers, unknown codes as missing values.
    #[test]
    fn decode_inverts_encode() {
        let f = frame(3, 3, &[7.0, 2.5, 1.0, 9.0, 3.5, 0.0, 7.0, 4.5, 1.0]);
        let spec = "{ids:true, recode:[1], dummycode:[3]}";
        let (x, meta) = encode(&f, spec).unwrap();
        let back = decode(&x, spec, &meta).unwrap();
        let strings = |j: usize| match &back.columns()[j] {
            Column::Strings(s) => s
                .iter()
                .map(|t| t.as_deref().map(str::to_string))
                .collect::<Vec<_>>(),
            other => panic!("column {j} is {other:?}"),
        };
        let some = |v: &[&str]| v.iter().map(|t| Some(t.to_string())).collect::<Vec<_>>();
        assert_eq!(strings(0), some(&["7", "9", "7"]));
        assert_eq!(strings(2), some(&["true", "false", "true"]));
        assert_eq!(back.to_matrix().unwrap().get(1, 1), 3.5);
        let unknown = Matrix::from_dense_values(1, 4, vec![5.0, 1.0, 0.0, 0.0]).unwrap();
        let row = decode(&unknown, spec, &meta).unwrap();
        assert_eq!(row.columns()[0], Column::Strings(vec![None]));
        assert_eq!(row.columns()[2], Column::Strings(vec![None]));
    }

    #[test]
    fn bare_words_are_quoted_outside_strings() {
        assert_eq!(
            quote_bare_words("{ids:true, recode:[1, -2e-3], \"x:y\": [\"a b\"]}"),
            "{\"ids\":true, \"recode\":[1, -2e-3], \"x:y\": [\"a b\"]}"
        );
        assert_eq!(
            quote_bare_words("{bin:[{id:1, method:equi-width, x:null}]}"),
            "{\"bin\":[{\"id\":1, \"method\":\"equi-width\", \"x\":null}]}"
        );
    }

    /// SystemDS 3.4's output for `transformencode(target=as.frame(X), spec="{ids:true,
    /// recode:[1,2]}")` with X = [3 1.5; 2 NaN; 3 7; 1e-5 2; 4 1.5]: codes by first appearance,
    /// NaN a token of its own.
    #[test]
    fn recode_numbers_codes_by_first_appearance() {
        let nan = f64::NAN;
        let f = frame(5, 2, &[3.0, 1.5, 2.0, nan, 3.0, 7.0, 1e-5, 2.0, 4.0, 1.5]);
        let (x, meta) = encode(&f, "{ids:true,recode:[1,2]}").unwrap();
        assert_eq!(
            rows(&x),
            [[1.0, 1.0], [2.0, 2.0], [1.0, 3.0], [3.0, 4.0], [4.0, 1.0]]
        );
        assert_eq!(meta.rows(), 4);
        let Column::Strings(c2) = &meta.columns()[1] else {
            panic!("meta columns are strings")
        };
        let c2: Vec<_> = c2.iter().map(|c| c.as_deref().unwrap()).collect();
        assert_eq!(c2, ["2.0·4", "1.5·1", "7.0·3", "NaN·2"]);
        let Column::Strings(c1) = &meta.columns()[0] else {
            panic!("meta columns are strings")
        };
        let c1: Vec<_> = c1.iter().map(|c| c.as_deref().unwrap()).collect();
        assert_eq!(c1, ["2.0·2", "3.0·1", "1.0E-5·3", "4.0·4"]);
    }

    /// SystemDS 3.4: dummy coding widens columns in place; applying the meta to new data
    /// codes unknown tokens NaN (recode) or zeros (dummy), and a column typed INT32 spells
    /// 0 as `0`, not as the BOOLEAN column's `false`.
    #[test]
    fn dummycode_and_apply_match_systemds() {
        let f = frame(
            4,
            3,
            &[1.0, 0.0, 2.5, 0.0, 1.0, 3.5, 1.0, 1.0, 2.5, 0.0, 0.0, -1.0],
        );
        let spec = "{ids: true, recode:[2], dummycode:[1,3]}";
        let (x, meta) = encode(&f, spec).unwrap();
        assert_eq!(rows(&x)[1], [0.0, 1.0, 2.0, 0.0, 1.0, 0.0]);
        let y = frame(2, 3, &[0.0, 5.0, 9.0, 1.0, 0.0, 2.5]);
        let a = rows(&apply(&y, spec, &meta).unwrap());
        assert_eq!(a[0][..2], [0.0, 1.0]);
        assert!(a[0][2].is_nan() && a[1][2].is_nan());
        assert_eq!(a[0][3..], [0.0, 0.0, 0.0]);
        assert_eq!(a[1][3..], [1.0, 0.0, 0.0]);
    }

    /// Java's `HashMap` iteration order, past resizes: orders printed by JDK 17 for
    /// `new HashMap<>()` filled with "z".."a", and with `Double.toString(1.5 * i)` for i in
    /// 0..40 (listed by insertion number).
    #[test]
    fn hash_map_order_follows_java() {
        assert_eq!(java_string_hash("hello"), 99162322);
        let letters: Vec<String> = (0..26)
            .rev()
            .map(|i| ((b'a' + i) as char).to_string())
            .collect();
        let order: String = java_hash_map_order(&letters)
            .into_iter()
            .map(|k| letters[k].as_str())
            .collect();
        assert_eq!(order, "abcdefghijklmnopqrstuvwxyz");
        let halves: Vec<String> = (0..40).map(|i| format_double(1.5 * i as f64)).collect();
        let order: Vec<usize> = java_hash_map_order(&halves)
            .into_iter()
            .map(|k| k + 1)
            .collect();
        assert_eq!(
            order,
            [
                35, 21, 16, 19, 32, 17, 34, 15, 29, 20, 28, 31, 18, 30, 33, 27, 8, 11, 1, 22, 25,
                40, 26, 9, 3, 23, 2, 5, 14, 37, 4, 7, 12, 36, 39, 6, 10, 13, 24, 38
            ]
        );
    }

    #[test]
    fn columns_by_name_and_bad_specs() {
        let f = frame(2, 2, &[1.0, 2.0, 3.0, 2.0]);
        let (x, _) = encode(&f, "{\"recode\":[\"C2\"]}").unwrap();
        assert_eq!(rows(&x), [[1.0, 1.0], [3.0, 1.0]]);
        for bad in [
            "{recode:[\"C3\"]}",
            "{ids:true, recode:[3]}",
            "{ids:true, recode:[\"C1\"]}",
            "[1]",
            "{recode",
        ] {
            assert!(
                matches!(encode(&f, bad), Err(RuntimeError::TransformSpec { .. })),
                "{bad}"
            );
        }
        for unsupported in [
            "{ids:true, bin:[{id:1, method:equi-width, numbins:3}]}",
            "{ids:true, hash:[1], K:10}",
        ] {
            assert!(
                matches!(encode(&f, unsupported), Err(RuntimeError::Unsupported(_))),
                "{unsupported}"
            );
        }
    }
}
