//! The state of one limit, updated atomically.

use crate::algorithms::{
    AdjustableRate, Algorithm, Decision, SmoothBursty, SmoothWarmingUp, WordAlgorithm,
};
use crate::clock::Nanos;
use crate::error::Error;
use parking_lot::Mutex;
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// A change of configuration and state together, as applied by
/// [`StateCell::reconfigure`]: a pure function of its inputs, which may refuse.
pub type Reconfiguration<'a, A> =
    &'a dyn Fn(&mut A, &mut <A as Algorithm>::State) -> Result<(), Error>;

/// One limit's configuration and state, with atomic steps.
///
/// Every method applies one algorithm step as a single atomic action: concurrent
/// callers are serialised (by a lock or a compare-and-swap loop) and never lose an
/// update.
pub trait StateCell<A: Algorithm + Clone>: Send + Sync + 'static {
    /// A cell holding `algorithm` with its initial state at `now`.
    fn new(algorithm: A, now: Nanos) -> Self;

    /// [`Algorithm::reserve`], atomically.
    fn reserve(&self, now: Nanos, cost: u64, max_wait: Nanos) -> Decision;

    /// [`Algorithm::peek`], on a consistent snapshot.
    fn peek(&self, now: Nanos, cost: u64) -> Decision;

    /// [`Algorithm::cancel`], atomically.
    fn cancel(&self, now: Nanos, grant: &Decision, acts_at: Nanos);

    /// A copy of the current configuration.
    fn algorithm(&self) -> A;

    /// Changes configuration and state together, atomically with respect to every
    /// other step. `change` may be called more than once (it must be a pure
    /// function of its inputs); if it fails, nothing changes.
    fn reconfigure(&self, change: Reconfiguration<'_, A>) -> Result<(), Error>;
}

/// Chooses the cell an algorithm's state lives in when it is the one state of a
/// direct limiter. Word-sized algorithms get a lock-free [`WordCell`].
pub trait Storable: Algorithm + Clone {
    /// The cell type.
    type Cell: StateCell<Self>;
}

impl Storable for SmoothBursty {
    type Cell = WordCell<SmoothBursty>;
}

impl Storable for SmoothWarmingUp {
    type Cell = LockedCell<SmoothWarmingUp>;
}

/// A cell behind a mutex: for any algorithm.
///
/// Each step takes an uncontended `parking_lot` mutex (two atomic operations), runs
/// the algorithm, and releases it.
///
/// ```
/// use sluicegate::algorithms::SmoothWarmingUp;
/// use sluicegate::stores::{LockedCell, StateCell};
/// use std::time::Duration;
/// let cell = LockedCell::new(SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap(), 0);
/// assert!(cell.reserve(0, 1, 0).is_allowed());
/// assert!(!cell.reserve(0, 1, 0).is_allowed()); // the first cold permit costs 1.375 s
/// ```
#[derive(Debug)]
pub struct LockedCell<A: Algorithm> {
    inner: Mutex<(A, A::State)>,
}

impl<A: Algorithm + Clone> StateCell<A> for LockedCell<A> {
    fn new(algorithm: A, now: Nanos) -> Self {
        let state = algorithm.initial_state(now);
        LockedCell {
            inner: Mutex::new((algorithm, state)),
        }
    }

    #[inline]
    fn reserve(&self, now: Nanos, cost: u64, max_wait: Nanos) -> Decision {
        let mut guard = self.inner.lock();
        let (algorithm, state) = &mut *guard;
        algorithm.reserve(state, now, cost, max_wait)
    }

    fn peek(&self, now: Nanos, cost: u64) -> Decision {
        let guard = self.inner.lock();
        guard.0.peek(&guard.1, now, cost)
    }

    fn cancel(&self, now: Nanos, grant: &Decision, acts_at: Nanos) {
        let mut guard = self.inner.lock();
        let (algorithm, state) = &mut *guard;
        algorithm.cancel(state, now, grant, acts_at);
    }

