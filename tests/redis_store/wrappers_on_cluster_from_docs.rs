//! The deny cache (`stores::deny_cache`) and leased budgets (`stores::lease`)
//! over a Redis store on a three-master Cluster, through the keyed limiters, as
//! the README ("Operating the Redis store") and the two modules' docs describe
//! them: a refused key answered in the process with no round trip (`Source::Cached`,
//! durations counted down) on whatever node its slot lives; cached answers equal
//! to the plain store's for fixed windows, Guava's limiters and sets of fixed
//! windows; a set holding a sliding log that records refusals accepted, its
//! refusals recorded nowhere; leases taken in one round trip and spent with
//! `Source::Leased`, the last permits one call at a time; several processes and
//! many threads or tasks never admitting over the limit; multi-key calls passed
//! through to the store, so that keys in different slots are refused with
//! `Error::InvalidKeys` before anything is sent.
//!
//! Each test starts its own Cluster and runs at the caller's (virtual) time, so
//! that every decision is exact. Round trips are counted with the nodes'
//! `INFO commandstats`.

use crate::support::redis as redis_support;
use crate::support::rng::Rng;
use redis_support::trace::caller_time_options;
use redis_support::{calls, current_thread_runtime, RedisCluster};
use sluicegate::algorithms::{AllOf, FixedWindow, SlidingLog, SmoothBursty, SmoothWarmingUp};
use sluicegate::stores::deny_cache::DenyCache;
use sluicegate::stores::lease::LeasedStore;
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore};
use sluicegate::{Clock, Decision, Error, KeyedRateLimiter, ManualClock, Source};
use std::time::Duration;

type Redis<A> = RedisStore<String, A>;
type Cached<A> = KeyedRateLimiter<String, A, DenyCache<Redis<A>, String, A>, ManualClock>;
type Leased<A> = KeyedRateLimiter<String, A, LeasedStore<Redis<A>, String, A>, ManualClock>;

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

/// A store on `cluster` at the caller's time, keys under `prefix`.
pub(crate) fn cluster_store<A: RedisAlgorithm>(cluster: &RedisCluster, prefix: &str) -> Redis<A> {
    RedisStore::open_cluster(cluster.urls(), caller_time_options(prefix)).unwrap()
}

/// [`cluster_store`] with every key under the hash tag `{tag}`.
fn tagged_store<A: RedisAlgorithm>(cluster: &RedisCluster, prefix: &str, tag: &str) -> Redis<A> {
    let options: RedisOptions = caller_time_options(prefix).shared_tag(tag).unwrap();
    RedisStore::open_cluster(cluster.urls(), options).unwrap()
}

/// Steps the nodes ran: `FCALL`s and `FCALL_RO`s on every node.
pub(crate) fn fcalls(cluster: &RedisCluster) -> u64 {
    (0..3)
        .map(|i| {
            let mut conn = cluster.connection(i);
            calls(&mut conn, "fcall") + calls(&mut conn, "fcall_ro")
        })
        .sum()
}

/// Loads the store's step library on every node (the first call on a node that
/// lacks it is answered "Function not found", then loads it and calls once more),
/// so that the steps counted afterwards are the calls' own.
pub(crate) fn load_the_library_everywhere(cluster: &RedisCluster) {
    let store: Redis<FixedWindow> = cluster_store(cluster, "load:");
    let limiter = KeyedRateLimiter::with_store(
        FixedWindow::new(1, MINUTE).unwrap(),
        store,
        ManualClock::new(),
    );
    for node in 0..3 {
        let key = key_on_node(cluster, node, |k| limiter.store().server_key(k));
        limiter.peek(&key, 1).unwrap();
    }
}

/// The node that serves `server_key`: the one that answers it without a redirect.
pub(crate) fn owner(cluster: &RedisCluster, server_key: &str) -> usize {
    (0..3)
        .find(|&i| {
            redis::cmd("EXISTS")
                .arg(server_key)
                .query::<i64>(&mut cluster.connection(i))
                .is_ok()
        })
        .expect("one node serves every slot")
}

