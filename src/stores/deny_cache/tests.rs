//! The cache's rules over an in-memory store that counts the calls reaching it.

use super::DenyCache;
use crate::algorithms::{
    Algorithm, Counting, Decision, FixedWindow, LeakyBucket, Receipt, Report, SlidingWindowCounter,
    SmoothBursty, Source,
};
use crate::clock::Nanos;
use crate::error::{ConfigError, Error};
use crate::stores::store::TryTake;
use crate::stores::{MemoryStore, Operation, Store};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const SECOND: Nanos = 1_000_000_000;

/// A memory store counting the steps that reach it.
struct Counted<A: Algorithm> {
    inner: MemoryStore<u64, A>,
    calls: AtomicU64,
}

impl<A: Algorithm> Counted<A> {
    fn new() -> Self {
        Counted {
            inner: MemoryStore::new(),
            calls: AtomicU64::new(0),
        }
    }
    fn count(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }
}

impl<A: Algorithm> Store<u64, A> for Counted<A> {
    type Pending = <MemoryStore<u64, A> as Store<u64, A>>::Pending;

    fn apply(
        &self,
        algorithm: &A,
        keys: &[u64],
        now: Nanos,
        step: Operation<'_>,
        out: &mut [(Decision, Receipt)],
    ) -> Result<(), Error> {
        self.count();
        self.inner.apply(algorithm, keys, now, step, out)
    }

    fn apply_key<R: Report>(
        &self,
        algorithm: &A,
        key: &u64,
        now: Nanos,
        step: Operation<'_>,
    ) -> Result<R, Error> {
        self.count();
        self.inner.apply_key(algorithm, key, now, step)
    }

    fn apply_key_each(
        &self,
        algorithm: &A,
        key: &u64,
        now: Nanos,
        step: Operation<'_>,
        each: &mut dyn FnMut(Decision),
    ) -> Result<(Decision, Receipt), Error> {
        self.count();
        self.inner.apply_key_each(algorithm, key, now, step, each)
    }

    fn apply_key_each_async(
        &self,
        algorithm: &A,
        key: &u64,
        now: Nanos,
        step: Operation<'_>,
    ) -> crate::stores::Reporting {
        self.count();
        self.inner.apply_key_each_async(algorithm, key, now, step)
    }

    fn apply_async(
        &self,
        algorithm: &A,
        keys: &[u64],
        now: Nanos,
        step: Operation<'_>,
    ) -> Self::Pending {
        self.count();
        self.inner.apply_async(algorithm, keys, now, step)
    }

    fn cancel_detached(&self, a: &A, keys: &[u64], now: Nanos, r: &[Receipt], acts_at: Nanos) {
        self.count();
        self.inner.cancel_detached(a, keys, now, r, acts_at);
    }
}

fn cache<A: Algorithm>(algorithm: &A) -> DenyCache<Counted<A>, u64, A> {
    DenyCache::new(Counted::new(), algorithm).unwrap()
}

fn calls<A: Algorithm>(store: &DenyCache<Counted<A>, u64, A>) -> u64 {
    store.inner().calls.load(Ordering::Relaxed)
}

fn take(cost: u64) -> Operation<'static> {
    Operation::Reserve { cost, max_wait: 0 }
}

fn window(limit: u64) -> FixedWindow {
    FixedWindow::new(limit, Duration::from_secs(10)).unwrap()
}

#[test]
fn a_refused_key_is_refused_without_the_store_until_its_retry_after() {
    let w = window(2);
    let store = cache(&w);
    store.try_take_key(&w, &1, 0, 2).unwrap();
    let refusal = store.try_take_key(&w, &1, SECOND, 1).unwrap().unwrap();
    assert_eq!(calls(&store), 2);
    for i in 0..100 {
        let now = SECOND + i * 80_000_000;
        let cached = store.try_take_key(&w, &1, now, 1).unwrap().unwrap();
        let (d, _) = store.apply_key(&w, &1, now, take(1)).unwrap();
        assert_eq!(cached, d);
        assert_eq!(d.retry_after_nanos(), 10 * SECOND - now);
        assert_eq!(
            d.reset_after_nanos(),
            refusal.reset_after_nanos() - (now - SECOND)
        );
        assert_eq!((d.limit(), d.remaining()), (2, 0));
    }
    assert_eq!((calls(&store), store.hits()), (2, 200));
    // The window ends: the store answers, and grants.
    assert_eq!(store.try_take_key(&w, &1, 10 * SECOND, 1).unwrap(), None);
    assert_eq!(calls(&store), 3);
}

