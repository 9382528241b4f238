//! Keys and slots on a Redis Cluster, as the README and the docs of `stores::redis`
//! and `RedisOptions::shared_tag` describe them: one identity's states share one
//! slot whatever its text and are the keys the server holds, a shared tag puts
//! every identity on one slot in the documented layout, calls whose keys fall in
//! different slots are refused with `Error::InvalidKeys` before anything is sent
//! (counted with the nodes' `INFO commandstats`), and keys that happen to share a
//! slot run without a tag. Slots and owners are read from the nodes themselves.
#![cfg(feature = "redis")]

use super::cluster_common::{cluster_store, existing, keys, owner, s, tagged_store, Redis, MINUTE};
use crate::support::redis as redis_support;
use crate::support::rng::Rng;
use redis_support::trace::caller_time_options;
use redis_support::{current_thread_runtime, RedisCluster, RedisServer};
use sluicegate::algorithms::{AllOf, FixedWindow, LeakyBucket, SlidingLog};
use sluicegate::stores::redis::RedisStore;
use sluicegate::{Error, KeyedRateLimiter, ManualClock, Verdict};
use std::collections::BTreeSet;
use std::time::Duration;

type Fw = FixedWindow;

/// The Cluster hash slot of `key`, as the nodes compute it.
fn keyslot(cluster: &RedisCluster, key: &str) -> i64 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut cluster.connection(0))
        .unwrap()
}

/// Every key under `prefix` on every node, with the node that holds it.
fn keys_on_nodes(cluster: &RedisCluster, prefix: &str) -> Vec<(usize, String)> {
    let mut all = Vec::new();
    for node in 0..3 {
        let mut found: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}*"))
            .query(&mut cluster.connection(node))
            .unwrap();
        found.sort();
        all.extend(found.into_iter().map(|k| (node, k)));
    }
    all
}

/// `FCALL`s and `FUNCTION` commands that reached any node, run or rejected:
/// what the store sends to run a step (and to load its library).
fn steps_sent(cluster: &RedisCluster) -> u64 {
    (0..3)
        .map(|node| {
            let info: String = redis::cmd("INFO")
                .arg("commandstats")
                .query(&mut cluster.connection(node))
                .unwrap();
            info.lines()
                .filter(|l| l.starts_with("cmdstat_fcall") || l.starts_with("cmdstat_function"))
                .flat_map(|l| l.split_once(':').map(|(_, v)| v).unwrap_or("").split(','))
                .filter_map(|field| field.split_once('='))
                .filter(|(name, _)| *name == "calls" || *name == "rejected_calls")
                .map(|(_, n)| n.parse::<u64>().unwrap())
                .sum::<u64>()
        })
        .sum()
}

/// Keys on all nodes.
fn total_keys(cluster: &RedisCluster) -> i64 {
    (0..3)
        .map(|node| {
            redis::cmd("DBSIZE")
                .query::<i64>(&mut cluster.connection(node))
                .unwrap()
        })
        .sum()
}

fn assert_invalid_keys<T: std::fmt::Debug>(what: &str, result: Result<T, Error>) {
    match result {
        Err(err @ Error::InvalidKeys { why, help }) => {
            assert!(
                err.to_string().to_lowercase().contains("slot"),
                "{what}: the refusal names slots: {err}"
            );
            assert!(!why.is_empty() && !help.is_empty(), "{what}: {err}");
        }
        other => panic!("{what}: expected Error::InvalidKeys, got {other:?}"),
    }
}

