//! Several limits at once: `AllOf` (static) and `Limits` (dynamic), over the
//! crate's bursty limiters and fixed windows, and a toy sliding log of this file's
//! whose state owns heap memory.

use crate::support::virtual_time;
use virtual_time::assert_slept;

use sluicegate::algorithms::smooth_bursty::BurstyState;
use sluicegate::algorithms::{
    Algorithm, AllOf, Decision, FixedWindow, Limits, Plain, Receipt, Report, SmoothBursty,
    SmoothWarmingUp, Verdict,
};
use sluicegate::clock::{Clock, ManualClock, Nanos};
use sluicegate::{Error, RateLimiter};
use std::time::Duration;

pub(crate) const MS: Nanos = 1_000_000;
const SEC: Nanos = 1_000_000_000;

/// An exact sliding log: the times of admitted permits, newest last. Its state owns
/// heap memory, so a set asks it first and reserves in it only once every member
/// has allowed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SlidingLog {
    limit: u64,
    window: Nanos,
}

impl SlidingLog {
    pub(crate) fn new(limit: u64, window: Duration) -> Self {
        SlidingLog {
            limit,
            window: window.as_nanos() as Nanos,
        }
    }

    fn live<'a>(&self, log: &'a [Nanos], now: Nanos) -> impl Iterator<Item = &'a Nanos> + use<'a> {
        let window = self.window;
        log.iter().filter(move |&&t| t + window > now)
    }
}

impl Algorithm for SlidingLog {
    type State = Vec<Nanos>;
    type Shape = Plain;

    fn initial_state(&self, _now: Nanos) -> Vec<Nanos> {
        Vec::new()
    }

    fn reserve<R: Report>(
        &self,
        log: &mut Vec<Nanos>,
        now: Nanos,
        cost: u64,
        _max_wait: Nanos,
    ) -> R {
        let live = self.live(log, now).count() as u64;
        let remaining = self.limit.saturating_sub(live);
        let reset = self
            .live(log, now)
            .last()
            .map_or(0, |t| t + self.window - now);
        if cost > self.limit {
            return R::refused(|| Decision::never(self.limit, remaining, reset));
        }
        if cost > remaining {
            let need = (live + cost - self.limit) as usize;
            let frees = self.live(log, now).nth(need - 1).unwrap();
            let retry = frees + self.window - now;
            return R::refused(|| Decision::denied(self.limit, remaining, retry, reset));
        }
        log.retain(|&t| t + self.window > now);
        log.extend(std::iter::repeat_n(now, cost as usize));
        let grant = Decision::allowed(self.limit, remaining - cost, self.window);
        R::granted(|| grant, || Receipt::NONE)
    }

    fn is_replenished(&self, log: &Vec<Nanos>, now: Nanos) -> bool {
        self.live(log, now).next().is_none()
    }
}

/// Breaks the contract on purpose: its peek admits, its reserve refuses. Its state
/// owns heap memory, so a set peeks it in pass 1 and meets the refusal in pass 2.
#[derive(Clone, Copy, Debug)]
struct Liar;

impl Algorithm for Liar {
    type State = Vec<u8>;
    type Shape = Plain;
    fn initial_state(&self, _now: Nanos) -> Vec<u8> {
        Vec::new()
    }
    fn reserve<R: Report>(&self, _: &mut Vec<u8>, _now: Nanos, _cost: u64, _max_wait: Nanos) -> R {
        R::refused(|| Decision::denied(1, 0, SEC, SEC))
    }
    fn peek(&self, _: &Vec<u8>, _now: Nanos, _cost: u64) -> Decision {
        Decision::allowed(1, 0, 0)
    }
    fn is_replenished(&self, _: &Vec<u8>, _now: Nanos) -> bool {
        true
    }
}

pub(crate) fn per(limit: u64, secs: u64) -> FixedWindow {
    FixedWindow::new(limit, Duration::from_secs(secs)).unwrap()
}

pub(crate) fn bursty(rate: f64) -> SmoothBursty {
    SmoothBursty::new(rate).unwrap()
}

/// Seed 000's cadence: `rate` per second, nothing saved, so calls are at least
/// `1 / rate` apart.
pub(crate) fn cadence(rate: f64) -> SmoothBursty {
    bursty(rate).with_max_burst(Duration::ZERO).unwrap()
}