    fn algorithm(&self) -> A {
        self.inner.lock().0.clone()
    }

    fn reconfigure(&self, change: Reconfiguration<'_, A>) -> Result<(), Error> {
        let mut guard = self.inner.lock();
        let (mut algorithm, mut state) = (guard.0.clone(), guard.1.clone());
        change(&mut algorithm, &mut state)?;
        *guard = (algorithm, state);
        Ok(())
    }
}

/// A lock-free cell for a [`WordAlgorithm`]: the state is one `AtomicU64` updated by
/// compare-and-swap, the configuration two more words under a sequence lock.
///
/// A step reads the configuration (checking the sequence number has not moved),
/// loads the state word, runs the pure algorithm step, and publishes the new word
/// with one compare-and-swap, retrying if another thread got there first. A step
/// that leaves the word unchanged (a denial, as a rule) writes nothing. Reconfiguration (a rate change) is rare: it takes a mutex to
/// serialise writers, marks the sequence odd, rewrites the state word by CAS,
/// publishes the new configuration and marks the sequence even again. A step whose
/// CAS lands before the writer's rewrite is ordered before the rate change; one that
/// would land after fails its CAS and retries under the new configuration.
///
/// ```
/// use sluicegate::algorithms::SmoothBursty;
/// use sluicegate::stores::{StateCell, WordCell};
/// let cell = WordCell::new(SmoothBursty::new(5.0).unwrap(), 0);
/// assert!(cell.reserve(0, 1, 0).is_allowed());
/// assert_eq!(cell.reserve(0, 1, u64::MAX).wait_nanos(), 200_000_000);
/// ```
#[derive(Debug)]
pub struct WordCell<A: WordAlgorithm>
where
    A::State: Copy + PartialEq,
{
    sequence: AtomicU64,
    config: [AtomicU64; 2],
    state: AtomicU64,
    writer: Mutex<()>,
    _algorithm: std::marker::PhantomData<A>,
}

impl<A: WordAlgorithm> WordCell<A>
where
    A::State: Copy + PartialEq,
{
    /// Reads a consistent configuration and the state word that goes with it.
    #[inline]
    fn snapshot(&self) -> (A, u64) {
        loop {
            let before = self.sequence.load(Ordering::Acquire);
            if before & 1 == 1 {
                // A rate change is being published; it holds the writer lock briefly.
                drop(self.writer.lock());
                continue;
            }
            let words = [
                self.config[0].load(Ordering::Relaxed),
                self.config[1].load(Ordering::Relaxed),
            ];
            let word = self.state.load(Ordering::Acquire);
            fence(Ordering::Acquire);
            if self.sequence.load(Ordering::Relaxed) == before {
                return (A::from_words(words), word);
            }
        }
    }

    /// Applies `step` to the state until its result is published. `step` returns the
    /// decision and whether to write the new state.
    #[inline]
    fn update(&self, mut step: impl FnMut(&A, &mut A::State) -> (Decision, bool)) -> Decision {
        loop {
            let (algorithm, word) = self.snapshot();
            let mut state = A::state_from_word(word);
            let (decision, write) = step(&algorithm, &mut state);
            if !write {
                return decision;
            }
            let new_word = A::state_to_word(&state);
            if new_word == word
                || self
                    .state
                    .compare_exchange_weak(word, new_word, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                return decision;
            }
        }
    }
}

