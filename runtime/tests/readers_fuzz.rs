//! Every file reader (CSV, text, MatrixMarket, binary, and the `.mtd` sidecar) meets byte
//! mutations of valid files without a panic: it reads a matrix (a mutation may still be a valid
//! file) or returns an error. Each property runs a fixed seed in CI; `PROPTEST_RNG_SEED=N` and
//! `PROPTEST_CASES=N` explore further (a 10-minute run: `PROPTEST_CASES=200000`).

use lafuse_runtime::io::{metadata_path, read_matrix, write_matrix, CsvOptions, FileFormat};
use lafuse_runtime::Matrix;
use proptest::prelude::*;
use std::path::PathBuf;

/// One mutation of a file's bytes.
#[derive(Clone, Debug)]
enum Mutation {
    Flip {
        at: usize,
        bit: u8,
    },
    Set {
        at: usize,
        byte: u8,
    },
    Insert {
        at: usize,
        bytes: Vec<u8>,
    },
    Delete {
        at: usize,
        len: usize,
    },
    Truncate {
        at: usize,
    },
    /// A digit string put in place (huge counts in headers and metadata).
    Number {
        at: usize,
        digits: String,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Set { at, byte }),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..12))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        (any::<usize>(), 1usize..16).prop_map(|(at, len)| Mutation::Delete { at, len }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        (
            any::<usize>(),
            prop_oneof![
                Just("4611686018427387904".to_string()),
                Just("18446744073709551615".to_string()),
                Just("2147483648".to_string()),
                Just("-1".to_string()),
                Just("1e300".to_string()),
                "[0-9]{1,20}"
            ]
        )
            .prop_map(|(at, digits)| Mutation::Number { at, digits }),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let len = bytes.len();
    let pos = |at: usize| if len == 0 { 0 } else { at % (len + 1) };
    match m {
        Mutation::Flip { at, bit } if len > 0 => bytes[at % len] ^= 1 << bit,
        Mutation::Set { at, byte } if len > 0 => bytes[at % len] = *byte,
        Mutation::Insert { at, bytes: b } => {
            let p = pos(*at);
            bytes.splice(p..p, b.iter().copied());
        }
        Mutation::Delete { at, len: n } => {
            let p = pos(*at);
            let end = (p + n).min(len);
            bytes.drain(p..end);
        }
        Mutation::Truncate { at } => bytes.truncate(pos(*at)),
        Mutation::Number { at, digits } => {
            let p = pos(*at);
            let end = (p + digits.len()).min(len);
            bytes.splice(p..end, digits.bytes());
        }
        _ => {}
    }
}

fn scratch() -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "lafuse-readers-fuzz-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A small matrix with every kind of value, dense or sparse.
fn matrix() -> impl Strategy<Value = Matrix> {
    (1usize..8, 2usize..8, any::<bool>(), any::<u64>()).prop_map(|(r, c, sparse, seed)| {
        let vals: Vec<f64> = (0..r * c)
            .map(|i| {
                let k = (seed.wrapping_add(i as u64 * 7919)) % 9;
                match k {
                    // Mostly zeros: stored (and written) as CSR.
                    0..=6 if sparse => 0.0,
                    2 => f64::NAN,
                    3 => f64::INFINITY,
                    4 => -1.5e-300,
                    _ => k as f64 - 3.25,
                }
            })
            .collect();
        // In the format its values call for (CSR when mostly zeros), so that the binary
        // format's CSR layout is written and mutated too.
        Matrix::from_dense_values(r, c, vals)
            .and_then(Matrix::examine_and_convert)
            .unwrap()
    })
}

fn formats() -> impl Strategy<Value = FileFormat> {
    prop_oneof![
        Just(FileFormat::Csv),
        Just(FileFormat::Text),
        Just(FileFormat::MatrixMarket),
        Just(FileFormat::Binary),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Mutations of the data file, of its `.mtd`, or both: never a panic.
    #[test]
    fn mutated_files_are_read_or_refused_never_a_panic(
        m in matrix(),
        format in formats(),
        header in any::<bool>(),
        data_mutations in prop::collection::vec(mutation(), 0..4),
        meta_mutations in prop::collection::vec(mutation(), 0..3),
        declared_format in any::<bool>(),
    ) {
        let dir = scratch();
        let path = dir.join("m");
        let csv = CsvOptions { header, sep: ",".into() };
        write_matrix(&m, &path, format, &csv).unwrap();
        let mut data = std::fs::read(&path).unwrap();
        for mu in &data_mutations {
            apply(&mut data, mu);
        }
        std::fs::write(&path, &data).unwrap();
        let meta = metadata_path(&path);
        let mut md = std::fs::read(&meta).unwrap();
        for mu in &meta_mutations {
            apply(&mut md, mu);
        }
        std::fs::write(&meta, &md).unwrap();
        let given = declared_format.then_some(format);
        let outcome = std::panic::catch_unwind(|| {
            if let Ok(read) = read_matrix(&path, given, None) {
                read.validate().expect("a matrix read from a file keeps the invariants");
            }
        });
        let _ = std::fs::remove_dir_all(&dir);
        prop_assert!(
            outcome.is_ok(),
            "{format:?}: data {data_mutations:?}, metadata {meta_mutations:?}"
        );
    }
}

/// Headers and metadata that declare more than any matrix may hold (2^62 rows, 3e9 rows in a
/// 60-byte file: beyond `MAX_DIM`, SystemDS's `int` limit) are errors before anything is
/// allocated for them.
#[test]
fn declared_sizes_beyond_the_limits_are_errors_not_aborts() {
    let dir = scratch();
    let cases: [(&str, &str, &str); 4] = [
        (
            "empty.csv",
            "",
            r#"{"data_type": "matrix", "rows": 4611686018427387904, "cols": 1, "format": "csv"}"#,
        ),
        (
            "huge.mtx",
            "%%MatrixMarket matrix coordinate real general\n3000000000 2 1\n1 1 5\n",
            r#"{"data_type": "matrix", "format": "mm"}"#,
        ),
        (
            "huge.txt",
            "2000000000 1 5\n",
            r#"{"data_type": "matrix", "rows": 3000000000, "cols": 2, "format": "text"}"#,
        ),
        (
            "wide.csv",
            "1,2\n",
            r#"{"data_type": "matrix", "rows": 1, "cols": 4611686018427387904, "format": "csv"}"#,
        ),
    ];
    for (name, data, meta) in cases {
        let path = dir.join(name);
        std::fs::write(&path, data).unwrap();
        std::fs::write(metadata_path(&path), meta).unwrap();
        let outcome = std::panic::catch_unwind(|| read_matrix(&path, None, None).map(|_| ()));
        match outcome {
            Ok(Err(_)) => {}
            Ok(Ok(())) => panic!("{name}: read a matrix larger than the limits"),
            Err(_) => panic!("{name}: panicked"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
