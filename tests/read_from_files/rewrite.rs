//! The rewrites `read_from_files.rs` runs: a script that makes its matrix data in place turned
//! into one that reads the data from files and a script that writes those files; an algorithm's
//! generator script inlined in place of the algorithm's reads.
//!
//! Everything works on the parsed script (`lafuse_compiler::parser`) and edits the source text
//! at the spans the parser gives, so what is not rewritten stays byte for byte as written.

use lafuse::SourceFile;
use lafuse_compiler::ast::{BinaryOp, Expr, ExprKind, IndexRange, Script, Stmt, StmtKind};
use lafuse_compiler::parser;
use lafuse_compiler::span::Span;
use std::collections::{BTreeMap, BTreeSet};

/// Built-in functions that make a matrix out of scalars alone: a call of one of these whose
/// arguments need no matrix is data generated in place.
pub const GENERATORS: [&str; 4] = ["rand", "matrix", "seq", "as.matrix"];

/// Whether `name` calls one of the [`GENERATORS`], by any of its names (SystemDS's `Rand` and
/// `RAND` are `rand`).
fn is_generator(name: &str) -> bool {
    let canonical = lafuse_compiler::builtins::lookup(name).map_or(name, |b| b.name());
    GENERATORS.contains(&canonical)
}

/// Built-in functions whose value is a scalar when all their arguments are scalars.
const SCALAR_FUNCTIONS: [&str; 13] = [
    "ifdef",
    "as.integer",
    "as.double",
    "as.logical",
    "abs",
    "sqrt",
    "round",
    "floor",
    "ceil",
    "exp",
    "log",
    "min",
    "max",
];

/// The prefix of the variables the rewrites introduce; no script may use it.
pub const INPUT_PREFIX: &str = "rf_in";

pub fn parse(source: &SourceFile) -> Script {
    parser::parse(source).unwrap_or_else(|errors| {
        panic!(
            "{} does not parse: {}",
            source.name,
            errors
                .iter()
                .map(|e| e.render(source))
                .collect::<Vec<_>>()
                .join("\n")
        )
    })
}

fn text_of(source: &SourceFile, span: Span) -> &str {
    &source.text[span.range()]
}

/// Applies non-overlapping `(span, replacement)` edits to `text`, whose byte 0 is at `base`.
fn apply_edits(text: &str, base: u32, mut edits: Vec<(Span, String)>) -> String {
    edits.sort_by_key(|(s, _)| (s.start, s.end));
    let mut out = String::with_capacity(text.len());
    let mut at = 0usize;
    for (span, replacement) in edits {
        let (start, end) = ((span.start - base) as usize, (span.end - base) as usize);
        assert!(start >= at, "overlapping edits at byte {start}");
        out.push_str(&text[at..start]);
        out.push_str(&replacement);
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

/// Calls `f` on every expression of `e`'s tree, parents before children; `f` returns whether
/// to descend into the children.
fn walk_expr<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Expr) -> bool) {
    if !f(e) {
        return;
    }
    match &e.kind {
        ExprKind::Unary { operand, .. } => walk_expr(operand, f),
        ExprKind::Binary { lhs, rhs, .. } => {
            walk_expr(lhs, f);
            walk_expr(rhs, f);
        }
        ExprKind::Call { args, .. } => {
            for a in args {
                walk_expr(&a.value, f);
            }
        }
        ExprKind::Index { target, rows, cols } => {
            walk_expr(target, f);
            for r in [rows, cols].into_iter().flatten() {
                walk_range(r, f);
            }
        }
        _ => {}
    }
}

fn walk_range<'a>(r: &'a IndexRange, f: &mut dyn FnMut(&'a Expr) -> bool) {
    walk_expr(&r.lower, f);
    if let Some(u) = &r.upper {
        walk_expr(u, f);
    }
}

/// The expressions a statement evaluates itself (not those of nested bodies).
fn stmt_exprs(stmt: &Stmt) -> Vec<&Expr> {
    match &stmt.kind {
        StmtKind::Assign { value, .. } => vec![value],
        StmtKind::IndexAssign {
            rows, cols, value, ..
        } => {
            let mut v: Vec<&Expr> = Vec::new();
            for r in [rows, cols].into_iter().flatten() {
                v.push(&r.lower);
                if let Some(u) = &r.upper {
                    v.push(u);
                }
            }
            v.push(value);
            v
        }
        StmtKind::MultiAssign { call, .. } => vec![call],
        StmtKind::Expr(e) => vec![e],
        StmtKind::If { cond, .. } | StmtKind::While { cond, .. } => vec![cond],
        StmtKind::For { from, to, step, .. } => {
            let mut v = vec![from, to];
            v.extend(step.as_ref());
            v
        }
    }
}

