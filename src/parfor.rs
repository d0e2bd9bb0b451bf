//! `parfor`: the dependency check that decides whether a loop's iterations may run on threads,
//! and the merge of the workers' results back into the caller's variables.
//!
//! SystemDS runs a `parfor` body on workers, each with its own copy of the symbol table, and
//! merges the *result variables* (matrices defined before the loop that the body updates by
//! left indexing) by comparing each worker's copy with the original (`ResultMerge`). lafuse
//! does the same, but only where [`analyze`] proves the iterations independent; anything it
//! cannot prove runs sequentially, like `for`, with the reason counted in `--stats`. The
//! outcome is then the sequential one bit for bit:
//!
//! * every result variable is written only as `R[i, ...] = e` or `R[..., i] = e` with `i` the
//!   loop variable (an integer), so two iterations never write the same cell, and is never read
//!   nor reassigned in the body;
//! * every other variable the body assigns is assigned before it is read in each iteration
//!   (nothing flows from one iteration to the next); after the loop it holds the value of the
//!   last iteration that assigned it, as sequentially;
//! * no statement has an effect whose order shows (`print`, `write`, `stop`, ...), and no
//!   user-defined function is called (its body is not checked).
//!
//! Iterations are split into contiguous chunks, one per worker, so a worker's lineage of a
//! result variable is the sequential chain of its chunk; [`rebase`] chains the chunks in order,
//! which gives the items sequential tracing gives. Workers share the run's reuse cache, whose
//! placeholders make a worker wait for a value another is computing instead of computing it too.

use crate::engine::{Interpreter, WorkerDone};
use crate::error::Error;
use crate::stats::Fallback;
use lafuse_compiler::ast::{self, ExprKind, IndexRange, StmtKind};
use lafuse_compiler::program::Block;
use lafuse_compiler::span::Span;
use lafuse_runtime::error::Internal;
use lafuse_runtime::exec::SymbolTable;
use lafuse_runtime::lineage::Lineage;
use lafuse_runtime::matrix::Matrix;
use lafuse_runtime::value::Value;
use lafuse_runtime::RuntimeError;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

/// Built-in calls whose effect or result depends on more than their arguments' values, in
/// an order the iterations would change.
const ORDERED_CALLS: &[&str] = &["print", "write", "stop", "assert", "lineage", "time"];

/// What the check proved of an independent body.
#[derive(Debug, Default)]
pub(crate) struct Independent {
    /// Matrices updated by left indexing keyed by the loop variable, sorted.
    pub(crate) results: Vec<String>,
    /// Every other variable the body assigns (the loop variables of nested loops included).
    pub(crate) locals: Vec<String>,
}

/// The walk's state: what the current iteration has certainly assigned so far, and what the
/// whole body reads before assigning, assigns and updates.
#[derive(Default)]
struct Walk {
    assigned: HashSet<String>,
    early_reads: BTreeSet<String>,
    reads: HashSet<String>,
    writes: BTreeSet<String>,
    results: BTreeSet<String>,
}

impl Walk {
    fn read(&mut self, expr: &ast::Expr) -> Result<(), String> {
        ordered_call(expr)?;
        let mut names = Vec::new();
        crate::compile::expr_reads(expr, &mut names);
        for name in names {
            if !self.assigned.contains(name) {
                self.early_reads.insert(name.to_string());
            }
            self.reads.insert(name.to_string());
        }
        Ok(())
    }

    fn read_range(&mut self, range: &Option<IndexRange>) -> Result<(), String> {
        if let Some(r) = range {
            self.read(&r.lower)?;
            if let Some(u) = &r.upper {
                self.read(u)?;
            }
        }
        Ok(())
    }

    fn assign(&mut self, name: &str) {
        self.assigned.insert(name.to_string());
        self.writes.insert(name.to_string());
    }

    fn blocks(&mut self, var: &str, blocks: &[Block]) -> Result<(), String> {
        blocks.iter().try_for_each(|b| self.block(var, b))
    }

