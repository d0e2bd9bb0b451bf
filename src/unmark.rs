//! Compiler assistance for reuse, unmarking (LIMA section 4.4): the operations of a loop of the
//! main program that read a variable the loop updates from its previous value on every path
//! (`w = w - g`, `s = s + x`) are neither probed nor cached. Their lineage grows with every
//! iteration, so no probe of the run can ever match it, and caching them would only push out
//! values that can be reused.
//!
//! Conservative, as LIMA is: only loops at the main program's top level (a loop nested in
//! another, or in a function, may run again from the same state, and then its chain repeats:
//! a repeated hyper-parameter search reuses it), only basic blocks directly in the loop's body
//! (or in its `if` branches: a nested loop keeps such a variable fixed while it runs), and only
//! variables assigned on every path through the body. Unmarking never changes a result; it
//! only skips probes that cannot hit.

use crate::compile::{expr_reads, stmt_reads};
use lafuse_compiler::ast;
use lafuse_compiler::program::{BasicBlock, Block, Program};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The variables whose readers are unmarked, by the address of the basic block they are read
/// in (the engine's plan key).
pub(crate) fn unmarked_blocks(program: &Program) -> HashMap<usize, Arc<[String]>> {
    let mut by_block = HashMap::new();
    for block in &program.main {
        let (body, loop_var) = match block {
            Block::For { body, var, .. } => (body, Some(var.name.as_str())),
            Block::While { body, .. } => (body, None),
            _ => continue,
        };
        let mut flow = Flow::default();
        flow.walk(body);
        let mut carried: Vec<String> = flow
            .read_first
            .iter()
            .filter(|v| flow.assigned.contains(*v) && Some(**v) != loop_var)
            .map(|v| v.to_string())
            .collect();
        if carried.is_empty() {
            continue;
        }
        carried.sort();
        let carried: Arc<[String]> = carried.into();
        for basic in basic_blocks(body, false) {
            by_block.insert(basic as *const BasicBlock as usize, carried.clone());
        }
    }
    by_block
}

/// The basic blocks of `blocks` and of their `if` branches, and with `into_loops` of the
/// bodies of their loops too (calls' bodies never: they are the functions').
pub(crate) fn basic_blocks(blocks: &[Block], into_loops: bool) -> Vec<&BasicBlock> {
    let mut found = Vec::new();
    let mut stack: Vec<&[Block]> = vec![blocks];
    while let Some(blocks) = stack.pop() {
        for block in blocks {
            match block {
                Block::Basic(basic) => found.push(basic),
                Block::If {
                    then_blocks,
                    else_blocks,
                    ..
                } => {
                    stack.push(then_blocks);
                    stack.push(else_blocks);
                }
                Block::For { body, .. } | Block::While { body, .. } if into_loops => {
                    stack.push(body)
                }
                Block::For { .. } | Block::While { .. } | Block::Call(_) => {}
            }
        }
    }
    found
}

/// What a walk of a loop body in execution order found: the variables it may read before
/// assigning them, and those assigned on every path so far.
#[derive(Default)]
struct Flow<'p> {
    read_first: HashSet<&'p str>,
    assigned: HashSet<&'p str>,
}

impl<'p> Flow<'p> {
    fn read(&mut self, names: Vec<&'p str>) {
        for name in names {
            if !self.assigned.contains(name) {
                self.read_first.insert(name);
            }
        }
    }

    fn walk(&mut self, blocks: &'p [Block]) {
        for block in blocks {
            match block {
                Block::Basic(basic) => {
                    for stmt in &basic.stmts {
                        let mut reads = Vec::new();
                        stmt_reads(stmt, &mut reads);
                        self.read(reads);
                        match &stmt.kind {
                            ast::StmtKind::Assign { target, .. } => {
                                self.assigned.insert(&target.name);
                            }
                            ast::StmtKind::MultiAssign { targets, .. } => {
                                self.assigned
                                    .extend(targets.iter().map(|t| t.name.as_str()));
                            }
                            _ => {}
                        }
                    }
                }
                Block::Call(call) => {
                    for arg in &call.args {
                        let mut reads = Vec::new();
                        expr_reads(&arg.value, &mut reads);
                        self.read(reads);
                    }
                    self.assigned
                        .extend(call.targets.iter().map(|t| t.name.as_str()));
                }
                Block::If {
                    cond,
                    then_blocks,
                    else_blocks,
                    ..
                } => {
                    let mut reads = Vec::new();
                    expr_reads(cond, &mut reads);
                    self.read(reads);
                    // Assigned after the `if` only what both branches assign.
                    let mut then = self.branch();
                    then.walk(then_blocks);
                    let mut other = self.branch();
                    other.walk(else_blocks);
                    self.read_first.extend(then.read_first);
                    self.read_first.extend(other.read_first);
                    self.assigned = then
                        .assigned
                        .intersection(&other.assigned)
                        .copied()
                        .collect();
                }
                Block::For {
                    from,
                    to,
                    step,
                    body,
                    ..
                } => {
                    let mut reads = Vec::new();
                    for e in [Some(from), Some(to), step.as_ref()].into_iter().flatten() {
                        expr_reads(e, &mut reads);
                    }
                    self.read(reads);
                    self.nested_loop(body);
                }
                Block::While { cond, body, .. } => {
                    let mut reads = Vec::new();
                    expr_reads(cond, &mut reads);
                    self.read(reads);
                    self.nested_loop(body);
                }
            }
        }
    }

    fn branch(&self) -> Flow<'p> {
        Flow {
            read_first: HashSet::new(),
            assigned: self.assigned.clone(),
        }
    }

    /// A nested loop may not run: what it reads counts, what it assigns does not.
    fn nested_loop(&mut self, body: &'p [Block]) {
        let mut inner = self.branch();
        inner.walk(body);
        self.read_first.extend(inner.read_first);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn carried(text: &str) -> Vec<Vec<String>> {
        let source = crate::SourceFile::new("t.dml", text);
        let program = crate::Engine::new(crate::EngineConfig::default())
            .front_end(&source, &crate::ScriptArgs::default())
            .unwrap();
        let by_block = unmarked_blocks(&program);
        let mut sets: Vec<Vec<String>> = by_block.values().map(|s| s.to_vec()).collect();
        sets.sort();
        sets.dedup();
        sets
    }

    #[test]
    fn variables_updated_from_themselves_on_every_path_are_carried() {
        let sets = carried(
            "X = rand(rows=10, cols=3, seed=1)
w = matrix(0, 3, 1)
s = 0
u = 0
for (i in 1:5) {
  g = t(X) %*% (X %*% w)
  w = w - 0.1 * g
  s = s + sum(w)
  if (s > 3) { t = 1 } else { t = 2 }
  if (s > 4) { u = u + 1 }
  G = t(X) %*% X
}
print(s + u)",
        );
        // `g` and `G` are assigned before read, `t` is not read, `u` not on every path.
        assert_eq!(sets, vec![vec!["s".to_string(), "w".to_string()]]);
    }

    #[test]
    fn nested_loops_and_loops_in_functions_are_left_alone() {
        let sets = carried(
            "f = function(matrix[double] w) return (matrix[double] w) {
  for (i in 1:3) { w = w * 2 }
}
w = matrix(1, 2, 2)
for (r in 1:2) {
  v = w
  for (i in 1:3) { v = v + 1 }
}
print(sum(f(w)))",
        );
        assert!(sets.is_empty(), "{sets:?}");
    }
}
