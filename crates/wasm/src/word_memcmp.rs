//! `memcmp` and `bcmp` for the WebAssembly build, comparing eight bytes at a time.
//!
//! Rust's runtime on `wasm32-unknown-unknown` has no C library: its `memcmp` (compiler-builtins)
//! compares one byte per loop iteration. A replay compares long texts (each prompt against the
//! prefixes kept for it, recorded strings against the machine's): that loop was about 5% of a
//! replay in Node. compiler-builtins defines both functions weakly, so these take their place.

/// Compares `n` bytes at `a` and `b` as C's `memcmp`: zero when equal, otherwise the
/// difference of the first unequal pair of bytes (as unsigned bytes).
///
/// # Safety
/// `a` and `b` must be readable for `n` bytes.
pub unsafe fn compare(a: *const u8, b: *const u8, n: usize) -> i32 {
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n, and both are readable for n bytes.
        let (x, y) = unsafe {
            (
                u64::from_le_bytes(a.add(i).cast::<[u8; 8]>().read_unaligned()),
                u64::from_le_bytes(b.add(i).cast::<[u8; 8]>().read_unaligned()),
            )
        };
        if x != y {
            // Little-endian reading: the first unequal byte is the lowest unequal one.
            let k = ((x ^ y).trailing_zeros() / 8) as usize;
            // SAFETY: k < 8.
            return unsafe { byte_difference(a, b, i + k) };
        }
        i += 8;
    }
    // At most seven bytes are left.
    while i < n {
        // SAFETY: i < n.
        let d = unsafe { byte_difference(a, b, i) };
        if d != 0 {
            return d;
        }
        i += 1;
    }
    0
}

/// # Safety
/// Byte `i` of `a` and of `b` must be readable.
#[inline(always)]
unsafe fn byte_difference(a: *const u8, b: *const u8, i: usize) -> i32 {
    // SAFETY: as the caller promises.
    unsafe { i32::from(*a.add(i)) - i32::from(*b.add(i)) }
}

#[cfg(target_family = "wasm")]
mod symbols {
    /// C's `memcmp` (see the module doc).
    ///
    /// # Safety
    /// `a` and `b` must be readable for `n` bytes.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
        // SAFETY: as the caller promises.
        unsafe { super::compare(a, b, n) }
    }

    /// C's `bcmp`: zero when equal.
    ///
    /// # Safety
    /// `a` and `b` must be readable for `n` bytes.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
        // SAFETY: as the caller promises.
        unsafe { super::compare(a, b, n) }
    }
}

#[cfg(test)]
mod tests {
    use super::compare;
    use proptest::prelude::*;

    fn c_sign(a: &[u8], b: &[u8]) -> i32 {
        match a.cmp(b) {
            std::cmp::Ordering::Less => -1,
            std::cmp::Ordering::Equal => 0,
            std::cmp::Ordering::Greater => 1,
        }
    }

    proptest! {
        /// The same order as comparing the byte slices, with the first unequal pair's difference.
        #[test]
        fn compares_as_byte_slices(
            a in proptest::collection::vec(any::<u8>(), 0..70),
            changes in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut b = a.clone();
            for (at, byte) in changes {
                if !b.is_empty() {
                    let at = at.index(b.len());
                    b[at] = byte;
                }
            }
            // Equal lengths (memcmp's contract), any prefix of both.
            let n = if a.is_empty() { 0 } else { cut.index(a.len() + 1) };
            // SAFETY: both are n bytes or longer.
            let d = unsafe { compare(a.as_ptr(), b.as_ptr(), n) };
            prop_assert_eq!(d.signum(), c_sign(&a[..n], &b[..n]));
            if let Some(i) = (0..n).find(|&i| a[i] != b[i]) {
                prop_assert_eq!(d, i32::from(a[i]) - i32::from(b[i]));
            }
        }
    }

    #[test]
    fn every_position_of_a_difference_is_found() {
        for n in 0..40 {
            let a: Vec<u8> = (0..n as u8).collect();
            for i in 0..n {
                for (x, y) in [(0u8, 255u8), (255, 0), (7, 8)] {
                    let (mut p, mut q) = (a.clone(), a.clone());
                    p[i] = x;
                    q[i] = y;
                    // SAFETY: both are n bytes.
                    let d = unsafe { compare(p.as_ptr(), q.as_ptr(), n) };
                    assert_eq!(d, i32::from(x) - i32::from(y), "n {n} at {i}");
                }
            }
            // SAFETY: both are n bytes.
            assert_eq!(unsafe { compare(a.as_ptr(), a.clone().as_ptr(), n) }, 0);
        }
    }
}
