//! The engine: interprets a program's block tree, compiling each basic block into instructions
//! just before it runs (with the actual sizes of its inputs) and caching the compiled block.

use crate::compile::{
    compile_block, compile_predicate, compile_value, BlockMeta, CompiledBlock, InBackground,
    EXPR_RESULT,
};
use crate::dedup::{DedupCounts, Iteration, ScopeDedup};
use crate::deferral::BACKGROUND_START_DIVISOR;
use crate::error::Error;
use crate::fused::Fuser;
use crate::parfor::ParforState;
use crate::reuse::{BlockProbe, CallProbe, ReuseMode, RunReuse};
use crate::stats::{ms, InstructionStat, Stats};
use crate::{EngineConfig, ExplainedBlock, ScriptArgs};
use lafuse_compiler::ast::{self, ValueType};
use lafuse_compiler::builtins::{self, BoundValue};
use lafuse_compiler::hops::{CastOp, Literal, OpKind};
use lafuse_compiler::program::{BasicBlock, Block, CallBlock, Program};
use lafuse_compiler::span::Span;
use lafuse_compiler::stack::with_stack;
use lafuse_runtime::error::{CallError, Internal, LoopRange};
use lafuse_runtime::exec::{self, ExecContext, OpStats, SymbolTable};
use lafuse_runtime::lineage::reuse::{Compensations, Reuse};
use lafuse_runtime::lineage::{self, Lineage, LineageMap, TraceStats, Tracer};
use lafuse_runtime::value::{ScalarType, Value};
use lafuse_runtime::RuntimeError;
use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Compiled blocks kept per block, each valid for the metadata it was compiled with.
const MAX_PLANS_PER_BLOCK: usize = 8;

/// Why fusion left a block's matrix operations out, as `--stats` and `explain` say it.
pub(crate) const UNKNOWN_SIZE_REASON: &str = "matrix operations of unknown size when the block \
    was compiled (a size no file, metadata or earlier statement states)";

/// Deepest user-function recursion before a script is stopped (instead of overflowing the stack).
const MAX_CALL_DEPTH: usize = 1000;

/// Compiled blocks, keyed by the address of the block or expression compiled, each list valid
/// for different metadata of the variables read. Shared by every run of one program (a
/// prepared script's executions, on any number of threads), which must outlive it and not
/// move its blocks (addresses are the keys).
#[derive(Debug, Default)]
pub(crate) struct PlanCache {
    plans: Mutex<HashMap<usize, Vec<Arc<CompiledBlock>>>>,
}

impl PlanCache {
    fn find(&self, key: usize, vars: &SymbolTable, meta: &BlockMeta) -> Option<Arc<CompiledBlock>> {
        let plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        plans
            .get(&key)?
            .iter()
            .find(|p| meta.is_met_by(p) && p.is_valid_for(vars))
            .map(Arc::clone)
    }

    /// The unfused-runs counter of `key`'s plans compiled unfused, if any.
    fn unfused_runs(&self, key: usize) -> Option<Arc<std::sync::atomic::AtomicU64>> {
        let plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        plans
            .get(&key)?
            .iter()
            .find_map(|p| p.deferral.as_ref().map(|d| Arc::clone(d.counter())))
    }

    /// Drops `plan` from `key`'s plans (one replaced by a plan compiled again).
    fn remove(&self, key: usize, plan: &Arc<CompiledBlock>) {
        let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(list) = plans.get_mut(&key) {
            list.retain(|p| !Arc::ptr_eq(p, plan));
        }
    }

    fn insert(&self, key: usize, compiled: Arc<CompiledBlock>) {
        let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        let plans = plans.entry(key).or_default();
        if plans.len() >= MAX_PLANS_PER_BLOCK {
            plans.remove(0);
        }
        plans.push(compiled);
    }
}

pub(crate) struct Interpreter<'p, 'o> {
    program: &'p Program,
    args: &'p ScriptArgs,
    out: &'o mut dyn Write,
    plans: &'p PlanCache,
    op_stats: Option<OpStats>,
    pub(crate) compile_time: Duration,
    pub(crate) blocks_compiled: u64,
    pub(crate) cache_hits: u64,
    pub(crate) instructions_executed: u64,
    /// When explaining: every block as first compiled, in execution order.
    pub(crate) explained: Option<Vec<ExplainedBlock>>,
    depth: usize,
    /// Plans and builds fused operators; `None` runs everything unfused.
    fuser: Option<&'p Fuser>,
    /// What is known of matrix values' ranges, for sparse-safe fused operators.
    ranges: exec::ValueRangeCache,
    /// The fuser's counters when this run started (the fuser outlives runs).
    fusion_baseline: crate::fused::FusionCounts,
    /// Blocks compiled with matrix operations of unknown size, which fusion leaves out: the
    /// block's span and how many.
    pub(crate) unknown_sizes: Vec<(Span, usize)>,
    /// Lineage tracing, when on: one lineage map per frame, parallel to its symbol table
    /// (the last is the current frame's).
    lineage: Option<Vec<LineageMap>>,
    trace_stats: TraceStats,
    /// This thread's item count when the run started (`--stats` reports the difference).
    items_at_start: u64,
    /// The item of the value [`Interpreter::evaluate`] returned last, when tracing.
    evaluated: Option<Lineage>,
    /// Lineage deduplication of last-level loops and functions, when on (needs `lineage`).
    dedup: Option<DedupState>,
    /// Lineage-based reuse, when on (traces lineage).
    pub(crate) reuse: Option<RunReuse>,
    /// `parfor`'s threads and what its loops did ([`crate::parfor`]).
    pub(crate) parfor: ParforState,
}

/// What a `parfor` worker starts from: the run's shared parts and a copy of the caller's
/// frame (sent to the worker's thread, which builds its own interpreter from it).
pub(crate) struct WorkerSeed<'p> {
    program: &'p Program,
    args: &'p ScriptArgs,
    plans: &'p PlanCache,
    fuser: Option<&'p Fuser>,
    op_stats: bool,
    depth: usize,
    pub(crate) lineage: Option<LineageMap>,
    reuse: Option<RunReuse>,
}

