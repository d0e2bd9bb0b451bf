//! Execution statistics for `--stats` and `--stats-json`, in the spirit of SystemDS's `-stats`.

use serde::Serialize;
use std::time::Duration;

/// Time and count of one opcode over a run.
#[derive(Clone, Debug, Serialize)]
pub struct InstructionStat {
    pub opcode: String,
    pub count: u64,
    pub time_ms: f64,
}

/// What lineage-based reuse did in a run: hits by level, what the cache did, and the compute
/// time the hits saved.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReuseStats {
    /// Instructions of one operation whose outputs came from the cache.
    pub operation_hits: u64,
    /// Fused operators whose outputs came from the cache.
    pub fused_hits: u64,
    /// Function calls whose results came from the cache (multi-level reuse).
    pub function_hits: u64,
    /// Basic blocks whose assignments came from the cache (multi-level reuse).
    pub block_hits: u64,
    /// Operations computed from cached parts and a compensation (partial reuse).
    pub partial_hits: u64,
    /// Operations run without a probe, unmarked by the compiler (their lineage is new in
    /// every iteration of a loop).
    pub unmarked: u64,
    /// Probes that found nothing (the value was computed and put).
    pub misses: u64,
    /// Values dropped from memory to stay within the budget (spilled ones included).
    pub evictions: u64,
    /// Evicted values written to the spill directory, and spilled values read back.
    pub spills: u64,
    pub restores: u64,
    /// What computing the reused values took when they were put.
    pub saved_ms: f64,
    /// The most bytes the cache held in memory, and its budget.
    pub peak_bytes: u64,
    pub budget_bytes: u64,
}

impl ReuseStats {
    /// Hits at every level.
    pub fn hits(&self) -> u64 {
        self.operation_hits
            + self.fused_hits
            + self.function_hits
            + self.block_hits
            + self.partial_hits
    }
}

/// A reason (an operator left unfused, a cache miss) and how often it occurred.
#[derive(Clone, Debug, Serialize)]
pub struct Fallback {
    pub reason: String,
    pub count: u64,
}

/// One distinct fused operator a run executed: its template, the structural hash of its CPlan
/// (the operator-cache key: the body with its literals, independent of hop ids and variable
/// names) and how often it ran.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct FusedOperatorStat {
    /// `cell`, `row`, `magg` or `outer`.
    pub template: String,
    /// The CPlan's structural hash, 16 hex digits.
    pub hash: String,
    pub executions: u64,
}

/// What tiered compilation (`--jit tiered`) did in a run, per tier.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TieringStats {
    /// Operators compiled with Cranelift, and the time that took.
    pub cranelift_compiled: u64,
    pub cranelift_compile_ms: f64,
    /// Operators compiled with LLVM (at once for plans Cranelift refuses as unsupported, or in the
    /// background once promoted), and the time that took (background compilations included:
    /// they are not in `codegen_ms`, which counts the time the run waited for code).
    pub llvm_compiled: u64,
    pub llvm_compile_ms: f64,
    /// Of `llvm_compiled`: compiled on a background thread for a promotion, and loaded from
    /// the operator cache directory.
    pub llvm_background: u64,
    pub llvm_loaded: u64,
    /// Promotions LLVM could not build (those operators stayed on Cranelift).
    pub llvm_refused: u64,
    /// Operators that switched from Cranelift's code to LLVM's.
    pub tier_switches: u64,
    /// Calls of fused operators run on each tier, and the time they ran.
    pub cranelift_calls: u64,
    pub cranelift_run_ms: f64,
    pub llvm_calls: u64,
    pub llvm_run_ms: f64,
    /// Blocks compiled unfused because the cost model expected their fusion not to pay for
    /// its compilation yet (they run on the unfused kernels, the tier below Cranelift), and
    /// of those, the blocks compiled fused later, once their runs had made it pay.
    pub blocks_unfused_first: u64,
    pub blocks_fused_later: u64,
}

impl TieringStats {
    pub(crate) fn of(
        t: &lafuse_codegen::tiers::TierCounts,
        blocks_unfused_first: u64,
        blocks_fused_later: u64,
    ) -> TieringStats {
        TieringStats {
            blocks_unfused_first,
            blocks_fused_later,
            cranelift_compiled: t.cranelift_compiled,
            cranelift_compile_ms: ms(t.cranelift_compile),
            llvm_compiled: t.llvm_compiled,
            llvm_compile_ms: ms(t.llvm_compile),
            llvm_background: t.llvm_background,
            llvm_loaded: t.llvm_loaded,
            llvm_refused: t.llvm_refused,
            tier_switches: t.switches,
            cranelift_calls: t.cranelift_calls,
            cranelift_run_ms: ms(t.cranelift_run),
            llvm_calls: t.llvm_calls,
            llvm_run_ms: ms(t.llvm_run),
        }
    }
}

