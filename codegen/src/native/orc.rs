//! Loading relocatable object code into the process (ORC's LLJIT, LLVM 14 C API): the path
//! of operators whose machine code comes from the on-disk object store instead of a fresh
//! compilation. The object's calls to lafuse's helpers and libraries are defined as absolute
//! symbols; anything else it calls (libm, `memset`) resolves against the process.

use super::CodegenError;
use crate::backend::Internal;
use inkwell::llvm_sys;
use llvm_sys::error::{LLVMDisposeErrorMessage, LLVMErrorRef, LLVMGetErrorMessage};
use llvm_sys::orc2::lljit::{
    LLVMOrcCreateLLJIT, LLVMOrcCreateLLJITBuilder, LLVMOrcDisposeLLJIT, LLVMOrcLLJITAddObjectFile,
    LLVMOrcLLJITGetGlobalPrefix, LLVMOrcLLJITGetMainJITDylib, LLVMOrcLLJITLookup,
    LLVMOrcLLJITMangleAndIntern, LLVMOrcLLJITRef,
};
use llvm_sys::orc2::{
    LLVMJITCSymbolMapPair, LLVMJITEvaluatedSymbol, LLVMJITSymbolFlags, LLVMJITSymbolGenericFlags,
    LLVMOrcAbsoluteSymbols, LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess,
    LLVMOrcDisposeMaterializationUnit, LLVMOrcJITDylibAddGenerator, LLVMOrcJITDylibDefine,
};
use std::ffi::{CStr, CString};

/// Takes an `LLVMErrorRef`'s message (and frees it); `Ok` for no error.
unsafe fn take_error_message(e: LLVMErrorRef) -> Result<(), String> {
    if e.is_null() {
        return Ok(());
    }
    let msg = LLVMGetErrorMessage(e);
    let text = CStr::from_ptr(msg).to_string_lossy().into_owned();
    LLVMDisposeErrorMessage(msg);
    Err(text)
}

/// `step`'s `LLVMErrorRef` as an error naming the step (and frees it); `Ok` for no error.
unsafe fn check(step: &'static str, e: LLVMErrorRef) -> Result<(), CodegenError> {
    take_error_message(e).map_err(|detail| CodegenError::Internal(Internal::Llvm { step, detail }))
}

/// A name that cannot be a symbol (it holds a NUL byte).
fn symbol_name(name: &str) -> CodegenError {
    CodegenError::Internal(Internal::SymbolName {
        name: name.to_string(),
    })
}

/// One loaded object: its code lives as long as this value.
pub(crate) struct ObjectJit {
    jit: LLVMOrcLLJITRef,
}

// SAFETY: the LLJIT is private to this value; after `load` returns it is entered only by
// `function` (a lookup, which ORC's execution session serialises) and `Drop` (exclusive).
unsafe impl Send for ObjectJit {}
unsafe impl Sync for ObjectJit {}

impl ObjectJit {
    /// Links `object` (an ELF relocatable for the host) into the process, its undefined
    /// `symbols` bound to the given addresses.
    pub(crate) fn load(object: &[u8], symbols: &[(String, usize)]) -> Result<Self, CodegenError> {
        // SAFETY: every LLVM object created here is either handed over to the LLJIT (the
        // builder, the generator, the materialization unit, the buffer: each call takes
        // ownership) or freed here; `jit` is disposed of by `Drop`.
        unsafe {
            let mut jit = std::ptr::null_mut();
            check(
                "LLJIT creation",
                LLVMOrcCreateLLJIT(&mut jit, LLVMOrcCreateLLJITBuilder()),
            )?;
            let this = ObjectJit { jit };
            let dylib = LLVMOrcLLJITGetMainJITDylib(jit);
            let mut generator = std::ptr::null_mut();
            check(
                "process symbol generator",
                LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
                    &mut generator,
                    LLVMOrcLLJITGetGlobalPrefix(jit),
                    None,
                    std::ptr::null_mut(),
                ),
            )?;
            LLVMOrcJITDylibAddGenerator(dylib, generator);
            if !symbols.is_empty() {
                let mut pairs = Vec::with_capacity(symbols.len());
                for (name, addr) in symbols {
                    let c = CString::new(name.as_str()).map_err(|_| symbol_name(name))?;
                    pairs.push(LLVMJITCSymbolMapPair {
                        Name: LLVMOrcLLJITMangleAndIntern(jit, c.as_ptr()),
                        Sym: LLVMJITEvaluatedSymbol {
                            Address: *addr as u64,
                            Flags: LLVMJITSymbolFlags {
                                GenericFlags: LLVMJITSymbolGenericFlags::LLVMJITSymbolGenericFlagsExported
                                    as u8
                                    | LLVMJITSymbolGenericFlags::LLVMJITSymbolGenericFlagsCallable
                                        as u8,
                                TargetFlags: 0,
                            },
                        },
                    });
                }
                // The unit takes the interned names; the dylib takes the unit, unless the
                // definition fails, which leaves it with us.
                let unit = LLVMOrcAbsoluteSymbols(pairs.as_mut_ptr(), pairs.len());
                let defined = LLVMOrcJITDylibDefine(dylib, unit);
                if !defined.is_null() {
                    LLVMOrcDisposeMaterializationUnit(unit);
                }
                check("helper symbols", defined)?;
            }
            let name = CString::new("lafuse_object").expect("no NUL");
            let buffer = llvm_sys::core::LLVMCreateMemoryBufferWithMemoryRangeCopy(
                object.as_ptr() as *const std::ffi::c_char,
                object.len(),
                name.as_ptr(),
            );
            check(
                "adding the object",
                LLVMOrcLLJITAddObjectFile(jit, dylib, buffer),
            )?;
            Ok(this)
        }
    }

    /// The address of function `name` (links the object on the first lookup).
    pub(crate) fn function(&self, name: &str) -> Result<usize, CodegenError> {
        let c = CString::new(name).map_err(|_| symbol_name(name))?;
        let mut addr = 0;
        // SAFETY: `self.jit` is live; the lookup writes the address on success.
        unsafe {
            take_error_message(LLVMOrcLLJITLookup(self.jit, &mut addr, c.as_ptr())).map_err(
                |detail| {
                    CodegenError::Internal(Internal::SymbolLookup {
                        name: name.to_string(),
                        detail,
                    })
                },
            )?
        };
        Ok(addr as usize)
    }
}

impl Drop for ObjectJit {
    fn drop(&mut self) {
        // SAFETY: disposed of exactly once; the code it frees is no longer called (its
        // owner, an entry point, is being dropped).
        unsafe {
            let _ = check("LLJIT disposal", LLVMOrcDisposeLLJIT(self.jit));
        }
    }
}
