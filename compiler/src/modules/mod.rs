//! Loading a script's modules into one script: the files it sources (`source("f.dml") as ns`)
//! and the DML-bodied built-ins it calls from a directory laid out as SystemDS's
//! `scripts/builtin` (`f.dml` defining `m_f` or `s_f`), with every call resolved to a
//! function by one qualified name.
//!
//! Names follow SystemDS's resolution. A call `ns::f(...)` names function `f` of the file the
//! calling file sourced as `ns`. An unqualified call `f(...)` in a file names the file's own
//! `f` if it defines one, else a built-in: lafuse's own, else `f.dml` of the built-in
//! directory. Only functions are taken from a sourced or built-in file; its top-level
//! statements are not run (SystemDS does the same). After loading, the functions of the
//! script keep their names, a sourced file's function `f` is `ns::f` (`ns` the namespace it was
//! first sourced as), and a built-in's entry function is the built-in's name (`l2svm`) with its
//! other functions `l2svm::g`: no later pass needs to know of files or namespaces.
//!
//! The loader reads through [`ModuleFiles`], so this crate stays free of I/O (the engine
//! passes the file system); loaded files are placed in the script's address space
//! ([`SourceFile::load`]), so errors in them point at their own lines.

use crate::ast::{Arg, Expr, ExprKind, FunctionDef, IndexRange, Script, Stmt, StmtKind};
use crate::builtins;
use crate::error::CompileError;
use crate::parser;
use crate::span::{SourceFile, Span};
use crate::stack::with_stack;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Where the loader finds files.
pub trait ModuleFiles {
    /// The text of the file at `path`.
    fn read(&self, path: &Path) -> std::io::Result<String>;
    /// Whether a file exists at `path`.
    fn exists(&self, path: &Path) -> bool;
}

/// The file system.
pub struct FileSystem;

impl ModuleFiles for FileSystem {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn exists(&self, path: &Path) -> bool {
        path.is_file()
    }
}

/// Where sourced files and built-ins are looked up.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// The directory of the script itself: a relative `source` path not found from the
    /// working directory (where SystemDS looks) is looked up from here.
    pub script_dir: Option<PathBuf>,
    /// A directory of DML-bodied built-ins laid out as SystemDS's `scripts/builtin`.
    pub builtin_path: Option<PathBuf>,
}

/// A problem loading a module; the user's to fix ([`crate::CompileCause::Load`]).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum LoadError {
    #[error("cannot read the sourced file '{path}': {reason}")]
    SourceUnreadable { path: String, reason: String },
    #[error("namespace '{namespace}' is sourced from two files, '{first}' and '{second}'")]
    NamespaceTwice {
        namespace: String,
        first: String,
        second: String,
    },
    #[error("unknown namespace '{namespace}': no source(...) as {namespace} in this file")]
    UnknownNamespace { namespace: String },
    #[error("function '{function}' is not defined in '{file}' (sourced as '{namespace}')")]
    NotInNamespace {
        function: String,
        namespace: String,
        file: String,
    },
    #[error("cannot read the built-in '{path}': {reason}")]
    BuiltinUnreadable { path: String, reason: String },
    #[error("the built-in file '{path}' defines no function m_{name} or s_{name}")]
    NoBuiltinEntry { path: String, name: String },
}

