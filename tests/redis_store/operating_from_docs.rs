//! Operating the Redis store when Redis is slow, down or hot, checked against what
//! the README ("Operating the Redis store") and the docs of `stores::failover`,
//! `stores::deny_cache`, `stores::lease` and `RedisOptions` promise: each failure
//! policy on a killed and on a paused server, the wrappers stacked on each other,
//! blocking and async calls, sets of limits, and deadlines that keep a call that
//! gave up from landing once the server resumes.
//!
//! Time bounds are only "within the timeout plus a margin"; the "no round trip"
//! claims are counted with the server's own `INFO commandstats`. The failover
//! stores run their back-off on a `ManualClock` where a test needs to say when it
//! ends, and on the real clock where threads race.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;
use redis_support::{calls, unique_prefix, RedisServer};
use sluicegate::algorithms::{AllOf, FixedWindow, SmoothBursty};
use sluicegate::clock::ManualClock;
use sluicegate::stores::deny_cache::DenyCache;
use sluicegate::stores::failover::{Backoff, Event, FailoverStore, FailurePolicy};
use sluicegate::stores::lease::LeasedStore;
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore, TimeSource};
use sluicegate::{Applied, ConfigError, Decision, DefaultClock, Error, KeyedRateLimiter, Source};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

/// The connect and response timeout of every store here.
const TIMEOUT: Duration = Duration::from_millis(200);
/// What a call may take beyond its timeout on a loaded two-core machine.
const MARGIN: Duration = Duration::from_millis(1500);
/// One day: windows this long do not roll over during a test.
const DAY: Duration = Duration::from_secs(24 * 3600);

type Fw = FixedWindow;
type Redis<A = Fw> = RedisStore<String, A>;

pub(crate) fn day_window(limit: u64) -> Fw {
    FixedWindow::new(limit, DAY).unwrap()
}

fn options(prefix: &str) -> RedisOptions {
    RedisOptions::default()
        .prefix(prefix)
        .unwrap()
        .connect_timeout(TIMEOUT)
        .response_timeout(TIMEOUT)
}

pub(crate) fn redis<A: RedisAlgorithm>(server: &RedisServer, prefix: &str) -> Redis<A> {
    RedisStore::open_with(server.url(), options(prefix)).unwrap()
}

/// Runs `f`, asserting it returned within the timeout plus the margin.
fn bounded<T>(what: &str, timeout: Duration, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    assert!(
        took <= timeout + MARGIN,
        "{what} took {took:?}, over the timeout {timeout:?} plus {MARGIN:?}"
    );
    out
}

/// What a plain store on `prefix` says is left of `key`. A peek changes nothing
/// and answers what a reserve of 1 would: the permits left after that one.
pub(crate) fn remaining_on_redis(server: &RedisServer, prefix: &str, limit: u64, key: &str) -> u64 {
    let plain: Redis = redis(server, prefix);
    let limiter = KeyedRateLimiter::with_store(day_window(limit), plain, DefaultClock::new());
    let d = limiter.peek(key, 1).unwrap();
    assert_eq!(d.source(), Source::Store);
    assert!(d.is_allowed(), "{key} is spent: {d:?}");
    d.remaining() + 1
}

/// The number of `FCALL`s the server ran, waiting first for it to take in what
/// reached it while it was paused.
fn fcalls_settled(admin: &mut redis::Connection) -> u64 {
    std::thread::sleep(Duration::from_millis(300));
    let _: String = redis::cmd("PING").query(admin).unwrap();
    calls(admin, "fcall")
}

/// Asserts that `err` is a store error saying `applied`, whose source is an
/// I/O error of kind `TimedOut` when `timed_out`.
fn assert_store_error(err: &Error, applied: Applied, timed_out: bool) {
    match err {
        Error::Store(e) => assert_eq!(e.applied(), applied, "{err}"),
        other => panic!("expected Error::Store, got {other:?}"),
    }
    if timed_out {
        let source = std::error::Error::source(err).expect("a store error has a source");
        let io = source
            .downcast_ref::<std::io::Error>()
            .unwrap_or_else(|| panic!("source is not an io::Error: {source}"));
        assert_eq!(io.kind(), std::io::ErrorKind::TimedOut, "{io}");
    }
}

// ---------------------------------------------------------------------------
// Each policy on a killed and on a paused server.
// ---------------------------------------------------------------------------

/// Every policy, with a local share of 5 a day for `Local`.
fn policies() -> Vec<FailurePolicy<Fw>> {
    vec![
        FailurePolicy::Closed,
        FailurePolicy::Open,
        FailurePolicy::Local(day_window(5)),
    ]
}

fn policy_source(policy: &FailurePolicy<Fw>) -> Source {
    match policy {
        FailurePolicy::Closed => Source::FailedClosed,
        FailurePolicy::Open => Source::Unchecked,
        FailurePolicy::Local(_) => Source::Local,
    }
}

type Seen = Arc<Mutex<Vec<(Source, Option<Error>)>>>;
pub(crate) type Failover<C = ManualClock> = FailoverStore<Redis, String, Fw, C>;

/// A limiter of 10 a day on Redis, failing over by `policy` with the default
/// back-off (1 s doubling) on `clock`, recording every degraded decision.
pub(crate) fn failover_limiter(
    server: &RedisServer,
    prefix: &str,
    policy: FailurePolicy<Fw>,
    clock: &ManualClock,
) -> (KeyedRateLimiter<String, Fw, Failover, ManualClock>, Seen) {
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    let store = FailoverStore::new(redis(server, prefix), policy)
        .with_clock(clock.clone())
        .on_degraded(move |event: &Event<'_>| {
            log.lock()
                .unwrap()
                .push((event.source, event.error.cloned()));
        });
    assert_eq!(store.backoff(), Backoff::default());
    let limiter = KeyedRateLimiter::with_store(day_window(10), store, clock.clone());
    (limiter, seen)
}