fn nested_bodies(stmt: &Stmt) -> Vec<&Stmt> {
    match &stmt.kind {
        StmtKind::If {
            then_body,
            else_body,
            ..
        } => then_body.iter().chain(else_body).collect(),
        StmtKind::For { body, .. } | StmtKind::While { body, .. } => body.iter().collect(),
        _ => Vec::new(),
    }
}

/// The variables a statement (with its nested bodies) assigns.
fn assigned(stmt: &Stmt, out: &mut BTreeSet<String>) {
    match &stmt.kind {
        StmtKind::Assign { target, .. } | StmtKind::IndexAssign { target, .. } => {
            out.insert(target.name.clone());
        }
        StmtKind::MultiAssign { targets, .. } => {
            out.extend(targets.iter().map(|t| t.name.clone()));
        }
        StmtKind::For { var, .. } => {
            out.insert(var.name.clone());
        }
        _ => {}
    }
    for s in nested_bodies(stmt) {
        assigned(s, out);
    }
}

/// Every variable a statement (with its nested bodies) names, read or assigned.
fn mentioned(stmt: &Stmt, out: &mut BTreeSet<String>) {
    assigned(stmt, out);
    for e in stmt_exprs(stmt) {
        walk_expr(e, &mut |x| {
            if let ExprKind::Var(n) = &x.kind {
                out.insert(n.clone());
            }
            true
        });
    }
    for s in nested_bodies(stmt) {
        mentioned(s, out);
    }
}

/// Whether `e` is a scalar computed from literals, script arguments and scalar variables.
fn is_scalar(e: &Expr, scalars: &BTreeSet<String>) -> bool {
    match &e.kind {
        ExprKind::Double(_)
        | ExprKind::Int(_)
        | ExprKind::Bool(_)
        | ExprKind::Str(_)
        | ExprKind::ScriptArg(_) => true,
        ExprKind::Var(n) => scalars.contains(n),
        ExprKind::Unary { operand, .. } => is_scalar(operand, scalars),
        ExprKind::Binary { op, lhs, rhs } => {
            *op != BinaryOp::MatMul && is_scalar(lhs, scalars) && is_scalar(rhs, scalars)
        }
        ExprKind::Call { name, args } => {
            SCALAR_FUNCTIONS.contains(&name.as_str())
                && args.iter().all(|a| is_scalar(&a.value, scalars))
        }
        ExprKind::Index { .. } => false,
    }
}

/// Whether `e` needs no matrix: it reads no variable but scalars, and calls nothing but
/// generators and scalar functions.
fn needs_no_matrix(e: &Expr, scalars: &BTreeSet<String>) -> bool {
    let mut ok = true;
    walk_expr(e, &mut |x| {
        match &x.kind {
            ExprKind::Var(n) => ok &= scalars.contains(n),
            ExprKind::Call { name, .. } => {
                ok &= is_generator(name) || SCALAR_FUNCTIONS.contains(&name.as_str())
            }
            ExprKind::Index { .. } => ok = false,
            _ => {}
        }
        ok
    });
    ok
}

/// The generators of `e` that need no matrix, outermost only, in source order.
fn generators<'a>(e: &'a Expr, scalars: &BTreeSet<String>, out: &mut Vec<&'a Expr>) {
    walk_expr(e, &mut |x| match &x.kind {
        ExprKind::Call { name, .. } if is_generator(name) && needs_no_matrix(x, scalars) => {
            out.push(x);
            false
        }
        _ => true,
    });
}

/// One matrix a script makes in place, which the rewritten script reads from a file.
#[derive(Clone, Debug)]
pub struct Input {
    /// The variable the rewritten script reads it into.
    pub var: String,
    /// The generating expression, as written.
    pub expr: String,
}

/// A statement of the script that makes a script's inputs.
#[derive(Debug)]
enum Generating {
    /// A scalar assignment, as written.
    Scalar(String),
    /// An input, by index.
    Input(usize),
}

