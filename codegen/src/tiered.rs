//! Tiered compilation (issue 28): an operator is built with Cranelift and runs at once; when
//! the work it has done passes a threshold, LLVM compiles it on a background thread and the
//! operator runs LLVM's code from the next call after that code is ready. Plans Cranelift
//! refuses as unsupported are built with LLVM at once. Results do not change with the tier: the
//! two backends' operators are bit-identical by construction.
//!
//! Work is counted in cells of the main input (rows × columns, or a tenth of a CSR input's
//! non-zeros for Row operators that read its rows at those) summed over calls, so that a
//! large operator called once and a small one called in a loop both reach the optimizing tier
//! once LLVM's extra compile time can pay off.
//!
//! An operator whose LLVM code the on-disk object store holds (an earlier run promoted it)
//! starts on LLVM at once: the store keeps a marker per plan and entry point beside the
//! machine code (whose key is the emitted module's text, too dear to compute just to ask), so
//! a later run of the same script loads LLVM's code and never runs Cranelift's.

use crate::backend::{Backend, Built, CodegenError, Executable, MainFormat, Operand, Origin};
use crate::backend::{Internal, Request};
use crate::cranelift::CraneliftBackend;
use crate::native::NativeBackend;
pub use crate::tiers::DEFAULT_TIER_THRESHOLD;
use crate::tiers::{add, in_background_pool, Tier, TierCounters};
use lafuse_compiler::fusion::cplan::{CPlan, TemplateSpec};
use lafuse_runtime::lineage::Lineage;
use lafuse_runtime::{Matrix, ValueRange};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The background compilations of one backend, joined when it is dropped, so that a run does
/// not end in the middle of an LLVM compilation.
#[derive(Debug, Default)]
struct Background {
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Background {
    fn join_all(&self) {
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        for t in threads {
            // A compilation thread that panicked left its operator on Cranelift; nothing to
            // undo here.
            let _ = t.join();
        }
    }
}

/// Kept operators by [`CPlan::structural_hash`], so that a plan built again (a block
/// recompiled, another block with the same operator) keeps the work counted so far.
type Kept = HashMap<u64, Vec<(Arc<CPlan>, Arc<TieredOperator>)>>;

/// Operators a backend keeps at most (as [`crate::cranelift::DEFAULT_CAPACITY`]); past this
/// the kept operators are forgotten (their work counts start again).
const CAPACITY: usize = crate::cranelift::DEFAULT_CAPACITY;

/// The cells of main input from which a single call waits for LLVM's operator instead of
/// running on Cranelift (while at least the threshold): LLVM compiles in milliseconds, and
/// Cranelift's loops are slower by 0.2 to 6 ns a cell (BENCHMARKS.md, session 21), so a call of
/// 64M cells loses more on Cranelift than the compile costs.
pub const DEFAULT_WAIT_CELLS: u64 = 1 << 26;

/// The tiered backend: Cranelift first, LLVM for the operators that do enough work.
pub struct TieredBackend {
    cranelift: CraneliftBackend,
    llvm: Arc<NativeBackend>,
    threshold: u64,
    wait_cells: u64,
    counters: Arc<TierCounters>,
    kept: Mutex<Kept>,
    background: Arc<Background>,
}

impl TieredBackend {
    /// Operators promoted to `llvm` once they have processed `threshold` cells of main input
    /// ([`DEFAULT_TIER_THRESHOLD`]; 0 promotes at the first call, `u64::MAX` never).
    pub fn new(cranelift: CraneliftBackend, llvm: NativeBackend, threshold: u64) -> TieredBackend {
        TieredBackend {
            cranelift,
            llvm: Arc::new(llvm),
            threshold,
            wait_cells: DEFAULT_WAIT_CELLS,
            counters: Arc::default(),
            kept: Mutex::default(),
            background: Arc::default(),
        }
    }

    /// A call of at least `cells` cells of main input (and of the threshold) on an operator
    /// not yet on LLVM waits for LLVM's compilation and runs LLVM's code, and so does a call
    /// once the operator's calls since that compilation started have counted as many
    /// ([`DEFAULT_WAIT_CELLS`]).
    pub fn with_wait_cells(mut self, cells: u64) -> TieredBackend {
        self.wait_cells = cells;
        self
    }

    /// The counters its operators keep.
    pub fn counters(&self) -> Arc<TierCounters> {
        Arc::clone(&self.counters)
    }

    /// Waits for the background compilations started so far (their operators switch at their
    /// next call).
    pub fn wait_for_background(&self) {
        self.background.join_all();
    }