/// Asserts that `d`, the `n`th decision (from 0) of an outage, is what `policy`
/// answers at a back-off `retry_after` from its end.
fn assert_policy_decision(policy: &FailurePolicy<Fw>, d: &Decision, n: u64, retry_after: Duration) {
    assert_eq!(d.source(), policy_source(policy), "call {n}: {d:?}");
    assert!(d.source().is_degraded());
    match policy {
        FailurePolicy::Closed => {
            assert!(!d.is_allowed(), "call {n}: {d:?}");
            assert_eq!((d.limit(), d.remaining()), (0, 0), "call {n}");
            assert_eq!(d.retry_after(), retry_after, "call {n}");
        }
        FailurePolicy::Open => {
            assert!(d.is_allowed(), "call {n}: {d:?}");
            assert_eq!((d.limit(), d.remaining()), (0, 0), "call {n}");
        }
        FailurePolicy::Local(_) => {
            assert_eq!(d.is_allowed(), n < 5, "call {n}: {d:?}");
            assert_eq!(d.limit(), 5, "call {n}");
            assert_eq!(d.remaining(), 4u64.saturating_sub(n), "call {n}");
        }
    }
}

/// The stats counter of `policy`'s decisions.
fn policy_count(policy: &FailurePolicy<Fw>, stats: sluicegate::stores::failover::Stats) -> u64 {
    match policy {
        FailurePolicy::Closed => stats.failed_closed,
        FailurePolicy::Open => stats.unchecked,
        FailurePolicy::Local(_) => stats.local,
    }
}

#[test]
fn each_policy_answers_a_killed_server_within_the_timeout_and_leaves_the_restarted_one_alone_until_the_back_off_ends(
) {
    for policy in policies() {
        let mut server = RedisServer::start_own();
        let prefix = unique_prefix("killed");
        let clock = ManualClock::new();
        let (limiter, seen) = failover_limiter(&server, &prefix, policy.clone(), &clock);
        let what = format!("{policy:?}");

        let healthy = limiter.check("k", 1).unwrap();
        assert_eq!(
            (healthy.source(), healthy.remaining()),
            (Source::Store, 9),
            "{what}"
        );
        assert!(!limiter.store().is_degraded());

        server.kill();
        // The first call asks the dead server, fails, and is answered by the
        // policy; the next ones are answered at once.
        for n in 0..6 {
            let d = bounded(&what, TIMEOUT, || limiter.check("k", 1)).unwrap();
            assert_policy_decision(&policy, &d, n, Duration::from_secs(1));
        }
        assert!(limiter.store().is_degraded(), "{what}");
        // `try_acquire` on another key: refused only by the closed policy.
        let expected = !matches!(policy, FailurePolicy::Closed);
        assert_eq!(
            bounded(&what, TIMEOUT, || limiter.try_acquire("x")),
            expected,
            "{what}"
        );
        let stats = limiter.store().stats();
        assert_eq!(
            (stats.failures, stats.probes, stats.recoveries),
            (1, 0, 0),
            "{what}: {stats:?}"
        );
        assert_eq!(policy_count(&policy, stats), 7, "{what}: {stats:?}");

        // The observer saw every policy decision; only the call that asked the
        // store carries its error, a refused connection that applied nothing.
        {
            let seen = seen.lock().unwrap();
            assert_eq!(seen.len(), 7, "{what}");
            assert!(
                seen.iter().all(|(s, _)| *s == policy_source(&policy)),
                "{what}"
            );
            let errors: Vec<&Error> = seen.iter().filter_map(|(_, e)| e.as_ref()).collect();
            assert_eq!(errors.len(), 1, "{what}: {seen:?}");
            assert!(
                seen[0].1.is_some(),
                "{what}: the first call is the one that asked"
            );
            assert_store_error(errors[0], Applied::No, false);
        }

        // A server back before the back-off ends is not asked.
        server.restart();
        let mut admin = server.connection();
        if matches!(policy, FailurePolicy::Closed) {
            clock.advance(Duration::from_millis(300));
            let d = limiter.check("k", 1).unwrap();
            assert_eq!(
                d.retry_after(),
                Duration::from_millis(700),
                "{what}: the rest of the back-off"
            );
        }
        for _ in 0..3 {
            let d = limiter.check("k", 1).unwrap();
            assert_eq!(d.source(), policy_source(&policy), "{what}");
        }
        assert_eq!(
            calls(&mut admin, "fcall"),
            0,
            "{what}: a backed-off store makes no round trip"
        );

        // Once it ends, one call probes and the store decides again (a new,
        // empty server: the key starts afresh).
        clock.advance(Duration::from_secs(1));
        let probe = limiter.check("k", 1).unwrap();
        assert_eq!(
            (probe.source(), probe.remaining()),
            (Source::Store, 9),
            "{what}"
        );
        assert!(!limiter.store().is_degraded(), "{what}");
        let next = limiter.check("k", 1).unwrap();
        assert_eq!(
            (next.source(), next.remaining()),
            (Source::Store, 8),
            "{what}"
        );
        let stats = limiter.store().stats();
        assert_eq!(
            (stats.failures, stats.probes, stats.recoveries),
            (1, 1, 1),
            "{what}: {stats:?}"
        );
        assert!(calls(&mut admin, "fcall") >= 2, "{what}");
    }
}

