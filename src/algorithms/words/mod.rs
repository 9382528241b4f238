//! States written in words, and where a direct limiter keeps them.
//!
//! Every algorithm says what shape its state has ([`Algorithm::Shape`]): one
//! machine word ([`OneWord`]: the token buckets, the leaky bucket, the window
//! counters), a fixed array of words ([`WordArray`]: Guava's warm-up with its two
//! words, the sliding log's and the bucketed window's rings), or plain data
//! ([`Plain`]: sets of limits, or anything else). A direct limiter picks its cell
//! from that shape (see the cells): a word is updated by one
//! compare-and-swap, an array of words under a sequence lock, plain data behind a
//! mutex. Word-shaped algorithms implement the one encoding, [`WordEncoded`]: the
//! configuration as a few words, the state as words, and the steps on words.
//!
//! The step functions do not own their memory. They read and write words through
//! [`Words`] and [`WordsMut`], and the caller decides where the words are:
//!
//! ```text
//!   pure step (tests, keyed store, sets)     direct limiter (cells)
//!   ┌──────────────────────────────┐         ┌──────────────────────────────────┐
//!   │ the state's own plain words  │         │ AtomicU64s: one CAS'd word, or   │
//!   │                              │         │ an array under a sequence lock   │
//!   └──────────────┬───────────────┘         └────────────────┬─────────────────┘
//!                  └──── the same step code, generic over Words ┘
//! ```
//!
//! A cell that shares the words between threads reads them optimistically and
//! checks afterwards that nothing was written meanwhile. Until that check, what it
//! read may be a mix of two states. So the *lean* step ([`WordEncoded::plan_take`]),
//! which runs on such reads, must be total: for any words whatever it returns,
//! without panicking and after a bounded number of reads. Its answer is used only
//! once the check has passed. The other steps run with the words held exclusively
//! and see consistent states only.
//!
//! [`Words::word`] answers 0 past the end and [`WordsMut::set_word`] ignores an
//! index past the end, so an index computed from mixed reads cannot panic either.

use super::{Algorithm, Decision, Receipt};
use crate::clock::Nanos;

/// Read access to a state's words.
pub trait Words {
    /// The word at `index`, or 0 if `index` is past the end.
    fn word(&self, index: usize) -> u64;
}

/// Write access to a state's words.
pub trait WordsMut: Words {
    /// Sets the word at `index` to `value`; does nothing if `index` is past the end.
    fn set_word(&mut self, index: usize, value: u64);
}

impl Words for [u64] {
    #[inline(always)]
    fn word(&self, index: usize) -> u64 {
        self.get(index).copied().unwrap_or(0)
    }
}

impl WordsMut for [u64] {
    #[inline(always)]
    fn set_word(&mut self, index: usize, value: u64) {
        if let Some(word) = self.get_mut(index) {
            *word = value;
        }
    }
}

/// Where a direct limiter keeps an algorithm's state: the answer to
/// [`Algorithm::Shape`]. One of [`OneWord`], [`WordArray`] or [`Plain`].
pub trait Shape: Send + Sync + 'static {}

/// The state is one word, in the crate's private word encoding: a direct limiter keeps it in
/// one atomic word, updated by compare-and-swap, with no lock
/// (`WordCell`).
///
/// ```
/// use sluicegate::algorithms::{Algorithm, FixedWindow, OneWord};
/// fn shape<A: Algorithm<Shape = OneWord>>(_: &A) {}
/// shape(&FixedWindow::new(1, std::time::Duration::from_secs(1)).unwrap());
/// ```
#[derive(Debug)]
pub enum OneWord {}

/// The state is a fixed array of words, in the crate's private word encoding: a direct
/// limiter keeps them as atomics under a sequence lock, so a refusal costs loads
/// only and a grant one compare-and-swap
/// (`WordsCell`).
///
/// ```
/// use sluicegate::algorithms::{Algorithm, SlidingLog, WordArray};
/// fn shape<A: Algorithm<Shape = WordArray>>(_: &A) {}
/// shape(&SlidingLog::new(1, std::time::Duration::from_secs(1)).unwrap());
/// ```
#[derive(Debug)]
pub enum WordArray {}