    fn kept(&self, plan: &Arc<CPlan>) -> Option<Arc<TieredOperator>> {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.get(&plan.structural_hash())?
            .iter()
            .find(|(p, _)| p == plan)
            .map(|(_, op)| Arc::clone(op))
    }

    fn keep(&self, plan: &Arc<CPlan>, op: &Arc<TieredOperator>) {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.values().map(Vec::len).sum::<usize>() >= CAPACITY {
            kept.clear();
        }
        kept.entry(plan.structural_hash())
            .or_default()
            .push((Arc::clone(plan), Arc::clone(op)));
    }

    /// `built` (on `tier`) as a tiered operator, kept for `request`'s plan.
    fn tiered(&self, request: &Request<'_>, tier: Tier, built: Built) -> Built {
        self.counters.built(tier, &built);
        let promotion = (tier == Tier::Cranelift).then(|| Promotion {
            plan: Arc::clone(request.plan),
            main: request.main,
            llvm: Arc::clone(&self.llvm),
            background: Arc::clone(&self.background),
            threshold: self.threshold,
            wait_cells: self.wait_cells.max(self.threshold),
            non_zeros_only: counts_non_zeros(request.plan),
            work: AtomicU64::new(0),
            work_at_start: AtomicU64::new(u64::MAX),
            started: AtomicBool::new(false),
            ready: Arc::new(OnceLock::new()),
            switched: AtomicBool::new(false),
        });
        let op = Arc::new(TieredOperator {
            first: built.executable,
            first_tier: tier,
            promotion,
            counters: Arc::clone(&self.counters),
        });
        self.keep(request.plan, &op);
        Built {
            executable: op,
            origin: built.origin,
        }
    }
}

impl Drop for TieredBackend {
    fn drop(&mut self) {
        self.background.join_all();
    }
}

impl Backend for TieredBackend {
    fn name(&self) -> &'static str {
        "tiered"
    }

    fn build(&self, requests: &[Request<'_>]) -> Vec<Result<Built, CodegenError>> {
        let mut out: Vec<Option<Result<Built, CodegenError>>> = requests
            .iter()
            .map(|r| {
                self.kept(r.plan).map(|op| {
                    Ok(Built {
                        executable: op,
                        origin: Origin::CacheHit,
                    })
                })
            })
            .collect();
        // What the object store holds LLVM's code for is loaded from there at once.
        let (stored, missing): (Vec<usize>, Vec<usize>) = (0..requests.len())
            .filter(|&i| out[i].is_none())
            .partition(|&i| self.llvm.has_stored(requests[i].plan, requests[i].main));
        let quick: Vec<Request<'_>> = missing.iter().map(|&i| requests[i]).collect();
        let mut unsupported = stored;
        for (&i, built) in missing.iter().zip(self.cranelift.build(&quick)) {
            out[i] = match built {
                Ok(b) => Some(Ok(self.tiered(&requests[i], Tier::Cranelift, b))),
                Err(CodegenError::Unsupported(_)) => {
                    unsupported.push(i);
                    None
                }
                Err(e) => Some(Err(e)),
            };
        }
        // What Cranelift does not generate, and what the store holds, is built with LLVM at
        // once, in one batch (in parallel, as the native backend builds a block's operators).
        let optimizing: Vec<Request<'_>> = unsupported.iter().map(|&i| requests[i]).collect();
        for (&i, built) in unsupported.iter().zip(self.llvm.build(&optimizing)) {
            out[i] = Some(built.map(|b| self.tiered(&requests[i], Tier::Llvm, b)));
        }
        out.into_iter()
            .map(|b| b.unwrap_or(Err(CodegenError::Internal(Internal::MissingOperators))))
            .collect()
    }
}

/// LLVM's operator once its background compilation is done, with its compile time then (so
/// that only entry points it compiles later in calls count as those calls' code generation).
/// `None`: LLVM refused the plan.
type Ready = Option<(Arc<dyn Executable>, Duration)>;

/// How a Cranelift operator moves to LLVM.
struct Promotion {
    plan: Arc<CPlan>,
    main: MainFormat,
    llvm: Arc<NativeBackend>,
    background: Arc<Background>,
    threshold: u64,
    /// A call of this many cells waits for LLVM ([`TieredBackend::with_wait_cells`]).
    wait_cells: u64,
    /// Whether a call is counted at a CSR main input's non-zeros ([`counts_non_zeros`]).
    non_zeros_only: bool,
    /// Cells of main input counted so far ([`counted_cells`]).
    work: AtomicU64,
    /// [`Promotion::work`] when LLVM's compilation started (`u64::MAX` before).
    work_at_start: AtomicU64,
    /// The background compilation has been started.
    started: AtomicBool,
    ready: Arc<OnceLock<Ready>>,
    /// A call has run LLVM's code (counted once as a switch).
    switched: AtomicBool,
}

impl std::fmt::Debug for Promotion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Promotion")
            .field("template", &self.plan.template.name())
            .field("threshold", &self.threshold)
            .field("work", &self.work)
            .field("started", &self.started)
            .field("ready", &self.ready())
            .finish()
    }
}