#[test]
fn each_policy_answers_a_paused_server_within_the_timeout_sends_nothing_while_backed_off_and_nothing_late_lands(
) {
    for policy in policies() {
        let mut server = RedisServer::start_own();
        let prefix = unique_prefix("paused");
        let clock = ManualClock::new();
        let (limiter, seen) = failover_limiter(&server, &prefix, policy.clone(), &clock);
        let what = format!("{policy:?}");
        let mut admin = server.connection();

        assert_eq!(limiter.check("k", 1).unwrap().source(), Source::Store);
        let before = calls(&mut admin, "fcall");

        server.pause();
        for n in 0..20 {
            let d = bounded(&what, TIMEOUT, || limiter.check("k", 1)).unwrap();
            assert_policy_decision(&policy, &d, n, Duration::from_secs(1));
        }
        // The one call that asked timed out waiting for its reply.
        {
            let seen = seen.lock().unwrap();
            let errors: Vec<&Error> = seen.iter().filter_map(|(_, e)| e.as_ref()).collect();
            assert_eq!(errors.len(), 1, "{what}");
            assert_store_error(errors[0], Applied::Unknown, true);
            let text = errors[0].to_string();
            assert!(
                text.contains(
                    "timed out after 200ms waiting for the step's reply (the response timeout)"
                ),
                "{what}: {text}"
            );
        }
        server.resume();

        // Only the call that timed out reached the server, and it was past its
        // deadline: the key still has 9 left.
        assert_eq!(fcalls_settled(&mut admin), before + 1, "{what}");
        assert_eq!(remaining_on_redis(&server, &prefix, 10, "k"), 9, "{what}");
        // Still backed off on the store's clock: answered by the policy, no call
        // (the peek just made is the only one since).
        assert_eq!(
            limiter.check("k", 1).unwrap().source(),
            policy_source(&policy),
            "{what}"
        );
        assert_eq!(
            limiter.peek("k", 1).unwrap().source(),
            policy_source(&policy),
            "{what}"
        );
        assert_eq!(calls(&mut admin, "fcall"), before + 2, "{what}");

        clock.advance(Duration::from_secs(1));
        let probe = limiter.check("k", 1).unwrap();
        assert_eq!(
            (probe.source(), probe.remaining()),
            (Source::Store, 8),
            "{what}"
        );
        let stats = limiter.store().stats();
        assert_eq!(
            (stats.failures, stats.probes, stats.recoveries),
            (1, 1, 1),
            "{what}: {stats:?}"
        );
        assert_eq!(policy_count(&policy, stats), 22, "{what}: {stats:?}");
    }
}

#[test]
fn while_one_caller_probes_a_paused_server_the_others_are_answered_at_once_and_a_failed_probe_doubles_the_back_off(
) {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("probe");
    let clock = ManualClock::new();
    // A long response timeout, so that the probe is certainly in flight while
    // the other caller asks.
    let timeout = Duration::from_secs(2);
    let store = FailoverStore::new(
        RedisStore::open_with(server.url(), options(&prefix).response_timeout(timeout)).unwrap(),
        FailurePolicy::Closed,
    )
    .with_clock(clock.clone());
    let limiter = Arc::new(KeyedRateLimiter::with_store(
        day_window(10),
        store,
        clock.clone(),
    ));
    assert_eq!(limiter.check("k", 1).unwrap().source(), Source::Store);

    server.pause();
    let first = bounded("first failure", timeout, || limiter.check("k", 1)).unwrap();
    assert_eq!(
        (first.source(), first.retry_after()),
        (Source::FailedClosed, Duration::from_secs(1))
    );

    clock.advance(Duration::from_secs(1));
    let prober = {
        let limiter = Arc::clone(&limiter);
        std::thread::spawn(move || bounded("probe", timeout, || limiter.check("k", 1)).unwrap())
    };
    let start = Instant::now();
    while limiter.store().stats().probes == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the probe never started"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // The probe is in flight: another caller keeps to the policy, at once, with
    // the initial back-off as its retry_after.
    let other = bounded("other caller", Duration::ZERO, || limiter.check("k", 1)).unwrap();
    assert_eq!(
        (other.source(), other.retry_after()),
        (Source::FailedClosed, Duration::from_secs(1))
    );
    assert!(limiter.store().is_degraded());
    let probed = prober.join().unwrap();
    // The failed probe doubled the back-off.
    assert_eq!(
        (probed.source(), probed.retry_after()),
        (Source::FailedClosed, Duration::from_secs(2))
    );
    let stats = limiter.store().stats();
    assert_eq!(
        (stats.failures, stats.probes, stats.recoveries),
        (2, 1, 0),
        "{stats:?}"
    );

    server.resume();
    clock.advance(Duration::from_secs(1));
    let waiting = limiter.check("k", 1).unwrap();
    assert_eq!(
        (waiting.source(), waiting.retry_after()),
        (Source::FailedClosed, Duration::from_secs(1))
    );
    clock.advance(Duration::from_secs(1));
    let recovered = limiter.check("k", 1).unwrap();
    assert_eq!(
        (recovered.source(), recovered.remaining()),
        (Source::Store, 8)
    );

    // A recovery resets the back-off: the next outage starts at 1 s again.
    server.pause();
    let again = bounded("next outage", timeout, || limiter.check("k", 1)).unwrap();
    assert_eq!(
        (again.source(), again.retry_after()),
        (Source::FailedClosed, Duration::from_secs(1))
    );
    server.resume();
}

// ---------------------------------------------------------------------------
// The plain store's failures and deadlines.
// ---------------------------------------------------------------------------

#[test]
fn a_plain_store_fails_a_killed_server_s_calls_at_once_with_nothing_applied_blocking_and_async() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("plain-killed");
    let limiter =
        KeyedRateLimiter::with_store(day_window(10), redis(&server, &prefix), DefaultClock::new());
    assert!(limiter.try_acquire("k"));
    server.kill();
    let err = bounded("check", TIMEOUT, || limiter.check("k", 1)).unwrap_err();
    assert_store_error(&err, Applied::No, false);
    assert!(!bounded("try_acquire", TIMEOUT, || limiter.try_acquire("k")));
    let handle = limiter.to_async();
    let err = bounded("async check", TIMEOUT, || {
        redis_support::current_thread_runtime().block_on(handle.check("k", 1))
    })
    .unwrap_err();
    assert_store_error(&err, Applied::No, false);

    // A restart between calls loses no call, blocking or async.
    server.restart();
    let d = limiter.check("k", 1).unwrap();
    assert_eq!(d.remaining(), 9);
    let d = redis_support::current_thread_runtime()
        .block_on(handle.check("k", 1))
        .unwrap();
    assert_eq!(d.remaining(), 8);
}

