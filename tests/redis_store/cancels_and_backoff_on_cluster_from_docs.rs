//! The wrappers' finer promises over a Redis store on a three-master Cluster, at
//! the caller's (virtual) time so that every duration is exact, as the
//! `failover` and `deny_cache` module docs state them: the back-off after a node
//! fails (its length, doubling after a failed probe up to its maximum, every call
//! answered by the policy without a round trip meanwhile, one probe ending it);
//! cancels through a failover store (the inner store's grants dropped while it is
//! backed off, the local limit's grants given back to it whenever they come);
//! a cancel through the deny cache dropping its key's refusal; a set's refusal
//! learned with its report cached with every limit counted down as the store
//! reports it; and, with one process, a leased set reporting every limit as the
//! plain store does.

use super::wrappers_on_cluster_from_docs::{
    cluster_store, key_on_node, leased, load_the_library_everywhere, unsourced,
};
use crate::support::redis as redis_support;
use redis_support::RedisCluster;
use sluicegate::algorithms::{AllOf, FixedWindow, SmoothBursty};
use sluicegate::stores::deny_cache::DenyCache;
use sluicegate::stores::failover::{Backoff, FailoverStore, FailurePolicy};
use sluicegate::stores::redis::RedisStore;
use sluicegate::{Decision, KeyedRateLimiter, ManualClock, Source};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);
const SECOND: Duration = Duration::from_secs(1);
const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

type Redis<A> = RedisStore<String, A>;
type Failover<A> = FailoverStore<Redis<A>, String, A, ManualClock>;

/// A store at the caller's time whose calls give up after 200 ms.
fn impatient<A: sluicegate::stores::redis::RedisAlgorithm>(
    cluster: &RedisCluster,
    prefix: &str,
) -> Redis<A> {
    let options = redis_support::trace::caller_time_options(prefix)
        .connect_timeout(200 * MS)
        .response_timeout(200 * MS);
    RedisStore::open_cluster(cluster.urls(), options).unwrap()
}

/// One permit a second, none saved: every grant is owed until its second ends.
fn strict() -> SmoothBursty {
    SmoothBursty::new(1.0)
        .unwrap()
        .with_max_burst(Duration::ZERO)
        .unwrap()
}

fn assert_closed(d: Decision, retry_after: Duration) {
    assert_eq!(d.source(), Source::FailedClosed, "{d:?}");
    assert!(!d.is_allowed());
    assert_eq!(
        d.retry_after(),
        retry_after,
        "the rest of the back-off: {d:?}"
    );
}

#[test]
fn the_back_off_after_a_node_fails_doubles_up_to_its_maximum_and_one_probe_ends_it() {
    let mut cluster = RedisCluster::start();
    let clock = ManualClock::new();
    clock.advance(SECOND);
    let window = FixedWindow::new(5, Duration::from_secs(60)).unwrap();
    let store: Failover<FixedWindow> =
        FailoverStore::new(impatient(&cluster, "bo:"), FailurePolicy::Closed)
            .with_clock(clock.clone())
            .with_backoff(Backoff::new(300 * MS, SECOND));
    let limiter = KeyedRateLimiter::with_store(window, store, clock.clone());
    let victim = key_on_node(&cluster, 0, |k| limiter.store().inner().server_key(k));
    let survivor = key_on_node(&cluster, 1, |k| limiter.store().inner().server_key(k));
    load_the_library_everywhere(&cluster);
    assert_eq!(limiter.check(&victim, 1).unwrap().source(), Source::Store);
    cluster.kill_node(0);
    assert_closed(limiter.check(&victim, 1).unwrap(), 300 * MS);
    let sent = fcalls_alive(&cluster);
    clock.advance(100 * MS);
    // Backed off: every key, on any node, is answered by the policy at once.
    assert_closed(limiter.check(&survivor, 1).unwrap(), 200 * MS);
    assert_closed(limiter.check(&victim, 1).unwrap(), 200 * MS);
    assert_eq!(
        fcalls_alive(&cluster),
        sent,
        "no round trip while backed off"
    );
    assert_eq!(limiter.store().stats().probes, 0);
    for doubled in [600 * MS, SECOND, SECOND] {
        clock.advance(limiter.check(&victim, 1).unwrap().retry_after());
        // The back-off is over: this call probes, fails, and backs off for longer.
        assert_closed(limiter.check(&victim, 1).unwrap(), doubled);
    }
    let stats = limiter.store().stats();
    assert_eq!(
        (stats.failures, stats.probes, stats.recoveries),
        (4, 3, 0),
        "{stats:?}"
    );
    cluster.restart_node(0);
    clock.advance(SECOND);
    let probe = limiter.check(&victim, 1).unwrap();
    assert_eq!(
        (probe.source(), probe.is_allowed()),
        (Source::Store, true),
        "{probe:?}"
    );
    assert_eq!(probe.remaining(), 4, "a restarted node starts afresh");
    assert!(!limiter.store().is_degraded());
    assert_eq!(limiter.store().stats().recoveries, 1);
    // The back-off starts over at its initial length.
    cluster.kill_node(0);
    assert_closed(limiter.check(&victim, 1).unwrap(), 300 * MS);
}

