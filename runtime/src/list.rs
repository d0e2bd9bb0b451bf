//! DML lists at run time: creating, indexing, appending to and updating [`List`] values, and
//! taking an element out (`as.scalar(L[i])`, `as.matrix(L[i])`), as SystemDS's `ListObject`
//! and its list instructions do. Lists are immutable values: every operation makes a new list
//! sharing the elements.

use crate::error::{Conversion, Result, RuntimeError};
use crate::value::{List, Value};
use std::sync::Arc;

/// `list(...)`: the values, named when `names` is given.
pub fn new(items: Vec<Value>, names: Option<&[String]>) -> Value {
    Value::List(Arc::new(List {
        items,
        names: names.map(<[String]>::to_vec),
    }))
}

/// The 1-based inclusive positions `lower..=upper` of `list` that an index names: two integer
/// bounds, or a name as both bounds (`L["b"]`).
fn positions(list: &List, lower: &Value, upper: &Value) -> Result<(usize, usize)> {
    if let Value::Str(name) = lower {
        let at = list.position(name).ok_or_else(|| {
            RuntimeError::Conversion(Conversion::ListName {
                name: name.to_string(),
            })
        })?;
        return Ok((at + 1, at + 1));
    }
    let (lo, hi) = (lower.as_i64()?, upper.as_i64()?);
    if lo < 1 || hi < lo || hi as u64 > list.len() as u64 {
        return Err(RuntimeError::Conversion(Conversion::ListIndex {
            lower: lo,
            upper: hi,
            length: list.len(),
        }));
    }
    Ok((lo as usize, hi as usize))
}

/// `L[lower:upper]` or `L["name"]`: a list of those elements (with their names).
pub fn index(list: &List, lower: &Value, upper: &Value) -> Result<Value> {
    let (lo, hi) = positions(list, lower, upper)?;
    Ok(Value::List(Arc::new(list.slice(lo, hi))))
}

/// `append(L, x)`: a one-element list adds its element with its name (SystemDS unfolds it);
/// anything else is added as one element. A named list takes named elements only.
pub fn append(list: &List, x: &Value) -> Result<Value> {
    let (item, name) = match x {
        Value::List(l) if l.len() == 1 => {
            (l.items[0].clone(), l.names.as_ref().map(|n| n[0].clone()))
        }
        other => (other.clone(), None),
    };
    let mut out = list.clone();
    if let Some(names) = &mut out.names {
        names.push(name.ok_or(RuntimeError::Conversion(Conversion::UnnamedIntoNamedList))?);
    }
    out.items.push(item);
    Ok(Value::List(Arc::new(out)))
}

/// `L[lower:upper] = x`: one position takes x (a one-element list: its element); a range takes
/// the elements of a list of as many.
pub fn set(list: &List, lower: &Value, upper: &Value, x: &Value) -> Result<Value> {
    let (lo, hi) = positions(list, lower, upper)?;
    let n = hi - lo + 1;
    let items: Vec<Value> = match x {
        Value::List(l) if l.len() == n => l.items.clone(),
        Value::List(l) if n > 1 || l.len() != 1 => {
            return Err(RuntimeError::Conversion(Conversion::ListSetLength {
                positions: n,
                given: l.len(),
            }))
        }
        other if n == 1 => vec![other.clone()],
        _ => {
            return Err(RuntimeError::Conversion(Conversion::ListSetLength {
                positions: n,
                given: 1,
            }))
        }
    };
    let mut out = list.clone();
    for (k, item) in items.into_iter().enumerate() {
        out.items[lo - 1 + k] = item;
    }
    Ok(Value::List(Arc::new(out)))
}

/// Result `output` of `[L2, e] = remove(L, pos)`, as SystemDS's `ListObject.remove`: L
/// without its element at the 1-based `pos` (and that element's name) for output 0, that
/// element alone in an unnamed list for output 1.
pub fn remove(list: &List, pos: &Value, output: u8) -> Result<Value> {
    let at = pos.as_i64()?;
    if at < 1 || at as u64 > list.len() as u64 {
        return Err(RuntimeError::Conversion(Conversion::ListIndex {
            lower: at,
            upper: at,
            length: list.len(),
        }));
    }
    let at = at as usize - 1;
    if output == 1 {
        return Ok(new(vec![list.items[at].clone()], None));
    }
    let mut out = list.clone();
    out.items.remove(at);
    if let Some(names) = &mut out.names {
        names.remove(at);
    }
    Ok(Value::List(Arc::new(out)))
}

