//! Everything that depends on the LLVM version (14, through inkwell with typed pointers):
//! target and target-machine setup for the host CPU, the per-function `target-cpu` /
//! `target-features` attributes, verification, the pass pipeline, the MCJIT execution
//! engine, assembly printing, and the few IR-building calls whose signatures change with
//! opaque pointers (loads, GEPs, pointer types).

use super::CodegenError;
use crate::backend::Internal;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::execution_engine::ExecutionEngine;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine,
};
use inkwell::types::{PointerType, VectorType};
use inkwell::values::{BasicValueEnum, FunctionValue, IntValue, PointerValue, VectorValue};
use inkwell::{AddressSpace, OptimizationLevel};
use lafuse_compiler::stack::with_stack_of;
use std::mem::ManuallyDrop;
use std::sync::OnceLock;

/// Code generation level of the host target machine and the JIT.
const CODEGEN_LEVEL: OptimizationLevel = OptimizationLevel::Aggressive;

/// LLVM's refusal of `step`, with LLVM's message.
fn internal(step: &'static str, e: impl std::fmt::Display) -> CodegenError {
    CodegenError::Internal(Internal::Llvm {
        step,
        detail: e.to_string(),
    })
}

/// A symbol generated code calls that no helper defines.
fn unknown_symbol(name: &str) -> CodegenError {
    CodegenError::Internal(Internal::UnknownSymbol {
        name: name.to_string(),
    })
}

/// The host CPU's name and feature string (what `-march=native` would use).
pub(crate) fn host_cpu() -> &'static (String, String) {
    static HOST: OnceLock<(String, String)> = OnceLock::new();
    HOST.get_or_init(|| {
        (
            TargetMachine::get_host_cpu_name().to_string(),
            TargetMachine::get_host_cpu_features().to_string(),
        )
    })
}

fn init() -> Result<(), CodegenError> {
    static INIT: OnceLock<Result<(), String>> = OnceLock::new();
    INIT.get_or_init(|| {
        Target::initialize_native(&InitializationConfig::default())?;
        Ok(())
    })
    .clone()
    .map_err(|e| internal("LLVM native target initialisation", e))
}

/// A new target machine for the host CPU with all its features.
fn new_host_machine() -> Result<TargetMachine, CodegenError> {
    init()?;
    let triple = TargetMachine::get_default_triple();
    let target = Target::from_triple(&triple).map_err(|e| internal("host target", e))?;
    let (cpu, features) = host_cpu();
    target
        .create_target_machine(
            &triple,
            cpu,
            features,
            CODEGEN_LEVEL,
            RelocMode::Default,
            CodeModel::JITDefault,
        )
        .ok_or(CodegenError::Internal(Internal::TargetMachine))
}

/// What, besides a module's text, decides the machine code compiled from it: lafuse's version
/// and build (a hash of the code generator's sources and the kernel ABI, `build.rs`) and
/// LLVM's version, the host CPU and its features, the pass pipeline and the code generator's
/// settings. The object store keys its entries by it (see `store.rs`).
pub(crate) fn codegen_fingerprint() -> &'static str {
    static FINGERPRINT: OnceLock<String> = OnceLock::new();
    FINGERPRINT.get_or_init(|| {
        let (cpu, features) = host_cpu();
        format!(
            "lafuse {} build {} | LLVM 14 | {} | {cpu} | {features} | {PIPELINE} | \
             {CODEGEN_LEVEL:?} | reloc default, code model JIT default",
            env!("CARGO_PKG_VERSION"),
            env!("LAFUSE_CODEGEN_BUILD"),
            TargetMachine::get_default_triple()
        )
    })
}

/// Runs `f` with this thread's host target machine, on an [`LLVM_STACK`]-sized stack: every
/// optimization and object or assembly emission goes through here. The machine is reused
/// across compilations because creating one, and the per-CPU subtarget it builds on first use,
/// costs about a millisecond; per thread because a target machine's subtarget cache is not
/// thread-safe.
pub(crate) fn with_host_machine<R>(
    f: impl FnOnce(&TargetMachine) -> Result<R, CodegenError>,
) -> Result<R, CodegenError> {
    thread_local! {
        static TM: std::cell::OnceCell<Result<TargetMachine, CodegenError>> =
            const { std::cell::OnceCell::new() };
    }
    with_stack_of(LLVM_STACK, || {
        TM.with(|tm| match tm.get_or_init(new_host_machine) {
            Ok(tm) => f(tm),
            Err(e) => Err(e.clone()),
        })
    })
}

/// Creates an LLVM context that lives as long as the returned [`Jit`] (or until
/// [`free_context`] when compilation fails).
fn new_context() -> &'static Context {
    Box::leak(Box::new(Context::create()))
}

