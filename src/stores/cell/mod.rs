//! The state of one limit, updated atomically.

use crate::algorithms::smooth_warming_up::WarmingUpState;
use crate::algorithms::{
    AdjustableRate, Algorithm, Decision, SmoothBursty, SmoothWarmingUp, WordAlgorithm,
};
use crate::clock::Nanos;
use crate::error::Error;
use parking_lot::Mutex;
use std::sync::atomic::{fence, AtomicU64, Ordering};

mod word_array;

pub use word_array::WordArrayCell;

/// A change of configuration and state applied by [`StateCell::reconfigure`]: a pure
/// function of its inputs that may refuse with an error.
///
/// ```
/// use sluicegate::algorithms::SmoothBursty;
/// use sluicegate::stores::{StateCell, WordCell};
/// use sluicegate::Error;
/// let cell = WordCell::new(SmoothBursty::new(1.0).unwrap(), 0);
/// assert!(cell.reconfigure(&|_, _| Err(Error::ZeroCost)).is_err());
/// assert_eq!(cell.algorithm().rate(), 1.0); // a refused change changes nothing
/// cell.reconfigure(&|algorithm, _| {
///     *algorithm = SmoothBursty::new(2.0)?;
///     Ok(())
/// })
/// .unwrap();
/// assert_eq!(cell.algorithm().rate(), 2.0);
/// ```
pub type Reconfiguration<'a, A> =
    dyn Fn(&mut A, &mut <A as Algorithm>::State) -> Result<(), Error> + 'a;

/// One limit's configuration and state, with atomic steps.
///
/// Every method applies one algorithm step as a single atomic action: concurrent
/// callers are serialised (by a lock or a compare-and-swap loop) and never lose an
/// update.
///
/// ```
/// use sluicegate::algorithms::{Algorithm, FixedWindow};
/// use sluicegate::stores::{LockedCell, StateCell, WordCell};
/// use std::time::Duration;
/// // Code generic over the cell sees the same decisions from every kind.
/// fn two_calls<A: Algorithm + Clone, C: StateCell<A>>(algorithm: A) -> (bool, bool) {
///     let cell = C::new(algorithm, 0);
///     (cell.reserve(0, 1, 0).is_allowed(), cell.reserve(0, 1, 0).is_allowed())
/// }
/// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
/// assert_eq!(two_calls::<_, WordCell<_>>(window), (true, false));
/// assert_eq!(two_calls::<_, LockedCell<_>>(window), (true, false));
/// ```
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
    fn reconfigure(&self, change: &Reconfiguration<'_, A>) -> Result<(), Error>;
}

/// Chooses the cell an algorithm's state lives in when it is the one state of a
/// direct limiter. Word-sized algorithms get a lock-free [`WordCell`];
/// [`SmoothWarmingUp`] (two words of state) the lock-free [`WarmingUpCell`]; the
/// sliding log and the bucketed window (fixed arrays of words) the lock-free
/// [`WordArrayCell`]; any other algorithm can use a [`LockedCell`].
///
/// It also holds the hot path of a non-blocking try, [`try_take`](Storable::try_take):
/// an algorithm may override it with a lean step that answers only "granted or not",
/// skipping the [`Decision`]'s other fields (`remaining`, `reset_after`, `limit`),
/// which cost float divisions on every call.
///
/// ```
/// use sluicegate::algorithms::{FixedWindow, Limits, SlidingLog};
/// use sluicegate::stores::{LockedCell, StateCell, Storable, WordArrayCell, WordCell};
/// use std::time::Duration;
/// // A one-word algorithm gets the lock-free cell; the sliding log, the lock-free
/// // cell of many words; a set of limits, a mutex.
/// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
/// let word: WordCell<FixedWindow> = <FixedWindow as Storable>::Cell::new(window, 0);
/// assert!(word.reserve(0, 1, 0).is_allowed());
/// let log = SlidingLog::new(1, Duration::from_secs(1)).unwrap();
/// let words: WordArrayCell<SlidingLog> = <SlidingLog as Storable>::Cell::new(log, 0);
/// assert!(words.reserve(0, 1, 0).is_allowed());
/// let set = Limits::new().with(window);
/// let locked: LockedCell<Limits> = <Limits as Storable>::Cell::new(set, 0);
/// assert!(locked.reserve(0, 1, 0).is_allowed());
/// ```
pub trait Storable: Algorithm + Clone {
    /// The cell type.
    type Cell: StateCell<Self>;

