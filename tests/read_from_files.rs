//! Data read from files runs like data made in place (issue 23).
//!
//! Every corpus script (`tests/corpus/*.dml`) that makes matrix data in place, and every
//! algorithm of `examples/algorithms/`, is run twice over the same data: once making it in
//! place, once reading it from files that a first script wrote, in each of four forms:
//!
//! | form | written with | read with |
//! |---|---|---|
//! | `csv` | `write(V, P, format="csv")` | `read(P)` (format, size and nnz from the `.mtd`) |
//! | `csv-no-mtd` | the same, then the `.mtd` deleted | `read(P, format="csv")` (nothing known before the read) |
//! | `binary` | `write(V, P, format="binary")` | `read(P)` |
//! | `mm` | `write(V, P, format="mm")`, then the `.mtd` deleted (as SystemDS writes it) | `read(P, format="mm")` (size from the header) |
//!
//! Both runs must print the same text, byte for byte (numbers must survive the round trip
//! through every writer and reader), except lines whose first word is `time_ms` (the
//! algorithms' clocks). And the same fused operators must run: the distinct operators
//! (template and CPlan structural hash, from [`Stats::fused_operators`]) with their execution
//! counts, those of the in-place run being those of the writing script and of the reading run
//! together (the algorithms' generators fuse their arithmetic; the corpus's data making runs
//! no fused operator).
//!
//! No form is skipped for any script: every input survives every form. (A cell holding `-0.0`
//! would not: MatrixMarket lists non-zeros only, so it reads back as `0.0`; no input has one.)
//! `io_roundtrip` writes and reads its own files under `/tmp/lafuse_corpus_rt_*` in every run,
//! as in `tests/corpus.rs`: the corpus tests here take turns with it, and cargo runs test
//! binaries one after another.
//!
//! Corpus scripts: which expressions are "data made in place" is decided from the parsed
//! script by one rule, [`rewrite::rewrite`]: outermost calls of `rand`, `matrix`, `seq` and
//! `as.matrix` in top-level statements whose arguments read only literals, script arguments
//! and scalar variables. The rewritten script reads them all at its top. Scripts with no such
//! call are listed in [`NO_INPUTS`] with the reason.
//!
//! A second corpus test puts each `read(...)` where its data was made, inside the expression
//! (the statement's block is then planned with what the file states): the forms that state
//! rows, columns and non-zeros (`csv` by its `.mtd`, `binary` and `mm` by their headers) must
//! plan alike.
//!
//! Algorithms: the algorithm script as it is, reading the files its `gen_*.dml` wrote; in
//! place, the generator's statements inlined instead of the reads ([`rewrite::inline_generator`]),
//! at the small sizes of [`ALGORITHMS`].
//!
//! Everything runs in this process on one engine per test (the default configuration: `gen`
//! on the default backend), so each fused operator is compiled once.
//! `LAFUSE_SHOW_REWRITES=1 cargo test --test read_from_files -- --nocapture` prints every
//! script run, its output and its fused operators.

mod fused_at_once;
#[path = "read_from_files/rewrite.rs"]
mod rewrite;

use lafuse::{Engine, ScriptArgs, SourceFile, Stats};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The forms the data is read in (see the table above).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    Csv,
    CsvWithoutMetadata,
    Binary,
    MatrixMarket,
}

const FORMS: [Form; 4] = [
    Form::Csv,
    Form::CsvWithoutMetadata,
    Form::Binary,
    Form::MatrixMarket,
];

/// The forms read without their `.mtd`.
const WITHOUT_METADATA: [Form; 2] = [Form::CsvWithoutMetadata, Form::MatrixMarket];

