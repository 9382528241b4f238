//! The Redis store on a Redis Cluster of three masters it starts itself: calls
//! routed by slot, the cross-slot refusal, a node restarted between calls, and a
//! slot migrated between calls (`ASK`, then `MOVED`).
#![cfg(feature = "redis")]

mod support;

use support::redis as redis_support;

use redis_support::trace::caller_time_options;
use redis_support::{
    a_restarted_node_loses_no_call, current_thread_runtime, take, window, RedisCluster, SECOND,
};
use sluicegate::algorithms::{Decision, FixedWindow, Receipt};
use sluicegate::stores::redis::RedisStore;
use sluicegate::stores::{Operation, Store};
use sluicegate::Error;
use std::time::Duration;

/// One reserve of 1 on `key` at 1 s: what remains.
fn remaining_after_one(store: &RedisStore<String, FixedWindow>, key: &str) -> u64 {
    store
        .apply_key::<Decision>(&window(10), &key.to_owned(), SECOND, take(1))
        .unwrap()
        .remaining()
}

/// Every `FCALL` node `index` received: run, and refused with a redirect.
fn fcalls(cluster: &RedisCluster, index: usize) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut cluster.connection(index))
        .unwrap();
    let Some(line) = info.lines().find_map(|l| l.strip_prefix("cmdstat_fcall:")) else {
        return 0;
    };
    line.split(',')
        .filter_map(|field| field.split_once('='))
        .filter(|(name, _)| *name == "calls" || *name == "rejected_calls")
        .map(|(_, n)| n.parse::<u64>().unwrap())
        .sum()
}

fn admin(cluster: &RedisCluster, index: usize, args: &[&str]) -> redis::Value {
    redis::cmd(args[0])
        .arg(&args[1..])
        .query(&mut cluster.connection(index))
        .unwrap_or_else(|e| panic!("{args:?} on node {index}: {e}"))
}

#[test]
fn cluster_calls_per_identity_work_and_cross_slot_calls_are_refused() {
    let cluster = RedisCluster::start();
    let fw = window(3);
    let options = caller_time_options("cl:");
    let store: RedisStore<String, FixedWindow> =
        RedisStore::open_cluster(cluster.urls(), options.clone()).unwrap();
    // Many identities, spread over the slots of all three masters.
    for i in 0..200 {
        let key = format!("user:{i}");
        let d = store
            .apply_key::<(Decision, Receipt)>(&fw, &key, SECOND, take(2))
            .map(|(d, _)| d)
            .unwrap();
        assert!(d.is_allowed(), "{key}");
        assert_eq!(
            store
                .apply_key::<(Decision, Receipt)>(&fw, &key, SECOND, take(1))
                .map(|(d, _)| d)
                .unwrap()
                .remaining(),
            0
        );
        assert!(!store
            .apply_key::<(Decision, Receipt)>(&fw, &key, SECOND, take(1))
            .map(|(d, _)| d)
            .unwrap()
            .is_allowed());
    }
    // A key twice in one call is one slot: fine.
    let twice = ["solo".to_owned(), "solo".to_owned()];
    let mut out: [_; 2] = std::array::from_fn(|_| (Decision::never(0, 0, 0), Receipt::NONE));
    store.apply(&fw, &twice, SECOND, take(1), &mut out).unwrap();
    assert!(out.iter().all(|(d, _)| d.is_allowed()));
    // Two identities on different slots: refused before sending, nothing applied.
    let pair = ["alice".to_owned(), "bob".to_owned()];
    let err = store
        .apply(&fw, &pair, SECOND, take(1), &mut out)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidKeys { .. }), "{err}");
    assert!(err.to_string().contains("shared hash tag"), "{err}");
    assert_eq!(
        store
            .apply_key::<(Decision, Receipt)>(
                &fw,
                &"alice".to_owned(),
                SECOND,
                Operation::Peek { cost: 1 }
            )
            .map(|(d, _)| d)
            .unwrap()
            .remaining(),
        2
    ); // untouched: 3 - the peeked 1
       // The async side on Cluster: the store's cluster connection routes by slot.
    let runtime = current_thread_runtime();
    let decisions = runtime.block_on(async {
        let mut all = Vec::new();
        for i in 0..50 {
            let key = [format!("async:{i}")];
            all.push(store.apply_async(&fw, &key, SECOND, take(3)).await.unwrap()[0].0);
            all.push(store.apply_async(&fw, &key, SECOND, take(1)).await.unwrap()[0].0);
        }
        all
    });
    for pair in decisions.chunks(2) {
        assert!(pair[0].is_allowed() && !pair[1].is_allowed(), "{pair:?}");
    }
    // With a shared tag the same call runs, all-or-nothing, on one slot.
    let tagged: RedisStore<String, FixedWindow> =
        RedisStore::open_cluster(cluster.urls(), options.shared_tag("checkout").unwrap()).unwrap();
    tagged.apply(&fw, &pair, SECOND, take(3), &mut out).unwrap();
    assert!(out.iter().all(|(d, _)| d.is_allowed()));
    tagged.apply(&fw, &pair, SECOND, take(1), &mut out).unwrap();
    assert!(out.iter().all(|(d, _)| !d.is_allowed()));
}

