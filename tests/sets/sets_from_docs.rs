//! Sets of limits (`AllOf`, `Limits`) through the front ends a user reaches them by,
//! held to the documentation alone: the `multi` module's table of what a set
//! answers, `Decision::retry_after`'s rule, `check_each`'s standing reports, the
//! keyed `_all` calls, reservations and their cancels, and abandoned async waits,
//! on virtual time. Concurrent callers on the real clock are in
//! `sets_from_docs_concurrent`.

use crate::support::adapters::{poll_once, HeldClock};
use sluicegate::algorithms::{
    Algorithm, AllOf, FixedWindow, LeakyBucket, Limits, Receipt, SlidingLog, SlidingWindowCounter,
    SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::{ManualClock, Nanos};
use sluicegate::{Decision, Error, KeyedRateLimiter, RateLimiter, Verdict};
use std::time::Duration;

const SECOND: Nanos = 1_000_000_000;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn fw(limit: u64, window_secs: u64) -> FixedWindow {
    FixedWindow::new(limit, secs(window_secs)).unwrap()
}

/// The fields the `multi` module's table speaks of.
fn row(d: &Decision) -> (Verdict, u32, u64, u64, Nanos, Nanos, Nanos) {
    (
        d.verdict(),
        d.limit_index(),
        d.limit(),
        d.remaining(),
        d.retry_after_nanos(),
        d.wait_nanos(),
        d.reset_after_nanos(),
    )
}

/// `multi`'s table, row "allowed": "the limit with the fewest `remaining` (first on
/// a tie)", `retry_after` 0, `reset_after` "longest of all members"; row "denied":
/// "the refusing limit with the longest `retry_after` (first on a tie)"; row
/// "never": "the first limit that answered never", `retry_after` `u64::MAX` ns,
/// and "never beats denied".
#[test]
fn the_keyed_check_answers_each_verdict_by_the_sets_table() {
    let limits = Limits::new().with(fw(3, 10)).with(fw(2, 60)).with(fw(1, 5));
    let limiter = KeyedRateLimiter::with_clock(limits, ManualClock::new());
    let k = "k";
    // Remaining 2, 1, 0: the third is tightest; the minute resets last.
    let first = limiter.check(k, 1).unwrap();
    assert_eq!(row(&first), (Verdict::Allowed, 2, 1, 0, 0, 0, 60 * SECOND));
    // Cost 2: #0 would grant, #1 denies (60 s), #2 can never hold 2: never wins.
    let never = limiter.check(k, 2).unwrap();
    assert_eq!(never.verdict(), Verdict::Never);
    assert_eq!((never.limit_index(), never.limit()), (2, 1));
    assert_eq!(never.retry_after_nanos(), u64::MAX);
    assert_eq!(
        (never.wait_nanos(), never.reset_after_nanos()),
        (0, 60 * SECOND)
    );
    // Cost 3: #0 denies, #1 and #2 answer never: the first of them.
    let first_never = limiter.check(k, 3).unwrap();
    assert_eq!(
        (first_never.verdict(), first_never.limit_index()),
        (Verdict::Never, 1)
    );
    assert_eq!(first_never.limit(), 2);
    // Cost 1: only #2 refuses, until its 5 s window ends.
    let denied = limiter.check(k, 1).unwrap();
    assert_eq!(
        row(&denied),
        (Verdict::Denied, 2, 1, 0, 5 * SECOND, 0, 60 * SECOND)
    );
    // Nothing of the refusals was counted: #0 still has 2, #1 still 1.
    let mut each = Vec::new();
    limiter.clock().advance(secs(5));
    let granted = limiter
        .check_each(k, 1, &mut |d| each.push(d.remaining()))
        .unwrap();
    assert!(granted.is_allowed());
    assert_eq!(each, [1, 0, 0]);

    // Ties: two members refusing with the same retry_after name the first; two
    // allowing with the same remaining name the first.
    let ties = AllOf::new((fw(9, 1), fw(4, 10), fw(4, 10)));
    let tied = KeyedRateLimiter::with_clock(ties, ManualClock::new());
    let allowed = tied.check(&1u8, 2).unwrap();
    assert_eq!(
        row(&allowed),
        (Verdict::Allowed, 1, 4, 2, 0, 0, 10 * SECOND)
    );
    tied.check(&1u8, 2).unwrap();
    let refused = tied.check(&1u8, 1).unwrap();
    assert_eq!(
        row(&refused),
        (Verdict::Denied, 1, 4, 0, 10 * SECOND, 0, 10 * SECOND)
    );

    // Two refusers with different retries: the longer one, wherever it stands.
    let apart =
        KeyedRateLimiter::with_clock(AllOf::new((fw(1, 60), fw(1, 10))), ManualClock::new());
    apart.check(&0u8, 1).unwrap();
    let longest = apart.check(&0u8, 1).unwrap();
    assert_eq!(
        row(&longest),
        (Verdict::Denied, 0, 1, 0, 60 * SECOND, 0, 60 * SECOND)
    );
}

/// README: "A refused call is counted by none"; `Decision::retry_after`: "the least
/// `s` such that the same cost, asked again at `now + s` ... would be granted".
/// For a set of members of different algorithms and windows, the refusal's
/// `retry_after` is the first instant the whole set passes: a nanosecond earlier
/// it still refuses.
#[test]
fn a_refused_sets_retry_after_is_the_first_instant_every_member_admits() {
    let limits = Limits::new()
        .with(FixedWindow::new(4, Duration::from_millis(3_000)).unwrap())
        .with(SlidingLog::new(6, secs(10)).unwrap())
        .with(LeakyBucket::meter(3, 1, Duration::from_millis(700)).unwrap())
        .with(SlidingWindowCounter::new(5, secs(4)).unwrap());
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(limits, clock.clone());
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let (mut refusals, mut by_member) = (0, [0usize; 4]);
    for _ in 0..400 {
        clock.advance_nanos(next(900) * 1_000_000 + next(1_000));
        let cost = 1 + next(3);
        let d = limiter.check(&"k", cost).unwrap();
        assert!(!d.is_never(), "cost {cost} fits every member");
        if d.is_allowed() {
            continue;
        }
        refusals += 1;
        by_member[d.limit_index() as usize] += 1;
        let retry = d.retry_after_nanos();
        assert!(retry > 0);
        clock.advance_nanos(retry - 1);
        let early = limiter.peek(&"k", cost).unwrap();
        assert!(
            !early.is_allowed(),
            "allowed 1 ns before retry_after {retry}: {early:?}"
        );
        clock.advance_nanos(1);
        let on_time = limiter.peek(&"k", cost).unwrap();
        assert!(
            on_time.is_allowed(),
            "refused at retry_after {retry}: {on_time:?}"
        );
    }
    assert!(refusals > 50, "{refusals}");
    assert!(
        by_member.iter().filter(|&&n| n > 0).count() >= 3,
        "{by_member:?}"
    );
}

/// README: "A cost above a limit's capacity is answered `Verdict::Never`, and
/// acquires fail at once with `Error::Never` instead of hanging"; a set answers
/// never when "some member can never grant the cost", and a refusal consumes
/// nothing in any member, through every front end.
#[test]
fn a_member_that_can_never_grant_makes_every_front_end_refuse_at_once() {
    let set = || AllOf::new((SmoothBursty::new(10.0).unwrap(), fw(5, 1)));
    let clock = ManualClock::new();
    let direct = RateLimiter::with_clock(set(), clock.clone());
    assert!(direct.check(6).unwrap().is_never());
    assert_eq!(direct.check(6).unwrap().limit_index(), 1);
    assert!(!direct.try_acquire_n(6).unwrap());
    assert!(!direct.try_acquire_n_timeout(6, secs(3600)).unwrap());
    assert!(matches!(direct.acquire_n(6), Err(Error::Never { .. })));
    let r = direct.reserve(6).unwrap();
    assert!(!r.is_ok() && r.decision().is_never());
    let mut each = Vec::new();
    assert!(direct
        .check_each(6, &mut |d| each.push(d))
        .unwrap()
        .is_never());
    assert_eq!(each.len(), 2);
    assert!(each[1].is_never(), "{each:?}");
    assert!(
        each[0].is_allowed(),
        "the bursty member would grant: {each:?}"
    );
    // Nothing was taken: the whole window and the bursty member's free first call.
    let all = direct.check(5).unwrap();
    assert!(all.is_allowed() && all.wait().is_zero(), "{all:?}");
    assert_eq!(clock.take_sleeps_secs(), Vec::<f64>::new());

    let keyed = KeyedRateLimiter::with_clock(set(), clock.clone());
    assert!(keyed.check(&"k", 6).unwrap().is_never());
    assert!(matches!(keyed.acquire_n(&"k", 6), Err(Error::Never { .. })));
    assert!(keyed.reserve(&"k", 6).unwrap().decision().is_never());
    assert!(keyed.check_all(&["j", "k"], 6).unwrap().is_never());
    assert!(keyed
        .reserve_all(&["j", "k"], 6)
        .unwrap()
        .decision()
        .is_never());
    assert!(matches!(
        keyed.acquire_all(&["j", "k"], 6),
        Err(Error::Never { .. })
    ));
    let handle = keyed.to_async();
    futures::executor::block_on(async {
        assert!(matches!(
            handle.acquire_n(&"k", 6).await,
            Err(Error::Never { .. })
        ));
        assert!(handle.check(&"k", 6).await.unwrap().is_never());
    });
    assert_eq!(keyed.live_keys(), 0, "a refused call creates no key");
    assert!(keyed.check_all(&["j", "k"], 5).unwrap().is_allowed());
    assert_eq!(clock.take_sleeps_secs(), Vec::<f64>::new());
}

/// README: "Bad input never panics: ... a call an `Error` (0 permits ...)"; a set's
/// calls are no exception. An empty `Limits` "admits every call, of any cost".
#[test]
fn zero_cost_is_an_error_and_an_empty_set_admits_the_largest_cost() {
    let set = AllOf::new((fw(5, 1), SlidingLog::new(5, secs(1)).unwrap()));
    let direct = RateLimiter::with_clock(set, ManualClock::new());
    let zero = |r: Result<Decision, Error>| assert!(matches!(r, Err(Error::ZeroCost)), "{r:?}");
    zero(direct.check(0));
    zero(direct.peek(0));
    zero(direct.check_each(0, &mut |_| {}));
    assert!(matches!(direct.reserve(0), Err(Error::ZeroCost)));
    assert!(matches!(direct.acquire_n(0), Err(Error::ZeroCost)));
    assert!(matches!(direct.try_acquire_n(0), Err(Error::ZeroCost)));
    let keyed = KeyedRateLimiter::with_clock(set, ManualClock::new());
    zero(keyed.check(&"k", 0));
    zero(keyed.peek(&"k", 0));
    zero(keyed.check_each(&"k", 0, &mut |_| {}));
    zero(keyed.check_all(&["k", "j"], 0));
    zero(keyed.peek_all(&["k", "j"], 0));
    assert!(matches!(keyed.reserve_all(&["k"], 0), Err(Error::ZeroCost)));
    assert!(matches!(keyed.acquire_all(&["k"], 0), Err(Error::ZeroCost)));
    assert!(matches!(
        futures::executor::block_on(keyed.to_async().acquire_n(&"k", 0)),
        Err(Error::ZeroCost)
    ));
    assert_eq!(keyed.live_keys(), 0);
    assert!(
        direct.check(5).unwrap().is_allowed(),
        "errors consumed nothing"
    );

    let empty = KeyedRateLimiter::with_clock(Limits::new(), ManualClock::new());
    for d in [
        empty.check(&"k", u64::MAX).unwrap(),
        empty.check_all(&["k", "j"], u64::MAX).unwrap(),
        RateLimiter::with_clock(Limits::new(), ManualClock::new())
            .check(u64::MAX)
            .unwrap(),
    ] {
        assert!(d.is_allowed(), "{d:?}");
        assert_eq!((d.limit(), d.remaining()), (u64::MAX, u64::MAX));
    }
}

/// The largest cost on a set of every algorithm: never (some member cannot hold
/// it), named by "the first limit that answered never", without a panic, and
/// nothing taken from any member.
#[test]
fn the_largest_cost_on_a_set_of_every_algorithm_is_never_and_takes_nothing() {
    let members: Vec<Box<dyn Fn(Limits) -> Limits>> = vec![
        Box::new(|l| l.with(SmoothBursty::new(5.0).unwrap())),
        Box::new(|l| l.with(SmoothWarmingUp::new(5.0, secs(2)).unwrap())),
        Box::new(|l| l.with(LeakyBucket::queue(4, 2, secs(1)).unwrap())),
        Box::new(|l| l.with(LeakyBucket::meter(4, 2, secs(1)).unwrap())),
        Box::new(|l| l.with(fw(7, 2))),
        Box::new(|l| l.with(SlidingWindowCounter::new(7, secs(2)).unwrap())),
        Box::new(|l| l.with(SlidingLog::new(7, secs(2)).unwrap())),
    ];
    // Which member answers never on its own, asked the same question alone.
    let alone: Vec<bool> = members
        .iter()
        .map(|add| {
            let one = RateLimiter::with_clock(add(Limits::new()), ManualClock::new());
            one.peek(u64::MAX).unwrap().is_never()
        })
        .collect();
    let first_never = alone
        .iter()
        .position(|&n| n)
        .expect("a window cannot hold u64::MAX");
    let set = members.iter().fold(Limits::new(), |l, add| add(l));
    let clock = ManualClock::new();
    clock.advance(secs(3));
    let limiter = KeyedRateLimiter::with_clock(set.clone(), clock.clone());
    let reference = KeyedRateLimiter::with_clock(set, clock.clone());
    for cost in [u64::MAX, u64::MAX / 2, 1 << 53] {
        let d = limiter.check(&"k", cost).unwrap();
        assert!(d.is_never(), "cost {cost}: {d:?}");
        if cost == u64::MAX {
            assert_eq!(d.limit_index() as usize, first_never, "{alone:?}");
        }
        assert!(limiter.reserve(&"k", cost).unwrap().decision().is_never());
    }
    assert_eq!(limiter.live_keys(), 0);
    for cost in [1, 2, 1] {
        assert_eq!(
            limiter.check(&"k", cost).unwrap(),
            reference.check(&"k", cost).unwrap()
        );
    }
}

/// `Algorithm::reserve_each`: "A refusal reports each limit's answer to the refused
/// call: the refusing limits their refusal, the others the grant they would have
/// made"; "A grant reports each limit's standing: a limit left with fewer permits
/// than it holds when whole reports ... a refusal whose `retry_after` is when more
/// than `remaining` permits are there". Through the keyed `check_each`, which
/// reports "every member of a set" on the in-memory store.
#[test]
fn keyed_check_each_reports_refusers_would_be_grants_and_standings() {
    let limits = Limits::new()
        .with(fw(2, 10))
        .with(SlidingLog::new(5, secs(60)).unwrap())
        .with(LeakyBucket::meter(10, 1, secs(1)).unwrap());
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(limits, clock.clone());
    limiter.check(&"k", 1).unwrap();
    limiter.check(&"k", 1).unwrap();
    let mut each = Vec::new();
    let refused = limiter.check_each(&"k", 1, &mut |d| each.push(d)).unwrap();
    assert_eq!(
        (refused.verdict(), refused.limit_index()),
        (Verdict::Denied, 0)
    );
    assert_eq!(refused.retry_after(), secs(10));
    assert_eq!(each.len(), 3);
    assert_eq!(
        (each[0].verdict(), each[0].retry_after()),
        (Verdict::Denied, secs(10))
    );
    assert!(each[1].is_allowed() && each[2].is_allowed(), "{each:?}");
    assert_eq!((each[1].limit(), each[1].remaining()), (5, 2)); // after a grant that did not happen
    assert_eq!(each[2].remaining(), 7);
    assert_eq!(
        limiter.peek(&"k", 1).unwrap().limit_index(),
        0,
        "nothing was counted"
    );

    clock.advance(secs(10));
    each.clear();
    let granted = limiter.check_each(&"k", 1, &mut |d| each.push(d)).unwrap();
    assert!(granted.is_allowed());
    // The fixed window: 1 left, a 2nd when it ends.
    assert_eq!((each[0].remaining(), each[0].retry_after()), (1, secs(10)));
    // The log: 2 left, a 3rd when the calls at 0 leave it at 60 s.
    assert_eq!((each[1].remaining(), each[1].retry_after()), (2, secs(50)));
    // The meter drained in 10 s: 9 left, a 10th in a second.
    assert_eq!((each[2].remaining(), each[2].retry_after()), (9, secs(1)));
    assert_eq!(
        (granted.limit_index(), granted.remaining()),
        (0, 1),
        "the tightest member"
    );
}

/// `multi`: "more than three members nest (`AllOf<(AllOf<(A, B)>, C, D)>`); a
/// nested set decides as one member, and its limits are counted and reported in
/// its place"; `reserve_each`: "a set nested inside a set reports its own limits
/// in its place, as `limit_count` counts them and `limit_index` numbers them".
#[test]
fn a_nested_sets_limits_count_and_report_in_its_place() {
    let inner = AllOf::new((fw(1, 10), fw(10, 60), fw(8, 30)));
    let set = AllOf::new((inner, fw(3, 5), SlidingLog::new(2, secs(25)).unwrap()));
    assert_eq!(set.limit_count(), 5);
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(set, clock.clone());
    let mut each = Vec::new();
    let first = limiter.check_each(&"k", 1, &mut |d| each.push(d)).unwrap();
    let limits: Vec<(u64, u64)> = each.iter().map(|d| (d.limit(), d.remaining())).collect();
    assert_eq!(
        limits,
        [(1, 0), (10, 9), (8, 7), (3, 2), (2, 1)],
        "one per leaf"
    );
    assert_eq!((first.limit_index(), first.remaining()), (0, 0));
    // The inner set's first limit refuses: limit 0. Every leaf reports its
    // answer, the refuser its refusal.
    each.clear();
    let refused = limiter.check_each(&"k", 1, &mut |d| each.push(d)).unwrap();
    assert_eq!(
        (refused.limit_index(), refused.retry_after()),
        (0, secs(10))
    );
    let verdicts: Vec<Verdict> = each.iter().map(Decision::verdict).collect();
    assert_eq!(verdicts[0], Verdict::Denied);
    assert!(
        verdicts[1..].iter().all(|v| *v == Verdict::Allowed),
        "{each:?}"
    );
    clock.advance(secs(10));
    assert!(limiter.check(&"k", 1).unwrap().is_allowed());
    clock.advance(secs(5));
    // At 15 s the inner set frees at 20 s, the log (calls at 0 s and 10 s) at 25 s:
    // the log decides, limit 4, after the inner set's three and the window.
    each.clear();
    let d = limiter.check_each(&"k", 1, &mut |d| each.push(d)).unwrap();
    assert_eq!(
        (d.verdict(), d.limit_index()),
        (Verdict::Denied, 4),
        "{d:?}"
    );
    assert_eq!(d.retry_after(), secs(10));
    assert_eq!(each.len(), 5);
    assert_eq!(each[4].retry_after(), secs(10));
    assert_eq!(each[0].retry_after(), secs(5));
    // The inner set's second limit decides the tightest grant: limit 1.
    let wide = KeyedRateLimiter::with_clock(
        AllOf::new((AllOf::new((fw(9, 10), fw(2, 60))), fw(5, 5))),
        ManualClock::new(),
    );
    assert_eq!(wide.check(&"k", 1).unwrap().limit_index(), 1);
}

/// `Receipt`: "A set of limits ... keeps no record of its grants: its receipt
/// carries one receipt per member (`members`)"; `multi`: cancelling it "hands each
/// member its receipt", and "waits abandoned together, cancelled latest first,
/// give all their permits back". A refusal's receipt is `Receipt::NONE`.
#[test]
fn a_sets_receipts_carry_every_member_and_cancels_latest_first_restore_the_state() {
    let set = AllOf::new((
        SmoothBursty::new(2.0).unwrap(),
        LeakyBucket::queue(4, 1, secs(1)).unwrap(),
        AllOf::new((SmoothBursty::new(4.0).unwrap(), fw(9, 60))),
    ));
    let start = 5 * SECOND;
    let mut state = set.initial_state(start);
    let untouched = state.clone();
    let mut grants = Vec::new();
    for _ in 0..3 {
        let (d, receipt): (Decision, Receipt) = set.reserve(&mut state, start, 1, 10 * SECOND);
        assert!(d.is_allowed(), "{d:?}");
        assert_eq!(receipt.members().len(), 3);
        assert_eq!(
            receipt.members()[2].members().len(),
            2,
            "the nested set's own"
        );
        grants.push((d, receipt));
    }
    // The queue books one slot a second: the third acts 2 s out.
    assert_eq!(grants[2].0.wait(), secs(2));
    let (refused, none): (Decision, Receipt) = set.reserve(&mut state, start, 9, 0);
    assert!(!refused.is_allowed());
    assert!(none.is_none());
    for (d, receipt) in grants.iter().rev() {
        set.cancel(&mut state, start, receipt, start + d.wait_nanos());
    }
    for cost in [1, 3, 9, 10] {
        assert_eq!(
            set.peek(&state, start, cost),
            set.peek(&untouched, start, cost),
            "cost {cost}"
        );
    }
}

/// `KeyedReservation`: `reserve_all` is "ok only if each key's limit grants it"; on
/// a set "the receipt carries every member's own, so any of a key's reservations
/// on a set comes back by the same rule"; `cancel` "Gives the reserved permits back
/// now, on every key of the reservation".
#[test]
fn reserve_all_on_a_set_waits_for_the_latest_turn_and_cancel_restores_every_key() {
    let set = || {
        AllOf::new((
            SmoothBursty::new(2.0).unwrap(),
            LeakyBucket::queue(4, 1, secs(1)).unwrap(),
        ))
    };
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(set(), clock.clone());
    let reference = KeyedRateLimiter::with_clock(set(), clock.clone());
    assert_eq!(limiter.reserve(&"a", 1).unwrap().delay(), Duration::ZERO);
    assert_eq!(reference.reserve(&"a", 1).unwrap().delay(), Duration::ZERO);
    // "a" pays 0.5 s to its bucket and 1 s to its queue; "b" is fresh.
    let both = limiter.reserve_all(&["b", "a"], 1).unwrap();
    assert!(both.is_ok());
    assert_eq!(both.delay(), secs(1));
    assert_eq!(both.decision().wait(), secs(1));
    both.cancel().unwrap();
    for key in ["a", "b"] {
        for cost in [1, 2, 4] {
            assert_eq!(
                limiter.peek(&key, cost).unwrap(),
                reference.peek(&key, cost).unwrap(),
                "{key} cost {cost}"
            );
        }
    }
    // A group of reservations on one key, cancelled latest first: all come back.
    let group: Vec<_> = (0..3).map(|_| limiter.reserve(&"c", 1).unwrap()).collect();
    assert_eq!(group[2].delay(), secs(2));
    for r in group.into_iter().rev() {
        r.cancel().unwrap();
    }
    assert_eq!(limiter.reserve(&"c", 1).unwrap().delay(), Duration::ZERO);
    assert_eq!(limiter.reserve(&"c", 1).unwrap().delay(), secs(1));
}

/// `AsyncKeyedRateLimiter`: "Dropping an acquire before its wait ends gives its
/// grant back on every key"; "waits dropped together are given back latest first".
/// On a set, every member of every key gets its permits back.
#[test]
fn dropped_async_waits_on_a_set_give_back_every_member_of_every_key() {
    let set = || {
        Limits::new()
            .with(SmoothBursty::new(1.0).unwrap())
            .with(LeakyBucket::queue(5, 2, secs(1)).unwrap())
    };
    let clock = HeldClock::default();
    let limiter = KeyedRateLimiter::with_clock(set(), clock.clone());
    let reference = KeyedRateLimiter::with_clock(set(), clock.clone());
    let handle = limiter.to_async();
    let mut first = Box::pin(handle.acquire_all(&["ip", "user"], 1));
    assert!(poll_once(first.as_mut()).is_ready());
    reference.check_all(&["ip", "user"], 1).unwrap();
    let mut second = Box::pin(handle.acquire_all(&["ip", "user"], 1));
    let mut third = Box::pin(handle.acquire_all(&["ip", "user"], 1));
    assert!(poll_once(second.as_mut()).is_pending());
    assert!(poll_once(third.as_mut()).is_pending());
    drop(second);
    drop(third);
    for key in ["ip", "user"] {
        for cost in [1, 2] {
            assert_eq!(
                limiter.peek(&key, cost).unwrap(),
                reference.peek(&key, cost).unwrap(),
                "{key} cost {cost}"
            );
        }
    }
}

/// `check_all`: "allowed only if each key's limit allows it"; "a refused call
/// changes no key"; "when refused, the refusing key with the longest
/// `retry_after`; when allowed, the key with the fewest permits remaining". Each
/// key's limit here is a set, so a refusal by one member of one key takes nothing
/// from any member of any key.
#[test]
fn the_all_calls_over_a_set_are_all_or_nothing_across_keys_and_members() {
    let set = AllOf::new((fw(3, 10), SlidingLog::new(2, secs(60)).unwrap()));
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(set, clock.clone());
    let fresh = KeyedRateLimiter::with_clock(set, clock.clone());
    limiter.check(&"user", 2).unwrap(); // the user's log is spent for a minute
    let before = limiter.peek(&"ip", 1).unwrap();
    let refused = limiter.check_all(&["ip", "user"], 1).unwrap();
    assert_eq!(
        (refused.verdict(), refused.limit_index()),
        (Verdict::Denied, 1)
    );
    assert_eq!(refused.retry_after(), secs(60));
    assert_eq!(limiter.peek(&"ip", 1).unwrap(), before);
    assert_eq!(
        limiter.peek(&"ip", 1).unwrap(),
        fresh.peek(&"ip", 1).unwrap()
    );
    assert!(!limiter.peek_all(&["ip", "user"], 1).unwrap().is_allowed());

    // Allowed: the key with the fewest remaining decides.
    let allowed = limiter.check_all(&["ip", "other"], 1).unwrap();
    assert!(allowed.is_allowed());
    limiter.check(&"other", 1).unwrap();
    let tight = limiter.check_all(&["ip", "other"], 1).unwrap();
    assert!(!tight.is_allowed(), "other's log is spent: {tight:?}");
    assert_eq!(tight.limit_index(), 1);

    // acquire_all waits for the latest key: "ip" could go now, the user's log
    // frees at 60 s; both are charged once it returns.
    assert_eq!(limiter.acquire_all(&["ip", "user"], 1).unwrap(), secs(60));
    for key in ["ip", "user"] {
        assert!(limiter.peek(&key, 1).unwrap().is_allowed(), "{key}");
        assert!(
            !limiter.peek(&key, 2).unwrap().is_allowed(),
            "{key}'s log holds 1"
        );
    }
}