impl Promotion {
    /// LLVM's operator, if ready.
    fn ready(&self) -> Option<&(Arc<dyn Executable>, Duration)> {
        self.ready.get().and_then(Option::as_ref)
    }

    /// Whether a call of `cells` cells waits for LLVM's code: it alone counts
    /// [`Promotion::wait_cells`], or the calls since LLVM's compilation started have, on
    /// Cranelift, so that its slower code has cost about the compile by now. The compilation
    /// runs at idle priority, and a loop whose kernels keep every core busy leaves it none:
    /// `t(X) %*% (w * (X %*% v))` over a 1e5 x 1000 CSR matrix ran 40 times on Cranelift's
    /// code, 1.6 ms a call against LLVM's 1.2, its 25 ms compilation still waiting for a core
    /// at the end. Waiting frees the caller's core for it.
    fn should_wait(&self, cells: u64) -> bool {
        if self.ready.get().is_some() {
            return false;
        }
        let at_start = self.work_at_start.load(Ordering::Relaxed);
        cells >= self.wait_cells
            || (at_start != u64::MAX
                && self
                    .work
                    .load(Ordering::Relaxed)
                    .saturating_sub(at_start)
                    .saturating_add(cells)
                    >= self.wait_cells)
    }

    /// Counts a call's `cells`; past the threshold, starts LLVM's compilation (once).
    fn count(&self, cells: u64, counters: &Arc<TierCounters>) {
        let before = self.work.fetch_add(cells, Ordering::Relaxed);
        if before.saturating_add(cells) < self.threshold
            || self.started.swap(true, Ordering::AcqRel)
        {
            return;
        }
        self.work_at_start
            .store(before.saturating_add(cells), Ordering::Relaxed);
        let (plan, main, llvm) = (Arc::clone(&self.plan), self.main, Arc::clone(&self.llvm));
        let ready = Arc::clone(&self.ready);
        let tally = Arc::clone(counters);
        let compile = move || {
            let counters = tally;
            let built = in_background_pool(|| llvm.build(&[Request { plan: &plan, main }]).pop());
            let done = match built {
                Some(Ok(b)) => {
                    counters.built(Tier::Llvm, &b);
                    add(
                        &counters.llvm_background,
                        u64::from(b.origin != Origin::CacheHit),
                    );
                    let base = b.executable.compile_time();
                    Some((b.executable, base))
                }
                _ => {
                    add(&counters.llvm_refused, 1);
                    None
                }
            };
            let _ = ready.set(done);
        };
        match std::thread::Builder::new()
            .name("lafuse-llvm-tier".into())
            .spawn(compile)
        {
            Ok(handle) => self
                .background
                .threads
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(handle),
            // No thread for it (the process is out of them): the operator stays on Cranelift,
            // which computes the same results.
            Err(_) => {
                add(&counters.llvm_refused, 1);
                let _ = self.ready.set(None);
            }
        }
    }
}

/// An operator on its current tier.
#[derive(Debug)]
struct TieredOperator {
    /// The operator as first built, and its tier.
    first: Arc<dyn Executable>,
    first_tier: Tier,
    /// For an operator built with Cranelift: how it moves to LLVM.
    promotion: Option<Promotion>,
    counters: Arc<TierCounters>,
}

/// Whether a call of `plan`'s operator is counted at a CSR main input's non-zeros: a Row
/// operator that reads the main row at its non-zeros (not one that scatters it into a dense row
/// first). The threshold and the wait size weigh Cranelift's loss against LLVM's compile in
/// cells, at 0.2 to 6 ns a cell. A Row operator over CSR rows loses about a tenth of that per
/// non-zero ([`SPARSE_ROW_NON_ZEROS_PER_CELL`]), so counted at its cells a call of 1e8 cells
/// and 1e7 non-zeros waited 25 ms for LLVM to save 0.6. Cranelift's sparse Cell and MultiAgg
/// entries stay counted at their cells, so that a call of 1e8 cells waits for LLVM's code,
/// still 1.2-1.3× faster there: they lost about 7 ns a non-zero (`sum(X * Y)` and `sum(X * Z)`
/// over 1e6 non-zeros: 15.3 ms against 8.5), and since the skeletons prefetch their gathered
/// lines about 1.6 (7.1-7.7 against 5.5-6.4).
fn counts_non_zeros(plan: &CPlan) -> bool {
    match &plan.template {
        TemplateSpec::Row { row_type, .. } => {
            crate::row_plan::analyze(plan, *row_type).is_ok_and(|info| !info.needs_dense_main)
        }
        TemplateSpec::Cell { .. } | TemplateSpec::MAgg { .. } | TemplateSpec::Outer { .. } => false,
    }
}