#[test]
fn smaller_costs_waits_and_costs_beyond_the_limit_go_to_the_store() {
    let w = window(5);
    let store = cache(&w);
    store.try_take_key(&w, &1, 0, 3).unwrap();
    assert!(store.try_take_key(&w, &1, 0, 3).unwrap().is_some());
    let before = calls(&store);
    // A larger cost, within the limit: cached.
    assert!(store.try_take_key(&w, &1, 0, 5).unwrap().is_some());
    assert_eq!(calls(&store), before);
    // Beyond the limit: the store says never.
    assert!(store
        .try_take_key(&w, &1, 0, 6)
        .unwrap()
        .unwrap()
        .is_never());
    // A smaller cost: the store grants it.
    assert_eq!(store.try_take_key(&w, &1, 0, 2).unwrap(), None);
    // A reserve willing to wait: the store.
    let wait = Operation::Reserve {
        cost: 3,
        max_wait: SECOND,
    };
    store
        .apply_key::<(Decision, Receipt)>(&w, &1, 0, wait)
        .unwrap();
    assert_eq!(calls(&store), before + 3);
}

#[test]
fn a_grant_drops_the_refusal_so_remaining_stays_the_stores() {
    let w = window(5);
    let store = cache(&w);
    store.try_take_key(&w, &1, 0, 3).unwrap();
    assert_eq!(
        store
            .try_take_key(&w, &1, 0, 3)
            .unwrap()
            .unwrap()
            .remaining(),
        2
    );
    assert_eq!(store.try_take_key(&w, &1, 0, 1).unwrap(), None);
    // Not the cached remaining 2: the store's 1.
    assert_eq!(
        store
            .try_take_key(&w, &1, 0, 3)
            .unwrap()
            .unwrap()
            .remaining(),
        1
    );
    assert_eq!(store.hits(), 0);
}

#[test]
fn a_cancel_drops_the_refusal() {
    let bursty = SmoothBursty::new(1.0).unwrap();
    let store = cache(&bursty);
    let now = 10 * SECOND;
    // Spend the stored permit, then take the next second's.
    store
        .apply_key::<(Decision, Receipt)>(&bursty, &1, now, take(1))
        .unwrap();
    let (grant, receipt) = store.apply_key(&bursty, &1, now, take(1)).unwrap();
    assert!(grant.is_allowed());
    assert!(store.try_take_key(&bursty, &1, now, 1).unwrap().is_some());
    assert!(store.try_take_key(&bursty, &1, now, 1).unwrap().is_some());
    assert_eq!(store.hits(), 1);
    // Giving the second grant back at its instant: the store grants again.
    let receipts = [receipt];
    let cancel = Operation::Cancel {
        receipts: &receipts,
        acts_at: now,
    };
    store
        .apply_key::<(Decision, Receipt)>(&bursty, &1, now, cancel)
        .unwrap();
    assert_eq!(store.try_take_key(&bursty, &1, now, 1).unwrap(), None);
    assert_eq!(store.hits(), 1);
}

#[test]
fn a_detached_cancel_drops_the_refusal() {
    let bursty = SmoothBursty::new(1.0).unwrap();
    let store = cache(&bursty);
    let ahead = Operation::Reserve {
        cost: 1,
        max_wait: SECOND,
    };
    store
        .apply_key::<(Decision, Receipt)>(&bursty, &1, 0, take(1))
        .unwrap();
    let (_, receipt) = store.apply_key(&bursty, &1, 0, ahead).unwrap();
    assert!(store.try_take_key(&bursty, &1, 0, 1).unwrap().is_some());
    assert_eq!(store.len(), 1);
    store.cancel_detached(&bursty, &[1], 0, &[receipt], SECOND);
    assert_eq!(store.len(), 0);
}