/// Frees a context made by [`new_context`] whose module was never handed to a [`Jit`].
///
/// # Safety
/// Nothing created in `ctx` may be used (or dropped) afterwards.
unsafe fn free_context(ctx: &'static Context) {
    drop(Box::from_raw(ctx as *const Context as *mut Context));
}

/// Stack for one LLVM compilation. LLVM's passes and instruction selection recurse along a
/// function's dependency chains, a few hundred bytes per instruction: a fused operator over a
/// chain of 20000 operations needs about 8 MiB. Compilations run on rayon workers and
/// embedders' threads, whose stacks we do not choose, so each gets a segment this large (only
/// the pages it touches are committed) in [`with_host_machine`] and, for MCJIT's lazy machine
/// code, [`Jit::function`]; [`super::MAX_BODY_NODES`] keeps bodies well within it.
const LLVM_STACK: usize = 64 << 20;

/// Creates a context and module `name` for the host, lets `prepare` fill (and verify) the
/// module and `optimize` optimize it for the host's target machine, and JIT-compiles it,
/// mapping the functions it declares with `helpers` (see [`Jit::new`]). When either fails,
/// the context is freed. (`store::compile_through` takes the same two steps.)
pub(crate) fn jit_module<R>(
    name: &str,
    prepare: impl FnOnce(&'static Context, &Module<'static>) -> Result<R, CodegenError>,
    optimize: impl FnOnce(&Module<'static>, &TargetMachine) -> Result<(), CodegenError>,
    helpers: impl Fn(&str) -> Option<usize>,
) -> Result<(Jit, R), CodegenError> {
    let ctx = new_context();
    let module = ctx.create_module(name);
    let built = with_host_machine(|tm| {
        setup_module(&module, tm);
        let r = prepare(ctx, &module)?;
        optimize(&module, tm)?;
        Ok(r)
    });
    match built {
        Ok(r) => Ok((Jit::new(ctx, module, helpers)?, r)),
        Err(e) => {
            drop(module);
            // SAFETY: the module, the only thing created in the context, is gone.
            unsafe { free_context(ctx) };
            Err(e)
        }
    }
}

/// What [`object_module`] made: the module's relocatable machine code for the host, the
/// functions it calls that it does not define (with their addresses from `helpers`), and what
/// `build` returned.
pub(crate) struct ObjectModule<R> {
    pub object: Vec<u8>,
    pub symbols: Vec<(String, usize)>,
    pub built: R,
}

/// Like [`jit_module`], but the module is compiled to an object file (kept, e.g. on disk, and
/// loaded with [`super::orc::ObjectJit`]) instead of into an execution engine; the context is
/// freed before returning. `build` may instead answer with object code it already has
/// (`Ok((r, Some(object)))`, an object store hit), which skips code generation.
pub(crate) fn object_module<R>(
    name: &str,
    build: impl FnOnce(
        &'static Context,
        &Module<'static>,
        &TargetMachine,
    ) -> Result<(R, Option<Vec<u8>>), CodegenError>,
    helpers: impl Fn(&str) -> Option<usize>,
) -> Result<ObjectModule<R>, CodegenError> {
    let ctx = new_context();
    let module = ctx.create_module(name);
    let result = with_host_machine(|tm| {
        setup_module(&module, tm);
        let (built, cached) = build(ctx, &module, tm)?;
        let object = match cached {
            Some(object) => object,
            None => tm
                .write_to_memory_buffer(&module, FileType::Object)
                .map_err(|e| internal("object code generation", e))?
                .as_slice()
                .to_vec(),
        };
        let mut symbols = Vec::new();
        for f in module.get_functions() {
            let name = f.get_name().to_string_lossy().into_owned();
            if f.count_basic_blocks() == 0 && !name.starts_with("llvm.") {
                let addr = helpers(&name).ok_or_else(|| unknown_symbol(&name))?;
                symbols.push((name, addr));
            }
        }
        Ok(ObjectModule {
            object,
            symbols,
            built,
        })
    });
    drop(module);
    // SAFETY: the module, the only thing created in the context, is gone.
    unsafe { free_context(ctx) };
    result
}

/// Prepares a fresh module for the host: triple and data layout from the target machine.
pub(crate) fn setup_module(module: &Module<'_>, tm: &TargetMachine) {
    module.set_triple(&tm.get_triple());
    module.set_data_layout(&tm.get_target_data().get_data_layout());
}

/// Sets `target-cpu`/`target-features` (MCJIT builds its own target machine and would
/// otherwise emit baseline SSE2) and `nounwind` on a defined function.
pub(crate) fn set_function_attributes(ctx: &Context, f: FunctionValue<'_>) {
    let (cpu, features) = host_cpu();
    f.add_attribute(
        AttributeLoc::Function,
        ctx.create_string_attribute("target-cpu", cpu),
    );
    f.add_attribute(
        AttributeLoc::Function,
        ctx.create_string_attribute("target-features", features),
    );
    f.add_attribute(AttributeLoc::Function, enum_attr(ctx, "nounwind"));
}

/// An enum attribute by name (`readnone`, `nounwind`, ...).
pub(crate) fn enum_attr(ctx: &Context, name: &str) -> Attribute {
    ctx.create_enum_attribute(Attribute::get_named_enum_kind_id(name), 0)
}

/// Verifies a module (DESIGN: every generated module is verified before it is compiled).
pub(crate) fn verify(module: &Module<'_>, step: &'static str) -> Result<(), CodegenError> {
    module.verify().map_err(|e| internal(step, e))
}

/// The IR pass pipeline (new pass manager syntax). The emitters already produce explicit
/// 8-lane vector code with vector accumulators and always-inline primitives, so what O3 adds on
/// top of this list (loop and SLP vectorization, unrolling, the interprocedural passes and
/// their analyses) finds little to do, yet made optimization take 5 to 50 ms per operator,
/// mostly pass-manager and analysis overhead. What the emitted IR does need: inlining of the
/// always-inline primitives; SROA, since every loop variable and accumulator lives in an
/// `alloca` slot; CSE, instcombine and simplifycfg for the address arithmetic and branches;
/// LICM for loop-invariant loads; GVN for redundant loads; and dropping the inlined primitives.
const PIPELINE: &str = "always-inline,function(sroa,early-cse<memssa>,simplifycfg,instcombine,\
                        loop-mssa(licm),gvn,simplifycfg,instcombine),globaldce";

/// Optimizes for the host with [`PIPELINE`].
pub(crate) fn optimize(module: &Module<'_>, tm: &TargetMachine) -> Result<(), CodegenError> {
    module
        .run_passes(PIPELINE, tm, PassBuilderOptions::create())
        .map_err(|e| internal("optimization", e))
}

/// Host assembly for an IR text (parsed into a fresh context, so the JIT's module is never
/// touched after compilation).
pub(crate) fn assembly_of(ir: &str) -> Result<String, CodegenError> {
    with_host_machine(|tm| assembly_with(tm, ir))
}

fn assembly_with(tm: &TargetMachine, ir: &str) -> Result<String, CodegenError> {
    let ctx = Context::create();
    let buf = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "lafuse_asm");
    let module = ctx
        .create_module_from_ir(buf)
        .map_err(|e| internal("re-parsing IR", e))?;
    let out = tm
        .write_to_memory_buffer(&module, FileType::Assembly)
        .map_err(|e| internal("assembly printing", e))?;
    Ok(String::from_utf8_lossy(out.as_slice()).into_owned())
}

