//! The compiler's error type: who is at fault, what happened, and where in the script.

use crate::span::{SourceFile, Span};
use codespan_reporting::files::{self, Files, SimpleFile};
use thiserror::Error;

/// Who has to act on an error: the core's classification, shared by every crate.
pub use lafuse_core::Fault;

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
    /// More than the machine can give, located where the script asks for it.
    pub fn resource(message: impl Into<String>, span: Option<Span>) -> Self {
        CompileError {
            fault: Fault::Resource,
            message: message.into(),
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

    /// Who has to act on this error.
    pub fn fault(&self) -> Fault {
        self.fault
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
        use codespan_reporting::term::{self, termcolor::NoColor, Config};

        let mut diagnostic = Diagnostic::error().with_message(self.headline());
        let file = match self.span {
            Some(span) => {
                let file = Excerpt::new(source, span);
                diagnostic = diagnostic.with_labels(vec![Label::primary((), file.label.clone())]);
                file
            }
            None => Excerpt::whole(source),
        };
        diagnostic = diagnostic.with_notes(self.notes.clone());
        let mut out = NoColor::new(Vec::new());
        if term::emit(&mut out, &Config::default(), &file, &diagnostic).is_err() {
            return self.to_string();
        }
        String::from_utf8_lossy(&out.into_inner()).into_owned()
    }
}

/// Longest source line a diagnostic shows whole. A machine-written script can put thousands
/// of terms on one line; its error shows a window of the line around the error instead (with
/// `…` where text is cut), under the error's true line and column.
const MAX_SHOWN_LINE: usize = 160;

/// The script as a diagnostic shows it: the text, with the error's line cut to a window
/// around the error when it is longer than [`MAX_SHOWN_LINE`].
struct Excerpt<'s> {
    /// The original text.
    original: &'s str,
    /// The text shown: the original, or the original with the error's line cut.
    file: SimpleFile<&'s str, String>,
    /// The label's byte range in the text shown.
    label: std::ops::Range<usize>,
    /// Where the cut line's window starts in `original` and in the text shown (`None`: not
    /// cut).
    window: Option<(usize, usize)>,
}

impl<'s> Excerpt<'s> {
    fn whole(source: &'s SourceFile) -> Self {
        Self::shown(source, source.text.clone(), 0..0, None)
    }

    fn new(source: &'s SourceFile, span: Span) -> Self {
        let text = source.text.as_str();
        // Within the text and on character boundaries (a span handed in by an embedder, with
        // a DAG, need not be).
        let floor = |mut b: usize| {
            b = b.min(text.len());
            while !text.is_char_boundary(b) {
                b -= 1;
            }
            b
        };
        let start = floor(span.start as usize);
        let end = floor(span.end as usize).max(start);
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        if line_end - line_start <= MAX_SHOWN_LINE {
            return Self::shown(source, text.to_string(), start..end, None);
        }
        let from = floor(start.saturating_sub(MAX_SHOWN_LINE / 3).max(line_start));
        let to = floor((from + MAX_SHOWN_LINE).min(line_end));
        let (head, tail) = (
            if from > line_start { "… " } else { "" },
            if to < line_end { " …" } else { "" },
        );
        let shown = format!(
            "{}{head}{}{tail}{}",
            &text[..line_start],
            &text[from..to],
            &text[line_end..]
        );
        let at = line_start + head.len();
        let label = at + (start - from)..at + (end.min(to).max(start) - from);
        Self::shown(source, shown, label, Some((from, at)))
    }

    fn shown(
        source: &'s SourceFile,
        text: String,
        label: std::ops::Range<usize>,
        window: Option<(usize, usize)>,
    ) -> Self {
        Excerpt {
            original: &source.text,
            file: SimpleFile::new(&source.name, text),
            label,
            window,
        }
    }
}

/// The shown text's lines as `SimpleFile` has them; only columns are the original line's.
impl<'a> Files<'a> for Excerpt<'_> {
    type FileId = ();
    type Name = &'a str;
    type Source = &'a str;

    fn name(&'a self, (): ()) -> Result<&'a str, files::Error> {
        Ok(self.file.name())
    }

    fn source(&'a self, (): ()) -> Result<&'a str, files::Error> {
        Ok(self.file.source().as_str())
    }

    fn line_index(&'a self, (): (), byte: usize) -> Result<usize, files::Error> {
        self.file.line_index((), byte)
    }

    fn line_range(&'a self, (): (), line: usize) -> Result<std::ops::Range<usize>, files::Error> {
        self.file.line_range((), line)
    }

    /// The column in the original line, also where the shown line is cut.
    fn column_number(&'a self, (): (), line: usize, byte: usize) -> Result<usize, files::Error> {
        let range = self.line_range((), line)?;
        match self.window {
            Some((from, at)) if byte >= at && byte >= range.start && byte < range.end => {
                let line_start = self.original[..from].rfind('\n').map_or(0, |i| i + 1);
                let original = (from + (byte - at)).min(self.original.len());
                Ok(self.original[line_start..original].chars().count() + 1)
            }
            _ => Ok(files::column_index(self.file.source(), range, byte) + 1),
        }
    }
}

pub type Result<T, E = CompileError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_show_a_window_at_the_true_line_and_column() {
        let long = vec!["X"; 2000].join(" + ");
        let text = format!("X = 1\ny = {long} + foo + é + {long}\nprint(y)\n");
        let at = text.find("foo").unwrap();
        let source = SourceFile::new("t.dml", text.clone());
        let shown = CompileError::user("undefined 'foo'", Span::new(at, at + 3)).render(&source);
        let line_start = text.find("y = ").unwrap();
        let column = text[line_start..at].chars().count() + 1;
        assert!(shown.contains(&format!("t.dml:2:{column}")), "{shown}");
        assert!(shown.contains("… ") && shown.contains(" …"), "{shown}");
        assert!(shown.contains("foo + é"), "{shown}");
        assert!(shown.lines().all(|l| l.chars().count() < 200), "{shown}");
        // The caret is under `foo` in the window.
        let lines: Vec<&str> = shown.lines().collect();
        let code = lines.iter().position(|l| l.contains("foo + é")).unwrap();
        let caret = lines[code + 1].chars().position(|c| c == '^').unwrap();
        let under: String = lines[code].chars().skip(caret).take(3).collect();
        assert_eq!(under, "foo", "{shown}");

        // A short line is shown whole.
        let source = SourceFile::new("t.dml", "x = 1\ny = x + foo\n");
        let shown = CompileError::user("undefined 'foo'", Span::new(14, 17)).render(&source);
        assert!(
            shown.contains("t.dml:2:9") && shown.contains("y = x + foo"),
            "{shown}"
        );
        assert!(!shown.contains('…'), "{shown}");

        // Spans past the end or inside a character are rendered, not a panic.
        let source = SourceFile::new("t.dml", "x = é\n");
        for (a, b) in [(5, 6), (4, 99), (99, 120), (6, 5)] {
            let shown = CompileError::user("here", Span::new(a, b)).render(&source);
            assert!(shown.contains("error: here"), "{shown}");
        }
    }
}