/// The non-zeros of a CSR main input a Row operator's call counts as one cell
/// ([`counts_non_zeros`]). Cranelift's Row code loses 0.05-0.1 ns a non-zero against LLVM's
/// (`t(X) %*% (w * (X %*% v))` over a 1e5 x 1000 CSR `X`: 6.05 ms a call against 5.4-5.8 at
/// sparsity 0.1, 1.36-1.40 against 1.18-1.34 at 0.01), a tenth or less of the nanosecond a
/// cell the threshold and the wait size assume ([`crate::tiers::DEFAULT_TIER_THRESHOLD`]).
/// Counted a cell per non-zero, that product at 0.1 started LLVM's 25 ms compilation at its
/// first call, and its eighth call, the compilation still starved of a core by the kernels,
/// waited for all of it: ten calls took 7.8-8.8 ms each, against 6.05 on Cranelift alone.
pub const SPARSE_ROW_NON_ZEROS_PER_CELL: u64 = 10;

/// The cells of its main input a call counts (a scalar counts one): for a CSR input where
/// the operator is counted at its non-zeros ([`counts_non_zeros`]), those over
/// [`SPARSE_ROW_NON_ZEROS_PER_CELL`], else rows × columns.
fn counted_cells(non_zeros_only: bool, inputs: &[Operand<'_>]) -> u64 {
    match inputs.first() {
        Some(Operand::Matrix(m)) if non_zeros_only && m.is_sparse() => {
            (m.nnz() as u64).div_ceil(SPARSE_ROW_NON_ZEROS_PER_CELL)
        }
        Some(Operand::Matrix(m)) => (m.rows() as u64).saturating_mul(m.cols() as u64),
        _ => 1,
    }
}

impl TieredOperator {
    /// The executable a call runs now, and its tier; the first call to find LLVM's operator
    /// ready counts the switch.
    fn current(&self) -> (&Arc<dyn Executable>, Tier) {
        match self.promotion.as_ref().and_then(|p| Some((p, p.ready()?))) {
            Some((p, (llvm, _))) => {
                if !p.switched.swap(true, Ordering::Relaxed) {
                    add(&self.counters.switches, 1);
                }
                (llvm, Tier::Llvm)
            }
            None => (&self.first, self.first_tier),
        }
    }
}

impl Executable for TieredOperator {
    fn execute(
        &self,
        inputs: &[Operand<'_>],
        out_shapes: &[(usize, usize)],
        known: &[Option<ValueRange>],
    ) -> Result<Vec<Matrix>, CodegenError> {
        self.execute_traced(inputs, out_shapes, known, &[])
    }

    fn execute_traced(
        &self,
        inputs: &[Operand<'_>],
        out_shapes: &[(usize, usize)],
        known: &[Option<ValueRange>],
        lineage: &[Option<Lineage>],
    ) -> Result<Vec<Matrix>, CodegenError> {
        let cells = self
            .promotion
            .as_ref()
            .map_or(0, |p| counted_cells(p.non_zeros_only, inputs));
        let mut counted = false;
        if let Some(p) = &self.promotion {
            if p.should_wait(cells) {
                // LLVM's compile is a small part of what Cranelift's slower code would cost
                // (or has cost): start it (if not yet) and run its code.
                p.count(cells, &self.counters);
                counted = true;
                p.ready.wait();
            }
        }
        let (executable, tier) = self.current();
        let compiled_before = executable.compile_time();
        let started = Instant::now();
        let result = executable.execute_traced(inputs, out_shapes, known, lineage);
        let compiled = executable.compile_time().saturating_sub(compiled_before);
        self.counters
            .ran(tier, started.elapsed().saturating_sub(compiled), compiled);
        if let (Some(p), Tier::Cranelift, false) = (&self.promotion, tier, counted) {
            p.count(cells, &self.counters);
        }
        result
    }

    /// The first tier's compile time, and what LLVM's operator compiled in calls after it
    /// became ready (its background compilation is no call's: it is in [`TierCounts`]).
    fn compile_time(&self) -> Duration {
        let later = self
            .promotion
            .as_ref()
            .and_then(Promotion::ready)
            .map_or(Duration::ZERO, |(llvm, base)| {
                llvm.compile_time().saturating_sub(*base)
            });
        self.first.compile_time() + later
    }
}
