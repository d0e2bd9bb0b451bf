//! A global allocator that aligns large blocks to the 64-byte cache line: the system allocator
//! underneath, with a small header in front of each large block.
//!
//! Why: generated code reads rows with 64-byte vector loads (AVX-512). The system allocator
//! aligns to 16 bytes, so every such load from a matrix (and every read-modify-write of a
//! partial aggregate) straddles two cache lines; a Row operator that accumulates
//! `t(X) %*% (W * (X %*% V))` spent a third of its time on that. Generated code never
//! *assumes* alignment (it uses unaligned loads), so this is a performance property only; the
//! `lafuse` binary and the benchmarks install it, an embedding program may or may not.
//!
//! How: a block of at least [`LARGE`] bytes with an alignment below 64 is carved out of a
//! system block 64 bytes longer, at the first 64-byte boundary past its start; the offset is
//! kept in the 8 bytes just before the returned pointer. `calloc` still backs zeroed blocks,
//! so large zeroed outputs keep their lazily zeroed pages, and freed blocks are reused as the
//! system allocator reuses them.

use std::alloc::{GlobalAlloc, Layout, System};

/// The global allocator of the `lafuse` binary (see the [module docs](self)).
pub struct CacheAligned;

/// Blocks from this size on are aligned to [`LINE`].
pub const LARGE: usize = 4096;
/// The alignment of large blocks.
pub const LINE: usize = 64;

/// Whether a block of `layout` gets the header treatment.
fn is_large(layout: Layout) -> bool {
    layout.size() >= LARGE && layout.align() < LINE
}

/// The system block behind a large block of `size` bytes.
fn outer_layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.checked_add(LINE)?, 16).ok()
}

/// Places a large block inside the system block at `base`: the first 64-byte boundary at
/// least 8 bytes past `base` (room for the offset), which the system block's extra 64
/// bytes always hold.
///
/// # Safety
/// `base` is a live system block of `outer_layout(size)`, at least 8-byte aligned.
unsafe fn place(base: *mut u8) -> *mut u8 {
    let addr = base as usize;
    let aligned = (addr + 8 + LINE - 1) & !(LINE - 1);
    let p = base.add(aligned - addr);
    // SAFETY: `p - 8` lies inside the block, past `base`, and is 8-byte aligned.
    (p.sub(8) as *mut usize).write(aligned - addr);
    p
}

/// The system block a large block at `p` was placed in.
///
/// # Safety
/// `p` was returned by [`place`] and its block is live.
unsafe fn base_of(p: *mut u8) -> *mut u8 {
    p.sub((p.sub(8) as *const usize).read())
}

unsafe impl GlobalAlloc for CacheAligned {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !is_large(layout) {
            return System.alloc(layout);
        }
        match outer_layout(layout.size()) {
            Some(outer) => {
                let base = System.alloc(outer);
                if base.is_null() {
                    base
                } else {
                    place(base)
                }
            }
            None => std::ptr::null_mut(),
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !is_large(layout) {
            return System.alloc_zeroed(layout);
        }
        match outer_layout(layout.size()) {
            Some(outer) => {
                // `calloc`: zeroed pages of a fresh mapping are not touched.
                let base = System.alloc_zeroed(outer);
                if base.is_null() {
                    base
                } else {
                    // The header lies before the block: the block itself stays zero.
                    place(base)
                }
            }
            None => std::ptr::null_mut(),
        }
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if !is_large(layout) {
            return System.dealloc(p, layout);
        }
        if let Some(outer) = outer_layout(layout.size()) {
            System.dealloc(base_of(p), outer);
        }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        match (is_large(layout), is_large(new_layout)) {
            (false, false) => System.realloc(p, layout, new_size),
            (true, true) => {
                let (Some(old_outer), Some(new_outer)) =
                    (outer_layout(layout.size()), outer_layout(new_size))
                else {
                    return std::ptr::null_mut();
                };
                let old_base = base_of(p);
                let old_off = p as usize - old_base as usize;
                let base = System.realloc(old_base, old_outer, new_outer.size());
                if base.is_null() {
                    return base;
                }
                // The system block may have moved to a different alignment: the data sits at
                // the old offset and moves to the new one.
                let data = base.add(old_off);
                let aligned = (base as usize + 8 + LINE - 1) & !(LINE - 1);
                let q = base.add(aligned - base as usize);
                if q != data {
                    std::ptr::copy(data, q, layout.size().min(new_size));
                }
                place(base)
            }
            // Crossing the size threshold: a new block of the other kind.
            _ => {
                let q = self.alloc(new_layout);
                if !q.is_null() {
                    std::ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
                    self.dealloc(p, layout);
                }
                q
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_blocks_are_line_aligned_and_keep_their_contents() {
        let a = CacheAligned;
        unsafe {
            for size in [LARGE, LARGE + 8, 1 << 20, 3 << 20] {
                let l = Layout::from_size_align(size, 8).unwrap();
                let p = a.alloc(l);
                assert_eq!(p as usize % LINE, 0, "{size}");
                std::ptr::write_bytes(p, 7, size);
                let z = a.alloc_zeroed(l);
                assert_eq!(z as usize % LINE, 0);
                assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0));
                // Grow within the large class, then shrink across the threshold and back.
                let g = a.realloc(p, l, size * 2);
                assert_eq!(g as usize % LINE, 0);
                assert!(std::slice::from_raw_parts(g, size).iter().all(|&b| b == 7));
                let lg = Layout::from_size_align(size * 2, 8).unwrap();
                let s = a.realloc(g, lg, 100);
                assert!(std::slice::from_raw_parts(s, 100).iter().all(|&b| b == 7));
                let ls = Layout::from_size_align(100, 8).unwrap();
                let b = a.realloc(s, ls, size);
                assert_eq!(b as usize % LINE, 0);
                assert!(std::slice::from_raw_parts(b, 100).iter().all(|&b| b == 7));
                a.dealloc(b, l);
                a.dealloc(z, l);
            }
            // Small blocks and over-aligned ones go to the system allocator as they are.
            let l = Layout::from_size_align(64, 8).unwrap();
            let p = a.alloc(l);
            assert!(!p.is_null());
            a.dealloc(p, l);
            let l = Layout::from_size_align(LARGE, 4096).unwrap();
            let p = a.alloc(l);
            assert_eq!(p as usize % 4096, 0);
            a.dealloc(p, l);
        }
    }

    #[test]
    fn vectors_grow_through_the_threshold() {
        // The same allocator through `Vec`'s own growth, as the binary uses it.
        let a = CacheAligned;
        unsafe {
            let mut l = Layout::from_size_align(8, 8).unwrap();
            let mut p = a.alloc(l);
            (p as *mut usize).write(0xabcd);
            let mut size = 8;
            while size < (1 << 22) {
                let ns = size * 3 / 2 + 8;
                p = a.realloc(p, l, ns);
                assert_eq!((p as *const usize).read(), 0xabcd);
                if ns >= LARGE {
                    assert_eq!(p as usize % LINE, 0);
                }
                l = Layout::from_size_align(ns, 8).unwrap();
                size = ns;
            }
            a.dealloc(p, l);
        }
    }
}
