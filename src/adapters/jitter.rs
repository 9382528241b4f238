//! Jitter: a small extra delay that spreads callers who woke together.

use crate::clock::{duration_to_nanos, Nanos};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Up to `max` of extra delay, drawn uniformly from a seeded SplitMix64 sequence, so
/// that a run is repeatable (under a [`ManualClock`](crate::ManualClock) the exact
/// delays are known) while callers that woke at the same instant spread out.
///
/// Clones share one sequence: each draw takes the next value, whichever clone draws.
/// A `max` of zero draws zero. Not for anything that needs unpredictability.
///
/// ```
/// use sluicegate::adapters::Jitter;
/// use std::time::Duration;
/// let a = Jitter::new(Duration::from_millis(100), 42);
/// let b = Jitter::new(Duration::from_millis(100), 42);
/// let draws: Vec<Duration> = (0..5).map(|_| a.draw()).collect();
/// assert_eq!(draws, (0..5).map(|_| b.draw()).collect::<Vec<_>>()); // same seed, same delays
/// assert!(draws.iter().all(|d| *d <= Duration::from_millis(100)));
/// ```
#[derive(Clone, Debug)]
pub struct Jitter {
    max: Nanos,
    state: Arc<AtomicU64>,
}

/// SplitMix64's increment (the golden ratio in 64 bits).
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

impl Jitter {
    /// Jitter of up to `max` (inclusive), from the sequence seeded with `seed`.
    ///
    /// ```
    /// use sluicegate::adapters::Jitter;
    /// use std::time::Duration;
    /// assert_eq!(Jitter::new(Duration::ZERO, 7).draw(), Duration::ZERO);
    /// ```
    pub fn new(max: Duration, seed: u64) -> Self {
        Jitter {
            max: duration_to_nanos(max),
            state: Arc::new(AtomicU64::new(seed)),
        }
    }

    /// The largest delay this jitter draws.
    ///
    /// ```
    /// use sluicegate::adapters::Jitter;
    /// use std::time::Duration;
    /// assert_eq!(Jitter::new(Duration::from_millis(3), 1).max(), Duration::from_millis(3));
    /// ```
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max)
    }

    /// The next delay, in `[0, max]`.
    ///
    /// ```
    /// use sluicegate::adapters::Jitter;
    /// use std::time::Duration;
    /// let jitter = Jitter::new(Duration::from_secs(1), 9);
    /// assert!((0..100).all(|_| jitter.draw() <= Duration::from_secs(1)));
    /// ```
    pub fn draw(&self) -> Duration {
        Duration::from_nanos(self.draw_nanos())
    }

    pub(crate) fn draw_nanos(&self) -> Nanos {
        if self.max == 0 {
            return 0;
        }
        let mut z = self
            .state
            .fetch_add(GOLDEN, Ordering::Relaxed)
            .wrapping_add(GOLDEN);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // Uniform in [0, max] by the multiply-shift range reduction (no modulo bias
        // worth speaking of for a delay).
        let span = u128::from(self.max) + 1;
        ((u128::from(z) * span) >> 64) as Nanos
    }
}