#[test]
fn an_async_cluster_call_after_a_node_restart_is_not_lost() {
    let mut cluster = RedisCluster::start();
    let fw = window(10);
    let store: RedisStore<String, FixedWindow> =
        RedisStore::open_cluster(cluster.urls(), caller_time_options("cl-restart:")).unwrap();
    let runtime = current_thread_runtime();
    let keys: Vec<String> = (0..30).map(|i| format!("user:{i}")).collect();
    // One async reserve of 1 per identity, spread over the three masters.
    let remaining = |store: &RedisStore<String, FixedWindow>| -> Vec<u64> {
        runtime.block_on(async {
            let mut all = Vec::new();
            for key in &keys {
                let pending = store.apply_async(&fw, std::slice::from_ref(key), SECOND, take(1));
                all.push(pending.await.unwrap()[0].0.remaining());
            }
            all
        })
    };
    assert!(remaining(&store).iter().all(|&r| r == 9));
    cluster.restart_node(0);
    // Between calls the runtime runs the cluster connection, which hears that the
    // node's connection closed and reconnects it.
    runtime.block_on(async { tokio::time::sleep(Duration::from_millis(200)).await });
    // Every call succeeds: identities on the restarted node start afresh (it keeps
    // its slots, not its data), the others count on.
    let after = remaining(&store);
    assert!(after.iter().all(|&r| r == 9 || r == 8), "{after:?}");
    assert!(after.contains(&9) && after.contains(&8), "{after:?}");
}

#[test]
fn a_blocking_cluster_call_after_a_node_restart_is_not_lost() {
    let mut cluster = RedisCluster::start();
    let store: RedisStore<String, FixedWindow> =
        RedisStore::open_cluster(cluster.urls(), caller_time_options("cl-restart-b:")).unwrap();
    // The store keeps an idle connection to each node; the one to the restarted
    // node is found closed before anything is written on it.
    a_restarted_node_loses_no_call(&mut cluster, &store);
}

#[test]
fn a_call_follows_its_slot_as_it_migrates() {
    let cluster = RedisCluster::start();
    let store: RedisStore<String, FixedWindow> =
        RedisStore::open_cluster(cluster.urls(), caller_time_options("cl-move:")).unwrap();
    let runtime = current_thread_runtime();
    let remaining_after_one_async = || {
        let key = ["mover".to_owned()];
        let pending = store.apply_async(&window(10), &key, SECOND, take(1));
        runtime.block_on(pending).unwrap()[0].0.remaining()
    };
    assert_eq!(remaining_after_one(&store, "mover"), 9);
    // Where the identity's state is, and where it will go.
    let (source, key) = (0..3)
        .find_map(|i| {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg("cl-move:*")
                .query(&mut cluster.connection(i))
                .unwrap();
            keys.into_iter().next().map(|key| (i, key))
        })
        .expect("the first call created the state");
    let target = (source + 1) % 3;
    let slot = match admin(&cluster, source, &["CLUSTER", "KEYSLOT", &key]) {
        redis::Value::Int(slot) => slot.to_string(),
        other => panic!("{other:?}"),
    };
    let id = |i| match admin(&cluster, i, &["CLUSTER", "MYID"]) {
        redis::Value::BulkString(id) => String::from_utf8(id).unwrap(),
        other => panic!("{other:?}"),
    };
    let (source_id, target_id) = (id(source), id(target));
    admin(
        &cluster,
        target,
        &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &source_id],
    );
    admin(
        &cluster,
        source,
        &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &target_id],
    );
    // Migrating, but the key is still on the source: the source runs the call.
    assert_eq!(remaining_after_one(&store, "mover"), 8);
    let port = cluster.port(target).to_string();
    admin(
        &cluster,
        source,
        &["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS", &key],
    );
    // The key has moved: the source answers ASK, and the call goes once to the
    // target after ASKING (loading the library there if it lacks it), blocking or
    // async.
    let on_target = fcalls(&cluster, target);
    assert_eq!(remaining_after_one(&store, "mover"), 7);
    assert_eq!(remaining_after_one_async(), 6);
    assert!(fcalls(&cluster, target) >= on_target + 2);
    for node in 0..3 {
        admin(
            &cluster,
            node,
            &["CLUSTER", "SETSLOT", &slot, "NODE", &target_id],
        );
    }
    // The slot is the target's: the source answers MOVED once to each side, which
    // then knows the new owner.
    assert_eq!(remaining_after_one(&store, "mover"), 5);
    assert_eq!(remaining_after_one_async(), 4);
    let on_source = fcalls(&cluster, source);
    assert_eq!(remaining_after_one(&store, "mover"), 3);
    assert_eq!(remaining_after_one_async(), 2);
    assert_eq!(
        fcalls(&cluster, source),
        on_source,
        "no call went to the old owner"
    );
}
