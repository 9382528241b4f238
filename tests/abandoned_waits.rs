//! Async waits abandoned together give all their permits back. A dropped wait with
//! a pending wait of the same limit after it is given back once none is left,
//! latest first, so the order in which a group of waits is dropped does not matter.
//! On virtual time, for every algorithm that reserves the future and for a window,
//! direct and keyed (one key, a key list), dropped in every order, with a pending
//! wait among them, and with a later grant by another caller (Go's bound); then on
//! the real clock, with tasks dropped by equal timeouts.

mod support;

use support::timed_clock;

use futures::task::noop_waker_ref;
use sluicegate::algorithms::{
    Algorithm, AllOf, Decision, FixedWindow, LeakyBucket, Limits, Receipt, SmoothBursty,
    SmoothWarmingUp,
};
use sluicegate::clock::{Clock, DefaultClock, ManualClock};
use sluicegate::stores::{MemoryStore, Operation, Store};
use sluicegate::CellAlgorithm;
use sluicegate::{Error, KeyedRateLimiter, RateLimiter};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use timed_clock::Timed;

type Waiter = Pin<Box<dyn Future<Output = Result<Duration, Error>> + Send>>;

fn poll_once(waiter: &mut Waiter) -> Poll<Result<Duration, Error>> {
    waiter
        .as_mut()
        .poll(&mut Context::from_waker(noop_waker_ref()))
}

/// Polls a new wait once, asserting that it is sleeping (on its turn, or on a
/// refusal's `retry_after`).
#[track_caller]
fn pending(mut waiter: Waiter) -> Waiter {
    assert!(poll_once(&mut waiter).is_pending(), "the wait must sleep");
    waiter
}

/// The front end a test drives.
#[derive(Clone, Copy, Debug)]
enum Front {
    Direct,
    /// A keyed limiter, one key.
    Keyed,
    /// A keyed limiter, `acquire_all` over two keys.
    KeyList,
}

const FRONTS: [Front; 3] = [Front::Direct, Front::Keyed, Front::KeyList];

/// One limit behind a front end, on its own virtual clock.
trait Limit {
    fn clock(&self) -> &ManualClock;
    /// An async acquire of `cost`, not yet polled.
    fn waiter(&self, cost: u64) -> Waiter;
    /// A blocking acquire of `cost`: how long it slept.
    fn acquire(&self, cost: u64) -> Duration;
    /// How long a request of 1 would wait now (zero if granted at once), taking
    /// nothing.
    fn peek(&self) -> Duration;
}

struct Direct<A: CellAlgorithm>(RateLimiter<A, Timed>);

impl<A: CellAlgorithm> Limit for Direct<A> {
    fn clock(&self) -> &ManualClock {
        &self.0.clock().clock
    }
    fn waiter(&self, cost: u64) -> Waiter {
        Box::pin(self.0.to_async().acquire_n(cost))
    }
    fn acquire(&self, cost: u64) -> Duration {
        self.0.acquire_n(cost).unwrap()
    }
    fn peek(&self) -> Duration {
        waited(self.0.peek(1).unwrap())
    }
}

type KeyedOnTimed<A> = KeyedRateLimiter<&'static str, A, MemoryStore<&'static str, A>, Timed>;

struct Keyed<A: Algorithm> {
    limiter: KeyedOnTimed<A>,
    keys: Vec<&'static str>,
}

impl<A: Algorithm> Limit for Keyed<A> {
    fn clock(&self) -> &ManualClock {
        &self.limiter.clock().clock
    }
    fn waiter(&self, cost: u64) -> Waiter {
        Box::pin(self.limiter.to_async().acquire_all(&self.keys, cost))
    }
    fn acquire(&self, cost: u64) -> Duration {
        self.limiter.acquire_all(&self.keys, cost).unwrap()
    }
    fn peek(&self) -> Duration {
        waited(self.limiter.peek_all(&self.keys, 1).unwrap())
    }
}

fn waited(decision: Decision) -> Duration {
    assert!(!decision.is_never());
    if decision.is_allowed() {
        Duration::ZERO
    } else {
        decision.retry_after()
    }
}