/// The matrices of `list` in order, those of nested lists flattened in place: what `cbind(L)`
/// and `rbind(L)` bind, as SystemDS's `ExecutionContext.getMatricesFromList` (a scalar or
/// string element is an error there too).
pub fn matrices(list: &List, out: &mut Vec<Arc<crate::matrix::Matrix>>) -> Result<()> {
    for item in &list.items {
        match item {
            Value::Matrix(m) => out.push(Arc::clone(m)),
            Value::List(inner) => matrices(inner, out)?,
            other => {
                return Err(RuntimeError::Conversion(Conversion::ListElement {
                    cast: "cbind or rbind of a list (matrices and lists only)",
                    found: other.type_name(),
                }))
            }
        }
    }
    Ok(())
}

/// `as.list(L)`, as SystemDS's list unnesting: the element of a list whose only element is
/// a list, else `L` itself.
pub fn unnest(list: &Value) -> Value {
    match list {
        Value::List(l) if l.len() == 1 && l.items[0].is_list() => l.items[0].clone(),
        other => other.clone(),
    }
}

/// `as.scalar(L[i])` (`matrix` false) or `as.matrix(L[i])` (`matrix` true) of a list of one
/// element: the element as it is (a scalar keeps its own type), a 1x1 matrix's cell for
/// `as.scalar`, a scalar as a 1x1 matrix for `as.matrix`.
///
/// `as.matrix` of a longer list of scalars is the column of their values, as SystemDS's.
/// The one element of `list`, which `cast` (`as.frame(L[i])`) takes out.
pub fn single_element<'l>(list: &'l List, cast: &'static str) -> Result<&'l Value> {
    match list.items.as_slice() {
        [item] => Ok(item),
        _ => Err(RuntimeError::Conversion(Conversion::ListCast {
            cast,
            length: list.len(),
        })),
    }
}

