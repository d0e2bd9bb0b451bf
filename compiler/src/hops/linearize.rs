//! Linearization: the execution order of a DAG's hops.
//!
//! Depth-first from the roots in root (statement) order, inputs before users in input order,
//! each reachable hop exactly once. Side effects therefore run in statement order, and each
//! sees the values its inputs had at that point of the block (values are immutable hops; a
//! reassigned variable is a different hop). `TransientWrite`s are deferred to the very end (in
//! root order), so a `TransientRead` scheduled late still reads the variable's value at block
//! entry even when an executor binds writes into its symbol table as it goes.

use super::ir::{HopDag, HopId, OpKind};

/// Returns the reachable hops of a verified DAG in execution order.
///
/// ```
/// use lafuse_compiler::hops::{linearize, DagBuilder, BinaryOp};
/// let mut b = DagBuilder::new();
/// let x = b.input("X", 10, 10, 100);
/// let y = b.binary(BinaryOp::Mul, x, x).unwrap();
/// b.output("Y", y).unwrap();
/// let dag = b.build().unwrap();
/// let order = linearize(&dag);
/// assert_eq!(order.len(), 3); // TRead X, b(*), TWrite Y
/// assert!(matches!(dag.hop(order[2]).op, lafuse_compiler::hops::OpKind::TransientWrite { .. }));
/// ```
pub fn linearize(dag: &HopDag) -> Vec<HopId> {
    let n = dag.hops.len();
    let mut visited = vec![false; n];
    let mut order = Vec::with_capacity(n);
    let mut writes = Vec::new();
    for &root in &dag.roots {
        if root.index() >= n {
            continue;
        }
        if matches!(dag.hop(root).op, OpKind::TransientWrite { .. }) {
            for &input in &dag.hop(root).inputs {
                visit(dag, input, &mut visited, &mut order);
            }
            writes.push(root);
        } else {
            visit(dag, root, &mut visited, &mut order);
        }
    }
    for w in writes {
        if !std::mem::replace(&mut visited[w.index()], true) {
            order.push(w);
        }
    }
    order
}

/// Iterative post-order DFS (no recursion: DAGs can be deep). Tolerates cycles and bad ids by
/// skipping them, so it never loops or panics even on an unverified DAG.
fn visit(dag: &HopDag, start: HopId, visited: &mut [bool], order: &mut Vec<HopId>) {
    let n = dag.hops.len();
    if start.index() >= n || visited[start.index()] {
        return;
    }
    let mut stack: Vec<(HopId, usize)> = vec![(start, 0)];
    visited[start.index()] = true;
    while let Some(&mut (node, ref mut next)) = stack.last_mut() {
        let inputs = &dag.hop(node).inputs;
        if *next < inputs.len() {
            let input = inputs[*next];
            *next += 1;
            if input.index() < n && !visited[input.index()] {
                visited[input.index()] = true;
                stack.push((input, 0));
            }
        } else {
            order.push(node);
            stack.pop();
        }
    }
}
