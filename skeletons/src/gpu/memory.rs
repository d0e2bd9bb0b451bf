//! Device memory manager for GPU skeletons: recycling of device buffers and the lineage reuse
//! cache of device values, after MEMPHIS (EDBT 2025) section 4.2, with delayed caching
//! (section 5.2).
//!
//! Allocating and freeing device memory synchronizes the device and fragments it, so buffers
//! are never freed while they may be needed again: a buffer the caller no longer uses goes to
//! a free list keyed by its exact size, and a value worth reusing stays on the device as a
//! cached value keyed by its lineage. The cache has no size of its own ("moving boundaries"):
//! it grows into whatever device memory the live buffers leave, and shrinks by eviction only
//! when an allocation fails.
//!
//! Every buffer is in exactly one state: *live* (referenced by callers, not cached), *cached*
//! (holds the value of a lineage key; *pinned* while referenced, evictable otherwise) or
//! *free* (no value; waiting to be recycled). Buffers come from a [`DeviceAllocator`] (cudarc
//! for a real device, a counting fake in tests), so this module needs no GPU.

use lafuse_core::Fault;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::Hash;

/// Where device buffers come from and go back to.
pub trait DeviceAllocator {
    /// One device allocation; the manager owns it until it hands it back through `free`.
    type Buffer;
    /// A new buffer of exactly `bytes` bytes, or `OutOfDeviceMemory` if the device cannot
    /// give one now (the manager then recycles, evicts and asks again).
    fn allocate(&mut self, bytes: usize) -> Result<Self::Buffer, OutOfDeviceMemory>;
    /// Return `buffer` to the device.
    fn free(&mut self, buffer: Self::Buffer);
}

/// The allocator's answer when the device has no room for a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfDeviceMemory;

/// A handle to a buffer the manager owns: small and `Copy`. The generation makes a handle
/// kept past the buffer's return to the device fail loudly instead of naming a new buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufferId {
    slot: u32,
    generation: u32,
}

/// What the eviction score of a cached value is computed from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CacheMeta {
    /// `h(o)`: the height of the value's lineage DAG (a leaf is 1; 0 counts as 1).
    pub lineage_height: u32,
    /// `c(o)`: the estimated cost to recompute the value, in any unit used consistently
    /// (seconds, flops); only ratios between cached values matter.
    pub compute_cost: f64,
}

/// What [`DeviceMemory::cache`] did with a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Put {
    /// The buffer now holds the key's cached value.
    Cached,
    /// Delayed caching: the key has not occurred often enough yet; the buffer stays live and
    /// uncached, and the caller releases it as usual.
    Deferred,
    /// The key already has a cached value (the same lineage computed twice); the buffer
    /// stays live and uncached.
    AlreadyCached,
}

/// Counters of a [`DeviceMemory`]; `Display` prints the block for `--stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceMemoryStats {
    /// Buffers obtained from the allocator (driver allocations).
    pub allocations: u64,
    /// Buffers returned to the allocator (driver frees).
    pub frees: u64,
    /// Requests served by an exact-size buffer already held (no driver call).
    pub recycled: u64,
    /// Lookups that found a cached value.
    pub hits: u64,
    /// Lookups that found none.
    pub misses: u64,
    /// Puts deferred by delayed caching.
    pub deferred: u64,
    /// Cached values dropped to make room (or by [`DeviceMemory::evict`]).
    pub evictions: u64,
    /// Bytes in live buffers.
    pub live_bytes: usize,
    /// Bytes in cached values, pinned or not.
    pub cached_bytes: usize,
    /// Bytes in free buffers.
    pub free_bytes: usize,
    /// The most bytes held from the allocator at any time.
    pub peak_bytes: usize,
}

