//! Threads sharing one operator cache, each asking for the same fresh plans at once through
//! the rayon pool, as engines shared by threads do. In a process of its own, so that the
//! vector math and Row block libraries are not built yet and the first compilations join on
//! the pool to build them: requests on the pool used to wait on a slot another worker was compiling while that
//! compilation's `rayon::join` waited for them, and the process hung.
#![cfg(feature = "llvm")]

use lafuse_codegen::backend::MainFormat;
use lafuse_codegen::native::OperatorCache;
use lafuse_compiler::fusion::cplan::{construct_cplans, CPlan};
use lafuse_compiler::fusion::{plan_fusion, FuseAll};
use lafuse_compiler::hops::{AggOp, BinaryOp, DagBuilder, Direction, UnaryOp};

/// Fused operators that call `exp` or `log`: `sum(f(X) * Y)` and `rowSums(f(X) + Y)`.
fn plans() -> Vec<CPlan> {
    let mut plans = Vec::new();
    for f in [UnaryOp::Exp, UnaryOp::Log] {
        for direction in [Direction::Full, Direction::Row] {
            let mut b = DagBuilder::new();
            let x = b.input("X", 300, 40, 12000);
            let y = b.input("Y", 300, 40, 12000);
            let fx = b.unary(f, x).unwrap();
            let op = if direction == Direction::Full {
                BinaryOp::Mul
            } else {
                BinaryOp::Add
            };
            let body = b.binary(op, fx, y).unwrap();
            let s = b.agg(AggOp::Sum, direction, body).unwrap();
            b.output("s", s).unwrap();
            let dag = b.build().unwrap();
            let plan = plan_fusion(&dag, &FuseAll).unwrap();
            let program = construct_cplans(&dag, &plan.memo, &plan.selection).unwrap();
            plans.extend(program.operators.into_iter().map(|op| op.cplan));
        }
    }
    // `t(X) %*% (w * (X %*% v))`: a Row operator calling the block primitives' library.
    let mut b = DagBuilder::new();
    let x = b.input("X", 300, 40, 12000);
    let v = b.input("v", 40, 1, 40);
    let w = b.input("w", 300, 1, 300);
    let xv = b.matmul(x, v).unwrap();
    let wxv = b.binary(BinaryOp::Mul, w, xv).unwrap();
    let tx = b.transpose(x).unwrap();
    let r = b.matmul(tx, wxv).unwrap();
    b.output("R", r).unwrap();
    let dag = b.build().unwrap();
    let plan = plan_fusion(&dag, &FuseAll).unwrap();
    let program = construct_cplans(&dag, &plan.memo, &plan.selection).unwrap();
    plans.extend(program.operators.into_iter().map(|op| op.cplan));
    assert_eq!(plans.len(), 5);
    plans
}

#[test]
fn batched_lookups_from_many_threads_never_deadlock() {
    let cache = OperatorCache::new();
    let plans = plans();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        for t in 0..8 {
            let (cache, plans, done) = (&cache, &plans, done.clone());
            s.spawn(move || {
                let main = if t % 2 == 0 {
                    MainFormat::Dense
                } else {
                    MainFormat::Sparse
                };
                let requests: Vec<(&CPlan, MainFormat)> = plans.iter().map(|p| (p, main)).collect();
                let all_ok = cache
                    .lookup_all_for(&requests)
                    .into_iter()
                    .all(|(op, _)| op.is_ok());
                done.send(all_ok).unwrap();
            });
        }
        for _ in 0..8 {
            // A hang is a failure, not a CI timeout.
            let ok = finished
                .recv_timeout(std::time::Duration::from_secs(300))
                .unwrap_or_else(|_| {
                    eprintln!("batched lookups from several threads deadlocked");
                    std::process::abort()
                });
            assert!(ok);
        }
    });
}
