//! An algorithm defined outside the crate, with public items only, runs in the direct
//! limiter, the keyed limiter (memory store), both kinds of multi-limit set and
//! (feature `tower`) behind the server layer, with nothing added to the crate:
//! implementing `Algorithm` with `type Shape = Plain` is all it takes. Its step is
//! run in the report each front end reads, building no more of a grant than that.

use sluicegate::algorithms::{
    Algorithm, AllOf, Decision, FixedWindow, Limits, Plain, Receipt, Report,
};
use sluicegate::clock::{Clock, ManualClock, Nanos};
use sluicegate::{Error, KeyedRateLimiter, RateLimiter};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const MS: Nanos = 1_000_000;

/// At most one call per `gap`: the state is the earliest time of the next call.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Spacing {
    gap: Nanos,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Next(Nanos);

impl Algorithm for Spacing {
    type State = Next;
    type Shape = Plain;

    fn initial_state(&self, _now: Nanos) -> Next {
        Next(0)
    }

    fn reserve<R: Report>(&self, state: &mut Next, now: Nanos, cost: u64, _max_wait: Nanos) -> R {
        if cost > 1 {
            return R::refused(|| Decision::never(1, 0, 0));
        }
        if now < state.0 {
            return R::refused(|| Decision::denied(1, 0, state.0 - now, state.0 - now));
        }
        *state = Next(now + self.gap);
        // The grant's decision is built only for a caller that reads it.
        R::granted(|| Decision::allowed(1, 0, self.gap), || Receipt::NONE)
    }

    fn is_replenished(&self, state: &Next, now: Nanos) -> bool {
        now >= state.0
    }
}

/// `total` permits, ever: nothing ever comes back.
#[derive(Clone, Copy, Debug)]
struct Budget {
    total: u64,
}

impl Algorithm for Budget {
    type State = u64;
    type Shape = Plain;

    fn initial_state(&self, _now: Nanos) -> u64 {
        0
    }

    fn reserve<R: Report>(&self, spent: &mut u64, _now: Nanos, cost: u64, _max_wait: Nanos) -> R {
        let remaining = self.total - *spent;
        let decision = if cost > remaining {
            // Nothing ever comes back, so waiting cannot help.
            Decision::never(self.total, remaining, u64::MAX)
        } else {
            *spent += cost;
            Decision::allowed(self.total, remaining - cost, u64::MAX)
        };
        // Both halves built: `decided` reports them as the caller asks.
        R::decided(decision, Receipt::NONE)
    }

    fn is_replenished(&self, spent: &u64, _now: Nanos) -> bool {
        *spent == 0
    }
}

#[test]
fn the_direct_limiter_runs_both() {
    let clock = ManualClock::new();
    let spacing = RateLimiter::with_clock(Spacing { gap: 100 * MS }, clock.clone());
    assert!(spacing.try_acquire());
    assert!(!spacing.try_acquire());
    assert_eq!(
        spacing.check(1).unwrap().retry_after(),
        Duration::from_millis(100)
    );
    spacing.acquire().unwrap();
    spacing.acquire().unwrap();
    // Each acquire sleeps the refusal's retry_after, then acts at once.
    assert_eq!(clock.take_sleeps_secs(), vec![0.1, 0.0, 0.1, 0.0]);
    assert_eq!(spacing.acquire_n(2), Err(Error::Never { cost: 2 }));

    let budget = RateLimiter::with_clock(Budget { total: 3 }, clock.clone());
    assert!(budget.try_acquire_n(2).unwrap());
    assert!(budget.try_acquire());
    assert!(!budget.try_acquire());
    assert_eq!(budget.acquire(), Err(Error::Never { cost: 1 }));
}

#[test]
fn the_keyed_limiter_keeps_one_state_per_key() {
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(Spacing { gap: 100 * MS }, clock.clone());
    clock.advance(Duration::from_secs(1));
    assert!(limiter.try_acquire(&"a"));
    assert!(!limiter.try_acquire(&"a"));
    assert!(limiter.try_acquire(&"b"));
    clock.advance(Duration::from_millis(100));
    assert!(limiter.try_acquire(&"a"));
    // Both keys at once, all-or-nothing: b is still spaced, so a is not charged.
    assert!(!limiter.check_all(&["a", "b"], 1).unwrap().is_allowed());
}

#[test]
fn sets_hold_it_next_to_the_crates_own_algorithms() {
    let window = FixedWindow::new(2, Duration::from_secs(1)).unwrap();
    let clock = ManualClock::new();
    let all_of = RateLimiter::with_clock(
        AllOf::new((Spacing { gap: 100 * MS }, window)),
        clock.clone(),
    );
    let limits = RateLimiter::with_clock(
        Limits::new().with(Spacing { gap: 100 * MS }).with(window),
        clock.clone(),
    );
    for set in [&all_of.check(1).unwrap(), &limits.check(1).unwrap()] {
        assert!(set.is_allowed());
    }
    // The spacing refuses the second call, and says so.
    let refused = limits.check(1).unwrap();
    assert_eq!(
        (refused.limit_index(), refused.retry_after()),
        (0, Duration::from_millis(100))
    );
    assert!(!all_of.try_acquire());
    clock.advance(Duration::from_millis(100));
    assert!(all_of.try_acquire() && limits.try_acquire());
    // The window's 2 per second is spent: now the window refuses, until 1 s.
    clock.advance(Duration::from_millis(100));
    let refused = limits.check(1).unwrap();
    assert_eq!(
        (refused.limit_index(), refused.retry_after()),
        (1, Duration::from_millis(800))
    );
    assert_eq!(clock.now(), 200 * MS);
}

