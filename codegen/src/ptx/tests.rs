//! PTX generation on every machine: each kernel shape generates one `.entry` for `sm_80` that
//! calls nothing outside its module, and `ptxas` accepts it where `ptxas` is installed (CI
//! installs it; `LAFUSE_REQUIRE_PTXAS=1` turns its absence into a failure).

use super::samples::{cell, generated, magg, outer};
use super::*;
use lafuse_compiler::fusion::cplan::OuterType;
use lafuse_compiler::fusion::template::{CellAgg, CellType};

/// For reading the kernels: `LAFUSE_PTX_DUMP=dir cargo test ...` writes each one there.
pub(super) fn dump(prefix: &str, name: &str, ptx: &str) {
    if let Some(dir) = std::env::var_os("LAFUSE_PTX_DUMP") {
        let stem: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let file = std::path::Path::new(&dir).join(format!("{prefix}{stem}.ptx"));
        std::fs::write(file, ptx.as_bytes()).unwrap();
    }
}

#[test]
fn every_kernel_shape_generates_self_contained_entries_for_sm_80() {
    for (name, plan, main) in generated() {
        let k = generate(&plan, main).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(k.ptx.contains(".target sm_80"), "{name}:\n{}", k.ptx);
        assert!(k.ptx.contains(".address_size 64"), "{name}");
        let entries =
            1 + usize::from(k.kernel.folds_columns()) + usize::from(k.kernel.narrow.is_some());
        assert_eq!(
            k.ptx.matches(".entry ").count(),
            entries,
            "{name}:\n{}",
            k.ptx
        );
        assert!(k.ptx.contains(&format!(".entry {ENTRY}(")), "{name}");
        // Every call was inlined or is an intrinsic: nothing for the driver to link.
        assert!(!k.ptx.contains(".extern"), "{name}:\n{}", k.ptx);
        assert_eq!(k.kernel.main, main, "{name}");
        dump("", &name, &k.ptx);
    }
}

#[test]
fn reductions_use_shared_memory_and_barriers_and_no_atomics() {
    let k = generate(
        &cell(CellType::FullAgg, Some(CellAgg::Sum), false),
        GpuMain::Dense,
    )
    .unwrap();
    assert!(k.ptx.contains(".shared"), "{}", k.ptx);
    assert!(k.ptx.contains("bar.sync"), "{}", k.ptx);
    for (name, plan, main) in generated() {
        let k = generate(&plan, main).unwrap();
        assert!(
            !k.ptx.contains("atom."),
            "{name}: atomics make sums order-dependent"
        );
    }
}

#[test]
fn shapes_follow_the_template_variant() {
    let shape = |p: &CPlan, m| generate(p, m).unwrap().kernel.shape;
    assert_eq!(
        shape(
            &cell(CellType::RowAgg, Some(CellAgg::Sum), false),
            GpuMain::Dense
        ),
        KernelShape::RowAgg {
            agg: lafuse_skeletons::AggKind::Sum
        }
    );
    assert_eq!(
        shape(&magg(), GpuMain::Dense),
        KernelShape::FullAgg {
            aggs: vec![
                lafuse_skeletons::AggKind::Sum,
                lafuse_skeletons::AggKind::Max
            ]
        }
    );
    assert_eq!(
        shape(&outer(OuterType::Right), GpuMain::Csr),
        KernelShape::OuterRight
    );
    // A product with a matrix of several columns: the product space's inputs read at (i, c).
    use lafuse_skeletons::InputUse;
    for (name, plan) in super::samples::rows() {
        if !name.contains("NoAggB1") {
            continue;
        }
        let k = generate(&plan, GpuMain::Dense).unwrap().kernel;
        assert_eq!(k.shape, KernelShape::RowB1, "{name}");
        assert!(
            k.uses.contains(&InputUse::ColVectorT),
            "{name}: {:?}",
            k.uses
        );
        if name.contains("+r") {
            assert_eq!(k.uses[2], InputUse::B1RowVector, "{name}");
        }
        if name.contains("C*w") {
            // A is read with the row, C with the product.
            assert_eq!(k.uses[1], InputUse::Aligned, "{name}");
            assert_eq!(k.uses[3], InputUse::B1Aligned, "{name}");
            assert_eq!(k.uses[4], InputUse::ColVector, "{name}");
        }
    }
    for (t, transposed) in [(OuterType::Left, false), (OuterType::LeftT, true)] {
        let k = generate(&outer(t), GpuMain::Csr).unwrap().kernel;
        assert_eq!(k.shape, KernelShape::OuterLeft { transposed });
        // Its final matrix is read as m×k2 rows, and the driver walked by columns.
        assert_eq!(k.uses[3], lafuse_skeletons::InputUse::FinalWT);
        assert!(k.walks_columns());
    }
}

