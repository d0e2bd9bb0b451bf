//! The lineage reuse cache (LIMA section 4; MEMPHIS section 3.3): a thread-safe map from
//! lineage items to the values they identify, which the executor probes before a reusable
//! instruction (REUSE) and fills after it (PUT).
//!
//! A probe that misses leaves a placeholder ([`Reservation`]): a concurrent probe of an equal
//! item waits for it to be filled (then hits) or abandoned (then reserves itself), so no value
//! is computed twice at once (LIMA section 4.1, "Task-parallel Loops"). The values held in
//! memory never exceed the byte budget: a put first evicts, in the order of the configured
//! [`EvictionPolicy`], and an evicted matrix that is dearer to recompute than to write and read
//! back is spilled to disk and read back on its next hit (LIMA section 4.3).
//!
//! All state is behind one mutex, held for map updates, evictions and spill writes; reading a
//! spilled value back happens outside it (the entry is a placeholder meanwhile, so probes of
//! that item wait and all others go on).

mod score;
mod spill;
mod state;
#[cfg(test)]
mod tests;

pub use score::EvictionPolicy;

use crate::lineage::Lineage;
use crate::matrix::Matrix;
use crate::value::Value;
use spill::Spiller;
use state::{Entry, Slot, State};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// How a [`ReuseCache`] is sized and evicts.
#[derive(Clone, Debug)]
pub struct CacheConfig {
    /// The most bytes of values held in memory (see [`value_bytes`]); a value larger than
    /// this is never cached.
    pub budget: usize,
    pub policy: EvictionPolicy,
    /// Where the cache makes its private spill directory (made at the first spill, removed
    /// whole when the cache drops); `None`: the system's temp directory.
    pub spill_dir: Option<PathBuf>,
    /// Whether evicted matrices worth it are spilled to disk instead of dropped.
    pub spill: bool,
    /// How many times an item must be asked for before its value is kept (MEMPHIS's delayed
    /// caching): 1 keeps every value computed (LIMA); 2 keeps a value only when it is asked for
    /// a second time, or is dear for its size ([`DEAR_NANOS_PER_BYTE`]), so intermediates used
    /// once never take memory, nor keep the executor from updating them in place. Requests are counted by the item's hash (a collision only keeps
    /// a value one request early).
    pub delay: u32,
}

impl CacheConfig {
    /// A cache of `budget` bytes with LIMA's defaults: Cost&Size eviction, spilling to the
    /// temp directory.
    pub fn with_budget(budget: usize) -> CacheConfig {
        CacheConfig {
            budget,
            policy: EvictionPolicy::default(),
            spill_dir: None,
            spill: true,
            delay: 1,
        }
    }
}

/// Counters of a cache's work since it was made, and its memory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Probes that returned a value (after waiting for a placeholder, or reading back a
    /// spilled value, included).
    pub hits: u64,
    /// Probes that returned a reservation.
    pub misses: u64,
    /// Probes that waited for another thread's placeholder.
    pub waits: u64,
    /// Values stored by a put.
    pub puts: u64,
    /// Puts whose value was not stored: larger than the whole budget, or a borrowed matrix
    /// whose copy could not be allocated.
    pub rejected: u64,
    /// Misses whose value was not kept: the item was not asked for often enough yet
    /// ([`CacheConfig::delay`]) and the value was cheap for its size.
    pub delayed: u64,
    /// Entries pushed out of memory to make room (spilled ones included).
    pub evictions: u64,
    /// Evictions that wrote the value to disk.
    pub spills: u64,
    /// Hits that read a spilled value back.
    pub restores: u64,
    /// Spilled values that could not be read back (the probe then missed).
    pub restore_failures: u64,
    /// In-memory bytes held now.
    pub bytes: usize,
    /// The most in-memory bytes held at once.
    pub peak_bytes: usize,
    /// The compute times of the values hit: what reuse saved.
    pub saved_compute: Duration,
}