/// One call per `gap`, like `Spacing`, counting how often its grants are
/// described and given receipts: the `Report` docs promise that a report runs
/// only the closures it reads.
#[derive(Clone)]
struct Counted {
    gap: Nanos,
    described: Arc<AtomicUsize>,
    receipted: Arc<AtomicUsize>,
}

impl Algorithm for Counted {
    type State = Next;
    type Shape = Plain;

    fn initial_state(&self, _now: Nanos) -> Next {
        Next(0)
    }

    fn reserve<R: Report>(&self, state: &mut Next, now: Nanos, _cost: u64, _max_wait: Nanos) -> R {
        if now < state.0 {
            return R::refused(|| Decision::denied(1, 0, state.0 - now, state.0 - now));
        }
        *state = Next(now + self.gap);
        R::granted(
            || {
                self.described.fetch_add(1, Ordering::Relaxed);
                Decision::allowed(1, 0, self.gap)
            },
            || {
                self.receipted.fetch_add(1, Ordering::Relaxed);
                Receipt::new(now as i64, 1)
            },
        )
    }

    fn is_replenished(&self, state: &Next, now: Nanos) -> bool {
        now >= state.0
    }
}

#[test]
fn each_front_end_builds_only_what_it_reads_of_a_grant() {
    let (described, receipted) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let counted = Counted {
        gap: 100 * MS,
        described: Arc::clone(&described),
        receipted: Arc::clone(&receipted),
    };
    let seen = || {
        (
            described.load(Ordering::Relaxed),
            receipted.load(Ordering::Relaxed),
        )
    };
    let clock = ManualClock::new();
    let direct = RateLimiter::with_clock(counted.clone(), clock.clone());
    let keyed = KeyedRateLimiter::with_clock(counted, clock.clone());

    // A try reads "granted" alone: nothing built.
    assert!(direct.try_acquire() && keyed.try_acquire(&"k"));
    assert_eq!(seen(), (0, 0));
    // A check reads the decision, not the receipt.
    clock.advance(Duration::from_millis(100));
    assert!(direct.check(1).unwrap().is_allowed());
    assert!(keyed.check(&"k", 1).unwrap().is_allowed());
    assert_eq!(seen(), (2, 0));
    // A reservation keeps the receipt to cancel it by.
    clock.advance(Duration::from_millis(100));
    let reservation = direct.reserve(1).unwrap();
    assert!(reservation.decision().is_allowed());
    assert_eq!(seen(), (3, 1));
    // A refusal is read in full by every report, and builds no grant.
    assert!(!direct.try_acquire());
    assert_eq!(seen(), (3, 1));
}

/// Behind the server layer: the layer needs nothing of an algorithm but its
/// decisions. `Quotas` is sealed, so the algorithm's policy is named by hand with
/// `Policy::new`, as the `Quotas` docs say, and the fields follow its decisions.
#[cfg(feature = "tower")]
#[test]
fn the_server_layer_runs_it_with_a_policy_named_by_hand() {
    use http::{Request, Response, StatusCode};
    use sluicegate::adapters::server::{Policy, RateLimitHeaders, ServerLayer};
    use tower::{service_fn, Layer, ServiceExt};

    let clock = ManualClock::new();
    let per_path = KeyedRateLimiter::with_clock(Spacing { gap: 2_000 * MS }, clock.clone());
    let app =
        service_fn(|_: Request<()>| async { Ok::<_, std::convert::Infallible>(Response::new(())) });
    let spacing = Policy::new("spacing", 1, Duration::from_secs(2));
    let server = ServerLayer::keyed(per_path, |r: &Request<()>| r.uri().path().to_owned())
        .headers(RateLimitHeaders::new().policies([spacing]))
        .layer(app);
    let ask = |path: &str| {
        let request = Request::get(path).body(()).unwrap();
        futures::executor::block_on(server.clone().oneshot(request)).unwrap()
    };

    let granted = ask("/a");
    assert_eq!(granted.status(), StatusCode::OK);
    assert_eq!(
        granted.headers()["ratelimit-policy"],
        r#""spacing";q=1;w=2"#
    );
    assert_eq!(granted.headers()["ratelimit"], r#""spacing";r=0;t=2"#);
    let refused = ask("/a");
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "2");
    // Another key has its own spacing; "/a" is spaced again 2 s later.
    assert_eq!(ask("/b").status(), StatusCode::OK);
    clock.advance(Duration::from_secs(2));
    assert_eq!(ask("/a").status(), StatusCode::OK);
}
