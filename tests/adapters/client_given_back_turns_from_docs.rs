//! Turns the client layer gives back, checked against its documentation alone:
//! requests dropped or timing out together give back every turn, in memory, per key
//! of a keyed limiter, and over a keyed limiter on a real Redis.
#![cfg(feature = "tower")]

use super::client_common::{answering_later, at_once, sent_of, Held, Sent};
use crate::support::adapters::{poll_once, unbursting, HeldClock};
use sluicegate::adapters::client::ClientLayer;
#[cfg(feature = "redis")]
use sluicegate::algorithms::SmoothBursty;
use sluicegate::{KeyedRateLimiter, RateLimiter};
use std::convert::Infallible;
use std::time::{Duration, Instant};
use tower::{service_fn, Layer, Service, ServiceExt};

/// The module: "a request future dropped while it waits gives its permits back";
/// `adapters`: "waits dropped together (requests timing out at once) give back all
/// of theirs, in whatever order they are dropped".
#[test]
fn requests_dropped_together_while_waiting_give_back_every_turn() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::with_clock(unbursting(1.0), clock.clone());
    let sent = Sent::default();
    let mut client = ClientLayer::new(limiter).layer(answering_later(clock.clone(), sent.clone()));

    let mut first = Box::pin(client.call(at_once(0)));
    assert!(poll_once(first.as_mut()).is_ready());
    let mut waiting: Vec<_> = (1..=3).map(|n| Box::pin(client.call(at_once(n)))).collect();
    for request in &mut waiting {
        assert!(poll_once(request.as_mut()).is_pending()); // turns at 1, 2 and 3 s
    }
    // Dropped in an order that is neither first-to-last nor last-to-first.
    let third = waiting.pop().unwrap();
    let second = waiting.pop().unwrap();
    let one = waiting.pop().unwrap();
    drop(one);
    drop(third);
    drop(second);

    let mut next = Box::pin(client.call(at_once(4)));
    assert!(poll_once(next.as_mut()).is_pending());
    clock.advance(Duration::from_secs(1));
    assert!(
        poll_once(next.as_mut()).is_ready(),
        "the first given-back turn, at 1 s, is the next request's"
    );
    assert_eq!(sent_of(&sent), [(0, 0), (4, 1000)]);
}

/// "waits dropped together (requests timing out at once) give back all of theirs,
/// in whatever order they are dropped": eight tasks time out together, and the
/// next request takes one of their turns instead of queueing behind them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn requests_timing_out_together_give_their_turns_back() {
    let limiter = RateLimiter::new(unbursting(1.0)); // one a second
    let client =
        ClientLayer::new(limiter).layer(service_fn(|n: u32| async move { Ok::<_, Infallible>(n) }));
    let waited = eight_time_out_then_one(client).await;
    // Given back, the next turn is at most one interval away; kept, it would be
    // behind all eight (about 7.7 s). The bound leaves a loaded machine seconds.
    assert!(
        waited < Duration::from_secs(4),
        "waited {waited:?} behind abandoned turns"
    );
}

/// Over `client`, at 1 a second with no burst: request 0, then 1 to 8 each with a
/// 300 ms timeout on tasks of their own (their turns at 1, 2, ... 8 s: all but at
/// most two time out together, even when a loaded machine starts them late), then
/// request 99: how long 99 waited.
async fn eight_time_out_then_one<S>(client: S) -> Duration
where
    S: Service<u32> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: std::fmt::Debug,
{
    client.clone().oneshot(0).await.unwrap();
    let tasks: Vec<_> = (1..=8)
        .map(|n| {
            let client = client.clone();
            tokio::spawn(async move {
                tokio::time::timeout(Duration::from_millis(300), client.oneshot(n))
                    .await
                    .is_ok()
            })
        })
        .collect();
    let mut sent = 0;
    for task in tasks {
        sent += usize::from(task.await.unwrap());
    }
    assert!(
        sent <= 2,
        "{sent} of 8 were sent within 300 ms at 1 a second"
    );
    let asked = Instant::now();
    client.oneshot(99).await.unwrap();
    asked.elapsed()
}

/// `Permits::acquire`: "futures dropped together give back all of theirs, in
/// whatever order they are dropped (the limiter's abandoned waits rule, per key for
/// a keyed limiter)": the client over a keyed limiter.
#[test]
fn keyed_requests_dropped_together_give_back_every_turn_of_their_key() {
    let clock = HeldClock::default();
    let per_host = KeyedRateLimiter::with_clock(unbursting(1.0), clock.clone());
    let sent = Sent::default();
    // Labels below 100 are for host a, the rest for host b.
    let host = |r: &Held| (if r.label < 100 { "a" } else { "b" }.to_owned(), 1);
    let mut client = ClientLayer::with_weigher(per_host, host)
        .layer(answering_later(clock.clone(), sent.clone()));

    for label in [0, 100] {
        let mut first = Box::pin(client.call(at_once(label)));
        assert!(poll_once(first.as_mut()).is_ready());
    }
    // a: turns at 1, 2, 3 s; b: a turn at 1 s that stays.
    let mut waiting: Vec<_> = [1, 2, 3].map(|n| Box::pin(client.call(at_once(n)))).into();
    let mut other = Box::pin(client.call(at_once(101)));
    for request in &mut waiting {
        assert!(poll_once(request.as_mut()).is_pending());
    }
    assert!(poll_once(other.as_mut()).is_pending());
    let last = waiting.pop().unwrap();
    waiting.reverse();
    drop(waiting); // 2, then 1
    drop(last); // then 3

    let mut next = Box::pin(client.call(at_once(4)));
    assert!(poll_once(next.as_mut()).is_pending());
    clock.advance(Duration::from_secs(1));
    assert!(
        poll_once(next.as_mut()).is_ready(),
        "a's turn at 1 s is free again"
    );
    assert!(poll_once(other.as_mut()).is_ready(), "b keeps its own turn");
    assert_eq!(sent_of(&sent), [(0, 0), (100, 0), (4, 1000), (101, 1000)]);
}

/// `Permits::acquire`: "futures dropped together give back all of theirs, in
/// whatever order they are dropped (the limiter's abandoned waits rule, per key for
/// a keyed limiter)", for a client "Built from any `Permits` (... memory or
/// remote)": eight requests over a keyed limiter on a real Redis time out together,
/// and the next request takes one of their turns instead of queueing behind them.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn requests_over_the_redis_store_timing_out_together_give_their_turns_back() {
    use crate::support::redis::{unique_prefix, RedisServer};
    use sluicegate::clock::DefaultClock;
    use sluicegate::stores::redis::{RedisOptions, RedisStore};

    let server = tokio::task::spawn_blocking(RedisServer::start_own)
        .await
        .unwrap();
    let options = RedisOptions::default()
        .prefix(unique_prefix("client-from-docs-abandoned"))
        .unwrap();
    let store: RedisStore<String, SmoothBursty> =
        RedisStore::open_with(server.url(), options).unwrap();
    let limiter = KeyedRateLimiter::with_store(unbursting(1.0), store, DefaultClock::new());
    let client = ClientLayer::with_weigher(limiter, |_: &u32| ("api".to_owned(), 1))
        .layer(service_fn(|n: u32| async move { Ok::<_, Infallible>(n) }));
    let waited = eight_time_out_then_one(client).await;
    assert!(
        waited < Duration::from_secs(4),
        "waited {waited:?} behind abandoned turns"
    );
    tokio::task::spawn_blocking(move || drop(server))
        .await
        .unwrap();
}
