//! Tests of the reuse cache: hits and misses over structurally equal items, the budget under
//! random interleavings, each eviction policy's choice, spilling bit for bit, and placeholders
//! under concurrent probes.

use super::*;
use crate::matrix::{DenseMatrix, SparseMatrix};
use proptest::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;

/// `read X` then `op` over it: a fresh item each call, equal to every other call's.
fn item(op: &str) -> Lineage {
    Lineage::instruction(op, "", vec![Lineage::creation("read", "X.csv")])
}

/// An item of height `h`: a chain of `h - 1` instructions over a read.
fn chain(name: &str, h: u32) -> Lineage {
    let mut x = Lineage::creation("read", name);
    for _ in 1..h {
        x = Lineage::instruction("exp", "", vec![x]);
    }
    x
}

/// A dense `n x 1` matrix filled with `v`.
fn dense(n: usize, v: f64) -> Value {
    Value::matrix(Matrix::Dense(DenseMatrix::filled(n, 1, v).unwrap()))
}

fn config(budget: usize, policy: EvictionPolicy, spill: bool) -> CacheConfig {
    CacheConfig {
        budget,
        policy,
        spill_dir: None,
        spill,
        delay: 1,
    }
}

/// Whether two matrices are the same format, shape and bits (NaN payloads and signed zeros
/// included), which `PartialEq` on `f64` cannot say.
fn same_bits(a: &Matrix, b: &Matrix) -> bool {
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    match (a, b) {
        (Matrix::Dense(a), Matrix::Dense(b)) => {
            a.shape_eq(b) && a.nnz == b.nnz && bits(&a.values) == bits(&b.values)
        }
        (Matrix::Sparse(a), Matrix::Sparse(b)) => {
            (a.rows, a.cols) == (b.rows, b.cols)
                && *a.row_ptr == *b.row_ptr
                && *a.col_idx == *b.col_idx
                && bits(&a.values) == bits(&b.values)
        }
        _ => false,
    }
}

trait ShapeEq {
    fn shape_eq(&self, other: &Self) -> bool;
}
impl ShapeEq for DenseMatrix {
    fn shape_eq(&self, other: &Self) -> bool {
        (self.rows, self.cols) == (other.rows, other.cols)
    }
}

/// Probes `item`, expecting a miss, and puts `value` computed in `compute`.
fn miss_and_put(cache: &ReuseCache, item: &Lineage, value: &Value, compute: Duration) {
    match cache.probe(item) {
        Probe::Miss(r) => cache.put(r, value, compute),
        Probe::Hit { .. } => panic!("{item:?} should miss"),
    }
}

fn expect_hit(cache: &ReuseCache, item: &Lineage) -> (Lineage, Value) {
    match cache.probe(item) {
        Probe::Hit { key, value } => (key, value),
        Probe::Miss(_) => panic!("{item:?} should hit"),
    }
}

#[test]
fn equal_items_hit_and_return_the_cache_key() {
    let cache = ReuseCache::new(CacheConfig::with_budget(1 << 20));
    let first = item("exp");
    let value = dense(10, 2.5);
    miss_and_put(&cache, &first, &value, Duration::from_millis(3));
    // A distinct but structurally equal item hits, and gets the cache's own key back.
    let other = item("exp");
    assert!(!other.same(&first));
    let (key, got) = expect_hit(&cache, &other);
    assert!(key.same(&first), "the key is the item that was put");
    assert_eq!(got, value);
    // A different item misses; dropping its reservation leaves nothing behind.
    match cache.probe(&item("log")) {
        Probe::Miss(r) => assert_eq!(r.key(), &item("log")),
        Probe::Hit { .. } => panic!("log(X) was never put"),
    }
    assert_eq!(cache.state(&item("log")), None);
    let s = cache.stats();
    assert_eq!((s.hits, s.misses, s.puts, s.evictions), (1, 2, 1, 0));
    assert_eq!(s.saved_compute, Duration::from_millis(3));
    assert_eq!(s.bytes, value_bytes(&value));
    assert_eq!(s.peak_bytes, value_bytes(&value));
    // Scalars are cached too.
    miss_and_put(&cache, &item("sum"), &Value::Double(7.0), Duration::ZERO);
    assert_eq!(expect_hit(&cache, &item("sum")).1, Value::Double(7.0));
}

