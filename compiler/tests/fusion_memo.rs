//! Golden memo tables and selections: every `tests/fixtures/fusion/*.dml` (one basic block;
//! its inputs declared in header lines `# input NAME ROWS COLS NNZ`) is compiled, explored and
//! selected, and the result compared with the `.memo.txt` file next to it: the DAG (explain
//! text, for hop ids), the memo table after exploration without dominance pruning (the
//! paper's Figure 6 "w/ basic pruning"), the memo table with heuristic pruning, and the
//! fuse-all and fuse-no-redundancy selections. Run with `LAFUSE_BLESS=1` to regenerate, then
//! review the diff.
//!
//! The tests below the golden check pin, independently of the text, the facts that were
//! verified by hand against the paper and the reference (see each test's comment).

mod hops_common;
use hops_common::*;

use lafuse_compiler::fusion::{
    explore, plan_fusion, ExploreOptions, FuseAll, FuseNoRedundancy, FusionDag, MemoTable,
    PlanSelector, TemplateKind,
};
use lafuse_compiler::hops::{explain_text, BlockInputs, HopDag, HopId, OpKind};
use std::path::{Path, PathBuf};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fusion")
}

/// The inputs declared by `# input NAME ROWS COLS NNZ` lines.
fn declared_inputs(script: &str) -> BlockInputs {
    let mut list = Vec::new();
    for line in script.lines() {
        let Some(rest) = line.trim().strip_prefix("# input ") else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        assert_eq!(f.len(), 4, "bad input line {line:?}");
        let n = |s: &str| s.parse::<u64>().unwrap();
        list.push((f[0], n(f[1]), n(f[2]), n(f[3])));
    }
    matrices(&list)
}

fn fixture_dag(name: &str) -> HopDag {
    let text = std::fs::read_to_string(fixture_dir().join(name)).unwrap();
    dag(&text, &declared_inputs(&text))
}

fn render(d: &HopDag) -> String {
    let view = FusionDag::new(d).unwrap();
    let mut out = String::from("== dag\n");
    out.push_str(&explain_text(d));
    out.push_str("\n== memo (explored, basic pruning)\n");
    out.push_str(&explore(&view, &ExploreOptions::default()).explain(d));
    let heuristic = ExploreOptions {
        prune_dominated: true,
        ..ExploreOptions::default()
    };
    out.push_str("\n== memo (explored, dominance pruning)\n");
    out.push_str(&explore(&view, &heuristic).explain(d));
    let selectors: [&dyn PlanSelector; 2] = [&FuseAll, &FuseNoRedundancy];
    for s in selectors {
        let plan = plan_fusion(d, s).unwrap();
        out.push_str(&format!("\n== {}\n", s.name()));
        out.push_str(&plan.selection.explain());
    }
    out
}

#[test]
fn memo_tables_match_fixtures() {
    let mut scripts: Vec<_> = std::fs::read_dir(fixture_dir())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "dml"))
        .collect();
    scripts.sort();
    assert!(scripts.len() >= 7);
    let bless = std::env::var_os("LAFUSE_BLESS").is_some_and(|v| v == "1");
    let mut failures = Vec::new();
    for script in scripts {
        let name = script.file_name().unwrap().to_str().unwrap().to_string();
        let actual = render(&fixture_dag(&name));
        let path = script.with_extension("memo.txt");
        if bless {
            std::fs::write(&path, &actual).unwrap();
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!(
                "{} differs (run with LAFUSE_BLESS=1 to update)\n--- expected\n{expected}\n--- actual\n{actual}",
                path.display()
            )),
            Err(_) => failures.push(format!("{} is missing (run with LAFUSE_BLESS=1)", path.display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The hop of the DAG whose display name is `name` (exactly one).
fn find(d: &HopDag, name: &str) -> HopId {
    let hits: Vec<HopId> = lafuse_compiler::hops::linearize(d)
        .into_iter()
        .filter(|&h| d.hop(h).op.display_name() == name)
        .collect();
    assert_eq!(hits.len(), 1, "{name}: {hits:?}");
    hits[0]
}

fn explored(d: &HopDag) -> MemoTable {
    explore(&FusionDag::new(d).unwrap(), &ExploreOptions::default())
}

fn entries(memo: &MemoTable, h: HopId) -> Vec<String> {
    memo.group(h).iter().map(|e| e.to_string()).collect()
}