/// What a `parfor` worker leaves: its variables, its lineage map and its counters.
pub(crate) struct WorkerDone {
    pub(crate) vars: SymbolTable,
    pub(crate) lineage: Option<LineageMap>,
    op_stats: Option<OpStats>,
    compile_time: Duration,
    blocks_compiled: u64,
    cache_hits: u64,
    instructions_executed: u64,
    trace_time: Duration,
    items: u64,
    reuse_hits: Option<lafuse_runtime::lineage::reuse::ReuseHits>,
    parfor: ParforState,
}

impl<'p> WorkerSeed<'p> {
    /// The worker's interpreter, writing to `out` (a `parfor` body that runs on threads
    /// prints nothing).
    pub(crate) fn interpreter<'o>(self, out: &'o mut dyn Write) -> Interpreter<'p, 'o> {
        Interpreter {
            program: self.program,
            args: self.args,
            out,
            plans: self.plans,
            op_stats: self.op_stats.then(OpStats::default),
            compile_time: Duration::ZERO,
            blocks_compiled: 0,
            cache_hits: 0,
            instructions_executed: 0,
            explained: None,
            depth: self.depth,
            fuser: self.fuser,
            ranges: exec::ValueRangeCache::default(),
            fusion_baseline: Default::default(),
            unknown_sizes: Vec::new(),
            lineage: self.lineage.map(|map| vec![map]),
            trace_stats: TraceStats::default(),
            items_at_start: lineage::items_created_on_this_thread(),
            evaluated: None,
            dedup: None,
            reuse: self.reuse,
            parfor: ParforState::worker(),
        }
    }
}

impl Interpreter<'_, '_> {
    /// A worker's outcome, ending it.
    pub(crate) fn into_done(mut self, vars: SymbolTable) -> WorkerDone {
        WorkerDone {
            vars,
            lineage: self.lineage.take().and_then(|mut frames| frames.pop()),
            op_stats: self.op_stats.take(),
            compile_time: self.compile_time,
            blocks_compiled: self.blocks_compiled,
            cache_hits: self.cache_hits,
            instructions_executed: self.instructions_executed,
            trace_time: self.trace_stats.time,
            items: lineage::items_created_on_this_thread() - self.items_at_start
                + self.parfor.worker_items,
            reuse_hits: self.reuse.as_ref().map(|r| r.hits),
            parfor: std::mem::take(&mut self.parfor),
        }
    }
}

/// Deduplication's state in a run: per loop or function (by the address of its body) its
/// setup and patches (`None`: not deduplicated), and the execution in progress.
#[derive(Default)]
struct DedupState {
    scopes: HashMap<usize, Option<ScopeDedup>>,
    active: Option<(usize, Iteration)>,
    counts: DedupCounts,
}

impl<'p, 'o> Interpreter<'p, 'o> {
    pub(crate) fn new(
        program: &'p Program,
        args: &'p ScriptArgs,
        out: &'o mut dyn Write,
        config: &'p EngineConfig,
        fuser: Option<&'p Fuser>,
        plans: &'p PlanCache,
    ) -> Self {
        Interpreter {
            program,
            args,
            out,
            plans,
            op_stats: config.collect_stats.then(OpStats::default),
            compile_time: Duration::ZERO,
            blocks_compiled: 0,
            cache_hits: 0,
            instructions_executed: 0,
            explained: None,
            depth: 0,
            fuser,
            fusion_baseline: fuser.map(Fuser::counters).unwrap_or_default(),
            ranges: exec::ValueRangeCache::default(),
            unknown_sizes: Vec::new(),
            lineage: config.traces().then(|| vec![LineageMap::new()]),
            trace_stats: TraceStats::default(),
            items_at_start: lineage::items_created_on_this_thread(),
            evaluated: None,
            // Patches are DAGs over placeholders, which must never be probed in a reuse cache
            // (two iterations' `P0 * 2` are equal items of different values): with reuse on,
            // lineage is traced without deduplication.
            dedup: (config.lineage && config.lineage_dedup && config.reuse.mode == ReuseMode::None)
                .then(DedupState::default),
            reuse: RunReuse::new(&config.reuse, program),
            parfor: ParforState::new(config.parfor_threads),
        }
    }

