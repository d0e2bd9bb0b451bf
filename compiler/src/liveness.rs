//! Liveness of variables across blocks, as SystemDS's analysis: dead assignments are dropped,
//! and each basic block learns which of its variables are live after it.
//!
//! SystemDS writes a statement block's variable back only where it is live out of the block,
//! so an assignment nothing reads afterwards never runs, and neither do its errors: `steplm`
//! computes `beta_best = beta_out_all[, column_best]` with `column_best = 0` when no feature
//! improves the model, and reads `beta_best` nowhere. An assignment is dead when no later
//! statement (around loops: any statement of the loop, the condition and bounds included) can
//! read the variable before it is assigned again and it is not live at the end: a function's
//! results, or the main program's variables that the caller reads after the run (an embedder's
//! outputs; every variable when the run traces lineage, whose report shows them all).
//!
//! Each basic block records its live-out set ([`crate::program::BasicBlock::live_out`]): a
//! variable assigned in the block but dead after it (MLogReg's `Q = P * (X %*% V)`, read by the
//! next statement only) gets no write-back, so the fusion optimizer may keep it inside a fused
//! operator instead of materialising it.
//!
//! The analysis is conservative: a call block or a nested control-flow statement never ends a
//! variable's life (an `eval` candidate may not run), and only assignments of built-in
//! expressions are dropped (user-defined calls are call blocks, which always run).

use crate::ast::{self, Expr, IndexRange, Stmt, StmtKind};
use crate::program::Block;
use crate::stack::with_stack;
use std::collections::BTreeSet;

/// Variable names.
type Live = BTreeSet<String>;

/// Drops the dead assignments of a function body whose results are `results` (or of a main
/// program whose caller reads `results` after the run), and records each basic block's
/// live-out set.
///
/// `call_reads` are the variables a call may read from its caller's scope besides its
/// arguments: those its parameters' default expressions name (`Double c = offset + 1` reads
/// the caller's `offset`, as in SystemDS), live at every call.
pub fn drop_dead_assignments(
    body: &mut Vec<Block>,
    results: impl IntoIterator<Item = String>,
    call_reads: &BTreeSet<String>,
) {
    let live: Live = results.into_iter().collect();
    blocks(&Cx { call_reads }, body, live, true);
}

/// What the analysis knows of the whole program.
struct Cx<'a> {
    call_reads: &'a Live,
}

/// The variables the parameters' default expressions of `functions` read.
pub fn default_reads<'f>(functions: impl IntoIterator<Item = &'f ast::FunctionDef>) -> Live {
    let mut live = Live::new();
    for f in functions {
        for p in &f.params {
            if let Some(d) = &p.default {
                reads(d, &mut live);
            }
        }
    }
    live
}

/// The variables live before `blocks`, given those live after; with `drop`, removes the dead
/// assignments (and the basic blocks left empty).
fn blocks(cx: &Cx<'_>, blocks_: &mut Vec<Block>, mut live: Live, drop: bool) -> Live {
    for block in blocks_.iter_mut().rev() {
        live = with_stack(|| one_block(cx, block, live, drop));
    }
    if drop {
        blocks_.retain(|b| !matches!(b, Block::Basic(basic) if basic.stmts.is_empty()));
    }
    live
}

fn one_block(cx: &Cx<'_>, block: &mut Block, mut live: Live, drop: bool) -> Live {
    match block {
        Block::Basic(basic) => {
            basic.live_out = Some(live.clone());
            let mut kept = Vec::with_capacity(basic.stmts.len());
            for stmt in std::mem::take(&mut basic.stmts).into_iter().rev() {
                let (dead, live_before) = statement(&stmt, live);
                live = live_before;
                if !(drop && dead) {
                    kept.push(stmt);
                }
            }
            kept.reverse();
            basic.stmts = kept;
            live
        }
        Block::If {
            cond,
            then_blocks,
            else_blocks,
            ..
        } => {
            let mut before = blocks(cx, then_blocks, live.clone(), drop);
            before.extend(blocks(cx, else_blocks, live, drop));
            reads(cond, &mut before);
            before
        }
        Block::For {
            var,
            from,
            to,
            step,
            body,
            ..
        } => {
            let mut bounds = Live::new();
            for e in [Some(&*from), Some(&*to), step.as_ref()]
                .into_iter()
                .flatten()
            {
                reads(e, &mut bounds);
            }
            // The loop variable is assigned before each iteration, and read after the loop.
            let mut at_head = looped(cx, body, &live, &bounds, drop);
            at_head.insert(var.name.clone());
            at_head
        }
        Block::While { cond, body, .. } => {
            let mut at_cond = Live::new();
            reads(cond, &mut at_cond);
            looped(cx, body, &live, &at_cond, drop)
        }
        Block::Call(call) => {
            for arg in &call.args {
                reads(&arg.value, &mut live);
            }
            live.extend(cx.call_reads.iter().cloned());
            live
        }
    }
}