#[test]
fn a_plain_store_fails_a_paused_server_s_calls_within_the_response_timeout_and_none_lands_after() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("plain-paused");
    let limiter =
        KeyedRateLimiter::with_store(day_window(10), redis(&server, &prefix), DefaultClock::new());
    let handle = limiter.to_async();
    let rt = redis_support::current_thread_runtime();
    assert!(limiter.try_acquire("k"));
    assert!(rt.block_on(handle.check("k", 1)).unwrap().is_allowed());

    server.pause();
    let expected = "timed out after 200ms waiting for the step's reply (the response timeout)";
    let err = bounded("check", TIMEOUT, || limiter.check("k", 1)).unwrap_err();
    assert_store_error(&err, Applied::Unknown, true);
    assert!(err.to_string().contains(expected), "{err}");
    assert!(!bounded("try_acquire", TIMEOUT, || limiter.try_acquire("k")));
    let err = bounded("async check", TIMEOUT, || rt.block_on(handle.check("k", 1))).unwrap_err();
    assert_store_error(&err, Applied::Unknown, true);
    assert!(err.to_string().contains(expected), "{err}");
    // The async connection that timed out is not reused: the next async call
    // opens another and meets the connect timeout (nothing applied), or is sent
    // and meets the response timeout.
    let err = bounded("async reserve", TIMEOUT, || {
        rt.block_on(handle.reserve("k", 1))
    })
    .err()
    .unwrap();
    match &err {
        Error::Store(e) if e.applied() == Applied::No => {
            assert_store_error(&err, Applied::No, true)
        }
        _ => assert_store_error(&err, Applied::Unknown, true),
    }
    server.resume();

    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        remaining_on_redis(&server, &prefix, 10, "k"),
        8,
        "a call that gave up landed"
    );
}

#[test]
fn a_zero_response_timeout_is_one_millisecond_not_for_ever() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("zero-timeout");
    let store: Redis = RedisStore::open_with(
        server.url(),
        options(&prefix).response_timeout(Duration::ZERO),
    )
    .unwrap();
    let limiter = KeyedRateLimiter::with_store(day_window(10), store, DefaultClock::new());
    // Opens the connection. A deadline 1 ms after sending may pass even on a
    // healthy server, so the answer may be an `EXPIRED` refusal.
    let _ = limiter.check("k", 1);
    server.pause();
    let err = bounded("check", Duration::from_millis(1), || limiter.check("k", 1)).unwrap_err();
    server.resume();
    assert_store_error(&err, Applied::Unknown, true);
    assert!(err.to_string().contains("timed out after 1ms"), "{err}");
}

#[test]
fn a_fresh_store_on_a_paused_server_fails_within_its_connect_and_response_timeouts() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("fresh-paused");
    server.pause();
    let limiter =
        KeyedRateLimiter::with_store(day_window(10), redis(&server, &prefix), DefaultClock::new());
    let err = bounded("first call", TIMEOUT * 2, || limiter.check("k", 1)).unwrap_err();
    server.resume();
    match &err {
        Error::Store(_) => {}
        other => panic!("expected Error::Store, got {other:?}"),
    }
    let source = std::error::Error::source(&err).unwrap();
    let io = source.downcast_ref::<std::io::Error>().unwrap();
    assert_eq!(io.kind(), std::io::ErrorKind::TimedOut, "{io}");
}

#[test]
fn with_the_deadline_check_turned_off_a_call_that_gave_up_does_land() {
    // The control for the deadline tests: `deadline_slack(Duration::MAX)` turns
    // the check off, and the call that timed out during the pause is applied.
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("no-deadline");
    let store: Redis =
        RedisStore::open_with(server.url(), options(&prefix).deadline_slack(Duration::MAX))
            .unwrap();
    let limiter = KeyedRateLimiter::with_store(day_window(10), store, DefaultClock::new());
    assert!(limiter.try_acquire("k"));
    server.pause();
    let err = limiter.check("k", 1).unwrap_err();
    assert_store_error(&err, Applied::Unknown, true);
    server.resume();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(remaining_on_redis(&server, &prefix, 10, "k"), 8);
}

#[test]
fn the_caller_s_clock_without_an_expiry_grace_is_refused_by_every_constructor() {
    let caller = RedisOptions::default().time_source(TimeSource::Caller);
    let client = redis::Client::open("redis://127.0.0.1:1/").unwrap();
    let err = Redis::<Fw>::from_client(client, caller.clone())
        .err()
        .unwrap();
    assert!(
        matches!(
            err,
            ConfigError::MissingSetting {
                what: "expiry_grace",
                ..
            }
        ),
        "{err:?}"
    );
    let err = Redis::<Fw>::open_cluster(["redis://127.0.0.1:1/"], caller.clone())
        .err()
        .unwrap();
    assert!(
        matches!(
            err,
            ConfigError::MissingSetting {
                what: "expiry_grace",
                ..
            }
        ),
        "{err:?}"
    );
    let graced = caller.expiry_grace(Duration::ZERO);
    let client = redis::Client::open("redis://127.0.0.1:1/").unwrap();
    assert!(Redis::<Fw>::from_client(client, graced).is_ok());
}

// ---------------------------------------------------------------------------
// What counts as a failure, and cancels.
// ---------------------------------------------------------------------------

#[test]
fn a_configuration_the_store_cannot_run_is_the_call_s_own_error_not_a_failure() {
    // Not whole microseconds: refused by the Redis store before anything is
    // sent, so even a dead server makes it the call's own error, returned as it
    // is, and the failover store is not degraded by it.
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("bad-config");
    let odd = FixedWindow::new(10, Duration::from_nanos(1_000_000_500)).unwrap();
    let store: Failover<DefaultClock> =
        FailoverStore::new(redis(&server, &prefix), FailurePolicy::Open);
    let limiter = KeyedRateLimiter::with_store(odd, store, DefaultClock::new());
    let live = limiter.check("k", 1);
    server.kill();
    let dead = limiter.check("k", 1);
    for result in [live, dead] {
        match result {
            Err(Error::Store(e)) => {
                panic!("a configuration error reported as a store failure: {e}")
            }
            Err(_) => {}
            Ok(d) => panic!("answered {d:?} instead of the call's own error"),
        }
    }
    assert!(!limiter.store().is_degraded());
    assert_eq!(limiter.store().stats().failures, 0);
}