/// What a run cost: compile and execution time, plan-cache behaviour, heaviest instructions.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Stats {
    pub total_ms: f64,
    pub compile_ms: f64,
    pub execution_ms: f64,
    /// Basic blocks and predicates compiled into HOP DAGs and instructions.
    pub blocks_compiled: u64,
    /// Block executions that reused an already compiled plan.
    pub block_cache_hits: u64,
    /// Fused operator executions.
    pub fused_operators_executed: u64,
    /// The distinct fused operators executed (by template and structural hash, in that
    /// order), with their execution counts, which sum to `fused_operators_executed`.
    pub fused_operators: Vec<FusedOperatorStat>,
    /// Fused operators compiled to native code (operator-cache misses).
    pub operators_compiled: u64,
    /// Of `operators_compiled`: those whose machine code was loaded from the operator cache
    /// directory (`--operator-cache-dir`) instead of compiled.
    pub operators_loaded: u64,
    /// Fused operators whose native code came from the operator cache.
    pub operator_cache_hits: u64,
    /// Time spent generating and compiling native code: operators compiled at block compile,
    /// and entry points compiled on the call that first needed them.
    pub codegen_ms: f64,
    /// Time spent selecting fusion plans and constructing CPlans.
    pub fusion_planning_ms: f64,
    /// What each tier did under `--jit tiered` (`None` under any other).
    pub tiering: Option<TieringStats>,
    /// Time spent inside fused operators (part of `execution_ms`).
    pub fused_execution_ms: f64,
    /// Why operator-cache requests compiled (`FirstSight`, `HashCollision`, `Evicted`).
    pub operator_cache_misses: Vec<Fallback>,
    /// Fused operators the backend could not build, whose hops ran unfused, by reason.
    pub unfused_fallbacks: Vec<Fallback>,
    /// Blocks whose matrix operations of unknown size fusion left out (the reason names the
    /// block's lines); `count` is the number of such operations.
    pub fusion_skipped: Vec<Fallback>,
    pub instructions_executed: u64,
    /// Lineage items created (0 when tracing is off).
    pub lineage_items: u64,
    /// Time spent tracing lineage (building items before instructions, part of
    /// `execution_ms`).
    pub lineage_ms: f64,
    /// Lineage patches traced for deduplicated loops (one per path taken), and the dedup
    /// items added for their iterations (0 without deduplication).
    pub lineage_dedup_patches: u64,
    pub lineage_dedup_items: u64,
    /// What lineage-based reuse did (`None` without reuse).
    pub reuse: Option<ReuseStats>,
    /// `parfor` loops whose iterations ran on threads.
    pub parfor_parallel: u64,
    /// `parfor` loops that ran sequentially, by why.
    pub parfor_sequential: Vec<Fallback>,
    /// Opcodes by total time, heaviest first.
    pub heavy_hitters: Vec<InstructionStat>,
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl Stats {
    /// The human-readable report printed by `lafuse run --stats`.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        s.push_str("lafuse statistics:\n");
        s.push_str(&format!(
            "Total elapsed time:\t\t{:.3} sec.\n",
            self.total_ms / 1e3
        ));
        s.push_str(&format!(
            "Total compilation time:\t\t{:.3} sec.\n",
            self.compile_ms / 1e3
        ));
        s.push_str(&format!(
            "Total execution time:\t\t{:.3} sec.\n",
            self.execution_ms / 1e3
        ));
        s.push_str(&format!(
            "Blocks compiled/cache hits:\t{}/{}.\n",
            self.blocks_compiled, self.block_cache_hits
        ));
        s.push_str(&format!(
            "Instructions executed:\t\t{}.\n",
            self.instructions_executed
        ));
        s.push_str(&format!(
            "Fused operators executed:\t{} ({:.3} sec).\n",
            self.fused_operators_executed,
            self.fused_execution_ms / 1e3
        ));
        s.push_str(&format!(
            "Operators compiled/cache hits:\t{}/{} (codegen {:.3} sec summed over threads, \
             planning {:.3} sec).\n",
            self.operators_compiled,
            self.operator_cache_hits,
            self.codegen_ms / 1e3,
            self.fusion_planning_ms / 1e3
        ));
        if self.operators_loaded > 0 {
            s.push_str(&format!(
                "Operators loaded from the cache directory:\t{} of {}.\n",
                self.operators_loaded, self.operators_compiled
            ));
        }
        if let Some(t) = &self.tiering {
            s.push_str(&format!(
                "Tiers compiled (Cranelift/LLVM):\t{}/{} ({:.3}/{:.3} sec; LLVM in the \
                 background {}, loaded {}, refused {}).\n\
                 Tier switches to LLVM:\t\t{}.\n\
                 Calls on Cranelift/LLVM:\t{}/{} ({:.3}/{:.3} sec).\n\
                 Blocks run unfused first/fused later:\t{}/{}.\n",
                t.cranelift_compiled,
                t.llvm_compiled,
                t.cranelift_compile_ms / 1e3,
                t.llvm_compile_ms / 1e3,
                t.llvm_background,
                t.llvm_loaded,
                t.llvm_refused,
                t.tier_switches,
                t.cranelift_calls,
                t.llvm_calls,
                t.cranelift_run_ms / 1e3,
                t.llvm_run_ms / 1e3,
                t.blocks_unfused_first,
                t.blocks_fused_later
            ));
        }
        if self.lineage_items > 0 {
            s.push_str(&format!(
                "Lineage items created:\t\t{} (tracing {:.3} sec).\n",
                self.lineage_items,
                self.lineage_ms / 1e3
            ));
        }
        if self.lineage_dedup_patches > 0 {
            s.push_str(&format!(
                "Lineage dedup patches/items:\t{}/{}.\n",
                self.lineage_dedup_patches, self.lineage_dedup_items
            ));
        }
        if let Some(r) = &self.reuse {
            s.push_str(&format!(
                "Reuse hits (ops/fused/calls/blocks/partial)/misses:\t{}/{}/{}/{}/{}/{} \
                 (saved {:.3} sec).\n\
                 Reuse evictions/spills/restores:\t{}/{}/{} (peak {} of {} MB).\n\
                 Reuse unmarked operations:\t{}.\n",
                r.operation_hits,
                r.fused_hits,
                r.function_hits,
                r.block_hits,
                r.partial_hits,
                r.misses,
                r.saved_ms / 1e3,
                r.evictions,
                r.spills,
                r.restores,
                r.peak_bytes >> 20,
                r.budget_bytes >> 20,
                r.unmarked
            ));
        }
        for f in &self.operator_cache_misses {
            s.push_str(&format!(
                "Operator cache misses {}x: {}\n",
                f.count, f.reason
            ));
        }
        for f in &self.unfused_fallbacks {
            s.push_str(&format!("Ran unfused {}x: {}\n", f.count, f.reason));
        }
        for f in &self.fusion_skipped {
            s.push_str(&format!("Not fused {}x: {}\n", f.count, f.reason));
        }
        if self.parfor_parallel > 0 {
            s.push_str(&format!("parfor on threads: {}\n", self.parfor_parallel));
        }
        for f in &self.parfor_sequential {
            s.push_str(&format!("parfor sequential {}x: {}\n", f.count, f.reason));
        }
        s.push_str("Heavy hitter instructions:\n");
        s.push_str("  #  Instruction        Time(s)   Count\n");
        for (i, h) in self.heavy_hitters.iter().take(10).enumerate() {
            s.push_str(&format!(
                "{:>3}  {:<16} {:>9.3} {:>7}\n",
                i + 1,
                h.opcode,
                h.time_ms / 1e3,
                h.count
            ));
        }
        s
    }
}

/// The statistics' list of distinct fused operators from executions counted by template name
/// and structural hash.
pub(crate) fn fused_operators(
    by_operator: &std::collections::BTreeMap<(&'static str, u64), u64>,
) -> Vec<FusedOperatorStat> {
    by_operator
        .iter()
        .map(|(&(template, hash), &executions)| FusedOperatorStat {
            template: template.to_string(),
            hash: format!("{hash:016x}"),
            executions,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fused_operators_are_listed_by_template_then_hash_with_their_executions() {
        let counts = std::collections::BTreeMap::from([
            (("cell", 0xff), 2),
            (("cell", 0x1), 3),
            (("row", 0x0), 1),
        ]);
        let listed: Vec<(String, String, u64)> = fused_operators(&counts)
            .into_iter()
            .map(|o| (o.template, o.hash, o.executions))
            .collect();
        assert_eq!(
            listed,
            [
                ("cell".into(), "0000000000000001".into(), 3),
                ("cell".into(), "00000000000000ff".into(), 2),
                ("row".into(), "0000000000000000".into(), 1),
            ]
        );
    }
}
