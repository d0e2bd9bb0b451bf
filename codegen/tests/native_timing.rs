//! Figures, not assertions (DESIGN 7: no timed tests): JIT compile time per operator and a
//! quick `sum(X * Y * Z)` comparison of native vs unfused kernels vs the reference evaluator.
//! Run with `cargo test -p lafuse-codegen --release --test native_timing -- --ignored --nocapture`.
#![cfg(feature = "llvm")]

use lafuse_codegen::native::compile;
use lafuse_codegen::reference::Operand;
use lafuse_compiler::fusion::cplan::{Access, CNode, CPlan, InputKind, TemplateSpec};
use lafuse_compiler::fusion::template::{CellAgg, CellType};
use lafuse_compiler::hops::BinaryOp as B;
use lafuse_runtime::{kernels, ops, Matrix};
use std::time::Instant;

#[test]
#[ignore = "prints timings; allocates 2.4 GB"]
fn sum_xyz_native_vs_unfused() {
    let plan = CPlan {
        template: TemplateSpec::Cell {
            cell_type: CellType::FullAgg,
            agg: Some(CellAgg::Sum),
            sparse_safe: false,
        },
        inputs: vec![InputKind::Matrix; 3],
        nodes: vec![
            CNode::Data {
                input: 0,
                access: Access::Main,
            },
            CNode::Data {
                input: 1,
                access: Access::Aligned,
            },
            CNode::Data {
                input: 2,
                access: Access::Aligned,
            },
            CNode::Binary {
                f: B::Mul,
                a: 0,
                b: 1,
            },
            CNode::Binary {
                f: B::Mul,
                a: 3,
                b: 2,
            },
        ],
        outputs: vec![4],
    };
    let mut times: Vec<f64> = (0..9)
        .map(|_| compile(&plan).unwrap().compile_time().as_secs_f64() * 1e3)
        .collect();
    times.sort_by(f64::total_cmp);
    println!("compile time sum(X*Y*Z): median {:.2} ms", times[4]);
    let op = compile(&plan).unwrap();
    let (m, n) = (100_000, 1_000);
    let mk = |s: f64| {
        Matrix::from_dense_values(
            m,
            n,
            (0..m * n).map(|k| ((k % 1013) as f64) * 1e-3 + s).collect(),
        )
        .unwrap()
    };
    let (x, y, z) = (mk(0.1), mk(0.2), mk(0.3));
    let ins = [
        Operand::Matrix(&x),
        Operand::Matrix(&y),
        Operand::Matrix(&z),
    ];
    for _ in 0..3 {
        let t = Instant::now();
        let r = op.execute(&ins, &[(1, 1)]).unwrap()[0].get(0, 0);
        let tn = t.elapsed();
        let t = Instant::now();
        let xy = kernels::binary(&x, &y, ops::BinaryOp::Mul).unwrap();
        let xyz = kernels::binary(&xy, &z, ops::BinaryOp::Mul).unwrap();
        let u = kernels::aggregate(&xyz, ops::AggOp::Sum, ops::Direction::Full)
            .unwrap()
            .get(0, 0);
        let tu = t.elapsed();
        println!(
            "sum(X*Y*Z) 1e5x1e3: native {tn:?} unfused {tu:?} (speedup {:.2}x) values {r} {u}",
            tu.as_secs_f64() / tn.as_secs_f64()
        );
    }
}
