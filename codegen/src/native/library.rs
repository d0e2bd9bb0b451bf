//! Plan-independent functions compiled once per process into JITs of their own (the vector
//! math of `math`, the block primitives of `row`): operators declare them and their JITs map
//! the declarations by name ([`Library::address`]), so no operator pays their machine code.

use super::store::{ObjectStore, StoredObject};
use super::{llvm, orc, CodegenError, Machine};
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::types::FunctionType;
use inkwell::values::FunctionValue;
use std::sync::OnceLock;

/// A library's machine code and the addresses of its functions; built once, never freed.
pub(crate) struct Library {
    _machine: Machine,
    functions: Vec<(String, usize)>,
}

impl Library {
    /// The library in `cell`, built by [`Library::build`] on first use (a failure is kept, so
    /// it is not retried).
    /// With a `store`, a build goes through it as an operator's does (see `store.rs`).
    pub(crate) fn get(
        cell: &'static OnceLock<Result<Library, CodegenError>>,
        name: &str,
        define: impl FnOnce(&'static Context, &Module<'static>) -> Result<Vec<String>, CodegenError>,
        store: Option<&ObjectStore>,
    ) -> Result<&'static Library, CodegenError> {
        cell.get_or_init(|| match store {
            None => Library::build(name, define),
            Some(store) => Library::build_through(name, define, store),
        })
        .as_ref()
        .map_err(Clone::clone)
    }

    /// [`Library::build`] through `store`: loaded where an earlier process kept the same
    /// module, else compiled to object code and kept.
    fn build_through(
        name: &str,
        define: impl FnOnce(&'static Context, &Module<'static>) -> Result<Vec<String>, CodegenError>,
        store: &ObjectStore,
    ) -> Result<Library, CodegenError> {
        let fingerprint = llvm::codegen_fingerprint();
        let made = llvm::object_module(
            name,
            |_ctx, module, tm| {
                let names = define(_ctx, module)?;
                llvm::verify(module, &format!("library {name} fails verification"))?;
                let key = module.print_to_string().to_string();
                if let Some(found) = store.load(fingerprint, &key) {
                    return Ok(((names, key, found.ir, true), Some(found.object)));
                }
                llvm::optimize(module, tm)?;
                let ir = module.print_to_string().to_string();
                Ok(((names, key, ir, false), None))
            },
            |_| None,
        )?;
        let (names, key, ir, loaded) = made.built;
        let jit = orc::ObjectJit::load(&made.object, &made.symbols)?;
        let functions = names
            .into_iter()
            .map(|n| {
                let a = jit.function(&n)?;
                Ok((n, a))
            })
            .collect::<Result<Vec<_>, CodegenError>>()?;
        if !loaded {
            let entry = StoredObject {
                ir: ir.clone(),
                object: made.object,
            };
            store.save(fingerprint, &key, &entry);
        }
        Ok(Library {
            _machine: Machine::Object(jit, ir),
            functions,
        })
    }

    /// Builds module `name`: `define` emits its functions (each with [`declare`]) and returns
    /// their names; the module is verified, optimized for the host and JIT-compiled.
    fn build(
        name: &str,
        define: impl FnOnce(&'static Context, &Module<'static>) -> Result<Vec<String>, CodegenError>,
    ) -> Result<Library, CodegenError> {
        let (jit, names) = llvm::jit_module(
            name,
            |ctx, module, tm| {
                let names = define(ctx, module)?;
                llvm::verify(module, &format!("library {name} fails verification"))?;
                llvm::optimize(module, tm)?;
                Ok(names)
            },
            |_| None,
        )?;
        let functions = names
            .into_iter()
            .map(|n| {
                let a = jit.function(&n)?;
                Ok((n, a))
            })
            .collect::<Result<Vec<_>, CodegenError>>()?;
        Ok(Library {
            _machine: Machine::Engine(jit),
            functions,
        })
    }

    /// The address of function `name`, if the library defines it.
    pub(crate) fn address(&self, name: &str) -> Option<usize> {
        self.functions
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| *a)
    }
}

/// `name` of type `ty`, external, with the host's target attributes: the same declaration in
/// the library (which defines it) and in operators (which call it), so both sides pass their
/// arguments the same way.
pub(crate) fn declare<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    name: &str,
    ty: FunctionType<'c>,
) -> FunctionValue<'c> {
    if let Some(f) = module.get_function(name) {
        return f;
    }
    let f = module.add_function(name, ty, Some(Linkage::External));
    llvm::set_function_attributes(ctx, f);
    f
}
