//! Lineage-based reuse in the engine (LIMA sections 4-5, MEMPHIS section 3.3): what reuse is
//! configured to do, the run's cache and counters, and multi-level reuse of function calls.
//!
//! Operation-level full reuse happens in the executor (`lafuse_runtime::lineage::reuse`):
//! every reusable instruction's outputs are probed by their lineage items. Multi-level reuse
//! probes a deterministic function's results before its body runs, each by an item naming
//! the function, the result and the items of the arguments (LIMA 4.2); on a hit the body does
//! not run at all. The results' items in the caller stay the items the body traced (kept
//! beside the cache by call item), so lineage does not depend on whether a call was reused.
//! Basic blocks are reused as a whole likewise, each assigned variable by an item naming the
//! block and the items of the variables it reads.

use crate::calls::{expr_calls, stmt_calls};
use lafuse_compiler::ast;
use lafuse_compiler::program::{BasicBlock, Block, Program};
use lafuse_runtime::lineage::cache::{CacheConfig, Probe, Reservation, ReuseCache};
use lafuse_runtime::lineage::reuse::ReuseHits;
use lafuse_runtime::lineage::Lineage;
use lafuse_runtime::value::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use lafuse_runtime::lineage::cache::EvictionPolicy;

/// What lineage-based reuse does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReuseMode {
    /// No reuse (the default).
    #[default]
    None,
    /// Full reuse of operations and fused operators whose outputs' lineage is cached.
    Full,
    /// Full reuse, and reuse of deterministic function calls as a whole.
    Multilevel,
    /// Full reuse of operations, and partial reuse: an operation that misses is computed from
    /// cached parts plus a compensation where a rewrite applies (LIMA section 4.2). Full reuse
    /// is kept, as the rewrite with nothing to compensate.
    Partial,
    /// Multi-level and partial reuse together (SystemDS's `reuse_hybrid`).
    Hybrid,
}

impl ReuseMode {
    /// Whether function calls are reused as a whole.
    pub fn multilevel(self) -> bool {
        matches!(self, ReuseMode::Multilevel | ReuseMode::Hybrid)
    }

    /// Whether operations that miss try partial reuse.
    pub fn partial(self) -> bool {
        matches!(self, ReuseMode::Partial | ReuseMode::Hybrid)
    }
}

/// Lineage-based reuse's configuration ([`crate::EngineConfig::reuse`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ReuseConfig {
    pub mode: ReuseMode,
    /// Which cached values go first when the budget is reached.
    pub policy: EvictionPolicy,
    /// Bytes the cache may hold in memory; `None`: 5 % of the memory this process may use.
    pub budget: Option<u64>,
    /// The directory in which the cache makes its private spill directory (removed at the end
    /// of the run) for evicted values whose recomputation would cost more than reading them
    /// back; `None`: the system's temporary directory.
    pub spill_dir: Option<PathBuf>,
    /// How many times a value must be asked for before it is kept (MEMPHIS's delayed
    /// caching): 2 by default, so that intermediates used once (a mini-batch's) never take
    /// memory or stop in-place updates; 1 keeps every value computed, as LIMA does.
    pub delay: u32,
}

impl Default for ReuseConfig {
    fn default() -> ReuseConfig {
        ReuseConfig {
            mode: ReuseMode::None,
            policy: EvictionPolicy::default(),
            budget: None,
            spill_dir: None,
            delay: 2,
        }
    }
}

impl ReuseConfig {
    /// The budget in bytes.
    pub fn budget_bytes(&self) -> u64 {
        self.budget
            .unwrap_or_else(|| lafuse_runtime::memory::limits().budget() / 20)
    }
}

/// Reuse's state in one run.
pub(crate) struct RunReuse {
    pub(crate) cache: ReuseCache,
    pub(crate) hits: ReuseHits,
    multilevel: bool,
    /// Whether operations that miss try partial reuse.
    pub(crate) partial: bool,
    /// The variables whose readers are unmarked, by basic block ([`crate::unmark`]).
    unmarked: HashMap<usize, Arc<[String]>>,
    /// Per function: whether its calls may be reused as a whole.
    deterministic: HashMap<String, bool>,
    /// The items the body traced for a call's results, by the call's item.
    body_items: HashMap<Lineage, Lineage>,
    /// Per basic block (by address): what it reads and assigns, where it is reusable as a
    /// whole.
    blocks: HashMap<usize, Option<BlockShape>>,
    /// The addresses of the main program's basic blocks (found at the first probe).
    main_blocks: Option<std::collections::HashSet<usize>>,
}