/// A key `user:<n>` whose server key (by `server_key`) node `node` serves.
pub(crate) fn key_on_node(
    cluster: &RedisCluster,
    node: usize,
    server_key: impl Fn(&String) -> String,
) -> String {
    (0..500)
        .map(|i| format!("user:{i}"))
        .find(|k| owner(cluster, &server_key(k)) == node)
        .expect("some key of 500 on every node")
}

/// One key on each of the three nodes.
fn one_key_per_node<A: RedisAlgorithm>(cluster: &RedisCluster, store: &Redis<A>) -> Vec<String> {
    (0..3)
        .map(|node| key_on_node(cluster, node, |k| store.server_key(k)))
        .collect()
}

/// Two identities whose keys fall in different slots of the store.
fn cross_slot_pair<A: RedisAlgorithm>(cluster: &RedisCluster, store: &Redis<A>) -> Vec<String> {
    let a = key_on_node(cluster, 0, |k| store.server_key(k));
    let b = key_on_node(cluster, 1, |k| store.server_key(k));
    vec![a, b]
}

fn assert_invalid_keys<T: std::fmt::Debug>(what: &str, result: Result<T, Error>) {
    assert!(
        matches!(result, Err(Error::InvalidKeys { .. })),
        "{what}: expected Error::InvalidKeys, got {result:?}"
    );
}

/// `d` with its source set aside, to compare with a plain store's decision.
pub(crate) fn unsourced(d: Decision) -> Decision {
    d.with_source(Source::Store)
}

// ---------------------------------------------------------------------------
// The deny cache.
// ---------------------------------------------------------------------------

fn cached<A: RedisAlgorithm + Clone>(cluster: &RedisCluster, prefix: &str, alg: A) -> Cached<A> {
    let store = DenyCache::new(cluster_store(cluster, prefix), &alg).unwrap();
    KeyedRateLimiter::with_store(alg, store, ManualClock::new())
}

#[test]
fn a_refused_key_on_any_node_is_answered_from_the_cache_counted_down_with_no_round_trip() {
    let cluster = RedisCluster::start();
    let limiter = cached(
        &cluster,
        "dc-hit:",
        FixedWindow::new(3, Duration::from_secs(10)).unwrap(),
    );
    let users = one_key_per_node(&cluster, limiter.store().inner());
    for user in &users {
        for left in (0..3).rev() {
            let d = limiter.check(user, 1).unwrap();
            assert!(
                d.is_allowed() && d.source() == Source::Store,
                "{user}: {d:?}"
            );
            assert_eq!(d.remaining(), left);
        }
        let refused = limiter.check(user, 1).unwrap();
        assert!(!refused.is_allowed() && refused.source() == Source::Store);
        assert_eq!(refused.retry_after(), Duration::from_secs(10));
    }
    let sent = fcalls(&cluster);
    limiter.clock().advance(Duration::from_secs(4));
    for user in &users {
        for _ in 0..4 {
            let d = limiter.check(user, 1).unwrap();
            assert_eq!(d.source(), Source::Cached, "{user}: {d:?}");
            assert!(!d.is_allowed());
            assert_eq!((d.limit(), d.remaining()), (3, 0));
            assert_eq!(d.retry_after(), Duration::from_secs(6), "counted down");
            assert_eq!(d.reset_after(), Duration::from_secs(6), "counted down");
        }
        assert!(!limiter.try_acquire(user));
        let peeked = limiter.peek(user, 1).unwrap();
        assert_eq!(
            peeked.source(),
            Source::Cached,
            "a zero-wait peek: {peeked:?}"
        );
    }
    assert_eq!(fcalls(&cluster), sent, "cached answers make no round trip");
    assert_eq!(limiter.store().hits(), 3 * 6);
    limiter.clock().advance(Duration::from_secs(6));
    for user in &users {
        let d = limiter.check(user, 1).unwrap();
        assert!(
            d.is_allowed() && d.source() == Source::Store,
            "{user}: {d:?}"
        );
        assert_eq!(d.remaining(), 2);
    }
    assert_eq!(fcalls(&cluster), sent + 3);
}

