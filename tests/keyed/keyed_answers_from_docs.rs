//! What a keyed call answers, tested from the public docs alone
//! (`KeyedRateLimiter`, `algorithms::multi`): a multi-key call's combined decision,
//! and a refused call that changes no key; a set's answer through a keyed limiter,
//! in memory (the same on Redis in `async_on_redis_from_docs`); and a key listed
//! twice in one call.

use super::async_common::{ms, secs, Keyed};
use crate::support::adapters::poll_once;
use crate::support::rng::Rng;
use crate::support::timed_clock::Timed;

use sluicegate::algorithms::{
    Algorithm, AllOf, FixedWindow, LeakyBucket, SlidingLog, SlidingWindowCounter, SmoothBursty,
};
use sluicegate::clock::ManualClock;
use sluicegate::stores::Store;
use sluicegate::{Decision, Error, KeyedRateLimiter, Verdict};
use std::task::Poll;

// ---------------------------------------------------------------------------
// Multi-key calls: the combined decision, as `KeyedRateLimiter`'s type docs state
// it ("when refused, the refusing key with the longest `retry_after`; when
// allowed, the key with the fewest permits remaining, with the longest `wait` and
// `reset_after` of all keys"), and a refused call changes no key.
// ---------------------------------------------------------------------------

/// Asserts that `got` is the documented fold of `each` (every key's own decision
/// for the same call, as its peek gives it). Fields a tie leaves open are skipped.
#[track_caller]
fn assert_fold(each: &[Decision], got: Decision, what: &str) {
    let allowed = each.iter().all(Decision::is_allowed);
    if allowed {
        assert!(
            got.is_allowed(),
            "{what}: every key allows, got {got:?} from {each:?}"
        );
        let fewest = each.iter().map(Decision::remaining).min().unwrap();
        assert_eq!(got.remaining(), fewest, "{what}: remaining, {each:?}");
        let longest_reset = each.iter().map(Decision::reset_after).max().unwrap();
        assert_eq!(
            got.reset_after(),
            longest_reset,
            "{what}: reset_after, {each:?}"
        );
        let longest_wait = each.iter().map(Decision::wait).max().unwrap();
        assert_eq!(got.wait(), longest_wait, "{what}: wait, {each:?}");
        let tight: Vec<_> = each.iter().filter(|d| d.remaining() == fewest).collect();
        if tight
            .iter()
            .all(|d| (d.limit(), d.limit_index()) == (tight[0].limit(), tight[0].limit_index()))
        {
            assert_eq!(got.limit(), tight[0].limit(), "{what}: limit, {each:?}");
            assert_eq!(
                got.limit_index(),
                tight[0].limit_index(),
                "{what}: index, {each:?}"
            );
        }
    } else {
        let refusals: Vec<_> = each.iter().filter(|d| !d.is_allowed()).collect();
        let longest = refusals.iter().map(|d| d.retry_after()).max().unwrap();
        assert!(
            !got.is_allowed(),
            "{what}: a key refuses, got {got:?} from {each:?}"
        );
        assert_eq!(got.retry_after(), longest, "{what}: retry_after, {each:?}");
        let verdict = if refusals.iter().any(|d| d.is_never()) {
            Verdict::Never
        } else {
            Verdict::Denied
        };
        assert_eq!(got.verdict(), verdict, "{what}: verdict, {each:?}");
        let deciding: Vec<_> = refusals
            .iter()
            .filter(|d| d.retry_after() == longest)
            .collect();
        if deciding.len() == 1 {
            assert_eq!(got.remaining(), deciding[0].remaining(), "{what}: {each:?}");
            assert_eq!(
                got.limit_index(),
                deciding[0].limit_index(),
                "{what}: {each:?}"
            );
        }
    }
}

