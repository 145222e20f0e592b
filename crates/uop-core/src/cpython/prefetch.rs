//! Software prefetch: asks the CPU to start loading a cache line that will be read soon.
//!
//! Graph traversals are bound by memory latency (every node and every `src` tuple is a different, scattered object).
//! Requesting the lines of nodes that are known to be needed a little later lets several misses overlap instead of
//! being paid one after the other.

/// Starts loading the cache line holding `addr` into all cache levels. A hint only: it never faults, whatever the
/// address, and does nothing on targets without a stable prefetch instruction.
#[inline(always)]
pub fn prefetch<T>(addr: *const T) {
  #[cfg(target_arch = "x86_64")]
  // SAFETY: `prefetcht0` is a hint that never faults and has no architectural effect, valid for any address (even
  // null or unmapped); SSE is part of the x86_64 baseline.
  unsafe {
    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(addr.cast::<i8>());
  }
  #[cfg(not(target_arch = "x86_64"))]
  let _ = addr;
}
