//! Failure policies (`stores::failover`) over a Redis store on a three-master
//! Cluster whose node is killed or paused under many threads or tasks on the real
//! clock, as the README ("Operating the Redis store") and the `failover` module
//! docs describe them: every call answered (not failed) within the store's timeouts
//! plus a margin; `Closed` refusing and never admitting over the limit, `Open`
//! letting calls through unchecked, `Local` deciding by this process's share (spent
//! shares staying spent); decisions from Redis again after recovery, with no call
//! that gave up applied late; keys a Cluster cannot take together returned as the
//! call's own error, not a failure; and the deny cache and leases stacked over a
//! failover store (a policy's refusal is not cached; a lease a policy granted names
//! the policy's source).
//!
//! Each test starts its own Cluster. A node stays down or paused for well under
//! the Cluster's node timeout (5 s), so the other nodes keep serving their slots.

use super::wrappers_on_cluster_from_docs::{fcalls, key_on_node};
use crate::support::redis as redis_support;
use redis_support::{RedisCluster, YEAR};
use sluicegate::algorithms::{FixedWindow, SlidingLog};
use sluicegate::stores::deny_cache::DenyCache;
use sluicegate::stores::failover::{Backoff, FailoverStore, FailurePolicy};
use sluicegate::stores::lease::LeasedStore;
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore};
use sluicegate::{Decision, DefaultClock, Error, KeyedRateLimiter, Source};
use std::time::{Duration, Instant};

type Redis<A> = RedisStore<String, A>;
type Failover<A> = FailoverStore<Redis<A>, String, A>;
type OnFailover<A> = KeyedRateLimiter<String, A, Failover<A>, DefaultClock>;

/// The connect and response timeout of the stores whose nodes fail under them.
pub(crate) const TIMEOUT: Duration = Duration::from_millis(200);
/// What a call may take beyond its timeout on a loaded two-core machine.
pub(crate) const MARGIN: Duration = Duration::from_millis(1500);
const HOUR: Duration = Duration::from_secs(3600);
/// The back-off of every failover store here: short, so that recovery is quick.
const BACKOFF: Duration = Duration::from_millis(300);

/// A store on `cluster` at the server's time, with short timeouts.
pub(crate) fn short_timeouts<A: RedisAlgorithm>(urls: Vec<String>, prefix: &str) -> Redis<A> {
    let options = RedisOptions::default()
        .prefix(prefix)
        .unwrap()
        .connect_timeout(TIMEOUT)
        .response_timeout(TIMEOUT);
    RedisStore::open_cluster(urls, options).unwrap()
}

fn failover<A: RedisAlgorithm + Clone>(
    cluster: &RedisCluster,
    prefix: &str,
    alg: A,
    policy: FailurePolicy<A>,
) -> OnFailover<A> {
    let store = FailoverStore::new(short_timeouts(cluster.urls(), prefix), policy)
        .with_backoff(Backoff::fixed(BACKOFF));
    KeyedRateLimiter::with_store(alg, store, DefaultClock::new())
}

/// A key on node `node` of the limiter's inner store.
fn on_node<A: RedisAlgorithm>(
    cluster: &RedisCluster,
    limiter: &OnFailover<A>,
    node: usize,
) -> String {
    key_on_node(cluster, node, |k| limiter.store().inner().server_key(k))
}

/// One call's key, answer and time taken.
pub(crate) struct Call {
    pub(crate) key: String,
    pub(crate) decision: Decision,
    pub(crate) took: Duration,
}

