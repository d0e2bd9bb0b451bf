//! PTX generation on every machine: each kernel shape generates one `.entry` for `sm_80` that
//! calls nothing outside its module, and `ptxas` accepts it where `ptxas` is installed (CI
//! installs it; `LAFUSE_REQUIRE_PTXAS=1` turns its absence into a failure).

use super::*;
use lafuse_compiler::fusion::cplan::{Access, InputKind, OuterType, TemplateSpec};
use lafuse_compiler::fusion::template::{CellAgg, CellType};
use lafuse_compiler::hops::{BinaryOp, Literal, UnaryOp};

fn data(input: usize, access: Access) -> CNode {
    CNode::Data { input, access }
}

/// `exp(X * Y) + v` (v a column vector) with `log(X)` where the body needs the other
/// library function: the body every Cell shape is generated for.
fn cell(cell_type: CellType, agg: Option<CellAgg>, sparse_safe: bool) -> CPlan {
    CPlan {
        template: TemplateSpec::Cell {
            cell_type,
            agg,
            sparse_safe,
        },
        inputs: vec![InputKind::Matrix, InputKind::Matrix, InputKind::Matrix],
        nodes: vec![
            data(0, Access::Main),
            data(1, Access::Aligned),
            data(2, Access::ColVector),
            CNode::Binary {
                f: BinaryOp::Mul,
                a: 0,
                b: 1,
            },
            CNode::Unary {
                f: UnaryOp::Exp,
                x: 3,
            },
            CNode::Unary {
                f: UnaryOp::Log,
                x: 2,
            },
            CNode::Binary {
                f: BinaryOp::Add,
                a: 4,
                b: 5,
            },
            CNode::Binary {
                f: BinaryOp::Mul,
                a: 6,
                b: 0,
            },
        ],
        outputs: vec![7],
    }
}

/// `[sum(X * Y), max(X)]`.
fn magg() -> CPlan {
    CPlan {
        template: TemplateSpec::MAgg {
            aggs: vec![CellAgg::Sum, CellAgg::Max],
            sparse_safe: false,
        },
        inputs: vec![InputKind::Matrix, InputKind::Matrix],
        nodes: vec![
            data(0, Access::Main),
            data(1, Access::Aligned),
            CNode::Binary {
                f: BinaryOp::Mul,
                a: 0,
                b: 1,
            },
        ],
        outputs: vec![2, 0],
    }
}

/// `X * log(U %*% t(V) + 1e-15)`, then as `outer_type` says (`Right`: times `W`).
fn outer(outer_type: OuterType) -> CPlan {
    let mut nodes = vec![
        data(0, Access::Main),
        data(1, Access::OuterU),
        data(2, Access::OuterV),
        CNode::OuterDot { u: 1, v: 2 },
        CNode::Literal {
            value: Literal::Double(1e-15),
        },
        CNode::Binary {
            f: BinaryOp::Add,
            a: 3,
            b: 4,
        },
        CNode::Unary {
            f: UnaryOp::Log,
            x: 5,
        },
        CNode::Binary {
            f: BinaryOp::Mul,
            a: 0,
            b: 6,
        },
    ];
    let mut inputs = vec![InputKind::Matrix; 3];
    let mut out = 7;
    if outer_type == OuterType::Right {
        inputs.push(InputKind::Matrix);
        nodes.push(data(3, Access::Whole));
        nodes.push(CNode::FinalProduct { g: 7, w: 8 });
        out = 9;
    }
    CPlan {
        template: TemplateSpec::Outer { outer_type },
        inputs,
        nodes,
        outputs: vec![out],
    }
}

/// Every plan and main-input format the GPU backend generates, named.
fn generated() -> Vec<(String, CPlan, GpuMain)> {
    let mut all = Vec::new();
    for (ct, agg) in [
        (CellType::NoAgg, None),
        (CellType::FullAgg, Some(CellAgg::Sum)),
        (CellType::FullAgg, Some(CellAgg::SumSq)),
        (CellType::FullAgg, Some(CellAgg::Min)),
        (CellType::RowAgg, Some(CellAgg::Sum)),
        (CellType::RowAgg, Some(CellAgg::Max)),
        (CellType::ColAgg, Some(CellAgg::Sum)),
        (CellType::ColAgg, Some(CellAgg::Min)),
    ] {
        all.push((format!("cell {ct:?} {agg:?} dense"), cell(ct, agg, false), GpuMain::Dense));
        let sparse = matches!(agg, None | Some(CellAgg::Sum)) && ct != CellType::ColAgg;
        if sparse {
            all.push((format!("cell {ct:?} {agg:?} csr"), cell(ct, agg, true), GpuMain::Csr));
        }
    }
    all.push(("magg dense".into(), magg(), GpuMain::Dense));
    for t in [OuterType::CellWise, OuterType::FullAgg, OuterType::Right] {
        all.push((format!("outer {t:?}"), outer(t), GpuMain::Csr));
    }
    all
}

