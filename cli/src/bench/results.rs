//! The measurement record every suite produces and every report reads: one row per
//! (suite, case, system, configuration), with all repetitions kept.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Whether a measurement produced figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Measured.
    Ok,
    /// The run failed; [`Measurement::error`] says why (a stderr tail for child processes).
    Failed,
    /// Not run; [`Measurement::error`] says why (e.g. a peer without its package).
    Skipped,
}

impl Status {
    /// The lower-case name used in CSV and markdown.
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
        }
    }
}

/// One measurement: what was run, where, how often, and what came out.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Measurement {
    /// `micro`, `compile` or `algorithms`.
    pub suite: String,
    /// The pattern (`sum_xyz`, `magg`, `row_mv`, `row_mm`, `outer`) or script / algorithm id.
    pub case: String,
    /// The data variant: `dense`, `sp=0.01`, ...
    pub variant: String,
    /// The script arguments that define the size (`m`, `n`, `sp`, `k`, `rows`, ...).
    pub params: BTreeMap<String, String>,
    /// `lafuse`, `systemds`, `numpy`, `numexpr`, `jax`.
    pub system: String,
    /// lafuse: the fusion policy (`none`, `fa`, `fnr`, `gen`); SystemDS: `codegen` or `base`;
    /// Python peers: empty.
    pub config: String,
    pub status: Status,
    /// Why a measurement failed or was skipped.
    pub error: Option<String>,
    /// Milliseconds of every repetition (micro: the script's `ms_per_rep`, itself a mean over
    /// the script's inner loop; algorithms: the script's `time_ms`).
    pub times_ms: Vec<f64>,
    pub median_ms: Option<f64>,
    pub min_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// (max - min) / median over the repetitions.
    pub spread: Option<f64>,
    /// Median of the unfused (`none`) run of the same case divided by this median: the
    /// speedup over unfused (lafuse only).
    pub ratio_to_unfused: Option<f64>,
    /// Bytes a fused operator must read for this case (micro patterns).
    pub bytes_read: Option<f64>,
    /// `bytes_read / median / read bandwidth measured at start`.
    pub bandwidth_fraction: Option<f64>,
    /// `bytes_read / median` ÷ the speed of a plain read (`sum`) of the same inputs timed in
    /// the same process after each evaluation (dense micro patterns under lafuse `gen`): the
    /// memory speed of a virtual machine changes over seconds, so this divides by the speed
    /// the operator's own inputs were read at, at the time.
    #[serde(default)]
    pub same_process_fraction: Option<f64>,
    /// The script's `result` line (micro) or the peer's result.
    pub result: Option<f64>,
    /// Algorithms: the script's `objective`.
    pub objective: Option<f64>,
    /// Algorithms: the script's `iterations`.
    pub iterations: Option<u64>,
    /// Algorithms: the script's `check` line (`PASS ...` / `FAIL ...`).
    pub check: Option<String>,
    /// Named figures: lafuse statistics (`operators_compiled`, `codegen_ms`, ...), optimizer
    /// counts of the compile suite, the cost model's prediction, a peer's `compile_ms`.
    pub figures: BTreeMap<String, f64>,
    /// Flags raised on this measurement (objective disagreement, gen slower than fa, ...).
    pub notes: Vec<String>,
}

impl Measurement {
    /// An empty record for `system`/`config` of a case; status `Ok` until told otherwise.
    pub fn new(suite: &str, case: &str, variant: &str, system: &str, config: &str) -> Measurement {
        Measurement {
            suite: suite.into(),
            case: case.into(),
            variant: variant.into(),
            params: BTreeMap::new(),
            system: system.into(),
            config: config.into(),
            status: Status::Ok,
            error: None,
            times_ms: Vec::new(),
            median_ms: None,
            min_ms: None,
            max_ms: None,
            spread: None,
            ratio_to_unfused: None,
            bytes_read: None,
            bandwidth_fraction: None,
            same_process_fraction: None,
            result: None,
            objective: None,
            iterations: None,
            check: None,
            figures: BTreeMap::new(),
            notes: Vec::new(),
        }
    }

    /// Sets the size parameters.
    pub fn with_params(mut self, params: &[(String, String)]) -> Measurement {
        self.params = params.iter().cloned().collect();
        self
    }

