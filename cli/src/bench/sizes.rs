//! Problem sizes per scale (`full`, `quick`, `tiny`), bounded by the available memory, and the
//! repetitions each suite runs. The chosen sizes are printed and written into the report.

use serde::Serialize;

/// How large a benchmark run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// The paper's shapes, as far as memory and a ~30-minute budget allow.
    Full,
    /// A run of a few minutes: smaller sizes, `none` and `gen` only.
    Quick,
    /// Seconds: for tests of the harness itself.
    Tiny,
}

impl Scale {
    pub fn name(self) -> &'static str {
        match self {
            Scale::Full => "full",
            Scale::Quick => "quick",
            Scale::Tiny => "tiny",
        }
    }
}

/// Every size and repetition count of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Sizes {
    pub scale: Scale,
    /// Micro (Figures 9, 10): columns of X.
    pub micro_cols: usize,
    /// Micro: the row counts X is run at.
    pub micro_rows: Vec<usize>,
    /// Micro: sparsities of the sparse variants of X (dense is always run).
    pub micro_sparsities: Vec<f64>,
    /// Micro, Outer (Figure 13): X is `outer_dim × outer_dim`.
    pub outer_dim: usize,
    /// Outer: rank of U and V.
    pub outer_rank: usize,
    /// Outer: sparsities of X.
    pub outer_sparsities: Vec<f64>,
    /// Fusion policies of the micro suite.
    pub micro_policies: Vec<&'static str>,
    /// Micro: child runs per case and policy (each a sample), at most.
    pub micro_reps: usize,
    /// Micro: the scripts' own inner repetitions (`reps=`), Cell/MultiAgg/Row and Outer.
    pub micro_inner_reps: usize,
    pub outer_inner_reps: usize,
    /// Micro: stop taking samples of one case and policy after this many seconds.
    pub micro_case_budget_s: f64,
    /// Algorithms: rows and columns of X, and the sparsity of the sparse variant.
    pub alg_rows: usize,
    pub alg_cols: usize,
    pub alg_sparsity: f64,
    /// Algorithms: runs per algorithm, data and policy.
    pub alg_reps: usize,
    /// Reuse suite: repetitions of every configuration (the experiments' sizes are in
    /// [`super::reuse::params`]).
    pub reuse_reps: usize,
    /// Compile suite: rows and columns the scripts are compiled at.
    pub compile_rows: usize,
    pub compile_cols: usize,
    /// Compile suite: the per-partition plan budget of the unpruned search.
    pub unpruned_budget: u64,
}