/// Runs one random trace of checks, peeks and costs of 1 to `max_cost` on a plain
/// store and a cached one (both on `cluster`), asserting every answer equal but for
/// its source; answers how many the cache gave.
fn cached_equals_plain<A: RedisAlgorithm + Clone>(
    cluster: &RedisCluster,
    name: &str,
    alg: A,
    max_cost: u64,
    seed: u64,
) -> u64 {
    let plain: KeyedRateLimiter<String, A, Redis<A>, ManualClock> = KeyedRateLimiter::with_store(
        alg.clone(),
        cluster_store(cluster, &format!("{name}-plain:")),
        ManualClock::new(),
    );
    let cache = cached(cluster, &format!("{name}-cached:"), alg);
    let keys = ["alice", "bob", "carol", "}{ x"];
    let mut rng = Rng::new(seed);
    for step in 0..400 {
        if rng.chance(25) {
            let gap = Duration::from_millis(rng.below(700));
            plain.clock().advance(gap);
            cache.clock().advance(gap);
        }
        let key = keys[rng.below(keys.len() as u64) as usize];
        let cost = 1 + rng.below(max_cost);
        let (want, got) = if rng.chance(20) {
            (plain.peek(key, cost), cache.peek(key, cost))
        } else {
            (plain.check(key, cost), cache.check(key, cost))
        };
        let (want, got) = (want.unwrap(), got.unwrap());
        assert_eq!(
            unsourced(got),
            want,
            "{name}, step {step}, {key} cost {cost}"
        );
    }
    let hits = cache.store().hits();
    assert!(hits > 0, "{name}: the trace never hit the cache");
    hits
}

#[test]
fn on_a_cluster_cached_answers_equal_the_plain_store_s_for_windows_guava_s_limiters_and_sets() {
    let cluster = RedisCluster::start();
    let window = FixedWindow::new(4, Duration::from_secs(2)).unwrap();
    cached_equals_plain(&cluster, "fw", window, 2, 11);
    let bursty = SmoothBursty::new(5.0).unwrap();
    cached_equals_plain(&cluster, "sb", bursty, 2, 12);
    let warming = SmoothWarmingUp::new(4.0, Duration::from_secs(2)).unwrap();
    cached_equals_plain(&cluster, "swu", warming, 2, 13);
    let windows = AllOf::new((
        FixedWindow::new(3, Duration::from_secs(1)).unwrap(),
        FixedWindow::new(8, Duration::from_secs(5)).unwrap(),
    ));
    cached_equals_plain(&cluster, "set", windows, 1, 14);
}

#[test]
fn multi_key_calls_through_the_cache_go_to_the_store_and_cross_slot_keys_are_invalid_keys() {
    let cluster = RedisCluster::start();
    let window = FixedWindow::new(2, Duration::from_secs(10)).unwrap();
    let spread = cached(&cluster, "dc-spread:", window);
    let pair = cross_slot_pair(&cluster, spread.store().inner());
    let sent = fcalls(&cluster);
    assert_invalid_keys("check_all", spread.check_all(&pair, 1));
    assert_invalid_keys("peek_all", spread.peek_all(&pair, 1));
    let runtime = current_thread_runtime();
    assert_invalid_keys(
        "async acquire_all",
        runtime.block_on(spread.to_async().acquire_all(&pair, 1)),
    );
    assert_eq!(
        fcalls(&cluster),
        sent,
        "nothing is sent for keys in different slots"
    );

    let store = DenyCache::new(tagged_store(&cluster, "dc-tag:", "pair"), &window).unwrap();
    let tagged: Cached<FixedWindow> =
        KeyedRateLimiter::with_store(window, store, ManualClock::new());
    let pair = vec!["ip:203.0.113.7".to_owned(), "user:alice".to_owned()];
    for _ in 0..2 {
        assert!(tagged.check_all(&pair, 1).unwrap().is_allowed());
    }
    let sent = fcalls(&cluster);
    for _ in 0..3 {
        let d = tagged.check_all(&pair, 1).unwrap();
        assert!(!d.is_allowed());
        assert_eq!(
            d.source(),
            Source::Store,
            "a multi-key call is not cached: {d:?}"
        );
    }
    assert_eq!(fcalls(&cluster), sent + 3);
    assert_eq!(tagged.store().hits(), 0);
    // A single key of the pair, refused by the store, is cached from then on.
    assert_eq!(tagged.check(&pair[0], 1).unwrap().source(), Source::Store);
    assert_eq!(tagged.check(&pair[0], 1).unwrap().source(), Source::Cached);
    assert_eq!(tagged.check_all(&pair, 1).unwrap().source(), Source::Store);
    assert_eq!(tagged.store().hits(), 1);
}

