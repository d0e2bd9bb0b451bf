//! `lafuse bench --suite gpu`: the GPU backend against the CPU and against the device's own
//! copy bandwidth, in this process.
//!
//! `--filter` selects checks by `check <name>` and speed runs by `<case> <variant>` (as printed).
//!
//! * Checks: every kernel shape the GPU backend generates ([`samples::generated`]) on dense
//!   and CSR main inputs of several shapes (1×1, empty, odd sizes, NaN and infinities in the
//!   dense ones), each output within 1e-9 relative of the native CPU operator's, and a second
//!   GPU run bit-identical to the first. A mismatch is a failed measurement naming the cell.
//! * Speed: `sum(X*Y*Z)` (Cell), `[sum(X*Y), sum(X*Z)]` (MultiAgg),
//!   `sum(S * log(U %*% t(V) + 1e-15))` over a sparse `S` at two densities (Outer, whose time
//!   should follow nnz), with inputs resident on the device (reused by lineage, as a script's
//!   loop reuses them): kernel time from CUDA events and the call's wall time, bandwidth as a
//!   fraction of a device-to-device copy measured in the same run, interleaved with the same
//!   operator on the CPU; the same Outer over a dense `X` (every cell, in tiles); and
//!   `t(X) %*% (X %*% v)` (Row), which reads X once, in each layout the Row kernel has
//!   (`ptx::compared_row_layouts`), at the suite's size and four times as wide. The checks
//!   cover those layouts and the dense-driver Outer kernel too, which the GPU backend places
//!   operators on only once a device run has passed them.

use super::results::{Measurement, Status};
use super::Ctx;
use lafuse_codegen::backend::Operand;
use lafuse_codegen::native::NativeOperator;
use lafuse_codegen::ptx::device::{gpu, Gpu, GpuCall};
use lafuse_codegen::ptx::{
    compared_row_layouts, generate_with, samples, GpuMain, PtxKernel, RowKernelOptions, ENTRY,
};
use lafuse_compiler::fusion::cplan::{CPlan, OuterType, RowType, TemplateSpec};
use lafuse_compiler::fusion::template::CellType;
use lafuse_runtime::lineage::{ItemKind, Lineage};
use lafuse_runtime::{Matrix, SparseMatrix};
use lafuse_skeletons::{Input, InputUse};
use std::time::Instant;

const SUITE: &str = "gpu";

/// A deterministic generator (splitmix64) for the inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn dense(rng: &mut Rng, m: usize, n: usize, lo: f64, hi: f64) -> Matrix {
    let vals = (0..m * n).map(|_| lo + (hi - lo) * rng.next()).collect();
    Matrix::from_dense_values(m, n, vals).expect("bench input")
}

fn sparse(rng: &mut Rng, m: usize, n: usize, density: f64) -> Matrix {
    let mut t = Vec::new();
    for i in 0..m {
        for j in 0..n {
            if rng.next() < density {
                t.push((i, j, 0.5 + rng.next()));
            }
        }
    }
    let mut row_ptr = vec![0usize; m + 1];
    let mut col_idx = Vec::with_capacity(t.len());
    let mut values = Vec::with_capacity(t.len());
    for &(i, j, v) in &t {
        row_ptr[i + 1] += 1;
        col_idx.push(j as u32);
        values.push(v);
    }
    for i in 0..m {
        row_ptr[i + 1] += row_ptr[i];
    }
    Matrix::Sparse(SparseMatrix {
        rows: m,
        cols: n,
        row_ptr: row_ptr.into(),
        col_idx: col_idx.into(),
        values: values.into(),
    })
}

/// Puts NaN, +inf and -inf into a dense matrix (where it has room).
fn with_specials(m: Matrix) -> Matrix {
    let (r, c) = m.shape();
    let mut vals = m.into_dense_values().expect("dense");
    for (k, v) in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY]
        .into_iter()
        .enumerate()
    {
        let at = (k * 7919) % vals.len().max(1);
        if vals.len() > 3 {
            vals[at] = v;
        }
    }
    Matrix::from_dense_values(r, c, vals).expect("bench input")
}