impl Form {
    fn name(self) -> &'static str {
        match self {
            Form::Csv => "csv",
            Form::CsvWithoutMetadata => "csv-no-mtd",
            Form::Binary => "binary",
            Form::MatrixMarket => "mm",
        }
    }

    /// The `format=` of `write` (and of the algorithms' `fmt` argument).
    fn format(self) -> &'static str {
        match self {
            Form::Csv | Form::CsvWithoutMetadata => "csv",
            Form::Binary => "binary",
            Form::MatrixMarket => "mm",
        }
    }

    fn keeps_metadata(self) -> bool {
        !WITHOUT_METADATA.contains(&self)
    }

    /// The directory under the data directory where this form's files go.
    fn dir(self, data: &Path) -> PathBuf {
        data.join(self.name())
    }

    /// The `read(...)` of a file in this form, with `format=` where no `.mtd` says it.
    fn read_call(self, path: &Path) -> String {
        let p = dml_path(path);
        if self.keeps_metadata() {
            format!("read(\"{p}\")")
        } else {
            format!("read(\"{p}\", format=\"{}\")", self.format())
        }
    }

    fn write_stmt(self, var: &str, path: &Path) -> String {
        format!(
            "write({var}, \"{}\", format=\"{}\")",
            dml_path(path),
            self.format()
        )
    }
}

/// A path as a DML string literal's content.
fn dml_path(path: &Path) -> String {
    let p = path.display().to_string();
    assert!(
        !p.contains(['"', '\\', '\n']),
        "a path a DML literal cannot hold: {p}"
    );
    p
}

/// Deletes the `.mtd` sidecars of the files of `forms` under `data`.
fn drop_metadata(data: &Path, forms: &[Form]) {
    for form in forms {
        let dir = form.dir(data);
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let p = entry.unwrap().path();
            if p.extension().is_some_and(|e| e == "mtd") {
                std::fs::remove_file(&p).unwrap();
            }
        }
    }
}

/// A scratch directory under the system's temporary directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "lafuse-read-from-files-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What one run printed and which fused operators it ran.
struct Run {
    output: String,
    stats: Stats,
}

/// Fused operators executed, by (template, structural hash).
type Operators = BTreeMap<(String, String), u64>;

impl Run {
    fn operators(&self) -> Operators {
        self.stats
            .fused_operators
            .iter()
            .map(|op| ((op.template.clone(), op.hash.clone()), op.executions))
            .collect()
    }

    /// The output without the lines that print a time.
    fn timeless_output(&self) -> String {
        self.output
            .lines()
            .filter(|l| l.split_whitespace().next() != Some("time_ms"))
            .map(|l| format!("{l}\n"))
            .collect()
    }
}

fn run(engine: &Engine, name: &str, text: &str, args: &ScriptArgs) -> Result<Run, String> {
    let show = std::env::var_os("LAFUSE_SHOW_REWRITES").is_some();
    if show {
        eprintln!("=== {name}\n{text}");
    }
    let source = SourceFile::new(name, text);
    let mut out = Vec::new();
    match engine.run(&source, args, &mut out) {
        Ok(report) => {
            let listed: u64 = report
                .stats
                .fused_operators
                .iter()
                .map(|o| o.executions)
                .sum();
            assert_eq!(
                listed, report.stats.fused_operators_executed,
                "{name}: the operators listed in the statistics do not add up to those executed"
            );
            if show {
                eprintln!(
                    "--- output\n{}--- fused operators\n{:?}",
                    String::from_utf8_lossy(&out),
                    report.stats.fused_operators
                );
            }
            Ok(Run {
                output: String::from_utf8_lossy(&out).into_owned(),
                stats: report.stats,
            })
        }
        Err(e) => Err(format!(
            "{name} failed: {}\n--- script ---\n{text}",
            e.render(&source)
        )),
    }
}

fn engine() -> Engine {
    Engine::new(fused_at_once::config())
}

fn args(pairs: &[String]) -> ScriptArgs {
    ScriptArgs::parse_pairs(pairs).expect("well-formed script arguments")
}

/// `a` and `b` added.
fn sum(a: &Operators, b: &Operators) -> Operators {
    let mut out = a.clone();
    for (k, v) in b {
        *out.entry(k.clone()).or_insert(0) += v;
    }
    out
}

