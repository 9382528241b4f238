//! The failover store on virtual time, over an inner store that fails on demand.

use super::*;
use crate::algorithms::{Decision, FixedWindow, Receipt, Report, Source};
use crate::clock::{ManualClock, Nanos};
use crate::error::{Applied, StoreError};
use crate::stores::store::TryTake;
use crate::stores::{MemoryStore, Operation, Store};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// How long a failing call of the inner store takes: its timeout.
const TIMEOUT: Duration = Duration::from_millis(50);

/// An in-memory store that can be taken down: then every call takes the timeout
/// (on the virtual clock) and fails with `Unknown`, as a paused server's would.
struct Flaky {
    store: MemoryStore<&'static str, FixedWindow>,
    clock: ManualClock,
    down: AtomicBool,
    calls: AtomicU64,
    cancels: AtomicU64,
}

impl Flaky {
    fn new(clock: &ManualClock) -> Self {
        Flaky {
            store: MemoryStore::new(),
            clock: clock.clone(),
            down: AtomicBool::new(false),
            calls: AtomicU64::new(0),
            cancels: AtomicU64::new(0),
        }
    }

    fn check(&self) -> Result<(), Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            self.clock.advance(TIMEOUT);
            let timeout = std::io::Error::new(std::io::ErrorKind::TimedOut, "no reply");
            return Err(Error::Store(StoreError::new(
                "flaky",
                Applied::Unknown,
                timeout,
            )));
        }
        Ok(())
    }
}

