//! Cells: where the state of *one* limit lives (a direct limiter's), updated
//! atomically.
//!
//! An [algorithm](crate::algorithms) is pure; a cell owns one configuration and one
//! state and applies one algorithm step to them atomically, so that concurrent
//! callers never lose an update. (Keyed state, many limits' states in one place, is
//! a [store](crate::stores)'s job.)
//!
//! The algorithm picks its cell by the shape of its state
//! ([`Algorithm::Shape`]):
//!
//! | shape | cell | a refusal costs | a grant costs |
//! |---|---|---|---|
//! | [`OneWord`] | [`WordCell`]: one atomic word | loads | one compare-and-swap |
//! | [`WordArray`] | [`WordsCell`]: atomics under a [`SequenceLock`] | loads | one compare-and-swap, then stores |
//! | [`Plain`] | [`LockedCell`]: a `parking_lot` mutex | lock + unlock | lock + unlock |
//!
//! [`CellAlgorithm`] is that choice as a bound: every `Algorithm + Clone` whose
//! shape has a cell is one, with no impl to write, so an algorithm defined anywhere
//! (in this crate or yours) goes into a [`RateLimiter`](crate::RateLimiter) as soon
//! as it names its shape. Both word cells share the configuration words under the
//! one [`SequenceLock`]; the non-blocking hot path is [`StateCell::try_take`], which
//! runs the algorithm's lean [`plan_take`](crate::algorithms::WordEncoded::plan_take)
//! and [`apply_take`](crate::algorithms::WordEncoded::apply_take); the full
//! non-blocking [`StateCell::check`] publishes before it describes the decision
//! ([`check_words`](crate::algorithms::WordEncoded::check_words)).

use crate::algorithms::words::MAX_CONFIG_WORDS;
use crate::algorithms::{
    AdjustableRate, Algorithm, Decision, OneWord, Plain, Receipt, WordArray, WordEncoded,
};
use crate::clock::Nanos;
use crate::error::ConfigError;
use std::sync::atomic::{AtomicU64, Ordering};

mod locked;
mod sequence;
mod word;
mod words;

pub use locked::LockedCell;
pub use sequence::{Claim, SequenceLock};
pub use word::WordCell;
pub use words::WordsCell;

/// A change of configuration and state applied by [`StateCell::reconfigure`]: a pure
/// function of its inputs that may refuse with an error.
///
/// ```
/// use sluicegate::algorithms::SmoothBursty;
/// use sluicegate::cells::{StateCell, WordCell};
/// use sluicegate::ConfigError;
/// let cell = WordCell::new(SmoothBursty::new(1.0).unwrap(), 0);
/// assert!(cell.reconfigure(&|_, _| Err(ConfigError::InvalidRate { rate: 0.0 })).is_err());
/// assert_eq!(cell.algorithm().rate(), 1.0); // a refused change changes nothing
/// cell.reconfigure(&|algorithm, _| {
///     *algorithm = SmoothBursty::new(2.0)?;
///     Ok(())
/// })
/// .unwrap();
/// assert_eq!(cell.algorithm().rate(), 2.0);
/// ```
pub type Reconfiguration<'a, A> =
    dyn Fn(&mut A, &mut <A as Algorithm>::State) -> Result<(), ConfigError> + 'a;