/// Where an item stands in the cache ([`ReuseCache::state`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryState {
    /// A placeholder: a reservation is out, or a spilled value is being read back.
    Reserved,
    InMemory,
    Spilled,
}

/// What a probe found.
pub enum Probe {
    /// The cached value, and the cache's own key item, equal to the probed one: the caller's
    /// lineage map should take it, so that equal DAGs become shared ones (MEMPHIS Figure 5).
    Hit { key: Lineage, value: Value },
    /// Not cached: compute the value and [`ReuseCache::put`] it with this reservation, or drop
    /// it to give up (which lets a waiting probe of the same item take over).
    Miss(Reservation),
}

/// What [`ReuseCache::peek`] found.
pub struct Peeked {
    pub value: Value,
    /// Whether every matrix operand of the value's computation was dense with finite values.
    pub dense_operands: bool,
}

/// The right to fill the cache's placeholder for one item; dropping it unfilled abandons the
/// placeholder and wakes the probes waiting for it.
///
/// A reservation is *detached* (fills nothing, abandons nothing) where the probing thread
/// already held the placeholder of an equal item: waiting for itself would never end.
pub struct Reservation {
    inner: Arc<Inner>,
    key: Lineage,
    /// The placeholder's token; 0 once filled or abandoned, or when detached.
    token: u64,
    /// Whether the item was not asked for often enough to be kept ([`CacheConfig::delay`]):
    /// its value is kept only if it is dear for its size ([`DEAR_NANOS_PER_BYTE`]).
    only_if_dear: bool,
}

/// What a value must have taken to compute, per byte it occupies, to be kept at its first
/// request under delayed caching: some twenty times what reading it back from memory costs.
/// Mini-batch slices and element-wise results (a fraction of a nanosecond per byte) are not
/// kept; reductions such as `t(X) %*% X` (tens) are, so that a later partial reuse finds them.
pub const DEAR_NANOS_PER_BYTE: f64 = 4.0;

impl Reservation {
    /// The probed item.
    pub fn key(&self) -> &Lineage {
        &self.key
    }

    /// Whether a put with this reservation can store anything (see the type's docs).
    pub fn is_detached(&self) -> bool {
        self.token == 0
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.token != 0 {
            self.inner.abandon(&self.key, self.token);
        }
    }
}

/// The lineage reuse cache; share it between threads through an `Arc`, a reference, or a
/// clone (a clone is another handle on the same cache, as a `parfor` worker holds).
#[derive(Clone)]
pub struct ReuseCache {
    inner: Arc<Inner>,
}

struct Inner {
    budget: usize,
    policy: EvictionPolicy,
    delay: u32,
    state: Mutex<State>,
    /// Signalled whenever a placeholder is filled or abandoned.
    changed: Condvar,
}

/// The bytes a value occupies in memory, as the budget counts them: a matrix's arrays as
/// allocated (dense `cells * 8`; CSR `(rows + 1) * 8 + nnz * 12`) plus its header, a scalar
/// its `Value` (and a string its bytes). The key's lineage DAG is not counted: it is shared
/// with the program's lineage.
pub fn value_bytes(value: &Value) -> usize {
    let header = std::mem::size_of::<Value>();
    match value {
        Value::Matrix(m) => {
            let arrays = match &**m {
                Matrix::Dense(d) => d.values.len().saturating_mul(8),
                Matrix::Sparse(s) => s
                    .row_ptr
                    .len()
                    .saturating_mul(std::mem::size_of::<usize>())
                    .saturating_add(s.col_idx.len().saturating_mul(4))
                    .saturating_add(s.values.len().saturating_mul(8)),
            };
            arrays.saturating_add(header + std::mem::size_of::<Matrix>())
        }
        Value::Str(s) => header.saturating_add(s.len()),
        Value::Double(_) | Value::Int(_) | Value::Bool(_) => header,
        // A list's elements are shared with the values they came from; counted in full.
        Value::List(l) => l
            .items
            .iter()
            .fold(header, |sum, item| sum.saturating_add(value_bytes(item))),
        Value::Frame(f) => header.saturating_add(f.bytes()),
    }
}

