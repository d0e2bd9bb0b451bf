//! Plan-independent functions compiled once per process into JITs of their own (the vector
//! math of `math`, the block primitives of `row`): operators declare them and their JITs map
//! the declarations by name ([`Library::address`]), so no operator pays their machine code.

use super::store::{self, ObjectStore};
use super::{llvm, CodegenError, Machine};
use crate::backend::Internal;
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
    pub(crate) fn get(
        cell: &'static OnceLock<Result<Library, CodegenError>>,
        name: &str,
        define: impl FnOnce(&'static Context, &Module<'static>) -> Result<Vec<String>, CodegenError>,
        store: Option<&ObjectStore>,
    ) -> Result<&'static Library, CodegenError> {
        cell.get_or_init(|| Library::build(name, define, store))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Builds module `name`: `define` emits its functions (each with [`declare`]) and returns
    /// their names; the module is verified, optimized for the host and JIT-compiled, or with a
    /// `store` compiled through it as an operator is ([`store::compile_through`]).
    fn build(
        name: &str,
        define: impl FnOnce(&'static Context, &Module<'static>) -> Result<Vec<String>, CodegenError>,
        store: Option<&ObjectStore>,
    ) -> Result<Library, CodegenError> {
        let prepare = |ctx, module: &Module<'static>| {
            let names = define(ctx, module)?;
            module.verify().map_err(|e| {
                CodegenError::Internal(Internal::LibraryVerification {
                    library: name.to_string(),
                    detail: e.to_string(),
                })
            })?;
            Ok(names)
        };
        let (machine, names) = match store {
            None => {
                let (jit, names) = llvm::jit_module(name, prepare, llvm::optimize, |_| None)?;
                (Machine::Engine(jit), names)
            }
            Some(store) => {
                let made = store::compile_through(store, name, prepare, llvm::optimize, |_| None)?;
                (made.machine, made.built)
            }
        };
        let functions = names
            .into_iter()
            .map(|n| {
                let a = machine.function(&n)?;
                Ok((n, a))
            })
            .collect::<Result<Vec<_>, CodegenError>>()?;
        Ok(Library {
            _machine: machine,
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
