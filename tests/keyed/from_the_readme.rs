//! The README's examples and claims, as a newcomer reads them: the quick start, the
//! algorithm table, sets, keyed limiting and the memory store, and reservations.
//! Exact numbers run on virtual time (`ManualClock`); the claims about threads and
//! tasks run on the real clock with bounded assertions.

use sluicegate::algorithms::{
    Algorithm, AllOf, FixedWindow, LeakyBucket, Limits, SlidingLog, SlidingWindowBuckets,
    SlidingWindowCounter, SmoothBursty,
};
use sluicegate::clock::ManualClock;
use sluicegate::stores::MemoryStore;
use sluicegate::{Error, KeyedRateLimiter, RateLimiter, Verdict};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn the_quick_start_calls_answer_by_guavas_rules() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(5.0, clock.clone()).unwrap();
    // The first permit is free; the next is 200 ms away.
    assert_eq!(limiter.acquire().unwrap(), Duration::ZERO);
    assert_eq!(clock.take_sleeps(), vec![Duration::ZERO]);
    // `try_acquire` never waits, and 100 ms is too short for a permit 200 ms away.
    assert!(!limiter.try_acquire());
    assert!(!limiter.try_acquire_n_timeout(2, ms(100)).unwrap());
    assert!(clock.take_sleeps().is_empty(), "a refused try slept");
    let decision = limiter.check(1).unwrap();
    assert!(!decision.is_allowed());
    assert_eq!(decision.retry_after(), ms(200));
    // 100 ms later it is within reach: it waits the rest, and pays for both
    // permits afterwards (Guava's pay-later rule), so the next acquire waits 400 ms.
    clock.advance(ms(100));
    assert!(limiter.try_acquire_n_timeout(2, ms(100)).unwrap());
    assert_eq!(clock.take_sleeps(), vec![ms(100)]);
    assert_eq!(limiter.acquire().unwrap(), ms(400));
    assert_eq!(clock.take_sleeps(), vec![ms(400)]);
}

#[test]
fn the_quick_start_keyed_example_and_its_both_or_neither_rule() {
    let per_user = KeyedRateLimiter::with_clock(
        SlidingWindowCounter::new(100, secs(60)).unwrap(),
        ManualClock::new(),
    );
    assert_eq!(per_user.check(&"alice", 1).unwrap().remaining(), 99);
    assert!(per_user
        .check_all(&["ip:203.0.113.7", "user:alice"], 1)
        .unwrap()
        .is_allowed());
    // Each key of the call counted it once ("alice" is a key of its own): a peek
    // answers what a check would, so 98 would remain after one more.
    assert_eq!(per_user.peek(&"user:alice", 1).unwrap().remaining(), 98);
    assert_eq!(per_user.peek(&"ip:203.0.113.7", 1).unwrap().remaining(), 98);
    assert_eq!(per_user.peek(&"alice", 1).unwrap().remaining(), 98);

    // Both or neither: with one key spent, the call counts on neither.
    let limiter =
        KeyedRateLimiter::with_clock(FixedWindow::new(2, secs(60)).unwrap(), ManualClock::new());
    assert!(limiter.check(&"full", 2).unwrap().is_allowed());
    let refused = limiter.check_all(&["fresh", "full"], 1).unwrap();
    assert!(!refused.is_allowed());
    assert_eq!(refused.retry_after(), secs(60));
    assert_eq!(
        limiter.peek(&"fresh", 1).unwrap().remaining(),
        1,
        "the refused call counted on the free key"
    );
    assert!(limiter.check(&"fresh", 2).unwrap().is_allowed());

    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(5.0, clock.clone()).unwrap();
    for _ in 0..3 {
        limiter.acquire().unwrap();
    }
    assert_eq!(clock.take_sleeps_secs(), vec![0.0, 0.2, 0.2]);
}

/// Polls `future` once, on no executor: `true` if it finished.
fn poll_once<F: std::future::Future + Unpin>(future: &mut F) -> bool {
    futures::executor::block_on(futures::future::poll_immediate(future)).is_some()
}

