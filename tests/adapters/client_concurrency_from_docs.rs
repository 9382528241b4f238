//! Many tokio tasks on the real clock sharing one client layer, checked against its
//! documentation alone, with bounds that leave generous margins: together they keep
//! to the one limit, waiters are sent in the order they asked, and keys of a keyed
//! limiter run independently.
#![cfg(feature = "tower")]

use super::client_common::{assert_each_send_after_its_turn, most_in_any_window};
use crate::support::adapters::{poll_once, unbursting};
use sluicegate::adapters::client::ClientLayer;
use sluicegate::algorithms::SmoothBursty;
use sluicegate::{KeyedRateLimiter, RateLimiter};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tower::{service_fn, Layer, Service, ServiceExt};

/// Ten tasks share one client (clones of two services of one layer): together they
/// keep to the one limit, however many ask at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_tasks_sharing_one_client_keep_to_its_rate() {
    let start = Instant::now();
    let limiter = RateLimiter::new(unbursting(20.0)); // one every 50 ms
    let sends: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let inner = {
        let sends = sends.clone();
        service_fn(move |n: u32| {
            sends.lock().unwrap().push(Instant::now());
            async move { Ok::<_, Infallible>(n) }
        })
    };
    let layer = ClientLayer::new(limiter);
    let services = [layer.layer(inner.clone()), layer.clone().layer(inner)];
    let tasks: Vec<_> = (0..10u32)
        .map(|task| {
            let client = services[task as usize % 2].clone();
            tokio::spawn(async move {
                for i in 0..4 {
                    let n = task * 10 + i;
                    assert_eq!(client.clone().oneshot(n).await.unwrap(), n);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = start.elapsed();
    let sends = sends.lock().unwrap().clone();
    assert_eq!(sends.len(), 40);
    // One turn of 50 ms each, after the limiter's first (made after `start`);
    // 15 ms for the limiter's clock and `Instant` reading apart.
    assert_each_send_after_its_turn(
        &sends,
        start,
        Duration::from_millis(50),
        Duration::from_millis(15),
    );
    assert!(elapsed < Duration::from_secs(6), "took {elapsed:?}");
}

/// "waiters are served in the order they asked (the limiter's reservations)":
/// requests that asked one after another are sent in that order, whichever task
/// wakes first.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiters_are_sent_in_the_order_they_asked() {
    let limiter = RateLimiter::new(unbursting(10.0)); // one every 100 ms
    let order: Arc<Mutex<Vec<u32>>> = Arc::default();
    let mut client = {
        let order = order.clone();
        ClientLayer::new(limiter).layer(service_fn(move |n: u32| {
            order.lock().unwrap().push(n);
            async move { Ok::<_, Infallible>(n) }
        }))
    };
    client.clone().oneshot(0).await.unwrap();
    let mut tasks = Vec::new();
    for n in 1..=10 {
        // Each asks (its first poll) before the next does, then waits on a task
        // of its own.
        let mut request = Box::pin(client.call(n));
        assert!(poll_once(request.as_mut()).is_pending());
        tasks.push(tokio::spawn(request));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..=10).collect::<Vec<_>>());
}

/// `with_weigher` with a keyed limiter: each key keeps its own limit, so eight
/// tasks on four keys proceed in parallel, each key at its own rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keyed_limits_run_independently_under_concurrency() {
    let per_host: KeyedRateLimiter<String, SmoothBursty> = KeyedRateLimiter::new(unbursting(10.0));
    let sends: Arc<Mutex<Vec<(usize, Instant)>>> = Arc::default();
    let client = {
        let sends = sends.clone();
        ClientLayer::with_weigher(per_host, |r: &(usize, u32)| (format!("host-{}", r.0), 1)).layer(
            service_fn(move |r: (usize, u32)| {
                sends.lock().unwrap().push((r.0, Instant::now()));
                async move { Ok::<_, Infallible>(()) }
            }),
        )
    };
    let start = Instant::now();
    let tasks: Vec<_> = (0..8usize)
        .map(|task| {
            let client = client.clone();
            tokio::spawn(async move {
                for i in 0..4 {
                    client.clone().oneshot((task % 4, i)).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = start.elapsed();
    let sends = sends.lock().unwrap().clone();
    assert_eq!(sends.len(), 32);
    for host in 0..4 {
        let times: Vec<Instant> = sends
            .iter()
            .filter(|(h, _)| *h == host)
            .map(|(_, t)| *t)
            .collect();
        assert_eq!(times.len(), 8);
        let span = *times.iter().max().unwrap() - *times.iter().min().unwrap();
        assert!(
            span >= Duration::from_millis(650),
            "host {host}: 8 sends in {span:?}"
        );
        let crowd = most_in_any_window(&times, Duration::from_millis(250));
        assert!(crowd <= 5, "host {host}: {crowd} sends within 250 ms");
    }
    // Each key needs 0.7 s; one shared limit would need 3.1 s.
    assert!(elapsed < Duration::from_millis(2400), "took {elapsed:?}");
}
