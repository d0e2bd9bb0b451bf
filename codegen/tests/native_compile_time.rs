//! Figures, not assertions (DESIGN 7: no timed tests): JIT compile time per operator for a
//! representative set of hand-built plans (Cell full-agg and no-agg, MultiAgg, Outer full-agg,
//! Row col-agg-T and no-agg), median of 9 compilations, with the per-phase split
//! [`NativeOperator::compile_phases`] records.
//! Run with
//! `cargo test -p lafuse-codegen --release --test native_compile_time -- --ignored --nocapture`.
#![cfg(feature = "llvm")]

use lafuse_codegen::native::{build_libraries, compile, CompilePhases, OperatorCache};
use lafuse_compiler::fusion::cplan::{
    count_vector_intermediates, Access, CNode, CPlan, InputKind, OuterType, RowType, TemplateSpec,
};
use lafuse_compiler::fusion::template::{CellAgg, CellType};
use lafuse_compiler::hops::{AggOp, BinaryOp as B, Literal, NaryOp, UnaryOp as U};
use std::time::Duration;

const M: InputKind = InputKind::Matrix;

fn data(input: usize, access: Access) -> CNode {
    CNode::Data { input, access }
}
fn lit(v: f64) -> CNode {
    CNode::Literal {
        value: Literal::Double(v),
    }
}
fn bin(f: B, a: usize, b: usize) -> CNode {
    CNode::Binary { f, a, b }
}
fn push(n: &mut Vec<CNode>, c: CNode) -> usize {
    n.push(c);
    n.len() - 1
}

/// `sum(X * Y * Z)`: Cell full aggregation over three aligned inputs.
fn cell_sum_xyz() -> CPlan {
    CPlan {
        template: TemplateSpec::Cell {
            cell_type: CellType::FullAgg,
            agg: Some(CellAgg::Sum),
            sparse_safe: false,
        },
        inputs: vec![M; 3],
        nodes: vec![
            data(0, Access::Main),
            data(1, Access::Aligned),
            data(2, Access::Aligned),
            bin(B::Mul, 0, 1),
            bin(B::Mul, 3, 2),
        ],
        outputs: vec![4],
    }
}

/// `exp(X) * log(Y + r) - c`: Cell without aggregation, transcendental primitives inlined.
fn cell_noagg_exp_log() -> CPlan {
    let mut n = vec![
        data(0, Access::Main),
        data(1, Access::Aligned),
        data(2, Access::RowVector),
        data(3, Access::ColVector),
    ];
    let e = push(&mut n, CNode::Unary { f: U::Exp, x: 0 });
    let yr = push(&mut n, bin(B::Add, 1, 2));
    let l = push(&mut n, CNode::Unary { f: U::Log, x: yr });
    let el = push(&mut n, bin(B::Mul, e, l));
    let out = push(&mut n, bin(B::Sub, el, 3));
    CPlan {
        template: TemplateSpec::Cell {
            cell_type: CellType::NoAgg,
            agg: None,
            sparse_safe: false,
        },
        inputs: vec![M; 4],
        nodes: n,
        outputs: vec![out],
    }
}

/// `sum(X * Y)` and `max(X + Y)` in one pass.
fn magg_two() -> CPlan {
    CPlan {
        template: TemplateSpec::MAgg {
            aggs: vec![CellAgg::Sum, CellAgg::Max],
            sparse_safe: false,
        },
        inputs: vec![M; 2],
        nodes: vec![
            data(0, Access::Main),
            data(1, Access::Aligned),
            bin(B::Mul, 0, 1),
            bin(B::Add, 0, 1),
        ],
        outputs: vec![2, 3],
    }
}

/// `sum(X * log(U %*% t(V) + 1e-15))`: Outer full aggregation.
fn outer_full_agg() -> CPlan {
    CPlan {
        template: TemplateSpec::Outer {
            outer_type: OuterType::FullAgg,
        },
        inputs: vec![M; 3],
        nodes: vec![
            data(0, Access::Main),
            data(1, Access::OuterU),
            data(2, Access::OuterV),
            CNode::OuterDot { u: 1, v: 2 },
            lit(1e-15),
            bin(B::Add, 3, 4),
            CNode::Unary { f: U::Log, x: 5 },
            bin(B::Mul, 0, 6),
        ],
        outputs: vec![7],
    }
}

fn row_plan(row_type: RowType, inputs: Vec<InputKind>, nodes: Vec<CNode>) -> CPlan {
    let out = nodes.len() - 1;
    CPlan {
        template: TemplateSpec::Row {
            row_type,
            num_vectors: count_vector_intermediates(&nodes, &[out]),
        },
        inputs,
        nodes,
        outputs: vec![out],
    }
}

/// `t(X) %*% (w * (X %*% v))`: Row col-agg-T.
fn row_col_agg_t() -> CPlan {
    row_plan(
        RowType::ColAggT,
        vec![M, M, M],
        vec![
            data(0, Access::Main),
            data(1, Access::Whole),
            CNode::VectMatMult { a: 0, b: 1 },
            data(2, Access::ColVector),
            bin(B::Mul, 3, 2),
            CNode::OuterMultAdd { a: 0, b: 4 },
        ],
    )
}