/// A random walk of `check_all`s over distinct keys: each answer is the fold of
/// the keys' peeks, `peek_all` agrees with it, and a refusal moves no key.
fn check_all_folds<A: Algorithm + Clone>(algorithm: A, seed: u64) {
    const KEYS: [&str; 4] = ["ip", "user", "path", "tenant"];
    let limiter = KeyedRateLimiter::with_clock(algorithm, ManualClock::new());
    let mut rng = Rng::new(seed);
    let (mut allowed, mut refused) = (0, 0);
    for step in 0..400 {
        limiter.clock().advance(ms(rng.below(5) * 70));
        let first = rng.below(4) as usize;
        let count = 1 + rng.below(3) as usize;
        let keys: Vec<&'static str> = (0..count).map(|i| KEYS[(first + i) % 4]).collect();
        let cost = 1 + rng.below(3);
        let each: Vec<Decision> = keys
            .iter()
            .map(|k| limiter.peek(k, cost).unwrap())
            .collect();
        let what = format!("seed {seed}, step {step}, {keys:?} cost {cost}");
        assert_fold(
            &each,
            limiter.peek_all(&keys, cost).unwrap(),
            &format!("peek_all, {what}"),
        );
        let got = limiter.check_all(&keys, cost).unwrap();
        assert_fold(&each, got, &format!("check_all, {what}"));
        if got.is_allowed() {
            allowed += 1;
        } else {
            refused += 1;
            let after: Vec<Decision> = keys
                .iter()
                .map(|k| limiter.peek(k, cost).unwrap())
                .collect();
            assert_eq!(after, each, "a refused check_all moved a key, {what}");
        }
    }
    assert!(
        allowed > 40 && refused > 40,
        "a walk must meet both: {allowed}, {refused}"
    );
}

#[test]
fn check_all_answers_the_documented_fold_of_its_keys_decisions() {
    for seed in 0..3 {
        check_all_folds(SmoothBursty::new(2.0).unwrap(), seed);
        check_all_folds(FixedWindow::new(3, secs(1)).unwrap(), seed);
        check_all_folds(SlidingWindowCounter::new(4, secs(1)).unwrap(), seed);
        check_all_folds(LeakyBucket::queue(3, 1, ms(300)).unwrap(), seed);
        let set = AllOf::new((
            FixedWindow::new(2, secs(1)).unwrap(),
            SlidingLog::new(5, secs(10)).unwrap(),
        ));
        check_all_folds(set, seed);
    }
}

// ---------------------------------------------------------------------------
// A set's answer through a keyed limiter: the table of `algorithms::multi`, exact
// on virtual time, in memory and on Redis.
// ---------------------------------------------------------------------------

type TwoWindows = AllOf<(FixedWindow, FixedWindow)>;

pub(crate) fn two_windows() -> TwoWindows {
    AllOf::new((
        FixedWindow::new(2, secs(1)).unwrap(),
        FixedWindow::new(10, secs(60)).unwrap(),
    ))
}

