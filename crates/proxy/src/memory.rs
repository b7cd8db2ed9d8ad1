//! Giving memory back to the kernel once the proxy is quiet.
//!
//! Z3 and SQLite allocate through glibc, which keeps what a thread freed in that thread's heap
//! (it gives back only a heap's top on its own). After a reasoner worker or a database
//! connection ends for idleness, its freed pages would otherwise stay resident.

/// Returns the free pages of glibc's heaps to the kernel. Takes milliseconds: call it off the
/// event loops.
pub fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases memory glibc holds free; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}
