//! What tiered compilation did (`tiered`), counted per tier for `--stats`: operators compiled
//! and their compile time, tier switches, calls and the time they ran. Here, outside the
//! features the tiered backend needs, so that the engine's statistics name them in every build;
//! and the idle-priority pool background compilations run on.

#[cfg(all(feature = "cranelift", feature = "llvm"))]
use crate::backend::{Built, Origin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// Cells of main input an operator processes on Cranelift before LLVM compiles it.
///
/// Why this value: LLVM takes about 5 ms more than Cranelift to compile an operator (about
/// 5 ms against 0.8 ms). An operator that has processed N cells is expected to process about
/// as many again (the usual tiering bet), so promoting it pays once N cells' saving exceeds
/// those 4-5 ms. The saving per cell
/// ranges widely: on a 500x400 input (a shared, loaded 2-core machine) `sum(X * i * Y + X)`
/// ran 0.17 ns/cell faster on LLVM's code (memory-bound: break-even near 30M cells) and
/// `sum(X * i * exp(X))` 6.4 ns/cell faster (LLVM vectorizes `exp`: break-even near 0.8M);
/// 1 ns/cell, the run-time ratio of 1.5-3x on the dense patterns, gives about 4M.
pub const DEFAULT_TIER_THRESHOLD: u64 = 4_000_000;

/// A code generator an operator runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    Cranelift,
    Llvm,
}

/// What the tiers did, counted by the operators of one tiered backend (they run on any
/// thread).
#[derive(Debug, Default)]
pub struct TierCounters {
    pub(crate) cranelift_compiled: AtomicU64,
    pub(crate) cranelift_compile_nanos: AtomicU64,
    pub(crate) llvm_compiled: AtomicU64,
    pub(crate) llvm_compile_nanos: AtomicU64,
    pub(crate) llvm_background: AtomicU64,
    pub(crate) llvm_loaded: AtomicU64,
    pub(crate) llvm_refused: AtomicU64,
    pub(crate) switches: AtomicU64,
    pub(crate) cranelift_calls: AtomicU64,
    pub(crate) cranelift_run_nanos: AtomicU64,
    pub(crate) llvm_calls: AtomicU64,
    pub(crate) llvm_run_nanos: AtomicU64,
}

/// A snapshot of [`TierCounters`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TierCounts {
    /// Operators compiled with Cranelift, and the time that took (entry points compiled on
    /// the call that first needed one included).
    pub cranelift_compiled: u64,
    pub cranelift_compile: Duration,
    /// Operators compiled with LLVM (at once where Cranelift refused the plan, or on a
    /// background thread when promoted), and the time that took.
    pub llvm_compiled: u64,
    pub llvm_compile: Duration,
    /// Of `llvm_compiled`: compiled on a background thread, for a promotion.
    pub llvm_background: u64,
    /// Of `llvm_compiled`: machine code loaded from the on-disk object store.
    pub llvm_loaded: u64,
    /// Promotions LLVM could not build (the operator stays on Cranelift).
    pub llvm_refused: u64,
    /// Operators that switched from Cranelift's code to LLVM's.
    pub switches: u64,
    /// Calls run on each tier and the time they took (compilations in a call excluded).
    pub cranelift_calls: u64,
    pub cranelift_run: Duration,
    pub llvm_calls: u64,
    pub llvm_run: Duration,
}

// What the tiered backend counts with (only built with it).
#[cfg(all(feature = "cranelift", feature = "llvm"))]
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(all(feature = "cranelift", feature = "llvm"))]
pub(crate) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl TierCounters {
    pub fn snapshot(&self) -> TierCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let time = |c: &AtomicU64| Duration::from_nanos(c.load(Ordering::Relaxed));
        TierCounts {
            cranelift_compiled: get(&self.cranelift_compiled),
            cranelift_compile: time(&self.cranelift_compile_nanos),
            llvm_compiled: get(&self.llvm_compiled),
            llvm_compile: time(&self.llvm_compile_nanos),
            llvm_background: get(&self.llvm_background),
            llvm_loaded: get(&self.llvm_loaded),
            llvm_refused: get(&self.llvm_refused),
            switches: get(&self.switches),
            cranelift_calls: get(&self.cranelift_calls),
            cranelift_run: time(&self.cranelift_run_nanos),
            llvm_calls: get(&self.llvm_calls),
            llvm_run: time(&self.llvm_run_nanos),
        }
    }
}

#[cfg(all(feature = "cranelift", feature = "llvm"))]
impl TierCounters {
    /// An operator built on `tier` (`origin` says whether it was compiled).
    pub(crate) fn built(&self, tier: Tier, built: &Built) {
        let Origin::Compiled {
            loaded_from_store, ..
        } = built.origin
        else {
            return;
        };
        let compile = nanos(built.executable.compile_time());
        match tier {
            Tier::Cranelift => {
                add(&self.cranelift_compiled, 1);
                add(&self.cranelift_compile_nanos, compile);
            }
            Tier::Llvm => {
                add(&self.llvm_compiled, 1);
                add(&self.llvm_compile_nanos, compile);
                add(&self.llvm_loaded, u64::from(loaded_from_store));
            }
        }
    }