/// An allocation that failed after every free buffer was returned and every unpinned cached
/// value evicted: what is left is in use by the running computation, so the data does not fit
/// on the device (a resource limit, not a bug).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceOutOfMemory {
    /// Bytes asked for.
    pub requested: usize,
    /// Bytes in live buffers.
    pub live_bytes: usize,
    /// Bytes in cached values, all pinned by running kernels at this point (no free buffer
    /// is left either: all were returned to the device).
    pub cached_bytes: usize,
}

impl DeviceOutOfMemory {
    /// Always a resource error: the device is too small for what the script needs at once.
    pub fn fault(&self) -> Fault {
        Fault::Resource
    }
}

impl fmt::Display for DeviceOutOfMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "GPU out of memory: {} requested while {} are live and {} cached and pinned by \
             running kernels, after freeing every free buffer and evicting every other cached \
             value; the data does not fit on the device",
            Bytes(self.requested),
            Bytes(self.live_bytes),
            Bytes(self.cached_bytes),
        )
    }
}

impl std::error::Error for DeviceOutOfMemory {}

enum State<K> {
    Live {
        refs: u32,
    },
    Cached {
        key: K,
        refs: u32,
        meta: CacheMeta,
        last_access: u64,
    },
    Free,
}

struct Held<K, B> {
    buffer: B,
    bytes: usize,
    state: State<K>,
}

struct Slot<K, B> {
    generation: u32,
    held: Option<Held<K, B>>,
}

/// Device buffers and the lineage cache of device values (MEMPHIS section 4.2).
///
/// Reference counting follows MEMPHIS: [`acquire`](Self::acquire), a [`lookup`](Self::lookup)
/// hit and [`pin`](Self::pin) each take one reference, [`release`](Self::release) drops one.
/// A buffer with references is never recycled or evicted; an unreferenced uncached buffer goes
/// to the free list, an unreferenced cached one stays cached and becomes evictable.
pub struct DeviceMemory<K: Eq + Hash + Clone, A: DeviceAllocator> {
    allocator: A,
    /// Delayed caching: a key is cached on its `delay + 1`-th put (MEMPHIS's delay factor `n`
    /// is `delay + 1`; 0 caches at once).
    delay: u32,
    slots: Vec<Slot<K, A::Buffer>>,
    vacant: Vec<u32>,
    /// Free buffers by exact size, each a stack (the most recently freed is recycled first).
    free: BTreeMap<usize, Vec<u32>>,
    cache: HashMap<K, u32>,
    /// Puts seen per key not cached yet (delayed caching's TO-BE-CACHED entries).
    seen: HashMap<K, u32>,
    /// Logical clock: ticks on every put, hit and pin, so eviction order is deterministic.
    clock: u64,
    stats: DeviceMemoryStats,
}

impl<K: Eq + Hash + Clone, A: DeviceAllocator> DeviceMemory<K, A> {
    /// A manager over `allocator` that caches a key on its `delay + 1`-th put.
    pub fn new(allocator: A, delay: u32) -> Self {
        DeviceMemory {
            allocator,
            delay,
            slots: Vec::new(),
            vacant: Vec::new(),
            free: BTreeMap::new(),
            cache: HashMap::new(),
            seen: HashMap::new(),
            clock: 0,
            stats: DeviceMemoryStats::default(),
        }
    }

    /// The allocator, e.g. for the device context it wraps.
    pub fn allocator(&self) -> &A {
        &self.allocator
    }