#[test]
fn the_async_quick_start_runs_on_a_bare_executor_and_a_dropped_acquire_gives_back() {
    let limiter = RateLimiter::warming_up(10.0, secs(3)).unwrap().to_async();
    futures::executor::block_on(async {
        limiter.acquire().await.unwrap();
        limiter.acquire_n(3).await.unwrap();
    });
    // Real time, 2 per second: after a free first permit the next acquire waits
    // 500 ms. Dropped while it waits, it gives its permit back, so the next permit
    // is again at most 500 ms away, not a second.
    let limiter = RateLimiter::bursty(2.0).unwrap().to_async();
    futures::executor::block_on(limiter.acquire()).unwrap();
    let mut waiting = Box::pin(limiter.acquire());
    assert!(!poll_once(&mut waiting), "the second permit came at once");
    drop(waiting);
    let next = limiter.blocking().check(1).unwrap();
    assert!(next.retry_after() <= ms(500), "{:?}", next.retry_after());
}

#[test]
fn waits_dropped_together_give_back_all_of_theirs_in_any_order() {
    for order in [[0, 1, 2], [2, 1, 0], [0, 2, 1], [1, 0, 2]] {
        let limiter = RateLimiter::bursty(2.0).unwrap().to_async();
        futures::executor::block_on(limiter.acquire()).unwrap();
        let mut waits: Vec<Option<_>> = (0..3).map(|_| Some(Box::pin(limiter.acquire()))).collect();
        for wait in &mut waits {
            assert!(!poll_once(wait.as_mut().unwrap()));
        }
        for i in order {
            drop(waits[i].take());
        }
        let next = limiter.blocking().check(1).unwrap();
        assert!(
            next.retry_after() <= ms(500),
            "order {order:?}: {:?}",
            next.retry_after()
        );
    }
}

/// Fills `algorithm` on virtual time with calls of cost 1 at the given steps, and
/// checks after every refusal that its `retry_after` is exact: 1 ns earlier the
/// call is still refused, at it the call passes.
fn retry_after_is_exact<A: Algorithm + sluicegate::CellAlgorithm + Clone>(
    algorithm: A,
    name: &str,
) {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(algorithm, clock.clone());
    let steps = [
        0u64, 1, 7, 130, 999, 1, 0, 0, 450, 2_000, 3, 777, 50, 0, 1_234,
    ];
    let mut refusals = 0;
    for round in 0..60 {
        clock.advance(ms(steps[round % steps.len()]));
        let decision = limiter.check(1).unwrap();
        if decision.is_allowed() {
            continue;
        }
        refusals += 1;
        assert_eq!(decision.verdict(), Verdict::Denied, "{name}");
        let wait = decision.retry_after_nanos();
        assert!(wait > 0, "{name}: refused with no retry_after");
        clock.advance_nanos(wait - 1);
        assert!(
            !limiter.peek(1).unwrap().is_allowed(),
            "{name}: passes 1 ns before its retry_after"
        );
        clock.advance_nanos(1);
        assert!(
            limiter.check(1).unwrap().is_allowed(),
            "{name}: refused at its retry_after"
        );
    }
    assert!(
        refusals > 5,
        "{name}: the trace refused only {refusals} calls"
    );
    // An acquire on a full limit sleeps exactly the retry_after, then is granted
    // with no further wait (recorded as a sleep of zero, as every acquire's is).
    while limiter.check(1).unwrap().is_allowed() {}
    let retry = limiter.check(1).unwrap().retry_after();
    clock.take_sleeps();
    limiter.acquire().unwrap();
    assert_eq!(clock.take_sleeps(), vec![retry, Duration::ZERO], "{name}");
}

#[test]
fn the_window_counters_refuse_with_the_exact_retry_after_at_which_a_call_passes() {
    retry_after_is_exact(FixedWindow::new(3, secs(2)).unwrap(), "fixed window");
    retry_after_is_exact(
        SlidingWindowCounter::new(3, secs(2)).unwrap(),
        "sliding window counter",
    );
    retry_after_is_exact(
        SlidingWindowBuckets::dropping(3, secs(2), ms(500)).unwrap(),
        "buckets, dropping",
    );
    retry_after_is_exact(
        SlidingWindowBuckets::weighted(3, secs(2), ms(500)).unwrap(),
        "buckets, weighted",
    );
    retry_after_is_exact(SlidingLog::new(3, secs(2)).unwrap(), "sliding log");
    retry_after_is_exact(
        SlidingLog::new(3, secs(2))
            .unwrap()
            .with_min_spacing(ms(300)),
        "spaced log",
    );
    retry_after_is_exact(LeakyBucket::meter(3, 2, secs(1)).unwrap(), "leaky meter");
}

/// A cost above `algorithm`'s capacity `capacity`: answered never, and acquires,
/// blocking and async, fail at once with `Error::Never`, sleeping nothing.
fn above_capacity_is_never<
    A: Algorithm + sluicegate::CellAlgorithm + Clone + Send + Sync + 'static,
