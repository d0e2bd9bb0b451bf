//! The GPU placement through the engine: `--device gpu` and `--device auto` compute what the
//! CPU computes, on every machine. Without a GPU (CI) the engine says why once and runs the
//! operators on the CPU; with one (the GPU machine's device check, `bench/gpu/device-run.sh`),
//! the Cell, MultiAgg, Outer and Row operators of `bench/gpu/check.dml` run there and must
//! agree within the corpus tolerance (1e-9 relative).

mod compare;
mod fused_at_once;

use lafuse::{
    Engine, EngineConfig, ExplainLevel, ExplainOptions, Placement, ScriptArgs, SourceFile,
};
use std::path::PathBuf;

fn check_script() -> SourceFile {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bench/gpu/check.dml");
    SourceFile::new("check.dml", std::fs::read_to_string(path).unwrap())
}

fn run(source: &SourceFile, placement: Placement) -> String {
    run_traced(source, placement, false)
}

/// `lineage`: traced, so fused operators are told their inputs' items (a GPU operator keeps
/// device copies by them).
fn run_traced(source: &SourceFile, placement: Placement, lineage: bool) -> String {
    let engine = Engine::new(EngineConfig {
        placement,
        lineage,
        ..fused_at_once::config()
    });
    let mut out = Vec::new();
    engine
        .run(source, &ScriptArgs::default(), &mut out)
        .map_err(|e| e.render(source))
        .unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn every_placement_prints_what_the_cpu_prints() {
    let source = check_script();
    let cpu = run(&source, Placement::Cpu);
    assert!(cpu.lines().count() >= 18, "{cpu}");
    for placement in [Placement::Gpu, Placement::Auto] {
        for lineage in [false, true] {
            let got = run_traced(&source, placement, lineage);
            compare::outputs_match(&cpu, &got)
                .unwrap_or_else(|e| panic!("{placement:?}, lineage {lineage}: {e}"));
        }
    }
}

/// A loop whose fused operators read the same `X` every iteration, traced: on a GPU the
/// device keeps `X` by its lineage after the first iterations; the results are the CPU's
/// either way, deduplicated tracing (whose items inside the loop are placeholders, never
/// device keys) included.
#[test]
fn a_loop_over_the_same_inputs_prints_what_the_cpu_prints_traced() {
    let source = SourceFile::new(
        "loop.dml",
        "X = rand(rows=400, cols=300, seed=3)\n\
         Y = rand(rows=400, cols=300, seed=4)\n\
         s = 0\n\
         for (i in 1:5) {\n  s = s + sum(X * Y * i) + sum(X / rowSums(Y + i))\n}\n\
         print(s)\n",
    );
    let cpu = run(&source, Placement::Cpu);
    for dedup in [false, true] {
        let engine = Engine::new(EngineConfig {
            placement: Placement::Gpu,
            lineage: true,
            lineage_dedup: dedup,
            ..fused_at_once::config()
        });
        let mut out = Vec::new();
        engine
            .run(&source, &ScriptArgs::default(), &mut out)
            .map_err(|e| e.render(&source))
            .unwrap();
        compare::outputs_match(&cpu, &String::from_utf8(out).unwrap())
            .unwrap_or_else(|e| panic!("dedup {dedup}: {e}"));
    }
}

#[test]
fn without_a_gpu_the_reason_is_a_sentence() {
    match lafuse::gpu::available() {
        Ok(name) => assert!(!name.is_empty()),
        Err(why) => {
            assert!(
                why.starts_with("no GPU: ") || why.contains("without the `cuda` feature"),
                "{why}"
            );
            // Statistics have nothing to say about a GPU never opened.
            assert!(lafuse::gpu::stats_text().is_none());
        }
    }
}

#[cfg(feature = "cuda")]
#[test]
fn explain_shows_the_ptx_kernel_of_every_fused_operator() {
    let source = check_script();
    let engine = Engine::new(fused_at_once::config());
    let text = engine
        .explain(
            &source,
            &ScriptArgs::default(),
            &ExplainOptions {
                level: ExplainLevel::Ptx,
                ..ExplainOptions::default()
            },
        )
        .map_err(|e| e.render(&source))
        .unwrap();
    let operators = text.matches("\nop ").count() + usize::from(text.starts_with("op "));
    assert!(operators >= 10, "{text}");
    // Every operator of this script has a kernel (Row ones included).
    assert!(!text.contains("runs on the CPU"), "{text}");
    assert!(
        text.matches(".entry lafuse_kernel(").count() >= operators,
        "{text}"
    );
    assert!(text.contains(".target sm_80"));
}
