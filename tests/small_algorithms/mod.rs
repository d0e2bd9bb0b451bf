//! The algorithms of `examples/algorithms/` at small sizes, for tests that run them all: each
//! with its generator's and its own arguments, reading the data its generator wrote.

use lafuse::{Engine, EngineConfig, ScriptArgs, SourceFile};
use std::path::{Path, PathBuf};

/// One algorithm at a small size.
pub struct Algorithm {
    pub id: &'static str,
    /// The generator's arguments (also given to the algorithm, which ignores what it does not
    /// read).
    pub gen_args: &'static [&'static str],
    /// The algorithm's own arguments (iterations kept small).
    pub args: &'static [&'static str],
    /// Scalars that cancel to near zero (a converged Newton residual), whose rounding under
    /// fusion no relative measure bounds.
    #[allow(dead_code)]
    pub cancelling: &'static [&'static str],
}

pub const ALGORITHMS: &[Algorithm] = &[
    Algorithm {
        id: "l2svm",
        gen_args: &["rows=200", "cols=10", "sp=1.0"],
        args: &["maxiter=4"],
        cancelling: &["g"],
    },
    Algorithm {
        id: "l2svm",
        gen_args: &["rows=200", "cols=20", "sp=0.1"],
        args: &["maxiter=4"],
        cancelling: &["g"],
    },
    Algorithm {
        id: "mlogreg",
        gen_args: &["rows=200", "cols=10", "sp=1.0"],
        args: &["moi=3", "mii=3"],
        cancelling: &[],
    },
    Algorithm {
        id: "glm",
        gen_args: &["rows=200", "cols=20", "sp=0.1"],
        args: &["moi=3", "mii=3"],
        cancelling: &[],
    },
    Algorithm {
        id: "kmeans",
        gen_args: &["rows=200", "cols=10", "sp=1.0"],
        args: &["maxi=3"],
        cancelling: &[],
    },
    Algorithm {
        id: "alscg",
        gen_args: &["rows=300", "cols=280", "sp=0.05"],
        args: &["maxi=2", "rank=4"],
        cancelling: &[],
    },
    Algorithm {
        id: "autoencoder",
        gen_args: &["rows=128", "cols=10", "sp=1.0"],
        args: &["H1=8", "batch=32"],
        cancelling: &[],
    },
];

impl Algorithm {
    /// Runs the generator into `dir` (created) and returns the algorithm's script and
    /// arguments reading what it wrote.
    pub fn generate(&self, dir: &Path) -> (SourceFile, ScriptArgs) {
        std::fs::create_dir_all(dir).unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/algorithms");
        let load = |path: PathBuf| {
            SourceFile::new(
                path.display().to_string(),
                std::fs::read_to_string(&path).unwrap(),
            )
        };
        let gen = load(root.join(format!("gen_{}.dml", self.id)));
        let mut pairs: Vec<String> = self.gen_args.iter().map(|s| s.to_string()).collect();
        pairs.push(format!("out={}", dir.display()));
        Engine::new(EngineConfig {
            fusion: None,
            ..EngineConfig::default()
        })
        .run(
            &gen,
            &ScriptArgs::parse_pairs(&pairs).unwrap(),
            &mut Vec::new(),
        )
        .unwrap_or_else(|e| panic!("gen_{}: {}", self.id, e.render(&gen)));
        let mut pairs: Vec<String> = self
            .gen_args
            .iter()
            .chain(self.args.iter())
            .map(|s| s.to_string())
            .collect();
        pairs.push(format!("X={}", dir.join("X").display()));
        pairs.push(format!("Y={}", dir.join("y").display()));
        (
            load(root.join(format!("{}.dml", self.id))),
            ScriptArgs::parse_pairs(&pairs).unwrap(),
        )
    }
}