/// A script rewritten to read its in-place data from files (see [`rewrite`]).
#[derive(Debug)]
pub struct Rewritten {
    pub inputs: Vec<Input>,
    /// Per input: the span of its statement `V = EXPR` where that is its only occurrence (the
    /// read at the top assigns `V`, and the statement goes).
    own_statement: Vec<Option<Span>>,
    /// What makes the inputs, in the script's order: its top-level scalar assignments up to
    /// the last input, and each input.
    generating: Vec<Generating>,
    /// The original script.
    text: String,
    /// Each occurrence of an input not read by its own statement, replaced by its variable.
    uses: Vec<(Span, String)>,
}

impl Rewritten {
    /// The script that makes every input and writes it as soon as it is made (`VAR = EXPR`,
    /// then `writes(input)`, its write statements), with the script's scalar assignments
    /// in between.
    pub fn writer(&self, writes: impl Fn(&Input) -> String) -> String {
        let mut s = String::new();
        for g in &self.generating {
            match g {
                Generating::Scalar(stmt) => s.push_str(stmt),
                Generating::Input(j) => {
                    let input = &self.inputs[*j];
                    s.push_str(&format!(
                        "{} = {}\n{}",
                        input.var,
                        input.expr,
                        writes(input)
                    ));
                }
            }
            s.push('\n');
        }
        s
    }

    /// The script that reads every input at its top, `VAR = read_call(input)`, then does
    /// what the original did.
    pub fn reader(&self, read_call: impl Fn(&Input) -> String) -> String {
        let mut top = String::new();
        let mut edits = self.uses.clone();
        for (input, own) in self.inputs.iter().zip(&self.own_statement) {
            top.push_str(&format!("{} = {}\n", input.var, read_call(input)));
            if let Some(stmt) = own {
                edits.push((*stmt, String::new()));
            }
        }
        top + &apply_edits(&self.text, 0, edits)
    }

    /// The script with `read_call(input)` in place of each occurrence of each input (`V = EXPR`
    /// becomes `V = read(...)`): reads inside expressions, planned in the blocks of the
    /// statements that hold them.
    pub fn inline_reader(&self, read_call: impl Fn(&Input) -> String) -> String {
        let input = |var: &str| {
            self.inputs
                .iter()
                .find(|i| i.var == var)
                .expect("every use is of an input")
        };
        let mut edits: Vec<(Span, String)> = self
            .uses
            .iter()
            .map(|(span, var)| (*span, read_call(input(var))))
            .collect();
        for (input, own) in self.inputs.iter().zip(&self.own_statement) {
            if let Some(stmt) = own {
                edits.push((*stmt, format!("{} = {}", input.var, read_call(input))));
            }
        }
        apply_edits(&self.text, 0, edits)
    }
}