/// The state is plain data: a direct limiter keeps it behind a mutex
/// (`LockedCell`). Any algorithm can pick this shape; one defined outside the
/// crate picks this one.
///
/// ```
/// use sluicegate::algorithms::{Algorithm, Limits, Plain};
/// fn shape<A: Algorithm<Shape = Plain>>(_: &A) {}
/// shape(&Limits::new());
/// ```
#[derive(Debug)]
pub enum Plain {}

impl Shape for OneWord {}
impl Shape for WordArray {}
impl Shape for Plain {}

/// What a lean take plans ([`WordEncoded::plan_take`]): whether the call is
/// granted, and what to write, `Some` for a grant or for a refusal the algorithm
/// records, `None` to write nothing.
pub type Plan<T> = (bool, Option<T>);

/// The most configuration words a [`WordEncoded`] algorithm may use.
pub const MAX_CONFIG_WORDS: usize = 6;

/// A configuration's words: `[u64; N]` for `N` from 1 to [`MAX_CONFIG_WORDS`].
pub trait ConfigWords:
    Copy + Default + AsRef<[u64]> + AsMut<[u64]> + Send + Sync + std::fmt::Debug + 'static
{
}

impl ConfigWords for [u64; 1] {}
impl ConfigWords for [u64; 2] {}
impl ConfigWords for [u64; 3] {}
impl ConfigWords for [u64; 4] {}
impl ConfigWords for [u64; 5] {}
impl ConfigWords for [u64; 6] {}

/// The one way an algorithm writes itself in words: its configuration as a few
/// words, its state as [`state_words`](Self::state_words) words, and its steps on
/// words, so that a cell can keep both in atomics and step them without a lock.
///
/// The steps mirror [`Algorithm`]'s. Their defaults decode the state
/// ([`read_state`](Self::read_state)), run the [`Algorithm`] step and encode the
/// result ([`write_state`](Self::write_state)): right for a state of a word or two.
/// An algorithm whose state is a ring overrides them to work on the words in place
/// (and then implements its [`Algorithm`] steps by running these on its own words;
/// it must override at least one side, or the two defaults call each other).
///
/// The lean non-blocking try, *take*, is split in two so that a lock-free cell can
/// look first and write only if the look still holds: [`plan_take`](Self::plan_take)
/// reads and decides, [`apply_take`](Self::apply_take) writes what it decided. A
/// one-word algorithm plans with its one step on a copy of the word, in the
/// report that reads nothing but "granted" (`bool`) or through the step's own
/// core (the bursty limiter's outcome, the counter's admission); warming up
/// decides with its step's admission test on the one word it needs. The rings
/// (the sliding log, the bucketed window) plan with their step's first half,
/// which decides read-only and says what to write (their step then describes
/// the decision for a report that reads it, and writes), so a cell runs it on
/// the shared words under its sequence lock and takes the lock only to write.
pub trait WordEncoded: Algorithm + Copy {
    /// The configuration's words (`[u64; N]`).
    type Config: ConfigWords;

    /// What a lean take writes, decided by [`plan_take`](Self::plan_take).
    type Take: Copy + std::fmt::Debug + PartialEq;

    /// Encodes the configuration.
    fn config_words(&self) -> Self::Config;

    /// Decodes a configuration from words. Must not panic on any words, and must
    /// give a configuration whose steps neither panic nor loop for ever (clamping
    /// what it cannot use): words may come from anywhere.
    fn from_config_words(words: Self::Config) -> Self;

    /// Decodes words that [`config_words`](Self::config_words) encoded, what a
    /// lock-free cell does on every call (so it should not divide). Such words
    /// hold a configuration that a constructor or
    /// [`from_config_words`](Self::from_config_words) made, so this may skip the
    /// clamping `from_config_words` needs. The default is `from_config_words`.
    #[inline(always)]
    fn from_own_config_words(words: Self::Config) -> Self {
        Self::from_config_words(words)
    }

