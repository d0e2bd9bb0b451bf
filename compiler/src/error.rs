//! The compiler's error type: who is at fault, what happened, and where in the script.

use crate::span::{SourceFile, Span};
use thiserror::Error;

/// Who has to act on an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The script or its arguments are wrong (syntax, names, types, shapes).
    User,
    /// Valid input that lafuse does not implement yet.
    Unsupported,
    /// A bug in lafuse.
    Internal,
}

/// A compile-time error with an optional location in the script.
#[derive(Clone, Debug, Error, PartialEq)]
#[error("{}", self.headline())]
pub struct CompileError {
    pub fault: Fault,
    pub message: String,
    pub span: Option<Span>,
    /// Extra hints ("did you mean ...?", "declared here").
    pub notes: Vec<String>,
}

impl CompileError {
    pub fn user(message: impl Into<String>, span: Span) -> Self {
        CompileError {
            fault: Fault::User,
            message: message.into(),
            span: Some(span),
            notes: vec![],
        }
    }
    pub fn unsupported(what: impl Into<String>, span: Option<Span>) -> Self {
        CompileError {
            fault: Fault::Unsupported,
            message: format!("unsupported: {}", what.into()),
            span,
            notes: vec![],
        }
    }
    pub fn internal(message: impl Into<String>) -> Self {
        CompileError {
            fault: Fault::Internal,
            message: message.into(),
            span: None,
            notes: vec![],
        }
    }
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    fn headline(&self) -> String {
        match self.fault {
            Fault::Internal => format!(
                "internal error (a bug in lafuse, please report it): {}",
                self.message
            ),
            _ => self.message.clone(),
        }
    }

    /// Renders the error as `error: msg` with `file:line:col`, the source line and a caret,
    /// in the style of rustc (via codespan-reporting, no colours).
    pub fn render(&self, source: &SourceFile) -> String {
        use codespan_reporting::diagnostic::{Diagnostic, Label};
        use codespan_reporting::files::SimpleFile;
        use codespan_reporting::term::{self, termcolor::NoColor, Config};

        let file = SimpleFile::new(source.name.as_str(), source.text.as_str());
        let mut diagnostic = Diagnostic::error().with_message(self.headline());
        if let Some(span) = self.span {
            let range = span.start.min(source.text.len() as u32) as usize
                ..span.end.min(source.text.len() as u32) as usize;
            diagnostic = diagnostic.with_labels(vec![Label::primary((), range)]);
        }
        diagnostic = diagnostic.with_notes(self.notes.clone());
        let mut out = NoColor::new(Vec::new());
        if term::emit(&mut out, &Config::default(), &file, &diagnostic).is_err() {
            return self.to_string();
        }
        String::from_utf8_lossy(&out.into_inner()).into_owned()
    }
}

pub type Result<T, E = CompileError> = std::result::Result<T, E>;
