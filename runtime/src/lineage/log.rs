//! The lineage log: a lineage DAG as text, one item per line, inputs before the items that
//! read them, each item once (LIMA section 3.1, "serialize" and "deserialize").
//!
//! A line is `(<n>) (<K>) "<opcode>" "<data>" (<input n>) ...`: `n` numbers the items of the
//! log from 1 in that order (so equal DAGs give equal logs, whatever their items' process ids),
//! `K` is the item's kind letter, opcode and data are JSON strings (any text reads back
//! exactly), and the inputs are the numbers of earlier lines. The last line is the root.
//! Writing and reading walk with explicit stacks: any depth is fine.

use super::item::{ItemKind, Lineage};
use std::collections::HashMap;
use std::fmt::Write;
use thiserror::Error;

/// The log of the DAG rooted at `root`.
///
/// Structurally equal sub-DAGs are written once, whether or not they share items (an
/// unfused run shares the literal `4` of `X / 4` with the `4` of `matrix(.., 4, 5)` where a
/// fused operator's patch made its own): the log depends on what was computed, never on how
/// the items happened to be shared.
pub fn serialize(root: &Lineage) -> String {
    let mut text = String::new();
    let mut number: HashMap<u64, usize> = HashMap::new();
    // Lines written, keyed by what a line says: kind, opcode, data and the numbers of its
    // inputs. The inputs are numbered already, so two items get the same key exactly when
    // their sub-DAGs are equal: hash-consing in one pass, no walk per item.
    let mut written: HashMap<(ItemKind, &str, &str, Vec<usize>), usize> = HashMap::new();
    let items = root.topological();
    for item in &items {
        let inputs: Vec<usize> = item.inputs().iter().map(|i| number[&i.id()]).collect();
        let key = (item.kind(), item.opcode(), item.data(), inputs);
        if let Some(&n) = written.get(&key) {
            number.insert(item.id(), n);
            continue;
        }
        let n = written.len() + 1;
        number.insert(item.id(), n);
        let quote = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
        let _ = write!(
            text,
            "({n}) ({}) {} {}",
            item.kind().letter(),
            quote(item.opcode()),
            quote(item.data())
        );
        for input in &key.3 {
            let _ = write!(text, " ({input})");
        }
        text.push('\n');
        written.insert(key, n);
    }
    text
}

/// What is wrong with a lineage log, and on which line (1-based).
#[derive(Debug, Error, PartialEq)]
#[error("lineage log line {line}: {defect}")]
pub struct LogError {
    pub line: usize,
    pub defect: LogDefect,
}

#[derive(Debug, Error, PartialEq)]
pub enum LogDefect {
    #[error("expected `(<number>)` at the start of the line")]
    Number,
    #[error("item number {found} out of order (expected {expected})")]
    OutOfOrder { found: usize, expected: usize },
    #[error("expected the kind as `(L)`, `(C)`, `(I)`, `(P)` or `(D)`")]
    Kind,
    #[error("expected the opcode and data as two JSON strings")]
    Strings,
    #[error("input ({input}) is not an earlier line")]
    UnknownInput { input: usize },
    #[error("expected `(<input number>)`")]
    Input,
    #[error("the log is empty")]
    Empty,
}

/// The DAG a log describes; its root is the last line's item.
pub fn deserialize(text: &str) -> Result<Lineage, LogError> {
    deserialize_items(text)?.pop().ok_or(LogError {
        line: 0,
        defect: LogDefect::Empty,
    })
}