    /// The number of words of state (fixed by the configuration; 1 for a
    /// [`OneWord`] algorithm).
    fn state_words(&self) -> usize;

    /// The state held in `words` (as many as [`state_words`](Self::state_words)).
    /// Words of another length never make a step panic (reads past the end see 0,
    /// writes there are dropped); what such a state decides is the implementor's
    /// to document.
    fn read_state<W: Words + ?Sized>(&self, words: &W) -> Self::State;

    /// Writes `state` into `words`.
    fn write_state<W: WordsMut + ?Sized>(&self, state: &Self::State, words: &mut W);

    /// Writes the state of a limit first used at `now` into `words`, which are all 0.
    #[inline]
    fn init_words<W: WordsMut + ?Sized>(&self, words: &mut W, now: Nanos) {
        self.write_state(&self.initial_state(now), words);
    }

    /// [`Algorithm::reserve`], with its receipt, on words.
    #[inline(always)]
    fn reserve_words<W: WordsMut + ?Sized>(
        &self,
        words: &mut W,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> (Decision, Receipt) {
        let mut state = self.read_state(words);
        let answer = self.reserve(&mut state, now, cost, max_wait);
        self.write_state(&state, words);
        answer
    }

    /// A zero-wait [`reserve_words`](Self::reserve_words) without the receipt,
    /// split where a cell publishes: changes `words` as that step would, calls
    /// `publish` on them once, and only if it answers true (the new words are
    /// visible) describes the [`Decision`], exactly `reserve_words(words, now, cost,
    /// 0).0`, every field; `None` if `publish` answered false. A lock-free cell
    /// publishes by compare-and-swap, which then does not wait for arithmetic that
    /// only feeds the decision's other fields.
    ///
    /// The default runs the whole step before publishing, which is right for any
    /// algorithm; the crate's bursty limiter, fixed window and sliding window
    /// counter override it to leave the decision's `remaining`, `retry_after` and
    /// `reset_after` until after the publication. That is worth it only where it
    /// adds no work: splitting the leaky bucket's step so (deciding first,
    /// describing after publishing) measured more instructions and more time than
    /// its plain step, so it keeps the default. (A locked compare-and-swap waits
    /// for the instructions before it; those after it overlap the next call.)
    #[inline(always)]
    fn check_words<W: WordsMut + ?Sized>(
        &self,
        words: &mut W,
        now: Nanos,
        cost: u64,
        publish: impl FnOnce(&W) -> bool,
    ) -> Option<Decision> {
        let (decision, _) = self.reserve_words(words, now, cost, 0);
        publish(words).then_some(decision)
    }

    /// [`Algorithm::peek`] on words.
    #[inline]
    fn peek_words<W: Words + ?Sized>(&self, words: &W, now: Nanos, cost: u64) -> Decision {
        self.peek(&self.read_state(words), now, cost)
    }

    /// [`Algorithm::cancel`] on words (see [`Algorithm::cancel`] for the rule).
    #[inline]
    fn cancel_words<W: WordsMut + ?Sized>(
        &self,
        words: &mut W,
        now: Nanos,
        receipt: &Receipt,
        acts_at: Nanos,
    ) {
        let mut state = self.read_state(words);
        self.cancel(&mut state, now, receipt, acts_at);
        self.write_state(&state, words);
    }

    /// The first half of a lean non-blocking take: whether `cost` is granted at
    /// `now` with no waiting, and what to write if the state changes (a grant, or a
    /// recorded refusal). Reads only. Must be total on *any* words (see the
    /// [module docs](self)). `plan_take` then [`apply_take`](Self::apply_take)
    /// changes the state exactly as `reserve_words(now, cost, 0)` would, and answers
    /// its `is_allowed()`.
    fn plan_take<W: Words + ?Sized>(&self, words: &W, now: Nanos, cost: u64) -> Plan<Self::Take>;

    /// The second half of a lean take: writes `take`, planned on these same words.
    fn apply_take<W: WordsMut + ?Sized>(&self, words: &mut W, take: Self::Take);
}

/// A zero-wait reservation split in two, for [`WordEncoded::check_words`]:
/// [`settle`](Settle::settle) decides and moves the state with as little work as it
/// can, keeping what [`describe`](Settle::describe) needs to build the full
/// [`Decision`] once the state is published. The crate's one-word algorithms whose
/// decision costs arithmetic beyond the step implement it (and their `reserve` is
/// the same two halves, so the two cannot disagree).
///
/// Contract: `describe(&settle(state, now, cost))` is exactly
/// `reserve(state, now, cost, 0)`, every field, with the same change of state.
pub(crate) trait Settle: WordEncoded {
    /// What `settle` keeps for `describe`: a few integers.
    type Settled: Copy;

