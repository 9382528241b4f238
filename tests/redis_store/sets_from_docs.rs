//! Sets of limits (`AllOf`, `Limits`, nested) through the keyed limiter over the
//! Redis store, held to its docs: "the same decisions as the in-memory store",
//! `check_each` reporting every member "in the same round trip", a set's cancel
//! handing "each member its own receipt", and, on the server's own time, no more
//! grants under concurrent threads than the tightest member allows.
#![cfg(feature = "redis")]

use crate::support::redis::trace::{caller_time_options, NOV_2025};
use crate::support::redis::{unique_prefix, RedisServer, YEAR};
use sluicegate::algorithms::{
    AllOf, Counting, FixedWindow, LeakyBucket, Limits, SlidingLog, SlidingWindowCounter,
    SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::limiters::KeyedReservation;
use sluicegate::stores::redis::{RedisOptions, RedisStore};
use sluicegate::{Decision, Error, KeyedRateLimiter, Verdict};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

type OnRedis<A> = KeyedRateLimiter<&'static str, A, RedisStore<&'static str, A>, ManualClock>;
type InMemory<A> = KeyedRateLimiter<
    &'static str,
    A,
    sluicegate::stores::MemoryStore<&'static str, A>,
    ManualClock,
>;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The same set twice, on one virtual clock at November 2025: in memory, and over
/// Redis at the caller's time under a prefix of the test's own.
fn pair<A: sluicegate::stores::redis::RedisAlgorithm + Clone>(
    server: &RedisServer,
    test: &str,
    set: A,
) -> (InMemory<A>, OnRedis<A>, ManualClock) {
    let clock = ManualClock::new();
    clock.advance_nanos(NOV_2025);
    let store =
        RedisStore::open_with(server.url(), caller_time_options(&unique_prefix(test))).unwrap();
    (
        KeyedRateLimiter::with_clock(set.clone(), clock.clone()),
        KeyedRateLimiter::with_store(set, store, clock.clone()),
        clock,
    )
}

/// A small deterministic generator.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A check with every member's report.
fn each<A, S, C>(
    limiter: &KeyedRateLimiter<&'static str, A, S, C>,
    key: &'static str,
    cost: u64,
) -> (Decision, Vec<Decision>)
where
    A: sluicegate::algorithms::Algorithm,
    S: sluicegate::stores::Store<&'static str, A>,
    C: Clock,
{
    let mut reports = Vec::new();
    let d = limiter
        .check_each(&key, cost, &mut |r| reports.push(r))
        .unwrap();
    (d, reports)
}

/// Redis store docs: "Driven with whole-microsecond times and waits, every decision
/// is identical, field by field, to the in-memory store's"; `check_each` reports
/// every member over Redis "in the same round trip". A random trace of checks,
/// `check_each`, peeks and the `_all` calls on a set of every window-like
/// algorithm with a nested set inside, costs up to past capacity (never).
#[test]
fn a_trace_of_checks_and_reports_on_a_nested_set_decides_as_memory() {
    let server = RedisServer::start();
    let set = AllOf::new((
        AllOf::new((
            FixedWindow::new(5, secs(2)).unwrap(),
            SlidingWindowCounter::new(9, secs(5))
                .unwrap()
                .with_counting(Counting::Attempts),
        )),
        SlidingLog::new(7, secs(4))
            .unwrap()
            .with_rejected_recorded(),
        LeakyBucket::meter(4, 3, secs(1)).unwrap(),
    ));
    let (memory, redis, clock) = pair(&server, "sets-docs-trace", set);
    let keys = ["alice", "bob", "}{"];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut seen = [0usize; 3];
    for i in 0..500 {
        clock.advance(Duration::from_micros(rng.below(400_000)));
        let key = keys[rng.below(3) as usize];
        let cost = 1 + rng.below(6);
        match rng.below(5) {
            0 | 1 => {
                let (m, r) = (each(&memory, key, cost), each(&redis, key, cost));
                assert_eq!(r, m, "call {i}: check_each({key}, {cost})");
                seen[match m.0.verdict() {
                    Verdict::Allowed => 0,
                    Verdict::Denied => 1,
                    Verdict::Never => 2,
                }] += 1;
            }
            2 => assert_eq!(
                redis.check(&key, cost).unwrap(),
                memory.check(&key, cost).unwrap(),
                "call {i}"
            ),
            3 => assert_eq!(
                redis.peek(&key, cost).unwrap(),
                memory.peek(&key, cost).unwrap(),
                "call {i}"
            ),
            _ => {
                let two = [key, keys[rng.below(3) as usize]];
                let (m, r) = (
                    memory.check_all(&two, cost).unwrap(),
                    redis.check_all(&two, cost).unwrap(),
                );
                assert_eq!(r, m, "call {i}: check_all({two:?}, {cost})");
                assert_eq!(
                    redis.peek_all(&two, 1).unwrap(),
                    memory.peek_all(&two, 1).unwrap()
                );
            }
        }
    }
    assert!(
        seen.iter().all(|&n| n > 10),
        "allowed, denied, never: {seen:?}"
    );
}

/// `KeyedReservation`: on a set "the receipt carries every member's own, so any of
/// a key's reservations on a set comes back by the same rule"; Redis store docs:
/// "A cancel ... runs on the server by the Rust rules, for every algorithm and
/// set". Reservations, `reserve_all` and cancels in either order decide and give
/// back over Redis exactly as in memory.
#[test]
fn reservations_and_cancels_on_a_limits_set_give_back_as_in_memory() {
    let server = RedisServer::start();
    let set = Limits::new()
        .with(SmoothBursty::new(2.0).unwrap())
        .with(LeakyBucket::queue(5, 1, secs(1)).unwrap())
        .with(SmoothWarmingUp::new(4.0, secs(2)).unwrap())
        .with(FixedWindow::new(6, secs(60)).unwrap());
    let (memory, redis, clock) = pair(&server, "sets-docs-reserve", set);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut held: Vec<(KeyedReservation<_, _, _, _>, KeyedReservation<_, _, _, _>)> = Vec::new();
    let mut cancelled = 0;
    for i in 0..120 {
        clock.advance(Duration::from_micros(rng.below(700_000)));
        let key = ["a", "b"][rng.below(2) as usize];
        match rng.below(4) {
            0 if !held.is_empty() => {
                // Latest first most of the time, sometimes an older one.
                let at = if rng.below(3) == 0 {
                    rng.below(held.len() as u64) as usize
                } else {
                    held.len() - 1
                };
                let (m, r) = held.remove(at);
                m.cancel().unwrap();
                r.cancel().unwrap();
                cancelled += 1;
            }
            1 => {
                let (m, r) = (
                    memory.reserve_all(&["a", "b"], 1).unwrap(),
                    redis.reserve_all(&["a", "b"], 1).unwrap(),
                );
                assert_eq!(
                    (r.decision(), r.acts_at()),
                    (m.decision(), m.acts_at()),
                    "call {i}: reserve_all"
                );
                held.push((m, r));
            }
            _ => {
                let cost = 1 + rng.below(3);
                let (m, r) = (
                    memory.reserve(&key, cost).unwrap(),
                    redis.reserve(&key, cost).unwrap(),
                );
                assert_eq!(
                    (r.decision(), r.acts_at()),
                    (m.decision(), m.acts_at()),
                    "call {i}: reserve({key}, {cost})"
                );
                held.push((m, r));
            }
        }
        for key in ["a", "b"] {
            assert_eq!(
                redis.peek(&key, 1).unwrap(),
                memory.peek(&key, 1).unwrap(),
                "after call {i}: {key}"
            );
        }
    }
    assert!(cancelled > 10, "{cancelled}");
}

/// README: "A cost above a limit's capacity is answered `Verdict::Never`, and
/// acquires fail at once with `Error::Never`"; "Bad input never panics"; the
/// Redis store decides "the same decisions as the in-memory store". Zero, above
/// capacity and the largest costs on a set over Redis: the in-memory answers, and
/// nothing written.
#[test]
fn zero_never_and_the_largest_costs_on_a_set_answer_as_in_memory() {
    let server = RedisServer::start_own();
    let set = AllOf::new((
        SmoothBursty::new(5.0).unwrap(),
        FixedWindow::new(4, secs(10)).unwrap(),
        SlidingLog::new(8, secs(10)).unwrap(),
    ));
    let (memory, redis, _clock) = pair(&server, "sets-docs-costs", set);
    for cost in [5, 9, 1 << 40, u64::MAX] {
        let (m, r) = (
            memory.check(&"k", cost).unwrap(),
            redis.check(&"k", cost).unwrap(),
        );
        assert!(m.is_never(), "{m:?}");
        assert_eq!(r, m, "check of {cost}");
        assert_eq!(
            redis.check_all(&["k", "j"], cost).unwrap(),
            memory.check_all(&["k", "j"], cost).unwrap()
        );
        assert!(matches!(
            redis.acquire_n(&"k", cost),
            Err(Error::Never { .. })
        ));
        assert!(redis.reserve(&"k", cost).unwrap().decision().is_never());
    }
    assert!(matches!(redis.check(&"k", 0), Err(Error::ZeroCost)));
    assert!(matches!(redis.check_all(&["k"], 0), Err(Error::ZeroCost)));
    assert!(matches!(redis.reserve(&"k", 0), Err(Error::ZeroCost)));
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.connection())
        .unwrap();
    assert!(keys.is_empty(), "refusals and errors wrote {keys:?}");
    // The whole window is still there, on both.
    let whole = memory.check(&"k", 4).unwrap();
    assert!(whole.is_allowed(), "{whole:?}");
    assert_eq!(redis.check(&"k", 4).unwrap(), whole);
}

