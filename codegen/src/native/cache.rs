//! The operator cache: compiled operators keyed by [`CPlan::structural_hash`], with the plan
//! compared on every hit (a hash collision is a miss, never a wrong operator). Concurrent
//! requests for one key from plain threads compile once: the first request installs a per-key
//! slot and compiles, the others wait on it (requests on the rayon pool never wait; see
//! `SlotData::operator`). The cache holds at most a capacity of operators
//! ([`DEFAULT_OPERATOR_CAPACITY`]); beyond it the least recently used one is dropped, and its
//! machine code is freed once no compiled block holds the operator any more.

use super::{compile_with, CodegenError, MainFormat, NativeOperator, ObjectStore};
use lafuse_compiler::fusion::cplan::CPlan;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

/// Why a request missed the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MissReason {
    /// No operator had this hash.
    FirstSight,
    /// Operators with this hash exist, but for different plans.
    HashCollision,
    /// The plan was compiled before and evicted since.
    Evicted,
}

impl std::fmt::Display for MissReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MissReason::FirstSight => "a plan not compiled before",
            MissReason::HashCollision => "a plan whose hash another plan has",
            MissReason::Evicted => "a plan evicted from the operator cache since",
        })
    }
}

/// What one cache request did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// A cached (or concurrently compiling) operator answered.
    Hit,
    /// The request compiled, for this reason.
    Miss(MissReason),
}

/// Counters of an [`OperatorCache`].
#[derive(Clone, Debug, Default)]
pub struct CacheStats {
    /// Requests answered by a cached (or concurrently compiling) operator.
    pub hits: u64,
    /// Requests that compiled.
    pub misses: u64,
    /// Misses by reason.
    pub miss_reasons: HashMap<MissReason, u64>,
    /// Total time of the [`compile_for`](super::compile_for) calls the misses made. It does not include the entry
    /// points an operator compiles later, on the first execution that needs one (see
    /// [`NativeOperator::csr_compile_time`]); `NativeOperator::compile_time` does.
    pub compile_time: Duration,
    /// Time of each [`compile_for`](super::compile_for) call, in compilation order (hash, time); as
    /// [`compile_time`](Self::compile_time), without entry points compiled later.
    pub per_operator: Vec<(u64, Duration)>,
    /// Misses whose machine code was loaded from the on-disk object store rather than
    /// compiled ([`OperatorCache::with_store`]).
    pub store_loads: u64,
}

/// Operators an [`OperatorCache`] keeps by default.
pub const DEFAULT_OPERATOR_CAPACITY: usize = 4096;

/// One cached plan: the plan (compared on hit), its operator once compiled, and when it was
/// last requested (the cache's clock).
struct SlotData {
    plan: CPlan,
    /// Set once, by the first compilation to finish (never while compiling: a thread that
    /// waited on a `OnceLock` under initialization could be the one the compilation needs).
    operator: OnceLock<Result<Arc<NativeOperator>, CodegenError>>,
    /// Whether a request is compiling the operator now; requests from outside the rayon pool
    /// wait on `compiled` for it.
    compiling: Mutex<bool>,
    compiled: Condvar,
    last_used: std::sync::atomic::AtomicU64,
}

impl SlotData {
    /// The operator, compiled by `compile` unless it is compiled already. Concurrent requests
    /// from plain threads compile once: the first compiles, the others wait for it. A request
    /// on a rayon worker never waits: compilation joins on the pool, so a blocked worker could
    /// be the one the compiling thread's join waits for (a deadlock, met with engines shared by
    /// threads); it compiles the operator too, and every request returns the first result
    /// stored.
    fn operator(
        &self,
        compile: impl FnOnce() -> Result<Arc<NativeOperator>, CodegenError>,
    ) -> Result<Arc<NativeOperator>, CodegenError> {
        let mut busy = self.compiling.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(r) = self.operator.get() {
                return r.clone();
            }
            if !*busy || rayon::current_thread_index().is_some() {
                break;
            }
            busy = self.compiled.wait(busy).unwrap_or_else(|p| p.into_inner());
        }
        *busy = true;
        drop(busy);
        /// Clears `compiling` and wakes the waiters however the compilation ends (a panic
        /// included), so that none waits forever.
        struct Done<'s>(&'s SlotData);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                *self.0.compiling.lock().unwrap_or_else(|p| p.into_inner()) = false;
                self.0.compiled.notify_all();
            }
        }
        let _done = Done(self);
        let r = compile();
        self.operator.get_or_init(|| r).clone()
    }
}

type Slot = Arc<SlotData>;

/// A thread-safe cache of compiled operators.
pub struct OperatorCache {
    inner: Mutex<Inner>,
    /// Where misses look for machine code compiled by earlier processes, and keep theirs.
    store: Option<Arc<ObjectStore>>,
}

struct Inner {
    map: HashMap<u64, Vec<Slot>>,
    evicted: std::collections::HashSet<u64>,
    stats: CacheStats,
    /// Plans held at most.
    capacity: usize,
    /// Requests so far: the clock of `SlotData::last_used`.
    clock: u64,
}

impl Default for OperatorCache {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_OPERATOR_CAPACITY)
    }
}

impl Inner {
    /// Plans held now.
    fn len(&self) -> usize {
        self.map.values().map(Vec::len).sum()
    }