/// One limit's configuration and state, with atomic steps.
///
/// Every method applies one algorithm step as a single atomic action: concurrent
/// callers are serialised (by a lock or a compare-and-swap) and never lose an
/// update.
///
/// ```
/// use sluicegate::algorithms::{Algorithm, FixedWindow};
/// use sluicegate::cells::{LockedCell, StateCell, WordCell};
/// use std::time::Duration;
/// // Code generic over the cell sees the same decisions from every kind.
/// fn two_calls<A: Algorithm + Clone, C: StateCell<A>>(algorithm: A) -> (bool, bool) {
///     let cell = C::new(algorithm, 0);
///     (cell.reserve(0, 1, 0).0.is_allowed(), cell.try_take(0, 1))
/// }
/// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
/// assert_eq!(two_calls::<_, WordCell<_>>(window), (true, false));
/// assert_eq!(two_calls::<_, LockedCell<_>>(window), (true, false));
/// ```
pub trait StateCell<A: Algorithm + Clone>: Send + Sync + 'static {
    /// A cell holding `algorithm` with its initial state at `now`.
    fn new(algorithm: A, now: Nanos) -> Self;

    /// [`Algorithm::reserve_with_receipt`], atomically.
    fn reserve(&self, now: Nanos, cost: u64, max_wait: Nanos) -> (Decision, Receipt);

    /// The lean non-blocking take: `reserve(now, cost, 0).0.is_allowed()`, with the
    /// same change of state, without building the [`Decision`]'s other fields.
    fn try_take(&self, now: Nanos, cost: u64) -> bool;

    /// The non-blocking check, what [`RateLimiter::check`](crate::RateLimiter::check)
    /// runs: `reserve(now, cost, 0).0`, every field, with the same change of state,
    /// without the [`Receipt`] (a granted check acts at once). The default is
    /// exactly that. [`WordCell`] publishes the new state first and describes the
    /// decision after its compare-and-swap, through the algorithm's
    /// [`WordEncoded::check_words`], so that the swap does not wait for arithmetic
    /// that only feeds the decision's other fields.
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::cells::{StateCell, WordCell};
    /// use std::time::Duration;
    /// let cell = WordCell::new(FixedWindow::new(2, Duration::from_secs(10)).unwrap(), 0);
    /// assert_eq!(cell.check(3_000_000_000, 1).remaining(), 1);
    /// assert_eq!(cell.check(3_000_000_000, 1).remaining(), 0);
    /// let refused = cell.check(3_000_000_000, 1);
    /// assert_eq!(refused.retry_after(), Duration::from_secs(7));
    /// assert_eq!(refused, cell.reserve(3_000_000_000, 1, 0).0); // nothing was taken
    /// ```
    #[inline(always)]
    fn check(&self, now: Nanos, cost: u64) -> Decision {
        self.reserve(now, cost, 0).0
    }

    /// [`check`](StateCell::check), also telling `each` how every limit stands
    /// after it, as [`Algorithm::reserve_each`] does. The default, right for a cell
    /// of one limit, reports the check's decision as the algorithm's
    /// [`standing`](Algorithm::standing) reads it, peeking after the step
    /// ([`peek`](StateCell::peek)) only for a grant that left the limit short of
    /// whole; [`LockedCell`], which holds the sets, reports every member in the
    /// same locked step.
    ///
    /// ```
    /// use sluicegate::algorithms::{AllOf, FixedWindow};
    /// use sluicegate::cells::{LockedCell, StateCell};
    /// use std::time::Duration;
    /// let second = FixedWindow::new(2, Duration::from_secs(1)).unwrap();
    /// let minute = FixedWindow::new(10, Duration::from_secs(60)).unwrap();
    /// let cell = LockedCell::new(AllOf::new((second, minute)), 0);
    /// let mut left = Vec::new();
    /// assert!(cell.check_each(0, 1, &mut |d| left.push(d.remaining())).is_allowed());
    /// assert_eq!(left, [1, 9]);
    /// // One limit: its last permit granted, it reports when the next one comes.
    /// use sluicegate::cells::WordCell;
    /// let lone = WordCell::new(FixedWindow::new(1, Duration::from_secs(1)).unwrap(), 0);
    /// let mut reported = Vec::new();
    /// assert!(lone.check_each(0, 1, &mut |d| reported.push(d)).is_allowed());
    /// assert!(!reported[0].is_allowed());
    /// assert_eq!(reported[0].retry_after(), Duration::from_secs(1));
    /// ```
    fn check_each(&self, now: Nanos, cost: u64, each: &mut dyn FnMut(Decision)) -> Decision {
        let decision = self.check(now, cost);
        each(
            self.algorithm()
                .standing(decision, &mut |cost| self.peek(now, cost)),
        );
        decision
    }

    /// [`Algorithm::peek`], on a consistent snapshot.
    fn peek(&self, now: Nanos, cost: u64) -> Decision;

    /// [`Algorithm::cancel`], atomically.
    fn cancel(&self, now: Nanos, receipt: &Receipt, acts_at: Nanos);

    /// A copy of the current configuration.
    fn algorithm(&self) -> A;

    /// Changes configuration and state together, atomically with respect to every
    /// other step. `change` may be called more than once (it must be a pure
    /// function of its inputs); if it fails, nothing changes.
    fn reconfigure(&self, change: &Reconfiguration<'_, A>) -> Result<(), ConfigError>;
}

