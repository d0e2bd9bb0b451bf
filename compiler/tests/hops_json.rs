//! JSON round trips, structural hash stability, the verifier on bad DAGs, and a property test
//! over random DAGs built through the builder.

mod hops_common;
use hops_common::*;

use lafuse_compiler::hops::{
    verify, AggOp, BinaryOp, DagBuilder, Direction, HopDag, HopId, Literal, OpKind, UnaryOp,
    ValueType,
};
use lafuse_compiler::Fault;
use proptest::prelude::*;

fn sample() -> HopDag {
    let inputs = matrices(&[("X", 20, 5, 40), ("v", 5, 1, 5)]);
    dag(
        "y = X %*% v\nz = sum(exp(y) / 0)\nprint(z)\nw = 1/0 - 1/0\nX[1, 1] = -0.0\nq = t(X) * 2\n",
        &inputs,
    )
}

#[test]
fn json_round_trip_including_non_finite_literals() {
    let d = sample();
    let text = d.to_json();
    let back = HopDag::from_json(&text).unwrap();
    assert_eq!(back, d);
    assert_eq!(back.structural_hash(), d.structural_hash());
    assert_eq!(back.to_json(), text);
    let w = d.literal_of(output(&d, "w")).cloned().unwrap();
    assert!(matches!(w, Literal::Double(v) if v.is_nan()));
}

#[test]
fn structural_hash_ignores_numbering_and_spans_but_not_structure() {
    let d = sample();
    // Renumber: reverse the arena, remapping every id.
    let n = d.hops.len() as u32;
    let map = |h: HopId| HopId(n - 1 - h.0);
    let mut r = HopDag {
        hops: d.hops.iter().rev().cloned().collect(),
        roots: d.roots.iter().map(|&h| map(h)).collect(),
    };
    for hop in &mut r.hops {
        hop.inputs = hop.inputs.iter().map(|&h| map(h)).collect();
        hop.span = Default::default();
    }
    verify(&r).unwrap();
    assert_eq!(r.structural_hash(), d.structural_hash());
    // A dead hop does not count either.
    r.add(r.hops[0].clone());
    assert_eq!(r.structural_hash(), d.structural_hash());

    let mut changed = d.clone();
    let y = output(&changed, "y");
    changed.hop_mut(y).nnz = Some(1);
    assert_ne!(changed.structural_hash(), d.structural_hash());
    let mut swapped = d.clone();
    swapped.roots.swap(0, 1);
    assert_ne!(swapped.structural_hash(), d.structural_hash());
}

#[test]
fn hash_distinguishes_sharing() {
    // rand() + rand() (two unseeded draws) versus one draw added to itself.
    let two = {
        let mut b = DagBuilder::new();
        let a = b.rand(2, 2, 0.0, 1.0, 1.0, -1).unwrap();
        let c = b.rand(2, 2, 0.0, 1.0, 1.0, -1).unwrap();
        let s = b.binary(BinaryOp::Add, a, c).unwrap();
        b.output("S", s).unwrap();
        b.build().unwrap()
    };
    let one = {
        let mut b = DagBuilder::new();
        let a = b.rand(2, 2, 0.0, 1.0, 1.0, -1).unwrap();
        let s = b.binary(BinaryOp::Add, a, a).unwrap();
        b.output("S", s).unwrap();
        b.build().unwrap()
    };
    assert_ne!(one.structural_hash(), two.structural_hash());
}

#[test]
fn verifier_and_import_reject_bad_dags_as_user_errors() {
    let good = sample().to_json();
    let bad_inputs = [
        "not json".to_string(),
        "{\"hops\": [], \"roots\": [0]}".to_string(),
        good.replacen("\"inputs\": [\n        0", "\"inputs\": [\n        999", 1),
        good.replacen("\"b\": \"*\"", "\"b\": \"nope\"", 1),
        good.replacen(
            "\"value_type\": \"double\"",
            "\"value_type\": \"string\"",
            1,
        ),
        good.replacen("\"rows\": 20", "\"rows\": 21", 1),
    ];
    for text in &bad_inputs {
        assert_ne!(text, &good, "the mutation must apply");
        let err = HopDag::from_json(text).unwrap_err();
        assert_eq!(err.fault(), Fault::User, "{err}");
    }
    // A cycle.
    let mut d = sample();
    let y = output(&d, "y");
    let first_input = d.hop(y).inputs[0];
    d.hop_mut(first_input).inputs = vec![y];
    assert!(verify(&d).is_err());
    assert_eq!(
        HopDag::from_json(&d.to_json()).unwrap_err().fault(),
        Fault::User
    );
}

