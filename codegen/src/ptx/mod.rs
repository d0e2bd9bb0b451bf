//! CPlan → PTX through LLVM's NVPTX backend (`nvptx64-nvidia-cuda`, `sm_80`, which the driver
//! JIT-compiles for newer GPUs): one kernel per operator and main-input format, whose bodies
//! are the native backend's own emitters ([`crate::native`]'s `Body`, one lane wide), so the
//! CPU and the GPU compute every cell with the same operations.
//!
//! The kernels and their launch contract are in [`kernels`]; what the host does around them
//! (uploads, launches, merging per-block partials in a fixed order) is the GPU skeleton in
//! `lafuse_skeletons::gpu`. Generation needs no GPU: `explain --level ptx` and the tests
//! (text checks, `ptxas` validation) run everywhere.

#[cfg(feature = "cuda")]
pub mod backend;
mod cell;
mod devmath;
mod fold;
pub mod kernels;
mod kx;
mod nvptx;
mod outer;
pub mod outer_dense;
mod row;
mod row_block;
pub mod samples;
/// The device the GPU backend runs on (the GPU skeleton's).
#[cfg(feature = "cuda")]
pub use lafuse_skeletons::gpu::device;
pub use row::{compared_row_layouts, RowKernelOptions};

use crate::backend::{CodegenError, Internal};
use inkwell::context::Context;
use lafuse_compiler::fusion::cplan::CPlan;
pub use lafuse_skeletons::gpu::abi::{
    GpuKernel, GpuMain, KernelShape, NarrowRows, PtxText, BLOCK_THREADS, NARROW_ENTRY,
};
use std::time::{Duration, Instant};

/// The GPU architecture kernels are generated for (the driver JIT-compiles its PTX for newer
/// ones: Hopper runs it).
pub const SM: &str = "sm_80";

/// One generated kernel: its PTX module text and what the GPU skeleton needs to launch it.
#[derive(Clone, Debug)]
pub struct PtxKernel {
    /// The PTX module: the kernel's entries (see [`GpuKernel`]) and any fold entry.
    pub ptx: PtxText,
    /// The kernel's entry name in `ptx`.
    pub name: &'static str,
    /// What the kernel computes and how it is launched.
    pub kernel: GpuKernel,
    /// Generation time (IR emission, optimization, PTX printing).
    pub generation: Duration,
}

/// The entry name of every generated kernel.
pub const ENTRY: &str = "lafuse_kernel";

/// The entry name of the second kernel of a module whose output is summed over rows: it folds
/// the partial rows on the device ([`KernelShape::ColAgg`], [`KernelShape::RowColumns`]).
pub const FOLD_ENTRY: &str = lafuse_skeletons::gpu::abi::FOLD_ENTRY;

/// Generates the kernel of `plan` for a main input read as `main`: `Unsupported` names what
/// the GPU backend does not generate (the operator then runs on the CPU).
pub fn generate(plan: &CPlan, main: GpuMain) -> Result<PtxKernel, CodegenError> {
    generate_with(plan, main, RowKernelOptions::default())
}

/// [`generate`] with a Row kernel laid out as `row_options` (the benchmark compares layouts).
pub fn generate_with(
    plan: &CPlan,
    main: GpuMain,
    row_options: RowKernelOptions,
) -> Result<PtxKernel, CodegenError> {
    let start = Instant::now();
    if plan.outputs.is_empty() || plan.inputs.is_empty() {
        return Err(CodegenError::Internal(Internal::MalformedPlan(
            "a plan needs inputs and outputs",
        )));
    }
    let ctx = Context::create();
    let module = ctx.create_module("lafuse_gpu");
    let tm = nvptx::target_machine()?;
    nvptx::setup_module(&module, &tm);
    let kernel = kernels::emit(&ctx, &module, plan, main, row_options)?;
    // Bodies for the scalar helpers the kernel calls (`sin`, `^`, `%%`, bit operations).
    devmath::define_helpers(&ctx, &module)?;
    crate::native::llvm::verify(&module, "generated PTX module fails verification")?;
    crate::native::llvm::optimize(&module, &tm)?;
    crate::native::llvm::verify(&module, "optimized PTX module fails verification")?;
    nvptx::check_calls(&module)?;
    let ptx = nvptx::print_ptx(&tm, &module)?;
    Ok(PtxKernel {
        ptx: PtxText::new(ptx),
        name: ENTRY,
        kernel,
        generation: start.elapsed(),
    })
}

#[cfg(test)]
mod tests;