/// `(X + Y * r) * c / rowSums(X) - exp(min(X, s))`: Row without aggregation.
fn row_no_agg() -> CPlan {
    let mut n = vec![
        data(0, Access::Main),
        data(1, Access::Aligned),
        data(2, Access::RowVector),
        data(3, Access::ColVector),
        data(4, Access::Scalar),
    ];
    let yr = push(&mut n, bin(B::Mul, 1, 2));
    let xy = push(&mut n, bin(B::Add, 0, yr));
    let xyc = push(&mut n, bin(B::Mul, xy, 3));
    let rs = push(
        &mut n,
        CNode::RowAgg {
            f: AggOp::Sum,
            x: 0,
        },
    );
    let d = push(&mut n, bin(B::Div, xyc, rs));
    let mn = push(
        &mut n,
        CNode::Nary {
            f: NaryOp::Min,
            xs: vec![0, 4],
        },
    );
    let e = push(&mut n, CNode::Unary { f: U::Exp, x: mn });
    push(&mut n, bin(B::Sub, d, e));
    row_plan(RowType::NoAgg, vec![M, M, M, M, InputKind::Scalar], n)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut t: Vec<f64>) -> f64 {
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

#[test]
#[ignore = "prints timings"]
fn compile_time_per_plan_and_phase() {
    let plans: Vec<(&str, CPlan)> = vec![
        ("cell full-agg sum(X*Y*Z)", cell_sum_xyz()),
        ("cell no-agg exp/log", cell_noagg_exp_log()),
        ("magg sum,max", magg_two()),
        ("outer full-agg", outer_full_agg()),
        ("row col-agg-t", row_col_agg_t()),
        ("row no-agg", row_no_agg()),
    ];
    // Warm-up: LLVM target initialisation and first-use costs are paid once per process,
    // and so are the libraries operators call (timed here, not in any operator's figure).
    compile(&cell_sum_xyz()).unwrap();
    let libraries = build_libraries().unwrap();
    println!(
        "process-wide libraries (vector math, Row blocks): {:.2} ms, once per process",
        ms(libraries)
    );
    let mut medians = Vec::new();
    println!(
        "{:<26} {:>7} | {:>6} {:>6} {:>6} {:>6} {:>6} {:>7}  (ms, median of 9)",
        "plan", "total", "emit", "verify", "opt", "jit", "mcode", "ir-len"
    );
    for (name, plan) in &plans {
        let runs: Vec<(Duration, CompilePhases)> = (0..9)
            .map(|_| {
                let op = compile(plan).unwrap_or_else(|e| panic!("{name}: {e}"));
                (op.compile_time(), op.compile_phases())
            })
            .collect();
        let col = |f: &dyn Fn(&(Duration, CompilePhases)) -> Duration| {
            median(runs.iter().map(|r| ms(f(r))).collect())
        };
        let total = col(&|r| r.0);
        // The IR text is printed on request only (not part of the times above); its size
        // tells what printing it would cost.
        let ir_len = compile(plan).unwrap().llvm_ir().len();
        println!(
            "{name:<26} {total:>7.2} | {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>7}",
            col(&|r| r.1.emit),
            col(&|r| r.1.verify),
            col(&|r| r.1.optimize),
            col(&|r| r.1.jit),
            col(&|r| r.1.machine_code),
            ir_len,
        );
        medians.push(total);
    }
    println!(
        "median over plans of the per-plan medians: {:.2} ms",
        median(medians)
    );
    // Through an object store: a cold compilation (object code, kept) and a warm load of
    // what it kept, each in a cache of its own (as in a later process).
    let dir = std::env::temp_dir().join(format!("lafuse-compile-time-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = std::sync::Arc::new(lafuse_codegen::native::ObjectStore::open(&dir).unwrap());
    println!(
        "{:<26} {:>7} {:>7}  (ms, median of 9)",
        "object store", "cold", "warm"
    );
    let (mut colds, mut warms) = (Vec::new(), Vec::new());
    for (name, plan) in &plans {
        let mut cold = Vec::new();
        let mut warm = Vec::new();
        for _ in 0..9 {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let time = || {
                let cache = OperatorCache::with_store(std::sync::Arc::clone(&store));
                cache.get(plan).unwrap_or_else(|e| panic!("{name}: {e}"));
                let st = cache.stats();
                (ms(st.compile_time), st.store_loads)
            };
            let (c, loaded_cold) = time();
            let (w, loaded_warm) = time();
            assert_eq!((loaded_cold, loaded_warm), (0, 1), "{name}");
            cold.push(c);
            warm.push(w);
        }
        let (c, w) = (median(cold), median(warm));
        println!("{name:<26} {c:>7.2} {w:>7.2}");
        colds.push(c);
        warms.push(w);
    }
    println!(
        "median over plans: cold {:.2} ms, warm {:.2} ms",
        median(colds),
        median(warms)
    );
    let _ = std::fs::remove_dir_all(&dir);
    // A cache hit compiles nothing: the same operator comes back, misses stay at one.
    let cache = OperatorCache::new();
    let plan = cell_sum_xyz();
    let first = cache.get(&plan).unwrap();
    let t = std::time::Instant::now();
    let again = cache.get(&plan).unwrap();
    let hit = t.elapsed();
    assert!(std::sync::Arc::ptr_eq(&first, &again));
    let st = cache.stats();
    assert_eq!((st.misses, st.hits), (1, 1));
    println!("cache hit: {:.4} ms, no compilation", ms(hit));
}
