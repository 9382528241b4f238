//! Async keyed waits abandoned together give all their permits back over the Redis
//! store: the ledger gives back the latest first, and the store sends detached
//! cancels one after another, in that order. On virtual time (the caller's clock),
//! dropped outside a runtime (sent on the dropping thread) and on one (sent by a
//! task); then on the real clock, tasks dropped by equal timeouts.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;
use crate::support::timed_clock;

use redis_support::trace::caller_time_options;
use redis_support::{unique_prefix, RedisServer};
use sluicegate::algorithms::{AllOf, FixedWindow, SmoothBursty};
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore};
use sluicegate::{DefaultClock, Error, KeyedRateLimiter};
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;
use timed_clock::Timed;

type Waiter = Pin<Box<dyn Future<Output = Result<Duration, Error>> + Send>>;
type AsyncKeyed<A> =
    sluicegate::AsyncKeyedRateLimiter<&'static str, A, RedisStore<&'static str, A>, Timed>;

/// How long `limiter` would make a request of 1 on `k` wait now.
fn next_turn<A: RedisAlgorithm + Clone, C: sluicegate::Clock>(
    limiter: &KeyedRateLimiter<&'static str, A, RedisStore<&'static str, A>, C>,
) -> Duration {
    limiter.peek(&"k", 1).unwrap().retry_after()
}

#[test]
fn five_waiters_dropped_at_once_give_all_their_permits_back_over_redis() {
    dropped_at_once_leave_no_trace(SmoothBursty::new(1.0).unwrap());
}

#[test]
fn five_waiters_of_a_set_dropped_at_once_give_all_their_permits_back_over_redis() {
    // The set's receipts carry its members' (in the reply, and back with the
    // cancel), so every wait of the set gives back, not only the latest.
    dropped_at_once_leave_no_trace(AllOf::new((
        SmoothBursty::new(1.0).unwrap(),
        FixedWindow::new(1000, Duration::from_secs(60)).unwrap(),
    )));
}

/// 1 permit a second (the tightest limit of `algorithm`): two requests (the second
/// waits 1 s), then five waiters, whose turns are at 2, 3, 4, 5 and 6 s, dropped
/// at once. The next request goes at 2 s, one second after now, as if they had
/// never asked.
fn dropped_at_once_leave_no_trace<A: RedisAlgorithm + Clone>(algorithm: A) {
    let server = RedisServer::start();
    for dropped_on_a_runtime in [false, true] {
        let clock = Timed::default();
        let prefix = unique_prefix("abandoned");
        let store = RedisStore::open_with(server.url(), caller_time_options(&prefix)).unwrap();
        let limiter = KeyedRateLimiter::with_store(algorithm.clone(), store, clock.clone());
        limiter.acquire(&"k").unwrap();
        limiter.acquire(&"k").unwrap();
        let handle = limiter.to_async();
        // The store's async connection runs on the runtime it was opened on.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let waiters = five_waiting(&handle, &clock, &runtime);
        assert_eq!(next_turn(&limiter), Duration::from_secs(6));
        if dropped_on_a_runtime {
            // Dropped by a task on a worker thread: the cancels go out from a task
            // of their own, and the acquire below, made at once, waits for them
            // rather than overtaking them.
            runtime.block_on(async {
                tokio::spawn(async move { drop(waiters) }).await.unwrap();
            });
        } else {
            // Outside a runtime they go out on this thread before the drop returns.
            drop(waiters);
        }
        assert_eq!(
            limiter.acquire(&"k").unwrap(),
            Duration::from_secs(1),
            "dropped on a runtime: {dropped_on_a_runtime}"
        );
        assert_eq!(clock.clock.take_sleeps_secs(), [0.0, 1.0, 1.0]);
    }
}