    /// Takes `cost` permits from `cell` at `now` if that needs no waiting, and answers
    /// whether it did. Exactly `cell.reserve(now, cost, 0).is_allowed()`, with the
    /// same change of state (which is the default); overrides only skip work.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothBursty;
    /// use sluicegate::stores::{StateCell, Storable};
    /// let cell = <SmoothBursty as Storable>::Cell::new(SmoothBursty::new(1.0).unwrap(), 0);
    /// assert!(SmoothBursty::try_take(&cell, 0, 1));
    /// assert!(!SmoothBursty::try_take(&cell, 0, 1)); // the next permit is 1 s away
    /// ```
    #[inline]
    fn try_take(cell: &Self::Cell, now: Nanos, cost: u64) -> bool {
        cell.reserve(now, cost, 0).is_allowed()
    }
}

impl Storable for SmoothBursty {
    type Cell = WordCell<SmoothBursty>;

    #[inline]
    fn try_take(cell: &WordCell<SmoothBursty>, now: Nanos, cost: u64) -> bool {
        cell.try_update(|algorithm, state| algorithm.try_grant(state, now, cost))
    }
}

impl Storable for SmoothWarmingUp {
    type Cell = WarmingUpCell;

    #[inline]
    fn try_take(cell: &WarmingUpCell, now: Nanos, cost: u64) -> bool {
        cell.try_take(now, cost)
    }
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

    fn reconfigure(&self, change: &Reconfiguration<'_, A>) -> Result<(), Error> {
        let mut guard = self.inner.lock();
        let (mut algorithm, mut state) = (guard.0.clone(), guard.1.clone());
        change(&mut algorithm, &mut state)?;
        *guard = (algorithm, state);
        Ok(())
    }
}

/// A lock-free cell for a [`WordAlgorithm`]: the state is one `AtomicU64` updated by
/// compare-and-swap, the configuration three more words under a sequence lock.
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
    /// Written on every grant: alone in its cache line, so that threads contending
    /// on it do not also evict the read-mostly words below (nor the clock's
    /// calibration next to the cell), which every call reads.
    state: OwnLine<AtomicU64>,
    sequence: AtomicU64,
    config: [AtomicU64; 3],
    writer: Mutex<()>,
    _algorithm: std::marker::PhantomData<A>,
}

/// A value alone in a 64-byte cache line.
#[derive(Debug)]
#[repr(align(64))]
struct OwnLine<T>(T);