#[test]
fn algorithms_whose_refusals_count_are_refused() {
    let attempts = SlidingWindowCounter::new(5, Duration::from_secs(1))
        .unwrap()
        .with_counting(Counting::Attempts);
    let refused = DenyCache::<_, u64, _>::new(MemoryStore::<u64, _>::new(), &attempts);
    assert!(matches!(refused, Err(ConfigError::Unsupported { .. })));
    let admitted = SlidingWindowCounter::new(5, Duration::from_secs(1)).unwrap();
    assert!(DenyCache::<_, u64, _>::new(MemoryStore::<u64, _>::new(), &admitted).is_ok());
    // Passed per call all the same: its refusals are not kept.
    let store: DenyCache<_, u64, _> = DenyCache::new(MemoryStore::new(), &admitted).unwrap();
    store.try_take_key(&attempts, &1, 0, 5).unwrap();
    assert!(store.try_take_key(&attempts, &1, 0, 1).unwrap().is_some());
    assert!(store.is_empty());
}

#[test]
fn the_table_holds_at_most_its_entries_and_reuses_expired_ones() {
    let w = window(1);
    let store = cache(&w).with_max_entries(32).unwrap();
    assert_eq!(store.max_entries(), 32);
    for key in 0..1_000 {
        store.try_take_key(&w, &key, 0, 1).unwrap();
        store.try_take_key(&w, &key, 0, 1).unwrap();
        assert!(store.len() <= 32);
    }
    let full = store.len();
    assert!(full > 16, "only {full} kept");
    // Every entry has expired: new refusals take their place.
    for key in 1_000..1_100 {
        store.try_take_key(&w, &key, 10 * SECOND, 1).unwrap();
        store.try_take_key(&w, &key, 10 * SECOND, 1).unwrap();
    }
    let before = calls(&store);
    let kept = (1_000..1_100)
        .filter(|key| {
            store
                .try_take_key(&w, key, 10 * SECOND, 1)
                .unwrap()
                .is_some()
        })
        .count() as u64;
    assert_eq!(store.hits(), 100 - (calls(&store) - before));
    assert!(store.hits() > 16 && kept == 100);
}

/// Both stores see the same calls; the cache's answers equal the plain store's.
fn same_answers<A: Algorithm>(algorithm: A, costs: u64, steps: u64) {
    let cached = cache(&algorithm);
    let plain: MemoryStore<u64, A> = MemoryStore::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut now = 0;
    for _ in 0..steps {
        now += next(SECOND / 4);
        let key = next(3);
        let cost = 1 + next(costs);
        let a = cached.try_take_key(&algorithm, &key, now, cost).unwrap();
        let b = plain.try_take_key(&algorithm, &key, now, cost).unwrap();
        // The same answer; a cached one says so.
        assert!(a.is_none_or(|d| matches!(d.source(), Source::Store | Source::Cached)));
        let a = a.map(|d| d.with_source(Source::Store));
        assert_eq!(a, b, "key {key} cost {cost} at {now}");
    }
    assert!(cached.hits() > steps / 20, "{} hits", cached.hits());
}

#[test]
fn cached_answers_equal_the_stores_for_windows_and_guava() {
    same_answers(window(4), 3, 20_000);
    same_answers(SmoothBursty::new(2.0).unwrap(), 3, 20_000);
}

#[test]
fn cached_answers_equal_the_stores_for_a_leaky_queue_at_cost_one() {
    let queue = LeakyBucket::queue(2, 4, Duration::from_secs(1)).unwrap();
    same_answers(queue, 1, 20_000);
}

#[test]
fn every_single_key_path_answers_from_the_cache_and_reports_once() {
    let w = window(1);
    let store = cache(&w);
    store.try_take_key(&w, &1, 0, 1).unwrap();
    let refusal = store.try_take_key(&w, &1, 0, 1).unwrap().unwrap();
    assert_eq!(refusal.source(), Source::Store);
    // Every later answer is the same refusal, from the cache.
    let refusal = refusal.with_source(Source::Cached);
    let before = calls(&store);
    let mut each = Vec::new();
    let (d, _) = store
        .apply_key_each(&w, &1, 0, take(1), &mut |d| each.push(d))
        .unwrap();
    assert_eq!((d, each.as_slice()), (refusal, [refusal].as_slice()));
    let reporting = store.apply_key_each_async(&w, &1, 0, take(1));
    let ((d, _), each) = futures::executor::block_on(reporting).unwrap();
    assert_eq!((d, each), (refusal, vec![refusal]));
    let pending = store.apply_async(&w, &[1], 0, Operation::Peek { cost: 1 });
    assert_eq!(futures::executor::block_on(pending).unwrap()[0].0, refusal);
    let mut out = [(Decision::never(0, 0, 0), Receipt::NONE)];
    store.apply(&w, &[1], 0, take(1), &mut out).unwrap();
    assert_eq!(out[0].0, refusal);
    assert_eq!((calls(&store), store.hits()), (before, 4));
}