pub fn cast_element(list: &List, matrix: bool) -> Result<Value> {
    let cast = if matrix { "as.matrix" } else { "as.scalar" };
    if matrix && list.len() > 1 {
        let values = list
            .items
            .iter()
            .map(|item| match item {
                Value::Matrix(_) | Value::List(_) => {
                    Err(RuntimeError::Conversion(Conversion::ListElement {
                        cast: "as.matrix of a list of several elements (scalars only)",
                        found: item.type_name(),
                    }))
                }
                scalar => scalar.as_f64(),
            })
            .collect::<Result<Vec<f64>>>()?;
        let rows = values.len();
        return Ok(Value::matrix(crate::matrix::Matrix::from_dense_values(
            rows, 1, values,
        )?));
    }
    if list.len() != 1 {
        return Err(RuntimeError::Conversion(Conversion::ListCast {
            cast,
            length: list.len(),
        }));
    }
    let item = &list.items[0];
    let wrong = || {
        RuntimeError::Conversion(Conversion::ListElement {
            cast,
            found: item.type_name(),
        })
    };
    Ok(match (item, matrix) {
        (Value::Matrix(_), true) => item.clone(),
        (Value::Matrix(m), false) => {
            if m.shape() != (1, 1) {
                return Err(RuntimeError::Conversion(Conversion::ExpectedScalar {
                    shape: m.shape(),
                }));
            }
            Value::Double(m.get(0, 0))
        }
        (Value::Frame(f), true) => Value::matrix(f.to_matrix()?),
        (Value::List(_) | Value::Frame(_), _) | (Value::Str(_), true) => return Err(wrong()),
        (scalar, true) => Value::matrix(crate::matrix::Matrix::scalar(scalar.as_f64()?)),
        (scalar, false) => scalar.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(v: &[i64]) -> Vec<Value> {
        v.iter().map(|&x| Value::Int(x)).collect()
    }

    #[test]
    fn index_append_set_and_cast_follow_systemds() {
        let l = new(ints(&[1, 2, 3]), None);
        let l = l.as_list().unwrap();
        let sub = index(l, &Value::Int(2), &Value::Int(3)).unwrap();
        assert_eq!(sub.as_list().unwrap().items, ints(&[2, 3]));
        assert!(index(l, &Value::Int(0), &Value::Int(0)).is_err());
        assert!(index(l, &Value::Int(2), &Value::Int(4)).is_err());
        let one = index(l, &Value::Int(3), &Value::Int(3)).unwrap();
        assert_eq!(
            cast_element(one.as_list().unwrap(), false).unwrap(),
            Value::Int(3)
        );
        assert!(cast_element(sub.as_list().unwrap(), false).is_err());
        let m = cast_element(one.as_list().unwrap(), true).unwrap();
        assert_eq!(m.as_matrix().unwrap().get(0, 0), 3.0);
        // as.matrix of several scalars is their column (lmPredictStats); not of matrices.
        let col = cast_element(sub.as_list().unwrap(), true).unwrap();
        let col = col.as_matrix().unwrap();
        assert_eq!((col.shape(), col.get(1, 0)), ((2, 1), 3.0));
        let nested = new(vec![m.clone(), m], None);
        assert!(cast_element(nested.as_list().unwrap(), true).is_err());
        // A one-element list is unfolded; a longer one nests.
        let a = append(l, &one).unwrap();
        assert_eq!(a.as_list().unwrap().items, ints(&[1, 2, 3, 3]));
        let b = append(l, &sub).unwrap();
        assert_eq!(b.as_list().unwrap().len(), 4);
        assert!(b.as_list().unwrap().items[3].is_list());
        let s = set(l, &Value::Int(2), &Value::Int(2), &Value::str("x")).unwrap();
        assert_eq!(s.as_list().unwrap().items[1], Value::str("x"));
        assert!(set(l, &Value::Int(1), &Value::Int(2), &Value::Int(0)).is_err());
    }

    #[test]
    fn remove_splits_off_one_element_and_as_list_unnests_a_single_list() {
        let names = vec!["a".to_string(), "b".to_string(), "c".to_string()];
        let l = new(ints(&[1, 2, 3]), Some(&names));
        let l = l.as_list().unwrap();
        let rest = remove(l, &Value::Int(2), 0).unwrap();
        let rest = rest.as_list().unwrap();
        assert_eq!(rest.items, ints(&[1, 3]));
        assert_eq!(rest.names, Some(vec!["a".to_string(), "c".to_string()]));
        let taken = remove(l, &Value::Double(2.0), 1).unwrap();
        let taken = taken.as_list().unwrap();
        assert_eq!(
            (taken.items.clone(), taken.names.clone()),
            (ints(&[2]), None)
        );
        assert!(remove(l, &Value::Int(0), 0).is_err());
        assert!(remove(l, &Value::Int(4), 1).is_err());
        // A list holding one list unnests; any other list stays as it is.
        let inner = new(ints(&[7, 8]), None);
        let outer = new(vec![inner.clone()], None);
        assert_eq!(unnest(&outer), inner);
        assert_eq!(unnest(&inner), inner);
        let two = new(vec![inner.clone(), inner], None);
        assert_eq!(unnest(&two), two);
    }

    #[test]
    fn named_lists_are_indexed_by_name_and_take_named_elements_only() {
        let names = vec!["a".to_string(), "b".to_string()];
        let l = new(ints(&[1, 2]), Some(&names));
        let l = l.as_list().unwrap();
        let b = index(l, &Value::str("b"), &Value::str("b")).unwrap();
        assert_eq!(b.as_list().unwrap().names, Some(vec!["b".to_string()]));
        assert!(index(l, &Value::str("c"), &Value::str("c")).is_err());
        assert!(append(l, &Value::Int(3)).is_err());
        let c = new(ints(&[3]), Some(&["c".to_string()]));
        let appended = append(l, &c).unwrap();
        assert_eq!(appended.as_list().unwrap().position("c"), Some(2));
    }
}
