//! The random-DAG generator shared by the fusion property tests: random element-wise ops,
//! aggregations, products, transposes, indexing and n-ary ops over inputs whose shapes make
//! every template reachable (outer products larger than 256x256, sparse drivers). Ops whose
//! shapes do not fit are skipped (the builder rejects them), so every generated DAG is valid.

#![allow(dead_code)]

use lafuse_compiler::hops::{
    AggOp, BinaryOp, CumulativeOp, DagBuilder, Direction, HopDag, HopId, NaryOp, OpKind, TernaryOp,
    UnaryOp,
};
use proptest::prelude::*;

/// One step of DAG construction: an op code and three operand picks (indices into the pool
/// of hops built so far, taken modulo its length).
#[derive(Clone, Debug)]
pub struct Step {
    pub op: u8,
    pub a: usize,
    pub b: usize,
    pub c: usize,
}

pub fn step() -> impl Strategy<Value = Step> {
    (0u8..18, any::<usize>(), any::<usize>(), any::<usize>()).prop_map(|(op, a, b, c)| Step {
        op,
        a,
        b,
        c,
    })
}

/// Builds a DAG from the steps; `outputs` picks which pool hops become block outputs.
/// With `x_nnz` of `None`, X's sizes are unknown (fusion must stay conservative, not panic).
pub fn build(steps: &[Step], x_nnz: Option<u64>, outputs: &[usize]) -> HopDag {
    let (m, n, k) = (300, 280, 3);
    let mut b = DagBuilder::new();
    let x = match x_nnz {
        Some(z) => b.input("X", m, n, z),
        None => b.input_with("X", None, Some(n), None),
    };
    let mut pool: Vec<HopId> = vec![
        x,
        b.input("Y", m, n, m * n),
        b.input("U", m, k, m * k),
        b.input("V", n, k, n * k),
        b.input("c", m, 1, m),
        b.input("r", 1, n, n),
        b.input("w", n, 1, n),
        b.literal_f64(0.0),
        b.literal_f64(2.0),
    ];
    for s in steps {
        let pick = |i: usize| pool[i % pool.len()];
        // The first operand is one of the four most recent hops, so that chains form.
        let recent = pool.len() - 1 - s.a % 4.min(pool.len());
        let (a, x, y) = (pool[recent], pick(s.b), pick(s.c));
        let r = match s.op {
            0 => b.unary(UnaryOp::ALL[s.b % UnaryOp::ALL.len()], a),
            1..=3 => b.binary(BinaryOp::ALL[s.c % BinaryOp::ALL.len()], a, x),
            4 => b.binary(BinaryOp::Mul, a, x),
            5 => b.agg(
                [AggOp::Sum, AggOp::Min, AggOp::Max, AggOp::Mean][s.b % 4],
                [Direction::Full, Direction::Row, Direction::Col][s.c % 3],
                a,
            ),
            6 | 7 => b.matmul(a, x),
            8 => b.transpose(a),
            9 => b.matmul(a, x).and_then(|p| b.transpose(p)),
            10 => {
                let dims = b.dag().hop(a).dims();
                match dims {
                    Some((r, c)) if c > 1 => b.index(a, (1, r), (1, 1 + (s.b as u64 % (c - 1)))),
                    _ => continue,
                }
            }
            11 => b.ternary(TernaryOp::IfElse, a, x, y),
            12 => b.add(OpKind::Nary(NaryOp::Max), &[a, x, y]),
            13 => b.add(OpKind::Nary(NaryOp::Cbind), &[a, x]),
            14 => b.add(OpKind::Cumulative(CumulativeOp::Cumsum), &[a]),
            15 => b.binary(BinaryOp::Ne, a, pool[7]),
            // U %*% t(V): an outer product larger than 256x256 (the Outer template's start).
            _ => b.transpose(pool[3]).and_then(|vt| b.matmul(pool[2], vt)),
        };
        if let Ok(h) = r {
            pool.push(h);
        }
    }
    let last = *pool.last().unwrap();
    let mut outs = vec![last];
    outs.extend(outputs.iter().map(|&i| pool[i % pool.len()]));
    outs.sort();
    outs.dedup();
    for (i, o) in outs.into_iter().enumerate() {
        b.output(&format!("o{i}"), o).unwrap();
    }
    b.build().unwrap()
}
