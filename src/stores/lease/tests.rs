//! The leased store over the in-memory store, on explicit times: what comes
//! from a lease and what from the store, the bounds, and the store's own
//! decisions with a lease of 1.

use super::LeasedStore;
use crate::algorithms::{Decision, FixedWindow, Receipt, Report, SmoothBursty};
use crate::clock::Nanos;
use crate::error::Error;
use crate::stores::store::TryTake;
use crate::stores::{MemoryStore, Operation, Store};
use crate::Source;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const SECOND: Nanos = 1_000_000_000;

/// One in-memory store shared by several leased stores, counting the steps that
/// reach it (its "round trips").
struct Shared<A: crate::algorithms::Algorithm> {
    store: Arc<MemoryStore<&'static str, A>>,
    calls: Arc<AtomicU64>,
}

impl<A: crate::algorithms::Algorithm> Default for Shared<A> {
    fn default() -> Self {
        Shared {
            store: Arc::new(MemoryStore::new()),
            calls: Arc::default(),
        }
    }
}

impl<A: crate::algorithms::Algorithm> Clone for Shared<A> {
    fn clone(&self) -> Self {
        Shared {
            store: Arc::clone(&self.store),
            calls: Arc::clone(&self.calls),
        }
    }
}

impl<A: crate::algorithms::Algorithm> Shared<A> {
    fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}

impl<A: crate::algorithms::Algorithm> Store<&'static str, A> for Shared<A> {
    type Pending = <MemoryStore<&'static str, A> as Store<&'static str, A>>::Pending;

    fn apply(
        &self,
        algorithm: &A,
        keys: &[&'static str],
        now: Nanos,
        step: Operation<'_>,
        out: &mut [(Decision, Receipt)],
    ) -> Result<(), Error> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.store.apply(algorithm, keys, now, step, out)
    }

    fn apply_key<R: Report>(
        &self,
        algorithm: &A,
        key: &&'static str,
        now: Nanos,
        step: Operation<'_>,
    ) -> Result<R, Error> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.store.apply_key(algorithm, key, now, step)
    }

    fn apply_key_each(
        &self,
        algorithm: &A,
        key: &&'static str,
        now: Nanos,
        step: Operation<'_>,
        each: &mut dyn FnMut(Decision),
    ) -> Result<(Decision, Receipt), Error> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.store.apply_key_each(algorithm, key, now, step, each)
    }

    fn apply_key_each_async(
        &self,
        algorithm: &A,
        key: &&'static str,
        now: Nanos,
        step: Operation<'_>,
    ) -> crate::stores::Reporting {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.store.apply_key_each_async(algorithm, key, now, step)
    }

    fn apply_async(
        &self,
        algorithm: &A,
        keys: &[&'static str],
        now: Nanos,
        step: Operation<'_>,
    ) -> Self::Pending {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.store.apply_async(algorithm, keys, now, step)
    }

    fn cancel_detached(
        &self,
        algorithm: &A,
        keys: &[&'static str],
        now: Nanos,
        receipts: &[Receipt],
        acts_at: Nanos,
    ) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.store
            .cancel_detached(algorithm, keys, now, receipts, acts_at);
    }
}

fn window(limit: u64, secs: u64) -> FixedWindow {
    FixedWindow::new(limit, Duration::from_secs(secs)).unwrap()
}

fn leased<A: crate::algorithms::Algorithm>(
    shared: &Shared<A>,
    size: u64,
    period: Nanos,
) -> LeasedStore<Shared<A>, &'static str, A> {
    LeasedStore::new(shared.clone(), size, Duration::from_nanos(period)).unwrap()
}

fn take(cost: u64) -> Operation<'static> {
    Operation::Reserve { cost, max_wait: 0 }
}

/// A small deterministic generator for traces.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

#[test]
fn a_lease_of_one_decides_as_the_plain_store() {
    let bursty = SmoothBursty::new(5.0).unwrap();
    let plain: MemoryStore<&str, SmoothBursty> = MemoryStore::new();
    let shared = Shared::default();
    let store = leased(&shared, 1, SECOND);
    let mut rng = Lcg(7);
    let mut now = 0;
    for _ in 0..2000 {
        now += rng.below(SECOND / 4);
        let key = ["a", "b", "c"][rng.below(3) as usize];
        let cost = 1 + rng.below(3);
        let want = plain.apply_key(&bursty, &key, now, take(cost)).unwrap();
        let got = store
            .apply_key::<(Decision, Receipt)>(&bursty, &key, now, take(cost))
            .unwrap();
        assert_eq!(got, want);
        assert_eq!(got.0.source(), Source::Store);
    }
    assert_eq!(shared.calls(), 2000);
}