/// Loads the modules of `script` (parsed from `source`): reads the files it sources and the
/// built-ins it calls, and returns one script whose calls all name functions of it by their
/// qualified names (see the module documentation).
pub fn load(
    script: Script,
    source: &SourceFile,
    files: &dyn ModuleFiles,
    options: &LoadOptions,
) -> Result<Script, Vec<CompileError>> {
    let mut loader = Loader {
        source,
        files,
        options,
        modules: vec![],
        by_path: HashMap::new(),
        builtins: HashMap::new(),
        prefixes: BTreeSet::new(),
        errors: vec![],
        skipped: vec![],
    };
    let Script {
        statements,
        functions,
        imports,
        skipped,
    } = script;
    loader.skipped = skipped;
    let main = loader.add_module(ModuleKind::Main, source.name.clone(), functions);
    loader.import_all(main, imports, None);
    let mut statements = statements;
    // Resolve module by module; resolving may load built-ins, which are appended and
    // resolved in turn.
    for_each_call_in_stmts(&mut statements, &mut |name, args, span| {
        loader.resolve(main, name, args, span)
    });
    let mut out = vec![];
    let mut next = 0;
    while next < loader.modules.len() {
        let mut defs = std::mem::take(&mut loader.modules[next].defs);
        for def in &mut defs {
            def.name = loader.modules[next].qualified(&def.name);
            for p in &mut def.params {
                if let Some(d) = &mut p.default {
                    for_each_call_in_expr(d, &mut |name, args, span| {
                        loader.resolve(next, name, args, span)
                    });
                }
            }
            for_each_call_in_stmts(&mut def.body, &mut |name, args, span| {
                loader.resolve(next, name, args, span)
            });
        }
        out.extend(defs);
        next += 1;
    }
    if !loader.errors.is_empty() {
        return Err(loader.errors);
    }
    Ok(Script {
        statements,
        functions: out,
        imports: vec![],
        skipped: loader.skipped,
    })
}

type ModuleId = usize;

enum ModuleKind {
    Main,
    /// A sourced file; its functions are `prefix::f`.
    Sourced {
        prefix: String,
    },
    /// The built-in `name`: its entry function is `name`, the others `name::f`.
    Builtin {
        name: String,
        entry: String,
    },
}

struct Module {
    kind: ModuleKind,
    /// The file's name as shown in messages.
    file: String,
    /// Names of the functions the file defines, as written.
    defined: BTreeSet<String>,
    /// The function definitions, until they are resolved.
    defs: Vec<FunctionDef>,
    /// The namespaces the file sourced.
    namespaces: BTreeMap<String, ModuleId>,
}

impl Module {
    /// The qualified name of a built-in's entry function (`None` for other files).
    fn entry(&self) -> Option<String> {
        match &self.kind {
            ModuleKind::Builtin { entry, .. } => Some(self.qualified(entry)),
            _ => None,
        }
    }

    /// The qualified name of this file's function `f`.
    fn qualified(&self, f: &str) -> String {
        match &self.kind {
            ModuleKind::Main => f.to_string(),
            ModuleKind::Sourced { prefix } => format!("{prefix}::{f}"),
            // Named as the built-in, unless lafuse has a function of that name too (SystemDS's
            // `sigmoid` is both), which the entry must not shadow.
            ModuleKind::Builtin { name, entry }
                if f == entry && builtins::lookup(name).is_none() =>
            {
                name.clone()
            }
            ModuleKind::Builtin { name, .. } => format!("{name}::{f}"),
        }
    }
}

struct Loader<'a> {
    source: &'a SourceFile,
    files: &'a dyn ModuleFiles,
    options: &'a LoadOptions,
    modules: Vec<Module>,
    /// Sourced files by resolved path: a file sourced twice is loaded once.
    by_path: HashMap<PathBuf, ModuleId>,
    /// Built-ins looked up, by name (`None`: not in the built-in directory).
    builtins: HashMap<String, Option<ModuleId>>,
    /// Prefixes given to sourced files, kept distinct.
    prefixes: BTreeSet<String>,
    errors: Vec<CompileError>,
    /// Characters the lexer skipped in the script and the files loaded ([`Script::skipped`]).
    skipped: Vec<CompileError>,
}