/// Finds the matrices `source` makes in place and rewrites it to read them.
///
/// The rule: in a top-level statement (not inside a loop, branch or function), every call of a
/// [`GENERATORS`] built-in whose arguments need no matrix (they read only literals, script
/// arguments and scalar variables: variables whose top-level assignments so far were such
/// scalar expressions, never assigned inside a loop or branch) is an input, the outermost such
/// call where they nest (`matrix(seq(1, 20), 4, 5)` is one input). Equal calls over the same
/// values of the scalars they read are one input, as common subexpressions are one value in
/// place. The rewritten script reads every input at its top, so that the reads, each of which
/// ends a basic block, do not split the blocks the original runs: its statements compile into
/// the blocks they compile into in place, over inputs of the sizes they have in place. (Read
/// where they were made, the inputs split those blocks, and what fuses across the split
/// changes with it: `sparse_elementwise`'s 28 Cell operators become 11 MultiAggs, and sums
/// then differ in their last digits. That is the block structure, not the files.)
pub fn rewrite(source: &SourceFile) -> Rewritten {
    let script = parse(source);
    let mut all_mentioned = BTreeSet::new();
    for s in &script.statements {
        mentioned(s, &mut all_mentioned);
    }
    for f in &script.functions {
        for s in &f.body {
            mentioned(s, &mut all_mentioned);
        }
    }
    assert!(
        all_mentioned.iter().all(|n| !n.starts_with(INPUT_PREFIX)),
        "{} uses a variable named {INPUT_PREFIX}*",
        source.name
    );

    /// One occurrence of an input's expression.
    struct Occurrence {
        key: (String, Vec<(String, usize)>),
        span: Span,
        /// `V` where the occurrence is the whole right-hand side of `V = EXPR`, whose
        /// statement span follows, and `V` was not mentioned before.
        sole_assignment: Option<(String, Span)>,
    }

    let mut scalars: BTreeSet<String> = BTreeSet::new();
    let mut versions: BTreeMap<String, usize> = BTreeMap::new();
    let mut mentioned_before: BTreeSet<String> = BTreeSet::new();
    let mut occurrences: Vec<Occurrence> = Vec::new();
    let mut keys: Vec<(String, Vec<(String, usize)>)> = Vec::new();
    let mut first_expr: Vec<String> = Vec::new();
    let mut generating: Vec<Generating> = Vec::new();
    for stmt in &script.statements {
        let simple = !matches!(
            stmt.kind,
            StmtKind::If { .. } | StmtKind::For { .. } | StmtKind::While { .. }
        );
        if let StmtKind::Assign { target, value } = &stmt.kind {
            if is_scalar(value, &scalars) {
                generating.push(Generating::Scalar(text_of(source, stmt.span).to_string()));
                scalars.insert(target.name.clone());
                *versions.entry(target.name.clone()).or_default() += 1;
                mentioned(stmt, &mut mentioned_before);
                continue;
            }
        }
        if simple {
            let mut found = Vec::new();
            for e in stmt_exprs(stmt) {
                generators(e, &scalars, &mut found);
            }
            for g in found {
                let mut reads = BTreeSet::new();
                walk_expr(g, &mut |x| {
                    if let ExprKind::Var(n) = &x.kind {
                        reads.insert(n.clone());
                    }
                    true
                });
                let key = (
                    text_of(source, g.span).to_string(),
                    reads
                        .into_iter()
                        .map(|n| {
                            let v = versions.get(&n).copied().unwrap_or(0);
                            (n, v)
                        })
                        .collect::<Vec<_>>(),
                );
                let sole_assignment = match &stmt.kind {
                    StmtKind::Assign { target, value }
                        if value.span == g.span && !mentioned_before.contains(&target.name) =>
                    {
                        Some((target.name.clone(), stmt.span))
                    }
                    _ => None,
                };
                if !keys.contains(&key) {
                    keys.push(key.clone());
                    first_expr.push(key.0.clone());
                    generating.push(Generating::Input(keys.len() - 1));
                }
                occurrences.push(Occurrence {
                    key,
                    span: g.span,
                    sole_assignment,
                });
            }
        }
        let mut targets = BTreeSet::new();
        assigned(stmt, &mut targets);
        for t in targets {
            scalars.remove(&t);
            *versions.entry(t).or_default() += 1;
        }
        mentioned(stmt, &mut mentioned_before);
    }

    // Name the inputs: the variable of its statement where that is its only occurrence.
    let mut inputs: Vec<Input> = Vec::new();
    let mut own_statement = Vec::new();
    let mut uses: Vec<(Span, String)> = Vec::new();
    for (j, key) in keys.iter().enumerate() {
        let occ: Vec<&Occurrence> = occurrences.iter().filter(|o| &o.key == key).collect();
        let var = match (occ.len(), &occ[0].sole_assignment) {
            (1, Some((v, stmt_span))) => {
                own_statement.push(Some(*stmt_span));
                v.clone()
            }
            _ => {
                let v = format!("{INPUT_PREFIX}{}", j + 1);
                own_statement.push(None);
                uses.extend(occ.iter().map(|o| (o.span, v.clone())));
                v
            }
        };
        inputs.push(Input {
            var,
            expr: first_expr[j].clone(),
        });
    }
    let last_input = generating
        .iter()
        .rposition(|g| matches!(g, Generating::Input(_)));
    generating.truncate(last_input.map_or(0, |i| i + 1));
    Rewritten {
        inputs,
        own_statement,
        generating,
        text: source.text.clone(),
        uses,
    }
}

/// Edits that rename every occurrence of the variables `vars` in `stmt` (nested bodies
/// included) to `GEN_PREFIX` + name.
fn renames(stmt: &Stmt, vars: &BTreeSet<String>, edits: &mut Vec<(Span, String)>) {
    let mut rename = |name: &str, span: Span| {
        if vars.contains(name) {
            edits.push((span, format!("{GEN_PREFIX}{name}")));
        }
    };
    match &stmt.kind {
        StmtKind::Assign { target, .. } | StmtKind::IndexAssign { target, .. } => {
            rename(&target.name, target.span)
        }
        StmtKind::MultiAssign { targets, .. } => {
            for t in targets {
                rename(&t.name, t.span);
            }
        }
        StmtKind::For { var, .. } => rename(&var.name, var.span),
        _ => {}
    }
    for e in stmt_exprs(stmt) {
        walk_expr(e, &mut |x| {
            if let ExprKind::Var(n) = &x.kind {
                rename(n, x.span);
            }
            true
        });
    }
    for s in nested_bodies(stmt) {
        renames(s, vars, edits);
    }
}

