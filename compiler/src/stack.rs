//! Recursion over a script's syntax tree as deep as the parser accepts, on any thread.
//!
//! The front-end passes (parser, checker, program builder, HOP construction) recurse once per
//! level of an expression or statement. A machine-written script can nest thousands of levels
//! (a chain of a few thousand `+` terms is one), more than a thread's stack holds, and an
//! embedding application calls us on threads whose stack size it chose. So every recursive
//! step of those passes goes through [`with_stack`], which continues on a fresh heap-allocated
//! stack segment when the current one runs low (the approach rustc takes), and
//! [`crate::parser::MAX_DEPTH`] bounds the nesting so the segments stay bounded too.

/// Stack that must remain before a recursive step runs on the current segment: more than the
/// largest frames between two steps need, unoptimized builds included.
const RED_ZONE: usize = 256 * 1024;

/// Size of each new segment: room for some hundreds of levels, so that switching is rare.
const SEGMENT: usize = 4 * 1024 * 1024;

/// Runs `step` (one level of a recursive pass) with at least `RED_ZONE` bytes of stack.
#[inline]
pub fn with_stack<R>(step: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, SEGMENT, step)
}

/// Runs `work` with at least `size` bytes of stack, on a fresh segment when the current one
/// has less: for work that recurses inside a library whose levels we cannot guard one by one
/// (LLVM's passes, along an operator body's dependency chains).
pub fn with_stack_of<R>(size: usize, work: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(size, size, work)
}