#[test]
fn sizes_count_the_buffers() {
    let header = std::mem::size_of::<Value>() + std::mem::size_of::<Matrix>();
    assert_eq!(value_bytes(&dense(100, 1.0)), 800 + header);
    let csr = Matrix::from_triples(10, 10, vec![(0, 0, 1.0), (9, 9, 2.0)]).unwrap();
    assert!(csr.is_sparse());
    assert_eq!(value_bytes(&Value::matrix(csr)), 11 * 8 + 2 * 12 + header);
    assert_eq!(value_bytes(&Value::Int(1)), std::mem::size_of::<Value>());
}

#[test]
fn a_value_larger_than_the_budget_is_not_cached() {
    let cache = ReuseCache::new(config(1000, EvictionPolicy::CostSize, false));
    miss_and_put(&cache, &item("a"), &dense(10, 1.0), Duration::from_secs(1));
    miss_and_put(
        &cache,
        &item("b"),
        &dense(1000, 1.0),
        Duration::from_secs(1),
    );
    assert_eq!(cache.state(&item("b")), None);
    assert_eq!(
        cache.state(&item("a")),
        Some(EntryState::InMemory),
        "nothing evicted"
    );
    assert_eq!(cache.stats().rejected, 1);
    // A zero budget caches nothing at all.
    let none = ReuseCache::new(config(0, EvictionPolicy::Lru, false));
    miss_and_put(&none, &item("c"), &Value::Bool(true), Duration::ZERO);
    assert_eq!(none.state(&item("c")), None);
    assert_eq!(none.bytes(), 0);
}

#[test]
fn a_borrowed_matrix_is_cached_as_a_copy() {
    let cells = vec![1.0, 2.0, 3.0];
    let cache = ReuseCache::new(CacheConfig::with_budget(1 << 20));
    {
        // SAFETY: the matrix (and the value holding it) drops before `cells`.
        let values = unsafe { crate::buffer::Buffer::borrowed(&cells) };
        let m = Matrix::Dense(DenseMatrix {
            rows: 3,
            cols: 1,
            values,
            nnz: 3,
        });
        assert!(m.is_borrowed());
        miss_and_put(&cache, &item("exp"), &Value::matrix(m), Duration::ZERO);
    }
    let (_, got) = expect_hit(&cache, &item("exp"));
    let m = got.as_matrix().unwrap();
    assert!(!m.is_borrowed());
    assert_eq!(m.get(2, 0), 3.0);
}

/// Three values of equal size fill the budget; a fourth evicts the one the policy ranks
/// lowest.
fn three_and_one(policy: EvictionPolicy) -> (ReuseCache, [Lineage; 4]) {
    let v = dense(100, 1.0);
    let cache = ReuseCache::new(config(3 * value_bytes(&v), policy, false));
    let items = [chain("A", 3), chain("B", 1), chain("C", 2), chain("D", 2)];
    let compute = [10, 1, 5, 1].map(Duration::from_millis);
    for (i, c) in items.iter().zip(compute).take(3) {
        miss_and_put(&cache, i, &v, c);
    }
    (cache, items)
}

fn evicted(cache: &ReuseCache, items: &[Lineage]) -> Vec<usize> {
    (0..items.len())
        .filter(|&i| cache.state(&items[i]).is_none())
        .collect()
}

#[test]
fn lru_evicts_the_least_recently_used() {
    let (cache, items) = three_and_one(EvictionPolicy::Lru);
    expect_hit(&cache, &items[0]);
    miss_and_put(&cache, &items[3], &dense(100, 1.0), Duration::ZERO);
    // A was put first but hit since; B is the oldest access.
    assert_eq!(evicted(&cache, &items), vec![1]);
    assert_eq!(cache.stats().evictions, 1);
}

#[test]
fn dag_height_evicts_the_deepest_lineage() {
    let (cache, items) = three_and_one(EvictionPolicy::DagHeight);
    expect_hit(&cache, &items[0]);
    miss_and_put(&cache, &items[3], &dense(100, 1.0), Duration::ZERO);
    // A (height 3) goes although it is the most recent and the dearest.
    assert_eq!(evicted(&cache, &items), vec![0]);
}

