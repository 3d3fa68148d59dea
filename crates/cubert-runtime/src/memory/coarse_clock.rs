//! A millisecond clock cheap enough to read on every allocation and free.
//!
//! The growable pool gives its free pages back once it has neither reserved nor freed a
//! block for `[memory] idle_release_ms`, so it notes the time of each reservation and free.
//! `Instant::now` (`CLOCK_MONOTONIC`) cost about 25 ns per read on this repository's VM, two
//! reads per alloc + free pair: a sixth of the pair. On Linux this clock reads
//! `CLOCK_MONOTONIC_COARSE`, the time of the last scheduler tick, which the vDSO returns
//! without touching the clock hardware; its resolution (a few milliseconds) is far below
//! the idle times it measures. Elsewhere it falls back to `Instant`.

/// Milliseconds on a monotonic clock whose resolution is a few milliseconds. Only
/// differences between readings mean anything.
#[cfg(target_os = "linux")]
pub fn now_ms() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec and CLOCK_MONOTONIC_COARSE exists on
    // every Linux since 2.6.32; the call writes only `now`.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut now) };
    if status != 0 {
        return fallback_ms();
    }
    (now.tv_sec as u64).saturating_mul(1000) + now.tv_nsec as u64 / 1_000_000
}

/// Milliseconds on a monotonic clock (see the Linux version).
#[cfg(not(target_os = "linux"))]
pub fn now_ms() -> u64 {
    fallback_ms()
}

/// Milliseconds since the first reading, from `Instant`.
fn fallback_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_moves_forward_with_real_time() {
        let before = now_ms();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let after = now_ms();
        // A coarse clock may lag by one tick (up to 10 ms at HZ = 100).
        assert!(after >= before + 20, "{before} -> {after}");
        assert!(after <= before + 10_000, "{before} -> {after}");
    }
}
