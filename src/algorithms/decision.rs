//! The one answer every algorithm gives.

use crate::clock::{nanos_to_duration, Nanos};
use std::time::Duration;

/// Whether a call may go ahead.
///
/// ```
/// use sluicegate::{Decision, Verdict};
/// assert_eq!(Decision::allowed(10, 9, 0).verdict(), Verdict::Allowed);
/// assert_eq!(Decision::never(10, 10, 0).verdict(), Verdict::Never);
/// ```
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

/// Who made a [`Decision`]: the limit itself (in memory or on a store's server),
/// a lease of its permits held in this process, or, when a store that can fail
/// could not be asked, the failure policy of a
/// [`FailoverStore`](crate::stores::failover::FailoverStore) in its place.
///
/// Every decision an algorithm or a store makes says [`Source::Store`]; only a
/// failover store answers the failure policies' sources, only a leased store
/// [`Source::Leased`] and only a deny cache [`Source::Cached`], so a caller can tell a degraded decision
/// from a checked one (to log it, count it, or send it on as a header).
///
/// ```
/// use sluicegate::{Decision, Source};
/// assert_eq!(Decision::allowed(10, 9, 0).source(), Source::Store);
/// assert_eq!(Source::default(), Source::Store);
/// let unchecked = Decision::allowed(0, 0, 0).with_source(Source::Unchecked);
/// assert!(unchecked.source().is_degraded());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Source {
    /// The limit decided: the algorithm's step ran on the state it keeps (a cell,
    /// the in-memory store, or the remote store's server).
    #[default]
    Store,
    /// The remote store could not be asked, and a local, in-memory limit decided
    /// instead ([`FailurePolicy::Local`](crate::stores::failover::FailurePolicy::Local)).
    Local,
    /// The remote store could not be asked, and the call was let through
    /// unchecked ([`FailurePolicy::Open`](crate::stores::failover::FailurePolicy::Open)).
    Unchecked,
    /// The remote store could not be asked, and the call was refused without
    /// being checked ([`FailurePolicy::Closed`](crate::stores::failover::FailurePolicy::Closed)).
    FailedClosed,
    /// Granted from permits this process took from the store earlier, in one
    /// lease of several, without asking the store again
    /// ([`LeasedStore`](crate::stores::lease::LeasedStore)). The limit was
    /// consulted when the lease was taken, so this is not a degraded source.
    Leased,
    /// The store's own refusal of this key, repeated by a
    /// [`DenyCache`](crate::stores::deny_cache::DenyCache) in this process until
    /// its `retry_after`, without asking the store again. The limit made it, so
    /// this is not a degraded source.
    Cached,
}

impl Source {
    /// True for the failure policies' sources: the limit was not consulted.
    /// [`Source::Store`], [`Source::Leased`] (whose permits the limit granted
    /// when the lease was taken) and [`Source::Cached`] (a refusal the limit
    /// made) are not degraded.
    ///
    /// ```
    /// use sluicegate::Source;
    /// assert!(!Source::Store.is_degraded() && !Source::Leased.is_degraded());
    /// assert!(Source::Local.is_degraded() && Source::FailedClosed.is_degraded());
    /// ```
    #[inline]
    pub fn is_degraded(self) -> bool {
        !matches!(self, Source::Store | Source::Leased | Source::Cached)
    }
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
///   cost by the same caller, keeping its deadline, could first succeed (see there);
///   zero for an allowed call. For a call that can never succeed it is `u64::MAX` ns.
/// * [`reset_after`](Decision::reset_after): when the state will be fully replenished
///   (as if no call had ever been made) if no further call arrives.
/// * [`wait`](Decision::wait): for an allowed call, how long the caller must wait before
///   acting on it. Non-zero only for algorithms that reserve future capacity.
/// * [`limit_index`](Decision::limit_index): which limit of a multi-limit set decided
///   (0 for a single limit), counting the set's leaf limits depth first: a nested
///   set's limits in its place.
/// * [`source`](Decision::source): who decided ([`Source::Store`], the limit itself,
///   unless a lease of its permits or a failover store answered in its place). It
///   takes a byte of the padding next to the verdict, so a decision stays five
///   words.
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
    /// The wait of an allowed call, the `retry_after` of a refused one: one field,
    /// as no decision has both, so that a decision is five words, not six.
    delay: Nanos,
    reset_after: Nanos,
    remaining: u64,
    limit: u64,
    limit_index: u32,
    source: Source,
}

