//! Runs a hot loop compiled for the widest vector unit this CPU has: the crate is built for
//! baseline x86-64 (SSE2, 16 vector registers of two doubles), where a loop with eight lanes
//! of several accumulators spills to the stack on every iteration.
//!
//! The loops keep their lane structure (eight lanes, say) on every path, so the instruction
//! set changes their speed, never their results.

/// Calls `f`, inlined into a function compiled for AVX-512 or AVX2 where the CPU has them.
/// Write `f` as `#[inline(always)] || ...` over `#[inline(always)]` helpers: code that LLVM
/// leaves as a call of its own (a large closure, say) runs at baseline width.
#[inline(always)]
pub fn widest<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx512dq,avx512vl")]
        unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512vl")
        {
            // SAFETY: the CPU has AVX-512F, DQ and VL (checked just above).
            return unsafe { avx512(f) };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX2 and FMA (checked just above).
            return unsafe { avx2(f) };
        }
    }
    f()
}