impl Loader<'_> {
    fn add_module(&mut self, kind: ModuleKind, file: String, defs: Vec<FunctionDef>) -> ModuleId {
        self.modules.push(Module {
            kind,
            file,
            defined: defs.iter().map(|d| d.name.clone()).collect(),
            defs,
            namespaces: BTreeMap::new(),
        });
        self.modules.len() - 1
    }

    /// Loads the files `module` sources (from `dir`, the directory of its file, as a fallback
    /// to the working directory) and binds their namespaces in it.
    fn import_all(
        &mut self,
        module: ModuleId,
        imports: Vec<crate::ast::Import>,
        dir: Option<&Path>,
    ) {
        for import in imports {
            let Some(path) = self.find_source(&import.path, dir) else {
                self.errors.push(CompileError::at(
                    LoadError::SourceUnreadable {
                        path: import.path.clone(),
                        reason: "no such file (looked up from the working directory, the \
                                 script's directory and the scripts directory above the \
                                 built-in path)"
                            .into(),
                    },
                    import.span,
                ));
                continue;
            };
            let id = match self.by_path.get(&path) {
                Some(&id) => id,
                None => match self.load_sourced(&path, &import) {
                    Some(id) => id,
                    None => continue,
                },
            };
            let ns = import.namespace.name.clone();
            match self.modules[module].namespaces.get(&ns) {
                Some(&other) if other != id => {
                    let first = self.modules[other].file.clone();
                    self.errors.push(CompileError::at(
                        LoadError::NamespaceTwice {
                            namespace: ns,
                            first,
                            second: import.path.clone(),
                        },
                        import.span,
                    ));
                }
                _ => {
                    self.modules[module].namespaces.insert(ns, id);
                }
            }
        }
    }

    /// The path a `source` of `written` reads: as SystemDS, relative to the working directory,
    /// else under its `scripts/` (`source("nn/layers/relu.dml")` from a SystemDS checkout);
    /// where no file is there, relative to the sourcing file's or the script's directory; last,
    /// as SystemDS reads `<path>` or `scripts/<path>` from its jar, under the checkout that
    /// holds the built-in directory (`DIR/../..`) or its `scripts` (`DIR/..`): the `softmax`
    /// built-in sources `nn/layers/softmax.dml`, `topk_cleaning` `scripts/builtin/bandit.dml`.
    fn find_source(&self, written: &str, dir: Option<&Path>) -> Option<PathBuf> {
        let path = PathBuf::from(written);
        let scripts = self.options.builtin_path.as_deref().and_then(Path::parent);
        let checkout = [scripts.and_then(Path::parent), scripts];
        let candidates = std::iter::once(path.clone())
            .chain(path.is_relative().then(|| Path::new("scripts").join(&path)))
            .chain(dir.map(|d| d.join(&path)))
            .chain(self.options.script_dir.as_ref().map(|d| d.join(&path)))
            .chain(
                checkout
                    .into_iter()
                    .flatten()
                    .filter(|_| path.is_relative())
                    .map(|s| s.join(&path)),
            );
        candidates
            .map(|c| normalize(&c))
            .find(|c| self.files.exists(c))
    }

    fn load_sourced(&mut self, path: &Path, import: &crate::ast::Import) -> Option<ModuleId> {
        let shown = path.display().to_string();
        let script = match self.read_and_parse(path, &shown) {
            Ok(script) => script?,
            Err(reason) => {
                self.errors.push(CompileError::at(
                    LoadError::SourceUnreadable {
                        path: import.path.clone(),
                        reason,
                    },
                    import.span,
                ));
                return None;
            }
        };
        let mut prefix = import.namespace.name.clone();
        let mut n = 2;
        while !self.prefixes.insert(prefix.clone()) {
            prefix = format!("{}{n}", import.namespace.name);
            n += 1;
        }
        let id = self.add_module(ModuleKind::Sourced { prefix }, shown, script.functions);
        self.by_path.insert(path.to_path_buf(), id);
        let dir = path.parent().map(Path::to_path_buf);
        self.import_all(id, script.imports, dir.as_deref());
        Some(id)
    }

    /// Reads and parses the file at `path`, placed in the script's address space. `Err`: the
    /// file cannot be read (the reason); `Ok(None)`: it does not parse (errors recorded).
    fn read_and_parse(&mut self, path: &Path, shown: &str) -> Result<Option<Script>, String> {
        let text = self.files.read(path).map_err(|e| e.to_string())?;
        let file = self.source.load(shown, text);
        match parser::parse_text(&file.text, file.base) {
            Ok(mut script) => {
                self.skipped.append(&mut script.skipped);
                Ok(Some(script))
            }
            Err(errors) => {
                self.errors.extend(errors);
                Ok(None)
            }
        }
    }

    /// Rewrites the call `name` made in `module` to the qualified name of the function it
    /// calls, loading a built-in where it names one; leaves names it cannot resolve for the
    /// checker to report.
    fn resolve(&mut self, module: ModuleId, name: &mut String, args: &[Arg], span: Span) {
        if crate::eval_call::is_eval(name) && !self.modules[module].defined.contains(name.as_str())
        {
            // `eval("lm", ...)`: a built-in named by a literal is loaded, as a call of it is;
            // the program builder resolves the name among the loaded functions.
            if let Some(ExprKind::Str(f)) = args.first().map(|a| &a.value.kind) {
                let f = f.clone();
                if !f.contains("::") && !self.modules[module].defined.contains(&f) {
                    self.builtin(&f, span);
                }
            }
            return;
        }
        if let Some((ns, f)) = name.split_once("::") {
            let Some(&target) = self.modules[module].namespaces.get(ns) else {
                self.errors.push(CompileError::at(
                    LoadError::UnknownNamespace {
                        namespace: ns.to_string(),
                    },
                    span,
                ));
                return;
            };
            let target = &self.modules[target];
            if !target.defined.contains(f) {
                self.errors.push(CompileError::at(
                    LoadError::NotInNamespace {
                        function: f.to_string(),
                        namespace: ns.to_string(),
                        file: target.file.clone(),
                    },
                    span,
                ));
                return;
            }
            *name = target.qualified(f);
            self.load_named_by_arguments(module, args);
            return;
        }
        if self.modules[module].defined.contains(name.as_str()) {
            *name = self.modules[module].qualified(name);
            self.load_named_by_arguments(module, args);
            return;
        }
        if let Some(native) = builtins::lookup(name) {
            // SystemDS has some functions both ways (`sigmoid(X)` native, `sigmoid(X=X)` in
            // DML): a call lafuse's own cannot take goes to the DML one where there is one.
            let fits = builtins::bind_args(native, args, span).is_ok();
            if fits || self.builtin_file(name).is_none() {
                return;
            }
        }
        self.load_named_by_arguments(module, args);
        if let Some(entry) = self
            .builtin(name, span)
            .and_then(|id| self.modules[id].entry())
        {
            *name = entry;
        }
    }

    /// A DML function may pass a string argument on to `eval` (`gridSearch(train="lm", ...)`),
    /// where SystemDS resolves it when the call runs: a string literal given to a DML function
    /// that names a built-in of the directory loads it, so that `eval` can reach it. The load
    /// is speculative: a built-in that does not load is left out (and an `eval` of its name
    /// fails when it runs, as before), never an error of the script.
    fn load_named_by_arguments(&mut self, module: ModuleId, args: &[Arg]) {
        for arg in args {
            let ExprKind::Str(f) = &arg.value.kind else {
                continue;
            };
            if self.builtins.contains_key(f.as_str())
                || self.modules[module].defined.contains(f.as_str())
                || self.builtin_file(f).is_none()
            {
                continue;
            }
            let errors = self.errors.len();
            let name = f.clone();
            self.builtin(&name, arg.value.span);
            if self.errors.len() > errors {
                // Forgotten, so that a real call of it reports why it does not load.
                self.errors.truncate(errors);
                self.builtins.remove(&name);
            }
        }
    }

    /// The file of the DML-bodied built-in `name` in the built-in directory, if there is one.
    fn builtin_file(&self, name: &str) -> Option<PathBuf> {
        // Only names that can be files of the directory (no paths).
        let valid = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        self.options
            .builtin_path
            .as_ref()
            .map(|dir| dir.join(format!("{name}.dml")))
            .filter(|p| valid && self.files.exists(p))
    }

    /// The module of the DML-bodied built-in `name`, loaded on first use; `None` where there
    /// is no built-in directory or no `name.dml` in it.
    fn builtin(&mut self, name: &str, span: Span) -> Option<ModuleId> {
        if let Some(found) = self.builtins.get(name) {
            return *found;
        }
        let Some(path) = self.builtin_file(name) else {
            self.builtins.insert(name.to_string(), None);
            return None;
        };
        // Recorded before loading: a built-in calling itself resolves to itself.
        self.builtins.insert(name.to_string(), None);
        let shown = path.display().to_string();
        let script = match self.read_and_parse(&path, &shown) {
            Ok(Some(script)) => script,
            Ok(None) => return None,
            Err(reason) => {
                self.errors.push(CompileError::at(
                    LoadError::BuiltinUnreadable {
                        path: shown,
                        reason,
                    },
                    span,
                ));
                return None;
            }
        };
        let entry = [format!("m_{name}"), format!("s_{name}"), name.to_string()]
            .into_iter()
            .find(|e| script.functions.iter().any(|f| &f.name == e));
        let Some(entry) = entry else {
            self.errors.push(CompileError::at(
                LoadError::NoBuiltinEntry {
                    path: shown,
                    name: name.to_string(),
                },
                span,
            ));
            return None;
        };
        let kind = ModuleKind::Builtin {
            name: name.to_string(),
            entry,
        };
        let id = self.add_module(kind, shown, script.functions);
        self.builtins.insert(name.to_string(), Some(id));
        let dir = path.parent().map(Path::to_path_buf);
        self.import_all(id, script.imports, dir.as_deref());
        Some(id)
    }
}