    /// Decides a zero-wait reservation and applies it to `state`.
    fn settle(&self, state: &mut Self::State, now: Nanos, cost: u64) -> Self::Settled;

    /// The full decision `settle` took.
    fn describe(&self, settled: &Self::Settled) -> Decision;

    /// [`WordEncoded::check_words`] by these two halves, publishing between them.
    #[inline(always)]
    fn check_settled<W: WordsMut + ?Sized>(
        &self,
        words: &mut W,
        now: Nanos,
        cost: u64,
        publish: impl FnOnce(&W) -> bool,
    ) -> Option<Decision> {
        let mut state = self.read_state(words);
        let settled = self.settle(&mut state, now, cost);
        self.write_state(&state, words);
        publish(words).then(|| self.describe(&settled))
    }
}

/// The word plumbing of a [`OneWord`] state, written once: a state that is one
/// field (`$field`, of type `$ty`, stored as the word's bits), one word long, and a
/// lean take whose plan is the next state, written as it is. Expands to
/// `type Take`, `state_words`, `read_state`, `write_state` and `apply_take` inside a
/// `WordEncoded` impl; with `settled`, also a `check_words` that publishes the state
/// before describing the decision, by the algorithm's [`Settle`] halves.
macro_rules! one_word_state {
    ($state:ident { $field:ident: $ty:ty }, settled) => {
        $crate::algorithms::words::one_word_state!($state { $field: $ty });

        #[inline(always)]
        fn check_words<W: $crate::algorithms::words::WordsMut + ?Sized>(
            &self,
            words: &mut W,
            now: Nanos,
            cost: u64,
            publish: impl FnOnce(&W) -> bool,
        ) -> Option<Decision> {
            self.check_settled(words, now, cost, publish)
        }
    };
    ($state:ident { $field:ident: $ty:ty }) => {
        type Take = $state;

        #[inline(always)]
        fn state_words(&self) -> usize {
            1
        }

        #[inline(always)]
        fn read_state<W: $crate::algorithms::words::Words + ?Sized>(&self, words: &W) -> $state {
            $state {
                $field: words.word(0) as $ty,
            }
        }

        #[inline(always)]
        fn write_state<W: $crate::algorithms::words::WordsMut + ?Sized>(
            &self,
            state: &$state,
            words: &mut W,
        ) {
            words.set_word(0, state.$field as u64);
        }

        #[inline(always)]
        fn apply_take<W: $crate::algorithms::words::WordsMut + ?Sized>(
            &self,
            words: &mut W,
            take: $state,
        ) {
            self.write_state(&take, words);
        }
    };
}
pub(crate) use one_word_state;

/// A ring state's words, read whole: the first `len` of `words` (an allocation; for
/// reconfiguring a cell, never on the hot path).
pub(crate) fn read_all<W: Words + ?Sized>(words: &W, len: usize) -> Box<[u64]> {
    (0..len).map(|index| words.word(index)).collect()
}

/// Writes `state`'s words over the first of `words`.
pub(crate) fn write_all<W: WordsMut + ?Sized>(state: &[u64], words: &mut W) {
    for (index, word) in state.iter().enumerate() {
        words.set_word(index, *word);
    }
}

#[cfg(test)]
mod tests;