#[test]
fn every_kernel_shape_generates_one_self_contained_entry_for_sm_80() {
    for (name, plan, main) in generated() {
        let k = generate(&plan, main).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(k.ptx.contains(".target sm_80"), "{name}:\n{}", k.ptx);
        assert!(k.ptx.contains(".address_size 64"), "{name}");
        assert_eq!(k.ptx.matches(".entry ").count(), 1, "{name}:\n{}", k.ptx);
        assert!(k.ptx.contains(&format!(".entry {ENTRY}(")), "{name}");
        // Every call was inlined or is an intrinsic: nothing for the driver to link.
        assert!(!k.ptx.contains(".extern"), "{name}:\n{}", k.ptx);
        assert_eq!(k.kernel.main, main, "{name}");
        // For reading the kernels: `LAFUSE_PTX_DUMP=dir cargo test ...`.
        if let Some(dir) = std::env::var_os("LAFUSE_PTX_DUMP") {
            let file = std::path::Path::new(&dir).join(format!("{}.ptx", name.replace(' ', "_")));
            std::fs::write(file, &k.ptx).unwrap();
        }
    }
}

#[test]
fn reductions_use_shared_memory_and_barriers_and_no_atomics() {
    let k = generate(&cell(CellType::FullAgg, Some(CellAgg::Sum), false), GpuMain::Dense).unwrap();
    assert!(k.ptx.contains(".shared"), "{}", k.ptx);
    assert!(k.ptx.contains("bar.sync"), "{}", k.ptx);
    for (name, plan, main) in generated() {
        let k = generate(&plan, main).unwrap();
        assert!(!k.ptx.contains("atom."), "{name}: atomics make sums order-dependent");
    }
}

#[test]
fn shapes_follow_the_template_variant() {
    let shape = |p: &CPlan, m| generate(p, m).unwrap().kernel.shape;
    assert_eq!(
        shape(&cell(CellType::RowAgg, Some(CellAgg::Sum), false), GpuMain::Dense),
        KernelShape::RowAgg {
            agg: lafuse_skeletons::AggKind::Sum
        }
    );
    assert_eq!(
        shape(&magg(), GpuMain::Dense),
        KernelShape::FullAgg {
            aggs: vec![lafuse_skeletons::AggKind::Sum, lafuse_skeletons::AggKind::Max]
        }
    );
    assert_eq!(shape(&outer(OuterType::Right), GpuMain::Csr), KernelShape::OuterRight);
}

#[test]
fn what_the_gpu_does_not_generate_is_unsupported_not_an_error() {
    let mut trig = cell(CellType::NoAgg, None, false);
    trig.nodes[4] = CNode::Unary {
        f: UnaryOp::Sin,
        x: 3,
    };
    let left = outer(OuterType::Left);
    for (plan, main) in [(trig, GpuMain::Dense), (left, GpuMain::Csr)] {
        match generate(&plan, main) {
            Err(e @ CodegenError::Unsupported(_)) => assert!(e.to_string().contains("GPU"), "{e}"),
            other => panic!("expected unsupported, got {other:?}"),
        }
    }
}

#[test]
fn a_csr_kernel_of_a_sparse_unsafe_plan_is_refused() {
    let e = generate(&cell(CellType::FullAgg, Some(CellAgg::Sum), false), GpuMain::Csr).unwrap_err();
    assert!(matches!(e, CodegenError::Internal(Internal::SparseUnsafeCsr { .. })), "{e}");
}

/// `ptxas` from `LAFUSE_PTXAS`, the `PATH`, or the repository's `.venv-ptxas`.
fn ptxas() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("LAFUSE_PTXAS") {
        return Some(p.into());
    }
    let in_path = std::process::Command::new("ptxas").arg("--version").output();
    if in_path.is_ok_and(|o| o.status.success()) {
        return Some("ptxas".into());
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let venv = root.join(".venv-ptxas");
    let found = std::fs::read_dir(venv.join("lib")).ok()?.flatten().find_map(|py| {
        let p = py.path().join("site-packages/nvidia/cuda_nvcc/bin/ptxas");
        p.exists().then_some(p)
    });
    found.or_else(|| {
        let p = venv.join("bin/ptxas");
        p.exists().then_some(p)
    })
}

#[test]
fn ptxas_accepts_every_kernel() {
    let Some(ptxas) = ptxas() else {
        assert!(
            std::env::var_os("LAFUSE_REQUIRE_PTXAS").is_none(),
            "LAFUSE_REQUIRE_PTXAS is set but no ptxas was found (LAFUSE_PTXAS, PATH, .venv-ptxas)"
        );
        eprintln!("skipped: no ptxas (set LAFUSE_PTXAS or run bench/gpu/ptxas-venv.sh)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("lafuse-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (k, (name, plan, main)) in generated().into_iter().enumerate() {
        let ptx = generate(&plan, main).unwrap().ptx;
        let file = dir.join(format!("k{k}.ptx"));
        std::fs::write(&file, &ptx).unwrap();
        let out = std::process::Command::new(&ptxas)
            .args(["-arch=sm_80", "-o", "/dev/null"])
            .arg(&file)
            .output()
            .expect("running ptxas");
        assert!(
            out.status.success(),
            "{name}: ptxas refused the kernel:\n{}\n{ptx}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