/// Inputs of `plan` for an m×n main input: side inputs by their access (and, where `uses` says
/// so, of a Row kernel's product space: `k` = 3 columns), values in [-1, 1] (Outer factors in
/// [0, 1], so `log` of their products is finite), specials in the dense main input when
/// `specials`.
fn inputs_for(
    plan: &CPlan,
    uses: &[InputUse],
    main: GpuMain,
    (m, n): (usize, usize),
    specials: bool,
    seed: u64,
) -> Vec<Matrix> {
    use lafuse_compiler::fusion::cplan::{Access, CNode};
    let mut rng = Rng(seed);
    let outer = matches!(plan.template, TemplateSpec::Outer { .. });
    // A left product's matrix is given as k2×m, a right one's as n×k2.
    let left = matches!(
        plan.template,
        TemplateSpec::Outer {
            outer_type: OuterType::Left | OuterType::LeftT
        }
    );
    let mut out: Vec<Matrix> = Vec::new();
    for k in 0..plan.inputs.len() {
        let access = plan.nodes.iter().find_map(|node| match node {
            CNode::Data { input, access } if *input == k => Some(*access),
            _ => None,
        });
        let product_space = uses.contains(&InputUse::B1Aligned)
            || uses.contains(&InputUse::B1RowVector)
            || matches!(
                plan.template,
                TemplateSpec::Row {
                    row_type: RowType::NoAggB1,
                    ..
                }
            );
        let mat = match (k, access) {
            _ if uses.get(k) == Some(&InputUse::B1Aligned) => dense(&mut rng, m, 3, -1.0, 1.0),
            _ if uses.get(k) == Some(&InputUse::B1RowVector) => dense(&mut rng, 1, 3, -1.0, 1.0),
            (_, Some(Access::Whole)) if product_space && !outer => dense(&mut rng, n, 3, -1.0, 1.0),
            (0, _) if main == GpuMain::Csr => sparse(&mut rng, m, n, if outer { 0.1 } else { 0.3 }),
            (0, _) if specials => with_specials(dense(&mut rng, m, n, -1.0, 1.0)),
            (0, _) => dense(&mut rng, m, n, -1.0, 1.0),
            (_, Some(Access::ColVector)) => dense(&mut rng, m, 1, 0.1, 1.0),
            (_, Some(Access::RowVector)) => dense(&mut rng, 1, n, 0.1, 1.0),
            (_, Some(Access::OuterU)) => dense(&mut rng, m, 5, 0.0, 1.0),
            (_, Some(Access::OuterV)) => dense(&mut rng, n, 5, 0.0, 1.0),
            (_, Some(Access::Whole)) if !outer => dense(&mut rng, n, 1, -1.0, 1.0),
            (_, Some(Access::Whole)) if left => dense(&mut rng, 3, m, -1.0, 1.0),
            (_, Some(Access::Whole)) => dense(&mut rng, n, 3, -1.0, 1.0),
            _ => dense(&mut rng, m, n, -1.0, 1.0),
        };
        out.push(mat);
    }
    out
}

/// The shapes of a plan's outputs for an m×n main input.
fn out_shapes(plan: &CPlan, inputs: &[Matrix]) -> Vec<(usize, usize)> {
    let (m, n) = inputs[0].shape();
    match &plan.template {
        TemplateSpec::Cell { cell_type, .. } => vec![match cell_type {
            CellType::NoAgg => (m, n),
            CellType::RowAgg => (m, 1),
            CellType::ColAgg => (1, n),
            CellType::FullAgg => (1, 1),
        }],
        TemplateSpec::MAgg { aggs, .. } => vec![(1, 1); aggs.len()],
        TemplateSpec::Outer { outer_type } => vec![match outer_type {
            OuterType::CellWise => (m, n),
            OuterType::FullAgg => (1, 1),
            OuterType::Left => (n, inputs.last().map_or(1, |w| w.rows())),
            OuterType::LeftT => (inputs.last().map_or(1, |w| w.rows()), n),
            OuterType::Right => (m, inputs.last().map_or(1, |w| w.cols())),
        }],
        TemplateSpec::Row {
            row_type: RowType::NoAggB1,
            ..
        } => {
            // As wide as the product's matrix (the only n-row input).
            let k = inputs[1..]
                .iter()
                .find(|x| x.rows() == n && x.cols() > 1)
                .map_or(1, |x| x.cols());
            vec![(m, k)]
        }
        TemplateSpec::Row { .. } => vec![samples::row_out_shape(plan, m, n)],
    }
}