/// The variables live at the head of a loop whose `body` may run any number of times, with
/// `after` live after the loop and `head` read at its head: the fixpoint of live-at-head =
/// after + head + live-before-body(live-at-head), then `body` analysed (and dropped from) once
/// with it.
fn looped(cx: &Cx<'_>, body: &mut Vec<Block>, after: &Live, head: &Live, drop: bool) -> Live {
    let mut at_head: Live = after.union(head).cloned().collect();
    loop {
        let before_body = blocks(cx, &mut body.clone(), at_head.clone(), false);
        let next: Live = at_head.union(&before_body).cloned().collect();
        if next == at_head {
            break;
        }
        at_head = next;
    }
    blocks(cx, body, at_head.clone(), drop);
    at_head
}

/// Whether `stmt` is a dead assignment, and the variables live before it.
fn statement(stmt: &Stmt, mut live: Live) -> (bool, Live) {
    match &stmt.kind {
        StmtKind::Assign { target, value } => {
            if !live.remove(&target.name) {
                return (true, live);
            }
            reads(value, &mut live);
        }
        StmtKind::IndexAssign {
            target,
            rows,
            cols,
            value,
        } => {
            if !live.contains(&target.name) {
                return (true, live);
            }
            for range in [rows, cols].into_iter().flatten() {
                range_reads(range, &mut live);
            }
            reads(value, &mut live);
        }
        StmtKind::MultiAssign { targets, call } => {
            if targets.iter().all(|t| !live.contains(&t.name)) {
                return (true, live);
            }
            for t in targets {
                live.remove(&t.name);
            }
            reads(call, &mut live);
        }
        StmtKind::Expr(e) => reads(e, &mut live),
        // Control flow is a block of its own after `build_program`; should one appear here,
        // everything it reads stays live and nothing it assigns ends a life.
        StmtKind::If { .. } | StmtKind::For { .. } | StmtKind::While { .. } => {
            nested_reads(stmt, &mut live)
        }
    }
    (false, live)
}

fn nested_reads(stmt: &Stmt, live: &mut Live) {
    with_stack(|| match &stmt.kind {
        StmtKind::Assign { value, .. } => reads(value, live),
        StmtKind::IndexAssign {
            target,
            rows,
            cols,
            value,
        } => {
            live.insert(target.name.clone());
            for range in [rows, cols].into_iter().flatten() {
                range_reads(range, live);
            }
            reads(value, live);
        }
        StmtKind::MultiAssign { call, .. } => reads(call, live),
        StmtKind::Expr(e) => reads(e, live),
        StmtKind::If {
            cond,
            then_body,
            else_body,
        } => {
            reads(cond, live);
            then_body
                .iter()
                .chain(else_body)
                .for_each(|s| nested_reads(s, live));
        }
        StmtKind::For {
            from,
            to,
            step,
            body,
            ..
        } => {
            for e in [Some(from), Some(to), step.as_ref()].into_iter().flatten() {
                reads(e, live);
            }
            body.iter().for_each(|s| nested_reads(s, live));
        }
        StmtKind::While { cond, body } => {
            reads(cond, live);
            body.iter().for_each(|s| nested_reads(s, live));
        }
    })
}

/// Adds the variables `e` reads to `live`.
fn reads(e: &Expr, live: &mut Live) {
    let mut names = Vec::new();
    e.variables_read(&mut names);
    live.extend(names.into_iter().map(str::to_string));
}

fn range_reads(range: &IndexRange, live: &mut Live) {
    let mut names = Vec::new();
    range.variables_read(&mut names);
    live.extend(names.into_iter().map(str::to_string));
}

#[cfg(test)]
mod tests {
    use crate::parser::parse;
    use crate::program::{build_program, Block, Program};
    use crate::span::SourceFile;

    fn program(text: &str) -> Program {
        build_program(parse(&SourceFile::new("t.dml", text)).unwrap()).unwrap()
    }

