//! The reuse cache's bookkeeping under its lock: the entries (placeholder, in memory or
//! spilled), the eviction queue, and how a put makes room.

use super::score::{EvictionPolicy, Facts, ScoreKey};
use super::spill::{self, SpillFile, Spiller};
use super::CacheStats;
use crate::lineage::Lineage;
use crate::value::Value;
use std::collections::{BTreeMap, HashMap};
use std::thread::ThreadId;
use std::time::Duration;

pub(super) struct State {
    pub(super) entries: HashMap<Lineage, Entry>,
    /// The in-memory entries in eviction order, the first evicted first.
    pub(super) queue: BTreeMap<ScoreKey, Lineage>,
    pub(super) next_token: u64,
    pub(super) next_seq: u64,
    /// The logical time of accesses, for LRU and tie-breaking.
    pub(super) clock: u64,
    pub(super) bytes: usize,
    /// Accesses (`r_h + r_m`) of entries evicted without a spill, by their key's hash: a
    /// later miss of the same item continues the count, as LIMA's `r_m` does. Hashes, not
    /// items, so that no lineage DAG is kept alive; a collision only shifts a score.
    pub(super) history: HashMap<u64, u64>,
    /// Requests of items not cached, by hash, for delayed caching.
    pub(super) requests: HashMap<u64, u32>,
    pub(super) stats: CacheStats,
    pub(super) spiller: Spiller,
}

/// `history` is forgotten once it holds this many items, to stay small.
const HISTORY_LIMIT: usize = 1 << 16;

pub(super) struct Entry {
    pub(super) slot: Slot,
    /// In-memory bytes of the value (0 while a placeholder).
    pub(super) size: usize,
    pub(super) compute: Duration,
    /// `r_h + r_m` of LIMA's Cost&Size score.
    pub(super) accesses: u64,
    pub(super) last_access: u64,
    pub(super) height: u32,
    /// Whether the value was computed from dense operands only, so by the dense kernels,
    /// whose per-cell arithmetic partial reuse can continue exactly (see
    /// [`super::ReuseCache::put_computed`]).
    pub(super) dense_operands: bool,
}

pub(super) enum Slot {
    Reserved { token: u64, owner: ThreadId },
    Memory { value: Value, queued: ScoreKey },
    Spilled(SpillFile),
}

impl State {
    pub(super) fn new(spiller: Spiller) -> State {
        State {
            entries: HashMap::new(),
            queue: BTreeMap::new(),
            next_token: 1,
            next_seq: 0,
            clock: 0,
            bytes: 0,
            history: HashMap::new(),
            requests: HashMap::new(),
            stats: CacheStats::default(),
            spiller,
        }
    }

    /// Counts a request of the item with hash `hash` that is not cached; how many there were.
    pub(super) fn note_request(&mut self, hash: u64) -> u32 {
        if self.requests.len() >= HISTORY_LIMIT {
            self.requests.clear();
        }
        let n = self.requests.entry(hash).or_insert(0);
        *n = n.saturating_add(1);
        *n
    }

    /// Whether `key`'s entry is the placeholder `token`.
    pub(super) fn holds(&self, key: &Lineage, token: u64) -> bool {
        matches!(
            self.entries.get(key),
            Some(Entry { slot: Slot::Reserved { token: t, .. }, .. }) if *t == token
        )
    }

    pub(super) fn new_token(&mut self) -> u64 {
        let t = self.next_token;
        self.next_token += 1;
        t
    }

    /// Puts `value` into the placeholder of `key` (which must be there) and queues it;
    /// `compute` is `None` for a value read back, which keeps its compute time.
    pub(super) fn install(
        &mut self,
        policy: EvictionPolicy,
        key: &Lineage,
        value: Value,
        size: usize,
        compute: Option<Duration>,
    ) {
        self.clock += 1;
        let (clock, seq) = (self.clock, self.next_seq);
        self.next_seq += 1;
        // The queue names the entry by the cache's own key item.
        let Some(key) = self.entries.get_key_value(key).map(|(k, _)| k.clone()) else {
            return;
        };
        let Some(entry) = self.entries.get_mut(&key) else {
            return;
        };
        if let Some(c) = compute {
            entry.compute = c;
        }
        entry.size = size;
        entry.last_access = clock;
        let queued = policy.score(&entry.facts(), seq);
        entry.slot = Slot::Memory { value, queued };
        self.queue.insert(queued, key);
        self.bytes += size;
        self.stats.peak_bytes = self.stats.peak_bytes.max(self.bytes);
    }

    /// Counts a hit of the in-memory entry `key` and moves it in the eviction order (LRU:
    /// now the newest; Cost&Size: one more access).
    pub(super) fn hit(&mut self, policy: EvictionPolicy, key: &Lineage) {
        self.clock += 1;
        let (clock, seq) = (self.clock, self.next_seq);
        self.next_seq += 1;
        let Some(entry) = self.entries.get_mut(key) else {
            return;
        };
        entry.accesses += 1;
        entry.last_access = clock;
        self.stats.hits += 1;
        self.stats.saved_compute = self.stats.saved_compute.saturating_add(entry.compute);
        let facts = entry.facts();
        if let Slot::Memory { queued, .. } = &mut entry.slot {
            if let Some(k) = self.queue.remove(queued) {
                *queued = policy.score(&facts, seq);
                self.queue.insert(*queued, k);
            }
        }
    }

    /// Evicts in queue order until `need` more bytes fit the budget; false where even an
    /// empty queue leaves too little room.
    pub(super) fn make_space(&mut self, need: usize, budget: usize) -> bool {
        while self.bytes.saturating_add(need) > budget {
            let Some((_, key)) = self.queue.pop_first() else {
                return false;
            };
            let Some((key, mut entry)) = self.entries.remove_entry(&key) else {
                continue;
            };
            let Slot::Memory { value, .. } = std::mem::replace(
                &mut entry.slot,
                Slot::Reserved {
                    token: 0,
                    owner: std::thread::current().id(),
                },
            ) else {
                // Only in-memory entries are queued; anything else goes back untouched.
                self.entries.insert(key, entry);
                continue;
            };
            self.bytes -= entry.size;
            self.stats.evictions += 1;
            if let Some(file) = self.spill(&value, entry.compute) {
                entry.slot = Slot::Spilled(file);
                entry.size = 0;
                self.stats.spills += 1;
                self.entries.insert(key, entry);
            } else {
                self.remember(key.hash(), entry.accesses);
            }
        }
        true
    }

    /// Writes an evicted value to disk where that is allowed, worth it and exact.
    fn spill(&mut self, value: &Value, compute: Duration) -> Option<SpillFile> {
        let Value::Matrix(m) = value else {
            return None;
        };
        if !self.spiller.enabled()
            || !self.spiller.worth_spilling(m, compute)
            || !spill::round_trips_exactly(m)
        {
            return None;
        }
        self.spiller.write(m)
    }

    /// Keeps the accesses of an entry that leaves the cache for its item's next miss.
    pub(super) fn remember(&mut self, hash: u64, accesses: u64) {
        if self.history.len() >= HISTORY_LIMIT {
            self.history.clear();
        }
        *self.history.entry(hash).or_insert(0) += accesses;
    }
}

impl Entry {
    fn facts(&self) -> Facts {
        Facts {
            compute: self.compute,
            size: self.size,
            accesses: self.accesses,
            last_access: self.last_access,
            height: self.height,
        }
    }
}
