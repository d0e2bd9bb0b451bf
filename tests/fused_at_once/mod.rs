//! The engine configuration the integration tests run under: the defaults with LLVM as the
//! JIT, so that every block is fused at its first run. The default tiered JIT runs a block on
//! the unfused kernels until fusing it pays for its compilation, which on these tests' small
//! inputs it never does, and these tests check fused operators (their results, statistics,
//! lineage and reuse) against unfused execution. `tests/jit.rs` tests the tiers.

use lafuse::{EngineConfig, Jit};

/// `EngineConfig::default()`, fusing every block at its first run.
pub fn config() -> EngineConfig {
    EngineConfig {
        jit: Jit::Llvm,
        ..EngineConfig::default()
    }
}