#[test]
fn cancels_of_the_store_s_grants_go_to_it_while_healthy_and_are_dropped_while_backed_off() {
    // One permit per 10 s: each reserve after the first owes 10 s more.
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("cancels");
    let clock = ManualClock::new();
    let rate = SmoothBursty::new(0.1).unwrap();
    let store = FailoverStore::new(
        RedisStore::<String, SmoothBursty>::open_with(server.url(), options(&prefix)).unwrap(),
        FailurePolicy::Closed,
    )
    .with_clock(clock.clone());
    let limiter = KeyedRateLimiter::with_store(rate, store, clock.clone());
    let now = limiter.reserve("k", 1).unwrap();
    assert_eq!(now.delay(), Duration::ZERO);
    let queued = limiter.reserve("k", 1).unwrap();
    // About 9 s (the first grant spent the 0.1 permit a 1 s burst stores), then 19 s.
    assert!(
        queued.delay() > Duration::from_secs(8),
        "{:?}",
        queued.delay()
    );
    let more = limiter.reserve("k", 1).unwrap();
    assert!(more.delay() > Duration::from_secs(18), "{:?}", more.delay());
    // Healthy: the cancel reaches Redis and the last turn comes back.
    more.cancel().unwrap();
    let peek = limiter.peek("k", 1).unwrap();
    assert!(peek.retry_after() < Duration::from_secs(21), "{peek:?}");
    assert!(peek.retry_after() > Duration::from_secs(15), "{peek:?}");

    server.pause();
    let failed = bounded("failure", TIMEOUT, || limiter.check("other", 1)).unwrap();
    assert_eq!(failed.source(), Source::FailedClosed);
    // Backed off: the cancel is dropped at once, and counted.
    bounded("dropped cancel", Duration::ZERO, || queued.cancel()).unwrap();
    assert_eq!(limiter.store().stats().dropped_cancels, 1);
    server.resume();

    clock.advance(Duration::from_secs(1));
    let peek = limiter.peek("k", 1).unwrap();
    assert_eq!(peek.source(), Source::Store);
    // Two turns still owed (about 19 s), not one (about 9 s): the dropped
    // cancel gave nothing back.
    assert!(peek.retry_after() > Duration::from_secs(15), "{peek:?}");
}

#[test]
fn a_local_grant_s_cancel_goes_back_to_the_local_share() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("local-cancel");
    let clock = ManualClock::new();
    let (limiter, _) = failover_limiter(
        &server,
        &prefix,
        FailurePolicy::Local(day_window(2)),
        &clock,
    );
    assert!(limiter.try_acquire("k"));
    server.kill();
    let r = limiter.reserve("k", 1).unwrap();
    assert_eq!(
        (r.decision().source(), r.decision().remaining()),
        (Source::Local, 1)
    );
    r.cancel().unwrap();
    let d = limiter.check("k", 1).unwrap();
    assert_eq!(
        (d.source(), d.remaining()),
        (Source::Local, 1),
        "the cancel gave the permit back"
    );
    assert_eq!(limiter.store().stats().dropped_cancels, 0);
}

// ---------------------------------------------------------------------------
// Sets of limits.
// ---------------------------------------------------------------------------

type Pair = AllOf<(Fw, Fw)>;

#[test]
fn a_set_fails_over_to_its_local_share_member_by_member() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("set-local");
    let clock = ManualClock::new();
    let set = AllOf::new((day_window(10), day_window(3)));
    let share = AllOf::new((day_window(5), day_window(2)));
    let store = FailoverStore::new(
        RedisStore::<String, Pair>::open_with(server.url(), options(&prefix)).unwrap(),
        FailurePolicy::Local(share),
    )
    .with_clock(clock.clone());
    let limiter = KeyedRateLimiter::with_store(set, store, clock.clone());

    let mut left = Vec::new();
    let d = limiter
        .check_each("k", 1, &mut |d| left.push((d.source(), d.remaining())))
        .unwrap();
    assert_eq!((d.source(), d.remaining()), (Source::Store, 2));
    assert_eq!(left, [(Source::Store, 9), (Source::Store, 2)]);

    server.kill();
    let mut left = Vec::new();
    let d = bounded("set", TIMEOUT, || {
        limiter.check_each("k", 1, &mut |d| left.push((d.source(), d.remaining())))
    })
    .unwrap();
    assert_eq!((d.source(), d.remaining()), (Source::Local, 1));
    assert_eq!(left, [(Source::Local, 4), (Source::Local, 1)]);
    assert!(limiter.check("k", 1).unwrap().is_allowed());
    let refused = limiter.check("k", 1).unwrap();
    assert_eq!(
        (
            refused.source(),
            refused.is_allowed(),
            refused.limit_index()
        ),
        (Source::Local, false, 1)
    );

    server.restart();
    clock.advance(Duration::from_secs(1));
    let d = limiter.check("k", 1).unwrap();
    assert_eq!(
        (d.source(), d.remaining()),
        (Source::Store, 2),
        "a new, empty server"
    );
}

#[test]
fn a_cached_refusal_of_a_set_keeps_answering_while_the_server_is_paused() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("set-cache");
    let set = AllOf::new((day_window(10), day_window(2)));
    let store = DenyCache::new(
        RedisStore::<String, Pair>::open_with(server.url(), options(&prefix)).unwrap(),
        &set,
    )
    .unwrap();
    let limiter = KeyedRateLimiter::with_store(set, store, DefaultClock::new());
    assert!(limiter.try_acquire("k") && limiter.try_acquire("k"));
    let refused = limiter.check("k", 1).unwrap();
    assert_eq!(
        (refused.source(), refused.is_allowed()),
        (Source::Store, false)
    );
    server.pause();
    for _ in 0..5 {
        let d = bounded("cached", Duration::ZERO, || limiter.check("k", 1)).unwrap();
        assert_eq!(
            (d.source(), d.is_allowed(), d.limit_index()),
            (Source::Cached, false, 1)
        );
    }
    assert_eq!(limiter.store().hits(), 5);
    server.resume();
}