#[test]
fn async_checks_of_a_refused_key_are_cached_and_an_async_acquire_waits_on_the_store() {
    let cluster = RedisCluster::start();
    let limiter = cached(
        &cluster,
        "dc-async:",
        FixedWindow::new(2, Duration::from_secs(10)).unwrap(),
    );
    let handle = limiter.to_async();
    let runtime = current_thread_runtime();
    let user = key_on_node(&cluster, 2, |k| limiter.store().inner().server_key(k));
    let check = |key: &str| runtime.block_on(handle.check(key, 1)).unwrap();
    assert!(check(&user).is_allowed() && check(&user).is_allowed());
    let refused = check(&user);
    assert_eq!(
        (refused.is_allowed(), refused.source()),
        (false, Source::Store)
    );
    let sent = fcalls(&cluster);
    limiter.clock().advance(Duration::from_secs(3));
    for _ in 0..5 {
        let d = check(&user);
        assert_eq!(d.source(), Source::Cached, "{d:?}");
        assert_eq!(d.retry_after(), Duration::from_secs(7));
    }
    assert!(!handle.try_acquire(user.as_str()));
    assert_eq!(fcalls(&cluster), sent);
    assert_eq!(limiter.store().hits(), 6);
    // An acquire is willing to wait: the store answers it, and it waits out the window.
    let waited = runtime.block_on(handle.acquire(user.as_str())).unwrap();
    assert_eq!(waited, Duration::from_secs(7));
    assert!(
        fcalls(&cluster) > sent,
        "a wait-willing reserve goes to the store"
    );
    assert_eq!(limiter.store().hits(), 6);
    let after = check(&user);
    assert_eq!(
        (after.is_allowed(), after.source(), after.remaining()),
        (true, Source::Store, 0)
    );
}

#[test]
fn a_set_holding_a_recording_log_is_cached_on_a_cluster_and_records_no_refusal() {
    let cluster = RedisCluster::start();
    let set = AllOf::new((
        SlidingLog::new(2, Duration::from_secs(10))
            .unwrap()
            .with_rejected_recorded(),
        FixedWindow::new(100, HOUR).unwrap(),
    ));
    // The recording log alone is refused; inside a set it is accepted.
    let alone = SlidingLog::new(2, Duration::from_secs(10))
        .unwrap()
        .with_rejected_recorded();
    let refused = DenyCache::<_, String, _>::new(cluster_store(&cluster, "dc-log:"), &alone);
    assert!(matches!(
        refused.err(),
        Some(sluicegate::ConfigError::Unsupported { .. })
    ));
    let limiter = cached(&cluster, "dc-set:", set);
    let plain: KeyedRateLimiter<String, _, Redis<_>, ManualClock> = KeyedRateLimiter::with_store(
        set,
        cluster_store(&cluster, "dc-set-plain:"),
        ManualClock::new(),
    );
    let user = key_on_node(&cluster, 0, |k| limiter.store().inner().server_key(k));
    let both = |secs: u64| {
        for c in [limiter.clock(), plain.clock()] {
            c.advance(Duration::from_secs(secs));
        }
        (
            limiter.check(&user, 1).unwrap(),
            plain.check(&user, 1).unwrap(),
        )
    };
    for _ in 0..2 {
        let (a, b) = both(1); // at 1 s and 2 s
        assert!(a.is_allowed() && b.is_allowed());
    }
    let (a, b) = both(1); // at 3 s: the log is full until its entry of 1 s leaves, at 11 s
    assert_eq!(
        (a.is_allowed(), a.source(), a.limit_index()),
        (false, Source::Store, 0)
    );
    assert_eq!(a.retry_after(), Duration::from_secs(8));
    assert_eq!(unsourced(a), b);
    for _ in 0..4 {
        let (a, b) = both(1);
        assert_eq!(a.source(), Source::Cached, "{a:?}");
        assert_eq!(unsourced(a), b, "the plain store's refusal, counted down");
    }
    // At 11 s the set grants again: no refusal was recorded in the log.
    let (a, b) = both(4);
    assert!(
        a.is_allowed() && a.source() == Source::Store,
        "cached store: {a:?}"
    );
    assert!(b.is_allowed(), "plain store: {b:?}");
}