/// The first line where `a` and `b` differ, for a failure message.
fn first_difference(a: &str, b: &str) -> String {
    let (al, bl): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    for i in 0..al.len().max(bl.len()) {
        if al.get(i) != bl.get(i) {
            return format!(
                "line {}: in place `{}`, read `{}`",
                i + 1,
                al.get(i).unwrap_or(&"<none>"),
                bl.get(i).unwrap_or(&"<none>")
            );
        }
    }
    "no line differs".into()
}

/// What differs between the in-place run and the run reading the files the writer wrote;
/// empty where nothing does. `deliberate`: the reason the fused operators differ (see
/// [`DIFFERENT_OPERATORS`]); then the same templates must run as often, and the operators must
/// indeed differ (else the entry is stale).
fn differences(in_place: &Run, writer: &Run, read: &Run, deliberate: Option<&str>) -> Vec<String> {
    let mut found = Vec::new();
    let (expected, actual) = (in_place.timeless_output(), read.timeless_output());
    if expected != actual {
        found.push(format!(
            "output differs: {}",
            first_difference(&expected, &actual)
        ));
    }
    let expected = in_place.operators();
    let actual = sum(&writer.operators(), &read.operators());
    match deliberate {
        None if expected != actual => found.push(format!(
            "fused operators differ: in place only [{}], writer + read only [{}]",
            only_in(&expected, &actual),
            only_in(&actual, &expected)
        )),
        None => {}
        Some(_) if expected == actual => found.push(
            "runs the same fused operators, though DIFFERENT_OPERATORS lists it: remove the entry"
                .into(),
        ),
        Some(why) => {
            let (expected, actual) = (templates(&expected), templates(&actual));
            if expected != actual {
                found.push(format!(
                    "fused templates differ: in place {expected:?}, writer + read {actual:?} \
                     (operators may differ only as DIFFERENT_OPERATORS says: {why})"
                ));
            }
        }
    }
    let executed = writer.stats.fused_operators_executed + read.stats.fused_operators_executed;
    if in_place.stats.fused_operators_executed != executed {
        found.push(format!(
            "fused operators executed: in place {}, writer + read {executed}",
            in_place.stats.fused_operators_executed
        ));
    }
    if in_place.stats.fusion_skipped.len() != read.stats.fusion_skipped.len() {
        found.push(format!(
            "blocks fusion skipped for unknown sizes: in place {:?}, read {:?}",
            in_place.stats.fusion_skipped, read.stats.fusion_skipped
        ));
    }
    found
}

/// The operators of `m` that `other` does not run as often.
fn only_in(m: &Operators, other: &Operators) -> String {
    m.iter()
        .filter(|(k, v)| other.get(*k) != Some(v))
        .map(|((t, h), n)| format!("{t} {h} x{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Executions per template.
fn templates(ops: &Operators) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for ((template, _), n) in ops {
        *out.entry(template.clone()).or_insert(0) += n;
    }
    out
}

/// Corpus scripts whose fused operators differ from file to in place, deliberately, and why.
/// The same templates must still run as often, and the output must be the same.
/// (None since scalar values are given to size inference only, never inlined into plans: a
/// block whose sizes depend on a scalar reads it as a scalar input either way.)
const DIFFERENT_OPERATORS: &[(&str, &str)] = &[];

/// Corpus scripts that make no matrix data in place by the rule of [`rewrite::rewrite`], and
/// why.
const NO_INPUTS: &[(&str, &str)] = &[
    (
        "distributions",
        "no matrix at all: distribution functions of scalars",
    ),
    ("for_fractional", "no matrix at all: scalar loops"),
    ("for_large_integers", "no matrix at all: scalar loops"),
    (
        "functions_param_types",
        "no matrix at all: lists and scalars through typed parameters",
    ),
    (
        "io_read",
        "reads every matrix it uses from files already (tests/corpus/data)",
    ),
    ("logic_shortcircuit", "no matrix at all: scalar logic"),
    ("print_format", "no matrix at all: printing of scalars"),
    (
        "reorg_sample",
        "its matrices are drawn by sample(), a generator the rule does not read from files",
    ),
    ("scalar_arith", "no matrix at all: scalar arithmetic"),
    (
        "scalar_compare_logic",
        "no matrix at all: scalar comparisons",
    ),
    (
        "strings_append",
        "strings, and one matrix made from a list of scalars (as.matrix), not by a generator",
    ),
    (
        "strings_compare",
        "no matrix at all: string comparisons and concatenation",
    ),
    ("unary_scalar", "no matrix at all: built-ins on scalars"),
];

/// Held while a script that writes files under fixed names runs (`io_roundtrip`), so that the
/// two corpus tests do not run it at the same time.
fn fixed_paths(script: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    (script == "io_roundtrip").then(|| LOCK.lock().unwrap_or_else(|e| e.into_inner()))
}

fn corpus_scripts() -> Vec<PathBuf> {
    let mut scripts: Vec<PathBuf> = std::fs::read_dir("tests/corpus")
        .expect("tests/corpus")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "dml"))
        .collect();
    scripts.sort();
    scripts
}