/// What a basic block reusable as a whole reads (before assigning) and assigns.
#[derive(Clone)]
struct BlockShape {
    reads: Vec<String>,
    writes: Vec<String>,
}

/// What probing a basic block found.
pub(crate) enum BlockProbe {
    /// Not reused as a whole (not multi-level, not deterministic, or reading no matrix).
    NotReused,
    /// Every assigned variable is cached: its name, value and the item the block traced.
    Reused(Vec<(String, Value, Lineage)>),
    /// The block runs; its assignments are put after it (the keys and their reservations).
    Run(Vec<Lineage>, Vec<Option<Reservation>>),
}

/// What probing a call found.
pub(crate) enum CallProbe {
    /// Every result is cached: its value and the item the caller binds.
    Reused(Vec<(Value, Lineage)>),
    /// The body runs; the results that missed are put after it.
    Run(Vec<Option<Reservation>>),
}

impl RunReuse {
    pub(crate) fn new(config: &ReuseConfig, program: &Program) -> Option<RunReuse> {
        if config.mode == ReuseMode::None {
            return None;
        }
        Some(RunReuse {
            cache: ReuseCache::new(CacheConfig {
                budget: usize::try_from(config.budget_bytes()).unwrap_or(usize::MAX),
                policy: config.policy,
                spill_dir: config.spill_dir.clone(),
                spill: true,
                delay: config.delay.max(1),
            }),
            hits: ReuseHits::default(),
            multilevel: config.mode.multilevel(),
            partial: config.mode.partial(),
            unmarked: crate::unmark::unmarked_blocks(program),
            deterministic: HashMap::new(),
            body_items: HashMap::new(),
            blocks: HashMap::new(),
            main_blocks: None,
        })
    }

    /// A `parfor` worker's reuse: the same cache (its placeholders make workers wait for one
    /// another's values), its own hit counts and copies of what was learnt of the program.
    pub(crate) fn for_worker(&self) -> RunReuse {
        RunReuse {
            cache: self.cache.clone(),
            hits: ReuseHits::default(),
            multilevel: self.multilevel,
            partial: self.partial,
            unmarked: self.unmarked.clone(),
            deterministic: self.deterministic.clone(),
            body_items: self.body_items.clone(),
            blocks: self.blocks.clone(),
            main_blocks: self.main_blocks.clone(),
        }
    }

    /// Adds a finished worker's hits to these.
    pub(crate) fn add_hits(&mut self, theirs: &ReuseHits) {
        let h = &mut self.hits;
        h.operations += theirs.operations;
        h.fused += theirs.fused;
        h.functions += theirs.functions;
        h.blocks += theirs.blocks;
        h.partial += theirs.partial;
        h.unmarked += theirs.unmarked;
    }

    /// The variables whose readers are unmarked in the basic block with plan key `key`.
    pub(crate) fn unmarked(&self, key: usize) -> Option<Arc<[String]>> {
        self.unmarked.get(&key).cloned()
    }

    /// What reuse did so far, for `--stats`.
    pub(crate) fn stats(&self) -> crate::stats::ReuseStats {
        let cache = self.cache.stats();
        crate::stats::ReuseStats {
            operation_hits: self.hits.operations,
            fused_hits: self.hits.fused,
            function_hits: self.hits.functions,
            block_hits: self.hits.blocks,
            partial_hits: self.hits.partial,
            unmarked: self.hits.unmarked,
            misses: cache.misses,
            evictions: cache.evictions,
            spills: cache.spills,
            restores: cache.restores,
            saved_ms: cache.saved_compute.as_secs_f64() * 1e3,
            peak_bytes: cache.peak_bytes as u64,
            budget_bytes: self.cache.budget() as u64,
        }
    }

    /// The items of the results of calling `function` on arguments with items `args` (in
    /// parameter order), or `None` where the call is not reused as a whole: not multi-level,
    /// an argument without an item, or a function that is not deterministic.
    pub(crate) fn call_keys(
        &mut self,
        program: &Program,
        function: &str,
        results: &[ast::Param],
        args: &[Option<Lineage>],
    ) -> Option<Vec<Lineage>> {
        if !self.multilevel || !deterministic(program, function, &mut self.deterministic) {
            return None;
        }
        let args: Vec<Lineage> = args.iter().cloned().collect::<Option<_>>()?;
        Some(
            results
                .iter()
                .map(|r| {
                    Lineage::instruction("fcall", format!("{function}:{}", r.name), args.clone())
                })
                .collect(),
        )
    }

