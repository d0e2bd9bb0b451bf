//! The storage of a matrix's arrays: a vector lafuse owns, or a read-only borrow of memory an
//! embedder owns (zero-copy inputs, `lafuse::interop`).
//!
//! Kernels read a [`Buffer`] as a slice (`Deref<Target = [T]>`, one branch, taken once per
//! kernel call, not per element) and never write through it: mutation goes through
//! [`Buffer::to_mut`], which copies a borrowed buffer into an owned vector first, so lafuse
//! never writes the embedder's memory.
//!
//! A borrowed buffer is not charged to the memory budget (`crate::memory`): the memory is the
//! caller's, already allocated when lafuse sees it. Only its copies are lafuse's allocations.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::ops::Deref;
use std::ptr::NonNull;

/// The values (or indices) of a matrix: an owned `Vec<T>`, or `len` elements at `ptr` that an
/// embedder owns and lafuse only reads.
///
/// **Clone always yields an owned copy**, a clone of a borrowed buffer copying its data. This
/// is a soundness rule, not a convenience: a borrowed buffer then only ever lives inside the
/// one `Matrix` built from the borrow (moves carry it, nothing duplicates it), so a guard on
/// that one matrix (`lafuse::interop::MatrixView`, which checks on drop that no one else holds
/// it) covers every pointer into the embedder's memory. A `Clone` that copied the pointer would
/// let a clone outlive the borrow unseen.
pub struct Buffer<T: Copy> {
    repr: Repr<T>,
}

enum Repr<T> {
    Owned(Vec<T>),
    /// Valid for reads of `len` elements for as long as the buffer lives (the contract of
    /// [`Buffer::borrowed`]); never written.
    Borrowed {
        ptr: NonNull<T>,
        len: usize,
    },
}

// SAFETY: an owned buffer is a `Vec<T>`, `Send` where `T: Send`. A borrowed buffer is a
// read-only view of memory that outlives it (the contract of `Buffer::borrowed`), i.e. a
// `&[T]`, which is `Send` where `T: Sync`; nothing writes through it.
unsafe impl<T: Copy + Send + Sync> Send for Buffer<T> {}
// SAFETY: through `&Buffer<T>` only `&[T]` is reachable (`Deref`; `to_mut` and `into_vec` need
// `&mut` or ownership), so sharing it is sharing a `&[T]`, sound where `T: Sync`.
unsafe impl<T: Copy + Sync> Sync for Buffer<T> {}

impl<T: Copy> Buffer<T> {
    /// A buffer reading the caller's `slice` in place, without copying it.
    ///
    /// # Safety
    /// The buffer, and anything it is moved into (a `Matrix`, a `Value`, an `Arc` of one), must
    /// be dropped before the lifetime of `slice` ends: the buffer keeps a raw pointer to it.
    /// Clones are owned copies and are not bound by this.
    pub unsafe fn borrowed(slice: &[T]) -> Buffer<T> {
        Buffer {
            repr: Repr::Borrowed {
                // A slice's pointer is never null (dangling but aligned when empty).
                ptr: NonNull::from(slice).cast(),
                len: slice.len(),
            },
        }
    }

    /// Whether this buffer reads memory lafuse does not own.
    #[inline]
    pub fn is_borrowed(&self) -> bool {
        matches!(self.repr, Repr::Borrowed { .. })
    }

    /// The contents as a slice (what `Deref` gives).
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        match &self.repr {
            Repr::Owned(v) => v,
            // SAFETY: `ptr` is valid for reads of `len` elements while `self` lives
            // (`Buffer::borrowed`'s contract), and nothing writes to it meanwhile.
            Repr::Borrowed { ptr, len } => unsafe {
                std::slice::from_raw_parts(ptr.as_ptr(), *len)
            },
        }
    }

    /// The owned vector, for writing: a borrowed buffer is first copied into one (the
    /// embedder's memory is never written), an owned one is handed out as it is.
    pub fn to_mut(&mut self) -> &mut Vec<T> {
        if let Repr::Borrowed { .. } = self.repr {
            self.repr = Repr::Owned(self.as_slice().to_vec());
        }
        match &mut self.repr {
            Repr::Owned(v) => v,
            Repr::Borrowed { .. } => unreachable!("a borrowed buffer was just made owned"),
        }
    }

    /// The contents as a vector: an owned buffer's vector moved out, a borrowed one copied.
    pub fn into_vec(self) -> Vec<T> {
        match self.repr {
            Repr::Owned(v) => v,
            Repr::Borrowed { .. } => self.as_slice().to_vec(),
        }
    }

    /// This buffer if owned, else an owned copy of it.
    pub fn into_owned(self) -> Buffer<T> {
        if self.is_borrowed() {
            Buffer::from(self.into_vec())
        } else {
            self
        }
    }
}

