//! The Redis store as a user scaling from one process to a Redis Cluster meets it,
//! checked against what the README ("Across servers: Redis", "Operating the Redis
//! store") and the docs of `stores::redis`, `RedisOptions::shared_tag`,
//! `KeyedRateLimiter` and `AsyncKeyedRateLimiter` promise: the same limiter code
//! deciding alike in memory, on one server and on a Cluster; one identity's states
//! on one slot whatever its text; a shared tag putting a store on one slot in the
//! documented layout; calls whose keys cannot share a slot refused with
//! `Error::InvalidKeys` before anything is sent; `_all` calls all-or-nothing across
//! keys and limits, also under contention; many threads and tasks on one key never
//! passing its limit; the async API inside and outside tokio; and a killed or
//! paused node failing only its own slots' calls, with a typed error that says
//! whether the step may have been applied.
//!
//! Every test starts its own three-master Cluster (and, where it compares, its own
//! standalone server). Slots and owners are read from the nodes themselves
//! (`CLUSTER KEYSLOT`, and which node answers a key without a redirect); "nothing
//! was sent" is counted with the nodes' `INFO commandstats`.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;
use crate::support::rng::Rng;
use redis_support::trace::caller_time_options;
use redis_support::{current_thread_runtime, RedisCluster, RedisServer};
use sluicegate::algorithms::{AllOf, FixedWindow, LeakyBucket, Limits, SlidingLog, SmoothBursty};
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore};
use sluicegate::stores::Store;
use sluicegate::{Applied, Clock, DefaultClock, Error, KeyedRateLimiter, ManualClock, Verdict};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

type Fw = FixedWindow;
type Redis<A> = RedisStore<String, A>;
type OnRedis<A, C = ManualClock> = KeyedRateLimiter<String, A, Redis<A>, C>;

/// The connect and response timeout of the stores whose nodes fail under them.
const TIMEOUT: Duration = Duration::from_millis(200);
/// What a call may take beyond its timeout on a loaded two-core machine.
const MARGIN: Duration = Duration::from_millis(1500);
const MINUTE: Duration = Duration::from_secs(60);

fn s(text: &str) -> String {
    text.to_owned()
}

fn keys(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| s(t)).collect()
}

/// A store on `cluster` at the caller's (virtual) time, keys under `prefix`.
fn cluster_store<A: RedisAlgorithm>(cluster: &RedisCluster, prefix: &str) -> Redis<A> {
    RedisStore::open_cluster(cluster.urls(), caller_time_options(prefix)).unwrap()
}

/// [`cluster_store`] with every key under the hash tag `{tag}`.
fn tagged_store<A: RedisAlgorithm>(cluster: &RedisCluster, prefix: &str, tag: &str) -> Redis<A> {
    let options = caller_time_options(prefix).shared_tag(tag).unwrap();
    RedisStore::open_cluster(cluster.urls(), options).unwrap()
}

/// A store on `cluster` at the server's time, with short timeouts.
fn real_time_store<A: RedisAlgorithm>(cluster: &RedisCluster, options: RedisOptions) -> Redis<A> {
    RedisStore::open_cluster(cluster.urls(), options).unwrap()
}

fn short_timeouts(prefix: &str) -> RedisOptions {
    RedisOptions::default()
        .prefix(prefix)
        .unwrap()
        .connect_timeout(TIMEOUT)
        .response_timeout(TIMEOUT)
}

/// Generous timeouts at the server's time, for tests that only count grants.
fn patient(prefix: &str) -> RedisOptions {
    RedisOptions::default()
        .prefix(prefix)
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(5))
}

/// The Cluster hash slot of `key`, as the nodes compute it.
fn keyslot(cluster: &RedisCluster, key: &str) -> i64 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut cluster.connection(0))
        .unwrap()
}