/// Runs `per_thread` calls on each of 8 threads, thread `t`'s call `i` on
/// `keys[(t + i) % keys.len()]`, `gap` apart; every call must answer `Ok`.
pub(crate) fn on_eight_threads(
    keys: &[String],
    per_thread: usize,
    gap: Duration,
    call: impl Fn(&str) -> Result<Decision, Error> + Sync,
) -> Vec<Call> {
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let call = &call;
                scope.spawn(move || {
                    (0..per_thread)
                        .map(|i| {
                            let key = keys[(t + i) % keys.len()].clone();
                            let start = Instant::now();
                            let decision = call(&key).unwrap_or_else(|e| panic!("{key}: {e:?}"));
                            let took = start.elapsed();
                            std::thread::sleep(gap);
                            Call {
                                key,
                                decision,
                                took,
                            }
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect()
    })
}

pub(crate) fn assert_bounded(calls: &[Call]) {
    for call in calls {
        assert!(
            call.took <= TIMEOUT + MARGIN,
            "a call on {} took {:?}, over the timeout {TIMEOUT:?} plus {MARGIN:?}",
            call.key,
            call.took
        );
    }
}

fn count(calls: &[Call], key: &str, f: impl Fn(&Decision) -> bool) -> usize {
    calls
        .iter()
        .filter(|c| c.key == key && f(&c.decision))
        .count()
}

/// Calls `check` until the store decides (not the policy), at most 15 s.
fn until_the_store_decides(check: impl Fn() -> Decision) -> Decision {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let d = check();
        if d.source() == Source::Store {
            return d;
        }
        assert!(
            Instant::now() < deadline,
            "the store never decided again: {d:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn fail_closed_over_a_killed_node_answers_every_call_in_time_and_never_admits_over_the_limit() {
    let mut cluster = RedisCluster::start();
    let log = SlidingLog::new(20, HOUR).unwrap();
    let limiter = failover(&cluster, "fo-closed:", log, FailurePolicy::Closed);
    let (victim, survivor) = (
        on_node(&cluster, &limiter, 0),
        on_node(&cluster, &limiter, 1),
    );
    for key in [&victim, &survivor] {
        for _ in 0..5 {
            let d = limiter.check(key, 1).unwrap();
            assert!(
                d.is_allowed() && d.source() == Source::Store,
                "{key}: {d:?}"
            );
        }
    }
    cluster.kill_node(0);
    let keys = [victim.clone(), survivor.clone()];
    let calls = on_eight_threads(&keys, 20, Duration::from_millis(40), |k| {
        limiter.check(k, 1)
    });
    assert_bounded(&calls);
    assert_eq!(
        count(&calls, &victim, Decision::is_allowed),
        0,
        "the victim's node is down"
    );
    let survivor_granted = count(&calls, &survivor, Decision::is_allowed);
    assert!(
        survivor_granted <= 15,
        "{survivor_granted} granted over what is left"
    );
    let closed: Vec<&Decision> = calls
        .iter()
        .map(|c| &c.decision)
        .filter(|d| d.source() == Source::FailedClosed)
        .collect();
    assert!(!closed.is_empty());
    for d in &closed {
        assert!(
            !d.is_allowed() && (d.limit(), d.remaining()) == (0, 0),
            "{d:?}"
        );
        assert!(d.retry_after() <= BACKOFF, "at most the back-off: {d:?}");
    }
    assert!(calls
        .iter()
        .all(|c| matches!(c.decision.source(), Source::Store | Source::FailedClosed)));
    let stats = limiter.store().stats();
    assert!(stats.failures >= 1, "{stats:?}");
    assert_eq!(stats.failed_closed, closed.len() as u64, "{stats:?}");

    cluster.restart_node(0);
    let d = until_the_store_decides(|| limiter.check(&victim, 1).unwrap());
    assert_eq!(
        (d.is_allowed(), d.remaining()),
        (true, 19),
        "a restarted node starts afresh"
    );
    let d = until_the_store_decides(|| limiter.check(&survivor, 1).unwrap());
    let left = 20 - 5 - survivor_granted as u64 - 1;
    assert_eq!(
        (d.is_allowed(), d.remaining()),
        (true, left),
        "nothing counted twice"
    );
    assert!(!limiter.store().is_degraded());
}

#[test]
fn fail_open_over_a_paused_node_lets_sixteen_tasks_through_and_no_call_that_gave_up_lands() {
    let mut cluster = RedisCluster::start();
    let log = SlidingLog::new(20, HOUR).unwrap();
    let limiter = failover(&cluster, "fo-open:", log, FailurePolicy::Open);
    let (victim, survivor) = (
        on_node(&cluster, &limiter, 0),
        on_node(&cluster, &limiter, 2),
    );
    for _ in 0..3 {
        assert!(limiter.check(&victim, 1).unwrap().is_allowed());
    }
    let handle = limiter.to_async();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    // The async connection is opened before the pause.
    assert!(runtime
        .block_on(handle.check(&survivor, 1))
        .unwrap()
        .is_allowed());
    cluster.pause_node(0);
    let calls: Vec<Call> = runtime.block_on(async {
        let tasks: Vec<_> = (0..16)
            .map(|t| {
                let (handle, keys) = (handle.clone(), [victim.clone(), survivor.clone()]);
                tokio::spawn(async move {
                    let mut out = Vec::new();
                    for i in 0..8 {
                        let key = keys[(t + i) % 2].clone();
                        let start = Instant::now();
                        let decision = handle.check(&key, 1).await.unwrap();
                        out.push(Call {
                            key,
                            decision,
                            took: start.elapsed(),
                        });
                        tokio::time::sleep(Duration::from_millis(60)).await;
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
    cluster.resume_node(0);
    assert_bounded(&calls);
    for call in calls.iter().filter(|c| c.key == victim) {
        let d = &call.decision;
        assert_eq!(
            d.source(),
            Source::Unchecked,
            "the victim's node is paused: {d:?}"
        );
        assert!(
            d.is_allowed() && (d.limit(), d.remaining()) == (0, 0),
            "{d:?}"
        );
    }
    let unchecked = calls
        .iter()
        .filter(|c| c.decision.source() == Source::Unchecked)
        .count();
    assert_eq!(limiter.store().stats().unchecked, unchecked as u64);
    // Back from the pause: the calls that timed out were refused by their deadline,
    // so the victim holds the 3 grants made before it and the next one.
    let d = until_the_store_decides(|| runtime.block_on(handle.check(&victim, 1)).unwrap());
    assert_eq!((d.is_allowed(), d.remaining()), (true, 20 - 3 - 1), "{d:?}");
}

#[test]
fn a_local_share_decides_while_a_node_is_down_and_what_one_outage_spends_stays_spent() {
    let mut cluster = RedisCluster::start();
    let log = SlidingLog::new(20, HOUR).unwrap();
    let share = SlidingLog::new(4, HOUR).unwrap();
    let limiter = failover(&cluster, "fo-local:", log, FailurePolicy::Local(share));
    let victim = on_node(&cluster, &limiter, 0);
    assert!(limiter.check(&victim, 1).unwrap().is_allowed());
    cluster.kill_node(0);
    let keys = [victim.clone()];
    let outage = on_eight_threads(&keys, 8, Duration::from_millis(30), |k| limiter.check(k, 1));
    assert_bounded(&outage);
    let local: Vec<&Decision> = outage.iter().map(|c| &c.decision).collect();
    assert!(
        local.iter().all(|d| d.source() == Source::Local),
        "{local:?}"
    );
    assert!(
        local.iter().all(|d| d.limit() == 4),
        "the share's limit: {local:?}"
    );
    let granted = local.iter().filter(|d| d.is_allowed()).count();
    assert_eq!(granted, 4, "the share, once, across 8 threads");
    assert_eq!(limiter.store().stats().local, local.len() as u64);

    cluster.restart_node(0);
    let d = until_the_store_decides(|| limiter.check(&victim, 1).unwrap());
    assert_eq!((d.is_allowed(), d.remaining()), (true, 19));
    cluster.kill_node(0);
    let again = on_eight_threads(&keys, 3, Duration::from_millis(30), |k| limiter.check(k, 1));
    assert_bounded(&again);
    for call in &again {
        let d = &call.decision;
        assert!(
            d.source() == Source::Local && !d.is_allowed(),
            "spent in the last outage: {d:?}"
        );
    }
}

#[test]
fn keys_a_cluster_cannot_take_together_are_the_call_s_own_error_not_a_failure() {
    let cluster = RedisCluster::start();
    let window = FixedWindow::new(5, HOUR).unwrap();
    let limiter = failover(&cluster, "fo-keys:", window, FailurePolicy::Open);
    let pair = vec![
        on_node(&cluster, &limiter, 0),
        on_node(&cluster, &limiter, 1),
    ];
    let sent = fcalls(&cluster);
    let checked = limiter.check_all(&pair, 1);
    assert!(
        matches!(checked, Err(Error::InvalidKeys { .. })),
        "{checked:?}"
    );
    let runtime = redis_support::current_thread_runtime();
    let acquired = runtime.block_on(limiter.to_async().acquire_all(&pair, 1));
    assert!(
        matches!(acquired, Err(Error::InvalidKeys { .. })),
        "{acquired:?}"
    );
    assert_eq!(fcalls(&cluster), sent, "nothing was sent");
    assert!(!limiter.store().is_degraded());
    assert_eq!(limiter.store().stats(), Default::default());
    for key in &pair {
        let d = limiter.check(key, 1).unwrap();
        assert_eq!((d.source(), d.remaining()), (Source::Store, 4), "{key}");
    }
}

#[test]
fn a_deny_cache_over_a_failing_cluster_keeps_the_store_s_refusals_and_never_the_policy_s() {
    let mut cluster = RedisCluster::start();
    let window = FixedWindow::new(1, YEAR).unwrap();
    let inner = FailoverStore::new(
        short_timeouts(cluster.urls(), "fo-dc:"),
        FailurePolicy::Closed,
    )
    .with_backoff(Backoff::fixed(BACKOFF));
    let server_key = |k: &String| inner.inner().server_key(k);
    let refused = key_on_node(&cluster, 0, server_key);
    let fresh = (0..500)
        .map(|i| format!("fresh:{i}"))
        .find(|k| super::wrappers_on_cluster_from_docs::owner(&cluster, &server_key(k)) == 0)
        .unwrap();
    let store = DenyCache::new(inner, &window).unwrap();
    let limiter = KeyedRateLimiter::with_store(window, store, DefaultClock::new());
    assert!(limiter.check(&refused, 1).unwrap().is_allowed());
    assert_eq!(limiter.check(&refused, 1).unwrap().source(), Source::Store);
    assert_eq!(limiter.check(&refused, 1).unwrap().source(), Source::Cached);
    cluster.kill_node(0);
    // The store's refusal still holds; the fresh key's calls are the policy's.
    for _ in 0..5 {
        assert_eq!(limiter.check(&refused, 1).unwrap().source(), Source::Cached);
        let d = limiter.check(&fresh, 1).unwrap();
        assert_eq!(
            (d.source(), d.is_allowed()),
            (Source::FailedClosed, false),
            "{d:?}"
        );
    }
    assert_eq!(limiter.store().hits(), 6);
    assert_eq!(
        limiter.store().len(),
        1,
        "only the store's own refusal is kept"
    );
    cluster.restart_node(0);
    let d = until_the_store_decides(|| limiter.check(&fresh, 1).unwrap());
    assert!(d.is_allowed(), "{d:?}");
}

#[test]
fn a_lease_a_local_share_granted_over_a_killed_node_names_the_policy_as_its_source() {
    let mut cluster = RedisCluster::start();
    let window = FixedWindow::new(100, YEAR).unwrap();
    let share = FixedWindow::new(6, YEAR).unwrap();
    let inner = FailoverStore::new(
        short_timeouts(cluster.urls(), "fo-lease:"),
        FailurePolicy::Local(share),
    )
    .with_backoff(Backoff::fixed(BACKOFF));
    let victim = key_on_node(&cluster, 0, |k| inner.inner().server_key(k));
    let store = LeasedStore::new(inner, 3, HOUR).unwrap();
    let limiter = KeyedRateLimiter::with_store(window, store, DefaultClock::new());
    let first = limiter.check(&victim, 1).unwrap();
    assert_eq!((first.source(), first.remaining()), (Source::Leased, 99));
    for _ in 0..2 {
        assert_eq!(limiter.check(&victim, 1).unwrap().source(), Source::Leased);
    }
    cluster.kill_node(0);
    let keys = [victim.clone()];
    let calls = on_eight_threads(&keys, 3, Duration::from_millis(30), |k| limiter.check(k, 1));
    assert_bounded(&calls);
    let granted: Vec<&Decision> = calls
        .iter()
        .map(|c| &c.decision)
        .filter(|d| d.is_allowed())
        .collect();
    assert!(!granted.is_empty());
    assert!(granted.len() <= 6, "at most the share: {}", granted.len());
    for d in &granted {
        assert_eq!(
            d.source(),
            Source::Local,
            "no shared limit was consulted: {d:?}"
        );
    }
}

/// A store with short timeouts whose keys all share one tag, on a slot node 0 serves.
fn tagged_on_node_0(cluster: &RedisCluster, prefix: &str) -> Redis<SlidingLog> {
    let tag = (0..500)
        .map(|i| format!("t{i}"))
        .find(|t| super::wrappers_on_cluster_from_docs::owner(cluster, &format!("{{{t}}}")) == 0)
        .unwrap();
    let options = RedisOptions::default()
        .prefix(prefix)
        .unwrap()
        .shared_tag(&tag)
        .unwrap()
        .connect_timeout(TIMEOUT)
        .response_timeout(TIMEOUT);
    RedisStore::open_cluster(cluster.urls(), options).unwrap()
}

fn tagged_failover(
    cluster: &RedisCluster,
    prefix: &str,
    policy: FailurePolicy<SlidingLog>,
) -> OnFailover<SlidingLog> {
    let store = FailoverStore::new(tagged_on_node_0(cluster, prefix), policy)
        .with_backoff(Backoff::fixed(BACKOFF));
    KeyedRateLimiter::with_store(
        SlidingLog::new(10, HOUR).unwrap(),
        store,
        DefaultClock::new(),
    )
}

#[test]
fn a_local_share_over_a_tagged_store_whose_node_is_down_charges_every_key_or_none() {
    let mut cluster = RedisCluster::start();
    let share = SlidingLog::new(2, HOUR).unwrap();
    let limiter = tagged_failover(&cluster, "fo-tag:", FailurePolicy::Local(share));
    let (ip, user) = ("ip:192.0.2.1".to_owned(), "user:carol".to_owned());
    let pair = vec![ip.clone(), user.clone()];
    let d = limiter.check_all(&pair, 1).unwrap();
    assert_eq!((d.source(), d.remaining()), (Source::Store, 9));
    cluster.kill_node(0);
    let d = limiter.check(&ip, 1).unwrap();
    assert_eq!(
        (d.source(), d.is_allowed(), d.remaining()),
        (Source::Local, true, 1)
    );
    let d = limiter.check_all(&pair, 1).unwrap();
    assert_eq!(
        (d.is_allowed(), d.limit(), d.remaining()),
        (true, 2, 0),
        "the share's: {d:?}"
    );
    let d = limiter.check_all(&pair, 1).unwrap();
    assert_eq!(
        (d.source(), d.is_allowed()),
        (Source::Local, false),
        "ip's share is spent"
    );
    // The refused call charged neither key: the user has one left in its share.
    let d = limiter.check(&user, 1).unwrap();
    assert_eq!(
        (d.source(), d.is_allowed(), d.remaining()),
        (Source::Local, true, 0)
    );
    assert!(!limiter.check(&user, 1).unwrap().is_allowed());
    assert_eq!(limiter.store().stats().local, 5);
}

/// The `failover` docs: "Every decision says who made it: `Source::Store` from the
/// inner store, otherwise the policy's source", for calls on several keys too.
#[test]
fn a_multi_key_grant_a_policy_makes_names_the_policy_as_its_source() {
    let mut cluster = RedisCluster::start();
    let open = tagged_failover(&cluster, "fo-src-open:", FailurePolicy::Open);
    let share = SlidingLog::new(5, HOUR).unwrap();
    let local = tagged_failover(&cluster, "fo-src-local:", FailurePolicy::Local(share));
    let pair = vec!["ip:192.0.2.9".to_owned(), "user:dave".to_owned()];
    for limiter in [&open, &local] {
        assert_eq!(limiter.check_all(&pair, 1).unwrap().source(), Source::Store);
    }
    cluster.kill_node(0);
    for (limiter, source) in [(&open, Source::Unchecked), (&local, Source::Local)] {
        // The first call fails over; the next ones are answered while backed off.
        let checked: Vec<Decision> = (0..2)
            .map(|_| limiter.check_all(&pair, 1).unwrap())
            .collect();
        let reserved = limiter.reserve_all(&pair, 1).unwrap().decision();
        let single = limiter.check(&pair[0], 1).unwrap();
        assert_eq!(
            (single.source(), single.is_allowed()),
            (source, true),
            "check: {single:?}"
        );
        for d in checked.iter().chain([&reserved]) {
            assert!(d.is_allowed(), "{d:?}");
            assert_eq!(d.source(), source, "a multi-key grant by the policy: {d:?}");
        }
    }
}

#[test]
fn a_lease_keeps_granting_in_the_process_while_its_node_is_down_then_the_store_s_error_comes() {
    let mut cluster = RedisCluster::start();
    let window = FixedWindow::new(100, YEAR).unwrap();
    let store = LeasedStore::new(short_timeouts(cluster.urls(), "lease-down:"), 5, HOUR).unwrap();
    let limiter = KeyedRateLimiter::with_store(window, store, DefaultClock::new());
    let victim = key_on_node(&cluster, 0, |k| limiter.store().inner().server_key(k));
    let d = limiter.check(&victim, 1).unwrap();
    assert_eq!((d.source(), d.remaining()), (Source::Leased, 99));
    cluster.kill_node(0);
    for left in [98, 97, 96, 95] {
        let d = limiter.check(&victim, 1).unwrap();
        assert_eq!(
            (d.source(), d.is_allowed(), d.remaining()),
            (Source::Leased, true, left)
        );
    }
    let start = Instant::now();
    let spent = limiter.check(&victim, 1);
    assert!(
        start.elapsed() <= TIMEOUT + MARGIN,
        "took {:?}",
        start.elapsed()
    );
    assert!(
        matches!(spent, Err(Error::Store(_))),
        "the lease is spent: {spent:?}"
    );
    assert!(!limiter.try_acquire(&victim));
}
