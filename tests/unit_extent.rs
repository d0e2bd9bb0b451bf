//! The `unit_extent` rewrite (`compiler/src/hops/rewrite/unit_extent.rs`) replaces aggregates
//! and products along an extent of one by `X + 0` and `X * c + 0`, claiming the same bits as
//! the kernels they replace. These tests hold the kernels to that claim on special values, dense
//! and sparse, and check that MLogReg's Hessian-vector product becomes one Row operator.

use lafuse::{Engine, EngineConfig, FusionPolicy, ScriptArgs, SourceFile, Stats};
use lafuse_runtime::kernels::{self, aggregate::aggregate};
use lafuse_runtime::ops::{AggOp, BinaryOp, Direction};
use lafuse_runtime::Matrix;

mod fused_at_once;

const VALUES: [f64; 11] = [
    0.0,
    -0.0,
    1.0,
    -2.5,
    1e300,
    -1e-300,
    f64::MAX,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    5e-324,
];

fn bits(m: &Matrix) -> Vec<u64> {
    let (r, c) = m.shape();
    (0..r)
        .flat_map(|i| (0..c).map(move |j| (i, j)))
        .map(|(i, j)| m.get(i, j).to_bits())
        .collect()
}

/// The values as an r x c matrix, dense and sparse.
fn forms(r: usize, c: usize) -> [Matrix; 2] {
    let dense = Matrix::from_dense_values(r, c, VALUES.to_vec()).unwrap();
    let sparse = Matrix::Sparse(dense.to_sparse());
    [dense, sparse]
}

fn plus_zero(m: &Matrix) -> Matrix {
    kernels::binary_scalar(m, 0.0, BinaryOp::Add, false).unwrap()
}

#[test]
fn a_sum_over_one_value_is_the_value_plus_zero() {
    let n = VALUES.len();
    for (x, dir) in forms(n, 1)
        .into_iter()
        .map(|x| (x, Direction::Row))
        .chain(forms(1, n).into_iter().map(|x| (x, Direction::Col)))
    {
        let sum = aggregate(&x, AggOp::Sum, dir).unwrap();
        assert_eq!(
            bits(&sum),
            bits(&plus_zero(&x)),
            "{dir:?} sparse {}",
            x.is_sparse()
        );
    }
}

#[test]
fn a_product_with_a_one_by_one_constant_is_a_scaling_plus_zero() {
    let n = VALUES.len();
    for c in [1.0, -2.5, 0.0, -0.0, 1e-310, 3e200] {
        let k = Matrix::from_dense_values(1, 1, vec![c]).unwrap();
        for x in forms(n, 1) {
            let product = kernels::matmul(&x, &k).unwrap();
            let scaled = kernels::binary_scalar(&x, c, BinaryOp::Mul, false).unwrap();
            assert_eq!(bits(&product), bits(&plus_zero(&scaled)), "X %*% {c}");
        }
        if c == 0.0 {
            continue; // `0 %*% X` skips X's non-finite values; the rewrite leaves it
        }
        for x in forms(1, n) {
            let product = kernels::matmul(&k, &x).unwrap();
            let scaled = kernels::binary_scalar(&x, c, BinaryOp::Mul, true).unwrap();
            assert_eq!(bits(&product), bits(&plus_zero(&scaled)), "{c} %*% X");
        }
    }
}

fn run(script: &str, fusion: Option<FusionPolicy>) -> (String, Stats) {
    let source = SourceFile::new("unit_extent.dml", script);
    let config = EngineConfig {
        fusion,
        collect_stats: true,
        ..fused_at_once::config()
    };
    let mut out = Vec::new();
    let report = Engine::new(config)
        .run(&source, &ScriptArgs::default(), &mut out)
        .unwrap_or_else(|e| panic!("{}", e.render(&source)));
    (String::from_utf8(out).unwrap(), report.stats)
}

fn count(stats: &Stats, opcode: &str) -> u64 {
    stats
        .heavy_hitters
        .iter()
        .filter(|h| h.opcode == opcode)
        .map(|h| h.count)
        .sum()
}

/// MLogReg's Hessian-vector product with two classes (`K = 1`) is one Row operator, one pass
/// over X: the rewrite turns `rowSums(Q) %*% matrix(1, 1, K)` into cell operations and, `Q`
/// being dead after the block, nothing materialises it. Unfused, no aggregate or product by
/// the 1x1 matrix runs either; the two print the same numbers (to rounding: the fused
/// operator sums its rows in blocks).
#[test]
fn the_hessian_product_with_two_classes_is_one_row_operator() {
    let script = "X = rand(rows=300, cols=20, min=-1, max=1, seed=3)
        P = rand(rows=300, cols=1, seed=4)
        V = rand(rows=20, cols=1, seed=5)
        K = ncol(V)
        Q = P[, 1:K] * (X %*% V)
        HV = t(X) %*% (Q - P[, 1:K] * (rowSums(Q) %*% matrix(1, rows=1, cols=K)))
        print(toString(t(HV), decimal=12))";
    let (fused, stats) = run(script, Some(FusionPolicy::Gen));
    assert_eq!(count(&stats, "fused_row"), 1, "{:?}", stats.heavy_hitters);
    let (unfused, stats) = run(script, None);
    assert_eq!(count(&stats, "uarsum"), 0, "{:?}", stats.heavy_hitters);
    assert_eq!(
        count(&stats, "ba+*"),
        1,
        "X %*% V only: {:?}",
        stats.heavy_hitters
    );
    let numbers =
        |s: &str| -> Vec<f64> { s.split_whitespace().map(|v| v.parse().unwrap()).collect() };
    for (f, u) in numbers(&fused).into_iter().zip(numbers(&unfused)) {
        assert!((f - u).abs() <= 1e-9 * u.abs().max(1.0), "{f} vs {u}");
    }
}
