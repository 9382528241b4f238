//! What each limit of an algorithm or a set allows, as a `RateLimit-Policy` states
//! it: a quota of permits per window.

use super::policy::Policy;
use crate::algorithms::{
    Algorithm, AllOf, FixedWindow, LeakyBucket, SlidingLog, SlidingWindowBuckets,
    SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use std::time::Duration;

/// An algorithm that can state its limits as quotas: `(permits, window)` per limit,
/// in order (one for a single limit, one per member for a set, a nested set's
/// members in place). What the server layer's `RateLimit-Policy` advertises, via
/// [`Policy::describe`].
///
/// | algorithm | quota | window |
/// |---|---|---|
/// | [`FixedWindow`], [`SlidingWindowCounter`], [`SlidingWindowBuckets`], [`SlidingLog`] | the limit | the window |
/// | [`LeakyBucket`] | the capacity | the time to drain a full bucket |
/// | [`SmoothBursty`] | the burst (at least 1) | the time to save it up |
/// | [`SmoothWarmingUp`] | one second of the stable rate (at least 1) | 1 s |
/// | [`AllOf`] | each member's | each member's |
///
/// It is sealed: implemented by the crate's algorithms and their [`AllOf`] sets,
/// whose quotas the table states, and not implementable outside the crate. A
/// dynamic set ([`Limits`](crate::algorithms::Limits)) holds its members behind a
/// trait object and cannot say, and an algorithm of your own has no quotas here: the
/// server layer runs either all the same, and you name their policies with
/// [`Policy::new`] (see [`RateLimitHeaders::policies`](super::RateLimitHeaders::policies)).
///
/// ```
/// use sluicegate::adapters::server::Quotas;
/// use sluicegate::algorithms::{AllOf, FixedWindow, SmoothBursty};
/// use std::time::Duration;
/// let set = AllOf::new((SmoothBursty::new(10.0).unwrap(), FixedWindow::new(100, Duration::from_secs(60)).unwrap()));
/// assert_eq!(set.quotas(), [(10, Duration::from_secs(1)), (100, Duration::from_secs(60))]);
/// ```
///
/// An algorithm of another crate cannot implement it:
///
/// ```compile_fail,E0277
/// use sluicegate::adapters::server::Quotas;
/// use sluicegate::algorithms::{Algorithm, Decision, Plain, Receipt, Report};
/// use std::time::Duration;
/// struct Always;
/// # impl Algorithm for Always {
/// #     type State = ();
/// #     type Shape = Plain;
/// #     fn initial_state(&self, _now: u64) {}
/// #     fn reserve<R: Report>(&self, _: &mut (), _now: u64, _cost: u64, _max_wait: u64) -> R {
/// #         R::granted(|| Decision::allowed(u64::MAX, u64::MAX, 0), || Receipt::NONE)
/// #     }
/// #     fn is_replenished(&self, _: &(), _now: u64) -> bool {
/// #         true
/// #     }
/// # }
/// impl Quotas for Always { // the trait bound `Always: Sealed` is not satisfied
///     fn push_quotas(&self, out: &mut Vec<(u64, Duration)>) {
///         out.push((u64::MAX, Duration::from_secs(1)));
///     }
/// }
/// ```
pub trait Quotas: Algorithm + sealed::Sealed {
    /// `(permits, window)` for each limit, in order: one item for a single limit,
    /// one per member for a set, a nested set's members in its place. Allocates the
    /// vector it answers.
    ///
    /// ```
    /// use sluicegate::adapters::server::Quotas;
    /// use sluicegate::algorithms::{AllOf, FixedWindow, LeakyBucket, SmoothBursty};
    /// use std::time::Duration;
    /// // 100 per minute, capacity 10: a full bucket drains in 6 s.
    /// let bucket = LeakyBucket::meter(10, 100, Duration::from_secs(60)).unwrap();
    /// assert_eq!(bucket.quotas(), [(10, Duration::from_secs(6))]);
    /// // An unlimited rate: at least 1 permit, in no time.
    /// assert_eq!(SmoothBursty::new(f64::INFINITY).unwrap().quotas(), [(1, Duration::ZERO)]);
    /// let minute = FixedWindow::new(100, Duration::from_secs(60)).unwrap();
    /// let hour = FixedWindow::new(1000, Duration::from_secs(3600)).unwrap();
    /// let nested = AllOf::new((AllOf::new((bucket, minute)), hour));
    /// assert_eq!(
    ///     nested.quotas(),
    ///     [(10, Duration::from_secs(6)), (100, Duration::from_secs(60)), (1000, Duration::from_secs(3600))],
    /// );
    /// ```
    fn quotas(&self) -> Vec<(u64, Duration)> {
        let mut out = Vec::new();
        self.push_quotas(&mut out);
        out
    }

    /// Appends this algorithm's quotas to `out` (what a set calls on its members),
    /// after what `out` holds, in the order [`quotas`](Quotas::quotas) answers
    /// them. Allocates only as `out` grows.
    ///
    /// ```
    /// use sluicegate::adapters::server::Quotas;
    /// use sluicegate::algorithms::{AllOf, FixedWindow, SmoothWarmingUp};
    /// use std::time::Duration;
    /// let mut out = vec![(1, Duration::from_secs(1))];
    /// // A warming-up limiter states one second of its stable rate.
    /// SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap().push_quotas(&mut out);
    /// let second = FixedWindow::new(10, Duration::from_secs(1)).unwrap();
    /// let minute = FixedWindow::new(100, Duration::from_secs(60)).unwrap();
    /// AllOf::new((second, minute)).push_quotas(&mut out);
    /// assert_eq!(
    ///     out,
    ///     [
    ///         (1, Duration::from_secs(1)),
    ///         (2, Duration::from_secs(1)),
    ///         (10, Duration::from_secs(1)),
    ///         (100, Duration::from_secs(60)),
    ///     ],
    /// );
    /// ```
    fn push_quotas(&self, out: &mut Vec<(u64, Duration)>);
}

/// The seal of [`Quotas`]: public in a private module, so no other crate can name
/// it, and only the algorithms below implement it.
mod sealed {
    pub trait Sealed {}
}

/// A quota from a float number of permits at `rate` per second: at least 1 permit,
/// and the time `rate` takes to give them (zero for an unlimited rate).
fn from_rate(permits: f64, rate: f64) -> (u64, Duration) {
    let permits = if permits.is_finite() {
        permits.floor().max(1.0)
    } else {
        1.0
    };
    let seconds = permits / rate;
    let window = Duration::try_from_secs_f64(seconds).unwrap_or(Duration::ZERO);
    (permits as u64, window)
}

/// A window algorithm's quota is its limit over its window.
macro_rules! window_quota {
    ($($algorithm:ty),* $(,)?) => {$(
        impl sealed::Sealed for $algorithm {}

        impl Quotas for $algorithm {
            fn push_quotas(&self, out: &mut Vec<(u64, Duration)>) {
                out.push((self.limit(), self.window()));
            }
        }
    )*};
}

window_quota!(
    FixedWindow,
    SlidingWindowCounter,
    SlidingWindowBuckets,
    SlidingLog
);

impl sealed::Sealed for LeakyBucket {}

impl Quotas for LeakyBucket {
    fn push_quotas(&self, out: &mut Vec<(u64, Duration)>) {
        let (nanos, per) = self.interval();
        let drain = u128::from(self.capacity()) * u128::from(nanos) / u128::from(per.max(1));
        let drain = u64::try_from(drain).unwrap_or(u64::MAX);
        out.push((self.capacity(), Duration::from_nanos(drain)));
    }
}

impl sealed::Sealed for SmoothBursty {}

impl Quotas for SmoothBursty {
    fn push_quotas(&self, out: &mut Vec<(u64, Duration)>) {
        out.push(from_rate(self.max_permits(), self.rate()));
    }
}

impl sealed::Sealed for SmoothWarmingUp {}

impl Quotas for SmoothWarmingUp {
    fn push_quotas(&self, out: &mut Vec<(u64, Duration)>) {
        out.push(from_rate(self.rate(), self.rate()));
    }
}

impl<A: Quotas, B: Quotas> sealed::Sealed for AllOf<(A, B)> {}

impl<A: Quotas, B: Quotas> Quotas for AllOf<(A, B)>
where
    AllOf<(A, B)>: Algorithm,
{
    fn push_quotas(&self, out: &mut Vec<(u64, Duration)>) {
        let (a, b) = self.members();
        a.push_quotas(out);
        b.push_quotas(out);
    }
}

impl<A: Quotas, B: Quotas, C: Quotas> sealed::Sealed for AllOf<(A, B, C)> {}

impl<A: Quotas, B: Quotas, C: Quotas> Quotas for AllOf<(A, B, C)>
where
    AllOf<(A, B, C)>: Algorithm,
{
    fn push_quotas(&self, out: &mut Vec<(u64, Duration)>) {
        let (a, b, c) = self.members();
        a.push_quotas(out);
        b.push_quotas(out);
        c.push_quotas(out);
    }
}

impl Policy {
    /// One policy per limit of `algorithm` ([`Quotas`]), named by `names` in order;
    /// a limit without a name is `"limit<index>"`. For a [`Limits`] set or an
    /// algorithm of your own, which state no quotas, build each policy with
    /// [`Policy::new`].
    ///
    /// A set nested in a set has its limits listed here in its place, depth
    /// first: the order in which the set reports its limits
    /// ([`Algorithm::reserve_each`](crate::algorithms::Algorithm::reserve_each))
    /// and in which a decision's [`limit_index`](crate::Decision::limit_index)
    /// counts them, on every store. So `RateLimit` item `i` is named by policy
    /// `i` however the set nests: `AllOf::new((AllOf::new((a, b)), c))` is served
    /// as `AllOf::new((a, b, c))` is.
    ///
    /// [`Limits`]: crate::algorithms::Limits
    ///
    /// ```
    /// use sluicegate::adapters::server::{Policy, RateLimitHeaders};
    /// use sluicegate::algorithms::{AllOf, FixedWindow, LeakyBucket};
    /// use std::time::Duration;
    /// let set = AllOf::new((
    ///     LeakyBucket::meter(3, 2, Duration::from_secs(1)).unwrap(),
    ///     FixedWindow::new(100, Duration::from_secs(3600)).unwrap(),
    /// ));
    /// let policies = Policy::describe(&set, ["burst"]);
    /// assert_eq!(policies[0].to_string(), r#""burst";q=3;w=2"#); // 1.5 s to drain, rounded up
    /// assert_eq!(policies[1].to_string(), r#""limit1";q=100;w=3600"#);
    /// let headers = RateLimitHeaders::new().policies(policies);
    /// ```
    pub fn describe<S: Into<String>>(
        algorithm: &impl Quotas,
        names: impl IntoIterator<Item = S>,
    ) -> Vec<Policy> {
        let mut names = names.into_iter();
        algorithm
            .quotas()
            .into_iter()
            .enumerate()
            .map(|(index, (quota, window))| {
                let name = names
                    .next()
                    .map_or_else(|| format!("limit{index}"), Into::into);
                Policy::new(name, quota, window)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_algorithm_states_its_quota() {
        let minute = Duration::from_secs(60);
        assert_eq!(FixedWindow::new(5, minute).unwrap().quotas(), [(5, minute)]);
        assert_eq!(
            SlidingWindowCounter::new(7, minute).unwrap().quotas(),
            [(7, minute)]
        );
        assert_eq!(SlidingLog::new(3, minute).unwrap().quotas(), [(3, minute)]);
        assert_eq!(
            SlidingWindowBuckets::dropping(9, minute, Duration::from_secs(6))
                .unwrap()
                .quotas(),
            [(9, minute)]
        );
        // 100 per minute, capacity 10: a full bucket drains in 6 s.
        assert_eq!(
            LeakyBucket::meter(10, 100, minute).unwrap().quotas(),
            [(10, Duration::from_secs(6))]
        );
        // Guava's default: 1 s of burst at 5 per second.
        assert_eq!(
            SmoothBursty::new(5.0).unwrap().quotas(),
            [(5, Duration::from_secs(1))]
        );
        // No saved burst: one permit per interval.
        let cadence = SmoothBursty::new(4.0)
            .unwrap()
            .with_max_burst(Duration::ZERO)
            .unwrap();
        assert_eq!(cadence.quotas(), [(1, Duration::from_millis(250))]);
        assert_eq!(
            SmoothBursty::new(f64::INFINITY).unwrap().quotas(),
            [(1, Duration::ZERO)]
        );
        assert_eq!(
            SmoothWarmingUp::new(2.0, Duration::from_secs(4))
                .unwrap()
                .quotas(),
            [(2, Duration::from_secs(1))]
        );
    }

    #[test]
    fn sets_list_their_members_in_order_and_nest() {
        let second = FixedWindow::new(10, Duration::from_secs(1)).unwrap();
        let minute = FixedWindow::new(100, Duration::from_secs(60)).unwrap();
        let hour = FixedWindow::new(1000, Duration::from_secs(3600)).unwrap();
        let nested = AllOf::new((AllOf::new((second, minute)), hour));
        assert_eq!(
            nested.quotas(),
            [
                (10, Duration::from_secs(1)),
                (100, Duration::from_secs(60)),
                (1000, Duration::from_secs(3600)),
            ]
        );
        let three = AllOf::new((second, minute, hour));
        assert_eq!(three.quotas(), nested.quotas());
    }
}