#[test]
fn one_process_answers_the_plain_stores_remaining_with_one_round_trip_per_lease() {
    let limit = window(100, 60);
    let plain: MemoryStore<&str, FixedWindow> = MemoryStore::new();
    let shared = Shared::default();
    let store = leased(&shared, 10, 60 * SECOND);
    for call in 0..100 {
        let want = plain
            .apply_key::<Decision>(&limit, &"k", call, take(1))
            .unwrap();
        let got = store
            .apply_key::<Decision>(&limit, &"k", call, take(1))
            .unwrap();
        assert_eq!(got.source(), Source::Leased);
        assert_eq!(got, want.with_source(Source::Leased), "call {call}");
    }
    assert_eq!(shared.calls(), 10);
    let refused = store
        .apply_key::<Decision>(&limit, &"k", 100, take(1))
        .unwrap();
    assert!(!refused.is_allowed());
    assert_eq!(refused.source(), Source::Store);
}

#[test]
fn the_last_permits_go_one_call_at_a_time_and_no_lease_is_asked_until_the_refusal_ends() {
    let limit = window(25, 60);
    let shared = Shared::default();
    let store = leased(&shared, 10, 60 * SECOND);
    let granted = (0..30)
        .map(|t| store.try_take_key(&limit, &"k", t, 1).unwrap())
        .filter(Option::is_none)
        .count();
    assert_eq!(granted, 25, "none stranded");
    // 2 leases, 1 refused lease, then every call of the 10 left to the store.
    assert_eq!(shared.calls(), 2 + 1 + 10);
    // The next window: a lease again.
    let next = store
        .apply_key::<Decision>(&limit, &"k", 60 * SECOND, take(1))
        .unwrap();
    assert_eq!((next.source(), next.remaining()), (Source::Leased, 24));
}

#[test]
fn n_processes_never_admit_above_the_limit_and_strand_at_most_n_times_l_minus_one() {
    let (n, size, limit) = (4u64, 10u64, 200u64);
    let fixed = window(limit, 10);
    let shared = Shared::default();
    let stores: Vec<_> = (0..n)
        .map(|_| leased(&shared, size, 100 * SECOND))
        .collect();
    let mut rng = Lcg(11);
    let mut now = 0;
    let mut admitted = [0u64; 6];
    for _ in 0..3000 {
        now += rng.below(SECOND / 50);
        let store = &stores[rng.below(n) as usize];
        if store.try_take_key(&fixed, &"k", now, 1).unwrap().is_none() {
            admitted[(now / (10 * SECOND)) as usize] += 1;
        }
    }
    let windows = (now / (10 * SECOND)) as usize;
    assert!(windows >= 3);
    for (w, &count) in admitted[..windows].iter().enumerate() {
        assert!(count <= limit, "window {w}: {count} admitted");
        assert!(
            count >= limit - n * (size - 1),
            "window {w}: {count} admitted"
        );
    }
}

#[test]
fn a_lease_ends_after_its_period() {
    let limit = window(1000, 60);
    let shared = Shared::default();
    let store = leased(&shared, 10, SECOND);
    store.try_take_key(&limit, &"k", 0, 1).unwrap();
    assert_eq!(store.leased(&"k", SECOND - 1), 9);
    let after = store
        .apply_key::<Decision>(&limit, &"k", SECOND, take(1))
        .unwrap();
    assert_eq!(shared.calls(), 2, "a new lease");
    assert_eq!(after.remaining(), 1000 - 20 + 9, "the 9 unused stay taken");
}

#[test]
fn a_lease_ends_with_the_window_it_was_taken_in() {
    let limit = window(100, 1);
    let shared = Shared::default();
    let store = leased(&shared, 10, 60 * SECOND);
    let first = store
        .apply_key::<Decision>(&limit, &"k", SECOND / 2, take(1))
        .unwrap();
    assert_eq!(first.reset_after(), Duration::from_millis(500));
    assert_eq!(store.leased(&"k", SECOND - 1), 9);
    assert_eq!(store.leased(&"k", SECOND), 0);
    let next = store
        .apply_key::<Decision>(&limit, &"k", SECOND, take(1))
        .unwrap();
    assert_eq!((next.source(), next.remaining()), (Source::Leased, 99));
}

/// A decision as the plain store would give it: the same in all but its source.
fn as_stored(d: Decision) -> Decision {
    d.with_source(Source::Store)
}

