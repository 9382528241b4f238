//! The one answer every algorithm gives.

use crate::clock::{nanos_to_duration, Nanos};
use std::time::Duration;

/// Whether a call may go ahead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Granted: the permits are taken. The caller may act after
    /// [`Decision::wait`] (zero unless the algorithm reserves future capacity, as
    /// Guava's limiters and the leaky-bucket queue do).
    Allowed,
    /// Refused for now: nothing was taken. A retry may succeed after
    /// [`Decision::retry_after`].
    Denied,
    /// Refused for good: the cost exceeds what the limit can ever grant (above its
    /// capacity, or the limit is exhausted forever). Retrying is pointless, and
    /// blocking or async acquires fail at once with [`Error::Never`](crate::Error::Never).
    Never,
}

/// What a limit answered to one call: the verdict, plus everything an HTTP service
/// needs for `429`, `Retry-After` and the `RateLimit`/`X-Rate-Limit-*` headers.
///
/// All durations are relative to the moment of the call.
///
/// * [`limit`](Decision::limit): the capacity of the limit that decided, in permits
///   (e.g. 100 for "100 per minute"; for Guava's limiters, the number of permits a full
///   burst holds).
/// * [`remaining`](Decision::remaining): permits still available right after this call.
/// * [`retry_after`](Decision::retry_after): for a denied call, when a retry of the same
///   cost could first succeed; zero for an allowed call. For a call that can never
///   succeed it is [`Duration::MAX`].
/// * [`reset_after`](Decision::reset_after): when the state will be fully replenished
///   (as if no call had ever been made) if no further call arrives.
/// * [`wait`](Decision::wait): for an allowed call, how long the caller must wait before
///   acting on it. Non-zero only for algorithms that reserve future capacity.
/// * [`limit_index`](Decision::limit_index): which limit of a multi-limit set decided
///   (0 for a single limit).
///
/// ```
/// use sluicegate::{Decision, Verdict};
/// use std::time::Duration;
/// let d = Decision::denied(100, 0, 2_000_000_000, 60_000_000_000);
/// assert_eq!(d.verdict(), Verdict::Denied);
/// assert_eq!(d.retry_after(), Duration::from_secs(2));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    verdict: Verdict,
    wait: Nanos,
    retry_after: Nanos,
    reset_after: Nanos,
    remaining: u64,
    limit: u64,
    limit_index: u32,
    mark: i64,
    charge: u64,
    spent: u64,
}

impl Decision {
    /// An allowed decision that may act at once.
    #[inline]
    pub fn allowed(limit: u64, remaining: u64, reset_after: Nanos) -> Self {
        Self::allowed_after(0, limit, remaining, reset_after)
    }

    /// An allowed decision whose caller must first wait `wait` nanoseconds (a
    /// reservation of future capacity).
    #[inline]
    pub fn allowed_after(wait: Nanos, limit: u64, remaining: u64, reset_after: Nanos) -> Self {
        Decision {
            verdict: Verdict::Allowed,
            wait,
            retry_after: 0,
            reset_after,
            remaining,
            limit,
            limit_index: 0,
            mark: 0,
            charge: 0,
            spent: 0,
        }
    }

    /// A denied decision. `retry_after` is raised to at least 1 ns, so that a caller
    /// that waits and retries always makes progress.
    #[inline]
    pub fn denied(limit: u64, remaining: u64, retry_after: Nanos, reset_after: Nanos) -> Self {
        Decision {
            verdict: Verdict::Denied,
            wait: 0,
            retry_after: retry_after.max(1),
            reset_after,
            remaining,
            limit,
            limit_index: 0,
            mark: 0,
            charge: 0,
            spent: 0,
        }
    }

    /// A decision that can never become allowed; `retry_after` is `u64::MAX` ns.
    #[inline]
    pub fn never(limit: u64, remaining: u64, reset_after: Nanos) -> Self {
        Decision {
            verdict: Verdict::Never,
            wait: 0,
            retry_after: u64::MAX,
            reset_after,
            remaining,
            limit,
            limit_index: 0,
            mark: 0,
            charge: 0,
            spent: 0,
        }
    }

    /// Attaches the bookkeeping an algorithm needs to cancel this grant later
    /// ([`Algorithm::cancel`](crate::algorithms::Algorithm::cancel)): `mark` is an
    /// algorithm-defined position in its state right after the grant, `charge` how much
    /// the grant consumed, in the algorithm's own unit. Opaque to everyone else.
    #[inline]
    pub fn with_grant(mut self, mark: i64, charge: u64) -> Self {
        self.mark = mark;
        self.charge = charge;
        self
    }

    /// Records how many *stored* permits the grant spent, for algorithms whose stored
    /// permits are worth more than time alone says (Guava's warm-up, where a cold
    /// permit costs more than a warm one): cancelling gives them back too. Opaque to
    /// everyone else.
    #[inline]
    pub fn with_stored_spent(mut self, permits: f64) -> Self {
        self.spent = permits.to_bits();
        self
    }

    /// The stored permits the grant spent (see
    /// [`with_stored_spent`](Decision::with_stored_spent)); 0 unless set.
    #[inline]
    pub fn stored_spent(&self) -> f64 {
        f64::from_bits(self.spent)
    }

    /// Records which limit of a set decided.
    #[inline]
    pub fn with_limit_index(mut self, index: u32) -> Self {
        self.limit_index = index;
        self
    }

    /// Allowed, denied, or never.
    #[inline]
    pub fn verdict(&self) -> Verdict {
        self.verdict
    }

    /// True if the call was granted.
    #[inline]
    pub fn is_allowed(&self) -> bool {
        self.verdict == Verdict::Allowed
    }

    /// True if the call can never be granted.
    #[inline]
    pub fn is_never(&self) -> bool {
        self.verdict == Verdict::Never
    }

    /// How long an allowed caller must wait before acting (zero if at once).
    #[inline]
    pub fn wait(&self) -> Duration {
        nanos_to_duration(self.wait)
    }

    /// [`wait`](Decision::wait) in nanoseconds.
    #[inline]
    pub fn wait_nanos(&self) -> Nanos {
        self.wait
    }

    /// When a denied call could first succeed on retry; zero when allowed,
    /// `Duration` of `u64::MAX` ns when never.
    #[inline]
    pub fn retry_after(&self) -> Duration {
        nanos_to_duration(self.retry_after)
    }

    /// [`retry_after`](Decision::retry_after) in nanoseconds.
    #[inline]
    pub fn retry_after_nanos(&self) -> Nanos {
        self.retry_after
    }

    /// When the state will be fully replenished if no further call arrives.
    #[inline]
    pub fn reset_after(&self) -> Duration {
        nanos_to_duration(self.reset_after)
    }

    /// [`reset_after`](Decision::reset_after) in nanoseconds.
    #[inline]
    pub fn reset_after_nanos(&self) -> Nanos {
        self.reset_after
    }

    /// Permits still available right after this call.
    #[inline]
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// The capacity, in permits, of the limit that decided.
    #[inline]
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Which limit of a set decided (0 for a single limit).
    #[inline]
    pub fn limit_index(&self) -> u32 {
        self.limit_index
    }

    /// The algorithm's opaque position mark for cancellation (see
    /// [`with_grant`](Decision::with_grant)).
    #[inline]
    pub fn mark(&self) -> i64 {
        self.mark
    }

    /// The algorithm's opaque charge for cancellation (see
    /// [`with_grant`](Decision::with_grant)).
    #[inline]
    pub fn charge(&self) -> u64 {
        self.charge
    }
}