/// An algorithm script with its generator script inlined in place of its reads.
pub struct Inlined {
    /// The algorithm script making its data in place.
    pub in_place: String,
    /// The generator's statements without its writes and prints, then `writes(var, file)` for
    /// each file it wrote.
    pub writer: String,
    /// The algorithm's script arguments naming the files it reads, with the files' names in
    /// the generator's output directory (`X` -> `X`, `Y` -> `y`).
    pub read_args: Vec<(String, String)>,
}

/// The variables the generator's statements are renamed with, so that they do not clash with
/// the algorithm's (`seed`, `out`).
pub const GEN_PREFIX: &str = "rf_gen_";

/// Inlines `gen` (a `gen_*.dml`: scalar arguments, the data, `write(V, out + "/NAME", ...)`
/// per file, a `print`) into `alg` in place of its reads (`V = read($ARG, ...)`, where the file
/// `ARG` names is the one written as `NAME` with `NAME` equal to `ARG` up to case).
pub fn inline_generator(
    alg: &SourceFile,
    gen: &SourceFile,
    writes: impl Fn(&str, &str) -> String,
) -> Inlined {
    let gen_script = parse(gen);
    let mut gen_vars = BTreeSet::new();
    for s in &gen_script.statements {
        assigned(s, &mut gen_vars);
    }
    // Kept statements, renamed; files written: NAME -> variable.
    let mut kept = Vec::new();
    let mut files: Vec<(String, String)> = Vec::new();
    for stmt in &gen_script.statements {
        if let StmtKind::Expr(Expr {
            kind: ExprKind::Call { name, args },
            ..
        }) = &stmt.kind
        {
            match name.as_str() {
                "print" => continue,
                "write" => {
                    let ExprKind::Var(var) = &args[0].value.kind else {
                        panic!("{}: write of something other than a variable", gen.name)
                    };
                    let ExprKind::Binary { rhs, .. } = &args[1].value.kind else {
                        panic!("{}: write to a path other than out + \"/NAME\"", gen.name)
                    };
                    let ExprKind::Str(file) = &rhs.kind else {
                        panic!("{}: write to a path other than out + \"/NAME\"", gen.name)
                    };
                    files.push((file.trim_start_matches('/').to_string(), var.clone()));
                    continue;
                }
                _ => {}
            }
        }
        let mut edits = Vec::new();
        renames(stmt, &gen_vars, &mut edits);
        kept.push(apply_edits(text_of(gen, stmt.span), stmt.span.start, edits));
    }

    let alg_script = parse(alg);
    let mut alg_mentioned = BTreeSet::new();
    for s in &alg_script.statements {
        mentioned(s, &mut alg_mentioned);
    }
    assert!(
        alg_mentioned.iter().all(|n| !n.starts_with(GEN_PREFIX)),
        "{} uses a variable named {GEN_PREFIX}*",
        alg.name
    );
    let mut edits = Vec::new();
    let mut read_args = Vec::new();
    for stmt in &alg_script.statements {
        let StmtKind::Assign { target, value } = &stmt.kind else {
            continue;
        };
        let ExprKind::Call { name, args } = &value.kind else {
            continue;
        };
        if name != "read" {
            continue;
        }
        let ExprKind::ScriptArg(arg) = &args[0].value.kind else {
            panic!("{}: a read of something other than $ARG", alg.name)
        };
        let (file, var) = files
            .iter()
            .find(|(f, _)| f.eq_ignore_ascii_case(arg))
            .unwrap_or_else(|| panic!("{} writes no file for ${arg}", gen.name));
        let mut replacement = String::new();
        if read_args.is_empty() {
            for k in &kept {
                replacement.push_str(k);
                replacement.push('\n');
            }
        }
        replacement.push_str(&format!("{} = {GEN_PREFIX}{var}", target.name));
        edits.push((stmt.span, replacement));
        read_args.push((arg.clone(), file.clone()));
    }
    assert!(!read_args.is_empty(), "{} reads nothing", alg.name);
    let mut writer = kept.join("\n");
    writer.push('\n');
    for (file, var) in &files {
        writer.push_str(&writes(&format!("{GEN_PREFIX}{var}"), file));
        writer.push('\n');
    }
    Inlined {
        in_place: apply_edits(&alg.text, 0, edits),
        writer,
        read_args,
    }
}