/// Which cell holds a state of this shape: implemented by the shape markers
/// ([`OneWord`], [`WordArray`], [`Plain`]) for the algorithms each can hold.
///
/// ```
/// use sluicegate::algorithms::{FixedWindow, OneWord};
/// use sluicegate::cells::{CellFor, WordCell};
/// let _: Option<<OneWord as CellFor<FixedWindow>>::Cell> = None::<WordCell<FixedWindow>>;
/// ```
pub trait CellFor<A: Algorithm + Clone> {
    /// The cell.
    type Cell: StateCell<A>;
}

impl<A: WordEncoded> CellFor<A> for OneWord {
    type Cell = WordCell<A>;
}

impl<A: WordEncoded> CellFor<A> for WordArray {
    type Cell = WordsCell<A>;
}

impl<A: Algorithm + Clone> CellFor<A> for Plain {
    type Cell = LockedCell<A>;
}

/// An algorithm a direct limiter can hold: any `Algorithm + Clone` whose
/// [`Shape`](Algorithm::Shape) has a cell ([`CellFor`]). Implemented for all of
/// them; never implement it yourself.
///
/// ```
/// use sluicegate::algorithms::SmoothBursty;
/// use sluicegate::cells::{CellAlgorithm, StateCell};
/// let cell = <SmoothBursty as CellAlgorithm>::Cell::new(SmoothBursty::new(1.0).unwrap(), 0);
/// assert!(cell.try_take(0, 1));
/// assert!(!cell.try_take(0, 1)); // the next permit is 1 s away
/// ```
pub trait CellAlgorithm: Algorithm + Clone {
    /// The cell the shape picks.
    type Cell: StateCell<Self>;
}

impl<A> CellAlgorithm for A
where
    A: Algorithm + Clone,
    A::Shape: CellFor<A>,
{
    type Cell = <A::Shape as CellFor<A>>::Cell;
}

/// Sets the rate of the algorithm in a cell (Guava's `setRate`), at `now`.
pub(crate) fn set_rate<A, S>(cell: &S, now: Nanos, rate: f64) -> Result<(), ConfigError>
where
    A: AdjustableRate + Clone,
    S: StateCell<A>,
{
    cell.reconfigure(&|algorithm, state| algorithm.set_rate(state, now, rate))
}

/// The atomics of a word cell's configuration (unused ones stay 0).
fn config_atomics<A: WordEncoded>(algorithm: &A) -> [AtomicU64; MAX_CONFIG_WORDS] {
    let config = algorithm.config_words();
    let words = config.as_ref();
    std::array::from_fn(|index| AtomicU64::new(words.get(index).copied().unwrap_or(0)))
}

/// Loads the configuration's words (relaxed: a [`SequenceLock`] orders them).
#[inline(always)]
fn load_config<A: WordEncoded>(atomics: &[AtomicU64; MAX_CONFIG_WORDS]) -> A::Config {
    let mut config = A::Config::default();
    for (word, atomic) in config.as_mut().iter_mut().zip(atomics) {
        *word = atomic.load(Ordering::Relaxed);
    }
    config
}

/// Stores `algorithm`'s configuration words, under a claim of the sequence lock.
fn store_config<A: WordEncoded>(atomics: &[AtomicU64; MAX_CONFIG_WORDS], algorithm: &A) {
    for (atomic, word) in atomics.iter().zip(algorithm.config_words().as_ref()) {
        atomic.store(*word, Ordering::Relaxed);
    }
}
