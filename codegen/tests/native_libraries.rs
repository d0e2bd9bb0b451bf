//! The process-wide libraries are built only by operators that call them. This file is its own
//! test process because the libraries are built once per process: no other test may build
//! them first.
#![cfg(feature = "llvm")]

use lafuse_codegen::native::{built_libraries, compile, ObjectStore};
use lafuse_compiler::fusion::cplan::{
    count_vector_intermediates, Access, CNode, CPlan, InputKind, RowType, TemplateSpec,
};
use lafuse_compiler::hops::{BinaryOp, UnaryOp};
use std::sync::Arc;

fn data(input: usize, access: Access) -> CNode {
    CNode::Data { input, access }
}

fn row_plan(row_type: RowType, nodes: Vec<CNode>, inputs: usize) -> CPlan {
    let out = nodes.len() - 1;
    CPlan {
        template: TemplateSpec::Row {
            row_type,
            num_vectors: count_vector_intermediates(&nodes, &[out]),
        },
        inputs: vec![InputKind::Matrix; inputs],
        nodes,
        outputs: vec![out],
    }
}

/// `t(X) %*% (w * (X %*% v))`: its dense entry calls the Row block primitives, functions of
/// the skeletons crate (no library).
fn row_mv() -> CPlan {
    row_plan(
        RowType::ColAggT,
        vec![
            data(0, Access::Main),
            data(1, Access::Whole),
            CNode::VectMatMult { a: 0, b: 1 },
            data(2, Access::ColVector),
            CNode::Binary {
                f: BinaryOp::Mul,
                a: 3,
                b: 2,
            },
            CNode::OuterMultAdd { a: 0, b: 4 },
        ],
        3,
    )
}

/// `t(X) %*% exp(X %*% v)`: the block primitives and the vector math.
fn row_mv_exp() -> CPlan {
    row_plan(
        RowType::ColAggT,
        vec![
            data(0, Access::Main),
            data(1, Access::Whole),
            CNode::VectMatMult { a: 0, b: 1 },
            CNode::Unary {
                f: UnaryOp::Exp,
                x: 2,
            },
            CNode::OuterMultAdd { a: 0, b: 3 },
        ],
        2,
    )
}

#[test]
fn a_library_is_built_by_the_first_operator_that_calls_it_and_goes_through_the_store() {
    assert!(built_libraries().is_empty());
    let dir = std::env::temp_dir().join(format!("lafuse-libraries-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Arc::new(ObjectStore::open(&dir).unwrap());
    let op = lafuse_codegen::native::compile_with(
        &row_mv(),
        lafuse_codegen::native::MainFormat::Dense,
        Some(store.clone()),
    )
    .unwrap();
    // Mapping the block primitives' declarations must not build the vector math on the way.
    assert!(built_libraries().is_empty());
    drop(op);
    // The store's entries: modules by their ID, and the operator's plan marker (which a
    // tiered backend reads; libraries have none).
    let modules = |dir: &std::path::Path| {
        let mut ids: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let bytes = std::fs::read(e.unwrap().path()).unwrap();
                let text = String::from_utf8_lossy(&bytes);
                match text.find("; ModuleID = '") {
                    Some(at) => text[at + 14..].split('\'').next().unwrap().to_string(),
                    None if text.contains("lafuse plan marker") => "marker".to_string(),
                    None => panic!("not an entry of the store: {text}"),
                }
            })
            .collect();
        ids.sort();
        ids
    };
    eprintln!(
        "{:?}",
        std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect::<Vec<_>>()
    );
    assert_eq!(modules(&dir), ["lafuse_op", "marker"]);
    compile(&row_mv_exp()).unwrap();
    assert_eq!(built_libraries(), ["lafuse_math"]);
    let _ = std::fs::remove_dir_all(&dir);
}