#[test]
fn import_infers_omitted_sizes() {
    let text = r#"{"hops": [
        {"op": {"tread": {"name": "A"}}, "inputs": [], "data_type": "matrix", "value_type": "double", "rows": 4, "cols": 3, "nnz": 12},
        {"op": {"tread": {"name": "B"}}, "inputs": [], "data_type": "matrix", "value_type": "double", "rows": 3, "cols": 2, "nnz": 6},
        {"op": "ba+*", "inputs": [0, 1], "data_type": "matrix", "value_type": "double"},
        {"op": {"ua": {"op": "sum", "dir": "full"}}, "inputs": [2], "data_type": "scalar", "value_type": "double", "rows": 0, "cols": 0},
        {"op": "print", "inputs": [3], "data_type": "scalar", "value_type": "string", "rows": 0, "cols": 0}
    ], "roots": [4]}"#;
    let d = HopDag::from_json(text).unwrap();
    assert_eq!(d.hop(HopId(2)).dims(), Some((4, 2)));
    assert_eq!(d.hop(HopId(2)).nnz, Some(8));
}

/// A recipe for one random hop over earlier hops (indices taken modulo what exists).
#[derive(Clone, Debug)]
enum Step {
    Unary(u8, usize),
    Binary(u8, usize, usize),
    Agg(u8, u8, usize),
    MatMul(usize, usize),
    Transpose(usize),
    Scalar(i64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (any::<u8>(), any::<usize>()).prop_map(|(o, a)| Step::Unary(o, a)),
        (any::<u8>(), any::<usize>(), any::<usize>()).prop_map(|(o, a, b)| Step::Binary(o, a, b)),
        (any::<u8>(), any::<u8>(), any::<usize>()).prop_map(|(o, d, a)| Step::Agg(o, d, a)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Step::MatMul(a, b)),
        any::<usize>().prop_map(Step::Transpose),
        (-3i64..4).prop_map(Step::Scalar),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn random_dags_verify_round_trip_and_hash_stably(
        dims in prop::collection::vec((1u64..6, 1u64..6), 1..4),
        steps in prop::collection::vec(step(), 1..40),
        outputs in prop::collection::vec(any::<usize>(), 1..4),
    ) {
        let mut b = DagBuilder::new();
        let mut hops: Vec<HopId> = Vec::new();
        for (i, (r, c)) in dims.iter().enumerate() {
            hops.push(b.input(&format!("X{i}"), *r, *c, r * c / 2));
        }
        for s in &steps {
            let pick = |i: usize| hops[i % hops.len()];
            // Invalid combinations (shape or type errors) are rejected and simply skipped:
            // the builder must refuse them without leaving anything behind.
            let before = b.dag().len();
            let r = match s {
                Step::Unary(o, a) => b.unary(UnaryOp::ALL[*o as usize % UnaryOp::ALL.len()], pick(*a)),
                Step::Binary(o, a, c) => b.binary(BinaryOp::ALL[*o as usize % BinaryOp::ALL.len()], pick(*a), pick(*c)),
                Step::Agg(o, d, a) => b.agg(
                    AggOp::ALL[*o as usize % AggOp::ALL.len()],
                    Direction::ALL[*d as usize % Direction::ALL.len()],
                    pick(*a),
                ),
                Step::MatMul(a, c) => b.matmul(pick(*a), pick(*c)),
                Step::Transpose(a) => b.transpose(pick(*a)),
                Step::Scalar(v) => Ok(b.literal_i64(*v)),
            };
            match r {
                Ok(h) => hops.push(h),
                Err(e) => {
                    prop_assert_eq!(e.fault(), Fault::User);
                    prop_assert_eq!(b.dag().len(), before);
                }
            }
        }
        for (i, o) in outputs.iter().enumerate() {
            let h = hops[o % hops.len()];
            b.output(&format!("out{i}"), h).unwrap();
        }
        let mut dag = b.build().unwrap();
        prop_assert!(verify(&dag).is_ok());
        let text = dag.to_json();
        let back = HopDag::from_json(&text).unwrap();
        prop_assert_eq!(&back, &dag);
        prop_assert_eq!(back.structural_hash(), dag.structural_hash());
        let before = dag.structural_hash();
        dag.compact();
        prop_assert_eq!(dag.structural_hash(), before);
        lafuse_compiler::hops::optimize(&mut dag).unwrap();
        prop_assert!(verify(&dag).is_ok());
        // Values of outputs keep their types and shapes through the rewrites.
        for (name, h) in dag.outputs() {
            let orig = back.outputs().into_iter().find(|(n, _)| *n == name).unwrap().1;
            prop_assert_eq!(dag.hop(h).dims(), back.hop(orig).dims());
            prop_assert_eq!(dag.hop(h).value_type, back.hop(orig).value_type);
        }
    }

    #[test]
    fn arbitrary_json_never_panics(text in ".{0,200}") {
        let _ = HopDag::from_json(&text);
    }

    #[test]
    fn mutated_json_never_panics(cut in 0usize..4000, byte in any::<u8>()) {
        let mut text = sample().to_json().into_bytes();
        let i = cut % text.len();
        text[i] = byte;
        if let Ok(s) = String::from_utf8(text) {
            if let Ok(d) = HopDag::from_json(&s) {
                prop_assert!(verify(&d).is_ok());
            }
        }
    }
}

#[test]
fn op_names_are_their_serde_names() {
    for op in UnaryOp::ALL {
        assert_eq!(
            serde_json::to_string(op).unwrap(),
            format!("{:?}", op.name())
        );
    }
    for op in BinaryOp::ALL {
        assert_eq!(
            serde_json::to_string(op).unwrap(),
            format!("{:?}", op.name())
        );
    }
    assert_eq!(serde_json::to_string(&OpKind::MatMul).unwrap(), "\"ba+*\"");
    let lit: OpKind = serde_json::from_str("{\"lit\": {\"int\": 3}}").unwrap();
    assert_eq!(lit, OpKind::Literal(Literal::Int(3)));
    assert_eq!(Literal::Int(3).value_type(), ValueType::Int);
}

#[test]
fn extreme_sizes_in_json_are_errors_or_saturate_never_panics() {
    let big = u64::MAX;
    let text = format!(
        r#"{{"hops": [
        {{"op": {{"tread": {{"name": "A"}}}}, "inputs": [], "data_type": "matrix", "value_type": "double", "rows": {big}, "cols": {big}, "nnz": 5}},
        {{"op": {{"n": "cbind"}}, "inputs": [0, 0], "data_type": "matrix", "value_type": "double"}},
        {{"op": {{"ua": {{"op": "sum", "dir": "row"}}}}, "inputs": [1], "data_type": "matrix", "value_type": "double"}},
        {{"op": {{"twrite": {{"name": "B"}}}}, "inputs": [2], "data_type": "matrix", "value_type": "double"}}
    ], "roots": [3]}}"#
    );
    if let Ok(d) = HopDag::from_json(&text) {
        assert!(verify(&d).is_ok());
    }
}

#[test]
fn print_takes_format_arguments() {
    let d = dag(
        "x = 3\nprint(\"x=%d y=%s\", x, \"a\")\n",
        &Default::default(),
    );
    let p = d.ids().find(|&h| d.hop(h).op == OpKind::Print).unwrap();
    assert_eq!(d.hop(p).inputs.len(), 3);
}