impl<A: WordAlgorithm> StateCell<A> for WordCell<A>
where
    A::State: Copy + PartialEq,
{
    fn new(algorithm: A, now: Nanos) -> Self {
        let words = algorithm.to_words();
        WordCell {
            sequence: AtomicU64::new(0),
            config: [AtomicU64::new(words[0]), AtomicU64::new(words[1])],
            state: AtomicU64::new(A::state_to_word(&algorithm.initial_state(now))),
            writer: Mutex::new(()),
            _algorithm: std::marker::PhantomData,
        }
    }

    #[inline]
    fn reserve(&self, now: Nanos, cost: u64, max_wait: Nanos) -> Decision {
        // Publish whatever the step left: only allowed steps change the state,
        // except under an algorithm configured to record refused attempts. A step
        // that changed nothing writes nothing (`update` skips an unchanged word).
        self.update(|algorithm, state| (algorithm.reserve(state, now, cost, max_wait), true))
    }

    #[inline]
    fn peek(&self, now: Nanos, cost: u64) -> Decision {
        let (algorithm, word) = self.snapshot();
        algorithm.peek(&A::state_from_word(word), now, cost)
    }

    fn cancel(&self, now: Nanos, grant: &Decision, acts_at: Nanos) {
        self.update(|algorithm, state| {
            algorithm.cancel(state, now, grant, acts_at);
            (*grant, true)
        });
    }

    fn algorithm(&self) -> A {
        self.snapshot().0
    }

    fn reconfigure(&self, change: Reconfiguration<'_, A>) -> Result<(), Error> {
        let _writer = self.writer.lock();
        let (current, _) = self.snapshot();
        // Validate on a copy first: a rejected change touches nothing.
        {
            let mut probe = current;
            let mut state = A::state_from_word(self.state.load(Ordering::Acquire));
            change(&mut probe, &mut state)?;
        }
        let sequence = self.sequence.load(Ordering::Relaxed);
        self.sequence
            .store(sequence.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let mut word = self.state.load(Ordering::Acquire);
        let new_config = loop {
            let mut algorithm = current;
            let mut state = A::state_from_word(word);
            // Validated above, and a change is a pure function of its inputs, so this
            // succeeds too; should it not, the state is left as it was.
            if change(&mut algorithm, &mut state).is_err() {
                break current;
            }
            match self.state.compare_exchange_weak(
                word,
                A::state_to_word(&state),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break algorithm,
                Err(actual) => word = actual,
            }
        };
        let words = new_config.to_words();
        self.config[0].store(words[0], Ordering::Relaxed);
        self.config[1].store(words[1], Ordering::Relaxed);
        self.sequence
            .store(sequence.wrapping_add(2), Ordering::Release);
        Ok(())
    }
}

/// Sets the rate of the algorithm in a cell (Guava's `setRate`), at `now`.
pub(crate) fn set_rate<A, S>(cell: &S, now: Nanos, rate: f64) -> Result<(), Error>
where
    A: AdjustableRate + Clone,
    S: StateCell<A>,
{
    cell.reconfigure(&|algorithm, state| algorithm.set_rate(state, now, rate))
}

// Sets of limits keep all their members' states in one value, updated under one lock,
// so that a set's check-then-commit is atomic.
impl<A: Algorithm + Clone, B: Algorithm + Clone> Storable for crate::algorithms::AllOf<(A, B)> {
    type Cell = LockedCell<Self>;
}

impl<A: Algorithm + Clone, B: Algorithm + Clone, C: Algorithm + Clone> Storable
    for crate::algorithms::AllOf<(A, B, C)>
{
    type Cell = LockedCell<Self>;
}

impl Storable for crate::algorithms::Limits {
    type Cell = LockedCell<Self>;
}

impl Storable for crate::algorithms::LeakyBucket {
    type Cell = WordCell<crate::algorithms::LeakyBucket>;
}

impl Storable for crate::algorithms::FixedWindow {
    type Cell = WordCell<crate::algorithms::FixedWindow>;
}

impl Storable for crate::algorithms::SlidingWindowCounter {
    type Cell = WordCell<crate::algorithms::SlidingWindowCounter>;
}

impl Storable for crate::algorithms::SlidingWindowBuckets {
    type Cell = LockedCell<crate::algorithms::SlidingWindowBuckets>;
}

impl Storable for crate::algorithms::SlidingLog {
    type Cell = LockedCell<crate::algorithms::SlidingLog>;
}