/// Every item of a log, in the order of its lines: item `(n)` at index `n - 1`, inputs
/// before the items that read them (so a consumer can name the line of an item it rejects,
/// as `lafuse recompute` does). Empty for an empty log.
pub fn deserialize_items(text: &str) -> Result<Vec<Lineage>, LogError> {
    let mut items: Vec<Lineage> = Vec::new();
    for (k, line) in text.lines().enumerate() {
        let fail = |defect| LogError {
            line: k + 1,
            defect,
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let (number, rest) = parenthesized(line).ok_or_else(|| fail(LogDefect::Number))?;
        let number: usize = number.parse().map_err(|_| fail(LogDefect::Number))?;
        if number != items.len() + 1 {
            return Err(fail(LogDefect::OutOfOrder {
                found: number,
                expected: items.len() + 1,
            }));
        }
        let (kind, rest) = parenthesized(rest).ok_or_else(|| fail(LogDefect::Kind))?;
        let mut letters = kind.chars();
        let kind = match (letters.next(), letters.next()) {
            (Some(c), None) => ItemKind::from_letter(c).ok_or_else(|| fail(LogDefect::Kind))?,
            _ => return Err(fail(LogDefect::Kind)),
        };
        let mut strings = serde_json::Deserializer::from_str(rest).into_iter::<String>();
        let opcode = strings
            .next()
            .and_then(Result::ok)
            .ok_or_else(|| fail(LogDefect::Strings))?;
        let data = strings
            .next()
            .and_then(Result::ok)
            .ok_or_else(|| fail(LogDefect::Strings))?;
        let mut rest = &rest[strings.byte_offset()..];
        let mut inputs = Vec::new();
        while !rest.trim().is_empty() {
            let (input, after) = parenthesized(rest).ok_or_else(|| fail(LogDefect::Input))?;
            let input: usize = input.parse().map_err(|_| fail(LogDefect::Input))?;
            let item = input
                .checked_sub(1)
                .and_then(|i| items.get(i))
                .ok_or_else(|| fail(LogDefect::UnknownInput { input }))?;
            inputs.push(item.clone());
            rest = after;
        }
        items.push(Lineage::new(kind, opcode, data, inputs));
    }
    Ok(items)
}

/// `(<inner>) rest` → `(inner, rest)`, after leading spaces.
fn parenthesized(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start().strip_prefix('(')?;
    let end = s.find(')')?;
    Some((&s[..end], &s[end + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Lineage {
        let x = Lineage::creation("read", "{\"path\":\"a b.csv\"}");
        let two = Lineage::literal("2·INT");
        let xx = Lineage::instruction("b(*)", "", vec![x.clone(), x.clone()]);
        Lineage::instruction("b(+)", "", vec![xx, two])
    }

    #[test]
    fn logs_read_back_to_equal_dags() {
        let root = sample();
        let log = serialize(&root);
        assert_eq!(
            log,
            "(1) (C) \"read\" \"{\\\"path\\\":\\\"a b.csv\\\"}\"\n\
             (2) (I) \"b(*)\" \"\" (1) (1)\n\
             (3) (L) \"\" \"2·INT\"\n\
             (4) (I) \"b(+)\" \"\" (2) (3)\n"
        );
        let back = deserialize(&log).unwrap();
        assert_eq!(back, root);
        assert_eq!(serialize(&back), log, "logs do not depend on item ids");
    }

    #[test]
    fn logs_do_not_depend_on_how_items_are_shared() {
        // `x * x` over one read item, and over two equal ones (as a fused operator's patch
        // may make): the same computation, the same log.
        let shared = sample();
        let read = || Lineage::creation("read", "{\"path\":\"a b.csv\"}");
        let unshared = Lineage::instruction(
            "b(+)",
            "",
            vec![
                Lineage::instruction("b(*)", "", vec![read(), read()]),
                Lineage::literal("2·INT"),
            ],
        );
        assert_eq!(serialize(&unshared), serialize(&shared));
    }

    #[test]
    fn damaged_logs_name_the_line() {
        let err = deserialize("(1) (C) \"read\" \"x\"\n(2) (I) \"b(+)\" \"\" (1) (5)\n");
        assert_eq!(
            err.unwrap_err().to_string(),
            "lineage log line 2: input (5) is not an earlier line"
        );
        assert_eq!(
            deserialize("(1) (Q) \"\" \"\"").unwrap_err().defect,
            LogDefect::Kind
        );
        assert_eq!(deserialize("").unwrap_err().defect, LogDefect::Empty);
        assert_eq!(
            deserialize("(2) (L) \"\" \"1·INT\"").unwrap_err().defect,
            LogDefect::OutOfOrder {
                found: 2,
                expected: 1
            }
        );
    }
}