#[test]
fn reporting_calls_take_and_spend_leases_and_report_every_limit_as_the_plain_store() {
    // One process, leases of 4, a set of two windows: a grant from a lease reports
    // each limit as the plain store does (the store's report with the lease, what
    // is left of the lease added, its durations counted down), blocking and async.
    type Set = crate::algorithms::AllOf<(FixedWindow, FixedWindow)>;
    let set: Set = crate::algorithms::AllOf::new((window(10, 60), window(100, 3600)));
    let plain: MemoryStore<&str, Set> = MemoryStore::new();
    let shared = Shared::default();
    let store = leased(&shared, 4, 60 * SECOND);
    let leased_calls = |rounds: &mut Vec<(Decision, Vec<Decision>)>, key, now| {
        let mut each = Vec::new();
        let (d, _) = store
            .apply_key_each(&set, key, now, take(1), &mut |d| each.push(d))
            .unwrap();
        rounds.push((d, each));
    };
    let (mut got, mut expected) = (Vec::new(), Vec::new());
    for i in 1..=12 {
        let now = i * SECOND;
        leased_calls(&mut got, &"k", now);
        let async_each = store.apply_key_each_async(&set, &"a", now, take(1));
        let ((d, _), each) = futures::executor::block_on(async_each).unwrap();
        got.push((d, each));
        for key in ["k", "a"] {
            let mut each = Vec::new();
            let (d, _) = plain
                .apply_key_each(&set, &key, now, take(1), &mut |d| each.push(d))
                .unwrap();
            expected.push((d, each));
        }
    }
    let normal = |rounds: Vec<(Decision, Vec<Decision>)>| {
        let each = |e: Vec<Decision>| e.into_iter().map(as_stored).collect::<Vec<_>>();
        rounds
            .into_iter()
            .map(|(d, e)| (as_stored(d), each(e)))
            .collect::<Vec<_>>()
    };
    let sources: Vec<Source> = got.iter().map(|(d, _)| d.source()).collect();
    assert_eq!(normal(got), normal(expected));
    // A key's round trips: two leases (calls 1-4 and 5-8), a third refused and
    // call 9's own cost, then calls 10-12 one each.
    assert_eq!(sources.iter().filter(|s| **s == Source::Leased).count(), 16);
    assert_eq!(shared.calls(), 2 * (2 + 2 + 3));
}

#[test]
fn other_steps_go_to_the_inner_store() {
    let limit = window(100, 60);
    let shared = Shared::default();
    let store = leased(&shared, 10, 60 * SECOND);
    let mut out = [crate::stores::store::blank(), crate::stores::store::blank()];
    store
        .apply(&limit, &["a", "b"], 0, take(1), &mut out)
        .unwrap();
    assert!(out.iter().all(|(d, _)| d.source() == Source::Store));
    let peek = store
        .apply_key::<(Decision, Receipt)>(&limit, &"a", 0, Operation::Peek { cost: 1 })
        .unwrap();
    assert_eq!(
        (peek.0.source(), peek.0.remaining()),
        (Source::Store, 98),
        "as a reserve would leave"
    );
    let wait = Operation::Reserve {
        cost: 1,
        max_wait: SECOND,
    };
    assert_eq!(
        store
            .apply_key::<Decision>(&limit, &"a", 0, wait)
            .unwrap()
            .source(),
        Source::Store
    );
    let big = store
        .apply_key::<Decision>(&limit, &"a", 0, take(10))
        .unwrap();
    assert_eq!((big.source(), big.remaining()), (Source::Store, 88));
    assert_eq!(shared.calls(), 4);
    assert_eq!(store.leased_keys(), 0);
}

#[test]
fn a_leased_grant_gives_nothing_back_and_costs_no_round_trip_to_cancel() {
    let limit = window(100, 60);
    let shared = Shared::default();
    let store = leased(&shared, 10, 60 * SECOND);
    let (decision, receipt) = store
        .apply_key::<(Decision, Receipt)>(&limit, &"k", 0, take(1))
        .unwrap();
    assert!(decision.is_allowed() && receipt.is_none());
    let cancel = Operation::Cancel {
        receipts: std::slice::from_ref(&receipt),
        acts_at: 0,
    };
    store
        .apply_key::<(Decision, Receipt)>(&limit, &"k", 0, cancel)
        .unwrap();
    store.cancel_detached(&limit, &["k"], 0, &[receipt], 0);
    assert_eq!(shared.calls(), 1);
    assert_eq!(store.leased(&"k", 0), 9);
}

#[test]
fn a_full_table_sends_new_keys_to_the_store_until_a_lease_ends() {
    let limit = window(100, 60);
    let shared = Shared::default();
    let store = leased(&shared, 10, SECOND).with_max_keys(1).unwrap();
    assert_eq!(
        store
            .apply_key::<Decision>(&limit, &"a", 0, take(1))
            .unwrap()
            .source(),
        Source::Leased
    );
    assert_eq!(
        store
            .apply_key::<Decision>(&limit, &"b", 1, take(1))
            .unwrap()
            .source(),
        Source::Store
    );
    assert_eq!(store.leased_keys(), 1);
    let b = store
        .apply_key::<Decision>(&limit, &"b", SECOND, take(1))
        .unwrap();
    assert_eq!(
        b.source(),
        Source::Leased,
        "a's lease ended and was forgotten"
    );
    assert_eq!(store.leased_keys(), 1);
}

