//! Every crate's error types are enums of causes: no variant of an error enum carries a bare
//! `String`, and no error struct carries its message as a `String` field, so what went wrong
//! is a variant with the values that describe it (shapes, paths, names, a nested typed error),
//! not text assembled where it happened. Checked on the sources of every crate of the
//! workspace.

use std::path::{Path, PathBuf};

/// The source folders of the workspace's crates.
const CRATE_SOURCES: [&str; 7] = [
    "core/src",
    "compiler/src",
    "runtime/src",
    "skeletons/src",
    "codegen/src",
    "src",
    "cli/src",
];

/// A `pub enum` found in a source file: its name, whether it is an error type, and the
/// variants of its body that carry a bare `String` (`Name(String)`).
struct Enum {
    name: String,
    is_error: bool,
    bare_string_variants: Vec<String>,
}

/// The `pub enum`s of one file's source. An enum is an error type where its name ends in
/// `Error`, it derives `Error` (thiserror), or the file implements `std::error::Error` for it.
fn enums_of(source: &str) -> Vec<Enum> {
    items_of(source, "pub enum ", carries_bare_string)
}

/// The `pub struct`s of one file's source, as [`enums_of`] finds enums; their "variants" are
/// the fields that make them message structs: `message: String` (or `msg`), or a tuple
/// struct's lone `String`. (A `String` beside typed fields, such as the system's description
/// of an I/O failure next to its kind, is text produced elsewhere and allowed.)
fn structs_of(source: &str) -> Vec<Enum> {
    items_of(source, "pub struct ", holds_a_message)
}

/// The items of `source` declared with `keyword`, with the lines of their bodies that `flag`
/// picks out.
fn items_of(source: &str, keyword: &str, flag: fn(&str) -> bool) -> Vec<Enum> {
    let lines: Vec<&str> = source.lines().collect();
    let mut found = Vec::new();
    for (k, line) in lines.iter().enumerate() {
        let Some(rest) = line.trim_start().strip_prefix(keyword) else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The attributes and doc comments right above the enum.
        let derives_error = lines[..k]
            .iter()
            .rev()
            .take_while(|l| {
                let l = l.trim_start();
                l.starts_with("#[") || l.starts_with("///") || l.starts_with("//")
            })
            .any(|l| l.contains("derive(") && l.contains("Error"));
        let implements_error = source.contains(&format!("impl std::error::Error for {name} "))
            || source.contains(&format!("impl Error for {name} "));
        // The body ends at the first line that closes it at the enum's own indentation.
        let indent = |l: &str| l.len() - l.trim_start().len();
        let enum_indent = indent(line);
        let bare_string_variants = if rest.trim_end().ends_with(';') {
            // A tuple struct on one line: `pub struct Message(pub String);`.
            let payload = rest.find('(').map_or("", |i| &rest[i..]);
            if holds_a_message(payload) {
                vec![line.trim().to_string()]
            } else {
                vec![]
            }
        } else {
            lines[k + 1..]
                .iter()
                .take_while(|l| !(l.trim_start().starts_with('}') && indent(l) == enum_indent))
                .map(|l| l.trim())
                .filter(|l| flag(l))
                .map(str::to_string)
                .collect()
        };
        found.push(Enum {
            is_error: name.ends_with("Error") || derives_error || implements_error,
            name,
            bare_string_variants,
        });
    }
    found
}

/// Whether a line of an enum body is a variant whose only payload is a `String`.
fn carries_bare_string(line: &str) -> bool {
    let Some(open) = line.find('(') else {
        return false;
    };
    let (variant, payload) = line.split_at(open);
    let is_variant = variant
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_uppercase())
        && variant.chars().all(|c| c.is_alphanumeric() || c == '_');
    let payload = payload.trim_end_matches(',').trim();
    is_variant && matches!(payload, "(String)" | "(std::string::String)")
}

