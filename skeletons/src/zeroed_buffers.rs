//! Zeroed block buffers for streamed side inputs, kept on each thread from call to call.
//!
//! A task densifies a streamed sparse input block by block into a buffer it allocated zeroed;
//! where the blocks are sparse it clears the buffer by index after each one, so it ends the
//! call all zero again. Allocating it zeroed at every call cost a `memset` of the whole buffer
//! (the allocator reuses memory, which `calloc` must clear): the all-CSR `sum(X*Y*Z)` at
//! 1e4×1e3, sparsity 0.001, spent more on that than on its non-zeros. A buffer handed back
//! here is all zero by contract, so the next call of the same shape takes it as it is.

use std::cell::RefCell;

/// Buffers a thread keeps at most (a few hundred KiB each, at most `BLOCK_CELLS` cells).
const KEPT: usize = 4;

/// Buffers shorter than this are allocated afresh at each call: zeroing a few KiB costs
/// nothing next to the call, and leaves the buffer in the cache (measured: the all-CSR
/// `sum(X*Y*Z)` at sparsity 0.1, blocks of one 1000-column row, ran about 10 % slower on kept
/// buffers than on fresh ones).
const KEPT_FROM: usize = 1 << 12;

thread_local! {
    static KEPT_BUFFERS: RefCell<Vec<Vec<f64>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of `len` zeros: one this thread handed back, or a fresh one.
pub(crate) fn take(len: usize) -> Vec<f64> {
    if len < KEPT_FROM {
        return vec![0.0; len];
    }
    let kept = KEPT_BUFFERS.with(|kept| {
        let mut kept = kept.borrow_mut();
        let at = kept.iter().position(|b| b.len() == len)?;
        Some(kept.swap_remove(at))
    });
    match kept {
        Some(buffer) => {
            debug_assert!(
                buffer.iter().all(|&v| v.to_bits() == 0),
                "a kept buffer is zero"
            );
            buffer
        }
        None => vec![0.0; len],
    }
}

/// Hands back `buffer`, which must hold only `+0.0`, for a later [`take`] on this thread; the
/// oldest kept buffer makes room.
pub(crate) fn give_back(buffer: Vec<f64>) {
    debug_assert!(
        buffer.iter().all(|&v| v.to_bits() == 0),
        "only zeroed buffers come back"
    );
    if buffer.is_empty() {
        return;
    }
    KEPT_BUFFERS.with(|kept| {
        let mut kept = kept.borrow_mut();
        if kept.len() == KEPT {
            kept.remove(0);
        }
        kept.push(buffer);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_handed_back_is_taken_again_by_its_length_only() {
        let mut a = take(KEPT_FROM);
        a[3] = 1.0;
        a[3] = 0.0;
        let at = a.as_ptr();
        give_back(a);
        let other = take(KEPT_FROM + 1);
        assert_eq!(other.len(), KEPT_FROM + 1);
        let again = take(KEPT_FROM);
        assert_eq!(again.as_ptr(), at, "the kept buffer of that length");
        assert!(again.iter().all(|&v| v == 0.0));
    }

    #[test]
    fn a_thread_keeps_a_bounded_number_of_buffers() {
        for len in KEPT_FROM..=(KEPT_FROM + KEPT + 3) {
            give_back(vec![0.0; len]);
        }
        give_back(vec![0.0; KEPT_FROM - 1]);
        KEPT_BUFFERS.with(|kept| assert_eq!(kept.borrow().len(), KEPT));
    }
}