// ---------------------------------------------------------------------------
// Stacking the wrappers.
// ---------------------------------------------------------------------------

#[test]
fn a_deny_cache_over_a_failover_store_keeps_refusing_the_hot_key_and_never_caches_the_policy_s_answers_eight_threads(
) {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("cache-over-failover");
    let limit = 5;
    let window = day_window(limit);
    let failover: Failover<DefaultClock> =
        FailoverStore::new(redis(&server, &prefix), FailurePolicy::Closed)
            .with_backoff(Backoff::fixed(Duration::from_millis(300)));
    let store = DenyCache::new(failover, &window).unwrap();
    let limiter = Arc::new(KeyedRateLimiter::with_store(
        window,
        store,
        DefaultClock::new(),
    ));
    let mut admin = server.connection();

    let threads = 8;
    let barrier = Arc::new(Barrier::new(threads + 1));
    let granted = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (limiter, barrier, granted) = (
                Arc::clone(&limiter),
                Arc::clone(&barrier),
                Arc::clone(&granted),
            );
            std::thread::spawn(move || {
                for _ in 0..10 {
                    let d = limiter.check("hot", 1).unwrap();
                    if d.is_allowed() {
                        assert_eq!(d.source(), Source::Store);
                        granted.fetch_add(1, Ordering::Relaxed);
                    } else {
                        assert!(
                            matches!(d.source(), Source::Store | Source::Cached),
                            "{d:?}"
                        );
                    }
                }
                barrier.wait(); // healthy phase done
                barrier.wait(); // server paused
                let mut sources = Vec::new();
                for _ in 0..10 {
                    let d = bounded("cached while paused", TIMEOUT, || limiter.check("hot", 1))
                        .unwrap();
                    assert!(!d.is_allowed());
                    sources.push(d.source());
                }
                let cold = format!("cold-{t}");
                let d = bounded("cold while paused", TIMEOUT, || limiter.check(&cold, 1)).unwrap();
                (sources, d)
            })
        })
        .collect();
    barrier.wait();
    assert_eq!(
        granted.load(Ordering::Relaxed),
        limit,
        "the hot key's grants"
    );
    let before = calls(&mut admin, "fcall");
    let hits_before = limiter.store().hits();
    server.pause();
    barrier.wait();
    for handle in handles {
        let (sources, cold) = handle.join().unwrap();
        assert!(sources.iter().all(|s| *s == Source::Cached), "{sources:?}");
        assert_eq!(
            (cold.source(), cold.is_allowed()),
            (Source::FailedClosed, false)
        );
    }
    assert_eq!(limiter.store().hits(), hits_before + 80);
    assert_eq!(
        limiter.store().len(),
        1,
        "only the store's own refusal is kept"
    );
    server.resume();
    let failures = limiter.store().inner().stats().failures;
    assert!((1..=threads as u64).contains(&failures), "{failures}");
    assert_eq!(
        fcalls_settled(&mut admin),
        before + failures,
        "only the failed calls were sent"
    );
    for t in 0..threads {
        assert_eq!(
            remaining_on_redis(&server, &prefix, limit, &format!("cold-{t}")),
            limit
        );
    }

    // Once the back-off is over, a key the policy refused is asked again.
    std::thread::sleep(Duration::from_millis(400));
    let d = limiter.check("cold-0", 1).unwrap();
    assert_eq!((d.source(), d.is_allowed()), (Source::Store, true));
}

#[test]
fn a_failover_store_over_a_deny_cache_answers_cached_refusals_without_failing_until_another_call_fails(
) {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("failover-over-cache");
    let clock = ManualClock::new();
    let window = day_window(2);
    let cache = DenyCache::new(redis(&server, &prefix), &window).unwrap();
    let store = FailoverStore::new(cache, FailurePolicy::Open).with_clock(clock.clone());
    let limiter = KeyedRateLimiter::with_store(window, store, clock.clone());
    assert!(limiter.try_acquire("hot") && limiter.try_acquire("hot"));
    assert_eq!(limiter.check("hot", 1).unwrap().source(), Source::Store);

    server.kill();
    // The cache answers without asking the dead server: no failure.
    let d = bounded("cached", TIMEOUT, || limiter.check("hot", 1)).unwrap();
    assert_eq!((d.source(), d.is_allowed()), (Source::Cached, false));
    assert!(!limiter.store().is_degraded());
    assert_eq!(limiter.store().stats().failures, 0);
    assert_eq!(limiter.store().inner().hits(), 1);

    // Another key fails; from then on the policy answers every call, the hot
    // key's too (the cache sits below the failover store).
    let cold = bounded("cold", TIMEOUT, || limiter.check("cold", 1)).unwrap();
    assert_eq!(
        (cold.source(), cold.is_allowed()),
        (Source::Unchecked, true)
    );
    let hot = limiter.check("hot", 1).unwrap();
    assert_eq!(hot.source(), Source::Unchecked);
    assert_eq!(limiter.store().stats().failures, 1);
}

type Leased = LeasedStore<Redis, String, Fw>;

