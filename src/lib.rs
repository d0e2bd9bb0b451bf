//! lafuse: a JIT code generator for fused linear-algebra operators.
//!
//! This crate is the facade: [`Engine`] runs DML scripts (a subset of Apache SystemDS's
//! language) and explains their plans; the CLI in `main.rs` is a thin layer over it. The
//! compiler (`lafuse-compiler`) and runtime (`lafuse-runtime`) crates hold the substance.
//!
//! ```
//! use lafuse::{Engine, EngineConfig, ScriptArgs, SourceFile};
//!
//! let source = SourceFile::new("example.dml", "X = matrix(2, rows=3, cols=4)\nprint(sum(X * X))");
//! let mut out = Vec::new();
//! Engine::new(EngineConfig::default())
//!     .run(&source, &ScriptArgs::default(), &mut out)
//!     .map_err(|e| e.render(&source))
//!     .unwrap();
//! assert_eq!(String::from_utf8(out).unwrap(), "48.0\n");
//! ```

mod compile;
mod engine;
pub mod error;
pub mod stats;

pub use error::Error;
pub use lafuse_compiler::span::SourceFile;
pub use stats::Stats;

use lafuse_compiler::hops::{self, HopDag};
use lafuse_compiler::span::Span;
use lafuse_compiler::{check, parser, program};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::time::Instant;

/// How the engine runs scripts. A value, passed in; there is no global configuration.
#[derive(Clone, Debug, Default)]
pub struct EngineConfig {
    /// Time every instruction (for `--stats`); off by default because timing costs a little.
    pub collect_stats: bool,
}

/// Script arguments (`$name`), as given with `--nvargs name=value`.
#[derive(Clone, Debug, Default)]
pub struct ScriptArgs {
    values: BTreeMap<String, String>,
    compiled: hops::ScriptArgs,
}

impl ScriptArgs {
    /// Parses `name=value` pairs. Errors name the malformed pair.
    pub fn parse_pairs<S: AsRef<str>>(pairs: &[S]) -> Result<ScriptArgs, Error> {
        let mut values = BTreeMap::new();
        for pair in pairs {
            let pair = pair.as_ref();
            let (name, value) = pair.split_once('=').ok_or_else(|| {
                Error::Usage(format!(
                    "script argument '{pair}' is not of the form name=value"
                ))
            })?;
            let name = name.trim().trim_start_matches('$');
            let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
            if !valid {
                return Err(Error::Usage(format!(
                    "script argument name '{name}' is not a valid DML identifier"
                )));
            }
            values.insert(name.to_string(), value.to_string());
        }
        Ok(ScriptArgs::from_map(values))
    }

    pub fn from_map(values: BTreeMap<String, String>) -> ScriptArgs {
        let compiled = hops::ScriptArgs {
            values: values.clone(),
        };
        ScriptArgs { values, compiled }
    }

    pub fn names(&self) -> BTreeSet<String> {
        self.values.keys().cloned().collect()
    }

    pub(crate) fn compiler_args(&self) -> &hops::ScriptArgs {
        &self.compiled
    }
}

/// What `explain` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExplainLevel {
    /// The HOP DAG of each block and predicate, as compiled at run time.
    Hops,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExplainFormat {
    Text,
    Json,
    Dot,
}

/// One compiled block, as `explain` shows it.
#[derive(Clone, Debug)]
pub struct ExplainedBlock {
    /// "basic block", "if condition", "for-loop start", ...
    pub kind: String,
    pub span: Span,
    pub dag: HopDag,
}

/// The outcome of a successful run.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub stats: Stats,
}

/// Reads a script file. Errors name the file.
pub fn load_script(path: &Path) -> Result<SourceFile, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Usage(format!("cannot read the script '{}': {e}", path.display())))?;
    Ok(SourceFile::new(path.display().to_string(), text))
}

/// Runs and explains DML scripts.
pub struct Engine {
    config: EngineConfig,
}

impl Engine {
    pub fn new(config: EngineConfig) -> Engine {
        Engine { config }
    }

    /// Parses, checks and runs a script; `print` output goes to `out`.
    pub fn run(
        &self,
        source: &SourceFile,
        args: &ScriptArgs,
        out: &mut dyn Write,
    ) -> Result<RunReport, Error> {
        let started = Instant::now();
        let program = self.front_end(source, args)?;
        let front_end_time = started.elapsed();
        let mut interpreter = engine::Interpreter::new(&program, args, out, &self.config);
        interpreter.compile_time += front_end_time;
        interpreter.run_main()?;
        Ok(RunReport {
            stats: interpreter.stats(started.elapsed()),
        })
    }

    /// Runs a script with its output discarded and shows every block as it was compiled.
    pub fn explain(
        &self,
        source: &SourceFile,
        args: &ScriptArgs,
        level: ExplainLevel,
        format: ExplainFormat,
    ) -> Result<String, Error> {
        let ExplainLevel::Hops = level;
        let program = self.front_end(source, args)?;
        let mut sink = std::io::sink();
        let mut interpreter = engine::Interpreter::new(&program, args, &mut sink, &self.config);
        interpreter.explained = Some(Vec::new());
        interpreter.run_main()?;
        let blocks = interpreter.explained.take().unwrap_or_default();
        Ok(render_explain(source, &blocks, format))
    }

    fn front_end(&self, source: &SourceFile, args: &ScriptArgs) -> Result<program::Program, Error> {
        let script = parser::parse(source)?;
        let program = program::build_program(script)?;
        check::check_program(&program, &args.names())?;
        Ok(program)
    }
}

fn render_explain(source: &SourceFile, blocks: &[ExplainedBlock], format: ExplainFormat) -> String {
    let lines = |span: Span| {
        let (first, _) = source.line_col(span.start);
        let (last, _) = source.line_col(span.end.saturating_sub(1).max(span.start));
        (first, last)
    };
    match format {
        ExplainFormat::Text => {
            let mut out = String::new();
            for block in blocks {
                let (first, last) = lines(block.span);
                out.push_str(&format!("--- {} (lines {first}-{last}) ---\n", block.kind));
                out.push_str(&hops::explain_text(&block.dag));
            }
            out
        }
        ExplainFormat::Json => {
            let items: Vec<serde_json::Value> = blocks
                .iter()
                .map(|b| {
                    let (first, last) = lines(b.span);
                    serde_json::json!({
                        "kind": b.kind,
                        "lines": [first, last],
                        "dag": serde_json::from_str::<serde_json::Value>(&hops::explain_json(&b.dag)).unwrap_or(serde_json::Value::Null),
                    })
                })
                .collect();
            serde_json::to_string_pretty(&serde_json::json!({ "blocks": items }))
                .unwrap_or_default()
                + "\n"
        }
        ExplainFormat::Dot => {
            let mut out = String::new();
            for block in blocks {
                out.push_str(&hops::explain_dot(&block.dag));
            }
            out
        }
    }
}
