//! Handing freed heap memory back to the kernel.
//!
//! Rebuilding a busy service's or policy's flows allocates tens of megabytes for a moment
//! (every provider's flows are built again, then compared with what is installed; see
//! docs/performance.md, "Memory"). When they are freed, glibc's allocator keeps the pages: it
//! gives memory back only from the top of the heap, so after such a burst netplugin's resident
//! size stayed near the burst's peak (51 MiB anonymous with 18 MiB of live heap in `bench
//! memory`). `malloc_trim` returns every whole free page inside the heap as well. It is cheap
//! when there is little to return, so a timer asks the allocator how much it holds free and
//! trims only past a threshold, instead of every component calling it after its own bursts.

use std::time::Duration;

/// Free heap the allocator may keep before it is asked to give it back.
pub const KEEP_FREE_BYTES: usize = 4 << 20;

/// How often the free heap is checked.
pub const PERIOD: Duration = Duration::from_secs(1);

/// The allocator's own counts (`mallinfo2`), where it keeps them.
// The workspace denies `unsafe`; these calls into glibc are its only exception in netplugin.
#[allow(unsafe_code)]
fn allocator_counts() -> Option<(usize, usize)> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's own bookkeeping (under its locks).
        let info = unsafe { libc::mallinfo2() };
        Some((info.fordblks, info.uordblks))
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

/// Bytes the allocator holds free (in its heaps, not yet returned), when it can tell.
pub fn free_bytes() -> Option<usize> {
    allocator_counts().map(|(free, _)| free)
}

/// Bytes of the heap in use (allocated and not freed), when the allocator can tell; for
/// measurements.
pub fn used_bytes() -> Option<usize> {
    allocator_counts().map(|(_, used)| used)
}

/// Give the free pages of the heap back to the kernel; whether any were.
#[allow(unsafe_code)]
pub fn release() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only walks and shrinks the allocator's free lists.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Check the free heap every `period` and release it past [`KEEP_FREE_BYTES`]; runs until
/// the task is dropped.
pub async fn keep_trimmed(period: Duration) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Some(free) = free_bytes().filter(|free| *free > KEEP_FREE_BYTES) {
            let released = release();
            tracing::debug!(free, released, "freed heap given back");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn a_freed_burst_leaves_the_resident_set() {
        // A burst of small allocations (like flows being rebuilt) with a few survivors
        // scattered through it: the heap cannot shrink from its top, so only a trim gives the
        // pages between the survivors back.
        fn rss_anon_kib() -> u64 {
            let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
            status
                .lines()
                .find_map(|l| l.strip_prefix("RssAnon:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0)
        }
        let mut burst: Vec<Vec<u8>> = (0..200_000).map(|i| vec![i as u8; 400]).collect();
        let survivors: Vec<Vec<u8>> = burst.iter().step_by(1000).cloned().collect();
        let peak = rss_anon_kib();
        burst.clear();
        burst.shrink_to_fit();
        assert!(
            free_bytes().is_some_and(|f| f > 50 << 20),
            "the burst is free heap now"
        );
        let held = rss_anon_kib();
        release();
        let after = rss_anon_kib();
        assert!(
            after + 40 * 1024 < held,
            "trim returned the burst's pages: peak {peak} KiB, freed {held} KiB, trimmed {after} KiB"
        );
        assert_eq!(survivors.len(), 200);
    }
}
