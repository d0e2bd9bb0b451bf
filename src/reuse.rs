//! Lineage-based reuse in the engine (LIMA sections 4-5, MEMPHIS section 3.3): what reuse is
//! configured to do, the run's cache and counters, and multi-level reuse of function calls.
//!
//! Operation-level full reuse happens in the executor (`lafuse_runtime::lineage::reuse`):
//! every reusable instruction's outputs are probed by their lineage items. Multi-level reuse
//! probes a deterministic function's results before its body runs, each by an item naming
//! the function, the result and the items of the arguments (LIMA 4.2); on a hit the body does
//! not run at all. The results' items in the caller stay the items the body traced (kept
//! beside the cache by call item), so lineage does not depend on whether a call was reused.

use crate::calls::{expr_calls, stmt_calls};
use lafuse_compiler::ast;
use lafuse_compiler::program::{Block, Program};
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
        })
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
    matches!(
        name,
        "rand" | "Rand" | "sample" | "time" | "read" | "print" | "write" | "stop" | "lineage"
    )
}