#[test]
fn one_identity_s_states_share_one_slot_whatever_its_text_and_are_the_keys_the_server_holds() {
    let cluster = RedisCluster::start();
    let set = AllOf::new((
        FixedWindow::new(1, MINUTE).unwrap(),
        SlidingLog::new(1, MINUTE).unwrap(),
        LeakyBucket::meter(1, 1, MINUTE).unwrap(),
    ));
    let limiter = KeyedRateLimiter::with_store(
        set,
        cluster_store::<AllOf<_>>(&cluster, "ids:"),
        ManualClock::new(),
    );
    let mut identities = keys(&[
        "alice", "}", "\\]", "\\", "{", "{}", "}{", "a b:c", "", "user:{7}", "a}b{c", "ключ",
    ]);
    identities.push("x".repeat(10 * 1024));
    identities.extend((0..20).map(|i| format!("user:{i}")));
    let mut expected = BTreeSet::new();
    let mut slots = BTreeSet::new();
    for id in &identities {
        let server_keys = limiter.store().server_keys(limiter.algorithm(), id);
        assert_eq!(server_keys.len(), 3, "one key per member for {id:?}");
        let slot = keyslot(&cluster, &server_keys[0]);
        for key in &server_keys {
            assert_eq!(keyslot(&cluster, key), slot, "{id:?}: {server_keys:?}");
            assert!(expected.insert(key.clone()), "{key:?} names two states");
        }
        slots.insert(slot);
        // Fresh: no other identity's state is read; then spent.
        assert!(limiter.check(id, 1).unwrap().is_allowed(), "{id:?}");
        assert!(!limiter.check(id, 1).unwrap().is_allowed(), "{id:?}");
        // All its states on the node serving its slot.
        let node = owner(&cluster, &server_keys[0]);
        assert_eq!(existing(&cluster, node, &server_keys), 3, "{id:?}");
    }
    assert!(
        slots.len() > 3,
        "the identities spread over slots: {slots:?}"
    );
    // What the nodes hold is exactly those keys, each on one node.
    let held = keys_on_nodes(&cluster, "ids:");
    let names: BTreeSet<String> = held.iter().map(|(_, k)| k.clone()).collect();
    assert_eq!(held.len(), names.len(), "a key on two nodes");
    assert_eq!(names, expected);
    let nodes: BTreeSet<usize> = held.iter().map(|(n, _)| *n).collect();
    assert_eq!(nodes.len(), 3, "per-identity keys spread over the masters");
}

#[test]
fn a_shared_tag_puts_every_identity_on_one_slot_in_the_documented_layout() {
    let cluster = RedisCluster::start();
    let fw = FixedWindow::new(2, MINUTE).unwrap();
    let store: Redis<Fw> = tagged_store(&cluster, "api:", "checkout");
    // `<prefix>{<tag>}k<escaped identity>:<algorithm>`, `}` escaped as `\]`.
    assert_eq!(
        store.server_key(&s("user:{7}")),
        "api:{checkout}kuser:{7\\]:fw"
    );
    assert_eq!(store.server_key(&s("alice")), "api:{checkout}kalice:fw");
    let slot = keyslot(&cluster, "{checkout}");
    let node = owner(&cluster, "{checkout}");
    let limiter = KeyedRateLimiter::with_store(fw, store, ManualClock::new());
    let identities: Vec<String> = (0..40)
        .map(|i| format!("user:{i}"))
        .chain(keys(&["}", "\\]", "{x}", ""]))
        .collect();
    for id in &identities {
        assert_eq!(
            keyslot(&cluster, &limiter.store().server_key(id)),
            slot,
            "{id:?}"
        );
        assert_eq!(limiter.check(id, 2).unwrap().remaining(), 0, "{id:?}");
    }
    // Every state is on the one node serving the tag, one per identity.
    let held = keys_on_nodes(&cluster, "api:");
    assert_eq!(held.len(), identities.len());
    assert!(held.iter().all(|(n, _)| *n == node), "{held:?}");
    // One slot, so every multi-key call runs: all-or-nothing over 40 identities.
    let fresh: Vec<String> = (0..40).map(|i| format!("fresh:{i}")).collect();
    let mut with_spent = fresh.clone();
    with_spent.push(s("user:0"));
    assert!(!limiter.check_all(&with_spent, 1).unwrap().is_allowed());
    let d = limiter.check_all(&fresh, 2).unwrap();
    assert!(d.is_allowed() && d.remaining() == 0, "{d:?}");
}