impl<T: Copy> Deref for Buffer<T> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Copy> AsRef<[T]> for Buffer<T> {
    #[inline]
    fn as_ref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Copy> From<Vec<T>> for Buffer<T> {
    #[inline]
    fn from(v: Vec<T>) -> Self {
        Buffer {
            repr: Repr::Owned(v),
        }
    }
}

impl<T: Copy> FromIterator<T> for Buffer<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Buffer::from(iter.into_iter().collect::<Vec<T>>())
    }
}

impl<'a, T: Copy> IntoIterator for &'a Buffer<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl<T: Copy> Default for Buffer<T> {
    /// An empty owned buffer.
    fn default() -> Self {
        Buffer::from(Vec::new())
    }
}

impl<T: Copy> Clone for Buffer<T> {
    /// An owned copy, also of a borrowed buffer (see the type's docs: this keeps every
    /// borrow inside the one matrix built from it).
    fn clone(&self) -> Self {
        Buffer::from(self.as_slice().to_vec())
    }
}

impl<T: Copy + fmt::Debug> fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_slice(), f)
    }
}

impl<T: Copy + PartialEq> PartialEq for Buffer<T> {
    /// Equal contents, owned or borrowed.
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Copy + PartialEq> PartialEq<Vec<T>> for Buffer<T> {
    fn eq(&self, other: &Vec<T>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Copy + PartialEq> PartialEq<[T]> for Buffer<T> {
    fn eq(&self, other: &[T]) -> bool {
        self.as_slice() == other
    }
}

impl<T: Copy + Serialize> Serialize for Buffer<T> {
    /// A plain sequence, as the `Vec` it replaced.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.as_slice().serialize(serializer)
    }
}

impl<'de, T: Copy + Deserialize<'de>> Deserialize<'de> for Buffer<T> {
    /// From a plain sequence, owned.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<T>::deserialize(deserializer).map(Buffer::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrowed_buffers_read_in_place_and_copy_on_write() {
        let source = vec![1.0, 2.0, 3.0];
        // SAFETY: `b` is dropped at the end of this test, before `source`.
        let mut b = unsafe { Buffer::borrowed(&source) };
        assert!(b.is_borrowed());
        assert_eq!(b.as_ptr(), source.as_ptr());
        assert_eq!(b, source);
        b.to_mut()[0] = 9.0;
        assert!(!b.is_borrowed());
        assert_eq!(source, [1.0, 2.0, 3.0]);
        assert_eq!(b, vec![9.0, 2.0, 3.0]);
    }

    #[test]
    fn clones_of_borrowed_buffers_are_owned_copies() {
        let source = [4u32, 5, 6];
        // SAFETY: `b` and `c` are dropped before `source`.
        let b = unsafe { Buffer::borrowed(&source) };
        let c = b.clone();
        assert!(!c.is_borrowed());
        assert_ne!(c.as_ptr(), source.as_ptr());
        assert_eq!(b, c);
        let v = b.into_vec();
        assert_ne!(v.as_ptr(), source.as_ptr());
        assert_eq!(v, source);
    }

    #[test]
    fn owned_buffers_move_their_vector() {
        let v = vec![1usize, 2, 3];
        let p = v.as_ptr();
        let mut b = Buffer::from(v);
        assert!(!b.is_borrowed());
        assert_eq!(b.to_mut().as_ptr(), p);
        let v = b.into_vec();
        assert_eq!(v.as_ptr(), p);
        assert!(Buffer::<f64>::default().is_empty());
    }

    #[test]
    fn serialises_as_a_plain_sequence() {
        let source = [1.5, -2.0];
        // SAFETY: `b` is dropped before `source`.
        let b = unsafe { Buffer::borrowed(&source) };
        let json = serde_json::to_string(&b).unwrap();
        assert_eq!(json, "[1.5,-2.0]");
        let back: Buffer<f64> = serde_json::from_str(&json).unwrap();
        assert!(!back.is_borrowed());
        assert_eq!(back, b);
        assert_eq!(format!("{b:?}"), "[1.5, -2.0]");
    }
}