    /// A live buffer of exactly `bytes` bytes with one reference (MEMPHIS Algorithm 1, in the
    /// order SystemDS's `GPUMemoryManager.malloc` runs it):
    /// 1. recycle a free buffer of exactly this size: it holds no value, so this loses nothing
    ///    and saves a driver call;
    /// 2. allocate while the device has room, so that cached values stay (MEMPHIS recycles
    ///    only once the device is full);
    /// 3. recycle the lowest-scored unpinned cached value of exactly this size, since
    ///    exact-size recycling avoids the device synchronization and fragmentation of
    ///    free-and-allocate;
    /// 4. free free buffers, first the one just larger than the request, then the largest
    ///    ones, allocating once the bytes freed cover the request and again once none is
    ///    left (Algorithm 1 lines 5-19);
    /// 5. evict unpinned cached values lowest score first, freeing each and allocating after
    ///    each (MAKE_SPACE).
    ///
    /// Only when all of that fails is it an error, with the bytes still held.
    pub fn acquire(&mut self, bytes: usize) -> Result<BufferId, DeviceOutOfMemory> {
        if let Some(slot) = self.pop_free(bytes) {
            return Ok(self.recycle(slot));
        }
        if let Some(id) = self.try_allocate(bytes) {
            return Ok(id);
        }
        if let Some(slot) = self.victim(Some(bytes)) {
            self.drop_value(slot);
            return Ok(self.recycle(slot));
        }
        let mut freed = 0;
        while let Some(slot) = self.free_victim(bytes.saturating_sub(freed)) {
            freed += self.held(slot).bytes;
            self.return_to_device(slot);
            if freed >= bytes {
                if let Some(id) = self.try_allocate(bytes) {
                    return Ok(id);
                }
            }
        }
        // Algorithm 1 lines 17-19: the free list is empty; the device's spare bytes may make
        // up what the freed ones lacked.
        if freed > 0 && freed < bytes {
            if let Some(id) = self.try_allocate(bytes) {
                return Ok(id);
            }
        }
        while let Some(slot) = self.victim(None) {
            self.drop_value(slot);
            self.return_to_device(slot);
            if let Some(id) = self.try_allocate(bytes) {
                return Ok(id);
            }
        }
        let s = &self.stats;
        Err(DeviceOutOfMemory {
            requested: bytes,
            live_bytes: s.live_bytes,
            cached_bytes: s.cached_bytes,
        })
    }

    /// Drops one reference to `id` (from `acquire`, a `lookup` hit or `pin`). An uncached
    /// buffer without references goes to the free list, never back to the device; a cached
    /// one stays cached and becomes evictable.
    ///
    /// # Panics
    /// If `id` has no reference to drop (a bug in the caller, lafuse).
    pub fn release(&mut self, id: BufferId) {
        let slot = self.check(id);
        match &mut self.held_mut(slot).state {
            State::Live { refs } if *refs > 1 => *refs -= 1,
            State::Live { .. } => {
                self.set_state(slot, State::Free);
                self.push_free(slot);
            }
            State::Cached { refs, .. } if *refs > 0 => *refs -= 1,
            _ => panic!("lafuse bug: release of GPU buffer {id:?} that has no reference"),
        }
    }

    /// Takes one more reference to a live buffer or cached value, so it is neither recycled
    /// nor evicted while a kernel reads it; [`release`](Self::release) drops it.
    ///
    /// # Panics
    /// If `id` names a free buffer or one returned to the device (a bug in lafuse).
    pub fn pin(&mut self, id: BufferId) {
        let slot = self.check(id);
        let now = self.tick();
        match &mut self.held_mut(slot).state {
            State::Live { refs } => *refs += 1,
            State::Cached {
                refs, last_access, ..
            } => {
                *refs += 1;
                *last_access = now;
            }
            State::Free => panic!("lafuse bug: pin of free GPU buffer {id:?}"),
        }
    }

    /// The cached value of `key`, pinned (one reference, which the caller releases), or `None`
    /// (a miss; a key whose caching is still delayed misses too).
    pub fn lookup(&mut self, key: &K) -> Option<BufferId> {
        let Some(&slot) = self.cache.get(key) else {
            self.stats.misses += 1;
            return None;
        };
        self.stats.hits += 1;
        let id = self.id(slot);
        self.pin(id);
        Some(id)
    }

    /// Whether `key` has a cached value (no access: statistics and scores are unchanged).
    pub fn contains(&self, key: &K) -> bool {
        self.cache.contains_key(key)
    }

