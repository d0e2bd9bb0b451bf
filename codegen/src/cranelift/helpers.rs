//! The scalar functions Cranelift code calls by address: the same Rust code the runtime and
//! the LLVM backend run for each operation (fdlibm's `exp` and `ln` from the core's `math`,
//! which the LLVM backend states in IR operation for operation; `java_pow`, `f64::sin`, `%`,
//! the bitwise operations), so NaN, infinities and every bit agree.

use lafuse_compiler::hops::BinaryOp;
use lafuse_core::math;
use lafuse_runtime::ops::java_pow;

macro_rules! helpers {
    ($($which:ident = $name:ident($($a:ident),+) => $body:expr;)*) => {
        $(
            extern "C" fn $name($($a: f64),+) -> f64 { $body }
        )*

        /// A scalar function generated code calls.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(super) enum Helper {
            $($which,)*
        }

        /// The address of `which`, for an indirect call.
        pub(super) fn address(which: Helper) -> usize {
            match which {
                $(Helper::$which => $name as *const () as usize,)*
            }
        }
    };
}

helpers! {
    Exp = lafuse_exp(x) => math::exp(x);
    Ln = lafuse_ln(x) => math::ln(x);
    Sin = lafuse_sin(x) => x.sin();
    Cos = lafuse_cos(x) => x.cos();
    Tan = lafuse_tan(x) => x.tan();
    Asin = lafuse_asin(x) => x.asin();
    Acos = lafuse_acos(x) => x.acos();
    Atan = lafuse_atan(x) => x.atan();
    Sinh = lafuse_sinh(x) => x.sinh();
    Cosh = lafuse_cosh(x) => x.cosh();
    Tanh = lafuse_tanh(x) => math::tanh(x);
    Pow = lafuse_pow(x, y) => java_pow(x, y);
    Fmod = lafuse_fmod(x, y) => x % y;
    BitwAnd = lafuse_bitw_and(x, y) => BinaryOp::BitwAnd.apply(x, y);
    BitwOr = lafuse_bitw_or(x, y) => BinaryOp::BitwOr.apply(x, y);
    BitwXor = lafuse_bitw_xor(x, y) => BinaryOp::BitwXor.apply(x, y);
    BitwShiftL = lafuse_bitw_shift_l(x, y) => BinaryOp::BitwShiftL.apply(x, y);
    BitwShiftR = lafuse_bitw_shift_r(x, y) => BinaryOp::BitwShiftR.apply(x, y);
}

/// A function of the runtime's vector math that maps a vector's lanes in place: generated code
/// stores a vector's parts to the stack and calls it with their address and count, where the
/// runtime computes eight lanes at once (AVX-512, or AVX2 in two registers), to the bit of the scalar
/// function. Cranelift's x64 vectors hold two doubles: `tanh(X + c)` over 2.6e5 cells took
/// 2.2 ms with fdlibm's method stated on two lanes in Cranelift IR, 1.6 ms with this call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LaneMap {
    Exp,
    Ln,
    Tanh,
}

macro_rules! lane_maps {
    ($($which:ident = $name:ident => $f:path;)*) => {
        $(
            /// # Safety
            /// `p` must be valid for `n` reads and writes of `f64` (the generated code's stack
            /// slot).
            unsafe extern "C" fn $name(p: *mut f64, n: usize) {
                // SAFETY: the caller's contract.
                $f(unsafe { std::slice::from_raw_parts_mut(p, n) })
            }
        )*

        /// The address of `which`, for an indirect call `(ptr, count) -> ()`.
        pub(super) fn lane_map_address(which: LaneMap) -> usize {
            match which {
                $(LaneMap::$which => $name as *const () as usize,)*
            }
        }
    };
}

lane_maps! {
    Exp = lafuse_exp_lanes => lafuse_runtime::kernels::exp_in_place;
    Ln = lafuse_ln_lanes => lafuse_runtime::kernels::ln_in_place;
    Tanh = lafuse_tanh_lanes => lafuse_runtime::kernels::tanh_in_place;
}