#[test]
fn cost_size_evicts_the_least_compute_per_byte_times_accesses() {
    let (cache, items) = three_and_one(EvictionPolicy::CostSize);
    // Scores (accesses x ms per equal size): A 1 x 10, B 1 x 1, C 1 x 5 -> B goes.
    miss_and_put(
        &cache,
        &items[3],
        &dense(100, 1.0),
        Duration::from_millis(20),
    );
    assert_eq!(evicted(&cache, &items), vec![1]);

    // Accesses count: B hit nine times scores 10 x 1 and outlives C (1 x 5).
    let (cache, items) = three_and_one(EvictionPolicy::CostSize);
    for _ in 0..9 {
        expect_hit(&cache, &items[1]);
    }
    miss_and_put(
        &cache,
        &items[3],
        &dense(100, 1.0),
        Duration::from_millis(20),
    );
    assert_eq!(evicted(&cache, &items), vec![2]);

    // Size counts: of two values that took as long, the larger goes.
    let small = dense(100, 1.0);
    let large = dense(200, 1.0);
    let budget = value_bytes(&small) + value_bytes(&large);
    let cache = ReuseCache::new(config(budget, EvictionPolicy::CostSize, false));
    miss_and_put(&cache, &item("large"), &large, Duration::from_millis(5));
    miss_and_put(&cache, &item("small"), &small, Duration::from_millis(5));
    miss_and_put(&cache, &item("new"), &small, Duration::from_millis(50));
    assert_eq!(cache.state(&item("large")), None);
    assert_eq!(cache.state(&item("small")), Some(EntryState::InMemory));
}

#[test]
fn cost_size_remembers_the_accesses_of_evicted_items() {
    let v = dense(100, 1.0);
    let cache = ReuseCache::new(config(2 * value_bytes(&v), EvictionPolicy::CostSize, false));
    let (a, b, c) = (item("a"), item("b"), item("c"));
    miss_and_put(&cache, &a, &v, Duration::from_millis(1));
    for _ in 0..5 {
        expect_hit(&cache, &a);
    }
    miss_and_put(&cache, &b, &v, Duration::from_millis(4));
    // a (6 x 1) outscores b (1 x 4): c evicts b, then b's return evicts c (1 x 2).
    miss_and_put(&cache, &c, &v, Duration::from_millis(2));
    assert_eq!(cache.state(&b), None);
    miss_and_put(&cache, &b, &v, Duration::from_millis(4));
    assert_eq!(cache.state(&c), None);
    // b's second miss counts with its first (2 x 4 = 8 > 6): a goes next, not b, as it
    // would were b's accesses counted afresh (1 x 4 < 6).
    miss_and_put(&cache, &item("d"), &v, Duration::from_millis(100));
    assert_eq!(cache.state(&a), None);
    assert_eq!(cache.state(&b), Some(EntryState::InMemory));
}

/// Every special value, in both formats, and a dense matrix sparse enough that the reader
/// would store it as CSR.
fn awkward_matrices() -> Vec<Matrix> {
    let specials = [
        f64::NAN,
        -f64::NAN,
        f64::from_bits(0x7ff8_dead_beef_0001),
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::MIN_POSITIVE / 8.0,
        -0.0,
        1.0 / 3.0,
        f64::MAX,
    ];
    let mut values: Vec<f64> = (0..400).map(|i| i as f64 * 0.1 - 7.0).collect();
    for (i, v) in specials.iter().enumerate() {
        values[i * 41] = *v;
    }
    let dense = Matrix::Dense(DenseMatrix::new(20, 20, values.clone()).unwrap());
    let triples = specials
        .iter()
        .filter(|v| **v != 0.0)
        .enumerate()
        .map(|(i, &v)| (i * 3, (i * 7) % 30, v))
        .collect();
    let sparse = Matrix::from_triples(30, 30, triples).unwrap();
    assert!(sparse.is_sparse());
    let mut thin = vec![0.0; 100];
    thin[17] = f64::NAN;
    let thin = Matrix::Dense(DenseMatrix::new(10, 10, thin).unwrap());
    vec![dense, sparse, thin]
}