#[test]
fn a_failover_store_over_leases_spends_the_lease_while_paused_and_the_lease_that_timed_out_never_lands(
) {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("failover-over-lease");
    let clock = ManualClock::new();
    let leased: Leased =
        LeasedStore::new(redis(&server, &prefix), 5, Duration::from_secs(3600)).unwrap();
    let store = FailoverStore::new(leased, FailurePolicy::Closed).with_clock(clock.clone());
    let limiter = KeyedRateLimiter::with_store(day_window(100), store, clock.clone());
    let mut admin = server.connection();

    let first = limiter.check("k", 1).unwrap();
    assert_eq!((first.source(), first.remaining()), (Source::Leased, 99));
    assert_eq!(remaining_on_redis(&server, &prefix, 100, "k"), 95);
    let before = calls(&mut admin, "fcall");

    server.pause();
    for left in [98, 97, 96, 95] {
        let d = bounded("from the lease", TIMEOUT, || limiter.check("k", 1)).unwrap();
        assert_eq!((d.source(), d.remaining()), (Source::Leased, left));
    }
    // The lease is spent: the next one is asked of the paused server.
    let d = bounded("new lease", TIMEOUT, || limiter.check("k", 1)).unwrap();
    assert_eq!((d.source(), d.is_allowed()), (Source::FailedClosed, false));
    let d = bounded("backed off", TIMEOUT, || limiter.check("k", 1)).unwrap();
    assert_eq!(d.source(), Source::FailedClosed);
    server.resume();

    assert_eq!(fcalls_settled(&mut admin), before + 1);
    assert_eq!(
        remaining_on_redis(&server, &prefix, 100, "k"),
        95,
        "the lease that timed out landed"
    );

    clock.advance(Duration::from_secs(1));
    let d = limiter.check("k", 1).unwrap();
    assert_eq!((d.source(), d.remaining()), (Source::Leased, 94));
    assert_eq!(remaining_on_redis(&server, &prefix, 100, "k"), 90);
}

#[test]
fn eight_threads_over_leases_through_a_pause_never_admit_more_than_redis_counted() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("lease-threads");
    let limit = 60;
    let size = 5;
    let leased: Leased =
        LeasedStore::new(redis(&server, &prefix), size, Duration::from_secs(3600)).unwrap();
    let store: FailoverStore<Leased, String, Fw> = FailoverStore::new(leased, FailurePolicy::Open)
        .with_backoff(Backoff::fixed(Duration::from_secs(60)));
    let limiter = Arc::new(KeyedRateLimiter::with_store(
        day_window(limit),
        store,
        DefaultClock::new(),
    ));

    let threads = 8;
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (limiter, barrier) = (Arc::clone(&limiter), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let mut decided = Vec::new();
                for _ in 0..6 {
                    decided.push(limiter.check("hot", 1).unwrap());
                }
                barrier.wait();
                barrier.wait();
                for _ in 0..6 {
                    decided.push(bounded("paused", TIMEOUT, || limiter.check("hot", 1)).unwrap());
                }
                decided
            })
        })
        .collect();
    barrier.wait();
    server.pause();
    barrier.wait();
    let decided: Vec<Decision> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    server.resume();
    std::thread::sleep(Duration::from_millis(300));

    let checked = decided
        .iter()
        .filter(|d| d.is_allowed() && matches!(d.source(), Source::Leased | Source::Store))
        .count() as u64;
    for d in &decided {
        assert!(
            matches!(
                d.source(),
                Source::Leased | Source::Store | Source::Unchecked
            ),
            "{d:?}"
        );
    }
    let consumed = limit - remaining_on_redis(&server, &prefix, limit, "hot");
    // Every checked grant left Redis first; at most one lease of this process
    // holds unspent permits.
    assert!(checked <= limit, "{checked}");
    assert!(
        consumed >= checked,
        "consumed {consumed} < granted {checked}"
    );
    assert!(
        consumed <= checked + (size - 1),
        "consumed {consumed}, granted {checked}"
    );
    assert!(limiter.store().stats().failures >= 1);
}

#[test]
fn eight_threads_on_a_paused_server_answer_by_the_policy_and_none_of_their_calls_lands() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("failover-threads");
    let store: Failover<DefaultClock> =
        FailoverStore::new(redis(&server, &prefix), FailurePolicy::Open)
            .with_backoff(Backoff::fixed(Duration::from_secs(60)));
    let limiter = Arc::new(KeyedRateLimiter::with_store(
        day_window(100),
        store,
        DefaultClock::new(),
    ));
    let mut admin = server.connection();
    let threads = 8;
    for t in 0..threads {
        assert_eq!(limiter.check(&format!("t{t}"), 1).unwrap().remaining(), 99);
    }
    let before = calls(&mut admin, "fcall");
    let barrier = Arc::new(Barrier::new(threads));
    server.pause();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (limiter, barrier) = (Arc::clone(&limiter), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                for _ in 0..10 {
                    let d =
                        bounded("paused", TIMEOUT, || limiter.check(&format!("t{t}"), 1)).unwrap();
                    assert_eq!((d.source(), d.is_allowed()), (Source::Unchecked, true));
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    server.resume();
    let stats = limiter.store().stats();
    assert!((1..=threads as u64).contains(&stats.failures), "{stats:?}");
    assert_eq!(stats.unchecked, 80);
    assert_eq!(fcalls_settled(&mut admin), before + stats.failures);
    for t in 0..threads {
        assert_eq!(
            remaining_on_redis(&server, &prefix, 100, &format!("t{t}")),
            99,
            "t{t}"
        );
    }
}

#[test]
fn eight_async_tasks_on_a_paused_server_answer_by_the_local_share_and_recover() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("failover-async");
    let clock = ManualClock::new();
    let (limiter, seen) = failover_limiter(
        &server,
        &prefix,
        FailurePolicy::Local(day_window(5)),
        &clock,
    );
    let handle = limiter.to_async();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tasks = 8;
    rt.block_on(async {
        for t in 0..tasks {
            let d = handle.check(&format!("t{t}"), 1).await.unwrap();
            assert_eq!((d.source(), d.remaining()), (Source::Store, 9));
        }
    });
    server.pause();
    let start = Instant::now();
    let decided: Vec<Vec<Decision>> = rt.block_on(async {
        let joins: Vec<_> = (0..tasks)
            .map(|t| {
                let handle = handle.clone();
                tokio::spawn(async move {
                    let mut out = Vec::new();
                    for _ in 0..3 {
                        out.push(handle.check(&format!("t{t}"), 1).await.unwrap());
                    }
                    out
                })
            })
            .collect();
        let mut all = Vec::new();
        for join in joins {
            all.push(join.await.unwrap());
        }
        all
    });
    let took = start.elapsed();
    assert!(took <= TIMEOUT + MARGIN, "{took:?}");
    server.resume();
    for out in &decided {
        let left: Vec<(Source, u64)> = out.iter().map(|d| (d.source(), d.remaining())).collect();
        assert_eq!(
            left,
            [(Source::Local, 4), (Source::Local, 3), (Source::Local, 2)]
        );
    }
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 24);
        for (_, error) in seen.iter() {
            if let Some(error) = error {
                assert_store_error(error, Applied::Unknown, true);
            }
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    for t in 0..tasks {
        assert_eq!(
            remaining_on_redis(&server, &prefix, 10, &format!("t{t}")),
            9,
            "t{t}"
        );
    }
    clock.advance(Duration::from_secs(1));
    let d = rt.block_on(handle.check("t0", 1)).unwrap();
    assert_eq!((d.source(), d.remaining()), (Source::Store, 8));
}