/// `path` without `.` components and with `a/..` folded, so one file sourced by two spellings
/// is loaded once.
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Calls `f` with the name and span of every function call in `stmts`, nested bodies,
/// conditions, bounds and index expressions included.
pub fn for_each_call_in_stmts(stmts: &mut [Stmt], f: &mut dyn FnMut(&mut String, &[Arg], Span)) {
    for stmt in stmts {
        with_stack(|| for_each_call_in_stmt(stmt, f));
    }
}

fn for_each_call_in_stmt(stmt: &mut Stmt, f: &mut dyn FnMut(&mut String, &[Arg], Span)) {
    match &mut stmt.kind {
        StmtKind::Assign { value, .. } => for_each_call_in_expr(value, f),
        StmtKind::IndexAssign {
            rows, cols, value, ..
        } => {
            for_each_call_in_range(rows, f);
            for_each_call_in_range(cols, f);
            for_each_call_in_expr(value, f);
        }
        StmtKind::MultiAssign { call, .. } => for_each_call_in_expr(call, f),
        StmtKind::Expr(e) => for_each_call_in_expr(e, f),
        StmtKind::If {
            cond,
            then_body,
            else_body,
        } => {
            for_each_call_in_expr(cond, f);
            for_each_call_in_stmts(then_body, f);
            for_each_call_in_stmts(else_body, f);
        }
        StmtKind::For {
            from,
            to,
            step,
            body,
            ..
        } => {
            for_each_call_in_expr(from, f);
            for_each_call_in_expr(to, f);
            if let Some(step) = step {
                for_each_call_in_expr(step, f);
            }
            for_each_call_in_stmts(body, f);
        }
        StmtKind::While { cond, body } => {
            for_each_call_in_expr(cond, f);
            for_each_call_in_stmts(body, f);
        }
    }
}