impl ReuseCache {
    pub fn new(config: CacheConfig) -> ReuseCache {
        ReuseCache {
            inner: Arc::new(Inner {
                budget: config.budget,
                policy: config.policy,
                delay: config.delay,
                state: Mutex::new(State::new(Spiller::new(config.spill, config.spill_dir))),
                changed: Condvar::new(),
            }),
        }
    }

    /// REUSE: the value cached for an item equal to `item`, or a reservation to compute it.
    ///
    /// Where another thread holds the placeholder of an equal item, this waits until it is
    /// filled (a hit) or abandoned (then this probe reserves). A spilled value is read back
    /// (a restore, evicting others to make room); where that fails, the probe misses. A thread
    /// must not wait on a placeholder whose holder waits on one of its own; the executor holds
    /// at most one reservation at a time and computes without probing, so it cannot.
    pub fn probe(&self, item: &Lineage) -> Probe {
        self.probe_delayed(item, self.inner.delay)
    }

    /// [`ReuseCache::probe`] for a value worth keeping at its first computation, whatever the
    /// cache's [`CacheConfig::delay`]: a whole function call's results (multi-level reuse),
    /// few and costly, unlike the single-use intermediates delayed caching is for.
    pub fn probe_keeping(&self, item: &Lineage) -> Probe {
        self.probe_delayed(item, 1)
    }

    fn probe_delayed(&self, item: &Lineage, delay: u32) -> Probe {
        let inner = &self.inner;
        let mut st = inner.lock();
        let me = std::thread::current().id();
        let mut waited = false;
        loop {
            let Some((key, entry)) = st.entries.get_key_value(item) else {
                // Not asked for often enough yet: the value is kept only if it is dear for
                // its size (decided when it is put).
                let only_if_dear = delay > 1 && st.note_request(item.hash()) < delay;
                // A miss: leave a placeholder for the value.
                let token = st.new_token();
                let accesses = 1 + st.history.remove(&item.hash()).unwrap_or(0);
                st.entries.insert(
                    item.clone(),
                    Entry {
                        slot: Slot::Reserved { token, owner: me },
                        size: 0,
                        compute: Duration::ZERO,
                        accesses,
                        last_access: 0,
                        height: item.height(),
                        dense_operands: false,
                    },
                );
                st.stats.misses += 1;
                return Probe::Miss(Reservation {
                    inner: inner.clone(),
                    key: item.clone(),
                    token,
                    only_if_dear,
                });
            };
            match &entry.slot {
                Slot::Reserved { owner, .. } if *owner == me => {
                    st.stats.misses += 1;
                    return Probe::Miss(Reservation {
                        inner: inner.clone(),
                        key: item.clone(),
                        token: 0,
                        only_if_dear: false,
                    });
                }
                Slot::Reserved { .. } => {
                    if !waited {
                        st.stats.waits += 1;
                        waited = true;
                    }
                    st = inner.changed.wait(st).unwrap_or_else(|e| e.into_inner());
                }
                Slot::Memory { value, .. } => {
                    let (key, value) = (key.clone(), value.clone());
                    st.hit(inner.policy, &key);
                    return Probe::Hit { key, value };
                }
                Slot::Spilled(_) => {
                    let key = key.clone();
                    match inner.restore(st, key) {
                        Ok(probe) => return probe,
                        Err(guard) => st = guard,
                    }
                }
            }
        }
    }