    fn block(&mut self, var: &str, block: &Block) -> Result<(), String> {
        match block {
            Block::Basic(basic) => basic.stmts.iter().try_for_each(|s| self.stmt(var, s)),
            Block::If {
                cond,
                then_blocks,
                else_blocks,
                ..
            } => {
                self.read(cond)?;
                let before = self.assigned.clone();
                self.blocks(var, then_blocks)?;
                let then_assigned = std::mem::replace(&mut self.assigned, before);
                self.blocks(var, else_blocks)?;
                // Certainly assigned afterwards: what both branches assign.
                self.assigned.retain(|n| then_assigned.contains(n));
                Ok(())
            }
            Block::For {
                var: inner,
                from,
                to,
                step,
                body,
                ..
            } => {
                self.read(from)?;
                self.read(to)?;
                if let Some(s) = step {
                    self.read(s)?;
                }
                self.nested(var, Some(&inner.name), body)
            }
            Block::While { cond, body, .. } => {
                self.read(cond)?;
                self.nested(var, None, body)
            }
            Block::Call(call) => Err(format!(
                "the body calls the user-defined function '{}'",
                call.function
            )),
        }
    }

    /// A nested loop: its body is walked once from what is assigned before it (a variable it
    /// reads before assigning would carry a value from the previous outer iteration); nothing
    /// it assigns is certainly assigned after it (it may run zero times).
    fn nested(&mut self, var: &str, inner: Option<&str>, body: &[Block]) -> Result<(), String> {
        let before = self.assigned.clone();
        if let Some(inner) = inner {
            self.assign(inner);
        }
        self.blocks(var, body)?;
        self.assigned = before;
        Ok(())
    }

    fn stmt(&mut self, var: &str, stmt: &ast::Stmt) -> Result<(), String> {
        match &stmt.kind {
            StmtKind::Assign { target, value } => {
                self.read(value)?;
                self.assign(&target.name);
            }
            StmtKind::IndexAssign {
                target,
                rows,
                cols,
                value,
            } => {
                self.read_range(rows)?;
                self.read_range(cols)?;
                self.read(value)?;
                if !(is_loop_var(rows, var) || is_loop_var(cols, var)) {
                    return Err(format!(
                        "'{}' is updated at indices not keyed by the loop variable '{var}'",
                        target.name
                    ));
                }
                self.results.insert(target.name.clone());
            }
            StmtKind::MultiAssign { targets, call } => {
                self.read(call)?;
                targets.iter().for_each(|t| self.assign(&t.name));
            }
            StmtKind::Expr(_) => {
                return Err(
                    "the body has a statement run for its effect (print, write, \
                            stop, ...)"
                        .to_string(),
                )
            }
            StmtKind::If { .. } | StmtKind::For { .. } | StmtKind::While { .. } => {
                return Err("control flow inside a basic block".to_string())
            }
        }
        Ok(())
    }
}

/// Whether `range` is the single index `var` (`R[i, ]`).
fn is_loop_var(range: &Option<IndexRange>, var: &str) -> bool {
    matches!(range, Some(IndexRange { lower, upper: None, .. })
        if matches!(&lower.kind, ExprKind::Var(v) if v == var))
}

/// An error naming the first call in `expr` whose order shows.
fn ordered_call(expr: &ast::Expr) -> Result<(), String> {
    match crate::calls::first_call(expr, &|name| ORDERED_CALLS.contains(&name)) {
        Some(name) => Err(format!("the body calls '{name}'")),
        None => Ok(()),
    }
}

/// Proves the iterations of `parfor (var in ...) body` independent, or says why it cannot.
/// `is_matrix` tells whether a variable is bound to a matrix before the loop.
pub(crate) fn analyze(
    var: &str,
    body: &[Block],
    is_matrix: impl Fn(&str) -> bool,
) -> Result<Independent, String> {
    let mut walk = Walk::default();
    walk.assigned.insert(var.to_string());
    walk.blocks(var, body)?;
    if walk.writes.contains(var) {
        return Err(format!("the body assigns the loop variable '{var}'"));
    }
    if let Some(name) = walk.early_reads.iter().find(|n| walk.writes.contains(*n)) {
        return Err(format!(
            "'{name}' is read before it is assigned in an iteration (an earlier iteration's \
             value would flow into a later one)"
        ));
    }
    for r in &walk.results {
        if walk.writes.contains(r) {
            return Err(format!("result variable '{r}' is also assigned whole"));
        }
        if walk.reads.contains(r) {
            return Err(format!("the body reads result variable '{r}'"));
        }
        if !is_matrix(r) {
            return Err(format!(
                "result variable '{r}' is not a matrix defined before"
            ));
        }
    }
    Ok(Independent {
        results: walk.results.into_iter().collect(),
        locals: walk.writes.into_iter().collect(),
    })
}