fn on_gpu(
    g: &Gpu,
    k: &PtxKernel,
    inputs: &[Matrix],
    lineage: &[Option<Lineage>],
    shapes: &[(usize, usize)],
) -> Result<Vec<Matrix>, String> {
    let ins: Vec<Input<'_>> = inputs.iter().map(Input::Matrix).collect();
    g.run(
        &k.ptx,
        ENTRY,
        &k.kernel,
        &GpuCall {
            inputs: &ins,
            lineage,
            out_shapes: shapes,
        },
    )
    .map_err(|e| e.to_string())
}

fn on_cpu(
    op: &NativeOperator,
    inputs: &[Matrix],
    shapes: &[(usize, usize)],
) -> Result<Vec<Matrix>, String> {
    let ops: Vec<Operand<'_>> = inputs.iter().map(Operand::Matrix).collect();
    op.execute(&ops, shapes).map_err(|e| e.to_string())
}

/// The first cell where `gpu` is not within 1e-9 relative of `cpu` (NaN matching NaN).
fn mismatch(cpu: &[Matrix], gpu: &[Matrix]) -> Option<String> {
    if cpu.len() != gpu.len() {
        return Some(format!("{} outputs, CPU {}", gpu.len(), cpu.len()));
    }
    for (o, (a, b)) in cpu.iter().zip(gpu).enumerate() {
        if a.shape() != b.shape() {
            return Some(format!(
                "output {o} is {:?}, CPU {:?}",
                b.shape(),
                a.shape()
            ));
        }
        let (r, c) = a.shape();
        for i in 0..r {
            for j in 0..c {
                let (x, y) = (a.get(i, j), b.get(i, j));
                let same = x == y
                    || (x.is_nan() && y.is_nan())
                    || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0);
                if !same {
                    return Some(format!("output {o} cell ({i}, {j}): GPU {y:e}, CPU {x:e}"));
                }
            }
        }
    }
    None
}

fn bits(ms: &[Matrix]) -> Vec<u64> {
    ms.iter()
        .flat_map(|m| {
            let (r, c) = m.shape();
            (0..r * c).map(move |k| m.get(k / c.max(1), k % c.max(1)).to_bits())
        })
        .collect()
}