    /// Marks the measurement failed (or skipped) with a reason.
    pub fn fail(&mut self, status: Status, reason: impl Into<String>) {
        self.status = status;
        self.error = Some(reason.into());
    }

    /// Recomputes median, min, max and spread from [`Measurement::times_ms`].
    pub fn summarize(&mut self) {
        let t: Vec<f64> = self
            .times_ms
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .collect();
        let lo = t.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = t.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let Some(median) = median(t) else {
            return;
        };
        self.median_ms = Some(median);
        self.min_ms = Some(lo);
        self.max_ms = Some(hi);
        self.spread = (median > 0.0).then(|| (hi - lo) / median);
    }

    /// The case's label: `case variant`.
    pub fn label(&self) -> String {
        format!("{} {}", self.case, self.variant)
    }

    /// `system` or `system config`.
    pub fn who(&self) -> String {
        if self.config.is_empty() {
            self.system.clone()
        } else {
            format!("{} {}", self.system, self.config)
        }
    }

    /// Whether this is the same case (suite, case, variant) as `other`.
    pub fn same_case(&self, other: &Measurement) -> bool {
        self.suite == other.suite && self.case == other.case && self.variant == other.variant
    }
}

/// Fills [`Measurement::ratio_to_unfused`] of every lafuse measurement from the `none`
/// measurement of the same case.
pub fn fill_unfused_ratios(ms: &mut [Measurement]) {
    let unfused: Vec<(String, String, String, f64)> = ms
        .iter()
        .filter(|m| m.system == "lafuse" && m.config == "none" && m.status == Status::Ok)
        .filter_map(|m| {
            m.median_ms
                .map(|t| (m.suite.clone(), m.case.clone(), m.variant.clone(), t))
        })
        .collect();
    for m in ms.iter_mut().filter(|m| m.system == "lafuse") {
        let base = unfused
            .iter()
            .find(|(s, c, v, _)| *s == m.suite && *c == m.case && *v == m.variant);
        if let (Some((_, _, _, base)), Some(t)) = (base, m.median_ms) {
            if t > 0.0 {
                m.ratio_to_unfused = Some(base / t);
            }
        }
    }
}

/// Relative difference |a - b| / max(|a|, |b|) (0 when both are 0).
pub fn rel_diff(a: f64, b: f64) -> f64 {
    let scale = a.abs().max(b.abs());
    if scale == 0.0 {
        0.0
    } else {
        (a - b).abs() / scale
    }
}

/// The median of `xs` (the mean of the middle two for an even count); `None` when empty.
pub fn median(mut xs: Vec<f64>) -> Option<f64> {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    (n > 0).then(|| (xs[(n - 1) / 2] + xs[n / 2]) / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarize_median_and_spread() {
        let mut m = Measurement::new("micro", "sum_xyz", "dense", "lafuse", "gen");
        m.times_ms = vec![3.0, 1.0, 2.0, f64::NAN];
        m.summarize();
        assert_eq!(m.median_ms, Some(2.0));
        assert_eq!(m.spread, Some(1.0));
        m.times_ms = vec![4.0, 2.0];
        m.summarize();
        assert_eq!(m.median_ms, Some(3.0));
    }

    #[test]
    fn unfused_ratio_comes_from_the_same_case() {
        let mk = |variant: &str, config: &str, t: f64| {
            let mut m = Measurement::new("micro", "sum_xyz", variant, "lafuse", config);
            m.times_ms = vec![t];
            m.summarize();
            m
        };
        let mut ms = vec![
            mk("dense", "none", 10.0),
            mk("dense", "gen", 2.0),
            mk("sp=0.1", "gen", 1.0),
        ];
        fill_unfused_ratios(&mut ms);
        assert_eq!(ms[0].ratio_to_unfused, Some(1.0));
        assert_eq!(ms[1].ratio_to_unfused, Some(5.0));
        assert_eq!(ms[2].ratio_to_unfused, None);
    }

    #[test]
    fn relative_difference() {
        assert_eq!(rel_diff(0.0, 0.0), 0.0);
        assert!((rel_diff(1.0, 1.1) - 0.1 / 1.1).abs() < 1e-12);
    }
}