impl Store<&'static str, FixedWindow> for Flaky {
    type Pending = futures::future::Ready<Result<Vec<(Decision, Receipt)>, Error>>;

    fn apply(
        &self,
        algorithm: &FixedWindow,
        keys: &[&'static str],
        now: Nanos,
        step: Operation<'_>,
        out: &mut [(Decision, Receipt)],
    ) -> Result<(), Error> {
        if let Operation::Cancel { .. } = step {
            self.cancels.fetch_add(1, Ordering::SeqCst);
        }
        self.check()?;
        self.store.apply(algorithm, keys, now, step, out)
    }

    fn apply_key<R: Report>(
        &self,
        algorithm: &FixedWindow,
        key: &&'static str,
        now: Nanos,
        step: Operation<'_>,
    ) -> Result<R, Error> {
        if let Operation::Cancel { .. } = step {
            self.cancels.fetch_add(1, Ordering::SeqCst);
        }
        self.check()?;
        self.store.apply_key(algorithm, key, now, step)
    }

    fn apply_async(
        &self,
        algorithm: &FixedWindow,
        keys: &[&'static str],
        now: Nanos,
        step: Operation<'_>,
    ) -> Self::Pending {
        let mut out = vec![crate::stores::store::blank(); keys.len()];
        let result = self.apply(algorithm, keys, now, step, &mut out);
        futures::future::ready(result.map(|()| out))
    }

    fn cancel_detached(
        &self,
        algorithm: &FixedWindow,
        keys: &[&'static str],
        now: Nanos,
        receipts: &[Receipt],
        acts_at: Nanos,
    ) {
        let step = Operation::Cancel { receipts, acts_at };
        let mut out = vec![crate::stores::store::blank(); keys.len()];
        let _ = self.apply(algorithm, keys, now, step, &mut out);
    }
}

fn window(limit: u64) -> FixedWindow {
    FixedWindow::new(limit, Duration::from_secs(60)).unwrap()
}

fn take() -> Operation<'static> {
    Operation::Reserve {
        cost: 1,
        max_wait: 0,
    }
}

type Failover = FailoverStore<Flaky, &'static str, FixedWindow, ManualClock>;

fn failover(clock: &ManualClock, policy: FailurePolicy<FixedWindow>) -> Failover {
    FailoverStore::new(Flaky::new(clock), policy)
        .with_clock(clock.clone())
        .with_backoff(Backoff::new(
            Duration::from_millis(100),
            Duration::from_millis(400),
        ))
}

fn calls(store: &Failover) -> u64 {
    store.inner().calls.load(Ordering::SeqCst)
}

fn down(store: &Failover, down: bool) {
    store.inner().down.store(down, Ordering::SeqCst);
}

#[test]
fn healthy_decisions_come_from_the_store() {
    let clock = ManualClock::new();
    let store = failover(&clock, FailurePolicy::Closed);
    let (decision, _) = store.apply_key(&window(10), &"k", 0, take()).unwrap();
    assert_eq!(
        (decision.source(), decision.remaining()),
        (Source::Store, 9)
    );
    assert_eq!(store.stats(), Stats::default());
}

#[test]
fn fail_closed_refuses_with_the_rest_of_the_back_off_and_asks_nothing_meanwhile() {
    let clock = ManualClock::new();
    let store = failover(&clock, FailurePolicy::Closed);
    down(&store, true);
    let (first, receipt) = store.apply_key(&window(10), &"k", 0, take()).unwrap();
    assert_eq!(first.source(), Source::FailedClosed);
    assert!(!first.is_allowed() && !first.is_never());
    assert_eq!(first.retry_after(), Duration::from_millis(100));
    assert!(receipt.is_none());
    assert_eq!(calls(&store), 1);
    clock.advance(Duration::from_millis(60));
    for _ in 0..100 {
        let (d, _) = store.apply_key(&window(10), &"k", 0, take()).unwrap();
        assert_eq!(
            (d.source(), d.retry_after()),
            (Source::FailedClosed, Duration::from_millis(40))
        );
    }
    assert_eq!(calls(&store), 1, "no round trip while backed off");
    let stats = store.stats();
    assert_eq!((stats.failures, stats.failed_closed), (1, 101));
}

#[test]
fn fail_open_allows_unchecked() {
    let clock = ManualClock::new();
    let store = failover(&clock, FailurePolicy::Open);
    down(&store, true);
    for _ in 0..20 {
        let (d, receipt) = store.apply_key(&window(1), &"k", 0, take()).unwrap();
        assert!(d.is_allowed());
        assert_eq!(d.source(), Source::Unchecked);
        assert!(receipt.is_none());
        assert_eq!(store.try_take_key(&window(1), &"k", 0, 1).unwrap(), None);
    }
    assert_eq!((calls(&store), store.stats().unchecked), (1, 40));
}

#[test]
fn a_local_policy_limits_by_its_own_share() {
    let clock = ManualClock::new();
    let store = failover(&clock, FailurePolicy::Local(window(3)));
    down(&store, true);
    let answers: Vec<(bool, Source)> = (0..5)
        .map(|_| {
            let (d, _) = store
                .apply_key(&window(100), &"k", clock.now(), take())
                .unwrap();
            (d.is_allowed(), d.source())
        })
        .collect();
    let local = Source::Local;
    assert_eq!(
        answers,
        [
            (true, local),
            (true, local),
            (true, local),
            (false, local),
            (false, local)
        ]
    );
    let refusal = store
        .try_take_key(&window(100), &"k", clock.now(), 1)
        .unwrap()
        .unwrap();
    assert_eq!((refusal.source(), refusal.limit()), (Source::Local, 3));
    assert_eq!(calls(&store), 1);
}

#[test]
fn one_probe_after_the_back_off_and_the_store_decides_again_once_it_answers() {
    let clock = ManualClock::new();
    let store = failover(&clock, FailurePolicy::Closed);
    down(&store, true);
    store
        .apply_key::<(Decision, Receipt)>(&window(10), &"k", 0, take())
        .unwrap();
    clock.advance(Duration::from_millis(100));
    // The probe fails (and takes the timeout): the back-off doubles.
    let (probe, _) = store.apply_key(&window(10), &"k", 0, take()).unwrap();
    assert_eq!(probe.retry_after(), Duration::from_millis(200));
    assert_eq!(calls(&store), 2);
    down(&store, false);
    clock.advance(Duration::from_millis(199));
    let (still, _) = store.apply_key(&window(10), &"k", 0, take()).unwrap();
    assert_eq!(still.source(), Source::FailedClosed);
    clock.advance(Duration::from_millis(1));
    let (back, _) = store.apply_key(&window(10), &"k", 0, take()).unwrap();
    assert_eq!((back.source(), back.remaining()), (Source::Store, 9));
    assert!(!store.is_degraded());
    let stats = store.stats();
    assert_eq!((stats.failures, stats.probes, stats.recoveries), (2, 2, 1));
    // The back-off starts over from its initial period.
    down(&store, true);
    let (again, _) = store.apply_key(&window(10), &"k", 0, take()).unwrap();
    assert_eq!(again.retry_after(), Duration::from_millis(100));
}

#[test]
fn errors_of_the_call_itself_pass_through_and_do_not_back_off() {
    let clock = ManualClock::new();
    let store = failover(&clock, FailurePolicy::Open);
    let mut out = [crate::stores::store::blank(), crate::stores::store::blank()];
    let err = store
        .apply(&window(1), &["a"], 0, take(), &mut out)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidCount { .. }));
    assert!(!store.is_degraded());
}