    /// Offers live buffer `id` as the value of `key` (MEMPHIS PUT). With delayed caching the
    /// first `delay` puts of a key are only counted; the next one caches. A cached buffer
    /// keeps the caller's references (it is pinned until they are released) and is owned by
    /// the cache from then on: releasing it does not free it.
    ///
    /// # Panics
    /// If `id` is not a live buffer (a bug in lafuse).
    pub fn cache(&mut self, key: K, id: BufferId, meta: CacheMeta) -> Put {
        let slot = self.check(id);
        let refs = match self.held(slot).state {
            State::Live { refs } => refs,
            _ => panic!("lafuse bug: caching GPU buffer {id:?}, which is not live"),
        };
        if self.cache.contains_key(&key) {
            return Put::AlreadyCached;
        }
        let seen = self.seen.entry(key.clone()).or_insert(0);
        if *seen < self.delay {
            *seen += 1;
            self.stats.deferred += 1;
            return Put::Deferred;
        }
        self.seen.remove(&key);
        let last_access = self.tick();
        self.cache.insert(key.clone(), slot);
        self.set_state(
            slot,
            State::Cached {
                key,
                refs,
                meta,
                last_access,
            },
        );
        Put::Cached
    }

    /// Eviction injection (MEMPHIS section 5.2): evicts unpinned cached values, lowest score
    /// first, until `fraction` (0 to 1) of their bytes are gone, before an allocation pattern
    /// shift makes the incremental eviction of `acquire` expensive. The buffers join the free
    /// list. Returns the bytes evicted.
    pub fn evict(&mut self, fraction: f64) -> usize {
        let evictable: usize = self.evictable(None).map(|slot| self.held(slot).bytes).sum();
        let target = (evictable as f64 * fraction.clamp(0.0, 1.0)).ceil() as usize;
        let mut evicted = 0;
        while evicted < target {
            let Some(slot) = self.victim(None) else { break };
            evicted += self.held(slot).bytes;
            self.drop_value(slot);
            self.push_free(slot);
        }
        evicted
    }

    /// The device buffer behind `id`.
    ///
    /// # Panics
    /// If `id` names a buffer returned to the device (a bug in lafuse).
    pub fn buffer(&self, id: BufferId) -> &A::Buffer {
        &self.held(self.check(id)).buffer
    }

    /// The device buffer behind `id`, to write into (an upload, a kernel's output).
    ///
    /// # Panics
    /// If `id` names a buffer returned to the device (a bug in lafuse).
    pub fn buffer_mut(&mut self, id: BufferId) -> &mut A::Buffer {
        let slot = self.check(id);
        &mut self.held_mut(slot).buffer
    }

    /// The size of the buffer behind `id`, in bytes.
    pub fn bytes(&self, id: BufferId) -> usize {
        self.held(self.check(id)).bytes
    }

    /// The counters so far.
    pub fn stats(&self) -> DeviceMemoryStats {
        self.stats
    }

