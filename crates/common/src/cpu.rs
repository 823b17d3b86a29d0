//! What the CPU offers beyond the build's baseline (x86-64 v1: SSE2), for hot loops
//! compiled twice (once with `#[target_feature(enable = "avx2")]`) and chosen at run
//! time. The build itself stays portable.

use std::sync::atomic::{AtomicBool, Ordering};

static BASELINE_ONLY: AtomicBool = AtomicBool::new(false);

/// Whether the CPU runs AVX2 (the detection is cached by the standard library), and
/// the baseline is not forced.
#[inline]
pub fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && !BASELINE_ONLY.load(Ordering::Relaxed)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Makes [`avx2`] answer false from now on (`true`) or detect again (`false`): tests
/// run the baseline's code on a machine that has AVX2 with it. Both versions compute
/// the same, so switching while queries run is harmless.
pub fn force_baseline(on: bool) {
    BASELINE_ONLY.store(on, Ordering::Relaxed);
}