#[test]
fn spilled_values_come_back_bit_identical_and_the_directory_goes() {
    for m in awkward_matrices() {
        let value = Value::matrix(m.try_clone().unwrap());
        let size = value_bytes(&value);
        let cache = ReuseCache::new(config(size, EvictionPolicy::CostSize, true));
        let (a, b) = (item("a"), item("b"));
        // Dear to recompute: spilled rather than dropped.
        miss_and_put(&cache, &a, &value, Duration::from_secs(2));
        miss_and_put(&cache, &b, &dense(1, 0.0), Duration::ZERO);
        assert_eq!(cache.state(&a), Some(EntryState::Spilled));
        let dir = cache.spill_dir().expect("a spill made the directory");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        assert!(cache.bytes() <= size);

        let (key, got) = expect_hit(&cache, &a);
        assert!(key.same(&a));
        assert!(same_bits(got.as_matrix().unwrap(), &m), "{m:?}");
        // Reading back made room: b (cheap) was dropped, not spilled.
        assert_eq!(cache.state(&b), None);
        assert_eq!(cache.state(&a), Some(EntryState::InMemory));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "file removed");
        let s = cache.stats();
        assert_eq!((s.spills, s.restores, s.evictions), (1, 1, 2));
        assert_eq!(s.saved_compute, Duration::from_secs(2));
        assert!(s.bytes <= size);

        // Spilled again, then the cache drops: its directory goes with it.
        miss_and_put(&cache, &b, &dense(1, 0.0), Duration::ZERO);
        assert_eq!(cache.state(&a), Some(EntryState::Spilled));
        drop(cache);
        assert!(!dir.exists());
    }
}

#[test]
fn cheap_or_inexact_values_are_dropped_not_spilled() {
    let v = dense(100, 1.0);
    let cache = ReuseCache::new(config(value_bytes(&v), EvictionPolicy::Lru, true));
    // Quick to recompute: reading back would cost more.
    miss_and_put(&cache, &item("a"), &v, Duration::from_micros(10));
    miss_and_put(&cache, &item("b"), &v, Duration::from_secs(1));
    assert_eq!(cache.state(&item("a")), None);
    // A dense matrix whose reader would turn it CSR and lose its -0.0 cells.
    let mut thin = vec![0.0; 100];
    thin[3] = -0.0;
    thin[50] = 4.0;
    let thin = Value::matrix(Matrix::Dense(DenseMatrix::new(10, 10, thin).unwrap()));
    let cache = ReuseCache::new(config(value_bytes(&thin), EvictionPolicy::Lru, true));
    miss_and_put(&cache, &item("thin"), &thin, Duration::from_secs(1));
    miss_and_put(&cache, &item("c"), &Value::Int(1), Duration::ZERO);
    assert_eq!(cache.state(&item("thin")), None);
    // Scalars are never spilled.
    miss_and_put(&cache, &item("d"), &thin, Duration::from_secs(1));
    assert_eq!(cache.state(&item("c")), None);
    assert_eq!(cache.stats().spills, 0);
    assert_eq!(cache.spill_dir(), None);
}

#[test]
fn an_unusable_spill_dir_turns_spilling_off() {
    let file = std::env::temp_dir().join(format!("lafuse-reuse-test-{}", std::process::id()));
    std::fs::write(&file, b"not a directory").unwrap();
    let v = dense(100, 1.0);
    let cache = ReuseCache::new(CacheConfig {
        spill_dir: Some(file.join("under-a-file")),
        ..config(value_bytes(&v), EvictionPolicy::CostSize, true)
    });
    miss_and_put(&cache, &item("a"), &v, Duration::from_secs(1));
    miss_and_put(&cache, &item("b"), &v, Duration::from_secs(1));
    miss_and_put(&cache, &item("c"), &v, Duration::from_secs(1));
    assert_eq!(cache.state(&item("a")), None);
    assert_eq!(cache.state(&item("b")), None);
    assert_eq!(cache.state(&item("c")), Some(EntryState::InMemory));
    let s = cache.stats();
    assert_eq!((s.spills, s.evictions), (0, 2));
    std::fs::remove_file(&file).unwrap();
}

#[test]
fn a_spill_file_that_cannot_be_read_back_is_a_miss() {
    let v = dense(100, 1.0);
    let cache = ReuseCache::new(config(value_bytes(&v), EvictionPolicy::CostSize, true));
    miss_and_put(&cache, &item("a"), &v, Duration::from_secs(1));
    miss_and_put(&cache, &item("b"), &v, Duration::from_secs(2));
    let dir = cache.spill_dir().unwrap();
    for f in std::fs::read_dir(&dir).unwrap() {
        std::fs::write(f.unwrap().path(), b"damaged").unwrap();
    }
    // The miss holds the placeholder: the caller recomputes and puts as usual.
    match cache.probe(&item("a")) {
        Probe::Miss(r) => cache.put(r, &v, Duration::from_secs(1)),
        Probe::Hit { .. } => panic!("a damaged spill file cannot hit"),
    }
    assert_eq!(expect_hit(&cache, &item("a")).1, v);
    assert_eq!(cache.stats().restore_failures, 1);
}