    /// Returns every buffer to the allocator, once each, and forgets the cache and the
    /// delayed-caching counts; handles still held become invalid (using one panics).
    pub fn clear(&mut self) {
        for slot in 0..self.slots.len() as u32 {
            if self.slots[slot as usize].held.is_some() {
                self.return_to_device(slot);
            }
        }
        self.free.clear();
        self.cache.clear();
        self.seen.clear();
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn id(&self, slot: u32) -> BufferId {
        BufferId {
            slot,
            generation: self.slots[slot as usize].generation,
        }
    }

    fn held(&self, slot: u32) -> &Held<K, A::Buffer> {
        let held = self.slots[slot as usize].held.as_ref();
        held.expect("lafuse bug: GPU slot is empty")
    }

    fn held_mut(&mut self, slot: u32) -> &mut Held<K, A::Buffer> {
        let held = self.slots[slot as usize].held.as_mut();
        held.expect("lafuse bug: GPU slot is empty")
    }

    fn check(&self, id: BufferId) -> u32 {
        match self.slots.get(id.slot as usize) {
            Some(s) if s.generation == id.generation && s.held.is_some() => id.slot,
            _ => panic!("lafuse bug: GPU buffer {id:?} was returned to the device"),
        }
    }

    fn try_allocate(&mut self, bytes: usize) -> Option<BufferId> {
        let buffer = self.allocator.allocate(bytes).ok()?;
        self.stats.allocations += 1;
        self.stats.live_bytes += bytes;
        let s = &mut self.stats;
        s.peak_bytes = s
            .peak_bytes
            .max(s.live_bytes + s.cached_bytes + s.free_bytes);
        let held = Some(Held {
            buffer,
            bytes,
            state: State::Live { refs: 1 },
        });
        let slot = match self.vacant.pop() {
            Some(slot) => {
                self.slots[slot as usize].held = held;
                slot
            }
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    held,
                });
                self.slots.len() as u32 - 1
            }
        };
        Some(self.id(slot))
    }

    fn pop_free(&mut self, bytes: usize) -> Option<u32> {
        let stack = self.free.get_mut(&bytes)?;
        let slot = stack.pop();
        if stack.is_empty() {
            self.free.remove(&bytes);
        }
        slot
    }

    /// Puts `slot` in `state`, moving its bytes between the live, cached and free counters;
    /// returns the state it leaves.
    fn set_state(&mut self, slot: u32, state: State<K>) -> State<K> {
        let bytes = self.held(slot).bytes;
        *self.stats.bytes_in(&state) += bytes;
        let old = std::mem::replace(&mut self.held_mut(slot).state, state);
        *self.stats.bytes_in(&old) -= bytes;
        old
    }

    fn push_free(&mut self, slot: u32) {
        let bytes = self.held(slot).bytes;
        self.free.entry(bytes).or_default().push(slot);
    }

    /// A free buffer (taken out of the free list) turned live with one reference.
    fn recycle(&mut self, slot: u32) -> BufferId {
        self.set_state(slot, State::Live { refs: 1 });
        self.stats.recycled += 1;
        self.id(slot)
    }

    /// The free buffer to return to the device when `need` more bytes are wanted (Algorithm 1
    /// GETFREEPOINTERLARGERTHAN / NOTEXACT): the smallest one of at least `need` bytes, else
    /// the largest; taken out of the free list.
    fn free_victim(&mut self, need: usize) -> Option<u32> {
        let size = match self.free.range(need..).next() {
            Some((&size, _)) => size,
            None => *self.free.keys().next_back()?,
        };
        self.pop_free(size)
    }

    /// Returns a buffer that is in no list (or any buffer, from `clear`) to the allocator.
    fn return_to_device(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        let held = s.held.take().expect("lafuse bug: GPU slot is empty");
        s.generation = s.generation.wrapping_add(1);
        self.vacant.push(slot);
        *self.stats.bytes_in(&held.state) -= held.bytes;
        self.stats.frees += 1;
        self.allocator.free(held.buffer);
    }

    /// Evicts an unpinned cached value: the key leaves the cache and the buffer becomes free,
    /// in no list yet (the caller recycles it, returns it or lists it). The key is remembered as proven, so its next put caches at once (as
    /// SystemDS does for keys evicted before).
    fn drop_value(&mut self, slot: u32) {
        let State::Cached { key, .. } = self.set_state(slot, State::Free) else {
            unreachable!("only cached values are evicted")
        };
        self.stats.evictions += 1;
        self.cache.remove(&key);
        self.seen.insert(key, self.delay);
    }

    /// The unpinned cached value to evict next, only among those of `size` bytes if given:
    /// the one with the lowest MEMPHIS score (section 4.2, equation 2),
    ///
    /// `score(o) = T_a(o) + 1/h(o) + c(o)`, the argmin evicted, where
    /// * `T_a(o) = last_access / clock`, the normalized last access (in (0, 1]): recently
    ///   used values stay, e.g. for reuse within a mini-batch;
    /// * `h(o)` is the lineage height (at least 1): values with short lineage (input data
    ///   pipelines sliced from the inputs) stay, deep forward/backward intermediates go;
    /// * `c(o) = compute_cost / max compute_cost` over the candidates (in [0, 1]): the
    ///   cheapest to recompute go first. The paper leaves `c` unnormalized; normalizing keeps
    ///   the three terms comparable whatever unit the caller's costs are in.
    ///
    /// Ties go to the older access. A linear scan, since the normalization depends on the
    /// current candidates, which a heap ordered at insert time would not see.
    fn victim(&self, size: Option<usize>) -> Option<u32> {
        let max_cost = self
            .evictable(size)
            .map(|slot| self.meta(slot).0.compute_cost)
            .fold(0.0, f64::max);
        let score = |slot: u32| {
            let (meta, last_access) = self.meta(slot);
            let cost = if max_cost > 0.0 {
                (meta.compute_cost.max(0.0) / max_cost).min(1.0)
            } else {
                0.0
            };
            let t_a = last_access as f64 / self.clock.max(1) as f64;
            (
                t_a + 1.0 / f64::from(meta.lineage_height.max(1)) + cost,
                last_access,
            )
        };
        self.evictable(size)
            .min_by(|&a, &b| score(a).partial_cmp(&score(b)).expect("finite scores"))
    }

    /// The unpinned cached values, only those of `size` bytes if given.
    fn evictable(&self, size: Option<usize>) -> impl Iterator<Item = u32> + '_ {
        self.cache.values().copied().filter(move |&slot| {
            let h = self.held(slot);
            matches!(h.state, State::Cached { refs: 0, .. }) && size.is_none_or(|s| s == h.bytes)
        })
    }

    fn meta(&self, slot: u32) -> (CacheMeta, u64) {
        match self.held(slot).state {
            State::Cached {
                meta, last_access, ..
            } => (meta, last_access),
            _ => unreachable!("the cache map names cached buffers only"),
        }
    }
}