fn corpus_args(script: &Path) -> Vec<String> {
    std::fs::read_to_string(script.with_extension("args"))
        .map(|s| {
            s.lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Runs one corpus script in place and from files in every form; returns what differs.
fn check_corpus_script(engine: &Engine, script: &Path, scratch: &Path) -> Vec<String> {
    let name = script.file_stem().unwrap().to_string_lossy().into_owned();
    let text = std::fs::read_to_string(script).unwrap();
    let source = SourceFile::new(script.display().to_string(), text.clone());
    let rewritten = rewrite::rewrite(&source);
    let script_args = args(&corpus_args(script));
    let data = scratch.join(&name);
    let file = |form: Form, input: &rewrite::Input| form.dir(&data).join(&input.var);
    let mut failures = Vec::new();
    let mut fail = |what: String| failures.push(format!("{name}: {what}"));

    let in_place = match run(engine, &name, &text, &script_args) {
        Ok(r) => r,
        Err(e) => {
            fail(e);
            return failures;
        }
    };
    let writer_text = rewritten.writer(|input| {
        FORMS
            .iter()
            .map(|&f| f.write_stmt(&input.var, &file(f, input)))
            .collect::<Vec<_>>()
            .join("\n")
    });
    let writer = match run(
        engine,
        &format!("{name} (writer)"),
        &writer_text,
        &script_args,
    ) {
        Ok(r) => r,
        Err(e) => {
            fail(e);
            return failures;
        }
    };
    drop_metadata(&data, &WITHOUT_METADATA);
    for form in FORMS {
        let reader_text = rewritten.reader(|input| form.read_call(&file(form, input)));
        let label = format!("{name} ({})", form.name());
        let deliberate = DIFFERENT_OPERATORS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, why)| *why);
        match run(engine, &label, &reader_text, &script_args) {
            Ok(read) => {
                for d in differences(&in_place, &writer, &read, deliberate) {
                    fail(format!("{}: {d}", form.name()));
                }
            }
            Err(e) => fail(format!("{}: {e}", form.name())),
        }
    }
    failures
}

/// Every corpus script that makes matrix data in place prints the same and runs the same fused
/// operators when it reads that data from files, in each form.
#[test]
fn corpus_scripts_reading_their_data_from_files_run_as_in_place() {
    let scratch = Scratch::new("corpus");
    let engine = engine();
    let mut skipped = Vec::new();
    let mut failures = Vec::new();
    let mut checked = 0;
    for script in corpus_scripts() {
        let name = script.file_stem().unwrap().to_string_lossy().into_owned();
        let source = SourceFile::new(
            script.display().to_string(),
            std::fs::read_to_string(&script).unwrap(),
        );
        if rewrite::rewrite(&source).inputs.is_empty() {
            skipped.push(name);
            continue;
        }
        let _fixed = fixed_paths(&name);
        failures.extend(check_corpus_script(&engine, &script, &scratch.0));
        checked += 1;
    }
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
    let listed: Vec<&str> = NO_INPUTS.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        skipped, listed,
        "the corpus scripts without data made in place are not those NO_INPUTS lists"
    );
    assert!(checked > 40, "only {checked} corpus scripts checked");
}

