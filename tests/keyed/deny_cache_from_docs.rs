//! The deny cache (`stores::deny_cache`), tested from its docs alone: it answers as
//! the uncached store on a random trace, answers a cached refusal without asking
//! the inner store, drops a key's refusal on a cancel, refuses a set with a
//! recording log until the first instant it grants, caches only the store's own
//! refusals, and keeps at most `max_entries` under 100,000 refused keys.

use super::probe_store::{ms, secs, unsourced, Probe, DOWN, MS, SEC, UP};
use crate::support::rng::Rng;
use sluicegate::algorithms::{
    Algorithm, AllOf, Counting, Decision, FixedWindow, LeakyBucket, Limits, Plain, Receipt, Report,
    SlidingLog, SlidingWindowBuckets, SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::{Clock, ManualClock, Nanos};
use sluicegate::stores::deny_cache::DenyCache;
use sluicegate::stores::failover::{Backoff, FailoverStore, FailurePolicy};
use sluicegate::stores::MemoryStore;
use sluicegate::{ConfigError, KeyedRateLimiter, Source, Verdict};
use std::time::Duration;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Agree {
    /// FixedWindow and Guava's limiters: a cached answer is the store's, field by field.
    Exact,
    /// One limit that frees permits as time passes: a refusal, as many or fewer
    /// remaining and an earlier or equal retry_after.
    Refusal,
    /// A set: a refusal.
    SetRefusal,
}

/// Checks a pair of answers: the plain store's and the cached store's.
fn agree(agree: Agree, step: usize, what: &str, plain: Decision, cached: Decision) {
    assert_eq!(plain.source(), Source::Store);
    match cached.source() {
        // The inner store answered on the same state as the plain store.
        Source::Store => assert_eq!(plain, cached, "step {step}: {what}"),
        Source::Cached => {
            assert_eq!(cached.verdict(), Verdict::Denied, "step {step}: {what}");
            assert!(
                !plain.is_allowed(),
                "step {step}: {what}: cached {cached:?}, store {plain:?}"
            );
            match agree {
                Agree::Exact => assert_eq!(plain, unsourced(cached), "step {step}: {what}"),
                Agree::Refusal => {
                    assert_eq!(plain.verdict(), Verdict::Denied, "step {step}: {what}");
                    assert_eq!(
                        (plain.limit(), plain.limit_index()),
                        (cached.limit(), cached.limit_index()),
                        "step {step}: {what}"
                    );
                    assert!(
                        cached.retry_after() <= plain.retry_after()
                            && cached.remaining() <= plain.remaining(),
                        "step {step}: {what}: cached {cached:?}, store {plain:?}"
                    );
                }
                Agree::SetRefusal => {}
            }
        }
        other => panic!("step {step}: {what}: source {other:?}"),
    }
}

/// Two limiters on one trace, each on its own manual clock kept in step: one over a
/// plain in-memory store, one over a deny cache in front of one. Returns the
/// number of answers the cache gave.
fn deny_cache_trace<A: Algorithm + Clone>(
    name: &str,
    algorithm: A,
    mode: Agree,
    max_cost: u64,
    seed: u64,
) -> u64 {
    let plain =
        KeyedRateLimiter::with_store(algorithm.clone(), MemoryStore::new(), ManualClock::new());
    let cache = DenyCache::new(MemoryStore::new(), &algorithm).unwrap();
    let cached = KeyedRateLimiter::with_store(algorithm, cache, ManualClock::new());
    let (plain_async, cached_async) = (plain.to_async(), cached.to_async());
    let mut plain_held = Vec::new();
    let mut cached_held = Vec::new();
    let mut rng = Rng::new(seed);
    let mut cached_answers = 0;
    for step in 0..4_000 {
        let advance = if rng.chance(60) {
            rng.below(150 * MS)
        } else {
            0
        };
        plain.clock().advance_nanos(advance);
        cached.clock().advance_nanos(advance);
        let key = rng.below(4) as u8;
        let cost = 1 + rng.below(max_cost);
        let what = format!("{name}, key {key}, cost {cost}");
        let mut pair = |p: Decision, c: Decision, what: &str| {
            if c.source() == Source::Cached {
                cached_answers += 1;
            }
            agree(mode, step, what, p, c);
        };
        match rng.below(100) {
            0..=34 => pair(
                plain.check(&key, cost).unwrap(),
                cached.check(&key, cost).unwrap(),
                &what,
            ),
            35..=44 => pair(
                plain.peek(&key, cost).unwrap(),
                cached.peek(&key, cost).unwrap(),
                &what,
            ),
            45..=54 => assert_eq!(
                plain.try_acquire(&key),
                cached.try_acquire(&key),
                "step {step}: {what}"
            ),
            55..=62 => {
                let p = futures::executor::block_on(plain_async.check(&key, cost)).unwrap();
                let c = futures::executor::block_on(cached_async.check(&key, cost)).unwrap();
                pair(p, c, &format!("async {what}"));
            }
            63..=69 => {
                let (mut pe, mut ce) = (Vec::new(), Vec::new());
                let p = plain.check_each(&key, cost, &mut |d| pe.push(d)).unwrap();
                let c = cached.check_each(&key, cost, &mut |d| ce.push(d)).unwrap();
                pair(p, c, &format!("check_each {what}"));
                let ce: Vec<_> = ce.into_iter().map(unsourced).collect();
                if c.source() == Source::Store {
                    assert_eq!(pe, ce, "step {step}: each of {what}");
                } else {
                    // A refusal learned from a report repeats it; one learned
                    // otherwise reports itself.
                    assert!(
                        ce.len() == pe.len() || ce == [unsourced(c)],
                        "step {step}: {what}"
                    );
                    if mode == Agree::Exact {
                        assert_eq!(pe, ce, "step {step}: each of {what}");
                    }
                }
            }
            70..=77 => {
                let p = plain.reserve(&key, cost).unwrap();
                let c = cached.reserve(&key, cost).unwrap();
                assert_eq!(p.decision(), c.decision(), "step {step}: reserve {what}");
                plain_held.push(p);
                cached_held.push(c);
            }
            78..=85 if !plain_held.is_empty() => {
                let i = rng.below(plain_held.len() as u64) as usize;
                let (p, c) = (plain_held.swap_remove(i), cached_held.swap_remove(i));
                assert_eq!(
                    p.cancel().is_ok(),
                    c.cancel().is_ok(),
                    "step {step}: cancel"
                );
            }
            86..=91 => {
                let other = (key + 1 + rng.below(3) as u8) % 4;
                let p = plain.check_all(&[key, other], 1).unwrap();
                let c = cached.check_all(&[key, other], 1).unwrap();
                assert_eq!(p, c, "step {step}: check_all {what}");
            }
            92..=95 => {
                let timeout = Duration::from_nanos(rng.below(400 * MS));
                let p = plain.try_acquire_n_timeout(&key, cost, timeout).unwrap();
                let c = cached.try_acquire_n_timeout(&key, cost, timeout).unwrap();
                assert_eq!(p, c, "step {step}: timed {what}");
            }
            _ => {
                let p = plain.check(&key, max_cost + 3).unwrap();
                let c = cached.check(&key, max_cost + 3).unwrap();
                pair(p, c, &format!("{what}, above every limit"));
            }
        }
        assert_eq!(
            plain.clock().now(),
            cached.clock().now(),
            "step {step}: the clocks parted"
        );
    }
    assert!(cached.store().hits() >= cached_answers);
    cached_answers
}

/// stores/deny_cache (Per algorithm, What may differ from the store): on a seeded
/// random trace of every call a keyed limiter makes (checks, peeks, tries, async
/// checks, reports, reservations and their cancels, `_all` calls, timed waits),
/// the cache answers as the store would: field by field for a fixed window and
/// Guava's limiters, and for the rest a refusal whose retry_after and remaining
/// are at most the store's.
#[test]
fn the_deny_cache_answers_as_the_uncached_store_on_a_random_trace() {
    let log = |n, w| SlidingLog::new(n, w).unwrap();
    let window = |n, w| FixedWindow::new(n, w).unwrap();
    let answered = [
        deny_cache_trace("fixed window", window(5, secs(1)), Agree::Exact, 3, 11),
        deny_cache_trace(
            "bursty",
            SmoothBursty::new(4.0).unwrap(),
            Agree::Exact,
            3,
            12,
        ),
        deny_cache_trace(
            "warming up",
            SmoothWarmingUp::new(4.0, secs(2)).unwrap(),
            Agree::Exact,
            3,
            13,
        ),
        deny_cache_trace(
            "meter",
            LeakyBucket::meter(5, 3, secs(1)).unwrap(),
            Agree::Refusal,
            3,
            14,
        ),
        deny_cache_trace(
            "queue",
            LeakyBucket::queue(3, 4, secs(1)).unwrap(),
            Agree::Refusal,
            2,
            15,
        ),
        deny_cache_trace(
            "buckets",
            SlidingWindowBuckets::dropping(6, secs(2), ms(500)).unwrap(),
            Agree::Refusal,
            3,
            16,
        ),
        deny_cache_trace(
            "counter",
            SlidingWindowCounter::new(6, secs(2)).unwrap(),
            Agree::Refusal,
            3,
            17,
        ),
        deny_cache_trace("log", log(5, secs(2)), Agree::Refusal, 3, 18),
        deny_cache_trace(
            "spaced log",
            log(4, secs(1)).with_min_spacing(ms(100)),
            Agree::Refusal,
            2,
            19,
        ),
        deny_cache_trace(
            "set with a log",
            AllOf::new((window(3, secs(1)), log(8, secs(5)))),
            Agree::SetRefusal,
            3,
            20,
        ),
        deny_cache_trace(
            "limits",
            Limits::new()
                .with(window(4, secs(1)))
                .with(window(12, secs(10))),
            Agree::SetRefusal,
            3,
            21,
        ),
    ];
    assert!(
        answered.iter().all(|&n| n > 50),
        "cached answers per algorithm: {answered:?}"
    );
}

/// stores/deny_cache (The model): a cached refusal is answered without asking the
/// inner store (hits count it); a wait-willing reserve, a multi-key call, a cost
/// above the limit and a call past the refusal's retry_after all go to it; a grant
/// drops the key's refusal.
#[test]
fn a_cached_refusal_is_answered_without_asking_the_inner_store() {
    let window = FixedWindow::new(2, secs(10)).unwrap();
    let probe = Probe::new(MemoryStore::<&'static str, FixedWindow>::new());
    let store = DenyCache::new(probe.clone(), &window).unwrap();
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_store(window, store, clock.clone());
    let cache = || limiter.store();

    assert!(limiter.check(&"k", 1).unwrap().is_allowed());
    assert!(limiter.check(&"k", 1).unwrap().is_allowed());
    let refusal = limiter.check(&"k", 1).unwrap();
    assert_eq!(
        (refusal.source(), refusal.retry_after()),
        (Source::Store, secs(10))
    );
    assert_eq!((probe.calls(), cache().len(), cache().hits()), (3, 1, 0));

    clock.advance(secs(4));
    for _ in 0..5 {
        let cached = limiter.check(&"k", 1).unwrap();
        assert_eq!(
            (cached.source(), cached.retry_after()),
            (Source::Cached, secs(6))
        );
        assert_eq!((cached.limit(), cached.remaining()), (2, 0));
    }
    assert!(!limiter.try_acquire(&"k"));
    assert_eq!(limiter.peek(&"k", 1).unwrap().source(), Source::Cached);
    let answer = futures::executor::block_on(limiter.to_async().check(&"k", 2)).unwrap();
    assert_eq!(answer.source(), Source::Cached); // a larger cost, within the limit
    assert_eq!((probe.calls(), cache().hits()), (3, 8));

    // Calls the cache does not answer.
    assert!(limiter.check(&"k", 3).unwrap().is_never()); // above the limit
    assert!(!limiter.reserve(&"k", 1).unwrap().is_ok()); // willing to wait
    assert!(!limiter.check_all(&["k", "j"], 1).unwrap().is_allowed()); // several keys
    assert!(limiter.check(&"j", 1).unwrap().is_allowed()); // another key
    assert_eq!((probe.calls(), cache().hits()), (7, 8));

    // Past the refusal's retry_after the store is asked again, and its grant
    // drops the refusal.
    clock.advance(secs(6));
    let fresh = limiter.check(&"k", 1).unwrap();
    assert_eq!((fresh.source(), fresh.is_allowed()), (Source::Store, true));
    assert_eq!((probe.calls(), cache().len()), (8, 0));
}

/// stores/deny_cache (Why a cached refusal is certain): a cancel that goes through
/// the cache drops its keys' refusals, so the next call on the key is the store's.
#[test]
fn a_cancel_through_the_deny_cache_drops_the_keys_refusal() {
    let bursty = SmoothBursty::new(1.0).unwrap();
    let probe = Probe::new(MemoryStore::<&'static str, SmoothBursty>::new());
    let limiter = KeyedRateLimiter::with_store(
        bursty,
        DenyCache::new(probe.clone(), &bursty).unwrap(),
        ManualClock::new(),
    );
    assert!(limiter.try_acquire(&"k")); // pay later: the next permit is 1 s away
    let turn = limiter.reserve(&"k", 1).unwrap();
    assert_eq!(turn.delay(), secs(1)); // the 2 s slot is now booked
    let refused = limiter.check(&"k", 1).unwrap();
    assert_eq!(
        (refused.source(), refused.retry_after()),
        (Source::Store, secs(2))
    );
    assert_eq!(limiter.check(&"k", 1).unwrap().source(), Source::Cached);
    let calls = probe.calls();

    turn.cancel().unwrap();
    assert_eq!(probe.cancels(), 1);
    assert!(limiter.store().is_empty());
    let after = limiter.check(&"k", 1).unwrap();
    assert_eq!(
        (after.source(), after.retry_after()),
        (Source::Store, secs(1))
    );
    assert_eq!(probe.calls(), calls + 2);
}

/// `AllOf`: a refused set records nothing, and a member whose refusals count
/// answers the set as if they did not, so the set's `retry_after` is the first
/// instant the call succeeds; the deny cache's docs: it refuses until that
/// `retry_after` and never grants what the store would not.
#[test]
fn a_set_with_a_recording_log_is_refused_from_the_cache_until_the_first_instant_it_grants() {
    let set = AllOf::new((
        FixedWindow::new(100, secs(1)).unwrap(),
        SlidingLog::new(8, secs(5))
            .unwrap()
            .with_rejected_recorded(),
    ));
    let plain = KeyedRateLimiter::with_store(set, MemoryStore::new(), ManualClock::new());
    let cache = DenyCache::new(MemoryStore::new(), &set).unwrap();
    let cached = KeyedRateLimiter::with_store(set, cache, ManualClock::new());
    let at = |t: Nanos| {
        plain.clock().advance_nanos(t - plain.clock().now());
        cached.clock().advance_nanos(t - cached.clock().now());
    };
    // Eight permits logged at 0 s (1), 1 s (3), 2 s (1), 3 s (2) and 3.1 s (1).
    for (t, cost) in [
        (0, 1),
        (SEC, 3),
        (2 * SEC, 1),
        (3 * SEC, 2),
        (3 * SEC + 100 * MS, 1),
    ] {
        at(t);
        assert!(plain.check(&"k", cost).unwrap().is_allowed());
        assert!(cached.check(&"k", cost).unwrap().is_allowed());
    }
    let refused_at = 3 * SEC + 200 * MS;
    at(refused_at);
    let refusal = plain.check(&"k", 1).unwrap();
    // The store's refusal, which the cache learns: the entry of 0 s leaves the log
    // at 5 s, and the refused attempts in between record nothing.
    assert_eq!(refusal, cached.check(&"k", 1).unwrap());
    assert_eq!(refusal.retry_after(), Duration::from_millis(1_800));
    at(5 * SEC - 1);
    assert!(!plain.check(&"k", 1).unwrap().is_allowed());
    let cache_says = cached.check(&"k", 1).unwrap();
    assert!(!cache_says.is_allowed());
    assert_eq!(cache_says.retry_after(), Duration::from_nanos(1));
    at(5 * SEC);
    assert!(plain.check(&"k", 1).unwrap().is_allowed());
    assert!(cached.check(&"k", 1).unwrap().is_allowed());
}

/// stores/deny_cache (DenyCache::new, Why a cached refusal is certain): the
/// algorithms whose refusals count are refused; every other, sets (whatever their
/// members) and an algorithm of one's own are accepted. A failover policy's
/// answer is not cached.
#[test]
fn the_deny_cache_refuses_counted_refusals_and_caches_only_the_stores_own() {
    fn accepts<A: Algorithm>(algorithm: &A) -> Result<(), ConfigError> {
        DenyCache::<_, u64, A>::new(MemoryStore::<u64, A>::new(), algorithm).map(|_| ())
    }
    let log = SlidingLog::new(5, secs(1)).unwrap();
    let attempts = SlidingWindowCounter::new(5, secs(1))
        .unwrap()
        .with_counting(Counting::Attempts);
    assert!(matches!(
        accepts(&log.with_rejected_recorded()),
        Err(ConfigError::Unsupported { .. })
    ));
    assert!(matches!(
        accepts(&attempts),
        Err(ConfigError::Unsupported { .. })
    ));
    assert!(accepts(&log).is_ok());
    assert!(accepts(&SlidingWindowCounter::new(5, secs(1)).unwrap()).is_ok());
    assert!(accepts(&LeakyBucket::queue(3, 1, secs(1)).unwrap()).is_ok());
    assert!(accepts(&SlidingWindowBuckets::dropping(5, secs(1), ms(100)).unwrap()).is_ok());
    assert!(accepts(&AllOf::new((
        FixedWindow::new(1, secs(1)).unwrap(),
        attempts
    )))
    .is_ok());
    assert!(accepts(&Limits::new().with(log.with_rejected_recorded())).is_ok());

    #[derive(Clone)]
    struct Spacing;
    impl Algorithm for Spacing {
        type State = Nanos;
        type Shape = Plain;
        fn initial_state(&self, _now: Nanos) -> Nanos {
            0
        }
        fn reserve<R: Report>(
            &self,
            next: &mut Nanos,
            now: Nanos,
            cost: u64,
            max_wait: Nanos,
        ) -> R {
            if cost > 1 {
                return R::refused(|| Decision::never(1, 0, 0));
            }
            let wait = next.saturating_sub(now);
            if wait > max_wait {
                return R::refused(|| Decision::denied(1, 0, wait - max_wait, wait));
            }
            *next = now.max(*next) + 100 * MS;
            R::granted(
                || Decision::allowed_after(wait, 1, 0, *next - now),
                || Receipt::NONE,
            )
        }
        fn is_replenished(&self, next: &Nanos, now: Nanos) -> bool {
            *next <= now
        }
    }
    assert!(accepts(&Spacing).is_ok());

    // Over a failover store that fails closed: its refusals are not the store's.
    let clock = ManualClock::new();
    let window = FixedWindow::new(1, secs(60)).unwrap();
    let probe = Probe::new(MemoryStore::<&'static str, FixedWindow>::new());
    let failover = FailoverStore::new(probe.clone(), FailurePolicy::Closed)
        .with_clock(clock.clone())
        .with_backoff(Backoff::fixed(secs(1)));
    let limiter = KeyedRateLimiter::with_store(
        window,
        DenyCache::new(failover, &window).unwrap(),
        clock.clone(),
    );
    probe.set(DOWN);
    for _ in 0..3 {
        assert_eq!(
            limiter.check(&"k", 1).unwrap().source(),
            Source::FailedClosed
        );
    }
    assert_eq!((limiter.store().len(), limiter.store().hits()), (0, 0));
    probe.set(UP);
    clock.advance(secs(1));
    assert_eq!(limiter.check(&"k", 1).unwrap().source(), Source::Store);
    assert_eq!(limiter.check(&"k", 1).unwrap().source(), Source::Store); // the store's refusal
    assert_eq!(limiter.check(&"k", 1).unwrap().source(), Source::Cached);
    assert_eq!(limiter.store().inner().stats().recoveries, 1);
}

/// stores/deny_cache (Memory): at most `max_entries` refusals are kept, however
/// many keys are refused; a refusal that finds no room is answered by the store
/// next time, as without the cache.
#[test]
fn the_deny_cache_keeps_at_most_max_entries_under_100_000_refused_keys() {
    let window = FixedWindow::new(1, secs(60)).unwrap();
    let cache = DenyCache::new(MemoryStore::<u64, FixedWindow>::new(), &window)
        .unwrap()
        .with_max_entries(160)
        .unwrap();
    assert_eq!(cache.max_entries(), 160);
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_store(window, cache, clock.clone());
    let mut from_store = 0;
    for round in 0..2u64 {
        for key in round * 50_000..(round + 1) * 50_000 {
            assert!(limiter.check(&key, 1).unwrap().is_allowed());
            assert_eq!(limiter.check(&key, 1).unwrap().source(), Source::Store);
            let again = limiter.check(&key, 1).unwrap();
            assert!(!again.is_allowed());
            if again.source() == Source::Store {
                from_store += 1;
            }
            assert!(
                limiter.store().len() <= 160,
                "{} refusals kept",
                limiter.store().len()
            );
        }
        // Every refusal kept so far has expired: the next round replaces them.
        clock.advance(secs(60));
    }
    assert!(!limiter.store().is_empty());
    assert!(
        limiter.store().hits() >= 2 * 160,
        "hits: {}",
        limiter.store().hits()
    );
    assert!(
        from_store > 90_000,
        "{from_store} refusals answered by the store"
    );
}