#[test]
fn a_probe_of_its_own_placeholder_does_not_wait_for_itself() {
    let cache = ReuseCache::new(CacheConfig::with_budget(1 << 20));
    let Probe::Miss(outer) = cache.probe(&item("a")) else {
        panic!("first probe misses");
    };
    let Probe::Miss(inner) = cache.probe(&item("a")) else {
        panic!("nothing was put yet");
    };
    assert!(inner.is_detached() && !outer.is_detached());
    cache.put(inner, &Value::Int(1), Duration::ZERO);
    assert_eq!(cache.state(&item("a")), Some(EntryState::Reserved));
    cache.put(outer, &Value::Int(2), Duration::ZERO);
    assert_eq!(expect_hit(&cache, &item("a")).1, Value::Int(2));
}

#[test]
fn concurrent_probes_compute_once() {
    const THREADS: usize = 8;
    let cache = ReuseCache::new(CacheConfig::with_budget(1 << 20));
    let computed = AtomicUsize::new(0);
    let start = Barrier::new(THREADS);
    let value = dense(64, 3.0);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                start.wait();
                match cache.probe(&item("tsmm")) {
                    Probe::Miss(r) => {
                        computed.fetch_add(1, Ordering::SeqCst);
                        // Long enough that the others arrive while it computes.
                        std::thread::sleep(Duration::from_millis(100));
                        cache.put(r, &value, Duration::from_millis(100));
                    }
                    Probe::Hit { value: got, .. } => assert_eq!(got, value),
                }
            });
        }
    });
    assert_eq!(computed.load(Ordering::SeqCst), 1);
    let s = cache.stats();
    assert_eq!((s.misses, s.hits, s.puts), (1, THREADS as u64 - 1, 1));
    // How many waited depends on scheduling (a thread descheduled past the put hits without
    // waiting), so only the outcome is checked.
    assert!(s.waits < THREADS as u64);
}

#[test]
fn an_abandoned_reservation_passes_to_a_waiter() {
    let cache = ReuseCache::new(CacheConfig::with_budget(1 << 20));
    let Probe::Miss(first) = cache.probe(&item("a")) else {
        panic!("first probe misses");
    };
    std::thread::scope(|s| {
        let waiter = s.spawn(|| match cache.probe(&item("a")) {
            Probe::Miss(r) => cache.put(r, &Value::Int(5), Duration::ZERO),
            Probe::Hit { .. } => panic!("nothing was put"),
        });
        // Bounded, so that a probe that never waits fails the test instead of hanging it.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while cache.stats().waits == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the waiter never waited"
            );
            std::thread::yield_now();
        }
        drop(first);
        waiter.join().unwrap();
    });
    assert_eq!(expect_hit(&cache, &item("a")).1, Value::Int(5));
    assert_eq!(cache.stats().misses, 2);
}

/// What the property test does next.
#[derive(Clone, Debug)]
enum Op {
    /// Probe key `k`, keeping a reservation from a miss.
    Probe(usize),
    /// Fill the `i`-th open reservation (modulo their number), as if computed in `ms`.
    Put(usize, u64),
    /// Abandon the `i`-th open reservation.
    Abandon(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..8usize).prop_map(Op::Probe),
        3 => (0..8usize, prop_oneof![Just(0u64), Just(50), 0..30u64]).prop_map(|(i, ms)| Op::Put(i, ms)),
        1 => (0..8usize).prop_map(Op::Abandon),
    ]
}

fn policy() -> impl Strategy<Value = EvictionPolicy> {
    prop_oneof![
        Just(EvictionPolicy::Lru),
        Just(EvictionPolicy::DagHeight),
        Just(EvictionPolicy::CostSize)
    ]
}

/// Key `k`'s value: its size is `sizes[k]` cells, dense or sparse, and its cells name `k`.
fn value_of(k: usize, cells: usize) -> Value {
    if k % 3 == 2 {
        return Value::Double(k as f64);
    }
    if k % 2 == 1 {
        let triples = (0..cells).map(|i| (i, i % 4, k as f64 + 0.5)).collect();
        return Value::matrix(Matrix::from_triples(cells, 4, triples).unwrap());
    }
    Value::matrix(Matrix::Dense(
        DenseMatrix::filled(cells, 1, k as f64).unwrap(),
    ))
}

