//! Everything NVPTX-specific of LLVM 14: the target machine, module setup, the PTX special
//! registers and barrier as intrinsics, the kernel calling convention, shared-memory arrays,
//! the check that a module calls nothing the device lacks, and PTX printing.

use super::SM;
use crate::backend::{CodegenError, Internal};
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple,
};
use inkwell::values::{FunctionValue, GlobalValue};
use inkwell::{AddressSpace, OptimizationLevel};
use std::sync::OnceLock;

/// LLVM's calling convention of a kernel (`ptx_kernel`): NVPTX emits it as an `.entry`.
pub(crate) const PTX_KERNEL_CC: u32 = 71;
/// The address space of a block's shared memory.
pub(crate) fn shared() -> AddressSpace {
    AddressSpace::from(3u16)
}

fn internal(step: &'static str, e: impl std::fmt::Display) -> CodegenError {
    CodegenError::Internal(Internal::Llvm {
        step,
        detail: e.to_string(),
    })
}

/// The NVPTX target machine (`sm_80`, PTX 7.0, 64-bit).
pub(crate) fn target_machine() -> Result<TargetMachine, CodegenError> {
    static INIT: OnceLock<Result<(), String>> = OnceLock::new();
    INIT.get_or_init(|| {
        Target::initialize_nvptx(&InitializationConfig::default());
        Ok(())
    })
    .clone()
    .map_err(|e| internal("LLVM NVPTX target initialisation", e))?;
    let triple = TargetTriple::create("nvptx64-nvidia-cuda");
    let target = Target::from_triple(&triple).map_err(|e| internal("NVPTX target", e))?;
    target
        .create_target_machine(
            &triple,
            SM,
            "+ptx70",
            OptimizationLevel::Aggressive,
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or(CodegenError::Internal(Internal::TargetMachine))
}

/// Caps the registers a thread of kernel `f` may use (`.maxnreg`, NVVM's `maxnreg`
/// annotation), so that more blocks fit on a multiprocessor; ptxas spills past it.
pub(crate) fn max_registers<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    f: FunctionValue<'c>,
    registers: u32,
) -> Result<(), CodegenError> {
    let node = ctx.metadata_node(&[
        f.as_global_value().as_pointer_value().into(),
        ctx.metadata_string("maxnreg").into(),
        ctx.i32_type().const_int(u64::from(registers), false).into(),
    ]);
    module
        .add_global_metadata("nvvm.annotations", &node)
        .map_err(|e| internal("the maxnreg annotation", e))
}

/// Triple and data layout of a fresh module.
pub(crate) fn setup_module(module: &Module<'_>, tm: &TargetMachine) {
    module.set_triple(&tm.get_triple());
    module.set_data_layout(&tm.get_target_data().get_data_layout());
}

/// The PTX text of an optimized module.
pub(crate) fn print_ptx(tm: &TargetMachine, module: &Module<'_>) -> Result<String, CodegenError> {
    let out = tm
        .write_to_memory_buffer(module, FileType::Assembly)
        .map_err(|e| internal("PTX printing", e))?;
    Ok(String::from_utf8_lossy(out.as_slice()).into_owned())
}

/// Refuses a module that calls a function it does not define other than an LLVM intrinsic:
/// the driver would fail to link it, much later and less clearly.
pub(crate) fn check_calls(module: &Module<'_>) -> Result<(), CodegenError> {
    let mut f = module.get_first_function();
    while let Some(func) = f {
        let name = func.get_name().to_string_lossy().into_owned();
        if func.count_basic_blocks() == 0 && !name.starts_with("llvm.") {
            return Err(CodegenError::Internal(Internal::UnknownSymbol { name }));
        }
        f = func.get_next_function();
    }
    Ok(())
}

/// A special-register read or `bar.sync 0` as the NVVM intrinsic `name`.
fn intrinsic<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    name: &str,
    ret_i32: bool,
) -> FunctionValue<'c> {
    if let Some(f) = module.get_function(name) {
        return f;
    }
    let ty = if ret_i32 {
        ctx.i32_type().fn_type(&[], false)
    } else {
        ctx.void_type().fn_type(&[], false)
    };
    module.add_function(name, ty, None)
}

/// `llvm.nvvm.read.ptx.sreg.<reg>` (`tid.x`, `ctaid.y`, `nctaid.x`, ...).
pub(crate) fn sreg<'c>(ctx: &'c Context, module: &Module<'c>, reg: &str) -> FunctionValue<'c> {
    intrinsic(ctx, module, &format!("llvm.nvvm.read.ptx.sreg.{reg}"), true)
}

/// `llvm.nvvm.barrier0` (`bar.sync 0`): every thread of the block waits here.
pub(crate) fn barrier<'c>(ctx: &'c Context, module: &Module<'c>) -> FunctionValue<'c> {
    intrinsic(ctx, module, "llvm.nvvm.barrier0", false)
}

/// A block-shared array of `len` doubles.
pub(crate) fn shared_array<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    name: &str,
    len: u32,
) -> GlobalValue<'c> {
    let ty = ctx.f64_type().array_type(len);
    let g = module.add_global(ty, Some(shared()), name);
    g.set_linkage(Linkage::Internal);
    g.set_initializer(&ty.get_undef());
    g
}