/// The iterations `first, first + step, ...` (`count` of them) split into at most `workers`
/// contiguous chunks of nearly equal size, in order.
pub(crate) fn chunks(first: i64, step: i64, count: usize, workers: usize) -> Vec<Vec<i64>> {
    let workers = workers.clamp(1, count.max(1));
    let (base, extra) = (count / workers, count % workers);
    let mut next = 0usize;
    (0..workers)
        .map(|w| {
            let len = base + usize::from(w < extra);
            let chunk = (next..next + len)
                .map(|k| first + k as i64 * step)
                .collect();
            next += len;
            chunk
        })
        .collect()
}

/// SystemDS's result merge: the cells where a worker's copy differs from the original (bit for
/// bit, so NaN and -0.0 are told apart and a write of the original value changes nothing)
/// are taken from it. The workers' writes are disjoint, so their order does not matter.
pub(crate) fn merge(
    original: &Arc<Matrix>,
    workers: &[&Arc<Matrix>],
) -> Result<Arc<Matrix>, lafuse_runtime::RuntimeError> {
    let changed: Vec<&Arc<Matrix>> = workers
        .iter()
        .copied()
        .filter(|m| !Arc::ptr_eq(m, original))
        .collect();
    match changed.as_slice() {
        [] => return Ok(Arc::clone(original)),
        [only] => return Ok(Arc::clone(only)),
        _ => {}
    }
    let (rows, cols) = original.shape();
    let base = original.dense_cow()?;
    let mut values: Vec<f64> = (0..rows).flat_map(|i| base.row(i).to_vec()).collect();
    for m in changed {
        let m = m.dense_cow()?;
        for i in 0..rows {
            let (row, orig) = (m.row(i), base.row(i));
            for j in 0..cols {
                if row[j].to_bits() != orig[j].to_bits() {
                    values[i * cols + j] = row[j];
                }
            }
        }
    }
    let merged = Matrix::from_dense_values(rows, cols, values)?;
    Ok(Arc::new(merged.examine_and_convert()?))
}

/// `item` with every occurrence of the very item `old` replaced by `new` (the chunks' lineage
/// chained: a chunk's chain starts from the item the variable had before the loop).
pub(crate) fn rebase(item: &Lineage, old: &Lineage, new: &Lineage) -> Lineage {
    if old.same(new) {
        return item.clone();
    }
    let mut done: HashMap<u64, Lineage> = HashMap::new();
    for node in item.topological() {
        let replaced = if node.same(old) {
            new.clone()
        } else {
            let inputs: Vec<Lineage> = node
                .inputs()
                .iter()
                .map(|i| done.get(&i.id()).cloned().unwrap_or_else(|| i.clone()))
                .collect();
            if inputs.iter().zip(node.inputs()).all(|(a, b)| a.same(b)) {
                node.clone()
            } else {
                Lineage::new(node.kind(), node.opcode(), node.data(), inputs)
            }
        };
        done.insert(node.id(), replaced);
    }
    done.remove(&item.id()).unwrap_or_else(|| item.clone())
}

/// Most iterations a `parfor` runs on threads (their loop values are listed up front).
const MAX_PARALLEL_ITERATIONS: i128 = 1 << 24;

/// The threads `parfor` uses and what its loops did, for `--stats`.
#[derive(Debug, Default)]
pub(crate) struct ParforState {
    threads: usize,
    /// Whether this interpreter is itself a worker (a nested `parfor` runs sequentially).
    pub(crate) in_worker: bool,
    pub(crate) parallel: u64,
    sequential: BTreeMap<String, u64>,
    /// Lineage items workers created on their threads (this thread's count misses them).
    pub(crate) worker_items: u64,
}