/// "2 a second and 10 a minute" on key `k` at 0.3 s: every verdict reports the
/// longest `reset_after` of all members (59.7 s, the minute's), the deciding
/// member's index, `remaining` and `retry_after`.
pub(crate) fn a_sets_answers_follow_the_table<S>(limiter: Keyed<TwoWindows, S, ManualClock>)
where
    S: Store<&'static str, TwoWindows>,
{
    let reset = ms(59_700);
    limiter.clock().advance(ms(300));
    let mut each = Vec::new();
    let first = limiter.check_each(&"k", 1, &mut |d| each.push(d)).unwrap();
    assert!(first.is_allowed());
    assert_eq!(
        (first.limit_index(), first.limit(), first.remaining()),
        (0, 2, 1)
    );
    assert_eq!(
        first.reset_after(),
        reset,
        "allowed: the longest member's reset"
    );
    assert_eq!(
        each.iter().map(Decision::remaining).collect::<Vec<_>>(),
        [1, 9]
    );
    assert_eq!(each[0].reset_after(), ms(700));
    assert_eq!(each[1].reset_after(), reset);

    let second = limiter.check(&"k", 1).unwrap();
    assert_eq!((second.limit_index(), second.remaining()), (0, 0));

    let denied = limiter.check(&"k", 1).unwrap();
    assert_eq!(denied.verdict(), Verdict::Denied);
    assert_eq!((denied.limit_index(), denied.limit()), (0, 2));
    assert_eq!(denied.retry_after(), ms(700));
    assert_eq!(
        denied.reset_after(),
        reset,
        "denied: the longest member's reset"
    );

    let never = limiter.check(&"k", 3).unwrap();
    assert_eq!(never.verdict(), Verdict::Never);
    assert_eq!(
        never.limit_index(),
        0,
        "the first limit that answered never"
    );
    assert_eq!(never.retry_after_nanos(), u64::MAX);
    assert_eq!(
        never.reset_after(),
        reset,
        "never: the longest member's reset"
    );

    // Nothing refused was counted: the minute still holds 8 after 0.7 s more.
    limiter.clock().advance(ms(700));
    let mut minute = Vec::new();
    limiter
        .check_each(&"k", 2, &mut |d| minute.push(d.remaining()))
        .unwrap();
    assert_eq!(minute, [0, 6]);
}

#[test]
fn a_sets_answers_through_a_keyed_limiter_follow_the_table_in_memory() {
    a_sets_answers_follow_the_table(KeyedRateLimiter::with_clock(
        two_windows(),
        ManualClock::new(),
    ));
}

// ---------------------------------------------------------------------------
// A key listed twice ("charged twice ... pass each key once").
// ---------------------------------------------------------------------------

/// `acquire_all(&[a, a], 2)` on a limit of 3 needs room for 4 in `a`, which the
/// limit can never hold: "[`Error::Never`] if the cost can never be granted (it
/// fails at once rather than sleeping for ever)".
#[test]
fn an_acquire_all_whose_repeated_key_can_never_fit_fails_instead_of_sleeping_for_ever() {
    let timed = Timed::default();
    let window = FixedWindow::new(3, secs(1)).unwrap();
    let limiter = KeyedRateLimiter::with_clock(window, timed.clone());
    let handle = limiter.to_async();
    let mut wait = Box::pin(handle.acquire_all(&["a", "a"], 2));
    let mut outcome = None;
    for _ in 0..5 {
        match poll_once(wait.as_mut()) {
            Poll::Ready(done) => {
                outcome = Some(done);
                break;
            }
            Poll::Pending => timed.clock.advance(secs(1)),
        }
    }
    assert!(
        matches!(outcome, Some(Err(Error::Never { .. }))),
        "expected Error::Never; after 5 windows the call is {outcome:?}, having begun {} sleeps",
        timed.sleeps_begun()
    );
}

/// A refused `check_all` with a repeated key charges nothing, and its refusal
/// keeps `Decision::retry_after`'s rule ("the least `s` such that the same cost,
/// asked again at `now + s` ..., would be granted"): denied only if a retry can
/// pass, else never.
#[test]
fn a_refused_check_all_with_a_repeated_key_charges_nothing_and_keeps_the_retry_after_rule() {
    let window = FixedWindow::new(3, secs(1)).unwrap();
    let limiter = KeyedRateLimiter::with_clock(window, ManualClock::new());
    let refused = limiter.check_all(&["a", "a"], 2).unwrap();
    assert!(!refused.is_allowed(), "needs room for 4 in a limit of 3");
    assert!(
        limiter.peek(&"a", 3).unwrap().is_allowed(),
        "nothing of a was charged"
    );
    if !refused.is_never() {
        // A denial promises a pass at `now + retry_after`.
        limiter.clock().advance(refused.retry_after());
        let again = limiter.check_all(&["a", "a"], 2).unwrap();
        assert!(
            again.is_allowed(),
            "denied with retry_after {:?}, yet the retry then is refused: {again:?}",
            refused.retry_after()
        );
    }
}
