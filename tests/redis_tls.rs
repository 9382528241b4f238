//! The Redis store over TLS (feature `redis-tls`), on servers started here with
//! certificates from a test CA that this process trusts (`SSL_CERT_FILE`): blocking
//! calls run on the store's own TLS sockets, reused from call to call, and a restart
//! between calls loses none, standalone or on a Cluster; async calls run on
//! redis-rs's TLS connections.
#![cfg(feature = "redis-tls")]

mod support;

use sluicegate::algorithms::Decision;
use support::redis as redis_support;

use redis_support::trace::caller_time_options;
use redis_support::{
    a_restarted_node_loses_no_call, calls, current_thread_runtime, take, trust_test_ca, window,
    RedisCluster, RedisServer, SECOND,
};
use sluicegate::algorithms::FixedWindow;
use sluicegate::stores::redis::RedisStore;
use sluicegate::stores::Store;

/// A store on `server`'s TLS port, trusting the test CA.
fn tls_store(server: &RedisServer, prefix: &str) -> RedisStore<&'static str, FixedWindow> {
    trust_test_ca();
    RedisStore::open_with(server.tls_url(), caller_time_options(prefix)).unwrap()
}

fn remaining_after_one(store: &RedisStore<&'static str, FixedWindow>) -> u64 {
    store
        .apply_key::<Decision>(&window(10), &"k", SECOND, take(1))
        .unwrap()
        .remaining()
}

fn connections_received(admin: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(admin).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("total_connections_received:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

#[test]
fn blocking_calls_reuse_one_tls_connection_and_async_calls_share_theirs() {
    let server = RedisServer::start_own_tls();
    let mut admin = server.connection();
    let store = tls_store(&server, "tls:");
    assert_eq!(remaining_after_one(&store), 9);
    // The pooled TLS connection is found healthy before each call (the server's
    // session tickets, read while it was idle, do not count against it).
    let before = connections_received(&mut admin);
    for left in (4..9).rev() {
        assert_eq!(remaining_after_one(&store), left);
    }
    assert_eq!(
        connections_received(&mut admin),
        before,
        "no new connection"
    );
    let runtime = current_thread_runtime();
    let async_left = runtime.block_on(async {
        let key = ["k"];
        store.apply_async(&window(10), &key, SECOND, take(1)).await
    });
    assert_eq!(async_left.unwrap()[0].0.remaining(), 3);
}

#[test]
fn a_restart_between_blocking_calls_over_tls_loses_no_call() {
    let mut server = RedisServer::start_own_tls();
    let store = tls_store(&server, "tls-restart:");
    assert_eq!(remaining_after_one(&store), 9);
    assert_eq!(remaining_after_one(&store), 8);
    server.restart();
    // The idle TLS connection is found closed before anything is written on it:
    // the next call goes out on a fresh one, loads the library once, and counts
    // from an empty server.
    assert_eq!(remaining_after_one(&store), 9);
    assert_eq!(remaining_after_one(&store), 8);
    let mut admin = server.connection();
    assert_eq!(calls(&mut admin, "function|load"), 1);
    assert_eq!(calls(&mut admin, "fcall"), 3);
}

#[test]
fn a_tls_cluster_routes_blocking_calls_and_a_restarted_node_loses_none() {
    let mut cluster = RedisCluster::start_tls();
    trust_test_ca();
    let store: RedisStore<String, FixedWindow> =
        RedisStore::open_cluster(cluster.tls_urls(), caller_time_options("tls-cl:")).unwrap();
    // The idle TLS connection to the restarted node is found closed before the
    // call.
    a_restarted_node_loses_no_call(&mut cluster, &store);
    // Async calls go over redis-rs's TLS cluster connection.
    let runtime = current_thread_runtime();
    let key = ["async".to_owned()];
    let pending = store.apply_async(&window(10), &key, SECOND, take(1));
    assert_eq!(runtime.block_on(pending).unwrap()[0].0.remaining(), 9);
}