impl ParforState {
    /// `threads`: the configured count, or the available cores.
    pub(crate) fn new(threads: Option<usize>) -> ParforState {
        let threads = threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        });
        ParforState {
            threads: threads.max(1),
            ..ParforState::default()
        }
    }

    pub(crate) fn worker() -> ParforState {
        ParforState {
            threads: 1,
            in_worker: true,
            ..ParforState::default()
        }
    }

    /// Counts a `parfor` that ran sequentially, and why.
    pub(crate) fn sequential(&mut self, reason: String) {
        *self.sequential.entry(reason).or_insert(0) += 1;
    }

    pub(crate) fn absorb(&mut self, other: &ParforState) {
        self.parallel += other.parallel;
        for (reason, count) in &other.sequential {
            *self.sequential.entry(reason.clone()).or_insert(0) += count;
        }
    }

    pub(crate) fn sequential_reasons(&self) -> Vec<Fallback> {
        self.sequential
            .iter()
            .map(|(reason, count)| Fallback {
                reason: reason.clone(),
                count: *count,
            })
            .collect()
    }
}

fn worker_failed(detail: &'static str, span: Span) -> Error {
    Error::Runtime {
        error: RuntimeError::Internal(Internal::Worker { detail }),
        span: Some(span),
    }
}