/// The async keyed handle over Redis: `acquire_all` on a set waits "as long as
/// needed" for every key and member, as the in-memory store's does on the same
/// virtual time (a `ManualClock`'s sleep moves it at once).
#[test]
fn async_acquires_on_a_set_over_redis_wait_as_in_memory() {
    let server = RedisServer::start();
    let set = || {
        AllOf::new((
            FixedWindow::new(2, secs(3)).unwrap(),
            SmoothBursty::new(1.0).unwrap(),
        ))
    };
    let (memory, _, memory_clock) = pair(&server, "sets-docs-async-m", set());
    let (_, redis, redis_clock) = pair(&server, "sets-docs-async-r", set());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (memory, redis) = (memory.to_async(), redis.to_async());
    runtime.block_on(async {
        for i in 0..8 {
            let keys: &[&'static str] = if i % 3 == 0 {
                &["ip", "user"]
            } else {
                &["user"]
            };
            let m = memory.acquire_all(keys, 1).await.unwrap();
            let r = redis.acquire_all(keys, 1).await.unwrap();
            assert_eq!(r, m, "acquire {i} on {keys:?}");
        }
    });
    assert_eq!(redis_clock.now(), memory_clock.now());
    assert!(
        memory_clock.now() > NOV_2025 + 5_000_000_000,
        "the calls waited"
    );
}