>(
    algorithm: A,
    capacity: u64,
    name: &str,
) where
    A::State: Send + Sync,
{
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(algorithm.clone(), clock.clone());
    assert!(
        limiter.check(capacity).unwrap().is_allowed(),
        "{name}: the whole capacity at once"
    );
    let over = limiter.check(capacity + 1).unwrap();
    assert!(over.is_never(), "{name}: {over:?}");
    assert_eq!(over.verdict(), Verdict::Never);
    assert!(
        matches!(limiter.acquire_n(capacity + 1), Err(Error::Never { .. })),
        "{name}"
    );
    assert!(matches!(
        futures::executor::block_on(limiter.to_async().acquire_n(capacity + 1)),
        Err(Error::Never { .. })
    ));
    assert!(
        matches!(limiter.acquire_n(0), Err(Error::ZeroCost)),
        "{name}"
    );
    assert!(clock.take_sleeps().is_empty(), "{name}: slept");
    let keyed = KeyedRateLimiter::with_clock(algorithm, clock.clone());
    assert!(
        keyed.check(&"k", capacity + 1).unwrap().is_never(),
        "{name}"
    );
    assert!(
        matches!(
            keyed.acquire_n(&"k", capacity + 1),
            Err(Error::Never { .. })
        ),
        "{name}"
    );
    assert!(clock.take_sleeps().is_empty(), "{name}: slept");
}

#[test]
fn a_cost_above_a_limits_capacity_is_never_and_acquires_fail_at_once() {
    above_capacity_is_never(FixedWindow::new(3, secs(1)).unwrap(), 3, "fixed window");
    above_capacity_is_never(SlidingWindowCounter::new(3, secs(1)).unwrap(), 3, "counter");
    above_capacity_is_never(
        SlidingWindowBuckets::dropping(3, secs(1), ms(100)).unwrap(),
        3,
        "buckets",
    );
    above_capacity_is_never(SlidingLog::new(3, secs(1)).unwrap(), 3, "log");
    above_capacity_is_never(LeakyBucket::meter(3, 1, secs(1)).unwrap(), 3, "meter");
    above_capacity_is_never(LeakyBucket::queue(3, 1, secs(1)).unwrap(), 3, "queue");
    let set = AllOf::new((
        FixedWindow::new(5, secs(1)).unwrap(),
        SlidingLog::new(3, secs(60)).unwrap(),
    ));
    above_capacity_is_never(set, 3, "a set");
}

#[test]
fn a_meter_grants_at_most_b_plus_r_t_over_any_span() {
    // b = 3, r = 2 per second; a greedy caller every 10..=170 ms for a minute.
    let clock = ManualClock::new();
    let limiter =
        RateLimiter::with_clock(LeakyBucket::meter(3, 2, secs(1)).unwrap(), clock.clone());
    let mut grants: Vec<u64> = Vec::new();
    let mut state = 12345u64;
    while clock_ms(&clock) < 60_000 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        clock.advance(ms(10 + (state >> 33) % 161));
        while limiter.try_acquire() {
            grants.push(clock_ms(&clock));
        }
    }
    for i in 0..grants.len() {
        for j in i..grants.len() {
            let span_ms = grants[j] - grants[i];
            let count = (j - i + 1) as u64;
            // count <= 3 + 2 * span / 1000, in whole numbers.
            assert!(
                count * 1000 <= 3 * 1000 + 2 * span_ms,
                "{count} grants in {span_ms} ms"
            );
        }
    }
    // And it is not idle: over a minute it grants close to the bound.
    assert!(grants.len() as u64 >= 100, "{} grants", grants.len());
}

fn clock_ms(clock: &ManualClock) -> u64 {
    use sluicegate::Clock;
    clock.now() / 1_000_000
}

#[test]
fn a_queue_spaces_its_callers_one_interval_apart_and_holds_at_most_b() {
    // b = 3, 2 per second: one caller every 500 ms, three in line at most (the
    // one being served included).
    let clock = ManualClock::new();
    let limiter =
        RateLimiter::with_clock(LeakyBucket::queue(3, 2, secs(1)).unwrap(), clock.clone());
    let turns: Vec<_> = (0..3).map(|_| limiter.reserve(1).unwrap()).collect();
    let delays: Vec<Duration> = turns.iter().map(|r| r.delay()).collect();
    assert_eq!(delays, [Duration::ZERO, ms(500), ms(1000)]);
    let fourth = limiter.reserve(1).unwrap();
    assert!(!fourth.is_ok(), "a fourth caller queued behind three");
    assert_eq!(fourth.decision().retry_after(), ms(500));
}

