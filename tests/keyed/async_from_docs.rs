//! The async and keyed front ends, their reservations, multi-key calls and sets of
//! limits, tested from their public docs alone (README, `KeyedRateLimiter`,
//! `AsyncKeyedRateLimiter`, `KeyedReservation`, `algorithms::multi`, `Decision`,
//! the store contract and the Redis store's module docs), in memory and, with
//! feature `redis`, on a server the test starts itself: the combined decision of
//! a multi-key call, a set's `reset_after`, when an async reserve and an async
//! cancel read the time, abandoned waits on a key and on a key list, a repeated
//! key, bad input, threads and tasks on the real clock, and Redis deciding as
//! memory does on the caller's time.

use crate::support::adapters::poll_once;
use crate::support::rng::Rng;
use crate::support::timed_clock::Timed;

use sluicegate::algorithms::{
    Algorithm, AllOf, FixedWindow, LeakyBucket, Limits, SlidingLog, SlidingWindowCounter,
    SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::stores::Store;
use sluicegate::{Decision, DefaultClock, Error, KeyedRateLimiter, Verdict};
use std::future::Future;
use std::task::Poll;
use std::time::Duration;

type Keyed<A, S, C> = KeyedRateLimiter<&'static str, A, S, C>;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A tokio runtime on this thread with time and I/O.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A tokio runtime with `workers` threads.
fn threaded(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap()
}

/// Polls `wait` on `rt` until it has begun sleeping on `timed` (its grant is
/// reserved and it is mid-wait), failing if it resolves instead. A step on a
/// remote store needs its reply first, so this polls while the runtime runs.
fn park<F>(rt: &tokio::runtime::Runtime, timed: &Timed, wait: &mut std::pin::Pin<Box<F>>)
where
    F: Future<Output = Result<Duration, Error>>,
{
    let before = timed.sleeps_begun();
    rt.block_on(async {
        for _ in 0..10_000 {
            if let Poll::Ready(done) = futures::poll!(wait.as_mut()) {
                panic!("the wait resolved instead of sleeping: {done:?}");
            }
            if timed.sleeps_begun() > before {
                return;
            }
            tokio::time::sleep(ms(1)).await;
        }
        panic!("the wait never began its sleep");
    });
}

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

fn two_windows() -> TwoWindows {
    AllOf::new((
        FixedWindow::new(2, secs(1)).unwrap(),
        FixedWindow::new(10, secs(60)).unwrap(),
    ))
}

/// "2 a second and 10 a minute" on key `k` at 0.3 s: every verdict reports the
/// longest `reset_after` of all members (59.7 s, the minute's), the deciding
/// member's index, `remaining` and `retry_after`.
fn a_sets_answers_follow_the_table<S>(limiter: Keyed<TwoWindows, S, ManualClock>)
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
        "the first member that answered never"
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
// When the async calls read the time.
// ---------------------------------------------------------------------------

/// `AsyncKeyedRateLimiter::reserve`: "The time of the reserve is read when the
/// future is first polled." A reserve made at 0 and first polled at 3 s acts at
/// 3 s; `reserve_all` likewise.
fn an_async_reserve_reads_the_time_when_first_polled<S>(
    limiter: Keyed<SmoothBursty, S, ManualClock>,
    rt: &tokio::runtime::Runtime,
) where
    S: Store<&'static str, SmoothBursty> + 'static,
{
    let handle = limiter.to_async();
    limiter.acquire(&"k").unwrap(); // k's next turn: 1 s
    limiter.acquire(&"j").unwrap();
    let one = handle.reserve(&"k", 1);
    let all = handle.reserve_all(&["j", "i"], 1);
    limiter.clock().advance(secs(3));
    let one = rt.block_on(one).unwrap();
    assert_eq!(
        one.acts_at(),
        3_000_000_000,
        "read at the first poll, not at the call"
    );
    assert_eq!(one.delay(), Duration::ZERO);
    let all = rt.block_on(all).unwrap();
    assert_eq!(all.acts_at(), 3_000_000_000);
}

/// `KeyedReservation::cancel_async`: "The time of the cancel is read when this is
/// called." A cancel called at 0.5 s, before the time to act (1 s), and awaited
/// at 2.5 s, after it, gives the permit back.
fn an_async_cancel_reads_the_time_when_called<S>(
    limiter: Keyed<SmoothBursty, S, ManualClock>,
    rt: &tokio::runtime::Runtime,
) where
    S: Store<&'static str, SmoothBursty> + 'static,
{
    limiter.acquire(&"k").unwrap();
    let later = limiter.reserve(&"k", 1).unwrap();
    assert_eq!(later.acts_at(), 1_000_000_000);
    limiter.clock().advance(ms(500));
    let cancel = later.cancel_async();
    limiter.clock().advance(secs(2));
    rt.block_on(cancel).unwrap();
    // Given back: at 2.5 s a whole permit is saved (the burst is 1 s), so two
    // tries pass (the second pays later); kept, only half a permit is saved and
    // one passes.
    assert!(limiter.try_acquire(&"k"));
    assert!(
        limiter.try_acquire(&"k"),
        "the cancel was judged at 2.5 s, not at 0.5 s"
    );
    assert!(!limiter.try_acquire(&"k"));
}

#[test]
fn an_async_reserve_reads_the_time_when_first_polled_in_memory() {
    let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), ManualClock::new());
    an_async_reserve_reads_the_time_when_first_polled(limiter, &runtime());
}