impl<K: Eq + Hash + Clone, A: DeviceAllocator> Drop for DeviceMemory<K, A> {
    fn drop(&mut self) {
        self.clear();
    }
}

impl DeviceMemoryStats {
    /// The counter of the bytes in buffers in `state`.
    fn bytes_in<K>(&mut self, state: &State<K>) -> &mut usize {
        match state {
            State::Live { .. } => &mut self.live_bytes,
            State::Cached { .. } => &mut self.cached_bytes,
            State::Free => &mut self.free_bytes,
        }
    }
}

/// A byte count printed with a binary unit.
struct Bytes(usize);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
        if self.0 < 1024 {
            return write!(f, "{} B", self.0);
        }
        let (mut v, mut unit) = (self.0 as f64 / 1024.0, 0);
        while v >= 1024.0 && unit < UNITS.len() - 1 {
            v /= 1024.0;
            unit += 1;
        }
        write!(f, "{v:.1} {}", UNITS[unit])
    }
}

impl fmt::Display for DeviceMemoryStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "GPU memory: {} allocations, {} frees, {} recycled, {} evictions",
            self.allocations, self.frees, self.recycled, self.evictions
        )?;
        writeln!(
            f,
            "GPU cache: {} hits, {} misses, {} deferred puts",
            self.hits, self.misses, self.deferred
        )?;
        write!(
            f,
            "GPU bytes: {} live, {} cached, {} free, {} peak",
            Bytes(self.live_bytes),
            Bytes(self.cached_bytes),
            Bytes(self.free_bytes),
            Bytes(self.peak_bytes)
        )
    }
}

#[cfg(test)]
mod tests;
