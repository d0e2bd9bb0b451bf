//! Leaving the CPU's vector registers clean after library code that runs AVX-512 kernels, so
//! that the code after it does not pay for their dirty upper halves.

/// Clears the upper halves of the vector registers (`vzeroupper`) where the CPU has AVX; does
/// nothing elsewhere.
///
/// Why: faer's AVX-512 micro-kernels return with the upper halves dirty, and every vector
/// instruction in the SSE encoding after that pays a merge with them. Cranelift's operators
/// and this crate's baseline-x86-64 code (the fdlibm-style math functions Cranelift calls) use
/// that encoding: Cranelift's Outer tile entry, which runs right after a tile product, took
/// 885 ms on 1000² cells instead of 11 ms (session 24, `cranelift_timing`'s
/// `outer_tiles_run_time_against_llvm`). LLVM's operators use the VEX encoding and do not care.
#[inline]
pub fn clear_upper_vector_state() {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU has AVX, which `vzeroupper` needs (the compiler knows what the
        // intrinsic clobbers).
        unsafe { zero_upper() }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn zero_upper() {
    std::arch::x86_64::_mm256_zeroupper();
}