/// Reads inside expressions are planned in the statement's own block with what the file
/// states: the forms that state rows, columns and non-zeros (`csv` through its `.mtd`, `binary`
/// and `mm` through their headers, their `.mtd` deleted here) must give the same plans, so
/// the same fused operators and output. (`csv-no-mtd` states nothing, so fusion leaves those
/// statements' operations out, and `--stats` says so; the reads at the top in the test above
/// are how a script avoids that.)
#[test]
fn corpus_reads_inside_expressions_plan_alike_from_metadata_and_headers() {
    let scratch = Scratch::new("inline");
    let engine = engine();
    let forms = [Form::Csv, Form::Binary, Form::MatrixMarket];
    let mut failures = Vec::new();
    for script in corpus_scripts() {
        let name = script.file_stem().unwrap().to_string_lossy().into_owned();
        let source = SourceFile::new(
            script.display().to_string(),
            std::fs::read_to_string(&script).unwrap(),
        );
        let rewritten = rewrite::rewrite(&source);
        if rewritten.inputs.is_empty() {
            continue;
        }
        let _fixed = fixed_paths(&name);
        let script_args = args(&corpus_args(&script));
        let data = scratch.0.join(&name);
        let file = |form: Form, input: &rewrite::Input| form.dir(&data).join(&input.var);
        let writer = rewritten.writer(|input| {
            forms
                .iter()
                .map(|&f| f.write_stmt(&input.var, &file(f, input)))
                .collect::<Vec<_>>()
                .join("\n")
        });
        if let Err(e) = run(&engine, &format!("{name} (writer)"), &writer, &script_args) {
            failures.push(e);
            continue;
        }
        drop_metadata(&data, &[Form::Binary, Form::MatrixMarket]);
        let runs: Vec<(Form, Result<Run, String>)> = forms
            .iter()
            .map(|&form| {
                let text = rewritten.inline_reader(|input| {
                    let p = dml_path(&file(form, input));
                    match form {
                        Form::MatrixMarket => format!("read(\"{p}\", format=\"mm\")"),
                        _ => format!("read(\"{p}\")"),
                    }
                });
                let label = format!("{name} (inline, {})", form.name());
                (form, run(&engine, &label, &text, &script_args))
            })
            .collect();
        let (_, Ok(baseline)) = &runs[0] else {
            failures.push(runs[0].1.as_ref().err().cloned().unwrap_or_default());
            continue;
        };
        for (form, r) in &runs[1..] {
            match r {
                Ok(r) => {
                    if r.output != baseline.output {
                        failures.push(format!(
                            "{name}: {}: output differs from csv's: {}",
                            form.name(),
                            first_difference(&baseline.output, &r.output)
                        ));
                    }
                    let (ours, theirs) = (r.operators(), baseline.operators());
                    if ours != theirs {
                        failures.push(format!(
                            "{name}: {}: fused operators differ: these only [{}], csv's only [{}]",
                            form.name(),
                            only_in(&ours, &theirs),
                            only_in(&theirs, &ours)
                        ));
                    }
                }
                Err(e) => failures.push(e.clone()),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The algorithms, with their generators' and their own arguments: small sizes, each on dense
/// and on sparse data, few iterations. ALS-CG has more than 256 rows and columns, so that its
/// update rules run as Outer operators.
const ALGORITHMS: &[(&str, &[&str], &[&str])] = &[
    ("l2svm", &["rows=300", "cols=10", "sp=1.0"], &["maxiter=5"]),
    ("l2svm", &["rows=300", "cols=20", "sp=0.1"], &["maxiter=5"]),
    (
        "mlogreg",
        &["rows=300", "cols=10", "sp=1.0"],
        &["moi=3", "mii=3"],
    ),
    (
        "mlogreg",
        &["rows=300", "cols=20", "sp=0.1"],
        &["moi=3", "mii=3"],
    ),
    (
        "glm",
        &["rows=300", "cols=10", "sp=1.0"],
        &["moi=3", "mii=3"],
    ),
    (
        "glm",
        &["rows=300", "cols=20", "sp=0.1"],
        &["moi=3", "mii=3"],
    ),
    ("kmeans", &["rows=300", "cols=10", "sp=1.0"], &["maxi=3"]),
    ("kmeans", &["rows=300", "cols=20", "sp=0.2"], &["maxi=3"]),
    (
        "alscg",
        &["rows=300", "cols=280", "sp=1.0"],
        &["maxi=2", "rank=4"],
    ),
    (
        "alscg",
        &["rows=300", "cols=280", "sp=0.05"],
        &["maxi=2", "rank=4"],
    ),
    (
        "autoencoder",
        &["rows=128", "cols=10", "sp=1.0"],
        &["H1=8", "batch=32"],
    ),
    (
        "autoencoder",
        &["rows=128", "cols=20", "sp=0.2"],
        &["H1=8", "batch=32"],
    ),
];

fn check_algorithm(
    engine: &Engine,
    id: &str,
    gen_args: &[&str],
    alg_args: &[&str],
    scratch: &Path,
) -> Vec<String> {
    let load = |path: String| SourceFile::new(&path, std::fs::read_to_string(&path).unwrap());
    let alg = load(format!("examples/algorithms/{id}.dml"));
    let gen = load(format!("examples/algorithms/gen_{id}.dml"));
    let data = scratch.join(id);
    let inlined = rewrite::inline_generator(&alg, &gen, |var, file| {
        FORMS
            .iter()
            .map(|&f| f.write_stmt(var, &f.dir(&data).join(file)))
            .collect::<Vec<_>>()
            .join("\n")
    });
    let to_strings = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut failures = Vec::new();
    let label = format!("{id} ({})", gen_args.join(" "));
    let mut fail = |what: String| failures.push(format!("{label}: {what}"));

    let mut both = to_strings(gen_args);
    both.extend(to_strings(alg_args));
    let in_place = match run(engine, id, &inlined.in_place, &args(&both)) {
        Ok(r) => r,
        Err(e) => {
            fail(e);
            return failures;
        }
    };
    let writer = match run(
        engine,
        &format!("gen_{id} (writer)"),
        &inlined.writer,
        &args(&to_strings(gen_args)),
    ) {
        Ok(r) => r,
        Err(e) => {
            fail(e);
            return failures;
        }
    };
    drop_metadata(&data, &WITHOUT_METADATA);
    for form in FORMS {
        let mut read_args = to_strings(alg_args);
        read_args.push(format!("fmt={}", form.format()));
        for (arg, file) in &inlined.read_args {
            read_args.push(format!("{arg}={}", form.dir(&data).join(file).display()));
        }
        match run(
            engine,
            &format!("{id} ({})", form.name()),
            &alg.text,
            &args(&read_args),
        ) {
            Ok(read) => {
                for d in differences(&in_place, &writer, &read, None) {
                    fail(format!("{}: {d}", form.name()));
                }
            }
            Err(e) => fail(format!("{}: {e}", form.name())),
        }
    }
    failures
}

/// Every algorithm prints the same and runs the same fused operators reading the files its
/// generator wrote, in each form, as with the generator's statements in place of its reads.
#[test]
fn algorithms_reading_their_data_from_files_run_as_in_place() {
    let scratch = Scratch::new("algorithms");
    let engine = engine();
    let mut failures = Vec::new();
    for (k, (id, gen_args, alg_args)) in ALGORITHMS.iter().enumerate() {
        let data = scratch.0.join(k.to_string());
        failures.extend(check_algorithm(&engine, id, gen_args, alg_args, &data));
    }
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