    /// PUT: stores `value`, which took `compute` to make, for the reservation's item, evicting
    /// as the policy says where the budget needs room. A value larger than the whole budget is
    /// not stored (the reservation is just released), and a matrix borrowing an embedder's
    /// memory is stored as a copy. The reservation is filled in the cache that issued it.
    pub fn put(&self, reservation: Reservation, value: &Value, compute: Duration) {
        self.put_computed(reservation, value, compute, false);
    }

    /// [`ReuseCache::put`], stating whether every matrix operand of the computation was dense:
    /// [`ReuseCache::peek`] hands that on to partial reuse, whose compensations continue the
    /// dense kernels' arithmetic and so apply only to values those kernels computed.
    pub fn put_computed(
        &self,
        reservation: Reservation,
        value: &Value,
        compute: Duration,
        dense_operands: bool,
    ) {
        let mut reservation = reservation;
        let token = std::mem::replace(&mut reservation.token, 0);
        if token == 0 {
            return;
        }
        let dear = compute.as_nanos() as f64 >= DEAR_NANOS_PER_BYTE * value_bytes(value) as f64;
        if reservation.only_if_dear && !dear {
            let inner = &reservation.inner;
            inner.lock().stats.delayed += 1;
            return inner.abandon(&reservation.key, token);
        }
        reservation
            .inner
            .fill(&reservation.key, token, value, compute, dense_operands);
    }

    /// Partial reuse's probe (LIMA section 4.2): the value cached for an item equal to `item`
    /// and whether it came from dense operands, without reserving anything. A value being
    /// computed elsewhere counts as absent (partial reuse then computes in full rather than
    /// wait); a spilled one is read back. A found value counts as a hit; an absent one as a
    /// request for delayed caching, so that a part asked for by compensations is kept once it
    /// is computed.
    pub fn peek(&self, item: &Lineage) -> Option<Peeked> {
        let inner = &self.inner;
        let mut st = inner.lock();
        loop {
            let Some((key, entry)) = st.entries.get_key_value(item) else {
                if inner.delay > 1 {
                    st.note_request(item.hash());
                }
                return None;
            };
            let dense_operands = entry.dense_operands;
            match &entry.slot {
                Slot::Reserved { .. } => return None,
                Slot::Memory { value, .. } => {
                    let (key, value) = (key.clone(), value.clone());
                    st.hit(inner.policy, &key);
                    return Some(Peeked {
                        value,
                        dense_operands,
                    });
                }
                Slot::Spilled(_) => {
                    let key = key.clone();
                    match inner.restore(st, key) {
                        Ok(Probe::Hit { value, .. }) => {
                            return Some(Peeked {
                                value,
                                dense_operands,
                            })
                        }
                        Ok(Probe::Miss(_)) => return None,
                        Err(guard) => st = guard,
                    }
                }
            }
        }
    }

    /// The counters so far, with the bytes held now.
    pub fn stats(&self) -> CacheStats {
        let st = self.inner.lock();
        CacheStats {
            bytes: st.bytes,
            ..st.stats.clone()
        }
    }

    /// The in-memory bytes held now; never more than the budget.
    pub fn bytes(&self) -> usize {
        self.inner.lock().bytes
    }

    /// The budget the cache was made with.
    pub fn budget(&self) -> usize {
        self.inner.budget
    }

    /// Where an item equal to `item` stands, without counting as an access.
    pub fn state(&self, item: &Lineage) -> Option<EntryState> {
        let st = self.inner.lock();
        st.entries.get(item).map(|e| match e.slot {
            Slot::Reserved { .. } => EntryState::Reserved,
            Slot::Memory { .. } => EntryState::InMemory,
            Slot::Spilled(_) => EntryState::Spilled,
        })
    }

    /// The private spill directory, once the first spill made it.
    pub fn spill_dir(&self) -> Option<PathBuf> {
        self.inner.lock().spiller.dir().map(|d| d.to_path_buf())
    }
}

