//! Each failure policy of `stores::failover` over the Redis store, as the README
//! ("Operating the Redis store") and the failover docs promise it: on a killed and
//! on a paused server, answered within the timeout, nothing sent while backed off
//! and nothing late landing; one caller probing while the others are answered at
//! once; and eight threads and eight async tasks on a paused server answered by the
//! policy. The back-off runs on a `ManualClock` where a test needs to say when it
//! ends, and on the real clock where threads race.
#![cfg(feature = "redis")]

use super::operating_common::{
    assert_store_error, bounded, failover_limiter, fcalls_settled, options, redis,
    remaining_on_redis, year_window, Failover, Fw, MARGIN, TIMEOUT,
};
use crate::support::redis as redis_support;
use redis_support::{calls, unique_prefix, RedisServer};
use sluicegate::clock::ManualClock;
use sluicegate::stores::failover::{Backoff, FailoverStore, FailurePolicy};
use sluicegate::stores::redis::RedisStore;
use sluicegate::{Applied, Decision, DefaultClock, Error, KeyedRateLimiter, Source};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Every policy, with a local share of 5 a year for `Local`.
fn policies() -> Vec<FailurePolicy<Fw>> {
    vec![
        FailurePolicy::Closed,
        FailurePolicy::Open,
        FailurePolicy::Local(year_window(5)),
    ]
}

fn policy_source(policy: &FailurePolicy<Fw>) -> Source {
    match policy {
        FailurePolicy::Closed => Source::FailedClosed,
        FailurePolicy::Open => Source::Unchecked,
        FailurePolicy::Local(_) => Source::Local,
    }
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
        year_window(10),
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

#[test]
fn eight_threads_on_a_paused_server_answer_by_the_policy_and_none_of_their_calls_lands() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("failover-threads");
    let store: Failover<DefaultClock> =
        FailoverStore::new(redis(&server, &prefix), FailurePolicy::Open)
            .with_backoff(Backoff::fixed(Duration::from_secs(60)));
    let limiter = Arc::new(KeyedRateLimiter::with_store(
        year_window(100),
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
        FailurePolicy::Local(year_window(5)),
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
