//! Source locations: byte ranges into one source file, resolvable to line and column.

use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};

/// A half-open byte range `[start, end)` into the source text of one script.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    /// The smallest span covering both `self` and `other`.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// A script's name and text, kept together so errors can quote the offending line, and the
/// files loaded on its behalf (`source(...)`, the built-in path).
///
/// Every loaded file is placed in one address space with the script: it starts at a byte
/// offset past the end of the script and of every file loaded before it ([`SourceFile::load`]),
/// so a plain [`Span`] locates text in any of them and [`SourceFile::in_file`] says in which.
/// The loaded files are shared by the clones of a `SourceFile` (the caller's copy renders the
/// errors the compiler found in a file it loaded); loading the same file again reuses its
/// place, so running a script twice gives the same spans.
#[derive(Clone, Debug)]
pub struct SourceFile {
    pub name: String,
    pub text: String,
    loaded: Arc<Mutex<Vec<Arc<LoadedFile>>>>,
}

/// A file loaded beside a script, at its place in the script's address space.
#[derive(Debug, PartialEq, Eq)]
pub struct LoadedFile {
    pub name: String,
    pub text: String,
    /// Byte offset of the file's first byte in the script's address space.
    pub base: u32,
}

/// Bytes left between files in the address space, so a span ending at a file's end never
/// touches the next file's first byte.
const FILE_GAP: usize = 1;

impl SourceFile {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> SourceFile {
        SourceFile {
            name: name.into(),
            text: text.into(),
            loaded: Arc::default(),
        }
    }

    /// Places a file loaded on the script's behalf in its address space (where an identical
    /// file, same name and text, was placed before, there again) and returns it.
    pub fn load(&self, name: &str, text: String) -> Arc<LoadedFile> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(file) = loaded.iter().find(|f| f.name == name && f.text == text) {
            return file.clone();
        }
        let end = loaded
            .last()
            .map_or(self.text.len(), |f| f.base as usize + f.text.len());
        let file = Arc::new(LoadedFile {
            name: name.to_string(),
            text,
            base: (end + FILE_GAP) as u32,
        });
        loaded.push(file.clone());
        file
    }

    /// Calls `f` with the name and text of the file holding `offset` and `offset` within that
    /// file (borrowed: `line_col` runs per explained hop, so nothing is copied).
    pub fn in_file<R>(&self, offset: u32, f: impl FnOnce(&str, &str, u32) -> R) -> R {
        let loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        match loaded.iter().rev().find(|file| offset >= file.base) {
            Some(file) => f(&file.name, &file.text, offset - file.base),
            None => f(&self.name, &self.text, offset),
        }
    }

    /// 1-based line and column (in characters) of a byte offset, in the file holding it.
    pub fn line_col(&self, offset: u32) -> (usize, usize) {
        self.in_file(offset, |_, text, local| line_col_in(text, local))
    }
}

/// 1-based line and column (in characters) of a byte offset into `text`.
pub fn line_col_in(text: &str, offset: u32) -> (usize, usize) {
    let mut offset = (offset as usize).min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = text[line_start..offset].chars().count() + 1;
    (line, col)
}