impl<'p> Interpreter<'p, '_> {
    /// Runs `parfor (var in first, first + step, ...)` (`count` iterations) on threads when
    /// it may; `false` (with the reason counted) when it must run sequentially instead.
    pub(crate) fn try_parfor(
        &mut self,
        var: &ast::Ident,
        first: i128,
        step: i128,
        count: i128,
        body: &'p [Block],
        vars: &mut SymbolTable,
    ) -> Result<bool, Error> {
        let threads = self.parfor.threads;
        let checked = if let Some(blocker) = self.parfor_blocker() {
            Err(blocker.to_string())
        } else if threads < 2 {
            Err("one thread".to_string())
        } else if count < 2 {
            Err("fewer than two iterations".to_string())
        } else if count > MAX_PARALLEL_ITERATIONS
            || i64::try_from(first + (count - 1) * step).is_err()
        {
            Err("too many iterations to list".to_string())
        } else {
            analyze(&var.name, body, |n| {
                matches!(vars.get(n), Some(Value::Matrix(_)))
            })
        };
        let plan = match checked {
            Ok(plan) => plan,
            Err(reason) => {
                self.parfor.sequential(reason);
                return Ok(false);
            }
        };
        let chunks = chunks(first as i64, step as i64, count as usize, threads);
        // Locals start unbound in every worker: the check proved no iteration reads one before
        // assigning it, and a worker that binds one is then known to have assigned it.
        let mut base = vars.clone();
        plan.locals.iter().for_each(|l| drop(base.remove(l)));
        let seeds: Vec<_> = chunks
            .iter()
            .map(|_| {
                let mut seed = self.worker_seed();
                if let Some(map) = &mut seed.lineage {
                    plan.locals.iter().for_each(|l| drop(map.remove(l)));
                }
                seed
            })
            .collect();
        let name = &var.name;
        let ended: Vec<Result<WorkerDone, Error>> = std::thread::scope(|scope| {
            let handles: Vec<_> = seeds
                .into_iter()
                .zip(&chunks)
                .map(|(seed, chunk)| {
                    let mut wvars = base.clone();
                    scope.spawn(move || {
                        let mut out = Vec::new();
                        let mut worker = seed.interpreter(&mut out);
                        for &v in chunk {
                            let v = Value::Int(v);
                            worker.bind_loop_variable(name, &v);
                            wvars.insert(name.clone(), v);
                            worker.exec_body(body, &mut wvars)?;
                        }
                        Ok(worker.into_done(wvars))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(worker_failed("it panicked", var.span)))
                })
                .collect()
        });
        // The first failing chunk holds the iteration sequential execution would stop at.
        let mut done = Vec::with_capacity(ended.len());
        for result in ended {
            done.push(result?);
        }
        for d in &mut done {
            self.absorb(d);
        }
        self.merge_workers(var, &plan, &chunks, &done, vars)?;
        self.parfor.parallel += 1;
        Ok(true)
    }

    /// Puts the workers' results, locals and lineage into the caller's frame.
    fn merge_workers(
        &mut self,
        var: &ast::Ident,
        plan: &Independent,
        chunks: &[Vec<i64>],
        done: &[WorkerDone],
        vars: &mut SymbolTable,
    ) -> Result<(), Error> {
        let located = |error: RuntimeError| Error::Runtime {
            error,
            span: Some(var.span),
        };
        for r in &plan.results {
            let Some(Value::Matrix(original)) = vars.get(r) else {
                return Err(worker_failed("a result variable is not a matrix", var.span));
            };
            let mut copies = Vec::with_capacity(done.len());
            for d in done {
                match d.vars.get(r) {
                    Some(Value::Matrix(m)) => copies.push(m),
                    _ => return Err(worker_failed("a result variable was lost", var.span)),
                }
            }
            let merged = merge(original, &copies).map_err(located)?;
            let chained = self.frame_item(r).map(|before| {
                done.iter().fold(before.clone(), |chain, d| {
                    match d.lineage.as_ref().and_then(|m| m.get(r)) {
                        Some(item) => rebase(item, &before, &chain),
                        None => chain,
                    }
                })
            });
            vars.insert(r.clone(), Value::Matrix(merged));
            if let Some(item) = chained {
                self.set_frame_item(r, item);
            }
        }
        // A local holds what the last iteration that assigned it left, as sequentially.
        for l in &plan.locals {
            if let Some(d) = done.iter().rev().find(|d| d.vars.contains_key(l)) {
                vars.insert(l.clone(), d.vars[l].clone());
                if let Some(item) = d.lineage.as_ref().and_then(|m| m.get(l)) {
                    self.set_frame_item(l, item.clone());
                }
            }
        }
        if let Some(&last) = chunks.last().and_then(|c| c.last()) {
            let v = Value::Int(last);
            self.bind_loop_variable(&var.name, &v);
            vars.insert(var.name.clone(), v);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(script: &str) -> Vec<Block> {
        let source = lafuse_compiler::span::SourceFile::new("test", script);
        let script = lafuse_compiler::parser::parse(&source).expect("parses");
        let program = lafuse_compiler::program::build_program(script).expect("builds");
        match program.main.last() {
            Some(Block::For { body, .. }) => body.clone(),
            other => panic!("no loop: {other:?}"),
        }
    }

    #[test]
    fn row_updates_keyed_by_the_loop_variable_are_independent() {
        let b =
            body("R = matrix(0, 4, 2)\nparfor (i in 1:4) { x = i * 2\n R[i,] = matrix(x, 1, 2) }");
        let ind = analyze("i", &b, |n| n == "R").expect("independent");
        assert_eq!(ind.results, vec!["R"]);
        assert_eq!(ind.locals, vec!["x"]);
    }

    #[test]
    fn carried_values_prints_and_unkeyed_writes_are_refused() {
        let carried = body("s = 0\nparfor (i in 1:4) { s = s + i }");
        assert!(analyze("i", &carried, |_| false).is_err());
        let printing = body("parfor (i in 1:4) { print(i) }");
        assert!(analyze("i", &printing, |_| false).is_err());
        let unkeyed = body("R = matrix(0, 4, 2)\nparfor (i in 1:4) { R[1,] = matrix(i, 1, 2) }");
        assert!(analyze("i", &unkeyed, |n| n == "R").is_err());
        let reading = body("R = matrix(0, 4, 2)\nparfor (i in 1:4) { R[i,] = R[i,] + 1 }");
        assert!(analyze("i", &reading, |n| n == "R").is_err());
    }

    #[test]
    fn chunks_are_contiguous_and_cover_every_iteration() {
        assert_eq!(chunks(1, 1, 5, 2), vec![vec![1, 2, 3], vec![4, 5]]);
        assert_eq!(chunks(10, -2, 3, 8), vec![vec![10], vec![8], vec![6]]);
    }

    #[test]
    fn merge_takes_changed_cells_bit_for_bit() {
        let original =
            Arc::new(Matrix::from_dense_values(2, 2, vec![f64::NAN, 0.0, 1.0, 2.0]).unwrap());
        let a = Arc::new(Matrix::from_dense_values(2, 2, vec![f64::NAN, -0.0, 1.0, 2.0]).unwrap());
        let b = Arc::new(Matrix::from_dense_values(2, 2, vec![f64::NAN, 0.0, 5.0, 2.0]).unwrap());
        let m = merge(&original, &[&a, &b]).unwrap();
        assert!(m.get(0, 0).is_nan());
        assert_eq!(m.get(0, 1).to_bits(), (-0.0f64).to_bits());
        assert_eq!(m.get(1, 0), 5.0);
        assert_eq!(m.get(1, 1), 2.0);
    }
}