    /// Drops the plan requested longest ago (a scan: it runs only on a miss, which compiles).
    fn evict_least_recently_used(&mut self) {
        let oldest = self
            .map
            .iter()
            .flat_map(|(&h, slots)| {
                slots.iter().enumerate().map(move |(i, s)| {
                    (s.last_used.load(std::sync::atomic::Ordering::Relaxed), h, i)
                })
            })
            .min();
        if let Some((_, h, i)) = oldest {
            if let Some(slots) = self.map.get_mut(&h) {
                slots.remove(i);
                if slots.is_empty() {
                    self.map.remove(&h);
                }
            }
            self.evicted.insert(h);
        }
    }
}

impl OperatorCache {
    /// An empty cache of [`DEFAULT_OPERATOR_CAPACITY`] operators.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty cache that keeps at most `capacity` operators (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        OperatorCache {
            inner: Mutex::new(Inner {
                map: HashMap::new(),
                evicted: std::collections::HashSet::new(),
                stats: CacheStats::default(),
                capacity: capacity.max(1),
                clock: 0,
            }),
            store: None,
        }
    }

    /// The on-disk object store its misses go through, if any.
    pub fn store(&self) -> Option<&ObjectStore> {
        self.store.as_deref()
    }

    /// An empty cache whose misses go through `store`: machine code an earlier process
    /// compiled for the same module is loaded instead of compiled (see [`ObjectStore`]).
    pub fn with_store(store: Arc<ObjectStore>) -> Self {
        OperatorCache {
            store: Some(store),
            ..Self::default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the map inconsistent (single inserts).
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The operator for `plan`, compiling it on the first request.
    pub fn get(&self, plan: &CPlan) -> Result<Arc<NativeOperator>, CodegenError> {
        self.lookup(plan).0
    }

    /// [`OperatorCache::get`], also saying whether this request hit the cache or why it
    /// missed (what a caller reports per request, e.g. the engine's `--stats`).
    pub fn lookup(&self, plan: &CPlan) -> (Result<Arc<NativeOperator>, CodegenError>, Lookup) {
        self.lookup_for(plan, MainFormat::Dense)
    }

    /// [`OperatorCache::lookup`] for a main input expected in format `main`: a miss compiles
    /// the entry point that format runs first ([`compile_for`](super::compile_for)); a hit returns the operator as
    /// it is, which compiles any other entry point on the first call that needs it.
    pub fn lookup_for(
        &self,
        plan: &CPlan,
        main: MainFormat,
    ) -> (Result<Arc<NativeOperator>, CodegenError>, Lookup) {
        let h = plan.structural_hash();
        let slot = {
            let mut g = self.lock();
            g.clock += 1;
            let now = g.clock;
            let found = g
                .map
                .get(&h)
                .and_then(|v| v.iter().find(|s| s.plan == *plan).cloned());
            match found {
                Some(s) => {
                    g.stats.hits += 1;
                    s.last_used.store(now, std::sync::atomic::Ordering::Relaxed);
                    (s, Lookup::Hit)
                }
                None => {
                    let reason = if g.map.get(&h).is_some_and(|v| !v.is_empty()) {
                        MissReason::HashCollision
                    } else if g.evicted.contains(&h) {
                        MissReason::Evicted
                    } else {
                        MissReason::FirstSight
                    };
                    g.stats.misses += 1;
                    *g.stats.miss_reasons.entry(reason).or_default() += 1;
                    if g.len() >= g.capacity {
                        g.evict_least_recently_used();
                    }
                    let s: Slot = Arc::new(SlotData {
                        plan: plan.clone(),
                        operator: OnceLock::new(),
                        compiling: Mutex::new(false),
                        compiled: Condvar::new(),
                        last_used: std::sync::atomic::AtomicU64::new(now),
                    });
                    g.map.entry(h).or_default().push(s.clone());
                    (s, Lookup::Miss(reason))
                }
            }
        };
        let (slot, lookup) = slot;
        // Outside the cache's lock.
        let r = slot.operator(|| {
            let r = compile_with(plan, main, self.store.clone()).map(Arc::new);
            if let Ok(op) = &r {
                let mut g = self.lock();
                g.stats.compile_time += op.compile_time();
                g.stats.per_operator.push((h, op.compile_time()));
                g.stats.store_loads += u64::from(op.loaded_from_store());
            }
            r
        });
        (r, lookup)
    }

    /// [`OperatorCache::lookup`] for several plans at once, in the order given. A block's
    /// operators are independent, so the missing ones compile in parallel on the rayon pool
    /// (each compilation has its own LLVM context; the cache serialises only its map).
    pub fn lookup_all(
        &self,
        plans: &[&CPlan],
    ) -> Vec<(Result<Arc<NativeOperator>, CodegenError>, Lookup)> {
        let dense: Vec<(&CPlan, MainFormat)> =
            plans.iter().map(|&p| (p, MainFormat::Dense)).collect();
        self.lookup_all_for(&dense)
    }

    /// [`OperatorCache::lookup_for`] for several plans at once, in the order given, compiled
    /// in parallel as by [`OperatorCache::lookup_all`].
    pub fn lookup_all_for(
        &self,
        plans: &[(&CPlan, MainFormat)],
    ) -> Vec<(Result<Arc<NativeOperator>, CodegenError>, Lookup)> {
        use rayon::prelude::*;
        plans
            .par_iter()
            .map(|&(p, main)| self.lookup_for(p, main))
            .collect()
    }

    /// Drops every operator for `plan`'s hash (a later request is a miss of reason
    /// [`MissReason::Evicted`]).
    pub fn evict(&self, plan: &CPlan) {
        let h = plan.structural_hash();
        let mut g = self.lock();
        if g.map.remove(&h).is_some() {
            g.evicted.insert(h);
        }
    }

    /// Number of cached plans.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> CacheStats {
        self.lock().stats.clone()
    }
}
