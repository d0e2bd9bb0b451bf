//! How the workspace's crates may depend on each other, checked on `Cargo.lock`. The embeddable
//! library depends on nothing only the command needs: an embedder of `lafuse`
//! builds neither the argument parser nor the bench harness's report writers (they live in
//! `lafuse-cli`, `cli/`).

use std::collections::{BTreeMap, BTreeSet};

/// What only the `lafuse` command and its bench harness use.
const CLI_ONLY: [&str; 5] = ["lafuse-cli", "clap", "csv", "indicatif", "plotters"];

/// Each package of `Cargo.lock` with the names of the packages it depends on. Packages that are
/// locked in several versions are merged by name, and the lock records the dev-dependencies of
/// workspace members too, so what is reachable here over-approximates the build.
fn lock_graph() -> BTreeMap<String, BTreeSet<String>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock");
    let text = std::fs::read_to_string(path).expect("Cargo.lock at the workspace root");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut in_deps = false;
    for line in text.lines() {
        let line = line.trim();
        if line == "[[package]]" {
            current = None;
            in_deps = false;
        } else if let Some(name) = line.strip_prefix("name = ") {
            let name = name.trim_matches('"').to_string();
            graph.entry(name.clone()).or_default();
            current = Some(name);
        } else if line == "dependencies = [" {
            in_deps = true;
        } else if in_deps && line == "]" {
            in_deps = false;
        } else if in_deps {
            // ` "name",` or ` "name version",` when several versions are locked.
            let dep = line.trim_end_matches(',').trim_matches('"');
            let dep = dep.split(' ').next().unwrap_or(dep).to_string();
            let package = current.clone().expect("dependencies follow a package name");
            graph.entry(package).or_default().insert(dep);
        }
    }
    graph
}

fn reachable(graph: &BTreeMap<String, BTreeSet<String>>, root: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![root.to_string()];
    while let Some(name) = todo.pop() {
        if seen.insert(name.clone()) {
            todo.extend(graph.get(&name).into_iter().flatten().cloned());
        }
    }
    seen
}

#[test]
fn the_library_depends_on_nothing_only_the_cli_needs() {
    let graph = lock_graph();
    let library = reachable(&graph, "lafuse");
    // The lock was read: the library reaches its own crates, and the command the CLI-only ones.
    assert!(library.contains("lafuse-compiler"), "{library:?}");
    let cli = reachable(&graph, "lafuse-cli");
    for name in CLI_ONLY.iter().skip(1) {
        assert!(cli.contains(*name), "lafuse-cli does not reach {name}");
    }
    let offending: Vec<&str> = CLI_ONLY
        .into_iter()
        .filter(|name| library.contains(*name))
        .collect();
    assert!(
        offending.is_empty(),
        "the lafuse library depends on {offending:?}, which only the command needs; move the \
         code that uses them into lafuse-cli (cli/)"
    );
}

/// Architecture invariant: dependencies between lafuse's own crates point one way. `core`
/// depends on none of them; `compiler` and `runtime` on `core` only (the compiler knows nothing
/// of matrix data or code generation, the runtime nothing of planning); `skeletons` on
/// `runtime` and `core`; `codegen` on those four; the library on all five; nothing on the
/// command.
#[test]
fn crates_depend_one_way() {
    let graph = lock_graph();
    let ours = |name: &str| -> BTreeSet<String> {
        reachable(&graph, name)
            .into_iter()
            .filter(|d| d != name && d.starts_with("lafuse"))
            .collect()
    };
    let set =
        |names: &[&str]| -> BTreeSet<String> { names.iter().map(|n| n.to_string()).collect() };
    assert_eq!(ours("lafuse-core"), set(&[]));
    assert_eq!(ours("lafuse-compiler"), set(&["lafuse-core"]));
    assert_eq!(ours("lafuse-runtime"), set(&["lafuse-core"]));
    assert_eq!(
        ours("lafuse-skeletons"),
        set(&["lafuse-core", "lafuse-runtime"])
    );
    assert_eq!(
        ours("lafuse-codegen"),
        set(&[
            "lafuse-compiler",
            "lafuse-core",
            "lafuse-runtime",
            "lafuse-skeletons"
        ])
    );
    assert_eq!(
        ours("lafuse"),
        set(&[
            "lafuse-codegen",
            "lafuse-compiler",
            "lafuse-core",
            "lafuse-runtime",
            "lafuse-skeletons"
        ])
    );
}