    /// Probes a call's result items.
    pub(crate) fn probe_call(&mut self, keys: &[Lineage]) -> CallProbe {
        let mut found = Vec::with_capacity(keys.len());
        let mut reservations = Vec::with_capacity(keys.len());
        for key in keys {
            // A call's results are kept from their first computation (no delayed caching).
            match self.cache.probe_keeping(key) {
                Probe::Hit { key, value } => {
                    let item = self.body_items.get(&key).cloned().unwrap_or(key);
                    found.push(Some((value, item)));
                    reservations.push(None);
                }
                Probe::Miss(reservation) => {
                    found.push(None);
                    reservations.push(Some(reservation));
                }
            }
        }
        if reservations.iter().any(Option::is_some) {
            return CallProbe::Run(reservations);
        }
        self.hits.functions += 1;
        CallProbe::Reused(found.into_iter().flatten().collect())
    }

    /// Puts a call's results (`results[j]`: the value and the item the body traced for result
    /// `j`) for the reservations that missed; `compute` is what the call took.
    pub(crate) fn put_call(
        &mut self,
        keys: Vec<Lineage>,
        reservations: Vec<Option<Reservation>>,
        results: Vec<Option<(Value, Option<Lineage>)>>,
        compute: Duration,
    ) {
        for ((key, reservation), result) in keys.into_iter().zip(reservations).zip(results) {
            let (Some(reservation), Some((value, item))) = (reservation, result) else {
                continue;
            };
            self.cache.put(reservation, &value, compute);
            if let Some(item) = item {
                self.body_items.insert(key, item);
            }
        }
    }
}

impl RunReuse {
    /// Multi-level reuse of a basic block (LIMA section 4.1): one item per variable it assigns,
    /// keyed by the block and the items of the variables it reads. A deterministic block
    /// (as for calls) of the main program reading some matrix is probed; where everything it
    /// assigns is cached it does not run.
    pub(crate) fn probe_block(
        &mut self,
        program: &Program,
        block: &BasicBlock,
        vars: &lafuse_runtime::exec::SymbolTable,
        items: &lafuse_runtime::lineage::LineageMap,
    ) -> BlockProbe {
        if !self.multilevel {
            return BlockProbe::NotReused;
        }
        let key = block as *const BasicBlock as usize;
        if !self.blocks.contains_key(&key) {
            // Function bodies are left to the reuse of whole calls: their blocks' entries would
            // only take the budget from the calls' results.
            let main = self
                .main_blocks
                .get_or_insert_with(|| main_blocks(&program.main));
            let in_main = main.contains(&key);
            let shape = in_main
                .then(|| block_shape(program, block, &mut self.deterministic))
                .flatten();
            self.blocks.insert(key, shape);
        }
        let Some(Some(shape)) = self.blocks.get(&key) else {
            return BlockProbe::NotReused;
        };
        if !shape
            .reads
            .iter()
            .any(|r| matches!(vars.get(r), Some(Value::Matrix(_))))
        {
            return BlockProbe::NotReused;
        }
        let Some(read_items) = shape
            .reads
            .iter()
            .map(|r| items.get(r).cloned())
            .collect::<Option<Vec<Lineage>>>()
        else {
            return BlockProbe::NotReused;
        };
        let at = format!("{}-{}", block.span.start, block.span.end);
        let keys: Vec<Lineage> = shape
            .writes
            .iter()
            .map(|w| Lineage::instruction("sb", format!("{at}:{w}"), read_items.clone()))
            .collect();
        let mut found = Vec::with_capacity(keys.len());
        let mut reservations = Vec::with_capacity(keys.len());
        for (write, key) in shape.writes.iter().zip(&keys) {
            // Delayed caching applies (unlike to a call's results): a block of a loop body
            // often assigns large values used once (`Z = cbind(X, Y[, i])`).
            match self.cache.probe(key) {
                Probe::Hit { key, value } => {
                    let item = self.body_items.get(&key).cloned().unwrap_or(key);
                    found.push(Some((write.clone(), value, item)));
                    reservations.push(None);
                }
                Probe::Miss(reservation) => {
                    found.push(None);
                    reservations.push(Some(reservation));
                }
            }
        }
        if reservations.iter().any(Option::is_some) {
            return BlockProbe::Run(keys, reservations);
        }
        self.hits.blocks += 1;
        BlockProbe::Reused(found.into_iter().flatten().collect())
    }

    /// Puts what a block that ran assigned, for the reservations that missed; `compute` is
    /// what the block took.
    pub(crate) fn put_block(
        &mut self,
        block: &BasicBlock,
        keys: Vec<Lineage>,
        reservations: Vec<Option<Reservation>>,
        vars: &lafuse_runtime::exec::SymbolTable,
        items: Option<&lafuse_runtime::lineage::LineageMap>,
        compute: Duration,
    ) {
        let key = block as *const BasicBlock as usize;
        let Some(Some(shape)) = self.blocks.get(&key) else {
            return;
        };
        let results = shape
            .writes
            .iter()
            .map(|w| {
                vars.get(w)
                    .map(|v| (v.clone(), items.and_then(|m| m.get(w).cloned())))
            })
            .collect();
        self.put_call(keys, reservations, results, compute);
    }
}

