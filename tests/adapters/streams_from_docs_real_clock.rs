//! The Stream and Sink adapters on the real clock, checked against their
//! documentation alone: eight tasks streaming or sinking through one meter, in
//! memory and over a keyed Redis store, keep within `b + r·t` (counts bounded by
//! the measured run, never timings), and a store nothing answers refuses every item,
//! typed, while both adapters go on.

use futures::channel::mpsc;
use futures::{stream, SinkExt, StreamExt};
use sluicegate::adapters::{Throttled, ThrottledSink};
use sluicegate::algorithms::LeakyBucket;
use sluicegate::{KeyedRateLimiter, RateLimiter};
use std::time::{Duration, Instant};

/// A message's key (its task's parity) and cost are its own two fields.
fn key_and_cost(message: &(u64, u64)) -> (u64, u64) {
    *message
}

/// How many items each task takes at least, whenever a loaded machine runs it:
/// enough, over eight tasks, for the lower bounds below.
const LEAST: usize = 2;

/// `step` by `deadline`, or whenever it comes while `owed` (the task has not yet
/// taken its least).
async fn until<T>(
    deadline: tokio::time::Instant,
    owed: bool,
    step: impl std::future::Future<Output = T>,
) -> Result<T, tokio::time::error::Elapsed> {
    if owed {
        Ok(step.await)
    } else {
        tokio::time::timeout_at(deadline, step).await
    }
}

/// `LeakyBucket::meter`: "at most `b + r·t` over any span `t`", and every clone of
/// an adapter's handle "draws on one limit": eight tasks each stream as fast as
/// their `Throttled` lets them for about a second. Every grant falls between `start`
/// and `end`, so the total is bounded by the run (1% for the two clocks).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_tasks_streaming_through_one_meter_admit_at_most_b_plus_r_t() {
    let limiter = RateLimiter::new(LeakyBucket::meter(5, 20, Duration::from_secs(1)).unwrap());
    let start = Instant::now();
    let deadline = tokio::time::Instant::from_std(start + Duration::from_secs(1));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let mut paced = Throttled::new(stream::iter(0u64..), limiter);
                let mut n = 0usize;
                while let Ok(item) = until(deadline, n < LEAST, paced.next()).await {
                    item.expect("an endless stream").expect("no refusal");
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    let t = start.elapsed().as_secs_f64() * 1.01;
    assert!(
        total as f64 <= 5.0 + 20.0 * t,
        "{total} admitted in {t:.3} s"
    );
    assert!(total >= 15, "only {total} admitted in {t:.3} s");
}

/// The meter per key, eight tasks each with a `ThrottledSink` weighing its messages
/// `|m| (key, cost)` (costs 1 and 2): every key's cost received stays within its
/// own `b + r·t`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_tasks_sinking_weighed_messages_keep_each_keys_meter() {
    let meter = LeakyBucket::meter(4, 10, Duration::from_secs(1)).unwrap();
    let limiter: KeyedRateLimiter<u64, LeakyBucket> = KeyedRateLimiter::new(meter);
    let (tx, rx) = mpsc::unbounded::<(u64, u64)>();
    let start = Instant::now();
    let deadline = tokio::time::Instant::from_std(start + Duration::from_secs(1));
    let tasks: Vec<_> = (0..8u64)
        .map(|task| {
            let mut paced = ThrottledSink::with_weigher(tx.clone(), limiter.clone(), key_and_cost);
            tokio::spawn(async move {
                for i in 0u64.. {
                    let message = (task % 2, 1 + (task + i) % 2);
                    match until(deadline, i < LEAST as u64, paced.send(message)).await {
                        Ok(sent) => sent.expect("no refusal, no inner error"),
                        Err(_) => break,
                    }
                }
            })
        })
        .collect();
    drop(tx);
    for task in tasks {
        task.await.unwrap();
    }
    let t = start.elapsed().as_secs_f64() * 1.01;
    let received: Vec<(u64, u64)> = rx.collect().await;
    for key in [0, 1] {
        let cost: u64 = received.iter().filter(|m| m.0 == key).map(|m| m.1).sum();
        assert!(
            cost as f64 <= 4.0 + 10.0 * t,
            "{key}: cost {cost} sent in {t:.3} s"
        );
        assert!(cost >= 8, "{key}: only {cost} sent in {t:.3} s");
    }
}

