//! The engine's error type: a compile error or a runtime error, located in the script.

use lafuse_compiler::error::CompileError;
use lafuse_compiler::span::{SourceFile, Span};
use lafuse_core::Fault;
use lafuse_runtime::RuntimeError;
use thiserror::Error;

/// Anything that stops a script: compile errors (possibly several) or a runtime error at an
/// instruction. [`Error::render`] prints it with the offending script line and a caret.
#[derive(Debug, Error)]
pub enum Error {
    #[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
    Compile(Vec<CompileError>),
    #[error("{error}")]
    Runtime {
        error: RuntimeError,
        span: Option<Span>,
    },
    /// The script file itself cannot be read, or an argument is malformed.
    #[error("{0}")]
    Usage(String),
    /// A valid request outside a script that lafuse does not implement (an explain format or
    /// level this build cannot give); names the construct.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A bug in lafuse outside a script's execution (explain, calibrate).
    #[error("internal: {0}")]
    Internal(String),
    /// A machine profile or a cost-model override was refused; `context` names the file or
    /// argument.
    #[error("{context}: {error}")]
    CostModel {
        context: String,
        error: lafuse_compiler::fusion::CostModelError,
    },
}

impl From<CompileError> for Error {
    fn from(e: CompileError) -> Self {
        Error::Compile(vec![e])
    }
}

impl From<Vec<CompileError>> for Error {
    fn from(e: Vec<CompileError>) -> Self {
        Error::Compile(e)
    }
}

impl Error {
    /// Who has to act on this error.
    pub fn fault(&self) -> Fault {
        match self {
            Error::Compile(errors) => errors.first().map_or(Fault::Internal, CompileError::fault),
            Error::Runtime { error, .. } => error.fault(),
            Error::Usage(_) => Fault::User,
            Error::Unsupported(_) => Fault::Unsupported,
            Error::Internal(_) => Fault::Internal,
            Error::CostModel { error, .. } => error.fault(),
        }
    }

    /// The error as the CLI prints it: `error: message`, then `file:line:col`, the source line
    /// and a caret under the offending expression.
    pub fn render(&self, source: &SourceFile) -> String {
        match self {
            Error::Compile(errors) => errors
                .iter()
                .map(|e| e.render(source))
                .collect::<Vec<_>>()
                .join("\n"),
            Error::Runtime { error, span } => {
                let as_diagnostic = CompileError {
                    fault: self.fault(),
                    // The diagnostic's headline says "internal error" itself.
                    message: match error {
                        RuntimeError::Internal(why) => why.to_string(),
                        e => e.to_string(),
                    },
                    span: *span,
                    notes: vec![],
                };
                as_diagnostic.render(source)
            }
            Error::Usage(message) => format!("error: {message}\n"),
            Error::Unsupported(_) | Error::Internal(_) | Error::CostModel { .. } => {
                format!("error: {self}\n")
            }
        }
    }
}