#[test]
fn calls_whose_keys_fall_in_different_slots_are_refused_with_invalid_keys_before_anything_is_sent()
{
    let cluster = RedisCluster::start();
    let server = RedisServer::start_own();
    let fw = FixedWindow::new(3, MINUTE).unwrap();
    let store: Redis<Fw> = cluster_store(&cluster, "xs:");
    let pair = keys(&["ip:203.0.113.7", "user:alice"]);
    assert_ne!(
        keyslot(&cluster, &store.server_key(&pair[0])),
        keyslot(&cluster, &store.server_key(&pair[1])),
        "the test needs two identities on different slots"
    );
    let limiter = KeyedRateLimiter::with_store(fw, store, ManualClock::new());
    let set = AllOf::new((fw, SlidingLog::new(2, MINUTE).unwrap()));
    let set_limiter = KeyedRateLimiter::with_store(
        set,
        cluster_store::<AllOf<_>>(&cluster, "xs:"),
        ManualClock::new(),
    );
    let before = steps_sent(&cluster);
    assert_invalid_keys("check_all", limiter.check_all(&pair, 1));
    assert_invalid_keys("peek_all", limiter.peek_all(&pair, 1));
    assert_invalid_keys("acquire_all", limiter.acquire_all(&pair, 1));
    assert_invalid_keys("reserve_all", limiter.reserve_all(&pair, 1));
    assert_invalid_keys("a set's check_all", set_limiter.check_all(&pair, 1));
    // Three keys, two of them on one slot, still cannot run as one call.
    let three = keys(&["user:alice", "user:alice", "ip:203.0.113.7"]);
    assert_invalid_keys("check_all of three", limiter.check_all(&three, 1));
    let handle = limiter.to_async();
    let runtime = current_thread_runtime();
    assert_invalid_keys(
        "async acquire_all in tokio",
        runtime.block_on(handle.acquire_all(&pair, 1)),
    );
    assert_invalid_keys(
        "async reserve_all in tokio",
        runtime.block_on(handle.reserve_all(&pair, 1)),
    );
    assert_invalid_keys(
        "async acquire_all outside tokio",
        futures::executor::block_on(handle.acquire_all(&pair, 1)),
    );
    assert_invalid_keys(
        "async reserve_all outside tokio",
        futures::executor::block_on(handle.reserve_all(&pair, 1)),
    );
    assert!(limiter.clock().sleeps().is_empty(), "nothing waited");
    assert_eq!(steps_sent(&cluster), before, "nothing was sent");
    assert_eq!(total_keys(&cluster), 0, "nothing was written");
    // Nothing was consumed: each key is fresh.
    for key in &pair {
        assert_eq!(limiter.check(key, 1).unwrap().remaining(), 2, "{key}");
    }
    // The very same calls run on one server (no slots there) and on the Cluster
    // with a shared tag, with the same answers.
    let one: Redis<Fw> = RedisStore::open_with(server.url(), caller_time_options("xs:")).unwrap();
    let one = KeyedRateLimiter::with_store(fw, one, ManualClock::new());
    let tagged = KeyedRateLimiter::with_store(
        fw,
        tagged_store::<Fw>(&cluster, "xs-tag:", "pair"),
        ManualClock::new(),
    );
    for limiter in [&one, &tagged] {
        let first = limiter.check_all(&pair, 2).unwrap();
        assert!(first.is_allowed() && first.remaining() == 1, "{first:?}");
        assert!(!limiter.check_all(&pair, 2).unwrap().is_allowed());
        assert_eq!(limiter.acquire_all(&pair, 1).unwrap(), Duration::ZERO);
    }
}

#[test]
fn a_multi_key_call_whose_keys_happen_to_share_a_slot_runs_on_a_cluster_without_a_tag() {
    let cluster = RedisCluster::start();
    let fw = FixedWindow::new(2, MINUTE).unwrap();
    let store: Redis<Fw> = cluster_store(&cluster, "same:");
    // Two identities whose tags hash to one slot (a birthday search).
    let mut conn = cluster.connection(0);
    // Random texts: CRC16 is linear, and sequential numbers can miss each other.
    let mut rng = Rng::new(7);
    let candidates: Vec<String> = (0..3000)
        .map(|_| format!("user:{:x}", rng.next()))
        .collect();
    let mut pipe = redis::pipe();
    for id in &candidates {
        pipe.cmd("CLUSTER").arg("KEYSLOT").arg(store.server_key(id));
    }
    let slots: Vec<i64> = pipe.query(&mut conn).unwrap();
    let mut seen = std::collections::HashMap::new();
    let (a, b) = slots
        .iter()
        .enumerate()
        .find_map(|(i, slot)| seen.insert(*slot, i).map(|j| (j, i)))
        .expect("3000 identities over 16384 slots share one");
    let pair = vec![candidates[a].clone(), candidates[b].clone()];
    let limiter = KeyedRateLimiter::with_store(fw, store, ManualClock::new());
    limiter.check(&pair[1], 2).unwrap();
    // b is spent: refused, and a is not charged.
    assert!(!limiter.check_all(&pair, 1).unwrap().is_allowed());
    assert_eq!(
        limiter.peek(&pair[0], 2).unwrap().verdict(),
        Verdict::Allowed
    );
    // A key listed twice is one slot, and charged twice.
    let twice = vec![pair[0].clone(), pair[0].clone()];
    let d = limiter.check_all(&twice, 1).unwrap();
    assert!(d.is_allowed() && d.remaining() == 0, "{d:?}");
    assert!(!limiter.check(&pair[0], 1).unwrap().is_allowed());
}
