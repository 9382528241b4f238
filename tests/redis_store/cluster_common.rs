//! What the tests of the Redis store on a Cluster from its docs share: stores on a
//! Cluster (at the caller's time, under a shared tag, or at the server's time), the
//! keyed limiter over them, key texts, which node owns a key and which keys a node
//! holds, and a multi-thread runtime.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;
use redis_support::trace::caller_time_options;
use redis_support::RedisCluster;
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore};
use sluicegate::{KeyedRateLimiter, ManualClock};
use std::time::Duration;

pub(crate) type Redis<A> = RedisStore<String, A>;
pub(crate) type OnRedis<A, C = ManualClock> = KeyedRateLimiter<String, A, Redis<A>, C>;

pub(crate) const MINUTE: Duration = Duration::from_secs(60);

pub(crate) fn s(text: &str) -> String {
    text.to_owned()
}

pub(crate) fn keys(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| s(t)).collect()
}

/// A store on `cluster` at the caller's (virtual) time, keys under `prefix`.
pub(crate) fn cluster_store<A: RedisAlgorithm>(cluster: &RedisCluster, prefix: &str) -> Redis<A> {
    RedisStore::open_cluster(cluster.urls(), caller_time_options(prefix)).unwrap()
}

/// [`cluster_store`] with every key under the hash tag `{tag}`.
pub(crate) fn tagged_store<A: RedisAlgorithm>(
    cluster: &RedisCluster,
    prefix: &str,
    tag: &str,
) -> Redis<A> {
    let options = caller_time_options(prefix).shared_tag(tag).unwrap();
    RedisStore::open_cluster(cluster.urls(), options).unwrap()
}

/// A store on `cluster` at the server's time, with short timeouts.
pub(crate) fn real_time_store<A: RedisAlgorithm>(
    cluster: &RedisCluster,
    options: RedisOptions,
) -> Redis<A> {
    RedisStore::open_cluster(cluster.urls(), options).unwrap()
}

/// The node serving `key`'s slot: the one that answers it without a redirect.
pub(crate) fn owner(cluster: &RedisCluster, key: &str) -> usize {
    (0..3)
        .find(|&i| {
            redis::cmd("EXISTS")
                .arg(key)
                .query::<i64>(&mut cluster.connection(i))
                .is_ok()
        })
        .unwrap_or_else(|| panic!("no node serves {key:?}"))
}

/// How many of `keys` (one slot) node `node` holds.
pub(crate) fn existing(cluster: &RedisCluster, node: usize, keys: &[String]) -> i64 {
    redis::cmd("EXISTS")
        .arg(keys)
        .query(&mut cluster.connection(node))
        .unwrap()
}

pub(crate) fn multi_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap()
}