impl<A: WordAlgorithm> WordCell<A>
where
    A::State: Copy + PartialEq,
{
    /// Reads a consistent configuration and the state word that goes with it.
    #[inline(always)]
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
                self.config[2].load(Ordering::Relaxed),
            ];
            let word = self.state.0.load(Ordering::Acquire);
            fence(Ordering::Acquire);
            if self.sequence.load(Ordering::Relaxed) == before {
                return (A::from_words(words), word);
            }
        }
    }

    /// Applies `step` to the state until its result is published, for a step that
    /// answers only whether it changed the state (a lean try): `true` publishes the
    /// new state, `false` leaves it untouched.
    #[inline(always)]
    pub(crate) fn try_update(&self, mut step: impl FnMut(&A, &mut A::State) -> bool) -> bool {
        self.update(|algorithm, state| {
            let granted = step(algorithm, state);
            (granted, granted)
        })
    }

    /// Applies `step` to the state until its result is published. `step` returns its
    /// answer and whether to write the new state.
    ///
    /// A failed compare-and-swap retries from a fresh snapshot. (Retrying on the word
    /// the swap hands back, after a sequence check, as governor does, measured no
    /// better with two threads and half a nanosecond slower with one.)
    #[inline(always)]
    pub(crate) fn update<R>(&self, mut step: impl FnMut(&A, &mut A::State) -> (R, bool)) -> R {
        loop {
            let (algorithm, word) = self.snapshot();
            let mut state = A::state_from_word(word);
            let (answer, write) = step(&algorithm, &mut state);
            if !write {
                return answer;
            }
            let new_word = A::state_to_word(&state);
            if new_word == word
                || self
                    .state
                    .0
                    .compare_exchange_weak(word, new_word, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                return answer;
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
            config: words.map(AtomicU64::new),
            state: OwnLine(AtomicU64::new(A::state_to_word(
                &algorithm.initial_state(now),
            ))),
            writer: Mutex::new(()),
            _algorithm: std::marker::PhantomData,
        }
    }

    #[inline(always)]
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

    fn reconfigure(&self, change: &Reconfiguration<'_, A>) -> Result<(), Error> {
        let _writer = self.writer.lock();
        let (current, _) = self.snapshot();
        // Validate on a copy first: a rejected change touches nothing.
        {
            let mut probe = current;
            let mut state = A::state_from_word(self.state.0.load(Ordering::Acquire));
            change(&mut probe, &mut state)?;
        }
        let sequence = self.sequence.load(Ordering::Relaxed);
        self.sequence
            .store(sequence.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let mut word = self.state.0.load(Ordering::Acquire);
        let new_config = loop {
            let mut algorithm = current;
            let mut state = A::state_from_word(word);
            // Validated above, and a change is a pure function of its inputs, so this
            // succeeds too; should it not, the state is left as it was.
            if change(&mut algorithm, &mut state).is_err() {
                break current;
            }
            match self.state.0.compare_exchange_weak(
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
        for (atomic, word) in self.config.iter().zip(words) {
            atomic.store(word, Ordering::Relaxed);
        }
        self.sequence
            .store(sequence.wrapping_add(2), Ordering::Release);
        Ok(())
    }
}

/// A lock-free cell for [`SmoothWarmingUp`], whose state is two words (stored
/// permits and `nextFreeTicket`) and configuration six: all of them under one
/// sequence number, the way a sequence lock guards data too wide for one atomic.
///
/// ```text
///   read:   s = sequence (even)   words ...   sequence == s ?   else retry
///   write:  CAS sequence s -> s+1   store words   sequence = s+2
/// ```
///
/// A step reads a consistent snapshot (retrying if the sequence moved or is odd),
/// runs the pure algorithm step on it, and, if the state changed, claims the
/// sequence by one compare-and-swap *from the value it read*: success proves no
/// other write landed since the snapshot, so the new state is stored and the
/// sequence released (made even again). If the swap fails another caller wrote
/// first and the step is redone on fresh data. A refused call writes nothing: it
/// costs a few loads and no atomic read-modify-write. Rate changes and cancellations
/// go through the same claim, so every change is serialised. A writer holds the
/// sequence odd only for a handful of stores; readers that find it odd spin briefly,
/// then yield the thread.
///
/// ```
/// use sluicegate::algorithms::SmoothWarmingUp;
/// use sluicegate::stores::StateCell;
/// use sluicegate::stores::cell::WarmingUpCell;
/// use std::time::Duration;
/// let cell = WarmingUpCell::new(SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap(), 0);
/// assert!(cell.reserve(0, 1, 0).is_allowed());
/// assert!(!cell.reserve(0, 1, 0).is_allowed()); // the first cold permit costs 1.375 s
/// ```
#[derive(Debug)]
// Starts a cache line (and rounds up to two): the words every call reads share no
// line with a neighbour such as the clock's calibration.
#[repr(align(64))]
pub struct WarmingUpCell {
    sequence: AtomicU64,
    config: [AtomicU64; 6],
    state: [AtomicU64; 2],
}

/// Claims the right to write under a sequence number still at `seen` (even), making
/// it odd; false if another writer moved it first. The claimant must store
/// `seen + 2` when done (or `seen` again if it wrote nothing).
#[inline(always)]
fn claim_sequence(sequence: &AtomicU64, seen: u64) -> bool {
    let claimed = sequence
        .compare_exchange_weak(
            seen,
            seen.wrapping_add(1),
            Ordering::Acquire,
            Ordering::Relaxed,
        )
        .is_ok();
    // Readers that see any store made after a claim must also see the odd sequence.
    fence(Ordering::Release);
    claimed
}

/// Waits a little for a writer to finish: spin first (a write takes nanoseconds),
/// then give the processor away in case the writer was descheduled mid-write.
#[inline]
fn backoff(spins: &mut u32) {
    if *spins < 64 {
        *spins += 1;
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

impl WarmingUpCell {
    /// A consistent snapshot: the (even) sequence it was read under, the
    /// configuration, and the state words.
    #[inline(always)]
    fn snapshot(&self) -> (u64, SmoothWarmingUp, [u64; 2]) {
        let mut spins = 0;
        loop {
            let before = self.sequence.load(Ordering::Acquire);
            if before & 1 == 0 {
                let config = [
                    self.config[0].load(Ordering::Relaxed),
                    self.config[1].load(Ordering::Relaxed),
                    self.config[2].load(Ordering::Relaxed),
                    self.config[3].load(Ordering::Relaxed),
                    self.config[4].load(Ordering::Relaxed),
                    self.config[5].load(Ordering::Relaxed),
                ];
                let state = [
                    self.state[0].load(Ordering::Relaxed),
                    self.state[1].load(Ordering::Relaxed),
                ];
                // Orders the data loads before the second sequence load: if any of
                // them saw a concurrent write, that load sees the sequence moved.
                fence(Ordering::Acquire);
                if self.sequence.load(Ordering::Relaxed) == before {
                    return (before, SmoothWarmingUp::from_config_words(config), state);
                }
            }
            backoff(&mut spins);
        }
    }

    /// Stores `state` (and `config`, if given) if the sequence is still `seen`, that
    /// is if nothing was written since the snapshot taken under it. False if another
    /// writer got there first.
    #[inline(always)]
    fn publish(&self, seen: u64, config: Option<&SmoothWarmingUp>, state: [u64; 2]) -> bool {
        if !self.claim(seen) {
            return false;
        }
        self.write_and_release(seen, config, state);
        true
    }

    /// Claims the right to write if the sequence is still `seen` (even), making it
    /// odd. Every claim must be followed by [`write_and_release`](Self::write_and_release).
    #[inline(always)]
    fn claim(&self, seen: u64) -> bool {
        claim_sequence(&self.sequence, seen)
    }

    /// Stores `state` (and `config`, if given) and releases a claim taken at `seen`.
    #[inline(always)]
    fn write_and_release(&self, seen: u64, config: Option<&SmoothWarmingUp>, state: [u64; 2]) {
        if let Some(config) = config {
            for (atomic, word) in self.config.iter().zip(config.config_words()) {
                atomic.store(word, Ordering::Relaxed);
            }
        }
        self.state[0].store(state[0], Ordering::Relaxed);
        self.state[1].store(state[1], Ordering::Relaxed);
        self.sequence.store(seen.wrapping_add(2), Ordering::Release);
    }

    /// Applies `step` until its result is published; `step` answers whether it
    /// may change the state (a grant). An unchanged state is not written back.
    #[inline(always)]
    fn update<R>(
        &self,
        mut step: impl FnMut(&SmoothWarmingUp, &mut WarmingUpState) -> (R, bool),
    ) -> R {
        loop {
            let (seen, algorithm, words) = self.snapshot();
            let mut state = SmoothWarmingUp::state_from_words(words);
            let (result, write) = step(&algorithm, &mut state);
            let new_words = SmoothWarmingUp::state_to_words(&state);
            if !write || new_words == words || self.publish(seen, None, new_words) {
                return result;
            }
        }
    }

    /// The lean non-blocking try: refuses from the snapshot alone (no write), and
    /// otherwise claims the state *before* the float half of the step, so that the
    /// compare-and-swap's latency overlaps that arithmetic instead of following it.
    #[inline(always)]
    pub(crate) fn try_take(&self, now: Nanos, cost: u64) -> bool {
        loop {
            let (seen, algorithm, words) = self.snapshot();
            let mut state = SmoothWarmingUp::state_from_words(words);
            if !SmoothWarmingUp::grants_at_once(&state, now) {
                return false;
            }
            if !self.claim(seen) {
                continue;
            }
            // Granted by construction (same snapshot, same integer test); should it
            // not be, the state is released unchanged.
            let granted = algorithm.try_grant(&mut state, now, cost);
            let words = if granted {
                SmoothWarmingUp::state_to_words(&state)
            } else {
                words
            };
            self.write_and_release(seen, None, words);
            return granted;
        }
    }
}

impl StateCell<SmoothWarmingUp> for WarmingUpCell {
    fn new(algorithm: SmoothWarmingUp, now: Nanos) -> Self {
        let config = algorithm.config_words().map(AtomicU64::new);
        let state = SmoothWarmingUp::state_to_words(&algorithm.initial_state(now));
        WarmingUpCell {
            sequence: AtomicU64::new(0),
            config,
            state: state.map(AtomicU64::new),
        }
    }

    #[inline(always)]
    fn reserve(&self, now: Nanos, cost: u64, max_wait: Nanos) -> Decision {
        self.update(|algorithm, state| {
            let decision = algorithm.reserve(state, now, cost, max_wait);
            (decision, decision.is_allowed())
        })
    }

    #[inline]
    fn peek(&self, now: Nanos, cost: u64) -> Decision {
        let (_, algorithm, words) = self.snapshot();
        algorithm.peek(&SmoothWarmingUp::state_from_words(words), now, cost)
    }

    fn cancel(&self, now: Nanos, grant: &Decision, acts_at: Nanos) {
        self.update(|algorithm, state| {
            algorithm.cancel(state, now, grant, acts_at);
            ((), true)
        });
    }

    fn algorithm(&self) -> SmoothWarmingUp {
        self.snapshot().1
    }

    fn reconfigure(&self, change: &Reconfiguration<'_, SmoothWarmingUp>) -> Result<(), Error> {
        loop {
            let (seen, mut algorithm, words) = self.snapshot();
            let mut state = SmoothWarmingUp::state_from_words(words);
            // A rejected change returns before anything is claimed or written.
            change(&mut algorithm, &mut state)?;
            let new_words = SmoothWarmingUp::state_to_words(&state);
            if self.publish(seen, Some(&algorithm), new_words) {
                return Ok(());
            }
        }
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

    #[inline]
    fn try_take(cell: &Self::Cell, now: Nanos, cost: u64) -> bool {
        cell.try_update(|algorithm, state| algorithm.try_grant(state, now, cost))
    }
}

impl Storable for crate::algorithms::FixedWindow {
    type Cell = WordCell<crate::algorithms::FixedWindow>;
}

impl Storable for crate::algorithms::SlidingWindowCounter {
    type Cell = WordCell<crate::algorithms::SlidingWindowCounter>;

    #[inline]
    fn try_take(cell: &Self::Cell, now: Nanos, cost: u64) -> bool {
        // A refusal changes the state too when attempts are counted: publish any
        // change (an unchanged word is not written).
        cell.update(|algorithm, state| (algorithm.try_grant(state, now, cost), true))
    }
}

impl Storable for crate::algorithms::SlidingWindowBuckets {
    type Cell = WordArrayCell<crate::algorithms::SlidingWindowBuckets>;

    #[inline]
    fn try_take(cell: &Self::Cell, now: Nanos, cost: u64) -> bool {
        cell.try_take(now, cost)
    }
}

impl Storable for crate::algorithms::SlidingLog {
    type Cell = WordArrayCell<crate::algorithms::SlidingLog>;

    #[inline]
    fn try_take(cell: &Self::Cell, now: Nanos, cost: u64) -> bool {
        cell.try_take(now, cost)
    }
}
