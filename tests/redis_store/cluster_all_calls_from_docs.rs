//! `_all` calls on a Redis Cluster, as `KeyedRateLimiter`'s and
//! `AsyncKeyedRateLimiter`'s docs describe them: all-or-nothing across keys and
//! limits, blocking and async.
#![cfg(feature = "redis")]

use super::cluster_common::{existing, owner, s, tagged_store, OnRedis, MINUTE};
use crate::support::redis as redis_support;
use redis_support::{current_thread_runtime, RedisCluster};
use sluicegate::algorithms::{AllOf, FixedWindow};
use sluicegate::{KeyedRateLimiter, ManualClock, Verdict};
use std::time::Duration;

#[test]
fn all_calls_on_a_cluster_are_all_or_nothing_across_keys_and_limits_blocking_and_async() {
    let cluster = RedisCluster::start();
    // 3 a minute and 5 an hour, per key.
    let set = AllOf::new((
        FixedWindow::new(3, MINUTE).unwrap(),
        FixedWindow::new(5, Duration::from_secs(3600)).unwrap(),
    ));
    let limiter: OnRedis<_> = KeyedRateLimiter::with_store(
        set,
        tagged_store(&cluster, "all:", "site"),
        ManualClock::new(),
    );
    let (ip, alice, bob) = (s("ip:203.0.113.7"), s("user:alice"), s("user:bob"));
    let node = owner(&cluster, "{site}");
    let states = |key: &String| {
        existing(
            &cluster,
            node,
            &limiter.store().server_keys(limiter.algorithm(), key),
        )
    };
    for _ in 0..3 {
        assert!(limiter.check(&alice, 1).unwrap().is_allowed());
    }
    // alice's minute is spent: the pair is refused by limit 0, the IP is not
    // charged, and nothing of the IP is written.
    let refused = limiter.check_all(&[ip.clone(), alice.clone()], 1).unwrap();
    assert_eq!(refused.verdict(), Verdict::Denied);
    assert_eq!(refused.limit_index(), 0);
    assert_eq!(refused.retry_after(), MINUTE);
    assert_eq!(states(&ip), 0);
    assert_eq!(limiter.peek(&ip, 1).unwrap().remaining(), 2);
    assert!(limiter
        .peek_all(&[ip.clone(), bob.clone()], 1)
        .unwrap()
        .is_allowed());
    assert_eq!(states(&ip) + states(&bob), 0, "a peek creates nothing");
    // Waiting for the pair waits for alice's next minute, then charges both.
    assert_eq!(
        limiter
            .acquire_all(&[ip.clone(), alice.clone()], 1)
            .unwrap(),
        MINUTE
    );
    assert_eq!(states(&ip), 2);
    assert_eq!(limiter.peek(&ip, 1).unwrap().remaining(), 1);
    // alice has 4 of her 5 an hour; one more, then the hour refuses (limit 1),
    // and bob is not charged.
    assert!(limiter
        .check_all(&[ip.clone(), alice.clone()], 1)
        .unwrap()
        .is_allowed());
    let hourly = limiter.check_all(&[bob.clone(), alice.clone()], 1).unwrap();
    assert!(!hourly.is_allowed());
    assert_eq!(hourly.limit_index(), 1);
    assert_eq!(states(&bob), 0);
    // A reservation on both keys, cancelled at its instant, gives back on both.
    let before_ip = limiter.peek(&ip, 1).unwrap();
    let r = limiter.reserve_all(&[ip.clone(), bob.clone()], 1).unwrap();
    assert!(r.decision().is_allowed());
    r.cancel().unwrap();
    assert_eq!(limiter.peek(&ip, 1).unwrap(), before_ip);
    assert_eq!(limiter.peek(&bob, 3).unwrap().verdict(), Verdict::Allowed);
    // The same on the async side, outside tokio and inside it. Outside first:
    // the shared async connection is then opened on the store's own runtime,
    // which keeps running while this thread waits outside tokio.
    let handle = limiter.to_async();
    let runtime = current_thread_runtime();
    for in_tokio in [false, true] {
        let round = async {
            let r = handle
                .reserve_all(&[ip.clone(), bob.clone()], 1)
                .await
                .unwrap();
            assert!(r.decision().is_allowed());
            r.cancel_async().await.unwrap();
            handle
                .acquire_all(&[bob.clone(), s("user:carol")], 1)
                .await
                .unwrap()
        };
        let waited = if in_tokio {
            runtime.block_on(round)
        } else {
            futures::executor::block_on(round)
        };
        assert_eq!(waited, Duration::ZERO);
    }
    assert_eq!(limiter.peek(&ip, 1).unwrap(), before_ip);
    // bob's minute: 3 - the two async acquires - the peek's 1.
    assert_eq!(limiter.peek(&bob, 1).unwrap().remaining(), 0);
}