    /// A worker's start: shared parts and a copy of the current frame's lineage map.
    pub(crate) fn worker_seed(&self) -> WorkerSeed<'p> {
        WorkerSeed {
            program: self.program,
            args: self.args,
            plans: self.plans,
            fuser: self.fuser,
            op_stats: self.op_stats.is_some(),
            depth: self.depth,
            lineage: self
                .lineage
                .as_ref()
                .and_then(|frames| frames.last())
                .cloned(),
            reuse: self.reuse.as_ref().map(RunReuse::for_worker),
        }
    }

    /// Takes a finished worker's counters into this run's.
    pub(crate) fn absorb(&mut self, done: &mut WorkerDone) {
        if let (Some(mine), Some(theirs)) = (&mut self.op_stats, done.op_stats.take()) {
            for (opcode, (count, time)) in theirs.per_opcode {
                let entry = mine.per_opcode.entry(opcode).or_insert((0, Duration::ZERO));
                entry.0 += count;
                entry.1 += time;
            }
        }
        self.compile_time += done.compile_time;
        self.blocks_compiled += done.blocks_compiled;
        self.cache_hits += done.cache_hits;
        self.instructions_executed += done.instructions_executed;
        self.trace_stats.time += done.trace_time;
        // Items made on the worker's thread, which this thread's count does not see.
        self.parfor.worker_items += done.items;
        if let (Some(mine), Some(theirs)) = (&mut self.reuse, done.reuse_hits) {
            mine.add_hits(&theirs);
        }
        self.parfor.absorb(&done.parfor);
    }

    /// Whether this run explains, deduplicates lineage, or is itself a `parfor` worker:
    /// the cases a `parfor` runs sequentially for (and why).
    pub(crate) fn parfor_blocker(&self) -> Option<&'static str> {
        if self.parfor.in_worker {
            Some("nested in another parfor's worker")
        } else if self.explained.is_some() {
            Some("explaining (blocks are listed in execution order)")
        } else if self.dedup.is_some() {
            Some("lineage deduplication is on")
        } else {
            None
        }
    }

    pub(crate) fn exec_body(
        &mut self,
        body: &'p [Block],
        vars: &mut SymbolTable,
    ) -> Result<(), Error> {
        self.exec_blocks(body, vars)
    }

    /// `name`'s item in the current frame, when tracing.
    pub(crate) fn frame_item(&self, name: &str) -> Option<Lineage> {
        self.lineage.as_ref()?.last()?.get(name).cloned()
    }

    pub(crate) fn set_frame_item(&mut self, name: &str, item: Lineage) {
        if let Some(map) = self.frame() {
            map.insert(name.to_string(), item);
        }
    }

    pub(crate) fn bind_loop_variable(&mut self, name: &str, v: &Value) {
        self.bind_literal(name, v);
    }

    /// The lineage logs of the variables of the outermost frame (after a run: those live at
    /// the end of the main program); empty when tracing is off.
    pub(crate) fn final_lineage(&self) -> std::collections::BTreeMap<String, String> {
        self.lineage
            .as_ref()
            .and_then(|frames| frames.first())
            .map(|map| {
                map.iter()
                    .map(|(name, item)| (name.clone(), lineage::serialize(item)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The current frame's lineage map, when tracing.
    fn frame(&mut self) -> Option<&mut LineageMap> {
        self.lineage.as_mut().and_then(|frames| frames.last_mut())
    }

    /// Binds `name`'s item in the current frame to the literal of the scalar `v` (a loop
    /// variable), when tracing.
    fn bind_literal(&mut self, name: &str, v: &Value) {
        if let (Some(map), Some(item)) = (self.frame(), lineage::value_item(v)) {
            map.insert(name.to_string(), item);
        }
    }

    pub(crate) fn run_main(&mut self) -> Result<(), Error> {
        self.run_main_with(SymbolTable::new()).map(drop)
    }

    /// Runs the main program starting from the variables `vars` (a prepared script's inputs);
    /// returns the variables live at its end.
    pub(crate) fn run_main_with(&mut self, mut vars: SymbolTable) -> Result<SymbolTable, Error> {
        self.exec_blocks(&self.program.main, &mut vars)?;
        Ok(vars)
    }

    pub(crate) fn stats(&self, total: Duration) -> Stats {
        let mut heavy: Vec<InstructionStat> = self
            .op_stats
            .iter()
            .flat_map(|s| s.per_opcode.iter())
            .map(|(opcode, (count, time))| InstructionStat {
                opcode: opcode.clone(),
                count: *count,
                time_ms: ms(*time),
            })
            .collect();
        heavy.sort_by(|a, b| {
            b.time_ms
                .total_cmp(&a.time_ms)
                .then_with(|| a.opcode.cmp(&b.opcode))
        });
        let fusion = self
            .fuser
            .map(|f| f.counters().since(&self.fusion_baseline))
            .unwrap_or_default();
        Stats {
            total_ms: ms(total),
            compile_ms: ms(self.compile_time),
            execution_ms: ms(total.saturating_sub(self.compile_time)),
            blocks_compiled: self.blocks_compiled,
            block_cache_hits: self.cache_hits,
            fused_operators_executed: fusion.executed,
            fused_operators: crate::stats::fused_operators(&fusion.by_operator),
            operators_compiled: fusion.compiled,
            operators_loaded: fusion.loaded,
            operator_cache_hits: fusion.cache_hits,
            codegen_ms: ms(fusion.codegen),
            fusion_planning_ms: ms(fusion.planning),
            tiering: fusion
                .tiers
                .as_ref()
                .map(|t| crate::stats::TieringStats::of(t, fusion.deferred, fusion.fused_later)),
            fused_execution_ms: ms(fusion.execution),
            operator_cache_misses: fusion
                .miss_reasons
                .into_iter()
                .map(|(reason, count)| crate::stats::Fallback { reason, count })
                .collect(),
            unfused_fallbacks: fusion
                .fallbacks
                .into_iter()
                .map(|(reason, count)| crate::stats::Fallback { reason, count })
                .collect(),
            // Named by their lines by the caller, which has the source.
            fusion_skipped: Vec::new(),
            instructions_executed: self.instructions_executed,
            lineage_items: match self.lineage {
                Some(_) => {
                    lineage::items_created_on_this_thread() - self.items_at_start
                        + self.parfor.worker_items
                }
                None => 0,
            },
            lineage_ms: ms(self.trace_stats.time),
            lineage_dedup_patches: self.dedup.as_ref().map_or(0, |d| d.counts.patches),
            lineage_dedup_items: self.dedup.as_ref().map_or(0, |d| d.counts.items),
            reuse: self.reuse.as_ref().map(RunReuse::stats),
            parfor_parallel: self.parfor.parallel,
            parfor_sequential: self.parfor.sequential_reasons(),
            heavy_hitters: heavy,
        }
    }

    /// [`Interpreter::stats`] with the blocks fusion skipped named by `place` (their lines in
    /// a script; "the DAG" for a DAG).
    pub(crate) fn located_stats(&self, total: Duration, place: impl Fn(Span) -> String) -> Stats {
        let mut stats = self.stats(total);
        stats.fusion_skipped = self
            .unknown_sizes
            .iter()
            .map(|(span, count)| crate::stats::Fallback {
                reason: format!("{}: {UNKNOWN_SIZE_REASON}", place(*span)),
                count: *count as u64,
            })
            .collect();
        stats
    }

    fn exec_blocks(&mut self, blocks: &'p [Block], vars: &mut SymbolTable) -> Result<(), Error> {
        for block in blocks {
            self.exec_block(block, vars)?;
        }
        Ok(())
    }

    fn exec_block(&mut self, block: &'p Block, vars: &mut SymbolTable) -> Result<(), Error> {
        with_stack(|| self.exec_block_step(block, vars))
    }

    fn exec_block_step(&mut self, block: &'p Block, vars: &mut SymbolTable) -> Result<(), Error> {
        match block {
            Block::Basic(basic) => self.exec_basic(basic, vars),
            Block::If {
                cond,
                then_blocks,
                else_blocks,
                ..
            } => {
                let taken = self.eval_condition(cond, vars, "if")?;
                if let Some(DedupState {
                    scopes,
                    active: Some((key, it)),
                    ..
                }) = &mut self.dedup
                {
                    if let Some(Some(setup)) = scopes.get(key) {
                        setup.branch(it, block, taken);
                    }
                }
                self.exec_blocks(if taken { then_blocks } else { else_blocks }, vars)
            }
            Block::While { cond, body, .. } => {
                while self.eval_condition(cond, vars, "while")? {
                    self.exec_deduplicated(body, vars)?;
                }
                Ok(())
            }
            Block::For {
                var,
                from,
                to,
                step,
                body,
                parallel,
                ..
            } => self.exec_for(var, from, to, step.as_ref(), body, *parallel, vars),
            Block::Call(call) => self.exec_call(call, vars),
        }
    }

    /// `for (i in from:to)` / `for (i in seq(from, to, step))`: bounds are evaluated once; the
    /// default step is 1, or -1 when `from > to` (DML's `a:b` counts down), as in SystemDS.
    /// A `parfor` (`parallel`) runs on threads where [`crate::parfor`] allows.
    #[allow(clippy::too_many_arguments)]
    fn exec_for(
        &mut self,
        var: &ast::Ident,
        from: &'p ast::Expr,
        to: &'p ast::Expr,
        step: Option<&'p ast::Expr>,
        body: &'p [Block],
        parallel: bool,
        vars: &mut SymbolTable,
    ) -> Result<(), Error> {
        let from_v = self.eval_scalar(from, vars, "for-loop start")?;
        let to_v = self.eval_scalar(to, vars, "for-loop end")?;
        let step_v = match step {
            Some(s) => Some(self.eval_scalar(s, vars, "for-loop step")?),
            None => None,
        };
        let located = |e: RuntimeError, span: Span| Error::Runtime {
            error: e,
            span: Some(span),
        };
        let a = from_v.as_f64().map_err(|e| located(e, from.span))?;
        let b = to_v.as_f64().map_err(|e| located(e, to.span))?;
        let s = match &step_v {
            Some(v) => v
                .as_f64()
                .map_err(|e| located(e, step.map_or(var.span, |s| s.span)))?,
            None => {
                if a <= b {
                    1.0
                } else {
                    -1.0
                }
            }
        };
        if s == 0.0 || s.is_nan() || a.is_nan() || b.is_nan() {
            return Err(located(
                RuntimeError::LoopRange(LoopRange::NotCountable {
                    from: a,
                    to: b,
                    by: s,
                }),
                var.span,
            ));
        }
        // An infinite bound is an error where the loop is, not a loop that silently never
        // runs (or never ends): `seq` refuses one too.
        for (v, what, span) in [
            (a, "start", from.span),
            (b, "end", to.span),
            (s, "step", step.map_or(var.span, |e| e.span)),
        ] {
            if v.is_infinite() {
                return Err(located(
                    RuntimeError::LoopRange(LoopRange::Infinite {
                        bound: what,
                        value: v,
                    }),
                    span,
                ));
            }
        }
        // The loop variable is an integer when the bounds are (as SystemDS types `1:n`), and
        // then counts in 64-bit integers as SystemDS does, exact beyond 2^53.
        let integral_step = step_v.as_ref().is_none_or(|v| matches!(v, Value::Int(_)));
        if let (Value::Int(first), true) = (&from_v, integral_step) {
            // The last value the range may reach: an integer end as it is, a fractional one
            // rounded towards the start.
            let end = match to_v {
                Value::Int(end) => i128::from(end),
                _ => {
                    let end = if s > 0.0 { b.floor() } else { b.ceil() };
                    if end.abs() >= 9.223_372_036_854_775e18 {
                        return Err(located(
                            RuntimeError::LoopRange(LoopRange::EndBeyondIntegers { end: b }),
                            to.span,
                        ));
                    }
                    end as i128
                }
            };
            let first = i128::from(*first);
            // `a:b` counts down when `b < a`, decided on the integers (not on doubles, which
            // cannot tell 2^53 from 2^53 + 1).
            let step = match step_v {
                None if end < first => -1,
                None => 1,
                Some(_) => s as i128,
            };
            if (end - first) * step.signum() < 0 {
                // An empty range; SystemDS leaves the loop variable untouched.
                return Ok(());
            }
            let count = (end - first) / step + 1;
            if parallel && self.try_parfor(var, first, step, count, body, vars)? {
                return Ok(());
            }
            for k in 0..count {
                let v = Value::Int((first + k * step) as i64);
                self.bind_literal(&var.name, &v);
                vars.insert(var.name.clone(), v);
                self.exec_deduplicated(body, vars)?;
            }
            return Ok(());
        }
        if (b - a) * s < 0.0 {
            // An empty range; SystemDS leaves the loop variable untouched.
            return Ok(());
        }
        let count = ((b - a) / s + 1e-10).floor() + 1.0;
        if count >= u64::MAX as f64 {
            return Err(located(
                RuntimeError::LoopRange(LoopRange::TooManyIterations {
                    from: a,
                    to: b,
                    by: s,
                }),
                var.span,
            ));
        }
        if parallel {
            self.parfor
                .sequential("the loop variable is not an integer".to_string());
        }
        for k in 0..count as u64 {
            let v = Value::Double(a + k as f64 * s);
            self.bind_literal(&var.name, &v);
            vars.insert(var.name.clone(), v);
            self.exec_deduplicated(body, vars)?;
        }
        Ok(())
    }

    /// Runs one iteration of a loop body, or a function's body; with deduplication on and a
    /// last-level body, as [`dedup`](crate::dedup) describes.
    fn exec_deduplicated(
        &mut self,
        body: &'p [Block],
        vars: &mut SymbolTable,
    ) -> Result<(), Error> {
        let key = body.as_ptr() as usize;
        // The time starting the execution took (tracing time, for `--stats`).
        let start_cost = {
            let (Some(state), Some(map)) = (
                self.dedup.as_mut(),
                self.lineage.as_mut().and_then(|frames| frames.last_mut()),
            ) else {
                return self.exec_blocks(body, vars);
            };
            if state.active.is_some() {
                return self.exec_blocks(body, vars);
            }
            let Some(setup) = state
                .scopes
                .entry(key)
                .or_insert_with(|| ScopeDedup::setup(body))
            else {
                return self.exec_blocks(body, vars);
            };
            let started = Instant::now();
            let it = setup.start(map);
            state.active = Some((key, it));
            started.elapsed()
        };
        let result = self.exec_blocks(body, vars);
        let (Some(state), Some(map)) = (
            self.dedup.as_mut(),
            self.lineage.as_mut().and_then(|frames| frames.last_mut()),
        ) else {
            return result;
        };
        let Some((key, it)) = state.active.take() else {
            return result;
        };
        let finishing = Instant::now();
        let finished = match (result, state.scopes.get_mut(&key)) {
            (Ok(()), Some(Some(setup))) => setup
                .finish(it, map, &mut state.counts)
                .map_err(|error| Error::Runtime { error, span: None }),
            (result, _) => {
                it.abandon(map);
                result
            }
        };
        self.trace_stats.time += start_cost + finishing.elapsed();
        finished
    }

    fn exec_basic(&mut self, block: &'p BasicBlock, vars: &mut SymbolTable) -> Result<(), Error> {
        let key = block as *const BasicBlock as usize;
        let fuser = self.fuser;
        // Multi-level reuse: a deterministic block whose assignments are all cached does not run.
        let probe = match (self.reuse.as_mut(), self.lineage.as_ref()) {
            (Some(reuse), Some(frames)) => match frames.last() {
                Some(items) => reuse.probe_block(self.program, block, vars, items),
                None => BlockProbe::NotReused,
            },
            _ => BlockProbe::NotReused,
        };
        let missed = match probe {
            BlockProbe::Reused(found) => {
                for (name, value, item) in found {
                    if let Some(items) = self.lineage.as_mut().and_then(|f| f.last_mut()) {
                        items.insert(name.clone(), item);
                    }
                    vars.insert(name, value);
                }
                return Ok(());
            }
            BlockProbe::Run(keys, reservations) => Some((keys, reservations)),
            BlockProbe::NotReused => None,
        };
        let started = Instant::now();
        // A traced run keeps every write-back: lineage and block reuse record each assigned
        // variable.
        let live_out = block.live_out.as_ref().filter(|_| self.lineage.is_none());
        let compiled = self.compiled(key, vars, "basic block", block.span, |meta, args| {
            compile_block(&block.stmts, live_out, meta, args, fuser)
        })?;
        self.run(&compiled, vars)?;
        if let (Some((keys, reservations)), Some(reuse)) = (missed, self.reuse.as_mut()) {
            let items = self.lineage.as_ref().and_then(|f| f.last());
            reuse.put_block(block, keys, reservations, vars, items, started.elapsed());
        }
        Ok(())
    }

    /// Runs one block that is not part of the program (an embedder's DAG), compiled by
    /// `compile` and cached under `key` like the program's blocks.
    pub(crate) fn exec_detached(
        &mut self,
        key: usize,
        what: &str,
        vars: &mut SymbolTable,
        compile: impl FnOnce(&BlockMeta, &ScriptArgs) -> Result<CompiledBlock, Error>,
    ) -> Result<(), Error> {
        let compiled = self.compiled(key, vars, what, Span::default(), compile)?;
        self.run(&compiled, vars)
    }

    /// Evaluates an expression of any type (a call argument) in the scope `vars`.
    fn eval(
        &mut self,
        expr: &'p ast::Expr,
        vars: &mut SymbolTable,
        what: &str,
    ) -> Result<Value, Error> {
        self.evaluate(expr, vars, what, false)
    }

    /// Evaluates a condition or loop bound: a scalar (a 1x1 matrix is cast, as in SystemDS).
    fn eval_scalar(
        &mut self,
        expr: &'p ast::Expr,
        vars: &mut SymbolTable,
        what: &str,
    ) -> Result<Value, Error> {
        self.evaluate(expr, vars, what, true)
    }

    /// Compiles (or reuses) and runs an expression; its value is left in [`EXPR_RESULT`].
    fn evaluate(
        &mut self,
        expr: &'p ast::Expr,
        vars: &mut SymbolTable,
        what: &str,
        as_predicate: bool,
    ) -> Result<Value, Error> {
        // The same expression compiles differently as a predicate, hence a distinct cache key.
        let key = expr as *const ast::Expr as usize + usize::from(as_predicate);
        let fuser = self.fuser;
        let compiled = self.compiled(key, vars, what, expr.span, |meta, args| {
            if as_predicate {
                compile_predicate(expr, meta, args, fuser)
            } else {
                compile_value(expr, meta, args, fuser)
            }
        })?;
        self.run(&compiled, vars)?;
        self.evaluated = self.frame().and_then(|map| map.remove(EXPR_RESULT));
        vars.remove(EXPR_RESULT).ok_or_else(|| Error::Runtime {
            error: RuntimeError::Internal(Internal::NoValue {
                expression: what.to_string(),
            }),
            span: Some(expr.span),
        })
    }

    fn eval_condition(
        &mut self,
        expr: &'p ast::Expr,
        vars: &mut SymbolTable,
        what: &str,
    ) -> Result<bool, Error> {
        let v = self.eval_scalar(expr, vars, &format!("{what} condition"))?;
        v.as_bool().map_err(|e| Error::Runtime {
            error: e,
            span: Some(expr.span),
        })
    }

    /// Finds a compiled plan for `key` valid for the current variables, or compiles one.
    fn compiled(
        &mut self,
        key: usize,
        vars: &SymbolTable,
        what: &str,
        span: Span,
        compile: impl FnOnce(&BlockMeta, &ScriptArgs) -> Result<CompiledBlock, Error>,
    ) -> Result<Arc<CompiledBlock>, Error> {
        let meta = BlockMeta::of(vars)
            .traced(self.lineage.is_some())
            .reuse_aware(self.reuse.as_ref().is_some_and(|r| r.partial))
            .unmarked(self.reuse.as_ref().and_then(|r| r.unmarked(key)));
        // A plan compiled unfused because fusing the block did not pay yet is compiled again
        // at the run from which it may (fused, or deferred further on a closer estimate).
        let mut due = None;
        let mut fused_in_background = None;
        if let Some(hit) = self.plans.find(key, vars, &meta) {
            let Some(deferral) = &hit.deferral else {
                self.cache_hits += 1;
                return Ok(hit);
            };
            let runs = deferral.count_run();
            match deferral.in_background(runs) {
                InBackground::Due(job) => {
                    fused_in_background = Some(job);
                    due = Some(Arc::clone(&hit));
                }
                InBackground::Idle if deferral.is_due(runs) => {
                    if !self.fuse_in_background(&hit, runs)? {
                        due = Some(Arc::clone(&hit));
                    }
                }
                InBackground::Idle | InBackground::Running => {}
            }
            if due.is_none() {
                self.cache_hits += 1;
                return Ok(hit);
            }
        }
        // The block's unfused runs so far, counted across its plans (this run is counted
        // already where a due plan counted it).
        let runs = match &due {
            Some(old) => old.deferral.as_ref().map(|d| Arc::clone(d.counter())),
            None => self.plans.unfused_runs(key),
        };
        let runs_before = runs.as_ref().map_or(0, |r| {
            r.load(std::sync::atomic::Ordering::Relaxed)
                .saturating_sub(u64::from(due.is_some()))
        });
        let meta = meta.after_unfused_runs(runs_before);
        // Compiled outside the cache's lock: two threads missing on one block both compile it
        // (the same plan), rather than one waiting for the other.
        let started = Instant::now();
        let mut compiled = match (&due, self.fuser) {
            // Only fusion changes: the DAG is the unfused plan's.
            (Some(old), Some(fuser)) => {
                // A panic on the background pool is this run's, as it would have been had
                // the block been fused here.
                let refusal = match fused_in_background.take().and_then(|job| job.wait()) {
                    Some(fusion) => crate::compile::refuse_with(old, &meta, fusion?)?,
                    None => crate::compile::refuse(old, &meta, fuser)?,
                };
                match refusal {
                    crate::compile::Refusal::Now(fused) => fused,
                    crate::compile::Refusal::Later {
                        runs_to_pay,
                        expected,
                    } => {
                        self.compile_time += started.elapsed();
                        if let Some(d) = &old.deferral {
                            d.defer_again(runs_to_pay, expected);
                        }
                        self.cache_hits += 1;
                        return Ok(Arc::clone(old));
                    }
                }
            }
            _ => compile(&meta, self.args)?,
        };
        self.compile_time += started.elapsed();
        self.blocks_compiled += 1;
        if let Some(deferral) = &mut compiled.deferral {
            if let Some(runs) = runs {
                deferral.share(runs);
            }
            if due.is_none() {
                // This run is one of the block's unfused runs.
                deferral.ran_and_due();
            }
        }
        let compiled = Arc::new(compiled);
        if let Some(old) = due {
            self.plans.remove(key, &old);
            if compiled.deferral.is_none() {
                if let Some(fuser) = self.fuser {
                    fuser.fused_later();
                }
            }
        }
        if self.fuser.is_some() && compiled.unknown_size_ops > 0 {
            self.unknown_sizes.push((span, compiled.unknown_size_ops));
        }
        if let Some(explained) = &mut self.explained {
            explained.push(ExplainedBlock {
                kind: what.to_string(),
                span,
                dag: compiled.dag.clone(),
            });
        }
        self.plans.insert(key, Arc::clone(&compiled));
        Ok(compiled)
    }

    /// Starts fusing `block`, a deferred block due at its unfused run `runs`, on a background
    /// thread where the fuser does so ([`Fuser::background_lag`]): the block runs on unfused
    /// meanwhile, and the fusion's result replaces the plan at the run the lag names. The work
    /// itself starts a quarter of the lag in ([`BACKGROUND_START_DIVISOR`]; the block is due
    /// again then, and this call starts it). False where the block is to be fused now.
    fn fuse_in_background(&self, block: &Arc<CompiledBlock>, runs: u64) -> Result<bool, Error> {
        let (Some(fuser), Some(deferral)) = (self.fuser, &block.deferral) else {
            return Ok(false);
        };
        // A start scheduled when the block fell due (only a fuser in the background
        // schedules one) has its install run; the block is not costed again.
        let install_at = match deferral.take_scheduled_install() {
            Some(install_at) => install_at,
            None => {
                let Some(lag) = fuser.background_lag(&block.dag, deferral.expected())? else {
                    return Ok(false);
                };
                // The lag is generous (it must cover the work however busy the cores are),
                // so the work starts a quarter of it in: a loop that ends before then never
                // pays for it (GLM's cheapest loop blocks fell due at run 120 with a lag of
                // 827 runs, their operators compiled for a plan the loop never reached).
                let (start_at, install_at) = (
                    runs.saturating_add(lag / BACKGROUND_START_DIVISOR),
                    runs.saturating_add(lag),
                );
                if start_at > runs {
                    deferral.schedule(start_at, install_at);
                    return Ok(true);
                }
                install_at
            }
        };
        let (fuser, block_now) = (fuser.clone(), Arc::clone(block));
        // The fuser weighs the runs before this one, as for a fusion now.
        let runs_before = runs.saturating_sub(1);
        // On the background pool, at idle priority: the Cranelift backend's joins would
        // otherwise take the global pool's workers from the run's kernels.
        Ok(deferral
            .start_in_background(move || fuser.fuse(&block_now.dag, runs_before), install_at))
    }

    fn run(&mut self, compiled: &Arc<CompiledBlock>, vars: &mut SymbolTable) -> Result<(), Error> {
        let scope = match self.dedup.as_mut().and_then(|d| d.active.as_mut()) {
            Some((_, it)) => {
                it.ran(compiled);
                Some(&mut it.recording)
            }
            None => None,
        };
        let tracer = match self.lineage.as_mut().and_then(|frames| frames.last_mut()) {
            Some(map) => Some(Tracer {
                map,
                stats: &mut self.trace_stats,
                scope,
            }),
            None => None,
        };
        let mut ctx = ExecContext {
            lineage: tracer,
            reuse: self.reuse.as_mut().map(|r| Reuse {
                cache: &r.cache,
                hits: &mut r.hits,
                partial: r
                    .partial
                    .then_some(&crate::partial::PartialReuse as &dyn Compensations),
            }),
            out: &mut *self.out,
            stats: self.op_stats.as_mut(),
            // Ranges serve fused operators and the unfused element-wise kernels (whether a
            // sparse operand's zeros may be skipped against a dense one), fused or not.
            ranges: Some(&mut self.ranges),
        };
        self.instructions_executed += compiled.instructions.len() as u64;
        exec::execute(&compiled.instructions, compiled.num_regs, vars, &mut ctx).map_err(|e| {
            Error::Runtime {
                error: e.error,
                span: e.span.map(|(s, t)| Span { start: s, end: t }),
            }
        })
    }

    /// Calls a user-defined function: binds arguments (evaluated in the caller's scope,
    /// defaults included), runs the body in a fresh scope, and assigns the results.
    /// Binds `eval`'s one argument spread over `def`'s parameters (`CallBlock::spread`), as
    /// SystemDS's `EvalNaryCPInstruction`: a named list by names, a list by positions, the
    /// parameters it leaves out at their defaults (evaluated in the caller's scope); any other
    /// value is the one argument.
    fn bind_spread(
        &mut self,
        call: &'p CallBlock,
        def: &'p ast::FunctionDef,
        vars: &mut SymbolTable,
        callee: &mut SymbolTable,
        callee_items: &mut LineageMap,
    ) -> Result<(), Error> {
        let arg = &call.args[0].value;
        let fail = |cause: CallError| Error::Runtime {
            error: RuntimeError::Call {
                function: call.function.to_string(),
                cause,
            },
            span: Some(arg.span),
        };
        let v = self.eval(arg, vars, "function argument")?;
        let item = self.evaluated.take();
        let n = def.params.len();
        // Each parameter's value and lineage item, where the argument gives one. An element's
        // item is the one `as.matrix(L["name"])` / `as.scalar(L[i])` has, so that reuse tells
        // elements of different lists apart and recomputation replays it.
        let element = |key: Literal, x: &Value| {
            let cast = match x {
                Value::Matrix(_) => CastOp::AsMatrix,
                Value::List(_) => return None,
                _ => CastOp::AsScalar,
            };
            let list = item.clone()?;
            let key = crate::lineage::literal_item(&key);
            let (opcode, data) = crate::lineage::hop_opcode_data(&OpKind::ListIndex);
            let rix = Lineage::instruction(opcode, data, vec![list, key.clone(), key]);
            let (opcode, data) = crate::lineage::hop_opcode_data(&OpKind::Cast(cast));
            Some(Lineage::instruction(opcode, data, vec![rix]))
        };
        let mut given: Vec<Option<(Value, Option<Lineage>)>> = vec![None; n];
        match &v {
            Value::List(list) if !matches!(def.params.as_slice(), [p] if p.ty == ValueType::List) => {
                match &list.names {
                    Some(names) => {
                        for (name, x) in names.iter().zip(&list.items) {
                            let Some(at) = def.params.iter().position(|p| &p.name == name) else {
                                return Err(fail(CallError::NoParameter { name: name.clone() }));
                            };
                            let item = element(Literal::Str(name.clone()), x);
                            given[at] = Some((x.clone(), item));
                        }
                    }
                    None if list.items.len() > n => {
                        return Err(fail(CallError::ArgumentCount {
                            params: n,
                            given: list.items.len(),
                        }))
                    }
                    None => {
                        for (i, (slot, x)) in given.iter_mut().zip(&list.items).enumerate() {
                            let item = element(Literal::Int(i as i64 + 1), x);
                            *slot = Some((x.clone(), item));
                        }
                    }
                }
            }
            _ if n == 1 => given[0] = Some((v.clone(), item.clone())),
            _ => {
                return Err(fail(CallError::ArgumentCount {
                    params: n,
                    given: 1,
                }))
            }
        }
        for (formal, value) in def.params.iter().zip(given) {
            let (value, item) = match (value, &formal.default) {
                (Some(found), _) => found,
                (None, Some(default)) => {
                    let v = self.eval(default, vars, "default argument")?;
                    (v, self.evaluated.take())
                }
                (None, None) => {
                    return Err(fail(CallError::MissingArgument {
                        parameter: formal.name.to_string(),
                    }))
                }
            };
            let kind = std::mem::discriminant(&value);
            let value = conform(value, formal.ty, &formal.name, &call.function).map_err(|e| {
                Error::Runtime {
                    error: e,
                    span: Some(arg.span),
                }
            })?;
            if let Some(item) = conformed_item(item, kind, &value) {
                callee_items.insert(formal.name.clone(), item);
            }
            callee.insert(formal.name.clone(), value);
        }
        Ok(())
    }

    fn exec_call(&mut self, call: &'p CallBlock, vars: &mut SymbolTable) -> Result<(), Error> {
        let program = self.program;
        let function = program.functions.get(&call.function).ok_or_else(|| {
            Error::from(lafuse_compiler::CompileError::at(
                lafuse_compiler::CheckError::UnknownFunction {
                    name: call.function.clone(),
                },
                call.span,
            ))
        })?;
        let def = &function.def;
        let mut callee = SymbolTable::new();
        // The callee's lineage map, when tracing: parameters bound to the arguments' items.
        let mut callee_items = LineageMap::new();
        let bound = if call.spread {
            self.bind_spread(call, def, vars, &mut callee, &mut callee_items)?;
            builtins::BoundArgs::default()
        } else {
            builtins::bind_udf_args(def, &call.args, call.span)?
        };
        for (param, formal) in bound.params.iter().zip(&def.params) {
            match param.value {
                // A default is evaluated where the call is, in the caller's scope, as SystemDS
                // compiles it into the call's arguments (`DMLTranslator.appendDefaultArguments`):
                // `b = a * 2` reads the caller's `a`, not the parameter.
                BoundValue::Arg(expr) | BoundValue::DefaultExpr(expr) => {
                    let what = if matches!(param.value, BoundValue::Arg(_)) {
                        "function argument"
                    } else {
                        "default argument"
                    };
                    let v = self.eval(expr, vars, what)?;
                    let item = self.evaluated.take();
                    let kind = std::mem::discriminant(&v);
                    let v = conform(v, formal.ty, &formal.name, &call.function).map_err(|e| {
                        Error::Runtime {
                            error: e,
                            span: Some(expr.span),
                        }
                    })?;
                    if let Some(item) = conformed_item(item, kind, &v) {
                        callee_items.insert(formal.name.clone(), item);
                    }
                    callee.insert(formal.name.clone(), v);
                }
                BoundValue::Default(_) | BoundValue::Absent => {
                    return Err(Error::Runtime {
                        error: RuntimeError::Call {
                            function: call.function.to_string(),
                            cause: CallError::MissingArgument {
                                parameter: formal.name.to_string(),
                            },
                        },
                        span: Some(call.span),
                    })
                }
            }
        }
        // Multi-level reuse: a deterministic call whose results are all cached skips its body.
        let keys = match self.reuse.as_mut() {
            Some(reuse) => {
                let args: Vec<Option<Lineage>> = def
                    .params
                    .iter()
                    .map(|p| callee_items.get(&p.name).cloned())
                    .collect();
                reuse.call_keys(program, &call.function, &def.results, &args)
            }
            None => None,
        };
        let mut reservations = None;
        if let (Some(keys), Some(reuse)) = (&keys, self.reuse.as_mut()) {
            match reuse.probe_call(keys) {
                CallProbe::Reused(found) => {
                    let mut results = SymbolTable::new();
                    let mut items = LineageMap::new();
                    for (result, (value, item)) in def.results.iter().zip(found) {
                        results.insert(result.name.clone(), value);
                        items.insert(result.name.clone(), item);
                    }
                    return self.bind_results(call, def, results, Some(items), vars);
                }
                CallProbe::Run(missed) => reservations = Some(missed),
            }
        }
        let started = Instant::now();
        if let Some(frames) = self.lineage.as_mut() {
            frames.push(callee_items);
        }
        let result = self.call_body(call, function, &mut callee);
        let callee_items = self.lineage.as_mut().and_then(|frames| frames.pop());
        result?;
        if let (Some(keys), Some(missed), Some(reuse)) = (keys, reservations, self.reuse.as_mut()) {
            let results = def
                .results
                .iter()
                .map(|r| {
                    let item = callee_items.as_ref().and_then(|m| m.get(&r.name).cloned());
                    callee.get(&r.name).map(|v| (v.clone(), item))
                })
                .collect();
            reuse.put_call(keys, missed, results, started.elapsed());
        }
        self.bind_results(call, def, callee, callee_items, vars)
    }

    /// The callee's side of a call: its body, in its own scope.
    fn call_body(
        &mut self,
        call: &'p CallBlock,
        function: &'p lafuse_compiler::program::Function,
        callee: &mut SymbolTable,
    ) -> Result<(), Error> {
        if self.depth >= MAX_CALL_DEPTH {
            return Err(Error::Runtime {
                error: RuntimeError::Call {
                    function: call.function.to_string(),
                    cause: CallError::TooDeep {
                        limit: MAX_CALL_DEPTH,
                    },
                },
                span: Some(call.span),
            });
        }
        self.depth += 1;
        let result = self.exec_deduplicated(&function.body, callee);
        self.depth -= 1;
        result
    }

    /// Assigns a call's results to its targets in the caller's scope (and their items, when
    /// tracing, from the callee's lineage map `callee_items`).
    fn bind_results(
        &mut self,
        call: &'p CallBlock,
        def: &'p ast::FunctionDef,
        mut callee: SymbolTable,
        mut callee_items: Option<LineageMap>,
        vars: &mut SymbolTable,
    ) -> Result<(), Error> {
        if call.targets.len() > def.results.len() {
            return Err(Error::Runtime {
                error: RuntimeError::Call {
                    function: call.function.to_string(),
                    cause: CallError::TooManyTargets {
                        results: def.results.len(),
                        targets: call.targets.len(),
                    },
                },
                span: Some(call.span),
            });
        }
        for (target, result) in call.targets.iter().zip(&def.results) {
            let v = callee.remove(&result.name).ok_or_else(|| Error::Runtime {
                error: RuntimeError::Call {
                    function: call.function.to_string(),
                    cause: CallError::ResultUnassigned {
                        result: result.name.to_string(),
                    },
                },
                span: Some(call.span),
            })?;
            let item = callee_items
                .as_mut()
                .and_then(|map| map.remove(&result.name));
            let kind = std::mem::discriminant(&v);
            // SystemDS casts arguments to their declared types but binds results as they
            // are: a double where an integer is declared (which its compiler lets through
            // where it cannot tell, as knnGraph's kthSmallest) stays a double.
            let ty = match (&v, result.ty) {
                (Value::Double(_), ValueType::Int) => ValueType::Double,
                (_, ty) => ty,
            };
            let v = conform(v, ty, &result.name, &call.function).map_err(|e| Error::Runtime {
                error: e,
                span: Some(call.span),
            })?;
            if let (Some(item), Some(map)) = (conformed_item(item, kind, &v), self.frame()) {
                map.insert(target.name.clone(), item);
            }
            vars.insert(target.name.clone(), v);
        }
        Ok(())
    }
}

/// The item of a value `conform` made from one of kind `before` with item `item`: the same
/// item, unless the cast changed the scalar's type (then the literal of the cast value, which
/// identifies it exactly).
fn conformed_item(
    item: Option<Lineage>,
    before: std::mem::Discriminant<Value>,
    after: &Value,
) -> Option<Lineage> {
    let item = item?;
    if std::mem::discriminant(after) == before {
        Some(item)
    } else {
        lineage::value_item(after).or(Some(item))
    }
}

/// Converts a value to a function parameter's or result's declared type (scalars are cast as
/// SystemDS casts them; a matrix where a scalar is declared, or vice versa, is an error).
fn conform(v: Value, ty: ValueType, name: &str, function: &str) -> Result<Value, RuntimeError> {
    let mismatch = |declared: &'static str, v: &Value| RuntimeError::Call {
        function: function.to_string(),
        cause: CallError::KindMismatch {
            name: name.to_string(),
            declared,
            given: v.type_name(),
        },
    };
    if v.is_list() != (ty == ValueType::List) || v.is_frame() != (ty == ValueType::Frame) {
        let declared = match ty {
            ValueType::List => "list",
            ValueType::Frame => "frame",
            ValueType::Matrix => "matrix",
            _ => "scalar",
        };
        return Err(mismatch(declared, &v));
    }
    let scalar = |to: ScalarType, v: Value| -> Result<Value, RuntimeError> {
        if v.is_matrix() {
            Err(RuntimeError::Call {
                function: function.to_string(),
                cause: CallError::MatrixForScalar {
                    name: name.to_string(),
                },
            })
        } else {
            v.cast_scalar(to)
        }
    };
    match ty {
        ValueType::Matrix => {
            if v.is_matrix() {
                Ok(v)
            } else {
                Err(RuntimeError::Call {
                    function: function.to_string(),
                    cause: CallError::ScalarForMatrix {
                        name: name.to_string(),
                        given: v.type_name(),
                    },
                })
            }
        }
        ValueType::Double => scalar(ScalarType::Double, v),
        ValueType::Int => scalar(ScalarType::Int, v),
        ValueType::Bool => scalar(ScalarType::Bool, v),
        ValueType::String => scalar(ScalarType::Str, v),
        ValueType::List | ValueType::Frame => Ok(v),
    }
}