impl Decision {
    /// An allowed decision that may act at once.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use std::time::Duration;
    /// let d = Decision::allowed(10, 9, 100_000_000);
    /// assert!(d.is_allowed());
    /// assert_eq!((d.wait(), d.retry_after()), (Duration::ZERO, Duration::ZERO));
    /// assert_eq!(d.remaining(), 9);
    /// ```
    #[inline]
    pub fn allowed(limit: u64, remaining: u64, reset_after: Nanos) -> Self {
        Self::allowed_after(0, limit, remaining, reset_after)
    }

    /// An allowed decision whose caller must first wait `wait` nanoseconds (a
    /// reservation of future capacity).
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use std::time::Duration;
    /// let d = Decision::allowed_after(200_000_000, 1, 0, 400_000_000);
    /// assert!(d.is_allowed());
    /// assert_eq!(d.wait(), Duration::from_millis(200));
    /// ```
    #[inline]
    pub fn allowed_after(wait: Nanos, limit: u64, remaining: u64, reset_after: Nanos) -> Self {
        Decision {
            verdict: Verdict::Allowed,
            delay: wait,
            reset_after,
            remaining,
            limit,
            limit_index: 0,
            source: Source::Store,
        }
    }

    /// A denied decision. `retry_after` is raised to at least 1 ns, so that a caller
    /// that waits and retries always makes progress.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// let d = Decision::denied(10, 0, 0, 0);
    /// assert!(!d.is_allowed() && !d.is_never());
    /// assert_eq!(d.retry_after_nanos(), 1); // never zero
    /// ```
    #[inline]
    pub fn denied(limit: u64, remaining: u64, retry_after: Nanos, reset_after: Nanos) -> Self {
        Decision {
            verdict: Verdict::Denied,
            delay: retry_after.max(1),
            reset_after,
            remaining,
            limit,
            limit_index: 0,
            source: Source::Store,
        }
    }

    /// A decision that can never become allowed; `retry_after` is `u64::MAX` ns.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use std::time::Duration;
    /// let d = Decision::never(10, 10, 0);
    /// assert!(d.is_never() && !d.is_allowed());
    /// assert_eq!(d.retry_after_nanos(), u64::MAX);
    /// assert!(d.retry_after() > Duration::from_secs(500 * 365 * 86_400));
    /// ```
    #[inline]
    pub fn never(limit: u64, remaining: u64, reset_after: Nanos) -> Self {
        Decision {
            verdict: Verdict::Never,
            delay: u64::MAX,
            reset_after,
            remaining,
            limit,
            limit_index: 0,
            source: Source::Store,
        }
    }

    /// Records which limit of a set decided.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// let d = Decision::denied(60, 0, 1_000, 1_000).with_limit_index(2);
    /// assert_eq!(d.limit_index(), 2);
    /// ```
    #[inline]
    pub fn with_limit_index(mut self, index: u32) -> Self {
        self.limit_index = index;
        self
    }

    /// Records who made the decision (see [`Source`]).
    ///
    /// ```
    /// use sluicegate::{Decision, Source};
    /// let d = Decision::denied(0, 0, 1_000, 1_000).with_source(Source::FailedClosed);
    /// assert_eq!(d.source(), Source::FailedClosed);
    /// ```
    #[inline]
    pub fn with_source(mut self, source: Source) -> Self {
        self.source = source;
        self
    }