/// Whether a line of a struct body is a `message: String` field, or a tuple struct's payload
/// is a lone `String`.
fn holds_a_message(line: &str) -> bool {
    let line = line
        .trim()
        .trim_end_matches(';')
        .trim_end_matches(',')
        .trim();
    let ty = match line.strip_prefix('(') {
        Some(tuple) => tuple.trim_end_matches(')').trim(),
        None => match line.split_once(':') {
            Some((name, ty))
                if matches!(
                    name.trim().strip_prefix("pub ").unwrap_or(name).trim(),
                    "message" | "msg"
                ) =>
            {
                ty.trim()
            }
            _ => return false,
        },
    };
    let ty = ty.strip_prefix("pub ").unwrap_or(ty).trim();
    matches!(ty, "String" | "std::string::String")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_error_enum_carries_a_bare_string() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut errors_seen = Vec::new();
    let mut offending = Vec::new();
    for dir in CRATE_SOURCES {
        let mut files = Vec::new();
        rust_files(&root.join(dir), &mut files);
        for file in files {
            let source = std::fs::read_to_string(&file).expect("a readable source file");
            let items = enums_of(&source).into_iter().chain(structs_of(&source));
            for e in items.filter(|e| e.is_error) {
                for variant in &e.bare_string_variants {
                    let file = file.strip_prefix(root).unwrap_or(&file);
                    offending.push(format!("{}: {}::{variant}", file.display(), e.name));
                }
                errors_seen.push(e.name);
            }
        }
    }
    // The scan found the error types it is about (an empty scan would pass anything).
    for name in [
        "RuntimeError",
        "FileError",
        "CodegenError",
        "EvalError",
        "SkeletonError",
        "CostModelError",
        "Error",
        "Usage",
        // The compiler's: the diagnostic, its causes, the plan verifiers' errors.
        "CompileError",
        "CompileCause",
        "LexError",
        "SyntaxError",
        "CheckError",
        "ShapeError",
        "DagError",
        "TypeRule",
        "Unsupported",
        "Internal",
        "VerifyError",
        "DagDefect",
        "PlanDefect",
    ] {
        assert!(
            errors_seen.iter().any(|e| e == name),
            "no error enum {name} found; seen: {errors_seen:?}"
        );
    }
    assert!(
        offending.is_empty(),
        "error variants or error struct fields carrying a bare String (give the variant the \
         values that describe the failure instead):\n{}",
        offending.join("\n")
    );
}

/// The check itself: it sees a bare `String` payload in an error enum, and nothing else.
#[test]
fn the_check_finds_bare_string_payloads() {
    let source = r#"
/// Why.
#[derive(Debug, Error)]
pub enum Broken {
    #[error("{0}")]
    User(String),
    Named { why: String },
    Typed(Cause),
}

pub enum Token {
    Ident(String),
}
"#;
    let enums = enums_of(source);
    assert_eq!(enums.len(), 2);
    assert!(enums[0].is_error);
    assert_eq!(enums[0].bare_string_variants, ["User(String),"]);
    assert!(!enums[1].is_error, "a token is not an error");

    // A message struct: an error whose what-went-wrong is a `String` field.
    let source = r#"
#[derive(Debug, Error)]
#[error("{message}")]
pub struct CompileError {
    pub cause: Cause,
    pub message: String,
    pub span: Option<Span>,
}

#[derive(Debug, Error)]
pub struct VerifyError(pub String);

/// Not an error.
pub struct Token {
    pub text: String,
}

#[derive(Debug, Error)]
#[error("{detail}")]
pub struct IoFailure {
    pub kind: ErrorKind,
    pub detail: String,
}
"#;
    let structs = structs_of(source);
    assert_eq!(structs.len(), 4);
    assert!(structs[0].is_error && structs[1].is_error && !structs[2].is_error);
    assert!(structs[3].is_error && structs[3].bare_string_variants.is_empty());
    assert_eq!(structs[0].bare_string_variants, ["pub message: String,"]);
    assert_eq!(
        structs[1].bare_string_variants,
        ["pub struct VerifyError(pub String);"]
    );
}