/// On the server's own time, eight threads calling `check_all` on a `Limits` set
/// get exactly the tightest member's limit on the shared key, and each thread's
/// own key is charged exactly its grants.
#[test]
fn threads_on_the_servers_time_get_exactly_the_tightest_member_of_a_set() {
    let server = RedisServer::start();
    let hour = secs(3600);
    let set = Limits::new()
        .with(SlidingLog::new(400, hour).unwrap())
        .with(FixedWindow::new(24, YEAR).unwrap())
        .with(LeakyBucket::meter(300, 1, hour).unwrap());
    let options = RedisOptions::default()
        .prefix(unique_prefix("sets-docs-threads"))
        .unwrap();
    let store: RedisStore<String, Limits> = RedisStore::open_with(server.url(), options).unwrap();
    let limiter = KeyedRateLimiter::with_store(set, store, sluicegate::DefaultClock::new());
    let granted = AtomicU64::new(0);
    let deadline = Instant::now() + secs(30);
    let per_thread: Vec<u64> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..8)
            .map(|t| {
                let (limiter, granted) = (&limiter, &granted);
                s.spawn(move || {
                    let keys = ["shared".to_owned(), format!("own-{t}")];
                    let mut mine = 0;
                    for _ in 0..10 {
                        assert!(Instant::now() < deadline, "the hammer is stuck");
                        if limiter.check_all(&keys, 1).unwrap().is_allowed() {
                            mine += 1;
                        }
                    }
                    granted.fetch_add(mine, Ordering::Relaxed);
                    mine
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    assert_eq!(granted.load(Ordering::Relaxed), 24);
    for (t, mine) in per_thread.into_iter().enumerate() {
        let own = limiter.peek(&format!("own-{t}"), 1).unwrap();
        assert_eq!(own.remaining(), 24 - mine - 1, "thread {t}");
    }
}