fn for_each_call_in_range(
    range: &mut Option<IndexRange>,
    f: &mut dyn FnMut(&mut String, &[Arg], Span),
) {
    if let Some(range) = range {
        for_each_call_in_expr(&mut range.lower, f);
        if let Some(upper) = &mut range.upper {
            for_each_call_in_expr(upper, f);
        }
    }
}

/// Calls `f` with the name and span of every function call in `expr`.
pub fn for_each_call_in_expr(expr: &mut Expr, f: &mut dyn FnMut(&mut String, &[Arg], Span)) {
    with_stack(|| {
        let span = expr.span;
        match &mut expr.kind {
            ExprKind::Call { name, args } => {
                f(name, args, span);
                for a in args {
                    for_each_call_in_expr(&mut a.value, f);
                }
            }
            ExprKind::Unary { operand, .. } => for_each_call_in_expr(operand, f),
            ExprKind::Binary { lhs, rhs, .. } => {
                for_each_call_in_expr(lhs, f);
                for_each_call_in_expr(rhs, f);
            }
            ExprKind::Index { target, rows, cols } => {
                for_each_call_in_expr(target, f);
                for_each_call_in_range(rows, f);
                for_each_call_in_range(cols, f);
            }
            ExprKind::Double(_)
            | ExprKind::Int(_)
            | ExprKind::Bool(_)
            | ExprKind::Str(_)
            | ExprKind::Var(_)
            | ExprKind::ScriptArg(_) => {}
        }
    })
}

#[cfg(test)]
mod tests;