    /// This decision as it stands `elapsed` later, told by `source`, with `more`
    /// permits added to its `remaining`: its `wait` or `retry_after` and its
    /// `reset_after` counted down to zero at the least; one that is for ever
    /// (`u64::MAX`) stays so. What a cached refusal or a lease repeats.
    pub(crate) fn later(self, elapsed: Nanos, more: u64, source: Source) -> Self {
        let count_down = |d: Nanos| {
            if d == Nanos::MAX {
                d
            } else {
                d.saturating_sub(elapsed)
            }
        };
        Decision {
            delay: count_down(self.delay),
            reset_after: count_down(self.reset_after),
            remaining: self.remaining.saturating_add(more),
            source,
            ..self
        }
    }

    /// Who made the decision: [`Source::Store`] (the limit) unless a
    /// [`FailoverStore`](crate::stores::failover::FailoverStore) answered by its
    /// failure policy or a [`LeasedStore`](crate::stores::lease::LeasedStore) from
    /// a lease ([`Source::Leased`]).
    ///
    /// ```
    /// use sluicegate::{Decision, Source};
    /// assert_eq!(Decision::never(1, 1, 0).source(), Source::Store);
    /// ```
    #[inline]
    pub fn source(&self) -> Source {
        self.source
    }

    /// Allowed, denied, or never.
    ///
    /// ```
    /// use sluicegate::{Decision, Verdict};
    /// assert_eq!(Decision::denied(1, 0, 5, 5).verdict(), Verdict::Denied);
    /// ```
    #[inline]
    pub fn verdict(&self) -> Verdict {
        self.verdict
    }

    /// True if the call was granted.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// assert!(Decision::allowed_after(5, 1, 0, 5).is_allowed()); // even with a wait
    /// assert!(!Decision::denied(1, 0, 5, 5).is_allowed());
    /// ```
    #[inline]
    pub fn is_allowed(&self) -> bool {
        self.verdict == Verdict::Allowed
    }

    /// True if the call can never be granted.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// assert!(Decision::never(1, 1, 0).is_never());
    /// assert!(!Decision::denied(1, 0, 5, 5).is_never());
    /// ```
    #[inline]
    pub fn is_never(&self) -> bool {
        self.verdict == Verdict::Never
    }

    /// How long an allowed caller must wait before acting (zero if at once).
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use std::time::Duration;
    /// assert_eq!(Decision::allowed_after(1_500, 1, 0, 0).wait(), Duration::from_nanos(1_500));
    /// assert_eq!(Decision::denied(1, 0, 5, 5).wait(), Duration::ZERO);
    /// ```
    #[inline]
    pub fn wait(&self) -> Duration {
        nanos_to_duration(self.wait_nanos())
    }

    /// [`wait`](Decision::wait) in nanoseconds.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// assert_eq!(Decision::allowed_after(1_500, 1, 0, 0).wait_nanos(), 1_500);
    /// ```
    #[inline]
    pub fn wait_nanos(&self) -> Nanos {
        self.delay_if(true)
    }

    /// When a denied call could first succeed on retry; zero when allowed,
    /// `Duration` of `u64::MAX` ns when never.
    ///
    /// The rule, the same for every algorithm: a call asked at `now` with
    /// `max_wait` has the deadline `now + max_wait`, and `retry_after` is the least
    /// `s` such that the same cost, asked again at `now + s` with what is left of
    /// that deadline (`max_wait − s`, or 0 once it has passed), would be granted if
    /// nothing else changed the state. So:
    ///
    /// * for a caller who does not wait (`max_wait = 0`: a try, a `check`, an HTTP
    ///   `Retry-After`) it is simply when a try could succeed;
    /// * for a window, which cannot reserve the future, `max_wait` plays no part;
    /// * for an algorithm that reserves the future (Guava's limiters, the
    ///   leaky-bucket queue), a turn to act past the deadline stays past it however
    ///   long the caller waits, so `retry_after` is when a caller who does not wait
    ///   could succeed, which lies past the deadline: more than `max_wait`.
    ///
    /// Hence a retry within the deadline can succeed if and only if
    /// `retry_after <= max_wait`, which is all a waiting caller checks (it never
    /// sleeps towards a retry that cannot succeed).
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use std::time::Duration;
    /// assert_eq!(Decision::denied(1, 0, 3_000_000, 0).retry_after(), Duration::from_millis(3));
    /// assert_eq!(Decision::allowed(1, 0, 0).retry_after(), Duration::ZERO);
    /// ```
    #[inline]
    pub fn retry_after(&self) -> Duration {
        nanos_to_duration(self.retry_after_nanos())
    }

