//! Dead assignments in function bodies, dropped as SystemDS's liveness analysis drops them.
//!
//! SystemDS writes a statement block's variable back only where it is live out of the block,
//! so an assignment nothing reads afterwards never runs, and neither do its errors: `steplm`
//! computes `beta_best = beta_out_all[, column_best]` with `column_best = 0` when no feature
//! improves the model, and reads `beta_best` nowhere. A function's results are all it shows, so
//! in its body an assignment is dead when no later statement (around loops: any statement of
//! the loop, the condition and bounds included) can read the variable before it is assigned
//! again and it is not a result. Main-program variables are left alone: an embedder reads them
//! after the run.
//!
//! The analysis is conservative: a call block or a nested control-flow statement never ends a
//! variable's life (an `eval` candidate may not run), and only assignments of built-in
//! expressions are dropped (user-defined calls are call blocks, which always run).

use crate::ast::{Expr, IndexRange, Stmt, StmtKind};
use crate::program::Block;
use crate::stack::with_stack;
use std::collections::BTreeSet;

/// Variable names.
type Live = BTreeSet<String>;

/// Drops the dead assignments of a function body whose results are `results`.
pub fn drop_dead_assignments(body: &mut Vec<Block>, results: impl IntoIterator<Item = String>) {
    let live: Live = results.into_iter().collect();
    blocks(body, live, true);
}

/// The variables live before `blocks`, given those live after; with `drop`, removes the dead
/// assignments (and the basic blocks left empty).
fn blocks(blocks_: &mut Vec<Block>, mut live: Live, drop: bool) -> Live {
    for block in blocks_.iter_mut().rev() {
        live = with_stack(|| one_block(block, live, drop));
    }
    if drop {
        blocks_.retain(|b| !matches!(b, Block::Basic(basic) if basic.stmts.is_empty()));
    }
    live
}

fn one_block(block: &mut Block, mut live: Live, drop: bool) -> Live {
    match block {
        Block::Basic(basic) => {
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
            let mut before = blocks(then_blocks, live.clone(), drop);
            before.extend(blocks(else_blocks, live, drop));
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
            let mut at_head = looped(body, &live, &bounds, drop);
            at_head.insert(var.name.clone());
            at_head
        }
        Block::While { cond, body, .. } => {
            let mut at_cond = Live::new();
            reads(cond, &mut at_cond);
            looped(body, &live, &at_cond, drop)
        }
        Block::Call(call) => {
            for arg in &call.args {
                reads(&arg.value, &mut live);
            }
            live
        }
    }
}

/// The variables live at the head of a loop whose `body` may run any number of times, with
/// `after` live after the loop and `head` read at its head: the fixpoint of live-at-head =
/// after + head + live-before-body(live-at-head), then `body` analysed (and dropped from) once
/// with it.
fn looped(body: &mut Vec<Block>, after: &Live, head: &Live, drop: bool) -> Live {
    let mut at_head: Live = after.union(head).cloned().collect();
    loop {
        let before_body = blocks(&mut body.clone(), at_head.clone(), false);
        let next: Live = at_head.union(&before_body).cloned().collect();
        if next == at_head {
            break;
        }
        at_head = next;
    }
    blocks(body, at_head.clone(), drop);
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