    /// A call on `tier` that ran `run` and compiled an entry point for `compiled`.
    pub(crate) fn ran(&self, tier: Tier, run: Duration, compiled: Duration) {
        let (calls, run_nanos, compile_nanos) = match tier {
            Tier::Cranelift => (
                &self.cranelift_calls,
                &self.cranelift_run_nanos,
                &self.cranelift_compile_nanos,
            ),
            Tier::Llvm => (
                &self.llvm_calls,
                &self.llvm_run_nanos,
                &self.llvm_compile_nanos,
            ),
        };
        add(calls, 1);
        add(run_nanos, nanos(run));
        add(compile_nanos, nanos(compiled));
    }
}

impl TierCounts {
    /// What happened since `earlier` (counters only grow).
    pub fn since(&self, earlier: &TierCounts) -> TierCounts {
        TierCounts {
            cranelift_compiled: self
                .cranelift_compiled
                .saturating_sub(earlier.cranelift_compiled),
            cranelift_compile: self
                .cranelift_compile
                .saturating_sub(earlier.cranelift_compile),
            llvm_compiled: self.llvm_compiled.saturating_sub(earlier.llvm_compiled),
            llvm_compile: self.llvm_compile.saturating_sub(earlier.llvm_compile),
            llvm_background: self.llvm_background.saturating_sub(earlier.llvm_background),
            llvm_loaded: self.llvm_loaded.saturating_sub(earlier.llvm_loaded),
            llvm_refused: self.llvm_refused.saturating_sub(earlier.llvm_refused),
            switches: self.switches.saturating_sub(earlier.switches),
            cranelift_calls: self.cranelift_calls.saturating_sub(earlier.cranelift_calls),
            cranelift_run: self.cranelift_run.saturating_sub(earlier.cranelift_run),
            llvm_calls: self.llvm_calls.saturating_sub(earlier.llvm_calls),
            llvm_run: self.llvm_run.saturating_sub(earlier.llvm_run),
        }
    }
}

/// Runs `f` on the process's background pool: one rayon thread at the lowest CPU priority
/// ([`lower_thread_priority`]), started at the first use and kept, which runs LLVM's
/// background compilations and, under `--jit tiered`, the fusion of blocks that fell due
/// (planning and Cranelift's code), one at a time. The calling thread waits; called on the
/// pool's own thread, `f` runs there directly.
///
/// LLVM's compilation joins on rayon (the libraries an operator calls build beside its entry
/// points). Run from a plain thread, those joins move the compilation onto the global pool,
/// whose workers the running operators' tasks need: on two cores a Cranelift Row operator in
/// L2SVM waited out a whole 38 ms compilation (13 calls, 38 ms instead of 5). On its own pool
/// at idle priority the compilation takes the cores the program leaves idle and yields to it.
/// Where no thread can be started, `f` runs on the calling thread, at idle priority from then
/// on: callers are threads of their own (an LLVM promotion's), never a run's.
pub fn in_background_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match background_pool() {
        Some(pool) => pool.install(f),
        None => {
            lower_thread_priority();
            f()
        }
    }
}

/// Starts `job` on the background pool ([`in_background_pool`]) without waiting for it; false
/// where the pool has no thread (the caller does the work itself). A panic in `job` is the
/// job's to catch: on the pool it would abort the process.
pub fn spawn_in_background(job: impl FnOnce() + Send + 'static) -> bool {
    match background_pool() {
        Some(pool) => {
            pool.spawn(job);
            true
        }
        None => false,
    }
}

/// The background pool, built at the first use. A pool per job cost two thread starts and
/// exits each (GLM at 10000 x 100 under `--jit tiered`: about 5 ms of CPU at normal priority
/// over a 40 ms run, beside its matrix-vector products on both cores).
fn background_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .thread_name(|_| "lafuse-background".into())
            .start_handler(|_| lower_thread_priority())
            .build()
            .ok()
    })
    .as_ref()
}

/// Moves the calling thread to Linux's `SCHED_IDLE` class, whose threads run only on cores
/// nothing else wants and are preempted at once when a program thread wakes (nice 19 was not
/// enough: a waking rayon worker could still wait out a scheduler slice, and MLogReg's Row
/// operators ran at half speed during the compilation). Where that fails or is not available,
/// nice 19; failing that the thread keeps its priority, which changes timing only.
fn lower_thread_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: sched_setscheduler reads the parameter struct we pass; setpriority only reads its
    // integer arguments. Pid 0 and gettid name this thread (scheduling is per thread on Linux).
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0 {
            let _ = libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19);
        }
    }
}