/// Five async acquires of `handle` on `k`, each polled on `runtime` until its
/// reserve is answered and it sleeps (on `clock`, virtual time).
fn five_waiting<A: RedisAlgorithm + Clone>(
    handle: &AsyncKeyed<A>,
    clock: &Timed,
    runtime: &tokio::runtime::Runtime,
) -> Vec<Waiter> {
    let mut waiters: Vec<Waiter> = (0..5)
        .map(|_| Box::pin(handle.acquire(&"k")) as Waiter)
        .collect();
    // Each waiter's reserve is one round trip; then it sleeps on virtual time.
    runtime.block_on(futures::future::poll_fn(|cx| {
        for waiter in &mut waiters {
            assert!(waiter.as_mut().poll(cx).is_pending());
        }
        if clock.sleeps_begun() == 5 {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }));
    waiters
}

#[test]
fn waiters_dropped_on_a_current_thread_runtime_give_their_permits_back_to_a_blocking_call() {
    // A current-thread runtime runs its tasks only while it is driven. The cancels
    // of waits dropped on it still go out when the next call is a blocking one on
    // the same thread, made inside its `block_on` (which the blocking call keeps
    // from running anything) or after it (the runtime idle): that call finds them
    // answered and waits one turn, not the response timeout and an error.
    let server = RedisServer::start();
    for blocking_inside in [false, true] {
        let clock = Timed::default();
        let prefix = unique_prefix("abandoned-current-thread");
        let store = RedisStore::open_with(server.url(), caller_time_options(&prefix)).unwrap();
        let limiter =
            KeyedRateLimiter::with_store(SmoothBursty::new(1.0).unwrap(), store, clock.clone());
        limiter.acquire(&"k").unwrap();
        limiter.acquire(&"k").unwrap();
        let handle = limiter.to_async();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let waiters = five_waiting(&handle, &clock, &runtime);
        assert_eq!(next_turn(&limiter), Duration::from_secs(6));
        let next = if blocking_inside {
            runtime.block_on(async {
                drop(waiters);
                limiter.acquire(&"k")
            })
        } else {
            runtime.block_on(async { drop(waiters) });
            limiter.acquire(&"k")
        };
        assert_eq!(
            next.unwrap(),
            Duration::from_secs(1),
            "blocking inside the runtime: {blocking_inside}"
        );
    }
}

#[test]
fn keyed_waits_timed_out_together_give_their_turns_back_over_redis() {
    // 1 permit a second, no saved burst, on the server's time: after a first
    // request of 3 (paid later), ten tasks wait for turns 3, 4, … 12 s away, all
    // with a 200 ms timeout, so they are dropped at about the same time, on four
    // worker threads, in no particular order. The next acquire, made at once,
    // reaches the server after their cancels and waits for the first turn (about
    // 2.8 s), not one turn per abandoned wait. (A first turn 3 s away is still
    // ahead of tasks a loaded machine starts late.)
    let server = RedisServer::start();
    let options = RedisOptions::default()
        .prefix(unique_prefix("abandoned-real"))
        .unwrap();
    let store = RedisStore::open_with(server.url(), options).unwrap();
    let unbursting = SmoothBursty::new(1.0)
        .unwrap()
        .with_max_burst(Duration::ZERO)
        .unwrap();
    let limiter = KeyedRateLimiter::with_store(unbursting, store, DefaultClock::new());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let handle = limiter.to_async();
    let waited = runtime.block_on(async {
        assert_eq!(handle.acquire_n(&"k", 3).await.unwrap(), Duration::ZERO);
        let timeout = Duration::from_millis(200);
        let tasks: Vec<_> = (0..10)
            .map(|_| tokio::spawn(tokio::time::timeout(timeout, handle.acquire(&"k"))))
            .collect();
        for task in tasks {
            assert!(task.await.unwrap().is_err(), "every wait times out");
        }
        tokio::time::timeout(Duration::from_secs(6), handle.acquire(&"k"))
            .await
            .expect("the next acquire waits one turn, not one per abandoned wait")
            .unwrap()
    });
    assert!(waited <= Duration::from_millis(3500), "{waited:?}");
}

#[test]
fn a_step_waits_for_earlier_cancels_at_most_the_response_timeout_then_fails_unsent() {
    // Five detached cancels on a paused server take a response timeout each (or
    // a connect timeout, once the connection they failed on is replaced). A step
    // made after them waits for them no longer than one response timeout, then
    // fails without being sent: it must not overtake them, nor hang behind them.
    use redis_support::{assert_unapplied_error, take, window};
    use sluicegate::stores::Store;
    use sluicegate::Decision;

    let mut server = RedisServer::start_own();
    let timeout = Duration::from_millis(200);
    let options = RedisOptions::default()
        .prefix(unique_prefix("cancels-paused"))
        .unwrap()
        .response_timeout(timeout)
        .connect_timeout(timeout);
    let store: RedisStore<&'static str, _> = RedisStore::open_with(server.url(), options).unwrap();
    let window = window(10);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let granted = runtime
        .block_on(store.apply_async(&window, &["k"], 0, take(1)))
        .unwrap();
    let receipt = granted[0].1.clone();
    server.pause();
    runtime.block_on(async {
        for _ in 0..5 {
            store.cancel_detached(&window, &["k"], 0, std::slice::from_ref(&receipt), 0);
        }
    });
    let started = std::time::Instant::now();
    let step: Result<Decision, _> = store.apply_key(&window, &"k", 0, take(1));
    let waited = started.elapsed();
    assert_unapplied_error(step, "earlier cancels");
    assert!(
        waited >= timeout && waited < 4 * timeout,
        "waited {waited:?} for cancels that take {:?}",
        5 * timeout
    );
    server.resume();
}
