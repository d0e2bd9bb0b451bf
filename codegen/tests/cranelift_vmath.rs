//! Cranelift's vector `exp`, `log` and `tanh` (the runtime's vector math on a vector's lanes,
//! `cranelift::helpers::LaneMap`) against the core's scalar
//! functions, to the bit, on every lane of a cell-wise operator: special values (signed zeros,
//! subnormals, infinities, NaN, the overflow and underflow bounds and the clamps, the reduction
//! thresholds), and doubles of random bit patterns over the whole range.
#![cfg(feature = "cranelift")]

mod common;

use common::cell_plans::data;
use lafuse_codegen::backend::MainFormat;
use lafuse_codegen::cranelift::compile_for;
use lafuse_codegen::reference::Operand;
use lafuse_compiler::fusion::cplan::{Access, CNode, CPlan, InputKind, TemplateSpec};
use lafuse_compiler::fusion::template::CellType;
use lafuse_compiler::hops::UnaryOp as U;
use lafuse_core::math;
use lafuse_runtime::{DenseMatrix, Matrix};

/// `f(X)` cell-wise.
fn unary(f: U) -> CPlan {
    CPlan {
        template: TemplateSpec::Cell {
            cell_type: CellType::NoAgg,
            agg: None,
            sparse_safe: false,
        },
        inputs: vec![InputKind::Matrix],
        nodes: vec![data(0, Access::Main), CNode::Unary { f, x: 0 }],
        outputs: vec![1],
    }
}

/// The values every lane position sees: specials and their neighbours, then random bit
/// patterns (`count` of them), 16 to a row so that vector loops and their tails both run.
fn inputs(count: usize) -> Vec<f64> {
    let bounds = [
        0.0,
        -0.0,
        f64::MIN_POSITIVE,
        f64::MIN_POSITIVE / 3.0,
        f64::from_bits(1),
        -f64::from_bits(1),
        1.0,
        -1.0,
        2.0,
        0.5,
        std::f64::consts::LN_2 / 2.0,
        1.5 * std::f64::consts::LN_2,
        -1.5 * std::f64::consts::LN_2,
        2f64.powi(-28),
        -(2f64.powi(-28)),
        709.782_712_893_384,
        709.79,
        -745.133_219_101_941_1,
        -745.14,
        710.0,
        -746.0,
        -708.4,
        -720.0,
        1e300,
        f64::MAX,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        std::f64::consts::SQRT_2 / 2.0,
        std::f64::consts::SQRT_2,
        1.0 - f64::EPSILON,
        1.0 + f64::EPSILON,
        22.0,
        -22.0,
        0.17328679513998632,
        0.5198603854199589,
        2f64.powi(-55),
        -(2f64.powi(-55)),
    ];
    let mut out = Vec::new();
    for &b in &bounds {
        out.extend([
            b,
            f64::from_bits(b.to_bits().wrapping_add(1)),
            f64::from_bits(b.to_bits().wrapping_sub(1)),
        ]);
    }
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..count {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        // A third in exp's useful range, a third in tanh's, the others anywhere.
        out.push(match i % 3 {
            0 => (s >> 11) as f64 / (1u64 << 53) as f64 * 1500.0 - 750.0,
            1 => (s >> 11) as f64 / (1u64 << 53) as f64 * 50.0 - 25.0,
            _ => f64::from_bits(s),
        });
    }
    while out.len() % 16 != 0 {
        out.push(1.25);
    }
    out
}

fn check(f: U, scalar: fn(f64) -> f64, name: &str) {
    let values = inputs(20_000);
    let (rows, cols) = (values.len() / 16, 16);
    let x = Matrix::Dense(DenseMatrix::new(rows, cols, values.clone()).unwrap());
    let op = compile_for(&unary(f), MainFormat::Dense).unwrap();
    let got = op
        .execute_with_ranges(&[Operand::Matrix(&x)], &[(rows, cols)], &[])
        .unwrap();
    for (k, &v) in values.iter().enumerate() {
        let (g, w) = (got[0].get(k / cols, k % cols), scalar(v));
        // (A matrix cell holds no -0.0: tanh(-0.0) is stored as 0.)
        assert!(
            (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits() || (g == 0.0 && w == 0.0),
            "{name}({v:e} = {:#x}): cranelift {g:e} ({:#x}), scalar {w:e} ({:#x})",
            v.to_bits(),
            g.to_bits(),
            w.to_bits()
        );
    }
}

#[test]
fn vector_exp_is_the_scalar_exp_to_the_bit() {
    check(U::Exp, math::exp, "exp");
}

#[test]
fn vector_log_is_the_scalar_log_to_the_bit() {
    check(U::Log, math::ln, "log");
}

#[test]
fn vector_tanh_is_the_scalar_tanh_to_the_bit() {
    check(U::Tanh, math::tanh, "tanh");
}