    /// [`retry_after`](Decision::retry_after) in nanoseconds.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// assert_eq!(Decision::denied(1, 0, 3_000_000, 0).retry_after_nanos(), 3_000_000);
    /// ```
    #[inline]
    pub fn retry_after_nanos(&self) -> Nanos {
        self.delay_if(false)
    }

    /// The delay, if the call was allowed (its wait) or refused (its retry), as
    /// `allowed` asks; zero otherwise.
    #[inline]
    fn delay_if(&self, allowed: bool) -> Nanos {
        if self.is_allowed() == allowed {
            self.delay
        } else {
            0
        }
    }

    /// When the state will be fully replenished if no further call arrives.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use std::time::Duration;
    /// let d = Decision::allowed(100, 99, 600_000_000);
    /// assert_eq!(d.reset_after(), Duration::from_millis(600));
    /// ```
    #[inline]
    pub fn reset_after(&self) -> Duration {
        nanos_to_duration(self.reset_after)
    }

    /// [`reset_after`](Decision::reset_after) in nanoseconds.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// assert_eq!(Decision::allowed(100, 99, 600).reset_after_nanos(), 600);
    /// ```
    #[inline]
    pub fn reset_after_nanos(&self) -> Nanos {
        self.reset_after
    }

    /// Permits still available right after this call.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// assert_eq!(Decision::allowed(100, 99, 0).remaining(), 99);
    /// ```
    #[inline]
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// The capacity, in permits, of the limit that decided.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// assert_eq!(Decision::allowed(100, 99, 0).limit(), 100);
    /// ```
    #[inline]
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Which limit of a set decided (0 for a single limit). A set's limits are
    /// counted as leaf limits, depth first: a set nested in a set counts its own
    /// limits in its place, not as one, so the index is the limit's position among
    /// the set's [`limit_count`](crate::algorithms::Algorithm::limit_count) limits,
    /// the order in which
    /// [`reserve_each`](crate::algorithms::Algorithm::reserve_each) reports them.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// assert_eq!(Decision::allowed(100, 99, 0).limit_index(), 0);
    /// assert_eq!(Decision::allowed(100, 99, 0).with_limit_index(1).limit_index(), 1);
    /// ```
    ///
    /// In a nested set, the outer limit after a nested pair is limit 2:
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, AllOf, FixedWindow};
    /// use sluicegate::Decision;
    /// use std::time::Duration;
    /// let window = |limit, secs| FixedWindow::new(limit, Duration::from_secs(secs)).unwrap();
    /// let set = AllOf::new((AllOf::new((window(5, 1), window(4, 60))), window(3, 10)));
    /// let mut state = set.initial_state(0);
    /// for _ in 0..3 {
    ///     assert!(set.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
    /// }
    /// // The outer 3 per 10 s refuses the 4th: limit 2, after the nested pair.
    /// assert_eq!(set.reserve::<Decision>(&mut state, 0, 1, 0).limit_index(), 2);
    /// let later = 10_000_000_000;
    /// assert!(set.reserve::<Decision>(&mut state, later, 1, 0).is_allowed());
    /// // The minute's 4 are spent: the nested set's second limit refuses, limit 1.
    /// assert_eq!(set.reserve::<Decision>(&mut state, later, 1, 0).limit_index(), 1);
    /// ```
    #[inline]
    pub fn limit_index(&self) -> u32 {
        self.limit_index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_with_its_source_is_five_words() {
        assert_eq!(std::mem::size_of::<Decision>(), 5 * 8);
    }
}