fn key_of(k: usize) -> Lineage {
    chain(&format!("K{}", k % 4), 1 + k as u32)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the interleaving, policy and spilling, the bytes held never exceed the
    /// budget and every hit returns exactly the value put for its item.
    #[test]
    fn the_budget_holds_and_hits_return_what_was_put(
        ops in proptest::collection::vec(op(), 1..80),
        sizes in proptest::collection::vec(1usize..40, 8),
        budget_cells in 0usize..120,
        policy in policy(),
        spill in any::<bool>(),
    ) {
        let budget = budget_cells * 8 + 2 * std::mem::size_of::<Value>();
        let cache = ReuseCache::new(config(budget, policy, spill));
        let values: Vec<Value> = (0..8).map(|k| value_of(k, sizes[k])).collect();
        let mut open: Vec<(usize, Reservation)> = Vec::new();
        for op in ops {
            match op {
                Op::Probe(k) => match cache.probe(&key_of(k)) {
                    Probe::Hit { key, value } => {
                        prop_assert_eq!(&key, &key_of(k));
                        match (&value, &values[k]) {
                            (Value::Matrix(a), Value::Matrix(b)) => prop_assert!(same_bits(a, b)),
                            (a, b) => prop_assert_eq!(a, b),
                        }
                    }
                    Probe::Miss(r) => open.push((k, r)),
                },
                Op::Put(i, ms) if !open.is_empty() => {
                    let (k, r) = open.remove(i % open.len());
                    cache.put(r, &values[k], Duration::from_millis(ms));
                }
                Op::Abandon(i) if !open.is_empty() => {
                    drop(open.remove(i % open.len()));
                }
                _ => {}
            }
            prop_assert!(cache.bytes() <= budget, "{} > {}", cache.bytes(), budget);
            let s = cache.stats();
            prop_assert!(s.peak_bytes <= budget);
            prop_assert!(s.spills <= s.evictions);
        }
        let dir = cache.spill_dir();
        drop(open);
        drop(cache);
        if let Some(dir) = dir {
            prop_assert!(!dir.exists());
        }
    }
}

#[test]
fn sparse_round_trip_check_matches_the_reader() {
    // Stored zeros would be dropped by the reader: such a CSR matrix is not spilled.
    let s = SparseMatrix {
        rows: 2,
        cols: 2,
        row_ptr: vec![0, 1, 1].into(),
        col_idx: vec![0].into(),
        values: vec![0.0].into(),
    };
    assert!(!spill::round_trips_exactly(&Matrix::Sparse(s)));
    for m in awkward_matrices() {
        assert!(spill::round_trips_exactly(&m));
    }
}

/// Delayed caching (MEMPHIS): with `delay: 2` a value is kept only once its item is asked for a
/// second time, unless it is dear for its size: a value used once and cheap to make never takes
/// memory, a reduction that took long for its few bytes is kept at once.
#[test]
fn delayed_caching_keeps_a_value_from_its_second_request() {
    let cache = ReuseCache::new(CacheConfig {
        delay: 2,
        ..config(1 << 20, EvictionPolicy::CostSize, false)
    });
    // 80 KB made in 10 microseconds: an eighth of a nanosecond per byte.
    let cheap = Value::matrix(Matrix::from_dense_values(100, 100, vec![1.0; 10_000]).unwrap());
    let fast = Duration::from_micros(10);
    miss_and_put(&cache, &item("a"), &cheap, fast);
    assert_eq!(
        cache.state(&item("a")),
        None,
        "a first request keeps nothing cheap"
    );
    assert_eq!(cache.bytes(), 0);
    miss_and_put(&cache, &item("a"), &cheap, fast);
    assert_eq!(cache.state(&item("a")), Some(EntryState::InMemory));
    assert!(matches!(cache.probe(&item("a")), Probe::Hit { .. }));
    let stats = cache.stats();
    assert_eq!((stats.misses, stats.delayed, stats.hits), (2, 1, 1));
    // A scalar that took 5 ms is dear for its size: kept at its first request.
    miss_and_put(
        &cache,
        &item("dear"),
        &Value::Double(1.5),
        Duration::from_millis(5),
    );
    assert_eq!(cache.state(&item("dear")), Some(EntryState::InMemory));
    let v = Value::Double(1.5);
    // A value probed to be kept (a call's results) is kept from its first computation.
    match cache.probe_keeping(&item("b")) {
        Probe::Miss(r) => cache.put(r, &v, Duration::from_millis(5)),
        Probe::Hit { .. } => panic!("b should miss"),
    }
    assert_eq!(cache.state(&item("b")), Some(EntryState::InMemory));
}
