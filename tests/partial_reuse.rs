//! Partial reuse (LIMA section 4.2) changes no result. Programs built around each rewrite's
//! source pattern (`t(Z)%*%Z` and column aggregates of `cbind(X, dX)`, products of `rbind` and
//! `cbind`, products of slices, `t(X)%*%y` over `rbind`) write what they compute, and the files are the same with
//! partial reuse as without: on dense and sparse data, with NaN and infinities, with one row,
//! one column and 1 x 1 matrices, fused and unfused. Where the data is dense the rewrites
//! apply, and steplm's inner loop takes exactly the partial hits it should.

use lafuse::{
    Engine, EngineConfig, EvictionPolicy, FusionBackend, FusionPolicy, ReuseConfig, ReuseMode,
    ScriptArgs, SourceFile, Stats,
};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

mod fused_at_once;

#[derive(Clone, Debug)]
struct Case {
    rows: usize,
    cols: usize,
    added: usize,
    density: f64,
    specials: bool,
    fused: bool,
}

/// The program of `case`, writing its results under `dir`.
fn script(case: &Case, dir: &Path) -> String {
    let Case {
        rows: m,
        cols: k,
        added: d,
        density,
        specials,
        ..
    } = *case;
    let n = k + 2;
    let specials = if specials {
        format!("X[1, 1] = 0/0\nX[{m}, {k}] = 1/0\nY[1, 2] = -1/0\n")
    } else {
        String::new()
    };
    let dir = dir.display();
    format!(
        "X = rand(rows={m}, cols={k}, sparsity={density}, seed=11)
dX = rand(rows={m}, cols={d}, seed=12)
Y = rand(rows={k}, cols={n}, seed=13)
dY = rand(rows={k}, cols={d}, seed=14)
dR = rand(rows={d}, cols={k}, seed=15)
yv = rand(rows={m}, cols=1, seed=16)
dyv = rand(rows={d}, cols=1, seed=17)
{specials}G = t(X) %*% X
P = X %*% Y
c = colSums(X) + colMaxs(X)
write(G, \"{dir}/G.csv\", format=\"csv\")
write(P, \"{dir}/P.csv\", format=\"csv\")
write(c, \"{dir}/c.csv\", format=\"csv\")
for (i in 1:2) {{
  Z = cbind(X, dX)
  write(t(Z) %*% Z, \"{dir}/tsmm\" + i + \".csv\", format=\"csv\")
  write(colSums(Z), \"{dir}/colsums\" + i + \".csv\", format=\"csv\")
  write(colMaxs(Z), \"{dir}/colmaxs\" + i + \".csv\", format=\"csv\")
  write(rbind(X, dR) %*% Y, \"{dir}/rbind\" + i + \".csv\", format=\"csv\")
  write(X %*% cbind(Y, dY), \"{dir}/cbind\" + i + \".csv\", format=\"csv\")
  write(X %*% Y[, i:{n}], \"{dir}/cols\" + i + \".csv\", format=\"csv\")
  write(X[min(i, {m}):{m}, ] %*% Y, \"{dir}/rows\" + i + \".csv\", format=\"csv\")
  write(t(rbind(X, dR)) %*% rbind(yv, dyv), \"{dir}/tmv\" + i + \".csv\", format=\"csv\")
}}
"
    )
}

fn config(mode: ReuseMode, fused: bool) -> EngineConfig {
    EngineConfig {
        fusion: fused.then_some(FusionPolicy::Gen),
        backend: FusionBackend::Reference,
        collect_stats: true,
        reuse: ReuseConfig {
            mode,
            policy: EvictionPolicy::CostSize,
            budget: None,
            spill_dir: None,
            delay: 1,
        },
        ..fused_at_once::config()
    }
}

fn run(text: &str, config: EngineConfig) -> Stats {
    let source = SourceFile::new("partial.dml", text);
    Engine::new(config)
        .run(&source, &ScriptArgs::default(), &mut Vec::new())
        .unwrap_or_else(|e| panic!("{}", e.render(&source)))
        .stats
}

/// The files a run wrote, by name.
fn written(dir: &Path) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "csv"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    files.sort();
    files
}

fn scratch(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "lafuse-partial-{label}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `case` without reuse and with hybrid reuse; the partial hits of the latter.
fn check(case: &Case) -> u64 {
    let (plain_dir, reused_dir) = (scratch("plain"), scratch("reused"));
    run(
        &script(case, &plain_dir),
        config(ReuseMode::None, case.fused),
    );
    let stats = run(
        &script(case, &reused_dir),
        config(ReuseMode::Hybrid, case.fused),
    );
    let (plain, reused) = (written(&plain_dir), written(&reused_dir));
    assert_eq!(plain.len(), 19, "{case:?}");
    for ((name, want), (_, got)) in plain.iter().zip(&reused) {
        assert_eq!(got, want, "{name} differs with partial reuse: {case:?}");
    }
    std::fs::remove_dir_all(&plain_dir).ok();
    std::fs::remove_dir_all(&reused_dir).ok();
    stats.reuse.map_or(0, |r| r.partial_hits)
}

#[test]
fn every_rewrite_applies_to_dense_data_and_changes_nothing() {
    for fused in [false, true] {
        let hits = check(&Case {
            rows: 40,
            cols: 6,
            added: 3,
            density: 1.0,
            specials: false,
            fused,
        });
        // First iteration: tsmm, two column aggregates, rbind and cbind products, the
        // column and row slices, t(X) %*% y over rbind; second: the slices again (the rest
        // hit in full).
        assert!(hits >= 6, "only {hits} partial hits (fused: {fused})");
    }
}

#[test]
fn steplm_inner_loop_takes_one_partial_hit_per_candidate() {
    let text = "X = rand(rows=500, cols=30, seed=1)
Y = rand(rows=500, cols=25, seed=2)
A = t(X) %*% X
s = sum(A)
for (i in 1:25) {
  Z = cbind(X, Y[, i])
  s = s + sum(t(Z) %*% Z)
}
print(s)
";
    let source = SourceFile::new("steplm.dml", text);
    let mut plain = Vec::new();
    Engine::new(config(ReuseMode::None, true))
        .run(&source, &ScriptArgs::default(), &mut plain)
        .unwrap();
    let mut reused = Vec::new();
    let report = Engine::new(config(ReuseMode::Partial, true))
        .run(&source, &ScriptArgs::default(), &mut reused)
        .unwrap();
    assert_eq!(reused, plain);
    let reuse = report.stats.reuse.expect("reuse statistics");
    assert_eq!(reuse.partial_hits, 25, "{reuse:?}");
}

/// With compiler assistance the product reads `X` and `dX`: a `Z` nothing else reads is never
/// made, one assigned to a variable still is; lineage is the same as without reuse.
#[test]
fn compiler_assistance_skips_an_unread_cbind_and_keeps_lineage() {
    let program = |z: &str| {
        format!(
            "X = rand(rows=200, cols=12, seed=1)
Y = rand(rows=200, cols=6, seed=2)
s = 0
for (i in 1:6) {{
  {z}
  s = s + sum(B)
}}
print(s)
"
        )
    };
    let inline = program("B = t(cbind(X, Y[, i])) %*% cbind(X, Y[, i])");
    let assigned = program("Z = cbind(X, Y[, i])\n  B = t(Z) %*% Z");
    for (text, cbinds) in [(&inline, 0), (&assigned, 6)] {
        let source = SourceFile::new("ca.dml", text);
        let run_with = |mode| {
            let mut out = Vec::new();
            let report = Engine::new(EngineConfig {
                lineage: true,
                ..config(mode, false)
            })
            .run(&source, &ScriptArgs::default(), &mut out)
            .unwrap_or_else(|e| panic!("{}", e.render(&source)));
            (out, report)
        };
        let (plain_out, plain) = run_with(ReuseMode::None);
        let (out, reused) = run_with(ReuseMode::Hybrid);
        assert_eq!(out, plain_out);
        assert_eq!(reused.lineage, plain.lineage);
        let count = |op: &str| {
            reused
                .stats
                .heavy_hitters
                .iter()
                .find(|h| h.opcode == op)
                .map_or(0, |h| h.count)
        };
        assert_eq!(count("cbind"), cbinds, "{text}");
        assert_eq!(count("tsmm_cbind"), 6, "{text}");
        // The first candidate computes and caches t(X) %*% X; the others reuse it.
        assert_eq!(reused.stats.reuse.unwrap().partial_hits, 6, "{text}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn partial_reuse_never_changes_a_result(
        rows in prop::sample::select(vec![1usize, 2, 3, 17, 300]),
        cols in prop::sample::select(vec![1usize, 2, 5]),
        added in prop::sample::select(vec![1usize, 2, 4]),
        density in prop::sample::select(vec![1.0f64, 0.4, 0.05]),
        specials in any::<bool>(),
        fused in any::<bool>(),
    ) {
        check(&Case { rows, cols, added, density, specials, fused });
    }
}
