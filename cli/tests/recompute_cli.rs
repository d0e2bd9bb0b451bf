//! `lafuse recompute LOG`: the value a `run --lineage` wrote beside `write(X, f)` as
//! `f.lineage` comes back printed as `print(toString(X))` prints it, or written to a file
//! equal to the script's own; a changed input file or a malformed log is an error, not a
//! value.

use std::path::PathBuf;
use std::process::Output;

mod command;
use command::{lafuse, ok};

/// An unseeded `rand` and a read of a file the test wrote: both replayed from the log.
const SCRIPT: &str = "\
X = rand(rows=5, cols=3, min=-1, max=1)
A = read(\"a.csv\", format=\"csv\")
Y = X %*% t(X) + sum(A)
write(Y, \"y.csv\", format=\"csv\")
print(toString(Y))
s = sum(Y * Y)
print(s)
l = lineage(s)
write(l, \"s.lineage\")
";

fn failed(out: Output) -> String {
    assert!(
        !out.status.success(),
        "succeeded:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stderr).unwrap()
}

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "lafuse-recompute-cli-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.csv"), "1,2\n3,4\n").unwrap();
        std::fs::write(dir.join("s.dml"), SCRIPT).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_written_value_recomputes_from_its_lineage_file() {
    let scratch = Scratch::new("value");
    let dir = &scratch.0;
    let printed = ok(lafuse(
        dir,
        &["run", "s.dml", "--lineage", "--fusion", "none"],
    ));
    // Printed as the script's `print(toString(Y))` printed it (the first lines of its output).
    let recomputed = ok(lafuse(dir, &["recompute", "y.csv.lineage"]));
    assert!(
        printed.starts_with(&recomputed),
        "recomputed:\n{recomputed}\nscript printed:\n{printed}"
    );
    assert_eq!(
        recomputed.lines().count(),
        6,
        "five rows and the line `print` ends with"
    );
    // Unfused, written to a file: the script's file, to the digit.
    ok(lafuse(
        dir,
        &[
            "recompute",
            "y.csv.lineage",
            "--fusion",
            "none",
            "--output",
            "y2.csv",
        ],
    ));
    assert_eq!(
        std::fs::read_to_string(dir.join("y2.csv")).unwrap(),
        std::fs::read_to_string(dir.join("y.csv")).unwrap()
    );
    // A scalar prints as `print` prints it; here from the log `lineage(s)` returned.
    let s = ok(lafuse(
        dir,
        &[
            "recompute",
            "s.lineage",
            "--fusion",
            "none",
            "--output",
            "-",
        ],
    ));
    assert!(
        printed.ends_with(&s),
        "recomputed {s}, script printed:\n{printed}"
    );
}

#[test]
fn a_changed_input_or_a_malformed_log_is_an_error() {
    let scratch = Scratch::new("errors");
    let dir = &scratch.0;
    ok(lafuse(dir, &["run", "s.dml", "--lineage"]));
    std::fs::write(dir.join("a.csv"), "1,2\n3,5\n").unwrap();
    let err = failed(lafuse(dir, &["recompute", "y.csv.lineage"]));
    assert!(
        err.starts_with("error: y.csv.lineage: recompute: the file 'a.csv' read by item (")
            && err.contains("cannot be reproduced"),
        "{err}"
    );
    std::fs::write(dir.join("bad.lineage"), "(1) (L) \"\" \"2·INT\"\n(2) (Q)\n").unwrap();
    let err = failed(lafuse(dir, &["recompute", "bad.lineage"]));
    assert_eq!(
        err,
        "error: bad.lineage: recompute: lineage log line 2: expected the kind as `(L)`, `(C)`, \
         `(I)`, `(P)` or `(D)`\n"
    );
    let err = failed(lafuse(dir, &["recompute", "missing.lineage"]));
    assert!(
        err.starts_with("error: cannot read the lineage log 'missing.lineage'"),
        "{err}"
    );
}