/// Steps run by nodes 1 and 2 (node 0 is down).
fn fcalls_alive(cluster: &RedisCluster) -> u64 {
    (1..3)
        .map(|i| {
            let mut conn = cluster.connection(i);
            redis_support::calls(&mut conn, "fcall") + redis_support::calls(&mut conn, "fcall_ro")
        })
        .sum()
}

#[test]
fn a_backed_off_store_s_cancel_is_dropped_and_a_local_grant_s_cancel_goes_back_to_the_share() {
    let mut cluster = RedisCluster::start();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(10));
    let store: Failover<SmoothBursty> = FailoverStore::new(
        impatient(&cluster, "cancel:"),
        FailurePolicy::Local(strict()),
    )
    .with_clock(clock.clone())
    .with_backoff(Backoff::fixed(300 * MS));
    let limiter = KeyedRateLimiter::with_store(strict(), store, clock.clone());
    let victim = key_on_node(&cluster, 0, |k| limiter.store().inner().server_key(k));
    assert_eq!(limiter.check(&victim, 1).unwrap().source(), Source::Store);
    let on_store = limiter.reserve(&victim, 1).unwrap();
    assert_eq!(
        (on_store.decision().source(), on_store.delay()),
        (Source::Store, SECOND)
    );

    // A paused node keeps its data: the call times out and the share decides.
    cluster.pause_node(0);
    let local = limiter.check(&victim, 1);
    cluster.resume_node(0);
    let local = local.unwrap();
    assert_eq!(
        (local.source(), local.is_allowed()),
        (Source::Local, true),
        "{local:?}"
    );
    on_store.cancel().unwrap();
    assert_eq!(
        limiter.store().stats().dropped_cancels,
        1,
        "backed off: dropped"
    );
    let on_share = limiter.reserve(&victim, 1).unwrap();
    assert_eq!(
        (on_share.decision().source(), on_share.delay()),
        (Source::Local, SECOND)
    );

    clock.advance(400 * MS);
    // The probe: the store still owes the dropped cancel's permit (due at 12 s).
    let probe = limiter.check(&victim, 1).unwrap();
    assert_eq!(
        (probe.source(), probe.is_allowed()),
        (Source::Store, false),
        "{probe:?}"
    );
    assert_eq!(
        probe.retry_after(),
        1600 * MS,
        "the timed-out call did not land"
    );
    on_share.cancel().unwrap();
    let peeked = limiter.peek(&victim, 1).unwrap();
    assert_eq!(
        (peeked.source(), peeked.retry_after()),
        (Source::Store, 1600 * MS)
    );

    // The share got its permit back: it owes only its first grant (due at 11 s).
    cluster.kill_node(0);
    let d = limiter.check(&victim, 1).unwrap();
    assert_eq!(
        (d.source(), d.is_allowed()),
        (Source::Local, false),
        "{d:?}"
    );
    assert_eq!(d.retry_after(), 600 * MS);
}