/// A JIT-compiled module: the execution engine, its module and their context, kept alive
/// together and freed together.
pub(crate) struct Jit {
    module: ManuallyDrop<Module<'static>>,
    engine: ManuallyDrop<ExecutionEngine<'static>>,
    context: *const Context,
}

// SAFETY: the context, module and engine are private to this value; after `Jit::new` returns,
// LLVM is only entered again by `Drop` (exclusive access) and by `Jit::ir`, which only reads
// the module and which its callers (`NativeOperator::llvm_ir` for the dense entry point's JIT,
// `csr_llvm_ir`/`csr_assembly` for the CSR one's) serialise through a `OnceLock` per JIT; the machine code the engine holds is immutable and may be called from any thread.
unsafe impl Send for Jit {}
unsafe impl Sync for Jit {}

impl Jit {
    /// Creates the MCJIT engine for an optimized module, maps the helper functions the module
    /// declares (`helpers(name)` gives their addresses), and finalizes the code.
    pub(crate) fn new(
        ctx: &'static Context,
        module: Module<'static>,
        helpers: impl Fn(&str) -> Option<usize>,
    ) -> Result<Jit, CodegenError> {
        let engine = match module.create_jit_execution_engine(CODEGEN_LEVEL) {
            Ok(e) => e,
            Err(e) => {
                drop(module);
                // SAFETY: the module (the only thing created in ctx) is gone.
                unsafe { free_context(ctx) };
                return Err(internal("JIT creation", e));
            }
        };
        let jit = Jit {
            module: ManuallyDrop::new(module),
            engine: ManuallyDrop::new(engine),
            context: ctx,
        };
        for f in jit.module.get_functions() {
            if f.count_basic_blocks() == 0 {
                let name = f.get_name().to_string_lossy().into_owned();
                if name.starts_with("llvm.") {
                    continue;
                }
                let addr = helpers(&name).ok_or_else(|| unknown_symbol(&name))?;
                jit.engine.add_global_mapping(&f, addr);
            }
        }
        Ok(jit)
    }

