//! The process's allocator: mimalloc, asked for alignment only when its size classes do not already give it.
//!
//! The `mimalloc` crate's allocator passes every request to `mi_malloc_aligned`. In mimalloc v3 that call
//! takes its fast path only when the request's own size class has a free block at hand; otherwise it goes
//! through layers of its own before mimalloc's generic allocation, and unless the block size is a power of two
//! it over-allocates by the alignment minus one. So an 8-aligned request of 48 bytes is served from the
//! 64-byte class, and the 48-byte class, where the fast path looks for it, never gets a block: such requests
//! always took the slow path. On the request path, `Arc`s, boxes and value buffers took it often (about 170
//! instructions more each; `docs/performance-history.md` section 20).
//! Plain `mi_malloc` gives every block of 16 bytes or more a 16-byte alignment, and smaller blocks an 8-byte
//! one (mimalloc's `alloc.c`: "block_size < MI_MAX_ALIGN_SIZE || aligned"), which is the rule the standard
//! library's own allocator applies to `malloc`.

use libmimalloc_sys as mi;
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// The alignment mimalloc gives every block of at least this size (`MI_MAX_ALIGN_SIZE`).
const NATURAL_ALIGN: usize = 16;

pub struct Mimalloc;

/// Whether a plain allocation of `size` bytes is already aligned to `align`.
fn naturally_aligned(size: usize, align: usize) -> bool {
    align <= NATURAL_ALIGN && align <= size
}

// SAFETY: every block comes from mimalloc and goes back to it; a plain allocation is used only where
// `naturally_aligned` says mimalloc's size classes meet the layout's alignment.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if naturally_aligned(layout.size(), layout.align()) {
            mi::mi_malloc(layout.size()).cast()
        } else {
            mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if naturally_aligned(layout.size(), layout.align()) {
            mi::mi_zalloc(layout.size()).cast()
        } else {
            mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        mi::mi_free(ptr.cast::<c_void>());
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if naturally_aligned(new_size, layout.align()) {
            mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
        } else {
            mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every layout gets a block aligned as it asks, whichever path it takes, and keeps it when it grows or
    /// shrinks.
    #[test]
    fn blocks_are_aligned_as_asked() {
        let sizes = [1, 2, 3, 7, 8, 9, 12, 15, 16, 17, 24, 40, 48, 101, 1000, 1025, 5000, 70_000];
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in sizes {
                let layout = Layout::from_size_align(size, align).unwrap();
                let aligned = |p: *mut u8| !p.is_null() && p as usize % align == 0;
                unsafe {
                    let z = Mimalloc.alloc_zeroed(layout);
                    assert!(aligned(z), "{size} zeroed bytes aligned {align}");
                    assert!(std::slice::from_raw_parts(z, size).iter().all(|b| *b == 0));
                    Mimalloc.dealloc(z, layout);

                    let mut p = Mimalloc.alloc(layout);
                    assert!(aligned(p), "{size} bytes aligned {align}");
                    p.write_bytes(0xab, size);
                    let mut now = layout;
                    for new_size in [size * 3, (size / 2).max(1)] {
                        p = Mimalloc.realloc(p, now, new_size);
                        assert!(aligned(p), "{size} bytes resized to {new_size}, aligned {align}");
                        assert_eq!(*p, 0xab, "a resized block keeps its bytes");
                        now = Layout::from_size_align(new_size, align).unwrap();
                    }
                    Mimalloc.dealloc(p, now);
                }
            }
        }
    }
}