#[test]
fn local_grants_are_cancelled_locally_and_store_grants_are_dropped_while_backed_off() {
    let clock = ManualClock::new();
    let store = failover(&clock, FailurePolicy::Local(window(1)));
    let reserve = Operation::Reserve {
        cost: 1,
        max_wait: 0,
    };
    let (_, from_store) = store.apply_key(&window(5), &"k", 0, reserve).unwrap();
    down(&store, true);
    let (local, from_local) = store.apply_key(&window(5), &"k", 0, reserve).unwrap();
    assert_eq!(local.source(), Source::Local);
    assert!(!store
        .apply_key::<Decision>(&window(5), &"k", 0, reserve)
        .unwrap()
        .is_allowed());
    // The local grant comes back to the local limit: it grants again.
    store.cancel_detached(&window(5), &["k"], 0, std::slice::from_ref(&from_local), 0);
    let (again, again_receipt) = store.apply_key(&window(5), &"k", 0, reserve).unwrap();
    assert!(again.is_allowed() && again.source() == Source::Local);
    // The store's grant is not sent to a store that is backed off.
    let asked = calls(&store);
    store.cancel_detached(&window(5), &["k"], 0, std::slice::from_ref(&from_store), 0);
    assert_eq!((calls(&store), store.stats().dropped_cancels), (asked, 1));
    // Once healthy, a local receipt still never reaches the store.
    down(&store, false);
    clock.advance(Duration::from_millis(100));
    store
        .apply_key::<(Decision, Receipt)>(&window(5), &"k", 0, reserve)
        .unwrap();
    assert!(!store.is_degraded());
    let cancels = store.inner().cancels.load(Ordering::SeqCst);
    store.cancel_detached(
        &window(5),
        &["k"],
        0,
        std::slice::from_ref(&again_receipt),
        0,
    );
    assert_eq!(store.inner().cancels.load(Ordering::SeqCst), cancels);
}

#[test]
fn a_step_that_fails_reports_the_policy_s_decisions_only() {
    let clock = ManualClock::new();
    let store = failover(&clock, FailurePolicy::Closed);
    down(&store, true);
    let mut each = Vec::new();
    let (d, _) = store
        .apply_key_each(&window(5), &"k", 0, take(), &mut |d| each.push(d.source()))
        .unwrap();
    assert_eq!(
        (d.source(), each),
        (Source::FailedClosed, vec![Source::FailedClosed])
    );
}

#[test]
fn async_calls_follow_the_same_back_off() {
    let clock = ManualClock::new();
    let store = failover(&clock, FailurePolicy::Local(window(2)));
    down(&store, true);
    let run = |store: &Failover| {
        futures::executor::block_on(store.apply_async(&window(9), &["k"], 0, take())).unwrap()[0].0
    };
    let sources: Vec<(bool, Source)> = (0..3)
        .map(|_| run(&store))
        .map(|d| (d.is_allowed(), d.source()))
        .collect();
    assert_eq!(
        sources,
        [
            (true, Source::Local),
            (true, Source::Local),
            (false, Source::Local)
        ]
    );
    assert_eq!(calls(&store), 1);
    let reporting = store.apply_key_each_async(&window(9), &"k", 0, take());
    let ((d, _), each) = futures::executor::block_on(reporting).unwrap();
    assert_eq!((d.source(), each.len()), (Source::Local, 1));
    down(&store, false);
    clock.advance(Duration::from_millis(100));
    assert_eq!(run(&store).source(), Source::Store);
    assert_eq!(calls(&store), 2);
}

#[test]
fn an_abandoned_async_probe_lets_the_next_call_probe() {
    let clock = ManualClock::new();
    let store = failover(&clock, FailurePolicy::Closed);
    down(&store, true);
    store
        .apply_key::<(Decision, Receipt)>(&window(10), &"k", 0, take())
        .unwrap();
    clock.advance(Duration::from_millis(100));
    down(&store, false);
    drop(store.apply_async(&window(10), &["k"], 0, take()));
    let (d, _) = store.apply_key(&window(10), &"k", 0, take()).unwrap();
    assert_eq!(d.source(), Source::Store);
}