#[test]
fn an_async_cancel_reads_the_time_when_called_in_memory() {
    let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), ManualClock::new());
    an_async_cancel_reads_the_time_when_called(limiter, &runtime());
}

// ---------------------------------------------------------------------------
// Abandoned async waits on keys and key lists (`AsyncKeyedRateLimiter` docs).
// ---------------------------------------------------------------------------

/// "A single key and a list holding it are recorded apart": a list wait dropped
/// while a later single-key wait on one of its keys is pending is given back at
/// once, in full on the key no later grant holds, and nothing on the key the
/// later wait holds; that wait, dropped next, gives back its own.
fn a_list_wait_and_a_key_wait_are_recorded_apart<S>(
    limiter: Keyed<SmoothBursty, S, Timed>,
    rt: &tokio::runtime::Runtime,
) where
    S: Store<&'static str, SmoothBursty> + 'static,
{
    let timed = limiter.clock().clone();
    let handle = limiter.to_async();
    limiter.acquire_all(&["a", "b"], 1).unwrap(); // both next at 1 s
    let mut list = Box::pin(handle.acquire_all(&["a", "b"], 1)); // 1 s; both next at 2 s
    park(rt, &timed, &mut list);
    let mut single = Box::pin(handle.acquire(&"a")); // 2 s; a next at 3 s
    park(rt, &timed, &mut single);

    drop(list);
    let b = limiter.reserve(&"b", 1).unwrap();
    assert_eq!(
        b.delay(),
        secs(1),
        "b: the list's turn is back, no wait of its list pends"
    );
    b.cancel().unwrap();
    let a = limiter.peek(&"a", 1).unwrap();
    assert_eq!(
        a.retry_after(),
        secs(3),
        "a: the later wait on a keeps the list's turn"
    );

    drop(single);
    let a = limiter.peek(&"a", 1).unwrap();
    assert_eq!(
        a.retry_after(),
        secs(2),
        "a: the single wait's own turn is back"
    );
}

/// "A wait that acts leaves the record with the abandoned waits just before it":
/// a list wait dropped ahead of a pending one on the same list is marked
/// abandoned (nothing back yet); when the later one acts, nothing of the first
/// comes back. Dropped instead, the later one takes the first back with it.
fn a_wait_that_acts_keeps_the_abandoned_ones_before_it<S>(
    make: impl Fn() -> Keyed<SmoothBursty, S, Timed>,
    rt: &tokio::runtime::Runtime,
) where
    S: Store<&'static str, SmoothBursty> + 'static,
{
    for acts in [true, false] {
        let limiter = make();
        let timed = limiter.clock().clone();
        let handle = limiter.to_async();
        limiter.acquire_all(&["a", "b"], 1).unwrap(); // next at 1 s
        let mut first = Box::pin(handle.acquire_all(&["a", "b"], 1)); // 1 s
        park(rt, &timed, &mut first);
        let mut second = Box::pin(handle.acquire_all(&["a", "b"], 1)); // 2 s
        park(rt, &timed, &mut second);
        drop(first);
        for key in ["a", "b"] {
            let d = limiter.peek(&key, 1).unwrap();
            assert_eq!(
                d.retry_after(),
                secs(3),
                "{key}: marked abandoned, nothing back yet"
            );
        }
        if acts {
            timed.clock.advance(secs(2));
            let waited = rt.block_on(second).unwrap();
            assert_eq!(waited, secs(2));
            for key in ["a", "b"] {
                let d = limiter.peek(&key, 1).unwrap();
                assert_eq!(
                    d.retry_after(),
                    secs(1),
                    "{key}: the first's turn stays taken"
                );
            }
        } else {
            drop(second);
            for key in ["a", "b"] {
                let d = limiter.peek(&key, 1).unwrap();
                assert_eq!(d.retry_after(), secs(1), "{key}: both turns are back");
            }
        }
    }
}