    /// The module's IR text as the JIT holds it: the optimized IR, after the code generator's
    /// IR-level preparation passes. Printed on request because nothing at run time needs it
    /// (printing costs 0.2 to 1 ms per operator).
    pub(crate) fn ir(&self) -> String {
        self.module.print_to_string().to_string()
    }

    /// The address of a generated function. MCJIT generates the module's machine code on
    /// the first lookup, so this runs on an LLVM-sized stack too.
    pub(crate) fn function(&self, name: &str) -> Result<usize, CodegenError> {
        with_stack_of(LLVM_STACK, || {
            self.engine.get_function_address(name).map_err(|e| {
                CodegenError::Internal(Internal::SymbolLookup {
                    name: name.to_string(),
                    detail: e.to_string(),
                })
            })
        })
    }
}

impl Drop for Jit {
    fn drop(&mut self) {
        // SAFETY: dropped exactly once, in dependency order: the module handle (owned by the
        // engine, so this does not free it), the engine (frees module and code), the context.
        unsafe {
            ManuallyDrop::drop(&mut self.module);
            ManuallyDrop::drop(&mut self.engine);
            drop(Box::from_raw(self.context as *mut Context));
        }
    }
}

// ---- IR building calls that differ between typed and opaque pointers ----------------------

/// `double*`.
pub(crate) fn f64_ptr(ctx: &Context) -> PointerType<'_> {
    ctx.f64_type().ptr_type(AddressSpace::default())
}

/// `i8*`, the type of the `KernelArgs` pointer.
pub(crate) fn i8_ptr(ctx: &Context) -> PointerType<'_> {
    ctx.i8_type().ptr_type(AddressSpace::default())
}

/// `&ptr[idx]` for a typed pointer (in bounds: the skeleton validated every index range).
pub(crate) fn gep<'c>(
    b: &Builder<'c>,
    ptr: PointerValue<'c>,
    idx: IntValue<'c>,
) -> Result<PointerValue<'c>, CodegenError> {
    // SAFETY: generated indexes stay within the lengths the skeleton checked.
    unsafe { b.build_in_bounds_gep(ptr, &[idx], "p") }.map_err(|e| internal("gep", e))
}

/// Loads through a typed pointer.
pub(crate) fn load<'c>(
    b: &Builder<'c>,
    ptr: PointerValue<'c>,
) -> Result<BasicValueEnum<'c>, CodegenError> {
    b.build_load(ptr, "v").map_err(|e| internal("load", e))
}

/// A field of the argument block: `*(T*)(args + offset)` with `ty` = `T*`.
pub(crate) fn load_field<'c>(
    ctx: &'c Context,
    b: &Builder<'c>,
    args: PointerValue<'c>,
    offset: usize,
    ty: PointerType<'c>,
) -> Result<BasicValueEnum<'c>, CodegenError> {
    let off = ctx.i64_type().const_int(offset as u64, false);
    let p = gep(b, args, off)?;
    let p = b
        .build_pointer_cast(p, ty, "fp")
        .map_err(|e| internal("cast", e))?;
    load(b, p)
}

/// Loads `w` consecutive doubles at `ptr[idx]` as a vector (alignment 8).
pub(crate) fn load_vec<'c>(
    b: &Builder<'c>,
    vty: VectorType<'c>,
    ptr: PointerValue<'c>,
    idx: IntValue<'c>,
) -> Result<VectorValue<'c>, CodegenError> {
    let p = gep(b, ptr, idx)?;
    let p = b
        .build_pointer_cast(p, vty.ptr_type(AddressSpace::default()), "vp")
        .map_err(|e| internal("cast", e))?;
    let v = load(b, p)?;
    if let Some(i) = inkwell::values::BasicValue::as_instruction_value(&v) {
        i.set_alignment(8).map_err(|e| internal("alignment", e))?;
    }
    Ok(v.into_vector_value())
}

/// Stores a vector of doubles at `ptr[idx]` (alignment 8).
pub(crate) fn store_vec<'c>(
    b: &Builder<'c>,
    ptr: PointerValue<'c>,
    idx: IntValue<'c>,
    v: VectorValue<'c>,
) -> Result<(), CodegenError> {
    let p = gep(b, ptr, idx)?;
    let p = b
        .build_pointer_cast(p, v.get_type().ptr_type(AddressSpace::default()), "vp")
        .map_err(|e| internal("cast", e))?;
    let s = b.build_store(p, v).map_err(|e| internal("store", e))?;
    s.set_alignment(8).map_err(|e| internal("alignment", e))?;
    Ok(())
}