#[test]
fn async_calls_take_and_spend_leases() {
    let limit = window(15, 60);
    let shared = Shared::default();
    let store = leased(&shared, 10, 60 * SECOND);
    let mut sources = Vec::new();
    for t in 0..16 {
        let answers = futures::executor::block_on(store.apply_async(&limit, &["k"], t, take(1)));
        let decision = answers.unwrap()[0].0;
        sources.push((decision.is_allowed(), decision.source()));
    }
    assert!(sources[..10].iter().all(|&s| s == (true, Source::Leased)));
    assert!(sources[10..15].iter().all(|&s| s == (true, Source::Store)));
    assert_eq!(sources[15], (false, Source::Store));
    assert_eq!(shared.calls(), 1 + 1 + 6);
}

#[test]
fn a_dropped_lease_future_frees_the_lease_to_be_taken_again() {
    let limit = window(100, 60);
    let shared = Shared::default();
    let store = leased(&shared, 10, 60 * SECOND);
    drop(store.apply_async(&limit, &["k"], 0, take(1)));
    let next = store
        .apply_key::<Decision>(&limit, &"k", 1, take(1))
        .unwrap();
    assert_eq!(next.source(), Source::Leased);
}

#[test]
fn bad_configurations_are_errors() {
    let shared: Shared<FixedWindow> = Shared::default();
    assert!(
        LeasedStore::<_, &str, FixedWindow>::new(shared.clone(), 0, Duration::from_secs(1))
            .is_err()
    );
    assert!(LeasedStore::<_, &str, FixedWindow>::new(shared.clone(), 5, Duration::ZERO).is_err());
    let store = leased(&shared, 5, SECOND);
    assert!(store.with_max_keys(0).is_err());
}

#[test]
fn a_call_that_finds_too_little_left_drops_it_and_takes_a_new_lease() {
    let limit = window(100, 60);
    let shared = Shared::default();
    let store = leased(&shared, 10, 60 * SECOND);
    store.try_take_key(&limit, &"k", 0, 4).unwrap();
    store.try_take_key(&limit, &"k", 0, 4).unwrap();
    assert_eq!(store.leased(&"k", 0), 2);
    let third = store
        .apply_key::<Decision>(&limit, &"k", 0, take(4))
        .unwrap();
    assert_eq!(shared.calls(), 2);
    assert_eq!(store.leased(&"k", 0), 6);
    // 20 taken from the store, 6 left here: the 2 dropped are neither.
    assert_eq!((third.source(), third.remaining()), (Source::Leased, 86));
}

#[test]
fn threads_over_several_leased_stores_never_admit_above_the_limit() {
    let limit = window(500, 3600);
    let shared = Shared::default();
    let stores: Arc<Vec<_>> = Arc::new((0..3).map(|_| leased(&shared, 16, SECOND)).collect());
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let stores = Arc::clone(&stores);
            std::thread::spawn(move || {
                let store = &stores[i % 3];
                (0..400u64)
                    .filter(|&t| store.try_take_key(&limit, &"k", t, 1).unwrap().is_none())
                    .count() as u64
            })
        })
        .collect();
    let admitted: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(admitted <= 500, "{admitted} admitted");
    assert!(admitted >= 500 - 3 * 15, "{admitted} admitted");
}

#[test]
fn leases_from_a_failure_policy_name_the_policy_not_a_lease() {
    // Over a failover store whose inner store is down, the lease grants come from
    // the policy: no shared limit was consulted, and every decision says so.
    use crate::stores::failover::{FailoverStore, FailurePolicy, Unreachable};
    let limit = window(100, 60);
    for (policy, source) in [
        (FailurePolicy::Open, Source::Unchecked),
        (FailurePolicy::Local(window(10, 60)), Source::Local),
    ] {
        let failover: FailoverStore<Unreachable, &'static str, FixedWindow> =
            FailoverStore::new(Unreachable, policy);
        let store = LeasedStore::new(failover, 4, Duration::from_secs(60)).unwrap();
        let mut sources = Vec::new();
        for i in 0..6 {
            let d: Decision = store.apply_key(&limit, &"k", i * SECOND, take(1)).unwrap();
            assert!(d.is_allowed());
            sources.push(d.source());
            let mut each = Vec::new();
            let (d, _) = store
                .apply_key_each(&limit, &"r", i * SECOND, take(1), &mut |d| each.push(d))
                .unwrap();
            sources.push(d.source());
            sources.extend(each.iter().map(|d| d.source()));
        }
        assert!(
            sources.iter().all(|s| *s == source),
            "{source:?}: {sources:?}"
        );
    }
}