    /// The statements of `blocks` as their source text, one block per `|`-joined group.
    fn statements(text: &str, blocks: &[Block]) -> Vec<String> {
        let mut out = vec![];
        for block in blocks {
            match block {
                Block::Basic(b) => out.extend(
                    b.stmts
                        .iter()
                        .map(|s| text[s.span.start as usize..s.span.end as usize].to_string()),
                ),
                Block::If {
                    then_blocks,
                    else_blocks,
                    ..
                } => {
                    out.push("if".into());
                    out.extend(statements(text, then_blocks));
                    out.push("else".into());
                    out.extend(statements(text, else_blocks));
                }
                Block::For { body, .. } | Block::While { body, .. } => {
                    out.push("loop".into());
                    out.extend(statements(text, body));
                }
                Block::Call(c) => out.push(format!("call {}", c.function)),
            }
        }
        out
    }

    fn body(text: &str) -> Vec<String> {
        statements(text, &program(text).functions["f"].body)
    }

    /// The live-out set of the basic blocks of `blocks`, depth first.
    fn live_outs(blocks: &[Block]) -> Vec<Vec<String>> {
        let mut out = vec![];
        for block in blocks {
            match block {
                Block::Basic(b) => {
                    out.push(b.live_out.iter().flatten().cloned().collect());
                }
                Block::If {
                    then_blocks,
                    else_blocks,
                    ..
                } => {
                    out.extend(live_outs(then_blocks));
                    out.extend(live_outs(else_blocks));
                }
                Block::For { body, .. } | Block::While { body, .. } => out.extend(live_outs(body)),
                Block::Call(_) => {}
            }
        }
        out
    }

    /// MLogReg's inner loop: `Q` is read only by the next statement of its block, so the block
    /// does not write it back; what the next iteration or the rest of the program reads, it
    /// does.
    #[test]
    fn a_value_read_only_within_its_block_is_not_live_out() {
        let text = "X = rand(rows=3, cols=3)
i = 0
while (i < 3) {
  Q = X * 2
  H = sum(Q)
  X = X + H
  i = i + 1
}
print(sum(X))";
        let mut p = program(text);
        p.drop_dead_main([]);
        assert_eq!(live_outs(&p.main), [vec!["X", "i"], vec!["X", "i"], vec![]]);
        let mut p = program(text);
        p.drop_dead_main(["Q".to_string()]);
        assert_eq!(
            live_outs(&p.main)[1],
            ["Q", "X", "i"],
            "a caller reads Q after the run"
        );
    }

    /// A parameter's default may name a variable of the caller (`offset` here, as SystemDS
    /// allows): it stays live at every call.
    #[test]
    fn what_a_default_parameter_reads_is_live_at_calls() {
        let text = "f = function(Double a, Double c = offset + 1) return (Double r) {
  r = a + c
}
offset = 2
unused = 3
y = f(1)
print(y)";
        let mut p = program(text);
        p.drop_dead_main([]);
        assert_eq!(
            statements(text, &p.main),
            ["offset = 2", "call f", "print(y)"]
        );
    }

    #[test]
    fn an_assignment_nothing_reads_is_dropped_with_its_errors() {
        let text = "f = function(Matrix[Double] X, Integer c) return (Matrix[Double] r) {
  b = X[, c]
  r = X + 1
  if (c == 0) { print(\"none\") } else { r = X }
}";
        assert_eq!(
            body(text),
            ["r = X + 1", "if", "print(\"none\")", "else", "r = X"]
        );
    }

    #[test]
    fn results_and_what_a_later_iteration_reads_stay() {
        let text = "f = function(Integer n) return (Double r) {
  x = 1
  y = 0
  k = 0
  while (k < n) {
    y = x
    x = k
    t = k * 2
    k = k + 1
  }
  unused = 5
  r = y
}";
        assert_eq!(
            body(text),
            [
                "x = 1",
                "y = 0",
                "k = 0",
                "loop",
                "y = x",
                "x = k",
                "k = k + 1",
                "r = y"
            ]
        );
    }

    #[test]
    fn left_indexing_a_dead_matrix_is_dropped_and_a_live_ones_kept() {
        let text = "f = function(Integer n) return (Matrix[Double] r) {
  A = matrix(0, rows=2, cols=2)
  r = matrix(0, rows=2, cols=2)
  for (i in 1:2) {
    A[i, i] = n
    r[i, 1] = i
  }
}";
        assert_eq!(
            body(text),
            ["r = matrix(0, rows=2, cols=2)", "loop", "r[i, 1] = i"]
        );
    }

    #[test]
    fn the_main_program_keeps_every_assignment() {
        let text = "a = 1\nb = a + 1\n";
        assert_eq!(
            statements(text, &program(text).main),
            ["a = 1", "b = a + 1"]
        );
    }
}