// ---------------------------------------------------------------------------------
// All or nothing

#[test]
fn a_refused_call_moves_no_member() {
    let set = AllOf::new((per(2, 1), per(5, 60), bursty(100.0)));
    let mut state = set.initial_state(0);
    assert!(set.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
    assert!(set
        .reserve::<Decision>(&mut state, 100 * MS, 1, 0)
        .is_allowed());

    let before = state.clone();
    let minute_left =
        |s: &<AllOf<(FixedWindow, FixedWindow, SmoothBursty)> as Algorithm>::State| {
            set.members()
                .1
                .peek(&s.members().1, 200 * MS, 1)
                .remaining()
        };
    assert_eq!(minute_left(&before), 2); // 5 - 2 taken - this 1
    for _ in 0..10 {
        let refused = set.reserve::<Decision>(&mut state, 200 * MS, 1, 0);
        assert_eq!(refused.verdict(), Verdict::Denied);
        assert_eq!(refused.limit_index(), 0);
        assert_eq!(refused.retry_after_nanos(), 800 * MS);
    }
    assert_eq!(state.members(), before.members());
    assert_eq!(minute_left(&state), 2);

    // A refusal by the last member leaves the earlier, admitting ones untouched too.
    let set = AllOf::new((per(10, 1), bursty(1.0)));
    let mut state = set.initial_state(0);
    assert!(set.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
    let before = state.clone();
    let refused = set.reserve::<Decision>(&mut state, 500 * MS, 1, 0);
    assert_eq!(
        (refused.limit_index(), refused.retry_after_nanos()),
        (1, 500 * MS)
    );
    assert_eq!(state.members(), before.members());
    assert_eq!(
        set.members()
            .0
            .peek(&state.members().0, 500 * MS, 1)
            .remaining(),
        8
    );
}

#[test]
fn the_refusal_names_the_limit_with_the_longest_retry_after() {
    let set = AllOf::new((per(1, 1), per(1, 10), per(5, 60)));
    let mut state = set.initial_state(0);
    assert!(set.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
    let refused = set.reserve::<Decision>(&mut state, 500 * MS, 1, 0);
    assert_eq!(refused.verdict(), Verdict::Denied);
    assert_eq!(refused.limit_index(), 1);
    assert_eq!(refused.retry_after(), Duration::from_millis(9_500));
    assert_eq!((refused.limit(), refused.remaining()), (1, 0));
    // reset_after: when the whole set is replenished (the minute window's end).
    assert_eq!(refused.reset_after(), Duration::from_millis(59_500));

    // On a tie the first refusing member is named.
    let set = AllOf::new((per(1, 10), per(1, 10)));
    let mut state = set.initial_state(0);
    set.reserve::<Decision>(&mut state, 0, 1, 0);
    assert_eq!(
        set.reserve::<Decision>(&mut state, SEC, 1, 0).limit_index(),
        0
    );
}

#[test]
fn never_from_any_member_makes_the_set_answer_never() {
    let set = AllOf::new((per(5, 1), per(3, 60)));
    let mut state = set.initial_state(0);
    let d = set.reserve::<Decision>(&mut state, 0, 4, 0);
    assert_eq!(d.verdict(), Verdict::Never);
    assert_eq!((d.limit_index(), d.limit()), (1, 3));
    assert_eq!(d.retry_after_nanos(), u64::MAX);

    // Never beats a denial that comes first and has a finite retry_after.
    set.reserve::<Decision>(&mut state, 0, 3, 0);
    let d = set.reserve::<Decision>(&mut state, 0, 4, 0);
    assert_eq!((d.verdict(), d.limit_index()), (Verdict::Never, 1));

    // Through the front end: blocking calls fail at once, without sleeping.
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(set, clock.clone());
    assert!(matches!(
        limiter.acquire_n(4),
        Err(Error::Never { cost: 4 })
    ));
    assert!(!limiter.try_acquire_n(4).unwrap());
    assert!(!limiter
        .try_acquire_n_timeout(4, Duration::from_secs(3600))
        .unwrap());
    assert!(clock.sleeps().is_empty());
    assert_eq!(clock.now(), 0);
}

#[test]
fn an_allowed_call_reports_the_longest_wait_and_the_tightest_member() {
    let set = AllOf::new((bursty(1.0), bursty(2.0), per(3, 60)));
    let mut state = set.initial_state(0);
    assert!(set.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
    let members = *state.members();
    let d = set.reserve::<Decision>(&mut state, 0, 1, u64::MAX);
    assert!(d.is_allowed());
    assert_eq!(d.wait(), Duration::from_secs(1)); // 1/s's wait, not 2/s's 0.5 s

    // Each field against what the members answer alone.
    let (mut a, mut b, mut c) = members;
    let da = set.members().0.reserve::<Decision>(&mut a, 0, 1, u64::MAX);
    let db = set.members().1.reserve::<Decision>(&mut b, 0, 1, u64::MAX);
    let dc = set.members().2.reserve::<Decision>(&mut c, 0, 1, u64::MAX);
    assert_eq!(
        (da.wait_nanos(), db.wait_nanos(), dc.wait_nanos()),
        (SEC, SEC / 2, 0)
    );
    assert_eq!(*state.members(), (a, b, c));
    let reset = da
        .reset_after_nanos()
        .max(db.reset_after_nanos())
        .max(dc.reset_after_nanos());
    assert_eq!(d.reset_after_nanos(), reset);
    assert_eq!(reset, 60 * SEC);
    // Fewest remaining: the Guava members have none stored; the first of them is named.
    assert_eq!((da.remaining(), db.remaining(), dc.remaining()), (0, 0, 1));
    assert_eq!((d.limit_index(), d.remaining(), d.limit()), (0, 0, 1));

    // With a 100-permit burst saved, the window is the tightest.
    let set = AllOf::new((bursty(100.0), per(3, 60)));
    let mut state = set.initial_state(0);
    let d = set.reserve::<Decision>(&mut state, 10 * SEC, 1, 0);
    assert_eq!((d.limit_index(), d.remaining(), d.limit()), (1, 2, 3));
}

#[test]
fn an_empty_set_limits_nothing() {
    let limits = Limits::new();
    assert!(limits.is_empty());
    let mut state = limits.initial_state(0);
    for _ in 0..1000 {
        let d = limits.reserve::<Decision>(&mut state, 0, u64::MAX, 0);
        assert!(d.is_allowed());
        assert_eq!(d.remaining(), u64::MAX);
    }
    assert!(limits.is_replenished(&state, 0));
}

// ---------------------------------------------------------------------------------
// Seeds

/// Seed 002: 10/s, 120/min and 240/h, counting only admitted calls. A client that
/// tries 15 times a second (and then keeps hammering) gets exactly 10 a second until
/// the minute is spent, 120 in each of two minutes, and nothing more in the hour.
fn seed_002_trace<A: Algorithm>(set: &A, index_of: impl Fn(u32) -> u32) -> Vec<Nanos> {
    let mut state = set.initial_state(0);
    let mut admitted = Vec::new();
    let mut attempt = |t: Nanos, state: &mut A::State| {
        let d: Decision = set.reserve(state, t, 1, 0);
        if d.is_allowed() {
            admitted.push(t);
        }
        d
    };
    // Minute 0: 12 seconds of 10 admitted and 5 refused by the per-second limit.
    for s in 0..12 {
        for k in 0..15 {
            let d = attempt(s * SEC + k * MS, &mut state);
            if k >= 10 && s < 11 {
                assert_eq!(index_of(d.limit_index()), 0);
                assert_eq!(d.retry_after_nanos(), SEC - k * MS);
            } else if k >= 10 {
                // The 120th call spent the minute too: its wait is the longer one.
                assert_eq!(index_of(d.limit_index()), 1);
                assert_eq!(d.retry_after_nanos(), 49 * SEC - k * MS);
            } else {
                assert!(d.is_allowed(), "second {s}, call {k}");
            }
        }
    }
    // The minute is spent: refused by the per-minute limit until minute 1, however
    // hard the client hammers; the per-second counter does not move meanwhile.
    for s in 12..60 {
        for k in 0..100 {
            let d = attempt(s * SEC + k * MS, &mut state);
            assert_eq!(d.verdict(), Verdict::Denied);
            assert_eq!(index_of(d.limit_index()), 1);
            assert_eq!(d.retry_after_nanos(), 60 * SEC - s * SEC - k * MS);
        }
    }
    // Minute 1 admits another 120, which spends the hour.
    for s in 60..72 {
        for k in 0..10 {
            assert!(attempt(s * SEC + k * MS, &mut state).is_allowed());
        }
    }
    let d = attempt(120 * SEC, &mut state);
    assert_eq!(index_of(d.limit_index()), 2);
    assert_eq!(d.retry_after(), Duration::from_secs(3480));
    assert_eq!(d.remaining(), 0);
    // The next hour starts afresh.
    assert!(attempt(3600 * SEC, &mut state).is_allowed());
    admitted
}

#[test]
fn seed_002_ten_per_second_120_per_minute_240_per_hour() {
    let in_order = AllOf::new((per(10, 1), per(120, 60), per(240, 3600)));
    let admitted = seed_002_trace(&in_order, |i| i);
    assert_eq!(admitted.len(), 241);

    // Seed 002: with the limits listed the other way round, counting refused calls
    // would give a different (worse) answer; counting only admitted calls, the order
    // changes nothing but the indices.
    let reversed = AllOf::new((per(240, 3600), per(120, 60), per(10, 1)));
    assert_eq!(seed_002_trace(&reversed, |i| 2 - i), admitted);

    // The dynamic set gives the same answers.
    let limits = Limits::new()
        .with(per(10, 1))
        .with(per(120, 60))
        .with(per(240, 3600));
    assert_eq!(seed_002_trace(&limits, |i| i), admitted);
}

#[test]
fn seed_002_the_hour_counts_only_admitted_calls() {
    let set = AllOf::new((per(10, 1), per(120, 60), per(240, 3600)));
    let mut state = set.initial_state(0);
    for k in 0..1000 {
        set.reserve::<Decision>(&mut state, k * MS, 1, 0);
    }
    // 1000 attempts, 10 admitted: the minute and the hour each counted 10.
    let (_, minute, hour) = state.members();
    assert_eq!(set.members().1.count(minute, 999 * MS), 10);
    assert_eq!(set.members().2.count(hour, 999 * MS), 10);
    assert_eq!(set.members().2.peek(hour, SEC, 1).remaining(), 229);
}

/// Seed 000: "a given endpoint might have limits of 100 requests per minute, and 2
/// requests per second", which enforces a minimum distance between two calls.
#[test]
fn seed_000_minimum_distance_is_a_second_limit() {
    let set = AllOf::new((per(100, 60), cadence(2.0)));
    let mut state = set.initial_state(0);
    let mut admitted = Vec::new();
    // A client that tries every 100 ms for 70 s.
    for step in 0..700 {
        let t = step * 100 * MS;
        let d = set.reserve::<Decision>(&mut state, t, 1, 0);
        if d.is_allowed() {
            admitted.push(t);
        } else if t < 49_500 * MS {
            // Between two admitted calls: the cadence refuses until the next 0.5 s.
            assert_eq!(d.limit_index(), 1);
            assert_eq!(d.retry_after_nanos(), 500 * MS - t % (500 * MS));
        } else if t < 60 * SEC {
            // 100 calls by 49.5 s: the minute refuses until it ends (the cadence
            // refuses too, but for less long).
            assert_eq!(d.limit_index(), 0);
            assert_eq!(d.retry_after_nanos(), 60 * SEC - t);
        }
    }
    let first_minute: Vec<Nanos> = admitted.iter().copied().filter(|&t| t < 60 * SEC).collect();
    assert_eq!(
        first_minute,
        (0..100).map(|k| k * 500 * MS).collect::<Vec<_>>()
    );
    assert!(admitted.windows(2).all(|w| w[1] - w[0] >= 500 * MS));
    assert_eq!(admitted[100], 60 * SEC);
    assert_eq!(admitted.len(), 120);
}

// ---------------------------------------------------------------------------------
// Through the front end, on virtual time

#[test]
fn blocking_acquire_waits_for_every_member() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(AllOf::new((bursty(5.0), per(3, 10))), clock.clone());
    for _ in 0..4 {
        limiter.acquire().unwrap();
    }
    // 5/s paces the first three; the window is then spent until 10 s, so the fourth
    // sleeps 9.6 s (the window's retry_after) and is then admitted at once.
    assert_slept(&clock, &[0.0, 0.2, 0.2, 9.6, 0.0]);
    assert_eq!(clock.now(), 10 * SEC);
    // 5/s has a full burst saved again: the window's last two permits go at once.
    assert!(limiter.try_acquire());
    assert!(limiter.try_acquire());
    let refused = limiter.check(1).unwrap();
    assert_eq!(refused.limit_index(), 1);
    assert_eq!(refused.retry_after(), Duration::from_secs(10));
}

#[test]
fn async_acquire_waits_for_every_member() {
    let clock = ManualClock::new();
    let set = Limits::new().with(bursty(5.0)).with(per(3, 10));
    let limiter = RateLimiter::with_clock(set, clock.clone()).to_async();
    futures::executor::block_on(async {
        for _ in 0..4 {
            limiter.acquire().await.unwrap();
        }
    });
    assert_slept(&clock, &[0.0, 0.2, 0.2, 9.6, 0.0]);
}

#[test]
fn a_timed_try_needs_every_member_within_the_timeout() {
    let set = AllOf::new((bursty(1.0), bursty(2.0)));
    let mut state = set.initial_state(0);
    assert!(set.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
    let before = *state.members();

    // 2/s could grant within 0.7 s, 1/s could not: nothing is reserved anywhere.
    let refused = set.reserve::<Decision>(&mut state, 0, 1, 700 * MS);
    assert_eq!(refused.verdict(), Verdict::Denied);
    assert_eq!(
        (refused.limit_index(), refused.retry_after_nanos()),
        (0, SEC)
    );
    assert_eq!(*state.members(), before);

    // Within 1 s both can: the grant waits the longer wait, each member books its slot.
    let granted = set.reserve::<Decision>(&mut state, 0, 1, SEC);
    assert_eq!(granted.wait_nanos(), SEC);
    let (mut one, mut two) = before;
    set.members().0.reserve::<Decision>(&mut one, 0, 1, SEC);
    set.members().1.reserve::<Decision>(&mut two, 0, 1, SEC);
    assert_eq!(*state.members(), (one, two));

    // The same through the limiter.
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(set, clock.clone());
    limiter.acquire().unwrap();
    assert!(!limiter.try_acquire_timeout(Duration::from_millis(700)));
    assert!(limiter.try_acquire_timeout(Duration::from_secs(1)));
    assert_slept(&clock, &[0.0, 1.0]);
}

// ---------------------------------------------------------------------------------
// Cancel

#[test]
fn cancel_gives_back_every_members_permits() {
    let set = AllOf::new((
        bursty(1.0),
        SmoothWarmingUp::new(2.0, Duration::ZERO).unwrap(),
    ));
    let mut state = set.initial_state(0);
    set.reserve::<Decision>(&mut state, 0, 1, 0);
    let before = *state.members();
    let (grant, grant_receipt) = set.reserve::<(Decision, Receipt)>(&mut state, 0, 1, u64::MAX);
    assert_eq!(grant.wait_nanos(), SEC);
    assert_ne!(*state.members(), before);
    set.cancel(&mut state, 100 * MS, &grant_receipt, grant.wait_nanos());
    assert_eq!(*state.members(), before);
    // Callers cancel a receipt once (a `Reservation` is consumed by its cancel), as
    // on a single limit: the set keeps no record of its grants to refuse a second.

    // Through a reservation: the next caller waits 1 s, not 2 s.
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(set, clock.clone());
    limiter.acquire().unwrap();
    let r = limiter.reserve(1).unwrap();
    assert_eq!(r.delay(), Duration::from_secs(1));
    r.cancel();
    assert_eq!(limiter.reserve(1).unwrap().delay(), Duration::from_secs(1));
}

#[test]
fn cancel_restores_nothing_for_an_older_grant_or_one_that_acted() {
    let set = Limits::new().with(bursty(1.0)).with(bursty(2.0));
    let mut state = set.initial_state(0);
    let (first, first_receipt) = set.reserve::<(Decision, Receipt)>(&mut state, 0, 1, u64::MAX);
    let (second, second_receipt) = set.reserve::<(Decision, Receipt)>(&mut state, 0, 1, u64::MAX);
    let (third, third_receipt) = set.reserve::<(Decision, Receipt)>(&mut state, 0, 1, u64::MAX);
    let snapshot = |s: &sluicegate::algorithms::LimitsState| {
        (
            *s.member::<BurstyState>(0).unwrap(),
            *s.member::<BurstyState>(1).unwrap(),
        )
    };
    let after = snapshot(&state);
    // An older grant: the set no longer knows its members' marks.
    set.cancel(&mut state, 0, &second_receipt, second.wait_nanos());
    assert_eq!(snapshot(&state), after);
    // The first grant (wait 0), cancelled at its instant of acting: Go's rule would
    // restore it, but it is older than the last grant too, so nothing comes back.
    set.cancel(&mut state, 0, &first_receipt, first.wait_nanos());
    assert_eq!(snapshot(&state), after);
    // The last one, once its time to act has passed: nothing either.
    set.cancel(&mut state, 2 * SEC + 1, &third_receipt, third.wait_nanos());
    assert_eq!(snapshot(&state), after);
    // Before that, it comes back from both members.
    set.cancel(&mut state, SEC, &third_receipt, third.wait_nanos());
    assert_ne!(snapshot(&state), after);
    assert_eq!(
        set.reserve::<Decision>(&mut state, SEC, 1, u64::MAX)
            .wait_nanos(),
        SEC
    );
}

#[test]
fn a_member_that_breaks_its_contract_is_undone() {
    // Liar's peek admits but its reserve refuses: pass 2 meets a refusal after the
    // plain members were charged in pass 1, and puts their saved states back.
    let set = AllOf::new((bursty(1.0), per(5, 1), Liar));
    let mut state = set.initial_state(0);
    let before = state.members().clone();
    let d = set.reserve::<Decision>(&mut state, 0, 1, 0);
    assert_eq!((d.verdict(), d.limit_index()), (Verdict::Denied, 2));
    assert_eq!(*state.members(), before);
    assert_eq!(set.members().1.count(&state.members().1, 0), 0);

    let limits = Limits::new().with(bursty(1.0)).with(Liar);
    let mut state = limits.initial_state(5 * SEC);
    let before = *state.member::<BurstyState>(0).unwrap();
    let d = limits.reserve::<Decision>(&mut state, 5 * SEC, 1, 0);
    assert_eq!((d.verdict(), d.limit_index()), (Verdict::Denied, 1));
    assert_eq!(*state.member::<BurstyState>(0).unwrap(), before);
}

// ---------------------------------------------------------------------------------
// The dynamic set

#[test]
fn a_state_from_another_set_answers_never_without_panicking() {
    let two = Limits::new().with(bursty(1.0)).with(per(1, 1));
    let three = two.clone().with(per(1, 1));
    let mut foreign = two.initial_state(0);
    assert!(three.reserve::<Decision>(&mut foreign, 0, 1, 0).is_never());
    assert!(three.peek(&foreign, 0, 1).is_never());
    assert!(three.is_replenished(&foreign, 0));

    // Same length, wrong member types.
    let swapped = Limits::new().with(per(1, 1)).with(bursty(1.0));
    assert!(swapped
        .reserve::<Decision>(&mut foreign, 0, 1, 0)
        .is_never());
    assert!(swapped.peek(&foreign, 0, 1).is_never());
}

#[test]
fn limits_nest_and_run_under_the_limiter() {
    let inner = AllOf::new((per(2, 1), per(3, 10)));
    let set = Limits::new().with(inner).with(cadence(10.0));
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(set, clock.clone());
    let mut admitted = 0;
    for _ in 0..100 {
        if limiter.try_acquire() {
            admitted += 1;
        }
        clock.advance(Duration::from_millis(50));
    }
    assert_eq!(admitted, 3); // the inner 3 per 10 s binds over 5 s
    let d = limiter.peek(1).unwrap();
    assert_eq!(d.limit_index(), 1); // the inner set's second limit, counted in place
    assert_eq!(d.retry_after(), Duration::from_secs(5));
}
