//! Eviction order of the reuse cache (LIMA section 4.3, Table 1): each in-memory entry gets a
//! [`ScoreKey`], and the entry with the smallest key is evicted first.

use std::cmp::Ordering;
use std::time::Duration;

/// Which entries the cache evicts first when a put would exceed its budget.
///
/// The scoring functions are LIMA's (SIGMOD 2021, section 4.3, Table 1); each policy evicts
/// the entry with the smallest score, ties broken as SystemDS's comparators do
/// (`LineageCacheConfig`, reference section 9.6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EvictionPolicy {
    /// Least recently used: score `T_a(o)`, the last access (a logical clock ticked by every
    /// hit and put); the oldest goes first. Ties: the lower `c(o)/s(o)` first.
    Lru,
    /// DAG height: score `1/h(o)`, so the entry with the deepest lineage DAG goes first (LIMA:
    /// "deep lineage traces have less reuse potential", e.g. mini-batches sliced from an input
    /// and reused across epochs sit near the leaves). Ties: the lower `c(o)/s(o)` first.
    DagHeight,
    /// Cost and size (LIMA's default): score `(r_h + r_m) * c(o) / s(o)`, compute time per
    /// byte scaled by the accesses (hits and misses, misses of earlier evicted incarnations of
    /// the same item included); the entry that saves the least computation per byte goes
    /// first. Ties: the least recently used first.
    #[default]
    CostSize,
}

/// What an in-memory entry is ordered by, as the policy computes it from the entry's numbers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScoreKey {
    primary: f64,
    secondary: f64,
    /// Unique per queued entry: two entries never compare equal, so the queue holds both.
    seq: u64,
}

/// An entry's numbers that the scores are computed from.
pub(crate) struct Facts {
    /// `c(o)`: the time the value took to compute.
    pub compute: Duration,
    /// `s(o)`: in-memory bytes.
    pub size: usize,
    /// `r_h + r_m`.
    pub accesses: u64,
    /// `T_a(o)`: the logical time of the last access.
    pub last_access: u64,
    /// `h(o)`: the height of the key's lineage DAG.
    pub height: u32,
}

impl EvictionPolicy {
    /// The entry's key in the eviction queue; `seq` makes it unique.
    pub(crate) fn score(self, f: &Facts, seq: u64) -> ScoreKey {
        // Compute time per byte (ns/byte); sizes are never 0 (every value counts its header),
        // the `max` only guards the division.
        let cost_per_byte = f.compute.as_nanos() as f64 / f.size.max(1) as f64;
        let (primary, secondary) = match self {
            EvictionPolicy::Lru => (f.last_access as f64, cost_per_byte),
            EvictionPolicy::DagHeight => (1.0 / f64::from(f.height.max(1)), cost_per_byte),
            EvictionPolicy::CostSize => (
                f.accesses.max(1) as f64 * cost_per_byte,
                f.last_access as f64,
            ),
        };
        ScoreKey {
            primary,
            secondary,
            seq,
        }
    }
}

impl Ord for ScoreKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.primary
            .total_cmp(&other.primary)
            .then(self.secondary.total_cmp(&other.secondary))
            .then(self.seq.cmp(&other.seq))
    }
}

impl PartialOrd for ScoreKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for ScoreKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for ScoreKey {}