fn bursty_on_timed(
) -> Keyed<SmoothBursty, sluicegate::stores::MemoryStore<&'static str, SmoothBursty>, Timed> {
    KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), Timed::default())
}

#[test]
fn a_list_wait_and_a_key_wait_are_recorded_apart_in_memory() {
    a_list_wait_and_a_key_wait_are_recorded_apart(bursty_on_timed(), &runtime());
}

#[test]
fn a_wait_that_acts_keeps_the_abandoned_list_waits_before_it_in_memory() {
    a_wait_that_acts_keeps_the_abandoned_ones_before_it(bursty_on_timed, &runtime());
}

/// Waits on a set of limits over a key list, dropped together first to last (the
/// order that gives nothing back under Go's rule alone), give back every member's
/// permits on every key: the next call waits as if they had never been made.
#[test]
fn set_waits_on_a_key_list_dropped_first_to_last_give_everything_back() {
    let cadence = SmoothBursty::new(2.0)
        .unwrap()
        .with_max_burst(Duration::ZERO)
        .unwrap();
    let queue = LeakyBucket::queue(10, 1, ms(300)).unwrap();
    let timed = Timed::default();
    let limiter = KeyedRateLimiter::with_clock(AllOf::new((cadence, queue)), timed.clone());
    let handle = limiter.to_async();
    limiter.acquire_all(&["ip", "user"], 1).unwrap();
    let before = limiter.peek_all(&["ip", "user"], 1).unwrap();
    let mut waits: Vec<_> = (0..5)
        .map(|_| Box::pin(handle.acquire_all(&["ip", "user"], 1)))
        .collect();
    for wait in &mut waits {
        assert!(poll_once(wait.as_mut()).is_pending());
    }
    assert_eq!(timed.sleeps_begun(), 5);
    for wait in waits {
        drop(wait); // first to last
    }
    assert_eq!(limiter.peek_all(&["ip", "user"], 1).unwrap(), before);
    for key in ["ip", "user"] {
        assert_eq!(
            limiter.peek(&key, 1).unwrap().retry_after(),
            ms(500),
            "{key}"
        );
    }
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

// ---------------------------------------------------------------------------
// Bad input: typed errors, never a panic, nothing consumed.
// ---------------------------------------------------------------------------

type Guarded = AllOf<(SmoothBursty, FixedWindow)>;

fn guarded() -> Guarded {
    AllOf::new((
        SmoothBursty::new(5.0).unwrap(),
        FixedWindow::new(3, secs(1)).unwrap(),
    ))
}

/// Every async call's documented errors on a set whose window holds 3, and an
/// empty `Limits`, which admits any cost; afterwards no key has been charged.
fn bad_input_is_typed<S, E>(
    limiter: Keyed<Guarded, S, ManualClock>,
    empty: Keyed<Limits, E, ManualClock>,
    rt: &tokio::runtime::Runtime,
) where
    S: Store<&'static str, Guarded> + 'static,
    E: Store<&'static str, Limits> + 'static,
{
    let handle = limiter.to_async();
    rt.block_on(async {
        assert!(matches!(handle.check(&"a", 0).await, Err(Error::ZeroCost)));
        assert!(matches!(
            handle.acquire_n(&"a", 0).await,
            Err(Error::ZeroCost)
        ));
        assert!(matches!(
            handle.acquire_all(&["a"], 0).await,
            Err(Error::ZeroCost)
        ));
        assert!(matches!(
            handle.acquire_all(&[], 1).await,
            Err(Error::InvalidCount { .. })
        ));
        assert!(matches!(
            handle.reserve_all(&[], 1).await,
            Err(Error::InvalidCount { .. })
        ));
        assert!(matches!(
            handle.reserve(&"a", 0).await,
            Err(Error::ZeroCost)
        ));
        assert!(matches!(
            handle.try_acquire_n_timeout(&"a", 0, secs(1)).await,
            Err(Error::ZeroCost)
        ));
        assert_eq!(
            handle.acquire_n(&"a", 4).await,
            Err(Error::Never { cost: 4 })
        );
        assert_eq!(
            handle.acquire_all(&["a", "b"], 4).await,
            Err(Error::Never { cost: 4 })
        );
        assert_eq!(
            handle.acquire_n(&"a", u64::MAX).await,
            Err(Error::Never { cost: u64::MAX })
        );
        assert!(handle.check(&"a", u64::MAX).await.unwrap().is_never());
        assert_eq!(
            handle.try_acquire_n_timeout(&"a", 4, secs(10)).await,
            Ok(false),
            "a cost never grantable cannot be had within any timeout"
        );
        let never = handle.reserve_all(&["a", "b"], 4).await.unwrap();
        assert!(!never.is_ok() && never.decision().is_never());
        assert_eq!(never.decision().limit_index(), 1, "the window refuses 4");
        assert_eq!(never.delay(), Duration::from_nanos(u64::MAX));
        never.cancel_async().await.unwrap(); // not ok: nothing to give back
    });
    assert!(
        limiter.check_all(&["a", "b"], 3).unwrap().is_allowed(),
        "nothing was consumed"
    );

    let free = empty.check(&"k", u64::MAX).unwrap();
    assert!(free.is_allowed(), "an empty set admits any cost: {free:?}");
    assert_eq!((free.limit(), free.remaining()), (u64::MAX, u64::MAX));
    let waited = rt.block_on(empty.to_async().acquire_all(&["k", "j"], u64::MAX));
    assert_eq!(waited, Ok(Duration::ZERO));
}

#[test]
fn bad_input_to_the_async_keyed_calls_is_a_typed_error_in_memory() {
    bad_input_is_typed(
        KeyedRateLimiter::with_clock(guarded(), ManualClock::new()),
        KeyedRateLimiter::with_clock(Limits::new(), ManualClock::new()),
        &runtime(),
    );
}

// ---------------------------------------------------------------------------
// The real clock: threads and tasks, within the documented bounds.
// ---------------------------------------------------------------------------

type Owned<A, S> = KeyedRateLimiter<String, A, S, DefaultClock>;

/// 8 threads, each `check_all` on a shared key and its own, 30 times, on a
/// sliding log of 40 an hour: exactly 40 calls pass (a shared limit, atomic and
/// all-or-nothing), and each thread's own key counted exactly its passes.
fn eight_threads_check_all<S>(limiter: Owned<SlidingLog, S>)
where
    S: Store<String, SlidingLog> + 'static,
{
    let shared = "shared".to_string();
    let passes: Vec<u64> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..8)
            .map(|i| {
                let limiter = limiter.clone();
                let keys = [shared.clone(), format!("own-{i}")];
                scope.spawn(move || {
                    (0..30)
                        .filter(|_| limiter.check_all(&keys, 1).unwrap().is_allowed())
                        .count() as u64
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    assert_eq!(passes.iter().sum::<u64>(), 40, "{passes:?}");
    for (i, passed) in passes.iter().enumerate() {
        let own = limiter.peek(&format!("own-{i}"), 1).unwrap();
        assert_eq!(
            own.remaining() + 1,
            40 - passed,
            "own-{i}: refused calls count nowhere"
        );
    }
    assert!(!limiter.peek(&shared, 1).unwrap().is_allowed());
}

/// 16 tasks, each `reserve_all` on a shared key and its own, 10 times, on a
/// sliding log of 50 an hour: exactly 50 reservations are ok.
fn sixteen_tasks_reserve_all<S>(limiter: Owned<SlidingLog, S>)
where
    S: Store<String, SlidingLog> + 'static,
{
    let rt = threaded(4);
    let handle = limiter.to_async();
    let passes: Vec<u64> = rt.block_on(async {
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let handle = handle.clone();
                tokio::spawn(async move {
                    let keys = ["shared".to_string(), format!("task-{i}")];
                    let mut ok = 0;
                    for _ in 0..10 {
                        if handle.reserve_all(&keys, 1).await.unwrap().is_ok() {
                            ok += 1;
                        }
                    }
                    ok
                })
            })
            .collect();
        let mut passes = Vec::new();
        for task in tasks {
            passes.push(task.await.unwrap());
        }
        passes
    });
    assert_eq!(passes.iter().sum::<u64>(), 50, "{passes:?}");
    for (i, passed) in passes.iter().enumerate() {
        let own = limiter.peek(&format!("task-{i}"), 1).unwrap();
        assert_eq!(own.remaining() + 1, 50 - passed, "task-{i}");
    }
}

/// 16 tasks each `acquire_all` on two keys under `tokio::time::timeout` of
/// 100 ms, turns half a second apart: all time out, together, and give their
/// turns back; the next call waits at most for the first turn (not 8 s).
fn sixteen_timed_out_list_waits_give_their_turns_back<S>(limiter: Owned<SmoothBursty, S>)
where
    S: Store<String, SmoothBursty> + 'static,
{
    let keys = ["ip".to_string(), "user".to_string()];
    let rt = threaded(4);
    let handle = limiter.to_async();
    limiter.acquire_all(&keys, 1).unwrap(); // the next turn: 0.5 s on
    let timed_out = rt.block_on(async {
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let (handle, keys) = (handle.clone(), keys.clone());
                tokio::spawn(async move {
                    tokio::time::timeout(ms(100), handle.acquire_all(&keys, 1))
                        .await
                        .is_err()
                })
            })
            .collect();
        let mut timed_out = 0;
        for task in tasks {
            timed_out += u32::from(task.await.unwrap());
        }
        timed_out
    });
    assert_eq!(timed_out, 16);
    let next = limiter.reserve_all(&keys, 1).unwrap();
    assert!(next.is_ok());
    assert!(
        next.delay() <= ms(500),
        "16 turns were kept: {:?}",
        next.delay()
    );
}