#[test]
fn a_set_s_report_on_a_paused_server_under_a_closed_policy_is_the_one_refusal() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("set-closed");
    let clock = ManualClock::new();
    let set = AllOf::new((day_window(10), day_window(3)));
    let store = FailoverStore::new(
        RedisStore::<String, Pair>::open_with(server.url(), options(&prefix)).unwrap(),
        FailurePolicy::Closed,
    )
    .with_clock(clock.clone());
    let limiter = KeyedRateLimiter::with_store(set, store, clock.clone());
    assert!(limiter.check("k", 1).unwrap().is_allowed());
    server.pause();
    let mut each = Vec::new();
    let d = bounded("set", TIMEOUT, || {
        limiter.check_each("k", 1, &mut |d| each.push(d))
    })
    .unwrap();
    server.resume();
    assert_eq!((d.source(), d.is_allowed()), (Source::FailedClosed, false));
    assert_eq!(each.len(), 1, "{each:?}");
    assert_eq!(each[0].source(), Source::FailedClosed);
    std::thread::sleep(Duration::from_millis(300));
    clock.advance(Duration::from_secs(1));
    let mut each = Vec::new();
    let d = limiter
        .check_each("k", 1, &mut |d| each.push(d.remaining()))
        .unwrap();
    assert_eq!(
        (d.source(), d.remaining()),
        (Source::Store, 1),
        "the timed-out call did not land"
    );
    assert_eq!(each, [8, 1]);
}

#[test]
fn a_deny_cache_does_not_keep_a_local_share_s_refusals() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("cache-local");
    let clock = ManualClock::new();
    let window = day_window(10);
    let failover = FailoverStore::new(redis(&server, &prefix), FailurePolicy::Local(day_window(1)))
        .with_clock(clock.clone());
    let store = DenyCache::new(failover, &window).unwrap();
    let limiter = KeyedRateLimiter::with_store(window, store, clock.clone());
    assert!(limiter.try_acquire("k"));
    server.kill();
    let granted = limiter.check("k", 1).unwrap();
    assert_eq!(
        (granted.source(), granted.is_allowed()),
        (Source::Local, true)
    );
    for _ in 0..3 {
        let refused = limiter.check("k", 1).unwrap();
        assert_eq!(
            (refused.source(), refused.is_allowed()),
            (Source::Local, false)
        );
    }
    assert!(limiter.store().is_empty());
    assert_eq!(limiter.store().hits(), 0);
}

#[test]
fn async_calls_through_the_stacks_on_a_paused_server_answer_from_the_cache_the_lease_and_the_policy(
) {
    let mut server = RedisServer::start_own();
    let rt = redis_support::current_thread_runtime();
    let clock = ManualClock::new();

    // A deny cache over a closed failover store.
    let cached_prefix = unique_prefix("async-cache");
    let window = day_window(2);
    let failover = FailoverStore::new(redis(&server, &cached_prefix), FailurePolicy::Closed)
        .with_clock(clock.clone());
    let cached = KeyedRateLimiter::with_store(
        window,
        DenyCache::new(failover, &window).unwrap(),
        clock.clone(),
    )
    .to_async();
    // A closed failover store over leases of 5.
    let leased_prefix = unique_prefix("async-lease");
    let leased: Leased =
        LeasedStore::new(redis(&server, &leased_prefix), 5, Duration::from_secs(3600)).unwrap();
    let over_lease = KeyedRateLimiter::with_store(
        day_window(100),
        FailoverStore::new(leased, FailurePolicy::Closed).with_clock(clock.clone()),
        clock.clone(),
    )
    .to_async();

    rt.block_on(async {
        assert!(cached.check("hot", 1).await.unwrap().is_allowed());
        assert!(cached.check("hot", 1).await.unwrap().is_allowed());
        assert_eq!(
            cached.check("hot", 1).await.unwrap().source(),
            Source::Store
        );
        let first = over_lease.check("k", 1).await.unwrap();
        assert_eq!((first.source(), first.remaining()), (Source::Leased, 99));
    });
    server.pause();
    for _ in 0..3 {
        let d = bounded("cached", TIMEOUT, || rt.block_on(cached.check("hot", 1))).unwrap();
        assert_eq!((d.source(), d.is_allowed()), (Source::Cached, false));
    }
    let d = bounded("cold", TIMEOUT, || rt.block_on(cached.check("cold", 1))).unwrap();
    assert_eq!(d.source(), Source::FailedClosed);
    for left in [98, 97, 96, 95] {
        let d = bounded("leased", TIMEOUT, || rt.block_on(over_lease.check("k", 1))).unwrap();
        assert_eq!((d.source(), d.remaining()), (Source::Leased, left));
    }
    let d = bounded("new lease", TIMEOUT, || {
        rt.block_on(over_lease.check("k", 1))
    })
    .unwrap();
    assert_eq!(d.source(), Source::FailedClosed);
    server.resume();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(remaining_on_redis(&server, &cached_prefix, 2, "cold"), 2);
    assert_eq!(remaining_on_redis(&server, &leased_prefix, 100, "k"), 95);
    assert_eq!(cached.blocking().store().hits(), 3);
}