#[test]
fn what_the_gpu_does_not_generate_is_unsupported_not_an_error() {
    // Products with a matrix over a dense driver's tiles (such drivers go through their CSR).
    let left = outer(OuterType::Left);
    let right = outer(OuterType::Right);
    for (plan, main) in [(left, GpuMain::Dense), (right, GpuMain::Dense)] {
        match generate(&plan, main) {
            Err(e @ CodegenError::Unsupported(_)) => assert!(e.to_string().contains("GPU"), "{e}"),
            other => panic!("expected unsupported, got {other:?}"),
        }
    }
}

#[test]
fn a_csr_kernel_of_a_sparse_unsafe_plan_is_refused() {
    let e = generate(
        &cell(CellType::FullAgg, Some(CellAgg::Sum), false),
        GpuMain::Csr,
    )
    .unwrap_err();
    assert!(
        matches!(e, CodegenError::Internal(Internal::SparseUnsafeCsr { .. })),
        "{e}"
    );
}

/// `ptxas` from `LAFUSE_PTXAS`, the `PATH`, or the repository's `.venv-ptxas`.
pub(super) fn ptxas() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("LAFUSE_PTXAS") {
        return Some(p.into());
    }
    let in_path = std::process::Command::new("ptxas")
        .arg("--version")
        .output();
    if in_path.is_ok_and(|o| o.status.success()) {
        return Some("ptxas".into());
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let venv = root.join(".venv-ptxas");
    // CUDA 13's wheels put it under nvidia/cu13, CUDA 12's under nvidia/cuda_nvcc.
    let found = std::fs::read_dir(venv.join("lib"))
        .ok()?
        .flatten()
        .find_map(|py| {
            ["nvidia/cu13/bin/ptxas", "nvidia/cuda_nvcc/bin/ptxas"]
                .iter()
                .map(|sub| py.path().join("site-packages").join(sub))
                .find(|p| p.exists())
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
    let mut all: Vec<(String, CPlan, GpuMain, RowKernelOptions)> = generated()
        .into_iter()
        .map(|(name, plan, main)| (name, plan, main, RowKernelOptions::default()))
        .collect();
    for (layout_name, layout) in compared_row_layouts() {
        for (name, plan) in super::samples::rows() {
            all.push((
                format!("{name} [{layout_name}]"),
                plan,
                GpuMain::Dense,
                layout,
            ));
        }
    }
    for (k, (name, plan, main, layout)) in all.into_iter().enumerate() {
        let ptx = generate_with(&plan, main, layout).unwrap().ptx;
        let file = dir.join(format!("k{k}.ptx"));
        std::fs::write(&file, ptx.as_bytes()).unwrap();
        // The layouts' kernels too (`ptxas -v` for their registers).
        dump("ptxas_", &name, &ptx);
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

#[test]
fn a_row_kernel_register_cap_is_written_as_maxnreg_and_only_then() {
    let plan = super::samples::mmchain();
    let capped = RowKernelOptions {
        max_registers: 64,
        ..RowKernelOptions::default()
    };
    let ptx = generate_with(&plan, GpuMain::Dense, capped).unwrap().ptx;
    assert!(entry_text(&ptx, ENTRY).contains(".maxnreg 64"), "{ptx}");
    assert!(
        entry_text(&ptx, NARROW_ENTRY).contains(".maxnreg 64"),
        "{ptx}"
    );
    let ptx = generate(&plan, GpuMain::Dense).unwrap().ptx;
    assert!(!entry_text(&ptx, ENTRY).contains(".maxnreg"), "{ptx}");
    // The narrow entry keeps to three blocks a multiprocessor unless the layout says otherwise.
    assert!(
        entry_text(&ptx, NARROW_ENTRY).contains(".maxnreg 80"),
        "{ptx}"
    );
}

#[test]
fn row_layouts_with_a_zero_count_are_refused() {
    let plan = super::samples::mmchain();
    for bad in [
        RowKernelOptions {
            unroll: 0,
            ..RowKernelOptions::default()
        },
        RowKernelOptions {
            chains: 0,
            ..RowKernelOptions::default()
        },
        RowKernelOptions {
            resident_group: 0,
            ..RowKernelOptions::default()
        },
        RowKernelOptions {
            column_blocks: 0,
            ..RowKernelOptions::default()
        },
    ] {
        assert!(generate_with(&plan, GpuMain::Dense, bad).is_err());
    }
}

/// The text of entry `name` in `ptx`, from its `.entry` line to its closing brace.
fn entry_text<'p>(ptx: &'p str, name: &str) -> &'p str {
    let start = ptx
        .find(&format!(".entry {name}("))
        .unwrap_or_else(|| panic!("no entry {name} in\n{ptx}"));
    let len = ptx[start..]
        .find("\n}\n")
        .expect("the entry's closing brace");
    &ptx[start..start + len]
}

#[test]
fn column_sums_of_narrow_rows_get_an_entry_of_their_own_and_wide_rows_the_masked_kernel() {
    for (name, plan) in super::samples::rows() {
        let kernel = generate(&plan, GpuMain::Dense).unwrap();
        let masked = generate_with(&plan, GpuMain::Dense, RowKernelOptions::MASKED).unwrap();
        if kernel.kernel.shape != KernelShape::RowColumns {
            assert_eq!(kernel.kernel.narrow, None, "{name}");
            assert!(!kernel.ptx.contains(NARROW_ENTRY), "{name}");
            continue;
        }
        let narrow = kernel.kernel.narrow.expect("a narrow entry");
        assert_eq!((narrow.max_cols, narrow.blocks), (2048, 396), "{name}");
        assert_eq!(masked.kernel.narrow, None, "{name}");
        // The block walk reduces each tile row's aggregates across the block: shuffles, then
        // the warps' pairs through shared memory past a barrier.
        let walk = entry_text(&kernel.ptx, NARROW_ENTRY);
        assert!(
            walk.contains("shfl.sync.down") && walk.contains("bar.sync"),
            "{name}"
        );
        // Rows too wide for it run the layout measured as MASKED, instruction for instruction.
        assert_eq!(
            entry_text(&kernel.ptx, ENTRY),
            entry_text(&masked.ptx, ENTRY),
            "{name}"
        );
    }
}

#[test]
fn a_dense_driver_gets_the_tiled_outer_kernel_for_cell_wise_and_full_sums_only() {
    let k = generate(&outer(OuterType::FullAgg), GpuMain::Dense).unwrap();
    assert_eq!(k.kernel.shape, KernelShape::OuterFullAgg);
    assert_eq!(k.kernel.main, GpuMain::Dense);
    // The tile's dot products are fused multiply-adds over k, the driver read once a cell.
    assert!(k.ptx.contains("fma.rn.f64"), "{}", k.ptx);
    let k = generate(&outer(OuterType::CellWise), GpuMain::Dense).unwrap();
    assert_eq!(k.kernel.shape, KernelShape::OuterCellWise);
    match generate(&outer(OuterType::Right), GpuMain::Dense) {
        Err(e @ CodegenError::Unsupported(_)) => assert!(e.to_string().contains("dense"), "{e}"),
        other => panic!("expected unsupported, got {other:?}"),
    }
}