// ---------------------------------------------------------------------------
// Leases.
// ---------------------------------------------------------------------------

pub(crate) fn leased<A: RedisAlgorithm + Clone>(
    cluster: &RedisCluster,
    prefix: &str,
    alg: A,
    size: u64,
    period: Duration,
) -> Leased<A> {
    let store = LeasedStore::new(cluster_store(cluster, prefix), size, period).unwrap();
    KeyedRateLimiter::with_store(alg, store, ManualClock::new())
}

#[test]
fn a_lease_is_one_round_trip_on_each_node_and_the_last_permits_go_one_call_at_a_time() {
    let cluster = RedisCluster::start();
    let window = FixedWindow::new(6, MINUTE).unwrap();
    let limiter = leased(&cluster, "lease-doc:", window, 4, MINUTE);
    let users = one_key_per_node(&cluster, limiter.store().inner());
    load_the_library_everywhere(&cluster);
    let before = fcalls(&cluster);
    for user in &users {
        let got: Vec<(Source, bool, u64)> = (0..7)
            .map(|_| {
                let d = limiter.check(user, 1).unwrap();
                (d.source(), d.is_allowed(), d.remaining())
            })
            .collect();
        let leased = |r| (Source::Leased, true, r);
        let store = |ok, r| (Source::Store, ok, r);
        let want = [
            leased(5),
            leased(4),
            leased(3),
            leased(2),
            store(true, 1),
            store(true, 0),
            store(false, 0),
        ];
        assert_eq!(got, want, "{user}");
        assert_eq!(
            limiter.store().leased(user.as_str(), limiter.clock().now()),
            0
        );
    }
    // Per key: the lease, the refused lease and its call's own cost, two more calls.
    assert_eq!(fcalls(&cluster) - before, 3 * 5);
    let plain: KeyedRateLimiter<String, FixedWindow, Redis<FixedWindow>, ManualClock> =
        KeyedRateLimiter::with_store(
            window,
            cluster_store(&cluster, "lease-doc:"),
            ManualClock::new(),
        );
    for user in &users {
        assert_eq!(
            plain.peek(user, 1).unwrap().remaining(),
            0,
            "{user}: all 6 left Redis"
        );
    }
}

#[test]
fn four_leasing_processes_on_eight_threads_admit_no_more_than_the_limit_nor_less_than_the_bound() {
    let cluster = RedisCluster::start();
    let (limit, size, processes) = (100u64, 5u64, 4u64);
    let window = FixedWindow::new(limit, HOUR).unwrap();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(1));
    let limiters: Vec<Leased<FixedWindow>> = (0..processes)
        .map(|_| {
            let store = LeasedStore::new(cluster_store(&cluster, "lease-4:"), size, HOUR).unwrap();
            KeyedRateLimiter::with_store(window, store, clock.clone())
        })
        .collect();
    let granted: u64 = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let limiter = &limiters[t % limiters.len()];
                scope.spawn(move || {
                    (0..60)
                        .filter(|_| limiter.check("shared", 1).unwrap().is_allowed())
                        .count() as u64
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).sum()
    });
    let floor = limit - processes * (size - 1);
    assert!(
        granted <= limit,
        "{granted} granted over a limit of {limit}"
    );
    assert!(
        granted >= floor,
        "{granted} granted, below the documented {floor}"
    );
    let plain: KeyedRateLimiter<String, FixedWindow, Redis<FixedWindow>, ManualClock> =
        KeyedRateLimiter::with_store(window, cluster_store(&cluster, "lease-4:"), clock.clone());
    assert_eq!(plain.peek("shared", 1).unwrap().remaining(), 0);
}

