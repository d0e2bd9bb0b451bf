//! One entry point through Cranelift: the host ISA (built once per process), a function with
//! the skeletons' `KernelFn` signature whose body an emitter fills, and the JIT module that
//! owns its machine code for as long as the operator lives.

use super::fx::Fx;
use crate::backend::{CodegenError, Internal, Unsupported};
use cranelift_codegen::ir::{types, AbiParam, UserFuncName, Value};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module};
use std::sync::{Mutex, OnceLock};

/// Set (to anything) to run Cranelift's IR verifier on every function in a release build too.
pub const VERIFY_ENV: &str = "LAFUSE_CRANELIFT_VERIFY";

/// Set (to anything) to print every entry point's Cranelift IR to stderr before it compiles.
pub const DUMP_ENV: &str = "LAFUSE_CLIF_DUMP";

/// The host's ISA, or why Cranelift cannot generate code for it.
static ISA: OnceLock<Result<OwnedTargetIsa, CodegenError>> = OnceLock::new();

fn failed(step: &'static str, detail: impl std::fmt::Display) -> CodegenError {
    CodegenError::Internal(Internal::Cranelift {
        step,
        detail: detail.to_string(),
    })
}

/// The host ISA: every feature the CPU has (`cranelift_native`), without Cranelift's
/// mid-end optimizations (`opt_level` none). A CPU Cranelift has no backend for is unsupported
/// (its operators run elsewhere), not a failure.
fn isa() -> Result<OwnedTargetIsa, CodegenError> {
    ISA.get_or_init(|| {
        let mut flags = settings::builder();
        let mut set = |name, value| {
            flags
                .set(name, value)
                .map_err(|e| failed("setting a flag", format!("{name}={value}: {e}")))
        };
        // Code and helpers live anywhere in the address space: absolute calls.
        set("is_pic", "false")?;
        set("use_colocated_libcalls", "false")?;
        // The e-graph mid-end (`speed`) cost a fifth of the compile time and bought nothing:
        // the emitters already write each value once, hoisted where it is invariant. The
        // compile suite's median 0.87-0.89 ms an operator with it, 0.69-0.70 without (Row
        // entry points 0.85-0.94 against 0.61-0.69); run times the same within the noise
        // (`cranelift_timing`, the micro patterns at 1e4 rows, ALS-CG and the AutoEncoder;
        // session 41). The tier is the cold one: what runs long moves to LLVM.
        set("opt_level", "none")?;
        // Cranelift's IR verifier takes about a tenth of its compile time. Debug builds (the
        // test suites) verify every function; a release build verifies when asked to, for
        // chasing a miscompilation without rebuilding.
        let verify = cfg!(debug_assertions) || std::env::var_os(VERIFY_ENV).is_some();
        set("enable_verifier", if verify { "true" } else { "false" })?;
        let builder = cranelift_native::builder().map_err(|_| {
            CodegenError::Unsupported(Unsupported::Backend {
                why: "code generation with Cranelift for this CPU, which Cranelift has no \
                      backend for",
            })
        })?;
        builder
            .finish(settings::Flags::new(flags))
            .map_err(|e| failed("host ISA", e))
    })
    .clone()
}

/// Machine code of one entry point. The JIT module is kept (behind a mutex: it is not `Sync`)
/// only to free the code when the operator is dropped.
pub(super) struct Code {
    /// The entry point's address (a `KernelFn`).
    pub kernel: usize,
    module: Mutex<Option<JITModule>>,
}

impl Drop for Code {
    fn drop(&mut self) {
        let module = match self.module.get_mut() {
            Ok(m) => m.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(m) = module {
            // SAFETY: the operator that owns this code is being dropped, so nothing calls
            // `kernel` any more (executions borrow the operator).
            unsafe { m.free_memory() };
        }
    }
}

/// Compiles a function `u64 f(*const KernelArgs, usize rl, usize ru)` whose body `emit` fills
/// (given the builder positioned in the entry block and the three parameters).
pub(super) fn compile(
    emit: impl FnOnce(&mut Fx<'_>, Value, Value, Value) -> Result<(), CodegenError>,
) -> Result<Code, CodegenError> {
    let isa = isa()?;
    let call_conv = isa.default_call_conv();
    let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    let mut ctx = module.make_context();
    let mut sig = module.make_signature();
    for _ in 0..3 {
        sig.params.push(AbiParam::new(types::I64));
    }
    sig.returns.push(AbiParam::new(types::I64));
    let id = module
        .declare_function("lafuse_entry", Linkage::Export, &sig)
        .map_err(|e| failed("declaring the entry point", e))?;
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let (args, rl, ru) = {
            let p = b.block_params(entry);
            (p[0], p[1], p[2])
        };
        let mut fx = Fx { b, call_conv };
        emit(&mut fx, args, rl, ru)?;
        fx.b.seal_all_blocks();
        fx.b.finalize(module.target_config());
    }
    if std::env::var_os(DUMP_ENV).is_some() {
        eprintln!("{}", ctx.func.display());
    }
    module
        .define_function(id, &mut ctx)
        .map_err(|e| failed("compiling the entry point", format!("{e:?}")))?;
    module.clear_context(&mut ctx);
    module
        .finalize_definitions()
        .map_err(|e| failed("finalizing the entry point", e))?;
    let kernel = module.get_finalized_function(id) as usize;
    Ok(Code {
        kernel,
        module: Mutex::new(Some(module)),
    })
}