/// The checks: each generated kernel against the CPU on several shapes; the Row plans also
/// in every layout the speed runs compare. 41×2300 has a partial tile and, in the resident
/// layouts, columns past those a thread keeps in registers.
fn checks(g: &Gpu, ctx: &Ctx, out: &mut Vec<Measurement>) {
    let shapes = [(1, 1), (0, 4), (37, 53), (1000, 300), (41, 2300)];
    let mut cases: Vec<(String, CPlan, GpuMain, RowKernelOptions)> = samples::generated()
        .into_iter()
        .map(|(name, plan, main)| (name, plan, main, RowKernelOptions::default()))
        .collect();
    for (layout_name, layout) in compared_row_layouts() {
        if layout != RowKernelOptions::default() {
            for (name, plan) in samples::rows() {
                cases.push((
                    format!("{name} [{layout_name}]"),
                    plan,
                    GpuMain::Dense,
                    layout,
                ));
            }
        }
    }
    for (name, plan, main, layout) in cases {
        if !ctx.selected(&format!("check {name}")) {
            continue;
        }
        let mut rec = Measurement::new(SUITE, "check", &name, "lafuse", "gpu-vs-cpu");
        let result = (|| -> Result<usize, String> {
            let kernel = generate_with(&plan, main, layout).map_err(|e| e.to_string())?;
            let cpu = lafuse_codegen::native::compile(&plan).map_err(|e| e.to_string())?;
            let mut cells = 0;
            for (s, &(m, n)) in shapes.iter().enumerate() {
                for specials in [false, true] {
                    if specials && main == GpuMain::Csr {
                        continue;
                    }
                    let uses = &kernel.kernel.uses;
                    let inputs = inputs_for(&plan, uses, main, (m, n), specials, 17 + s as u64);
                    let shapes = out_shapes(&plan, &inputs);
                    let want = on_cpu(&cpu, &inputs, &shapes)?;
                    let got = on_gpu(g, &kernel, &inputs, &[], &shapes)?;
                    if let Some(why) = mismatch(&want, &got) {
                        return Err(format!(
                            "{m}x{n}{}: {why}",
                            if specials { " with NaN/inf" } else { "" }
                        ));
                    }
                    let again = on_gpu(g, &kernel, &inputs, &[], &shapes)?;
                    if bits(&again) != bits(&got) {
                        return Err(format!("{m}x{n}: a second GPU run differs in its bits"));
                    }
                    cells += m * n;
                }
            }
            Ok(cells)
        })();
        match result {
            Ok(cells) => {
                rec.notes
                    .push(format!("{cells} cells compared, repeat bit-identical"));
                println!("check  {name:<48} ok ({cells} cells, repeat bit-identical)");
            }
            Err(why) => {
                println!("check  {name:<48} FAILED: {why}");
                rec.fail(Status::Failed, why);
            }
        }
        out.push(rec);
    }
}

/// Lineage leaves naming the inputs, so the device keeps them between calls.
fn keys(case: &str, n: usize) -> Vec<Option<Lineage>> {
    (0..n)
        .map(|k| {
            Some(Lineage::new(
                ItemKind::Creation,
                "bench",
                format!("{case}#{k}"),
                vec![],
            ))
        })
        .collect()
}

/// What every speed run shares: the device, the run's `--filter`, the copy bandwidth measured
/// at the start, and the repetitions.
struct Timing<'a> {
    g: &'a Gpu,
    ctx: &'a Ctx,
    copy_bw: f64,
    reps: usize,
}

