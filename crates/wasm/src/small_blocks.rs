//! The WebAssembly build's allocator: Talc, with freed small blocks kept on a free list per
//! size class and handed out again first.
//!
//! A replay parses and builds thousands of small JSON values (strings, maps, vectors) and frees
//! them again; Talc's bins cost about a sixth of a replay in Node. Taking a block of the same
//! class back off a list is a load and a store. The lists only ever hold blocks Talc gave out,
//! each at least its class's size and aligned to `ALIGN`; they are never given back to Talc
//! (a class holds at most what was live in it at once).
//!
//! Single-threaded WebAssembly only (no `atomics`): nothing here is shared between threads.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::ptr;

/// Class width and the alignment every block of the lists has.
const ALIGN: usize = 16;
/// Blocks up to this size are kept on the lists.
const LARGEST: usize = 512;
const CLASSES: usize = LARGEST / ALIGN;

/// Talc with a free list per size class in front of it.
pub struct SmallBlocks<A> {
    inner: A,
    /// The head of each class's list (a freed block holds the next one's address).
    heads: UnsafeCell<[*mut u8; CLASSES]>,
}

// SAFETY: single-threaded WebAssembly only (see the module doc); native builds compile this
// module for its tests alone, which use it from one thread and never as a static.
#[cfg(all(not(target_feature = "atomics"), target_family = "wasm"))]
unsafe impl<A: Sync> Sync for SmallBlocks<A> {}

impl<A> SmallBlocks<A> {
    pub const fn new(inner: A) -> Self {
        SmallBlocks {
            inner,
            heads: UnsafeCell::new([ptr::null_mut(); CLASSES]),
        }
    }
}

/// The class of `layout`, when its blocks are kept on a list.
fn class(layout: Layout) -> Option<usize> {
    if layout.size() == 0 || layout.size() > LARGEST || layout.align() > ALIGN {
        return None;
    }
    Some((layout.size() - 1) / ALIGN)
}

/// The layout every block of class `c` is allocated with.
fn class_layout(c: usize) -> Layout {
    // SAFETY: (c + 1) * ALIGN is a nonzero multiple of ALIGN, a power of two, and small.
    unsafe { Layout::from_size_align_unchecked((c + 1) * ALIGN, ALIGN) }
}

unsafe impl<A: GlobalAlloc> GlobalAlloc for SmallBlocks<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(c) = class(layout) else {
            return self.inner.alloc(layout);
        };
        let heads = &mut *self.heads.get();
        let block = heads[c];
        if block.is_null() {
            return self.inner.alloc(class_layout(c));
        }
        heads[c] = block.cast::<*mut u8>().read();
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        let Some(c) = class(layout) else {
            return self.inner.dealloc(block, layout);
        };
        let heads = &mut *self.heads.get();
        block.cast::<*mut u8>().write(heads[c]);
        heads[c] = block;
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        match (class(layout), class(new_layout)) {
            // The block already has room (its class is the new size's).
            (Some(a), Some(b)) if a == b => block,
            // Neither kept on a list: Talc resizes in place when it can.
            (None, None) => self.inner.realloc(block, layout, new_size),
            _ => {
                let moved = self.alloc(new_layout);
                if !moved.is_null() {
                    ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                    self.dealloc(block, layout);
                }
                moved
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::alloc::System;

    /// One step: allocate (size, alignment as a power of two), free or resize the live block
    /// at an index (modulo how many there are).
    #[derive(Debug, Clone)]
    enum Step {
        Alloc(usize, u32),
        Free(usize),
        Realloc(usize, usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (1usize..700, 0u32..6).prop_map(|(n, a)| Step::Alloc(n, a)),
            any::<usize>().prop_map(Step::Free),
            (any::<usize>(), 1usize..700).prop_map(|(i, n)| Step::Realloc(i, n)),
        ]
    }

    proptest! {
        /// Every live block keeps what was written into it, is aligned as asked, and no two
        /// overlap, whatever mix of sizes, alignments, frees and resizes comes: a block taken
        /// off a list is never also live elsewhere, and a resize keeps the contents.
        #[test]
        fn live_blocks_keep_their_bytes(steps in prop::collection::vec(step(), 1..400)) {
            let heap = SmallBlocks::new(System);
            // (pointer, layout, fill byte)
            let mut live: Vec<(*mut u8, Layout, u8)> = Vec::new();
            let check = |live: &[(*mut u8, Layout, u8)]| {
                for &(p, l, fill) in live {
                    assert_eq!(p as usize % l.align(), 0);
                    let bytes = unsafe { std::slice::from_raw_parts(p, l.size()) };
                    assert!(bytes.iter().all(|&b| b == fill), "a block's bytes changed");
                }
                let mut spans: Vec<(usize, usize)> =
                    live.iter().map(|&(p, l, _)| (p as usize, p as usize + l.size())).collect();
                spans.sort_unstable();
                assert!(spans.windows(2).all(|w| w[0].1 <= w[1].0), "two live blocks overlap");
            };
            for (n, s) in steps.into_iter().enumerate() {
                let fill = n as u8;
                match s {
                    Step::Alloc(size, a) => {
                        let l = Layout::from_size_align(size, 1 << a).unwrap();
                        let p = unsafe { heap.alloc(l) };
                        prop_assert!(!p.is_null());
                        unsafe { p.write_bytes(fill, size) };
                        live.push((p, l, fill));
                    }
                    Step::Free(i) if !live.is_empty() => {
                        let (p, l, _) = live.swap_remove(i % live.len());
                        unsafe { heap.dealloc(p, l) };
                    }
                    Step::Realloc(i, size) if !live.is_empty() => {
                        let at = i % live.len();
                        let (p, l, old) = live[at];
                        let q = unsafe { heap.realloc(p, l, size) };
                        prop_assert!(!q.is_null());
                        let kept = unsafe { std::slice::from_raw_parts(q, l.size().min(size)) };
                        prop_assert!(kept.iter().all(|&b| b == old), "a resize lost bytes");
                        let nl = Layout::from_size_align(size, l.align()).unwrap();
                        unsafe { q.write_bytes(fill, size) };
                        live[at] = (q, nl, fill);
                    }
                    _ => {}
                }
                check(&live);
            }
            for (p, l, _) in live {
                unsafe { heap.dealloc(p, l) };
            }
        }
    }

    /// A freed small block is the next one handed out for its class (the list is used), and a
    /// block of another class is not.
    #[test]
    fn a_freed_block_is_reused_by_its_class_only() {
        let heap = SmallBlocks::new(System);
        let l24 = Layout::from_size_align(24, 8).unwrap();
        let l32 = Layout::from_size_align(32, 8).unwrap();
        let l40 = Layout::from_size_align(40, 8).unwrap();
        unsafe {
            let a = heap.alloc(l24);
            heap.dealloc(a, l24);
            // 24 and 32 bytes are one class (17-32).
            assert_eq!(heap.alloc(l32), a);
            heap.dealloc(a, l32);
            let b = heap.alloc(l40);
            assert_ne!(b, a);
            heap.dealloc(b, l40);
        }
    }
}