/// The addresses of the main program's basic blocks, nested ones included.
fn main_blocks(blocks: &[Block]) -> std::collections::HashSet<usize> {
    crate::unmark::basic_blocks(blocks, true)
        .into_iter()
        .map(|b| b as *const BasicBlock as usize)
        .collect()
}

/// What `block` reads before assigning and assigns, where it may be reused as a whole: it
/// assigns something, and neither it nor a function it calls draws random numbers, reads the
/// clock or a file, or has a side effect.
fn block_shape(
    program: &Program,
    block: &BasicBlock,
    memo: &mut HashMap<String, bool>,
) -> Option<BlockShape> {
    let functions: Vec<String> = program.functions.keys().cloned().collect();
    let deterministic_functions: Vec<String> = functions
        .into_iter()
        .filter(|f| deterministic(program, f, memo))
        .collect();
    let nondeterministic_call = |name: &str| {
        nondeterministic(name)
            || (program.functions.contains_key(name)
                && !deterministic_functions.iter().any(|f| f == name))
    };
    if block
        .stmts
        .iter()
        .any(|stmt| stmt_calls(stmt, &nondeterministic_call))
    {
        return None;
    }
    let (mut reads, mut writes): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for stmt in &block.stmts {
        let mut read = Vec::new();
        crate::compile::stmt_reads(stmt, &mut read);
        for r in read {
            if !writes.iter().any(|w| w == r) && !reads.iter().any(|x| x == r) {
                reads.push(r.to_string());
            }
        }
        let targets: Vec<&str> = match &stmt.kind {
            ast::StmtKind::Assign { target, .. } => vec![target.name.as_str()],
            ast::StmtKind::MultiAssign { targets, .. } => {
                targets.iter().map(|t| t.name.as_str()).collect()
            }
            _ => Vec::new(),
        };
        for t in targets {
            if !writes.iter().any(|w| w == t) {
                writes.push(t.to_string());
            }
        }
    }
    (!writes.is_empty()).then_some(BlockShape { reads, writes })
}

/// Whether calls of `function` can be reused as a whole: its body (and every function it
/// calls) draws no random numbers, reads no clock or file and has no side effect (print,
/// write, stop), so equal arguments give equal results and skipping it changes nothing else.
fn deterministic(program: &Program, function: &str, memo: &mut HashMap<String, bool>) -> bool {
    if let Some(&known) = memo.get(function) {
        return known;
    }
    // Recursion is assumed deterministic while it is being decided (a cycle adds nothing).
    memo.insert(function.to_string(), true);
    let verdict = match program.functions.get(function) {
        Some(f) => blocks_deterministic(program, &f.body, memo),
        None => false,
    };
    memo.insert(function.to_string(), verdict);
    verdict
}

fn blocks_deterministic(
    program: &Program,
    blocks: &[Block],
    memo: &mut HashMap<String, bool>,
) -> bool {
    let expr = |e: &ast::Expr| !expr_calls(e, &nondeterministic);
    blocks.iter().all(|block| match block {
        Block::Basic(basic) => basic
            .stmts
            .iter()
            .all(|s| !stmt_calls(s, &nondeterministic)),
        Block::If {
            cond,
            then_blocks,
            else_blocks,
            ..
        } => {
            expr(cond)
                && blocks_deterministic(program, then_blocks, memo)
                && blocks_deterministic(program, else_blocks, memo)
        }
        Block::For {
            from,
            to,
            step,
            body,
            ..
        } => {
            expr(from)
                && expr(to)
                && step.as_ref().is_none_or(expr)
                && blocks_deterministic(program, body, memo)
        }
        Block::While { cond, body, .. } => expr(cond) && blocks_deterministic(program, body, memo),
        Block::Call(call) => {
            call.args.iter().all(|a| expr(&a.value)) && deterministic(program, &call.function, memo)
        }
    })
}

/// Built-ins that draw random numbers, read the clock or files, or have side effects.
fn nondeterministic(name: &str) -> bool {
    // SystemDS's parser takes `rand` in any case (`RAND`).
    name.eq_ignore_ascii_case("rand")
        || matches!(
            name,
            "sample" | "time" | "read" | "print" | "write" | "stop" | "assert" | "lineage"
        )
}