impl Sizes {
    /// The sizes of `scale` on a machine with `available` bytes of memory; `reps` overrides
    /// every repetition count.
    pub fn choose(scale: Scale, available: Option<usize>, reps: Option<usize>) -> Sizes {
        let avail = available.unwrap_or(8 << 30) as f64;
        let mut s = match scale {
            Scale::Tiny => Sizes {
                scale,
                micro_cols: 40,
                micro_rows: vec![200, 2000],
                micro_sparsities: vec![0.1],
                outer_dim: 300,
                outer_rank: 5,
                outer_sparsities: vec![1e-2],
                micro_policies: vec!["none", "gen"],
                micro_reps: 1,
                micro_inner_reps: 2,
                outer_inner_reps: 2,
                micro_case_budget_s: 5.0,
                alg_rows: 300,
                alg_cols: 10,
                alg_sparsity: 0.1,
                alg_reps: 1,
                reuse_reps: 1,
                compile_rows: 200,
                compile_cols: 10,
                unpruned_budget: 10_000,
            },
            Scale::Quick => Sizes {
                scale,
                micro_cols: 1000,
                micro_rows: vec![1_000, 10_000, 100_000],
                micro_sparsities: vec![0.01],
                outer_dim: 5_000,
                outer_rank: 10,
                outer_sparsities: vec![1.0, 1e-2, 1e-3],
                micro_policies: vec!["none", "gen"],
                micro_reps: 3,
                micro_inner_reps: 3,
                outer_inner_reps: 2,
                micro_case_budget_s: 6.0,
                alg_rows: 10_000,
                alg_cols: 100,
                alg_sparsity: 0.01,
                alg_reps: 1,
                reuse_reps: 2,
                compile_rows: 1_000,
                compile_cols: 50,
                unpruned_budget: 100_000,
            },
            Scale::Full => Sizes {
                scale,
                micro_cols: 1000,
                micro_rows: vec![1_000, 10_000, 100_000],
                micro_sparsities: vec![0.1, 0.01],
                outer_dim: 20_000,
                outer_rank: 100,
                outer_sparsities: vec![1.0, 1e-1, 1e-2, 1e-3, 1e-4],
                micro_policies: vec!["none", "fa", "fnr", "gen"],
                micro_reps: 5,
                micro_inner_reps: 5,
                outer_inner_reps: 1,
                micro_case_budget_s: 25.0,
                alg_rows: 100_000,
                alg_cols: 200,
                alg_sparsity: 0.01,
                alg_reps: 3,
                reuse_reps: 3,
                compile_rows: 10_000,
                compile_cols: 100,
                unpruned_budget: 100_000,
            },
        };
        // Cell/MultiAgg (unfused): X, Y, Z and two intermediates of rows × cols doubles at
        // once; keep within half the available memory.
        let per_row = 5.0 * s.micro_cols as f64 * 8.0;
        s.micro_rows
            .retain(|&m| m == 200 || m as f64 * per_row <= avail / 2.0);
        if s.micro_rows.is_empty() {
            s.micro_rows.push(1_000);
        }
        // Outer (unfused): U %*% t(V), its log, and the product with X: three dense dim².
        while s.outer_dim > 1_000 && 3.0 * (s.outer_dim as f64).powi(2) * 8.0 > avail / 2.0 {
            s.outer_dim /= 2;
        }
        // Algorithms: X and a few intermediates of its size.
        while s.alg_rows > 1_000 && 6.0 * (s.alg_rows * s.alg_cols) as f64 * 8.0 > avail / 2.0 {
            s.alg_rows /= 2;
        }
        if let Some(r) = reps {
            let r = r.max(1);
            s.micro_reps = r;
            s.alg_reps = r;
            s.reuse_reps = r;
        }
        s
    }

    /// The sizes in a few lines, as printed at the start of a run.
    pub fn describe(&self) -> String {
        let rows: Vec<String> = self.micro_rows.iter().map(|r| r.to_string()).collect();
        let sps: Vec<String> = self
            .micro_sparsities
            .iter()
            .map(|s| s.to_string())
            .collect();
        let osps: Vec<String> = self
            .outer_sparsities
            .iter()
            .map(|s| format!("{s:e}"))
            .collect();
        format!(
            "scale {}\n\
             micro: X of {} rows x {} columns, dense and sparsity {}; policies {}; up to {} runs \
             per case (each the mean of {} inner repetitions)\n\
             outer: X of {}x{} at sparsity {}, rank {}\n\
             algorithms: X of {} x {}, dense and sparsity {}; {} run(s) per policy\n\
             reuse: {} run(s) per configuration, interleaved\n\
             compile: scripts at {} x {}; unpruned search budget {} plans per partition",
            self.scale.name(),
            rows.join(", "),
            self.micro_cols,
            sps.join(", "),
            self.micro_policies.join(", "),
            self.micro_reps,
            self.micro_inner_reps,
            self.outer_dim,
            self.outer_dim,
            osps.join(", "),
            self.outer_rank,
            self.alg_rows,
            self.alg_cols,
            self.alg_sparsity,
            self.alg_reps,
            self.reuse_reps,
            self.compile_rows,
            self.compile_cols,
            self.unpruned_budget
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_bounds_the_sizes() {
        let big = Sizes::choose(Scale::Full, Some(64 << 30), None);
        assert_eq!(big.micro_rows, vec![1_000, 10_000, 100_000]);
        assert_eq!(big.outer_dim, 20_000);
        let small = Sizes::choose(Scale::Full, Some(256 << 20), Some(2));
        assert!(small.micro_rows.len() < 3);
        assert!(small.outer_dim < 20_000);
        assert!(small.alg_rows < 100_000);
        assert_eq!(small.micro_reps, 2);
        assert!(small.describe().contains("scale full"));
    }
}