#[test]
fn a_fixed_window_admits_up_to_twice_its_limit_across_an_edge() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(FixedWindow::new(2, secs(60)).unwrap(), clock.clone());
    clock.advance(ms(59_999));
    assert!(limiter.try_acquire() && limiter.try_acquire());
    assert!(!limiter.try_acquire());
    clock.advance(ms(1));
    assert!(
        limiter.try_acquire() && limiter.try_acquire(),
        "the next window starts full"
    );
    assert!(!limiter.try_acquire());
}

#[test]
fn the_sets_example_and_refusals_that_count_nowhere() {
    let cadence = SmoothBursty::new(2.0)
        .unwrap()
        .with_max_burst(Duration::ZERO)
        .unwrap();
    let set = AllOf::new((cadence, SmoothBursty::new(10.0).unwrap()));
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(set, clock.clone());
    assert!(limiter.try_acquire());
    let refused = limiter.check(1).unwrap();
    assert_eq!((refused.limit_index(), refused.retry_after()), (0, ms(500)));
    limiter.acquire().unwrap();
    assert_eq!(clock.take_sleeps_secs(), vec![0.5]);

    // Limits from configuration: 2 per second and 3 per minute. A client hammering
    // the per-second limit does not use up its minute.
    let limits = Limits::new()
        .with(FixedWindow::new(2, secs(1)).unwrap())
        .with(FixedWindow::new(3, secs(60)).unwrap());
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(limits, clock.clone());
    let mut granted = 0;
    for _ in 0..50 {
        let d = limiter.check(&"client", 1).unwrap();
        if d.is_allowed() {
            granted += 1;
        } else {
            assert_eq!(d.limit_index(), 0, "refused by the per-second limit");
        }
    }
    assert_eq!(granted, 2);
    clock.advance(secs(1));
    assert!(
        limiter.check(&"client", 1).unwrap().is_allowed(),
        "48 refusals used up the minute"
    );
    let refused = limiter.check(&"client", 1).unwrap();
    assert!(!refused.is_allowed());
    assert_eq!(refused.limit_index(), 1, "the minute is spent now");
    assert_eq!(refused.retry_after(), secs(59));
}

#[test]
fn a_string_keyed_limiter_takes_str_blocking_and_async() {
    let limiter: KeyedRateLimiter<
        String,
        FixedWindow,
        MemoryStore<String, FixedWindow>,
        ManualClock,
    > = KeyedRateLimiter::with_clock(FixedWindow::new(2, secs(1)).unwrap(), ManualClock::new());
    assert_eq!(limiter.check("alice", 1).unwrap().remaining(), 1);
    let async_limiter = limiter.to_async();
    let d = futures::executor::block_on(async_limiter.check("alice", 1)).unwrap();
    assert_eq!(d.remaining(), 0, "the async check saw another key");
    assert!(!limiter.try_acquire("alice"));
    assert!(limiter.try_acquire(&"bob".to_owned()));
}

#[test]
fn the_memory_store_forgets_replenished_keys_by_itself() {
    let clock = ManualClock::new();
    let limiter =
        KeyedRateLimiter::with_clock(FixedWindow::new(1, secs(1)).unwrap(), clock.clone());
    let mut most = 0;
    for round in 0..20u64 {
        for i in 0..1_000u64 {
            assert!(limiter.try_acquire(&(round, i)));
        }
        most = most.max(limiter.live_keys());
        clock.advance(secs(2));
    }
    // 20,000 keys seen, at most a few rounds' worth held at once.
    assert!(most <= 4_000, "{most} keys held");
}

#[test]
fn a_capped_store_refuses_new_keys_and_never_evicts_a_limited_one() {
    let clock = ManualClock::new();
    let store = MemoryStore::new()
        .with_shards(1)
        .unwrap()
        .with_max_keys(2)
        .unwrap();
    let limiter =
        KeyedRateLimiter::with_store(FixedWindow::new(1, secs(10)).unwrap(), store, clock.clone());
    assert!(limiter.try_acquire(&"a"));
    assert!(limiter.try_acquire(&"b"));
    assert!(matches!(
        limiter.check(&"c", 1),
        Err(Error::StoreFull { max_keys: 2 })
    ));
    assert!(!limiter.try_acquire(&"c"));
    // The limited keys are still limited: nothing was evicted.
    assert!(!limiter.try_acquire(&"a"));
    assert!(!limiter.try_acquire(&"b"));
    // Once they have replenished, their room goes to new keys.
    clock.advance(secs(10));
    assert!(limiter.try_acquire(&"c"));
}