#[test]
fn a_multi_key_grant_drops_its_keys_refusals_blocking_or_async() {
    let w = window(3);
    let store = cache(&w);
    for key in [1, 2] {
        store.try_take_key(&w, &key, 0, 2).unwrap();
        assert!(store.try_take_key(&w, &key, 0, 2).unwrap().is_some());
    }
    assert_eq!(store.len(), 2);
    let mut out = [0; 2].map(|_| (Decision::never(0, 0, 0), Receipt::NONE));
    store.apply(&w, &[1, 3], 0, take(1), &mut out).unwrap();
    assert!(out[0].0.is_allowed());
    assert_eq!(store.len(), 1);
    let pending = store.apply_async(&w, &[2, 3], 0, take(1));
    assert!(futures::executor::block_on(pending).unwrap()[0]
        .0
        .is_allowed());
    assert!(store.is_empty());
}

/// A report that reads nothing but the verdict (`bool`) still teaches the cache the
/// refusal: the next calls on the key are refused without the store.
#[test]
fn a_refusal_answered_as_a_bool_is_cached_too() {
    let w = window(1);
    let store = cache(&w);
    assert!(store.apply_key::<bool>(&w, &1, 0, take(1)).unwrap());
    assert!(!store.apply_key::<bool>(&w, &1, SECOND, take(1)).unwrap());
    assert_eq!(calls(&store), 2);
    for i in 0..10 {
        assert!(!store
            .apply_key::<bool>(&w, &1, SECOND + i, take(1))
            .unwrap());
    }
    assert_eq!((calls(&store), store.hits()), (2, 10));
    let (cached, receipt) = store
        .apply_key::<(Decision, Receipt)>(&w, &1, 2 * SECOND, take(1))
        .unwrap();
    assert_eq!(cached.retry_after_nanos(), 8 * SECOND);
    assert_eq!(receipt, Receipt::NONE);
    assert_eq!(calls(&store), 2);
}

#[test]
fn a_sets_cached_refusal_reports_every_limit_as_the_store_did() {
    // Two windows; the 10 s one refuses the third call. A reporting call's refusal
    // keeps the store's report of both limits, and the cache's later answers,
    // blocking and async, report both as the plain store does then.
    let set = crate::algorithms::AllOf::new((
        window(2),
        FixedWindow::new(50, Duration::from_secs(3600)).unwrap(),
    ));
    let store = cache(&set);
    let plain: MemoryStore<u64, _> = MemoryStore::new();
    let stored = |d: Decision| d.with_source(Source::Store);
    for (call, now) in [0, 0, 0, 0, SECOND, SECOND, 3 * SECOND]
        .into_iter()
        .enumerate()
    {
        let mut each = Vec::new();
        let (d, _) = if call % 2 == 0 {
            store
                .apply_key_each(&set, &1, now, take(1), &mut |d| each.push(d))
                .unwrap()
        } else {
            let reporting = store.apply_key_each_async(&set, &1, now, take(1));
            let (answer, reported) = futures::executor::block_on(reporting).unwrap();
            each = reported;
            answer
        };
        let mut expected = Vec::new();
        let (e, _) = plain
            .apply_key_each(&set, &1, now, take(1), &mut |d| expected.push(d))
            .unwrap();
        let each: Vec<Decision> = each.into_iter().map(stored).collect();
        assert_eq!((stored(d), each), (e, expected), "call {call}");
    }
    // Two grants and the first refusal from the store, every other answer cached.
    assert_eq!(calls(&store), 3);
    assert_eq!(store.hits(), 4);
}
