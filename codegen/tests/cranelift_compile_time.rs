//! Figures, not assertions (DESIGN 7: no timed tests): Cranelift compile time per operator over
//! the Cell, MultiAgg and Outer plans of the differential tests (every cell type and
//! aggregation, sparse-safe and not, over every side-input access; MultiAgg of two and three
//! aggregates; every Outer type; the Row patterns of `common::row_plans`, dense and CSR entry
//! points),
//! median of 9 compilations per plan, and the median over the plans; beside it LLVM's for the
//! same plans where the build has both backends.
//! Run with `cargo test -p lafuse-codegen --release --features cranelift,llvm --test
//! cranelift_compile_time -- --ignored --nocapture`.
#![cfg(feature = "cranelift")]

mod common;

use common::cell_plans::*;
use common::row_plans::row_plans;
use lafuse_codegen::backend::MainFormat;
use lafuse_codegen::cranelift::compile_for;
use lafuse_compiler::fusion::cplan::{CPlan, OuterType};
use lafuse_compiler::fusion::template::{CellAgg, CellType};
use std::time::Duration;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut t: Vec<f64>) -> f64 {
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

/// The plans timed, named.
fn plans() -> Vec<(String, CPlan)> {
    let aggs = [CellAgg::Sum, CellAgg::SumSq, CellAgg::Min, CellAgg::Max];
    let mut cases = vec![(CellType::NoAgg, None)];
    for ty in [CellType::RowAgg, CellType::ColAgg, CellType::FullAgg] {
        cases.extend(aggs.iter().map(|&a| (ty, Some(a))));
    }
    let mut out = Vec::new();
    for safe in [true, false] {
        for broadcast in [true, false] {
            for &(ty, agg) in &cases {
                out.push((
                    format!(
                        "cell {ty:?} {agg:?} safe={safe} {}",
                        if broadcast { "broadcast" } else { "aligned" }
                    ),
                    cell_plan_reading(ty, agg, safe, broadcast),
                ));
            }
        }
    }
    out.push((
        "magg sum,max".into(),
        magg_plan(vec![CellAgg::Sum, CellAgg::Max]),
    ));
    out.push((
        "magg sumsq,min,sum".into(),
        magg_plan(vec![CellAgg::SumSq, CellAgg::Min, CellAgg::Sum]),
    ));
    out.push(("magg sparse-safe".into(), sparse_safe_magg_plan()));
    for ty in [
        OuterType::CellWise,
        OuterType::FullAgg,
        OuterType::Right,
        OuterType::Left,
        OuterType::LeftT,
    ] {
        out.push((format!("outer {ty:?}"), outer_plan(ty)));
    }
    out
}

/// Row plans with the main-input format of the entry point compiled first (both entry points
/// are compiled, one per format).
fn row_plans_by_format() -> Vec<(String, CPlan, MainFormat)> {
    let mut out = Vec::new();
    for (name, plan) in row_plans() {
        for (f, main) in [("dense", MainFormat::Dense), ("csr", MainFormat::Sparse)] {
            out.push((format!("{name} {f}"), plan.clone(), main));
        }
    }
    out
}

/// The median of 9 compilations of `plan` by `compile`, in milliseconds.
fn time(compile: &dyn Fn() -> Duration) -> f64 {
    median((0..9).map(|_| ms(compile())).collect())
}

#[test]
#[ignore = "prints timings"]
fn compile_time_per_plan() {
    let mut cl_all = Vec::new();
    // Filled only where the build has LLVM.
    #[allow(unused_mut)]
    let mut llvm_all = Vec::new();
    // The first compilation builds the host ISA (Cranelift) and the math library (LLVM):
    // once per process, not per operator.
    let warm = &plans()[0].1;
    compile_for(warm, MainFormat::Dense).unwrap();
    #[cfg(feature = "llvm")]
    lafuse_codegen::native::compile(warm).unwrap();
    println!("{:<48} {:>12} {:>12}", "plan", "cranelift ms", "llvm ms");
    let all = plans()
        .into_iter()
        .map(|(name, plan)| (name, plan, MainFormat::Dense))
        .chain(row_plans_by_format());
    #[allow(unused_mut)]
    let (mut cl_row, mut llvm_row): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    for (name, plan, main) in all {
        let cl = time(&|| compile_for(&plan, main).unwrap().compile_time());
        if name.starts_with("row") {
            cl_row.push(cl);
        }
        cl_all.push(cl);
        #[cfg(feature = "llvm")]
        let llvm = {
            let t = time(&|| {
                lafuse_codegen::native::compile_for(&plan, main)
                    .unwrap()
                    .compile_time()
            });
            llvm_all.push(t);
            if name.starts_with("row") {
                llvm_row.push(t);
            }
            format!("{t:>12.3}")
        };
        #[cfg(not(feature = "llvm"))]
        let llvm = format!("{:>12}", "-");
        println!("{name:<48} {cl:>12.3} {llvm}");
    }
    println!(
        "median over {} plans: cranelift {:.3} ms{}",
        cl_all.len(),
        median(cl_all.clone()),
        if llvm_all.is_empty() {
            String::new()
        } else {
            format!(", llvm {:.3} ms", median(llvm_all.clone()))
        }
    );
    println!(
        "median over the {} Row entry points: cranelift {:.3} ms{}",
        cl_row.len(),
        median(cl_row),
        if llvm_row.is_empty() {
            String::new()
        } else {
            format!(", llvm {:.3} ms", median(llvm_row))
        }
    );
}