#[test]
fn eight_threads_on_a_shared_key_get_exactly_its_limit_in_memory() {
    let log = SlidingLog::new(40, secs(3600)).unwrap();
    eight_threads_check_all(KeyedRateLimiter::with_clock(log, DefaultClock::new()));
}

#[test]
fn sixteen_tasks_reserving_on_key_lists_get_exactly_the_limit_in_memory() {
    let log = SlidingLog::new(50, secs(3600)).unwrap();
    sixteen_tasks_reserve_all(KeyedRateLimiter::with_clock(log, DefaultClock::new()));
}

fn cadence() -> SmoothBursty {
    SmoothBursty::new(2.0)
        .unwrap()
        .with_max_burst(Duration::ZERO)
        .unwrap()
}

#[test]
fn sixteen_list_waits_timed_out_together_give_their_turns_back_in_memory() {
    sixteen_timed_out_list_waits_give_their_turns_back(KeyedRateLimiter::with_clock(
        cadence(),
        DefaultClock::new(),
    ));
}

// ---------------------------------------------------------------------------
// Redis: the same scenarios on a server this test starts, on the caller's time
// ("every decision is identical, field by field, to the in-memory store's").
// ---------------------------------------------------------------------------

#[cfg(feature = "redis")]
mod on_redis {
    use super::*;
    use crate::support::redis::trace::caller_time_options;
    use crate::support::redis::{unique_prefix, RedisServer};
    use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore};
    use sluicegate::stores::MemoryStore;

    fn caller<A: RedisAlgorithm, C: Clock>(
        server: &RedisServer,
        algorithm: A,
        clock: C,
    ) -> Keyed<A, RedisStore<&'static str, A>, C> {
        let options = caller_time_options(&unique_prefix("async-from-docs"));
        let store = RedisStore::open_with(server.url(), options).unwrap();
        KeyedRateLimiter::with_store(algorithm, store, clock)
    }

    fn server_time<A: RedisAlgorithm>(
        server: &RedisServer,
        algorithm: A,
    ) -> Owned<A, RedisStore<String, A>> {
        let options = RedisOptions::default()
            .prefix(unique_prefix("async-from-docs-real"))
            .unwrap()
            .response_timeout(secs(5))
            .connect_timeout(secs(5));
        let store = RedisStore::open_with(server.url(), options).unwrap();
        KeyedRateLimiter::with_store(algorithm, store, DefaultClock::new())
    }

    #[test]
    fn a_sets_answers_through_a_keyed_limiter_follow_the_table_on_redis() {
        let server = RedisServer::start();
        a_sets_answers_follow_the_table(caller(&server, two_windows(), ManualClock::new()));
    }

    #[test]
    fn async_reserves_and_cancels_read_the_time_as_documented_on_redis() {
        let server = RedisServer::start();
        let rt = runtime();
        let bursty = || SmoothBursty::new(1.0).unwrap();
        an_async_reserve_reads_the_time_when_first_polled(
            caller(&server, bursty(), ManualClock::new()),
            &rt,
        );
        an_async_cancel_reads_the_time_when_called(
            caller(&server, bursty(), ManualClock::new()),
            &rt,
        );
    }

    #[test]
    fn abandoned_waits_on_keys_and_lists_on_redis() {
        let server = RedisServer::start();
        let rt = runtime();
        let bursty = || caller(&server, SmoothBursty::new(1.0).unwrap(), Timed::default());
        a_list_wait_and_a_key_wait_are_recorded_apart(bursty(), &rt);
        a_wait_that_acts_keeps_the_abandoned_ones_before_it(bursty, &rt);
    }

    #[test]
    fn bad_input_to_the_async_keyed_calls_is_a_typed_error_on_redis() {
        let server = RedisServer::start();
        bad_input_is_typed(
            caller(&server, guarded(), ManualClock::new()),
            caller(&server, Limits::new(), ManualClock::new()),
            &runtime(),
        );
    }

    #[test]
    fn threads_and_tasks_on_the_real_clock_stay_within_the_limit_on_redis() {
        let server = RedisServer::start();
        eight_threads_check_all(server_time(
            &server,
            SlidingLog::new(40, secs(3600)).unwrap(),
        ));
        sixteen_tasks_reserve_all(server_time(
            &server,
            SlidingLog::new(50, secs(3600)).unwrap(),
        ));
        sixteen_timed_out_list_waits_give_their_turns_back(server_time(&server, cadence()));
    }

    /// One call of a differential trace.
    #[derive(Clone, Debug)]
    enum Op {
        Advance(u64),
        CheckAll(Vec<&'static str>, u64),
        PeekAll(Vec<&'static str>, u64),
        CheckEach(&'static str, u64),
        ReserveAll(Vec<&'static str>, u64, bool),
        Cancel(usize, bool),
        AcquireAll(Vec<&'static str>, u64),
    }

    const KEYS: [&str; 3] = ["alice", "bob", "}{ x"];

    /// Multi-key calls (a repeated key among them), reservations and cancels
    /// (blocking and async), and, with `acquires`, async acquires of distinct keys.
    fn ops(seed: u64, steps: usize, acquires: bool) -> Vec<Op> {
        let mut rng = Rng::new(seed);
        let mut held = 0usize;
        let mut out = Vec::new();
        let pick = |rng: &mut Rng, distinct: bool| -> Vec<&'static str> {
            let n = 1 + rng.below(3) as usize;
            if distinct {
                let first = rng.below(3) as usize;
                (0..n).map(|i| KEYS[(first + i) % 3]).collect()
            } else {
                (0..n).map(|_| KEYS[rng.below(3) as usize]).collect()
            }
        };
        for _ in 0..steps {
            let cost = 1 + rng.below(3);
            let op = match rng.below(10) {
                0 | 1 => Op::Advance(rng.below(400)),
                2 | 3 => Op::CheckAll(pick(&mut rng, false), cost),
                4 => Op::PeekAll(pick(&mut rng, false), cost),
                5 => Op::CheckEach(KEYS[rng.below(3) as usize], cost),
                6 | 7 => {
                    held += 1;
                    Op::ReserveAll(pick(&mut rng, true), cost, rng.chance(50))
                }
                8 if held > 0 => {
                    held -= 1;
                    Op::Cancel(rng.below(held as u64 + 1) as usize, rng.chance(50))
                }
                _ if acquires => Op::AcquireAll(pick(&mut rng, true), 1),
                _ => Op::Advance(rng.below(400)),
            };
            out.push(op);
        }
        out
    }

    /// Runs `ops` on `limiter` (on a manual clock from 0), one line per call.
    fn run<A, S>(
        limiter: &Keyed<A, S, ManualClock>,
        ops: &[Op],
        rt: &tokio::runtime::Runtime,
    ) -> Vec<String>
    where
        A: Algorithm,
        S: Store<&'static str, A> + 'static,
    {
        let handle = limiter.to_async();
        let mut held = Vec::new();
        let mut seen = Vec::new();
        for op in ops {
            let line = match op {
                Op::Advance(n) => {
                    limiter.clock().advance(ms(*n));
                    format!("now {}", limiter.clock().now())
                }
                Op::CheckAll(keys, cost) => format!("{:?}", limiter.check_all(keys, *cost)),
                Op::PeekAll(keys, cost) => format!("{:?}", limiter.peek_all(keys, *cost)),
                Op::CheckEach(key, cost) => {
                    let mut each = Vec::new();
                    let d = limiter.check_each(key, *cost, &mut |d| each.push(d));
                    format!("{d:?} {each:?}")
                }
                Op::ReserveAll(keys, cost, asynchronous) => {
                    let r = if *asynchronous {
                        rt.block_on(handle.reserve_all(keys, *cost)).unwrap()
                    } else {
                        limiter.reserve_all(keys, *cost).unwrap()
                    };
                    let line = format!(
                        "{} {} {:?} {:?}",
                        r.is_ok(),
                        r.acts_at(),
                        r.delay(),
                        r.decision()
                    );
                    held.push(r);
                    line
                }
                Op::Cancel(index, asynchronous) => {
                    let r = held.remove(*index);
                    if *asynchronous {
                        rt.block_on(r.cancel_async()).unwrap();
                    } else {
                        r.cancel().unwrap();
                    }
                    "cancelled".to_string()
                }
                Op::AcquireAll(keys, cost) => {
                    let waited = rt.block_on(handle.acquire_all(keys, *cost));
                    let line = format!("{waited:?} now {}", limiter.clock().now());
                    // A wait need not be whole microseconds (a warming-up one);
                    // the Redis store matches memory on whole-microsecond times.
                    let now = limiter.clock().now();
                    limiter.clock().advance_nanos((1_000 - now % 1_000) % 1_000);
                    line
                }
            };
            seen.push(line);
        }
        seen
    }

    /// Redis decides as memory on random traces. `acquires` only for limits whose
    /// waits are whole microseconds: an acquire sleeps its waits and retries at
    /// the time it reaches, and the store's answers are identical to memory's on
    /// whole-microsecond times ("with other times the server's answer is the one
    /// for the microsecond below").
    fn same_as_memory<A: RedisAlgorithm + Clone>(
        server: &RedisServer,
        algorithm: A,
        acquires: bool,
    ) {
        let rt = runtime();
        for seed in 0..3 {
            let ops = ops(seed, 150, acquires);
            let memory: Keyed<A, MemoryStore<&'static str, A>, ManualClock> =
                KeyedRateLimiter::with_clock(algorithm.clone(), ManualClock::new());
            let expected = run(&memory, &ops, &rt);
            let redis = caller(server, algorithm.clone(), ManualClock::new());
            let got = run(&redis, &ops, &rt);
            for (i, (want, saw)) in expected.iter().zip(&got).enumerate() {
                assert_eq!(saw, want, "seed {seed}, call {i}: {:?}", ops[i]);
            }
        }
    }

    #[test]
    fn multi_key_calls_on_sets_decide_on_redis_as_in_memory() {
        let server = RedisServer::start();
        same_as_memory(
            &server,
            AllOf::new((
                SmoothBursty::new(4.0).unwrap(),
                FixedWindow::new(5, secs(1)).unwrap(),
                SlidingLog::new(8, secs(3)).unwrap(),
            )),
            true,
        );
        same_as_memory(
            &server,
            Limits::new()
                .with(LeakyBucket::queue(3, 1, ms(100)).unwrap())
                .with(SlidingWindowCounter::new(6, secs(2)).unwrap())
                .with(
                    Limits::new()
                        .with(SmoothWarmingUp::new(2.0, secs(2)).unwrap())
                        .with(FixedWindow::new(10, secs(5)).unwrap()),
                ),
            false,
        );
    }
}