#[test]
fn sixteen_async_tasks_on_one_leased_key_stay_within_the_bounds() {
    let cluster = RedisCluster::start();
    let (limit, size) = (50u64, 10u64);
    let window = FixedWindow::new(limit, HOUR).unwrap();
    let limiter = leased(&cluster, "lease-async:", window, size, HOUR);
    let handle = limiter.to_async();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    // The first call takes the lease alone. Once the tasks race, a lease asked
    // for while others spend the key one call at a time may find fewer than
    // `size` left and be refused, as the docs allow, so the lease is not left to
    // the race.
    let first = runtime.block_on(handle.check("hot", 1)).unwrap();
    assert_eq!(
        (first.source(), first.remaining()),
        (Source::Leased, limit - 1)
    );
    let mut decisions: Vec<Decision> = runtime.block_on(async {
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let handle = handle.clone();
                tokio::spawn(async move {
                    let mut out = Vec::new();
                    for _ in 0..10 {
                        out.push(handle.check("hot", 1).await.unwrap());
                    }
                    out
                })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.unwrap());
        }
        all
    });
    // The tasks spend the rest of the first lease before any of them can need
    // another.
    let leased = decisions
        .iter()
        .filter(|d| d.source() == Source::Leased)
        .count() as u64;
    assert!(leased >= size - 1, "{leased} spent from leases");
    decisions.push(first);
    let granted = decisions.iter().filter(|d| d.is_allowed()).count() as u64;
    assert!(granted <= limit, "{granted} over {limit}");
    assert!(
        granted > limit - size,
        "{granted}: one process strands at most {}",
        size - 1
    );
    assert!(decisions
        .iter()
        .all(|d| matches!(d.source(), Source::Leased | Source::Store)));
}

#[test]
fn multi_key_calls_pass_through_the_lease_and_cross_slot_keys_are_invalid_keys() {
    let cluster = RedisCluster::start();
    let window = FixedWindow::new(10, MINUTE).unwrap();
    let spread = leased(&cluster, "lease-spread:", window, 4, MINUTE);
    let pair = cross_slot_pair(&cluster, spread.store().inner());
    let sent = fcalls(&cluster);
    assert_invalid_keys("check_all", spread.check_all(&pair, 1));
    assert_invalid_keys("reserve_all", spread.reserve_all(&pair, 1));
    assert_eq!(
        fcalls(&cluster),
        sent,
        "nothing is sent for keys in different slots"
    );
    assert_eq!(spread.store().leased_keys(), 0);

    let store = LeasedStore::new(tagged_store(&cluster, "lease-tag:", "pair"), 4, MINUTE).unwrap();
    let tagged: Leased<FixedWindow> =
        KeyedRateLimiter::with_store(window, store, ManualClock::new());
    let pair = vec!["ip:198.51.100.1".to_owned(), "user:bob".to_owned()];
    load_the_library_everywhere(&cluster);
    let sent = fcalls(&cluster);
    for left in [9, 8, 7] {
        let d = tagged.check_all(&pair, 1).unwrap();
        assert_eq!(
            (d.is_allowed(), d.source(), d.remaining()),
            (true, Source::Store, left)
        );
    }
    assert_eq!(
        fcalls(&cluster),
        sent + 3,
        "one round trip per multi-key call"
    );
    assert_eq!(
        tagged.store().leased_keys(),
        0,
        "no lease for a multi-key call"
    );
}