impl Inner {
    /// The state, also after a panic elsewhere poisoned the lock: every update below leaves
    /// the state consistent before anything that could panic.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Removes the placeholder `token` of `key`, if it is still there, and wakes the waiters.
    fn abandon(&self, key: &Lineage, token: u64) {
        let mut st = self.lock();
        if st.holds(key, token) {
            if let Some(entry) = st.entries.remove(key) {
                st.remember(key.hash(), entry.accesses);
            }
        }
        drop(st);
        self.changed.notify_all();
    }

    fn fill(
        &self,
        key: &Lineage,
        token: u64,
        value: &Value,
        compute: Duration,
        dense_operands: bool,
    ) {
        // Never keep a borrow of an embedder's memory: it may end once the value is returned.
        let value = match value {
            Value::Matrix(m) if m.is_borrowed() => match m.try_clone() {
                Ok(copy) => Value::matrix(copy),
                Err(_) => {
                    self.lock().stats.rejected += 1;
                    return self.abandon(key, token);
                }
            },
            v => v.clone(),
        };
        let size = value_bytes(&value);
        let mut st = self.lock();
        if !st.holds(key, token) {
            return;
        }
        if size > self.budget || !st.make_space(size, self.budget) {
            st.stats.rejected += 1;
            drop(st);
            return self.abandon(key, token);
        }
        st.stats.puts += 1;
        st.install(self.policy, key, value, size, Some(compute));
        if let Some(entry) = st.entries.get_mut(key) {
            entry.dense_operands = dense_operands;
        }
        drop(st);
        self.changed.notify_all();
    }

    /// Reads the spilled value of `key` back outside the lock, the entry a placeholder
    /// meanwhile; a hit, or a miss holding that placeholder where the file cannot be read.
    /// The guard comes back where `key` has no spilled entry.
    fn restore<'a>(
        self: &Arc<Self>,
        mut st: MutexGuard<'a, State>,
        key: Lineage,
    ) -> Result<Probe, MutexGuard<'a, State>> {
        let token = st.new_token();
        let owner = std::thread::current().id();
        let Some(entry) = st.entries.get_mut(&key) else {
            return Err(st);
        };
        let file = match std::mem::replace(&mut entry.slot, Slot::Reserved { token, owner }) {
            Slot::Spilled(file) => file,
            other => {
                entry.slot = other;
                return Err(st);
            }
        };
        drop(st);
        // From here the placeholder is this reservation's: a panic below abandons it.
        let mut reservation = Reservation {
            inner: self.clone(),
            key: key.clone(),
            token,
            only_if_dear: false,
        };
        let read = spill::read(&file);
        let _ = std::fs::remove_file(&file.path);
        let mut st = self.lock();
        match read {
            Ok((m, took)) => {
                st.spiller
                    .measured(file.disk_bytes, took, file.sparse, true);
                reservation.token = 0;
                let value = Value::matrix(m);
                let size = value_bytes(&value);
                // Cannot fail: the value fit the budget before, and every other byte held is
                // evictable (placeholders hold none).
                if size > self.budget || !st.make_space(size, self.budget) {
                    st.stats.restore_failures += 1;
                    st.stats.misses += 1;
                    reservation.token = token;
                    return Ok(Probe::Miss(reservation));
                }
                st.stats.restores += 1;
                st.install(self.policy, &key, value.clone(), size, None);
                st.hit(self.policy, &key);
                drop(st);
                self.changed.notify_all();
                Ok(Probe::Hit { key, value })
            }
            Err(_) => {
                st.stats.restore_failures += 1;
                st.stats.misses += 1;
                Ok(Probe::Miss(reservation))
            }
        }
    }
}

impl Drop for Inner {
    /// Removes the spill files of this cache's entries once the last handle (a clone, or a
    /// reservation) is gone; the spill directory itself goes with the spiller.
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        for entry in st.entries.values() {
            if let Slot::Spilled(file) = &entry.slot {
                let _ = std::fs::remove_file(&file.path);
            }
        }
        st.entries.clear();
    }
}