/// Times one operator on the GPU (kernel and call) and the CPU, interleaved, where the run's
/// `--filter` selects `case variant`.
#[allow(clippy::too_many_arguments)]
fn speed(
    t: &Timing<'_>,
    case: &str,
    variant: &str,
    plan: &CPlan,
    (main, layout): (GpuMain, RowKernelOptions),
    inputs: &[Matrix],
    bytes: f64,
    out: &mut Vec<Measurement>,
) {
    if !t.ctx.selected(&format!("{case} {variant}")) {
        return;
    }
    let (g, copy_bw, reps) = (t.g, t.copy_bw, t.reps);
    let mut kernel_rec = Measurement::new(SUITE, case, variant, "lafuse-gpu", "kernel");
    let mut call_rec = Measurement::new(SUITE, case, variant, "lafuse-gpu", "call");
    let mut cpu_rec = Measurement::new(SUITE, case, variant, "lafuse-cpu", "native");
    let shapes = out_shapes(plan, inputs);
    // Keys name this case's values: another case's of the same shapes must not be reused.
    let lineage = keys(&format!("{case} {variant}"), inputs.len());
    let mut run = || -> Result<(), String> {
        let kernel = generate_with(plan, main, layout).map_err(|e| e.to_string())?;
        let cpu = lafuse_codegen::native::compile(plan).map_err(|e| e.to_string())?;
        let want = on_cpu(&cpu, inputs, &shapes)?;
        // Warm-ups: the first calls upload (delayed caching keeps them from the second on).
        for _ in 0..3 {
            let got = on_gpu(g, &kernel, inputs, &lineage, &shapes)?;
            if let Some(why) = mismatch(&want, &got) {
                return Err(why);
            }
        }
        for _ in 0..reps {
            let t = Instant::now();
            on_gpu(g, &kernel, inputs, &lineage, &shapes)?;
            call_rec.times_ms.push(t.elapsed().as_secs_f64() * 1e3);
            kernel_rec
                .times_ms
                .push(g.stats().0.last_kernel.as_secs_f64() * 1e3);
            let t = Instant::now();
            on_cpu(&cpu, inputs, &shapes)?;
            cpu_rec.times_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        Ok(())
    };
    let result = run();
    for rec in [&mut kernel_rec, &mut call_rec, &mut cpu_rec] {
        if let Err(why) = &result {
            rec.fail(Status::Failed, why.clone());
            continue;
        }
        rec.summarize();
        rec.bytes_read = Some(bytes);
        if let Some(ms) = rec.median_ms {
            let bw = bytes / (ms / 1e3);
            rec.figures.insert("gb_per_s".into(), bw / 1e9);
            if rec.system == "lafuse-gpu" {
                rec.bandwidth_fraction = Some(bw / copy_bw);
            }
        }
    }
    if case == "outer" {
        if let (Some(ms), Some(nnz)) = (kernel_rec.median_ms, variant.split("nnz=").nth(1)) {
            let nnz: f64 = nnz.parse().unwrap_or(f64::NAN);
            kernel_rec
                .figures
                .insert("ns_per_nnz".into(), ms * 1e6 / nnz);
            println!(
                "speed  {case:<6} {variant:<14} kernel {:.4} ns per non-zero",
                ms * 1e6 / nnz
            );
        }
    }
    match &result {
        Ok(()) => println!(
            "speed  {case:<6} {variant:<14} kernel {:>8.3} ms ({:>5.0} GB/s, {:>4.0}% of copy)  call {:>8.3} ms  cpu {:>9.3} ms",
            kernel_rec.median_ms.unwrap_or(f64::NAN),
            kernel_rec.figures.get("gb_per_s").copied().unwrap_or(f64::NAN),
            100.0 * kernel_rec.bandwidth_fraction.unwrap_or(f64::NAN),
            call_rec.median_ms.unwrap_or(f64::NAN),
            cpu_rec.median_ms.unwrap_or(f64::NAN),
        ),
        Err(why) => println!("speed  {case:<6} {variant:<14} FAILED: {why}"),
    }
    out.extend([kernel_rec, call_rec, cpu_rec]);
}

/// Runs the suite: one skipped measurement saying why where there is no GPU.
pub fn run(ctx: &Ctx) -> Vec<Measurement> {
    let mut out = Vec::new();
    let g = match gpu() {
        Ok(g) => g,
        Err(why) => {
            let mut rec = Measurement::new(SUITE, "all", "", "lafuse-gpu", "");
            rec.fail(Status::Skipped, why.to_string());
            eprintln!("suite gpu skipped: {why}");
            return vec![rec];
        }
    };
    println!("device: {}", g.name());
    checks(g, ctx, &mut out);
    let (m, n) = match ctx.sizes.scale {
        super::Scale::Full => (20_000, 2_000),
        super::Scale::Quick => (5_000, 1_000),
        super::Scale::Tiny => (500, 200),
    };
    let reps = ctx.sizes.micro_reps.max(5);
    let cells = (m * n) as f64;
    let copy_bw = g.copy_bandwidth(m * n * 8, 20).unwrap_or(f64::NAN);
    println!(
        "device-to-device copy of {:.0} MB: {:.0} GB/s (read + written)",
        cells * 8e-6,
        copy_bw / 1e9
    );
    let mut copy = Measurement::new(SUITE, "copy", "dense", "device", "memcpy");
    copy.figures.insert("gb_per_s".into(), copy_bw / 1e9);
    out.push(copy);
    let timing = Timing {
        g,
        ctx,
        copy_bw,
        reps,
    };
    let mut rng = Rng(7);
    let xyz: Vec<Matrix> = (0..3).map(|_| dense(&mut rng, m, n, -1.0, 1.0)).collect();
    let variant = format!("dense {m}x{n}");
    speed(
        &timing,
        "cell",
        &variant,
        &samples::sum_xyz(),
        (GpuMain::Dense, RowKernelOptions::default()),
        &xyz,
        3.0 * cells * 8.0,
        &mut out,
    );
    speed(
        &timing,
        "magg",
        &variant,
        &samples::magg_xy_xz(),
        (GpuMain::Dense, RowKernelOptions::default()),
        &xyz,
        3.0 * cells * 8.0,
        &mut out,
    );
    drop(xyz);
    // The Row kernel's layouts side by side (the default is one of them), on X as above and on
    // one of the same size four times as wide, whose rows have more columns than a block keeps
    // in registers.
    for (rows, cols) in [(m, n), (m / 4, 4 * n)] {
        let x = dense(&mut rng, rows, cols, -1.0, 1.0);
        let v = dense(&mut rng, cols, 1, -1.0, 1.0);
        row_layouts(&timing, &[x, v], &mut out);
    }

    let k = 10;
    for density in [0.1, 0.01, 0.001] {
        let s = sparse(&mut rng, m, n, density);
        let nnz = s.nnz();
        let u = dense(&mut rng, m, k, 0.0, 1.0);
        let v = dense(&mut rng, n, k, 0.0, 1.0);
        // What the operator must read once: the driver's values and column indexes, its row
        // pointers, U and V (their rows are read again per non-zero, from cache).
        let bytes = nnz as f64 * 12.0 + (m + 1) as f64 * 8.0 + ((m + n) * k) as f64 * 8.0;
        let variant = format!("sp={density} nnz={nnz}");
        speed(
            &timing,
            "outer",
            &variant,
            &samples::outer(OuterType::FullAgg),
            (GpuMain::Csr, RowKernelOptions::default()),
            &[s, u, v],
            bytes,
            &mut out,
        );
    }
    // A left product `t(G) %*% Wt` (a thread per driver column over the CSR of `t(X)`, which
    // the device keeps by the driver's lineage after its first calls).
    for density in [0.1, 0.01] {
        let s = sparse(&mut rng, m, n, density);
        let nnz = s.nnz();
        let u = dense(&mut rng, m, k, 0.0, 1.0);
        let v = dense(&mut rng, n, k, 0.0, 1.0);
        let w = dense(&mut rng, k, m, -1.0, 1.0);
        let bytes = nnz as f64 * 12.0 + (n + 1) as f64 * 8.0 + ((2 * m + n) * k) as f64 * 8.0;
        speed(
            &timing,
            "outer",
            &format!("left sp={density} nnz={nnz}"),
            &samples::outer(OuterType::Left),
            (GpuMain::Csr, RowKernelOptions::default()),
            &[s, u, v, w],
            bytes,
            &mut out,
        );
    }
    // Over a dense driver: every cell, in tiles (`ptx::outer_dense`); it must read X once.
    let x = dense(&mut rng, m, n, -1.0, 1.0);
    let u = dense(&mut rng, m, k, 0.0, 1.0);
    let v = dense(&mut rng, n, k, 0.0, 1.0);
    speed(
        &timing,
        "outer",
        &format!("dense {m}x{n} k={k}"),
        &samples::outer(OuterType::FullAgg),
        (GpuMain::Dense, RowKernelOptions::default()),
        &[x, u, v],
        cells * 8.0 + ((m + n) * k) as f64 * 8.0,
        &mut out,
    );
    out
}

/// `t(X) %*% (X %*% v)` with the Row kernel in each compared layout (`xv`: X and v).
fn row_layouts(timing: &Timing<'_>, xv: &[Matrix], out: &mut Vec<Measurement>) {
    let (m, n) = (xv[0].rows(), xv[0].cols());
    for (name, layout) in compared_row_layouts() {
        let marked = if layout == RowKernelOptions::default() {
            " (default)"
        } else {
            ""
        };
        speed(
            timing,
            "row",
            &format!("dense {m}x{n} {name}{marked}"),
            &samples::mmchain(),
            (GpuMain::Dense, layout),
            xv,
            (m * n) as f64 * 8.0,
            out,
        );
    }
}
