//! Sixteen concurrent clients over real HTTP on the real clock, held to the bounds
//! the server layer's docs state: exactly each key's sliding-log limit, and within
//! `b + r·t` through a meter.
#![cfg(feature = "tower")]

use super::server_http::{hammer, Seen};
use crate::support::adapters::{client_of, counted_app, serve};
use sluicegate::adapters::server::ServerLayer;
use sluicegate::algorithms::{LeakyBucket, SlidingLog};
use sluicegate::{KeyedRateLimiter, RateLimiter};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// README: `SlidingLog` is "exact": at most `limit` per `window` on each key. With
/// sixteen concurrent clients on the real clock, each key grants exactly its limit
/// within the window, and every refusal says `r=0` with a `Retry-After` within the
/// window.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_concurrent_clients_get_exactly_each_keys_sliding_log_limit() {
    let log = SlidingLog::new(10, Duration::from_secs(60)).unwrap();
    let limiter = KeyedRateLimiter::new(log);
    let (router, runs) = counted_app();
    let base = serve(router.layer(ServerLayer::keyed(limiter, client_of))).await;

    let seen = hammer(&base, 16, 4, |i| {
        if i % 2 == 0 {
            "even".into()
        } else {
            "odd".into()
        }
    })
    .await;
    for key in ["even", "odd"] {
        let of_key: Vec<&Seen> = seen
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, s)| s)
            .collect();
        let granted = of_key.iter().filter(|s| s.status == 200).count();
        assert_eq!((of_key.len(), granted), (32, 10), "key {key}");
        for refused in of_key.iter().filter(|s| s.status != 200) {
            assert_eq!(refused.status, 429);
            let retry: u64 = refused.field("retry-after").parse().unwrap();
            assert!((1..=60).contains(&retry), "Retry-After {retry}");
            assert!(refused
                .field("ratelimit")
                .starts_with(r#""default";r=0;t="#));
        }
    }
    assert_eq!(runs.load(Ordering::SeqCst), 20);
}

/// README: `LeakyBucket::meter` admits "at most `b + r·t` over any span `t`".
/// Sixteen concurrent clients through one direct limiter on the real clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_concurrent_clients_through_a_meter_stay_within_b_plus_rt() {
    let meter = LeakyBucket::meter(5, 1, Duration::from_secs(10)).unwrap();
    let (router, runs) = counted_app();
    let base = serve(router.layer(ServerLayer::new(RateLimiter::new(meter)))).await;

    let started = std::time::Instant::now();
    let seen = hammer(&base, 16, 3, |_| "all".into()).await;
    let span = started.elapsed();
    let granted = seen.iter().filter(|(_, s)| s.status == 200).count() as u64;
    let bound = 5 + span.as_secs() / 10;
    assert!(
        (1..=bound).contains(&granted),
        "{granted} granted in {span:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst) as u64, granted);
    assert!(seen.iter().all(|(_, s)| s.status == 200 || s.status == 429));
}
