//! One algorithm's keyed limiter on Redis (the caller's time) and in memory, each
//! on its own virtual clock, moved and called together, their answers compared
//! field by field, and the server keys the Redis side holds: what
//! `algorithm_edges_from_docs` drives at each algorithm's edges.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;

use redis_support::trace::caller_time_options;
use redis_support::{unique_prefix, RedisServer};
use sluicegate::clock::{Clock, ManualClock, Nanos};
use sluicegate::stores::redis::{RedisAlgorithm, RedisStore};
use sluicegate::stores::MemoryStore;
use sluicegate::{Decision, Error, KeyedRateLimiter};
use std::time::Duration;

pub(crate) const S: Nanos = 1_000_000_000;

pub(crate) fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// One algorithm's keyed limiter on Redis (the caller's time) and in memory, each
/// on its own virtual clock, moved together.
pub(crate) struct Twin<A: RedisAlgorithm> {
    pub(crate) label: String,
    pub(crate) prefix: String,
    pub(crate) url: String,
    pub(crate) redis: KeyedRateLimiter<&'static str, A, RedisStore<&'static str, A>, ManualClock>,
    pub(crate) memory: KeyedRateLimiter<&'static str, A, MemoryStore<&'static str, A>, ManualClock>,
}

impl<A: RedisAlgorithm + Clone + Send + Sync> Twin<A>
where
    A::State: Send,
{
    pub(crate) fn new(server: &RedisServer, label: &str, algorithm: A) -> Self {
        let prefix = unique_prefix("edges");
        let store = RedisStore::open_with(server.url(), caller_time_options(&prefix)).unwrap();
        Twin {
            label: label.to_owned(),
            url: server.url().to_owned(),
            redis: KeyedRateLimiter::with_store(algorithm.clone(), store, ManualClock::new()),
            memory: KeyedRateLimiter::with_clock(algorithm, ManualClock::new()),
            prefix,
        }
    }

    /// Moves both clocks to the reading `t`.
    pub(crate) fn to(&self, t: Nanos) {
        for clock in [self.redis.clock(), self.memory.clock()] {
            let now = clock.now();
            assert!(t >= now, "{}: the test moves time forward only", self.label);
            clock.advance_nanos(t - now);
        }
    }

    pub(crate) fn now(&self) -> Nanos {
        let now = self.redis.clock().now();
        assert_eq!(
            now,
            self.memory.clock().now(),
            "{}: clocks apart",
            self.label
        );
        now
    }

    /// `check` on both; they must agree field by field.
    pub(crate) fn check(&self, cost: u64) -> Decision {
        let (on_redis, in_memory) = (self.redis.check(&"k", cost), self.memory.check(&"k", cost));
        let at = self.now();
        assert_eq!(
            on_redis, in_memory,
            "{}: check {cost} at {at} ns",
            self.label
        );
        on_redis.unwrap()
    }

    pub(crate) fn peek(&self, cost: u64) -> Decision {
        let (on_redis, in_memory) = (self.redis.peek(&"k", cost), self.memory.peek(&"k", cost));
        let at = self.now();
        assert_eq!(
            on_redis, in_memory,
            "{}: peek {cost} at {at} ns",
            self.label
        );
        on_redis.unwrap()
    }

    /// `check_each` on both: the decision and each limit's standing must agree.
    pub(crate) fn check_each(&self, cost: u64) -> (Decision, Vec<Decision>) {
        let (mut r, mut m) = (Vec::new(), Vec::new());
        let on_redis = self
            .redis
            .check_each(&"k", cost, &mut |d| r.push(d))
            .unwrap();
        let in_memory = self
            .memory
            .check_each(&"k", cost, &mut |d| m.push(d))
            .unwrap();
        let at = self.now();
        assert_eq!(
            (on_redis, &r),
            (in_memory, &m),
            "{}: check_each {cost} at {at} ns",
            self.label
        );
        (on_redis, r)
    }

    /// A blocking `acquire_n` on both: the same time waited, the same clock after.
    pub(crate) fn acquire(&self, cost: u64) -> Result<Duration, Error> {
        let on_redis = self.redis.acquire_n(&"k", cost);
        let in_memory = self.memory.acquire_n(&"k", cost);
        assert_eq!(on_redis, in_memory, "{}: acquire {cost}", self.label);
        self.now();
        on_redis
    }

    /// Moves both clocks past `d`'s `retry_after`, to the next whole microsecond
    /// (the caller's time the server reads exactly).
    pub(crate) fn wait_out(&self, d: &Decision) {
        self.to((self.now() + d.retry_after_nanos()).div_ceil(1_000) * 1_000);
    }

    /// The server keys this twin's store holds.
    pub(crate) fn server_keys(&self) -> usize {
        let mut conn = redis::Client::open(self.url.as_str())
            .unwrap()
            .get_connection()
            .unwrap();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}*", self.prefix))
            .query(&mut conn)
            .unwrap();
        keys.len()
    }
}