#[test]
fn a_cancel_through_the_deny_cache_drops_its_key_s_cached_refusal() {
    let cluster = RedisCluster::start();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(10));
    let store = DenyCache::new(cluster_store(&cluster, "dc-cancel:"), &strict()).unwrap();
    let limiter = KeyedRateLimiter::with_store(strict(), store, clock.clone());
    let user = key_on_node(&cluster, 2, |k| limiter.store().inner().server_key(k));
    assert!(limiter.check(&user, 1).unwrap().is_allowed());
    let reserved = limiter.reserve(&user, 1).unwrap();
    assert_eq!(reserved.delay(), SECOND);
    let refused = limiter.check(&user, 1).unwrap();
    assert_eq!(
        (refused.source(), refused.retry_after()),
        (Source::Store, 2 * SECOND)
    );
    let cached = limiter.check(&user, 1).unwrap();
    assert_eq!(
        (cached.source(), cached.retry_after()),
        (Source::Cached, 2 * SECOND)
    );
    reserved.cancel().unwrap();
    // The next caller waits 1 s, not 2 s: the store answers, not the cache.
    let after = limiter.check(&user, 1).unwrap();
    assert_eq!(
        (after.source(), after.retry_after()),
        (Source::Store, SECOND),
        "{after:?}"
    );
    assert_eq!(limiter.store().hits(), 1);
}

#[test]
fn a_set_s_refusal_learned_with_its_report_is_cached_with_every_limit_counted_down() {
    let cluster = RedisCluster::start();
    let set = AllOf::new((
        FixedWindow::new(2, Duration::from_secs(10)).unwrap(),
        FixedWindow::new(5, Duration::from_secs(60)).unwrap(),
    ));
    let clock = ManualClock::new();
    let store = DenyCache::new(cluster_store(&cluster, "dc-each:"), &set).unwrap();
    let cached = KeyedRateLimiter::with_store(set, store, clock.clone());
    let plain = KeyedRateLimiter::with_store(
        set,
        cluster_store(&cluster, "dc-each-plain:"),
        clock.clone(),
    );
    let user = key_on_node(&cluster, 1, |k| plain.store().server_key(k));
    let mut sources = Vec::new();
    for step in 0..8 {
        let (mut got_each, mut want_each) = (Vec::new(), Vec::new());
        let got = cached
            .check_each(&user, 1, &mut |d| got_each.push(d))
            .unwrap();
        let want = plain
            .check_each(&user, 1, &mut |d| want_each.push(d))
            .unwrap();
        sources.push(got.source());
        assert_eq!(
            got.with_source(Source::Store),
            want,
            "step {step}: the decision"
        );
        assert_eq!(got_each.len(), 2, "step {step}: every limit reported");
        let unsourced: Vec<Decision> = got_each
            .iter()
            .map(|d| d.with_source(Source::Store))
            .collect();
        assert_eq!(unsourced, want_each, "step {step}: each limit");
        clock.advance(1500 * MS);
    }
    assert_eq!(&sources[..3], &[Source::Store; 3]);
    assert!(
        sources[3..6].iter().all(|&s| s == Source::Cached),
        "{sources:?}"
    );
}

#[test]
fn with_one_process_a_leased_set_reports_every_limit_as_the_plain_store_on_a_cluster() {
    let cluster = RedisCluster::start();
    let set = AllOf::new((
        FixedWindow::new(8, MINUTE).unwrap(),
        FixedWindow::new(20, HOUR).unwrap(),
    ));
    let limiter = leased(&cluster, "lease-set:", set, 3, MINUTE);
    let plain: KeyedRateLimiter<String, _, Redis<_>, ManualClock> = KeyedRateLimiter::with_store(
        set,
        cluster_store(&cluster, "lease-set-plain:"),
        ManualClock::new(),
    );
    let user = key_on_node(&cluster, 1, |k| plain.store().server_key(k));
    let mut sources = Vec::new();
    for minute in 0..3 {
        for call in 0..10 {
            let (mut got_each, mut want_each) = (Vec::new(), Vec::new());
            let got = limiter
                .check_each(&user, 1, &mut |d| got_each.push(unsourced(d)))
                .unwrap();
            let want = plain
                .check_each(&user, 1, &mut |d| want_each.push(d))
                .unwrap();
            let at = format!("minute {minute}, call {call}");
            assert_eq!(unsourced(got), want, "{at}: the decision");
            assert_eq!(got_each, want_each, "{at}: each limit");
            sources.push(got.source());
        }
        for clock in [limiter.clock(), plain.clock()] {
            clock.advance(MINUTE);
        }
    }
    assert!(sources.contains(&Source::Leased), "{sources:?}");
}