/// A limit of `algorithm` behind `front`, after two blocking acquires of 1 (so
/// that the next request must wait, for every algorithm here).
fn limit<A: CellAlgorithm>(front: Front, algorithm: &A) -> Box<dyn Limit> {
    let clock = Timed::default();
    let limit: Box<dyn Limit> = match front {
        Front::Direct => Box::new(Direct(RateLimiter::with_clock(algorithm.clone(), clock))),
        Front::Keyed | Front::KeyList => Box::new(Keyed {
            limiter: KeyedRateLimiter::with_clock(algorithm.clone(), clock),
            keys: match front {
                Front::Keyed => vec!["k"],
                _ => vec!["ip", "user"],
            },
        }),
    };
    limit.acquire(1);
    limit.acquire(1);
    limit
}

/// The waits each test starts, by cost: unequal, so that a grant given back out of
/// order would come back in part.
const COSTS: [u64; 5] = [1, 2, 1, 2, 1];

/// The waits of the tests with a later grant: the later grant (1) keeps what the
/// latest waits took less than it, and, by Go's rule, a cancel before them; so
/// only cancels made latest first give back from more than one of them.
const BOUND_COSTS: [u64; 5] = [1, 1, 1, 4, 3];

/// Orders to drop five waits in: first to last, last to first, from the middle.
const ORDERS: [[usize; 5]; 3] = [[0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [2, 0, 4, 1, 3]];

/// The next three blocking acquires' sleeps: how the limit stands, ahead.
fn next_waits(limit: &dyn Limit) -> Vec<Duration> {
    (0..3).map(|_| limit.acquire(1)).collect()
}

fn waits(limit: &dyn Limit, costs: &[u64]) -> Vec<Option<Waiter>> {
    costs
        .iter()
        .map(|&cost| Some(pending(limit.waiter(cost))))
        .collect()
}

fn bursty() -> SmoothBursty {
    SmoothBursty::new(1.0).unwrap()
}

fn warming_up() -> SmoothWarmingUp {
    SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap()
}

fn queue() -> LeakyBucket {
    LeakyBucket::queue(20, 1, Duration::from_secs(1)).unwrap()
}

fn window() -> FixedWindow {
    FixedWindow::new(2, Duration::from_secs(10)).unwrap()
}

/// A set whose tightest member reserves the future.
fn set() -> AllOf<(SmoothBursty, FixedWindow)> {
    AllOf::new((
        bursty(),
        FixedWindow::new(1000, Duration::from_secs(60)).unwrap(),
    ))
}

/// The same set, with its members chosen at run time.
fn run_time_set() -> Limits {
    Limits::new()
        .with(bursty())
        .with(FixedWindow::new(1000, Duration::from_secs(60)).unwrap())
}

/// Five waits dropped together, in each order: the limit stands as if they had
/// never been made (its twin, which never made them).
fn dropped_together_leave_no_trace<A: CellAlgorithm>(algorithm: A) {
    for front in FRONTS {
        for order in ORDERS {
            let (limit, twin) = (limit(front, &algorithm), limit(front, &algorithm));
            let mut waiters = waits(&*limit, &COSTS);
            for at in order {
                waiters[at] = None;
            }
            assert_eq!(
                next_waits(&*limit),
                next_waits(&*twin),
                "{front:?}, dropped in the order {order:?}"
            );
        }
    }
}

#[test]
fn bursty_waits_dropped_together_give_everything_back() {
    dropped_together_leave_no_trace(bursty());
}

#[test]
fn warming_up_waits_dropped_together_give_everything_back() {
    dropped_together_leave_no_trace(warming_up());
}

#[test]
fn queued_waits_dropped_together_give_everything_back() {
    dropped_together_leave_no_trace(queue());
}

#[test]
fn window_waits_dropped_together_took_nothing_and_leave_nothing() {
    // A window cannot book the future: its waiters sleep a refusal's retry_after
    // and hold no grant, so there is nothing to give back and nothing breaks.
    dropped_together_leave_no_trace(window());
}

#[test]
fn set_waits_dropped_together_give_everything_back() {
    // A set's receipt carries its members' own, so every wait of a set, not only
    // its latest, gives its permits back, whatever the order of the drops.
    dropped_together_leave_no_trace(set());
}

#[test]
fn run_time_set_waits_dropped_together_give_everything_back() {
    dropped_together_leave_no_trace(run_time_set());
}

#[test]
fn a_set_of_queues_gives_every_wait_back() {
    // Both members reserve the future, at different rates: each gives back its own.
    dropped_together_leave_no_trace(AllOf::new((queue(), bursty())));
}

/// Moves both clocks forward in steps of 100 ms until `waiter` (on `limit`) and
/// `twin_waiter` (on `twin`) act, asserting they act at the same time.
fn act_together(
    limit: &dyn Limit,
    waiter: &mut Waiter,
    twin: &dyn Limit,
    twin_waiter: &mut Waiter,
) {
    for _ in 0..1000 {
        let (acted, twin_acted) = (poll_once(waiter), poll_once(twin_waiter));
        assert_eq!(acted.is_ready(), twin_acted.is_ready());
        if acted.is_ready() {
            assert_eq!(limit.clock().now(), twin.clock().now());
            return;
        }
        limit.clock().advance(Duration::from_millis(100));
        twin.clock().advance(Duration::from_millis(100));
    }
    panic!("the kept wait never acted");
}

/// Five waits, the middle one kept: the others dropped in each order. The two
/// after it come back at once; the two before it wait for it, and the kept one's
/// turn stands. Then it acts (the two before it have had their turn, and nothing
/// of theirs comes back), or it is dropped too (everything comes back).
fn a_pending_wait_keeps_its_turn<A: CellAlgorithm>(algorithm: A) {
    for front in FRONTS {
        for order in ORDERS {
            for kept_acts in [true, false] {
                let case = format!("{front:?}, {order:?}, kept wait acts: {kept_acts}");
                let (limit, twin) = (limit(front, &algorithm), limit(front, &algorithm));
                let mut waiters = waits(&*limit, &COSTS);
                let mut kept = waiters[2].take().unwrap();
                for at in order {
                    waiters[at] = None;
                }
                // The twin made the first three waits only, and keeps them.
                let mut twin_waiters = waits(&*twin, &COSTS[..3]);
                assert_eq!(limit.peek(), twin.peek(), "{case}");
                let mut twin_kept = twin_waiters[2].take().unwrap();
                if kept_acts {
                    act_together(&*limit, &mut kept, &*twin, &mut twin_kept);
                    assert_eq!(next_waits(&*limit), next_waits(&*twin), "{case}");
                } else {
                    drop(kept);
                    let fresh = self::limit(front, &algorithm);
                    assert_eq!(next_waits(&*limit), next_waits(&*fresh), "{case}");
                }
            }
        }
    }
}

#[test]
fn a_pending_bursty_wait_keeps_its_turn() {
    a_pending_wait_keeps_its_turn(bursty());
}

#[test]
fn a_pending_warming_up_wait_keeps_its_turn() {
    a_pending_wait_keeps_its_turn(warming_up());
}

#[test]
fn a_pending_queued_wait_keeps_its_turn() {
    a_pending_wait_keeps_its_turn(queue());
}

#[test]
fn a_pending_window_wait_keeps_its_turn() {
    a_pending_wait_keeps_its_turn(window());
}

#[test]
fn a_pending_set_wait_keeps_its_turn() {
    a_pending_wait_keeps_its_turn(set());
}

/// Five waits, then a grant by another caller that keeps it, then the waits
/// dropped in each order: exactly what one cancel each, latest first, gives back
/// (Go's rule: as far as the later grant allows), on a twin that made the same
/// grants as reservations.
fn a_later_grant_bounds_what_comes_back<A: CellAlgorithm>(algorithm: A) {
    for order in ORDERS {
        let clock = Timed::default();
        let limiter = RateLimiter::with_clock(algorithm.clone(), clock);
        let twin = RateLimiter::with_clock(algorithm.clone(), Timed::default());
        for limiter in [&limiter, &twin] {
            limiter.acquire().unwrap();
            limiter.acquire().unwrap();
        }
        let limit = Direct(limiter.clone());
        let mut waiters = waits(&limit, &BOUND_COSTS);
        let later = limiter.reserve(1).unwrap();
        assert!(later.is_ok());
        for at in order {
            waiters[at] = None;
        }
        let reservations: Vec<_> = BOUND_COSTS
            .iter()
            .map(|&c| twin.reserve(c).unwrap())
            .collect();
        let twin_later = twin.reserve(1).unwrap();
        for reservation in reservations.into_iter().rev() {
            reservation.cancel();
        }
        assert_eq!(
            next_waits(&limit),
            next_waits(&Direct(twin.clone())),
            "dropped in the order {order:?}"
        );
        drop((later, twin_later)); // dropped, not cancelled: they keep their permits
    }
}

#[test]
fn a_later_bursty_grant_bounds_what_comes_back() {
    a_later_grant_bounds_what_comes_back(bursty());
}

#[test]
fn a_later_warming_up_grant_bounds_what_comes_back() {
    a_later_grant_bounds_what_comes_back(warming_up());
}

#[test]
fn a_later_queued_grant_bounds_what_comes_back() {
    a_later_grant_bounds_what_comes_back(queue());
}

#[test]
fn a_later_set_grant_bounds_what_comes_back() {
    a_later_grant_bounds_what_comes_back(set());
}

#[test]
fn a_later_grant_by_another_process_bounds_what_a_key_gets_back() {
    // The other process reaches the same store directly; the twin makes the same
    // grants on its own store and cancels them one by one, latest first.
    let bursty = bursty();
    let reserve = |cost| Operation::Reserve {
        cost,
        max_wait: u64::MAX,
    };
    for order in ORDERS {
        let limiter = KeyedRateLimiter::with_clock(bursty, Timed::default());
        let twin = KeyedRateLimiter::with_clock(bursty, Timed::default());
        let limit = Keyed {
            limiter: limiter.clone(),
            keys: vec!["k"],
        };
        for limiter in [&limiter, &twin] {
            limiter.acquire(&"k").unwrap();
            limiter.acquire(&"k").unwrap();
        }
        let now = limiter.clock().now();
        let mut waiters = waits(&limit, &BOUND_COSTS);
        limiter
            .store()
            .apply_key::<(Decision, Receipt)>(&bursty, &"k", now, reserve(1))
            .unwrap();
        for at in order {
            waiters[at] = None;
        }
        let grants: Vec<(Decision, Receipt)> = BOUND_COSTS
            .iter()
            .map(|&c| {
                twin.store()
                    .apply_key::<(Decision, Receipt)>(&bursty, &"k", now, reserve(c))
                    .unwrap()
            })
            .collect();
        twin.store()
            .apply_key::<(Decision, Receipt)>(&bursty, &"k", now, reserve(1))
            .unwrap();
        for (decision, receipt) in grants.into_iter().rev() {
            let cancel = Operation::Cancel {
                receipts: &[receipt],
                acts_at: now + decision.wait_nanos(),
            };
            twin.store()
                .apply_key::<(Decision, Receipt)>(&bursty, &"k", now, cancel)
                .unwrap();
        }
        let twin = Keyed {
            limiter: twin,
            keys: vec!["k"],
        };
        assert_eq!(next_waits(&limit), next_waits(&twin), "{order:?}");
    }
}

#[test]
fn five_waiters_dropped_at_once_give_all_their_permits_back() {
    // 1 permit a second: two requests (the second waits 1 s), then five waiters,
    // whose turns are at 2, 3, 4, 5 and 6 s, dropped at once. The next request goes
    // at 2 s, one second after now, as if they had never asked.
    let clock = Timed::default();
    let limiter = RateLimiter::bursty_with_clock(1.0, clock.clone()).unwrap();
    limiter.acquire().unwrap();
    limiter.acquire().unwrap();
    let handle = limiter.to_async();
    let waiters: Vec<Waiter> = (0..5)
        .map(|_| pending(Box::pin(handle.acquire())))
        .collect();
    drop(waiters);
    assert_eq!(limiter.acquire().unwrap(), Duration::from_secs(1));
    assert_eq!(clock.clock.take_sleeps_secs(), [0.0, 1.0, 1.0]);
}

#[test]
fn five_keyed_waiters_dropped_at_once_give_all_their_permits_back() {
    let clock = Timed::default();
    let limiter = KeyedRateLimiter::with_clock(bursty(), clock.clone());
    limiter.acquire(&"k").unwrap();
    limiter.acquire(&"k").unwrap();
    let handle = limiter.to_async();
    let waiters: Vec<Waiter> = (0..5)
        .map(|_| pending(Box::pin(handle.acquire(&"k"))))
        .collect();
    drop(waiters);
    assert_eq!(limiter.acquire(&"k").unwrap(), Duration::from_secs(1));
    assert_eq!(clock.clock.take_sleeps_secs(), [0.0, 1.0, 1.0]);
}

#[test]
fn a_pending_wait_on_another_key_does_not_hold_a_keys_waits_back() {
    let clock = Timed::default();
    let limiter = KeyedRateLimiter::with_clock(bursty(), clock.clone());
    limiter.acquire(&"a").unwrap();
    limiter.acquire(&"a").unwrap();
    let before = limiter.peek(&"a", 1).unwrap();
    assert_eq!(before.retry_after(), Duration::from_secs(1));
    let handle = limiter.to_async();
    // "a"'s waits turn at 2, 3 and 4 s; "b"'s, behind ten permits taken at once, later.
    let waiters: Vec<Waiter> = (0..3)
        .map(|_| pending(Box::pin(handle.acquire(&"a"))))
        .collect();
    limiter.acquire_n(&"b", 10).unwrap();
    let mut kept = pending(Box::pin(handle.acquire(&"b")));
    drop(waiters);
    assert_eq!(limiter.peek(&"a", 1).unwrap(), before);
    clock.clock.advance(Duration::from_secs(5));
    assert!(poll_once(&mut kept).is_pending(), "b's turn stands");
}

/// `tasks` tasks wait on one acquire each (`acquire` makes it), all with the same
/// 200 ms timeout, at 1 permit a second after a first request of 3 (paid later):
/// their turns are 3, 4, … s away, so all of them are dropped by their timeouts
/// at about the same time, on the runtime's worker threads, in no particular
/// order (a first turn 3 s away is still ahead of tasks a loaded machine starts
/// late). Then the next acquire's wait: about 2.8 s (the first turn), never
/// several turns.
async fn timed_out_together<F>(tasks: usize, acquire: impl Fn() -> F) -> Duration
where
    F: Future<Output = Result<Duration, Error>> + Send + 'static,
{
    let timeout = Duration::from_millis(200);
    let handles: Vec<_> = (0..tasks)
        .map(|_| tokio::spawn(tokio::time::timeout(timeout, acquire())))
        .collect();
    for handle in handles {
        assert!(handle.await.unwrap().is_err(), "every wait times out");
    }
    tokio::time::timeout(Duration::from_secs(6), acquire())
        .await
        .expect("the next acquire waits one turn, not one per abandoned wait")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waits_timed_out_together_on_the_real_clock_give_their_turns_back() {
    let limiter = RateLimiter::bursty_with_clock(1.0, DefaultClock::new()).unwrap();
    let handle = limiter.to_async();
    handle.acquire_n(3).await.unwrap();
    let waited = timed_out_together(10, || handle.acquire()).await;
    assert!(waited <= Duration::from_millis(3500), "{waited:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keyed_waits_timed_out_together_on_the_real_clock_give_their_turns_back() {
    let unbursting = bursty().with_max_burst(Duration::ZERO).unwrap();
    let limiter = KeyedRateLimiter::with_store(unbursting, MemoryStore::new(), DefaultClock::new());
    let handle = limiter.to_async();
    handle.acquire_n(&"k", 3).await.unwrap();
    let waited = timed_out_together(10, || handle.acquire(&"k")).await;
    assert!(waited <= Duration::from_millis(3500), "{waited:?}");
}