/// The node serving `key`'s slot: the one that answers it without a redirect.
fn owner(cluster: &RedisCluster, key: &str) -> usize {
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
fn existing(cluster: &RedisCluster, node: usize, keys: &[String]) -> i64 {
    redis::cmd("EXISTS")
        .arg(keys)
        .query(&mut cluster.connection(node))
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

/// The first of `candidates` whose server key (by `server_key`) node `node` serves.
fn key_on_node(
    cluster: &RedisCluster,
    node: usize,
    candidates: impl Iterator<Item = String>,
    server_key: impl Fn(&String) -> String,
) -> String {
    candidates
        .take(500)
        .find(|k| owner(cluster, &server_key(k)) == node)
        .unwrap_or_else(|| panic!("no candidate key lives on node {node}"))
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

/// Asserts `result` is a Redis store error of a call on a killed node's
/// connection: unsent (`No`) or written to the dropped socket (`Unknown`).
fn assert_dropped_or_unsent<T: std::fmt::Debug>(what: &str, result: Result<T, Error>) {
    match result {
        Err(Error::Store(e)) => assert!(
            matches!(e.applied(), Applied::No | Applied::Unknown),
            "{what}: {e}"
        ),
        other => panic!("{what}: expected Error::Store, got {other:?}"),
    }
}

/// Asserts `result` is a Redis store error saying `applied`; with `timed_out`,
/// that its source is an I/O error of kind `TimedOut` naming the response timeout.
fn assert_store_error<T: std::fmt::Debug>(
    what: &str,
    result: Result<T, Error>,
    applied: Applied,
    timed_out: bool,
) {
    let err = match result {
        Err(err) => err,
        Ok(v) => panic!("{what}: expected a store error, got {v:?}"),
    };
    match &err {
        Error::Store(e) => {
            assert_eq!(e.applied(), applied, "{what}: {err}");
            assert_eq!(e.store(), "redis", "{what}: {err}");
        }
        other => panic!("{what}: expected Error::Store, got {other:?}"),
    }
    if timed_out {
        let source = std::error::Error::source(&err).expect("a store error has a source");
        let io = source
            .downcast_ref::<std::io::Error>()
            .unwrap_or_else(|| panic!("{what}: source is not an io::Error: {source}"));
        assert_eq!(io.kind(), std::io::ErrorKind::TimedOut, "{what}: {io}");
        assert!(io.to_string().contains("response timeout"), "{what}: {io}");
    }
}

fn multi_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `f`, asserting it returned within `TIMEOUT` plus the margin.
fn bounded<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    assert!(
        took <= TIMEOUT + MARGIN,
        "{what} took {took:?}, over the timeout {TIMEOUT:?} plus {MARGIN:?}"
    );
    out
}

// ---------------------------------------------------------------------------
// One API: memory, one server, a Cluster.
// ---------------------------------------------------------------------------

/// One call of a trace, on the keys' indices into [`TRACE_KEYS`].
#[derive(Clone, Copy, Debug)]
enum Op {
    /// The clocks move on by this many µs.
    Gap(u64),
    Check(usize, u64),
    Peek(usize, u64),
    Acquire(usize, u64),
    CheckAll(usize, usize, u64),
    PeekAll(usize, usize, u64),
    /// `reserve_all`, then `cancel` at once.
    ReserveAllCancel(usize, usize, u64),
}

/// Ordinary and hostile key texts.
const TRACE_KEYS: [&str; 6] = ["alice", "bob", "}{", "a b:c", "\\]", "{user:7}"];

fn trace_ops(seed: u64, len: usize, multi: bool) -> Vec<Op> {
    let mut rng = Rng::new(seed);
    let mut ops = Vec::with_capacity(2 * len);
    let key = |rng: &mut Rng| rng.below(TRACE_KEYS.len() as u64) as usize;
    for _ in 0..len {
        if rng.chance(60) {
            ops.push(Op::Gap(rng.below(600_000)));
        }
        let (a, b, cost) = (key(&mut rng), key(&mut rng), 1 + rng.below(3));
        let pick = rng.below(if multi { 100 } else { 60 });
        ops.push(match pick {
            0..=34 => Op::Check(a, cost),
            35..=44 => Op::Peek(a, cost),
            45..=59 => Op::Acquire(a, 1 + rng.below(2)),
            60..=79 => Op::CheckAll(a, b, cost),
            80..=89 => Op::PeekAll(a, b, cost),
            _ => Op::ReserveAllCancel(a, b, cost),
        });
    }
    ops
}

/// What `limiter` answers to each of `ops`, as text. After an acquire, which
/// sleeps on the manual clock, the clock is moved on to a whole microsecond, so
/// that every call runs at whole microseconds (where the docs promise the Redis
/// store's decisions equal memory's field by field).
fn run_trace<A, S>(limiter: &KeyedRateLimiter<String, A, S, ManualClock>, ops: &[Op]) -> Vec<String>
where
    A: sluicegate::algorithms::Algorithm,
    S: Store<String, A>,
{
    let clock = limiter.clock();
    let key = |i: usize| s(TRACE_KEYS[i]);
    ops.iter()
        .map(|op| match *op {
            Op::Gap(us) => {
                clock.advance(Duration::from_micros(us));
                format!("gap {us}")
            }
            Op::Check(a, cost) => format!("{:?}", limiter.check(&key(a), cost)),
            Op::Peek(a, cost) => format!("{:?}", limiter.peek(&key(a), cost)),
            Op::Acquire(a, cost) => {
                let waited = limiter.acquire_n(&key(a), cost);
                clock.advance_nanos((1000 - clock.now() % 1000) % 1000);
                format!("{waited:?}")
            }
            Op::CheckAll(a, b, cost) => {
                format!("{:?}", limiter.check_all(&[key(a), key(b)], cost))
            }
            Op::PeekAll(a, b, cost) => format!("{:?}", limiter.peek_all(&[key(a), key(b)], cost)),
            Op::ReserveAllCancel(a, b, cost) => {
                match limiter.reserve_all(&[key(a), key(b)], cost) {
                    Ok(r) => {
                        let (delay, decision) = (r.delay(), r.decision());
                        format!("{delay:?} {decision:?} {:?}", r.cancel())
                    }
                    Err(e) => format!("{e:?}"),
                }
            }
        })
        .collect()
}

fn assert_same_trace(what: &str, ops: &[Op], expected: &[String], got: &[String]) {
    assert_eq!(expected.len(), got.len());
    if let Some(i) = (0..expected.len()).find(|&i| expected[i] != got[i]) {
        panic!(
            "{what}: call {i} ({:?}) differs from memory:\n memory: {}\n   here: {}\n(the calls before: {:?})",
             ops[i],
            expected[i],
            got[i],
            &ops[i.saturating_sub(6)..i]
        );
    }
}

/// The same trace on a memory store, on one server, and on the Cluster (with a
/// shared tag when the trace has multi-key calls, per identity otherwise): every
/// answer equal.
fn same_everywhere<A: RedisAlgorithm + Clone>(
    name: &str,
    algorithm: A,
    server: &RedisServer,
    cluster: &RedisCluster,
    seed: u64,
) {
    // Virtual time starts where a real clock would be: 2023 in ns since 1970.
    let start = Duration::from_secs(1_700_000_000);
    for multi in [true, false] {
        let ops = trace_ops(seed, 250, multi);
        let prefix = format!("{name}-{multi}:");
        let memory = KeyedRateLimiter::with_clock(algorithm.clone(), ManualClock::new());
        let one: Redis<A> =
            RedisStore::open_with(server.url(), caller_time_options(&prefix)).unwrap();
        let one = KeyedRateLimiter::with_store(algorithm.clone(), one, ManualClock::new());
        let many: Redis<A> = if multi {
            tagged_store(cluster, &prefix, "trace")
        } else {
            cluster_store(cluster, &prefix)
        };
        let many = KeyedRateLimiter::with_store(algorithm.clone(), many, ManualClock::new());
        memory.clock().advance(start);
        one.clock().advance(start);
        many.clock().advance(start);
        let expected = run_trace(&memory, &ops);
        // The trace reaches every verdict and, when multi-key, both outcomes of
        // the `_all` calls.
        for needle in ["Allowed", "Denied"] {
            assert!(
                expected.iter().any(|line| line.contains(needle)),
                "{name}: no {needle}"
            );
        }
        assert_same_trace(
            &format!("{name} on one server"),
            &ops,
            &expected,
            &run_trace(&one, &ops),
        );
        assert_same_trace(
            &format!("{name} on the Cluster (multi-key: {multi})"),
            &ops,
            &expected,
            &run_trace(&many, &ops),
        );
    }
}

#[test]
fn the_same_limiter_code_decides_alike_in_memory_on_one_server_and_on_a_cluster_on_virtual_time() {
    let server = RedisServer::start_own();
    let cluster = RedisCluster::start();
    same_everywhere(
        "fw",
        FixedWindow::new(5, Duration::from_secs(1)).unwrap(),
        &server,
        &cluster,
        11,
    );
    same_everywhere(
        "bursty",
        SmoothBursty::new(4.0).unwrap(),
        &server,
        &cluster,
        12,
    );
    let set = AllOf::new((
        LeakyBucket::meter(4, 2, Duration::from_secs(1)).unwrap(),
        SlidingLog::new(3, Duration::from_secs(1)).unwrap(),
    ));
    same_everywhere("set", set, &server, &cluster, 13);
}

// ---------------------------------------------------------------------------
// Keys and slots.
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// `_all` calls: all-or-nothing across keys and limits.
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Concurrency on the real clock.
// ---------------------------------------------------------------------------

/// Runs `per_thread` on 8 threads started together; the sum of what they return.
fn on_eight_threads(per_thread: impl Fn(usize) -> u64 + Sync) -> u64 {
    let barrier = Barrier::new(8);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (barrier, per_thread) = (&barrier, &per_thread);
                scope.spawn(move || {
                    barrier.wait();
                    per_thread(i)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

#[test]
fn eight_threads_sharing_one_key_on_a_cluster_never_exceed_its_limit() {
    let cluster = RedisCluster::start();
    let log = SlidingLog::new(40, MINUTE).unwrap();
    let limiter: OnRedis<SlidingLog, DefaultClock> = KeyedRateLimiter::with_store(
        log,
        real_time_store(&cluster, patient("hot:")),
        DefaultClock::new(),
    );
    let granted = on_eight_threads(|_| {
        (0..25)
            .map(|_| u64::from(limiter.check(&s("hot"), 1).unwrap().is_allowed()))
            .sum()
    });
    assert_eq!(granted, 40, "200 attempts on a limit of 40 a minute");
    assert!(!limiter.try_acquire(&s("hot")));
}

#[test]
fn eight_threads_calling_check_all_on_a_cluster_charge_every_key_or_none() {
    let cluster = RedisCluster::start();
    // 30 a minute (exact) and 1000 a day, per key.
    let limits = Limits::new()
        .with(SlidingLog::new(30, MINUTE).unwrap())
        .with(FixedWindow::new(1000, Duration::from_secs(86_400)).unwrap());
    let options = patient("pairs:").shared_tag("pairs").unwrap();
    let limiter: OnRedis<Limits, DefaultClock> = KeyedRateLimiter::with_store(
        limits,
        real_time_store(&cluster, options),
        DefaultClock::new(),
    );
    let per_thread: Vec<AtomicU64> = (0..8).map(|_| AtomicU64::new(0)).collect();
    let granted = on_eight_threads(|i| {
        let keys = [s("shared"), format!("own:{i}")];
        let mine = (0..20)
            .map(|_| u64::from(limiter.check_all(&keys, 1).unwrap().is_allowed()))
            .sum();
        per_thread[i].store(mine, Ordering::Relaxed);
        mine
    });
    assert_eq!(granted, 30, "160 attempts on the shared key's 30 a minute");
    // Each own key was charged exactly for its thread's grants.
    for (i, mine) in per_thread.iter().enumerate() {
        let mine = mine.load(Ordering::Relaxed);
        let d = limiter.peek(&format!("own:{i}"), 1).unwrap();
        let used = if d.is_allowed() {
            30 - 1 - d.remaining()
        } else {
            30
        };
        assert_eq!(used, mine, "own:{i}: {d:?}");
    }
}

#[test]
fn eight_threads_on_a_bursty_key_on_a_cluster_get_no_more_than_its_burst_and_rate() {
    let cluster = RedisCluster::start();
    let rate = 50.0;
    let limiter: OnRedis<SmoothBursty, DefaultClock> = KeyedRateLimiter::with_store(
        SmoothBursty::new(rate).unwrap(),
        real_time_store(&cluster, patient("bursty:")),
        DefaultClock::new(),
    );
    let start = Instant::now();
    let run_for = Duration::from_millis(800);
    let granted = on_eight_threads(|_| {
        let mut mine = 0;
        while start.elapsed() < run_for {
            mine += u64::from(limiter.check(&s("hot"), 1).unwrap().is_allowed());
        }
        mine
    });
    let elapsed = start.elapsed().as_secs_f64();
    // A new key holds a full burst (1 s of permits), plus one paid later; then
    // the rate. One more for rounding at the edges of the span.
    let bound = rate + 1.0 + rate * elapsed + 1.0;
    assert!(
        (granted as f64) <= bound,
        "{granted} grants in {elapsed:.3} s, over {bound:.1}"
    );
    assert!(
        granted as f64 >= rate,
        "the burst alone grants {rate}: {granted}"
    );
}

#[test]
fn sixteen_tokio_tasks_sharing_one_key_on_a_cluster_never_exceed_its_limit() {
    let cluster = RedisCluster::start();
    let limiter: OnRedis<SlidingLog, DefaultClock> = KeyedRateLimiter::with_store(
        SlidingLog::new(30, MINUTE).unwrap(),
        real_time_store(&cluster, patient("tasks:")),
        DefaultClock::new(),
    );
    let handle = limiter.to_async();
    let runtime = multi_thread_runtime();
    let granted: u64 = runtime.block_on(async {
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let handle = handle.clone();
                tokio::spawn(async move {
                    let mut mine = 0;
                    for _ in 0..15 {
                        mine += u64::from(handle.check(&s("hot"), 1).await.unwrap().is_allowed());
                    }
                    mine
                })
            })
            .collect();
        let mut sum = 0;
        for task in tasks {
            sum += task.await.unwrap();
        }
        sum
    });
    assert_eq!(granted, 30, "240 attempts on a limit of 30 a minute");
    assert!(!runtime
        .block_on(handle.check(&s("hot"), 1))
        .unwrap()
        .is_allowed());
}

#[test]
fn the_async_api_on_a_cluster_runs_outside_tokio_on_eight_threads_at_once() {
    let cluster = RedisCluster::start();
    let options = patient("outside:").shared_tag("outside").unwrap();
    let limiter: OnRedis<SlidingLog, DefaultClock> = KeyedRateLimiter::with_store(
        SlidingLog::new(24, MINUTE).unwrap(),
        real_time_store(&cluster, options),
        DefaultClock::new(),
    );
    let handle = limiter.to_async();
    let waited = Arc::new(AtomicU64::new(0));
    let granted = on_eight_threads(|i| {
        futures::executor::block_on(async {
            let mut mine = 0;
            for _ in 0..10 {
                mine += u64::from(handle.check(&s("hot"), 1).await.unwrap().is_allowed());
            }
            let pair = [format!("own:{i}"), s("common")];
            let w = handle.acquire_all(&pair, 1).await.unwrap();
            waited.fetch_add(w.as_nanos() as u64, Ordering::Relaxed);
            mine
        })
    });
    assert_eq!(granted, 24, "80 attempts on a limit of 24 a minute");
    assert_eq!(waited.load(Ordering::Relaxed), 0, "8 of 24: no wait");
    // 24 - 8 acquired - the peek's 1.
    assert_eq!(limiter.peek(&s("common"), 1).unwrap().remaining(), 15);
    for i in 0..8 {
        assert_eq!(
            limiter.peek(&format!("own:{i}"), 1).unwrap().remaining(),
            22
        );
    }
}

/// A limiter of 100 a minute on `cluster` whose calls wait at most 1 s.
fn async_limiter(cluster: &RedisCluster, prefix: &str) -> OnRedis<SlidingLog, DefaultClock> {
    let options = RedisOptions::default()
        .prefix(prefix)
        .unwrap()
        .connect_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(1));
    KeyedRateLimiter::with_store(
        SlidingLog::new(100, MINUTE).unwrap(),
        real_time_store(cluster, options),
        DefaultClock::new(),
    )
}

#[test]
fn an_async_call_in_a_second_runtime_is_answered_after_the_first_runtime_is_dropped() {
    let cluster = RedisCluster::start();
    let handle = async_limiter(&cluster, "runtimes:").to_async();
    crate::runtimes::second_runtime_after_the_first_is_dropped(&handle);
}

#[test]
fn an_async_call_outside_tokio_is_answered_while_the_runtime_that_called_first_is_idle() {
    let cluster = RedisCluster::start();
    let handle = async_limiter(&cluster, "idle:").to_async();
    crate::runtimes::outside_tokio_while_the_first_runtime_is_idle(&handle);
}

// ---------------------------------------------------------------------------
// A node down or paused.
// ---------------------------------------------------------------------------

/// A Cluster whose node 0 was killed after every connection of two stores was in
/// use, blocking and async: one store per identity, one under a tag node 0
/// serves; an identity on node 0 and one on node 1, each with 2 of its 5 taken.
struct DownNode {
    _cluster: RedisCluster,
    limiter: OnRedis<SlidingLog, DefaultClock>,
    tagged: OnRedis<SlidingLog, DefaultClock>,
    victim: String,
    survivor: String,
    pair: Vec<String>,
    /// A runtime whose workers keep running between calls, as a server's does:
    /// the shared async connection's reader hears a node close its connection.
    runtime: tokio::runtime::Runtime,
}

fn down_node(prefix: &str) -> DownNode {
    let mut cluster = RedisCluster::start();
    let log = SlidingLog::new(5, MINUTE).unwrap();
    let limiter: OnRedis<SlidingLog, DefaultClock> = KeyedRateLimiter::with_store(
        log,
        real_time_store(&cluster, short_timeouts(prefix)),
        DefaultClock::new(),
    );
    let server_key = |k: &String| limiter.store().server_key(k);
    let candidates = || (0..).map(|i| format!("user:{i}"));
    let victim = key_on_node(&cluster, 0, candidates(), server_key);
    let survivor = key_on_node(&cluster, 1, candidates(), server_key);
    // A shared tag whose slot node 0 serves, for multi-key calls.
    let tag = (0..)
        .map(|i| format!("t{i}"))
        .take(500)
        .find(|t| owner(&cluster, &format!("{{{t}}}")) == 0)
        .unwrap();
    let options = short_timeouts(&format!("{prefix}tag:"))
        .shared_tag(&tag)
        .unwrap();
    let tagged: OnRedis<SlidingLog, DefaultClock> =
        KeyedRateLimiter::with_store(log, real_time_store(&cluster, options), DefaultClock::new());
    let pair = keys(&["ip", "user"]);
    let runtime = multi_thread_runtime();
    for key in [&victim, &survivor] {
        assert!(limiter.check(key, 1).unwrap().is_allowed());
        let d = runtime.block_on(limiter.to_async().check(key, 1)).unwrap();
        assert!(d.is_allowed());
    }
    assert!(tagged.check_all(&pair, 1).unwrap().is_allowed());
    let waited = runtime.block_on(tagged.to_async().acquire_all(&pair, 1));
    assert_eq!(waited.unwrap(), Duration::ZERO);
    cluster.kill_node(0);
    DownNode {
        _cluster: cluster,
        limiter,
        tagged,
        victim,
        survivor,
        pair,
        runtime,
    }
}

#[test]
fn a_killed_node_fails_only_its_own_slots_blocking_calls_with_nothing_applied() {
    let down = down_node("down-b:");
    let (limiter, victim) = (&down.limiter, &down.victim);
    let no = Applied::No;
    let check = bounded("check", || limiter.check(victim, 1));
    assert_store_error("check", check, no, false);
    assert!(!bounded("try_acquire", || limiter.try_acquire(victim)));
    let reserve = bounded("reserve", || limiter.reserve(victim, 1));
    assert_store_error("reserve", reserve, no, false);
    let all = bounded("check_all", || down.tagged.check_all(&down.pair, 1));
    assert_store_error("check_all", all, no, false);
    // The other nodes' slots keep counting: 5 - 2 before - this one.
    let d = limiter.check(&down.survivor, 1).unwrap();
    assert!(d.is_allowed() && d.remaining() == 2, "{d:?}");
}

#[test]
fn a_killed_node_fails_only_its_own_slots_async_calls_with_nothing_applied() {
    let down = down_node("down-a:");
    let (handle, victim) = (down.limiter.to_async(), &down.victim);
    let runtime = &down.runtime;
    let no = Applied::No;
    let tagged = down.tagged.to_async();
    // A connection opened before the kill may not be known closed yet: the first
    // call on it may be written to the dropped socket, which the docs answer
    // with `Unknown` (a dropped connection); once the client has seen it closed,
    // nothing is sent and every call says `No`.
    let first = bounded("async check", || runtime.block_on(handle.check(victim, 1)));
    assert_dropped_or_unsent("async check in tokio, first", first);
    let first = bounded("async acquire_all", || {
        runtime.block_on(tagged.acquire_all(&down.pair, 1))
    });
    assert_dropped_or_unsent("async acquire_all in tokio, first", first);
    let in_tokio = bounded("async check", || runtime.block_on(handle.check(victim, 1)));
    assert_store_error("async check in tokio", in_tokio, no, false);
    let all = bounded("async acquire_all", || {
        runtime.block_on(tagged.acquire_all(&down.pair, 1))
    });
    assert_store_error("async acquire_all in tokio", all, no, false);
    let outside = bounded("async check", || {
        futures::executor::block_on(handle.check(victim, 1))
    });
    assert_store_error("async check outside tokio", outside, no, false);
    // The other nodes' slots keep counting: 5 - 2 before - this one.
    let d = runtime.block_on(handle.check(&down.survivor, 1)).unwrap();
    assert!(d.is_allowed() && d.remaining() == 2, "{d:?}");
    let d = futures::executor::block_on(handle.check(&down.survivor, 1)).unwrap();
    assert!(d.is_allowed() && d.remaining() == 1, "{d:?}");
}

#[test]
fn a_paused_node_s_calls_time_out_as_unknown_and_none_lands_when_it_resumes() {
    let mut cluster = RedisCluster::start();
    let log = SlidingLog::new(5, MINUTE).unwrap();
    let limiter: OnRedis<SlidingLog, DefaultClock> = KeyedRateLimiter::with_store(
        log,
        real_time_store(&cluster, short_timeouts("paused:")),
        DefaultClock::new(),
    );
    let server_key = |k: &String| limiter.store().server_key(k);
    let candidates = || (0..).map(|i| format!("user:{i}"));
    let victim = key_on_node(&cluster, 1, candidates(), server_key);
    let survivor = key_on_node(&cluster, 2, candidates(), server_key);
    let handle = limiter.to_async();
    let runtime = current_thread_runtime();
    for key in [&victim, &survivor] {
        assert!(limiter.check(key, 1).unwrap().is_allowed());
        assert!(runtime.block_on(handle.check(key, 1)).unwrap().is_allowed());
    }
    let expired_before = expired_errors(&cluster, 1);
    cluster.pause_node(1);
    let unknown = Applied::Unknown;
    let blocking = bounded("check", || limiter.check(&victim, 1));
    let in_tokio = bounded("async check", || runtime.block_on(handle.check(&victim, 1)));
    // Another node answers meanwhile.
    let other = limiter.check(&survivor, 1);
    cluster.resume_node(1);
    assert_store_error("check", blocking, unknown, true);
    assert_store_error("async check in tokio", in_tokio, unknown, true);
    assert_eq!(other.unwrap().remaining(), 2);
    // The node takes in the two calls it was sent while paused and refuses
    // each as past its deadline.
    let deadline = Instant::now() + Duration::from_secs(5);
    while expired_errors(&cluster, 1) < expired_before + 2 {
        assert!(
            Instant::now() < deadline,
            "the resumed node refused {} late calls as EXPIRED, not 2",
            expired_errors(&cluster, 1) - expired_before
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // None of them landed: 5 - the 2 before - the peek's 1.
    assert_eq!(limiter.peek(&victim, 1).unwrap().remaining(), 2);
}

/// Node `node`'s count of error replies beginning `EXPIRED` (`INFO errorstats`).
fn expired_errors(cluster: &RedisCluster, node: usize) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("errorstats")
        .query(&mut cluster.connection(node))
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("errorstat_EXPIRED:count="))
        .map_or(0, |n| n.trim().parse().unwrap())
}