/// The same bound over a keyed limiter on a real Redis: eight tasks streaming two
/// keys through `Throttled` (the adapters take any `Permits`, "memory or remote").
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_tasks_streaming_over_the_redis_store_keep_each_keys_meter() {
    use crate::support::redis::{unique_prefix, RedisServer};
    use sluicegate::clock::DefaultClock;
    use sluicegate::stores::redis::{RedisOptions, RedisStore};

    let server = tokio::task::spawn_blocking(RedisServer::start_own)
        .await
        .unwrap();
    let options = RedisOptions::default()
        .prefix(unique_prefix("streams-from-docs"))
        .unwrap();
    let store: RedisStore<String, LeakyBucket> =
        RedisStore::open_with(server.url(), options).unwrap();
    let meter = LeakyBucket::meter(4, 10, Duration::from_secs(1)).unwrap();
    let limiter = KeyedRateLimiter::with_store(meter, store, DefaultClock::new());
    let start = Instant::now();
    let deadline = tokio::time::Instant::from_std(start + Duration::from_secs(1));
    let tasks: Vec<_> = (0..8u64)
        .map(|task| {
            let key = if task % 2 == 0 { "even" } else { "odd" };
            let items = stream::iter(0u64..).map(move |i| (key, 1 + (task + i) % 2));
            let weigh = |m: &(&'static str, u64)| (m.0.to_owned(), m.1);
            let mut paced = Throttled::with_weigher(items, limiter.clone(), weigh);
            tokio::spawn(async move {
                let mut out = Vec::new();
                while let Ok(item) = until(deadline, out.len() < LEAST, paced.next()).await {
                    out.push(item.expect("endless").expect("no refusal"));
                }
                out
            })
        })
        .collect();
    let mut received = Vec::new();
    for task in tasks {
        received.extend(task.await.unwrap());
    }
    let t = start.elapsed().as_secs_f64() * 1.01;
    for key in ["even", "odd"] {
        let cost: u64 = received.iter().filter(|m| m.0 == key).map(|m| m.1).sum();
        assert!(
            cost as f64 <= 4.0 + 10.0 * t,
            "{key}: cost {cost} released in {t:.3} s"
        );
        assert!(cost >= 8, "{key}: only {cost} released in {t:.3} s");
    }
    tokio::task::spawn_blocking(move || drop(server))
        .await
        .unwrap();
}

/// `Rejected`: "An item the limiter would not let through, with why: ... or a
/// store's error. The item comes back so that nothing is lost"; `SinkError::Refused`:
/// "(timeout, never, store error); the sink is still usable". A store nothing
/// answers refuses every item, typed, in bounded time, and both adapters go on.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_store_refuses_each_item_typed_and_the_adapters_go_on() {
    use crate::support::redis::unreachable_store;
    use sluicegate::adapters::{sink::SinkError, Rejected};
    use sluicegate::algorithms::FixedWindow;
    use sluicegate::clock::DefaultClock;
    use sluicegate::stores::redis::RedisStore;
    use sluicegate::Error;

    let store: RedisStore<String, FixedWindow> = unreachable_store("streams-from-docs-down");
    let window = FixedWindow::new(10, Duration::from_secs(1)).unwrap();
    let limiter = KeyedRateLimiter::with_store(window, store, DefaultClock::new());
    let by_name = |s: &&'static str| ((*s).to_owned(), 1);

    let paced = Throttled::with_weigher(stream::iter(["a", "b"]), limiter.clone(), by_name);
    let out = tokio::time::timeout(Duration::from_secs(10), paced.collect::<Vec<_>>())
        .await
        .expect("the store's failure comes back, not a hang");
    assert_eq!(out.len(), 2, "{out:?}");
    for (result, name) in out.iter().zip(["a", "b"]) {
        let Err(Rejected { item, error }) = result else {
            panic!("{name} let through by a store nothing answers: {out:?}")
        };
        assert_eq!(*item, name);
        assert!(matches!(error, Error::Store(_)), "{error:?}");
    }

    let (tx, rx) = mpsc::unbounded::<&'static str>();
    let mut sink = ThrottledSink::with_weigher(tx, limiter, by_name);
    for name in ["c", "d"] {
        let sent = tokio::time::timeout(Duration::from_secs(10), sink.send(name))
            .await
            .expect("the store's failure comes back, not a hang");
        assert!(
            matches!(&sent, Err(SinkError::Refused(Rejected { item, error: Error::Store(_) })) if *item == name),
            "{sent:?}"
        );
    }
    drop(sink);
    assert!(rx.collect::<Vec<_>>().await.is_empty());
}

/// README: "waits dropped together give back all of theirs, whatever the order of
/// the drops (over Redis too: a request made right after them waits for their
/// cancels rather than overtaking them)". Eight tasks each stream one key's items
/// over a real Redis at 2 a second with no burst; they time out together a little
/// after the first turn, dropping their streams, and a reservation made right after
/// finds their turns back.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn streams_over_redis_timing_out_together_give_their_turns_back() {
    use crate::support::adapters::unbursting;
    use crate::support::redis::{unique_prefix, RedisServer};
    use sluicegate::clock::DefaultClock;
    use sluicegate::stores::redis::{RedisOptions, RedisStore};

    let server = tokio::task::spawn_blocking(RedisServer::start_own)
        .await
        .unwrap();
    let options = RedisOptions::default()
        .prefix(unique_prefix("streams-from-docs-dropped"))
        .unwrap();
    let store: RedisStore<String, _> = RedisStore::open_with(server.url(), options).unwrap();
    let limiter = KeyedRateLimiter::with_store(unbursting(2.0), store, DefaultClock::new());
    let first = {
        let limiter = limiter.clone();
        tokio::task::spawn_blocking(move || limiter.try_acquire(&"k".to_owned()))
            .await
            .unwrap()
    };
    assert!(first);
    let on_k = |n: &u32| ("k".to_owned(), u64::from(*n > 0));
    let tasks: Vec<_> = (1..=8u32)
        .map(|n| {
            let mut paced = Throttled::with_weigher(stream::iter([n]), limiter.clone(), on_k);
            tokio::spawn(async move {
                tokio::time::timeout(Duration::from_millis(700), paced.next())
                    .await
                    .is_ok()
            })
        })
        .collect();
    let mut out = 0;
    for task in tasks {
        out += usize::from(task.await.unwrap());
    }
    assert!(out <= 2, "{out} of 8 came out within 700 ms at 2 a second");
    let next = tokio::task::spawn_blocking(move || {
        limiter
            .reserve(&"k".to_owned(), 1)
            .map(|r| r.delay())
            .unwrap()
    })
    .await
    .unwrap();
    // Kept, the abandoned turns would put the next 3 s or more away.
    assert!(
        next < Duration::from_millis(1500),
        "next turn {next:?} away"
    );
    tokio::task::spawn_blocking(move || drop(server))
        .await
        .unwrap();
}