#[test]
fn the_reservations_example_and_gos_cancel_rule() {
    let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(2.0).unwrap(), ManualClock::new());
    limiter.acquire(&"user:alice").unwrap();
    let both = limiter
        .reserve_all(&["ip:203.0.113.7", "user:alice"], 1)
        .unwrap();
    assert_eq!(both.delay(), ms(500));
    both.cancel().unwrap();
    assert!(limiter.try_acquire(&"ip:203.0.113.7"));
    // Given back on alice too: her next turn is 500 ms away again, not a second.
    assert_eq!(limiter.reserve(&"user:alice", 1).unwrap().delay(), ms(500));

    // Direct, 2 per second: the latest grant gives back all of its permits...
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(2.0, clock.clone()).unwrap();
    limiter.acquire().unwrap();
    let first = limiter.reserve(1).unwrap();
    let second = limiter.reserve(1).unwrap();
    assert_eq!((first.delay(), second.delay()), (ms(500), ms(1000)));
    second.cancel();
    assert_eq!(limiter.check(1).unwrap().retry_after(), ms(1000));
    // ...an earlier one only as far as later grants allow: here nothing, since a
    // later grant acts a whole interval after it...
    let third = limiter.reserve(1).unwrap();
    assert_eq!(third.delay(), ms(1000));
    first.cancel();
    assert_eq!(limiter.check(1).unwrap().retry_after(), ms(1500));
    // ...and nothing once its time to act has passed.
    clock.advance(ms(1100));
    third.cancel();
    assert_eq!(limiter.check(1).unwrap().retry_after(), ms(400));
}

#[test]
fn threads_sharing_a_keyed_limit_on_the_real_clock_never_exceed_it() {
    // An exact log of 100 per minute, hammered by 8 threads on one shared key and
    // one key each: the test ends well inside the minute, so exactly 100 pass on
    // the shared key and exactly 20 on each own key.
    let limiter = Arc::new(KeyedRateLimiter::new(
        SlidingLog::new(100, secs(60)).unwrap(),
    ));
    let shared = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (limiter, shared) = (limiter.clone(), shared.clone());
            std::thread::spawn(move || {
                let own = format!("own:{t}");
                let mut mine = 0;
                for _ in 0..50 {
                    if limiter.try_acquire("shared") {
                        shared.fetch_add(1, Ordering::Relaxed);
                    }
                    if limiter.check(own.as_str(), 1).unwrap().is_allowed() {
                        mine += 1;
                    }
                }
                for _ in 0..50 {
                    if limiter.try_acquire(own.as_str()) {
                        mine += 1;
                    }
                }
                mine
            })
        })
        .collect();
    let own: Vec<u64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(
        started.elapsed() < secs(50),
        "too slow for the window to hold"
    );
    assert_eq!(shared.load(Ordering::Relaxed), 100);
    assert_eq!(own, vec![100; 8]);
}

#[test]
fn tasks_sharing_an_async_limit_are_paced_on_the_real_clock() {
    // 8 tasks on a multi-threaded runtime, 3 permits each, at 40 per second from
    // cold (Guava's bursty limiter starts with nothing stored): 24 grants take at
    // least 23 intervals of 25 ms.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Read before the limiter exists: it saves permits from its creation on, so a
    // machine that stalls between the two lines must not move `started` past that.
    let started = Instant::now();
    let limiter = RateLimiter::bursty(40.0).unwrap().to_async();
    let waited: Vec<Duration> = runtime.block_on(async {
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let limiter = limiter.clone();
                tokio::spawn(async move {
                    let mut waited = Duration::ZERO;
                    for _ in 0..3 {
                        waited += limiter.acquire().await.unwrap();
                    }
                    waited
                })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.push(task.await.unwrap());
        }
        all
    });
    let elapsed = started.elapsed();
    assert!(elapsed >= ms(23 * 25 - 5), "{elapsed:?}");
    assert!(elapsed <= ms(23 * 25) + secs(3), "{elapsed:?}");
    // The longest any task waited in total is bounded by the whole schedule.
    assert!(
        waited.iter().all(|w| *w <= ms(23 * 25) + secs(3)),
        "{waited:?}"
    );
}
