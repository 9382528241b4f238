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
//! (in this crate or a user's) goes into a [`RateLimiter`](crate::RateLimiter) as
//! soon as it names its shape. Both word cells share the configuration words under the
//! one [`SequenceLock`]; the non-blocking hot path is [`StateCell::try_take`], which
//! runs the algorithm's lean `plan_take`
//! and `apply_take`; the full
//! non-blocking [`StateCell::check`] publishes before it describes the decision
//! (`check_words`).

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
pub use sequence::SequenceLock;
pub use word::WordCell;
pub use words::WordsCell;

/// A change of configuration and state applied by [`StateCell::reconfigure`]: a pure
/// function of its inputs that may refuse with an error.
pub type Reconfiguration<'a, A> =
    dyn Fn(&mut A, &mut <A as Algorithm>::State) -> Result<(), ConfigError> + 'a;

/// One limit's configuration and state, with atomic steps.
///
/// Every method applies one algorithm step as a single atomic action: concurrent
/// callers are serialised (by a lock or a compare-and-swap) and never lose an
/// update.
pub trait StateCell<A: Algorithm + Clone>: Send + Sync + 'static {
    /// A cell holding `algorithm` with its initial state at `now`.
    fn new(algorithm: A, now: Nanos) -> Self;

    /// [`Algorithm::reserve`] with its receipt, atomically.
    fn reserve(&self, now: Nanos, cost: u64, max_wait: Nanos) -> (Decision, Receipt);

    /// The lean non-blocking take: `reserve(now, cost, 0).0.is_allowed()`, with the
    /// same change of state, without building the [`Decision`]'s other fields.
    fn try_take(&self, now: Nanos, cost: u64) -> bool;

    /// The non-blocking check, what [`RateLimiter::check`](crate::RateLimiter::check)
    /// runs: `reserve(now, cost, 0).0`, every field, with the same change of state,
    /// without the [`Receipt`] (a granted check acts at once). The default is
    /// exactly that. [`WordCell`] publishes the new state first and describes the
    /// decision after its compare-and-swap, through the algorithm's
    /// `WordEncoded::check_words`, so that the swap does not wait for arithmetic
    /// that only feeds the decision's other fields.
    #[inline(always)]
    fn check(&self, now: Nanos, cost: u64) -> Decision {
        self.reserve(now, cost, 0).0
    }

    /// [`check`](StateCell::check), also telling `each` how every limit stands
    /// after it, as [`Algorithm::reserve_each`] does. The default, right for a cell
    /// of one limit, reports the check's decision as the algorithm's
    /// [`standing`](Algorithm::standing) reads it, peeking after the step
    /// ([`peek`](StateCell::peek)) only for a grant that left the limit short of
    /// whole; [`LockedCell`], which holds the sets, reports every limit of a set
    /// in the same locked step.
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

/// The cell a direct limiter keeps an algorithm's state in: the one its
/// [`Shape`](Algorithm::Shape) picks ([`CellFor`]). Implemented for every
/// `Algorithm + Clone` whose shape has a cell.
pub trait HasCell: Algorithm + Clone {
    /// The cell the shape picks.
    type Cell: StateCell<Self>;
}

impl<A> HasCell for A
where
    A: Algorithm + Clone,
    A::Shape: CellFor<A>,
{
    type Cell = <A::Shape as CellFor<A>>::Cell;
}

/// An algorithm a direct limiter can hold: every `Algorithm + Clone` of the crate,
/// and every one of yours whose [`Shape`](Algorithm::Shape) is
/// [`Plain`](crate::algorithms::Plain). It is implemented for all of them and
/// cannot be implemented by hand; name it as the bound of your own code generic
/// over a [`RateLimiter`](crate::RateLimiter).
///
/// ```
/// use sluicegate::algorithms::{FixedWindow, SmoothBursty};
/// use sluicegate::{CellAlgorithm, ManualClock, RateLimiter};
/// use std::time::Duration;
/// fn first_two<A: CellAlgorithm>(algorithm: A) -> (bool, bool) {
///     let limiter = RateLimiter::with_clock(algorithm, ManualClock::new());
///     (limiter.try_acquire(), limiter.try_acquire())
/// }
/// assert_eq!(first_two(SmoothBursty::new(1.0).unwrap()), (true, false));
/// assert_eq!(first_two(FixedWindow::new(2, Duration::from_secs(1)).unwrap()), (true, true));
/// ```
pub trait CellAlgorithm: HasCell {}

impl<A: HasCell> CellAlgorithm for A {}

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

#[cfg(test)]
mod tests;
