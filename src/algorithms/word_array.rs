//! States made of many words: where they live is the store's business.
//!
//! The sliding log and the bucketed sliding window keep a ring (of timestamps, of
//! bucket counters) whose length is fixed by the configuration: too wide for one
//! atomic word, too hot to put behind a lock. So their step functions do not own
//! their memory. They read and write a fixed-length array of `u64` words through
//! [`Words`] and [`WordsMut`], and the caller decides where the words are:
//!
//! ```text
//!   pure step (tests, keyed store, sets)     direct limiter (WordArrayCell)
//!   ┌──────────────────────────────┐         ┌──────────────────────────────────┐
//!   │ Box<[u64]>: plain words      │         │ [AtomicU64] under a sequence no. │
//!   └──────────────┬───────────────┘         └────────────────┬─────────────────┘
//!                  └──── the same step code, generic over Words ┘
//! ```
//!
//! A store that shares the words between threads reads them optimistically and
//! checks afterwards that nothing was written meanwhile (a sequence lock). Until that
//! check, what it read may be a mix of two states. So the *lean* step
//! ([`WordArrayAlgorithm::plan_try`]), which runs on such reads, must be total: for
//! any words whatever it returns, without panicking and after a bounded number of
//! reads. Its answer is used only once the check has passed. The other steps run
//! with the words held exclusively and see consistent states only.
//!
//! [`Words::word`] answers 0 past the end and [`WordsMut::set_word`] ignores an
//! index past the end, so an index computed from mixed reads cannot panic either.

use super::{Algorithm, Decision};
use crate::clock::Nanos;

/// Read access to a state's words.
///
/// ```
/// use sluicegate::algorithms::word_array::Words;
/// let words: &[u64] = &[7, 8];
/// assert_eq!(words.word(1), 8);
/// assert_eq!(words.word(2), 0); // past the end: 0, never a panic
/// ```
pub trait Words {
    /// The word at `index`, or 0 if `index` is past the end.
    fn word(&self, index: usize) -> u64;
}

/// Write access to a state's words.
///
/// ```
/// use sluicegate::algorithms::word_array::{Words, WordsMut};
/// let mut words = [0u64; 2];
/// words.as_mut_slice().set_word(1, 9);
/// words.as_mut_slice().set_word(5, 9); // past the end: ignored
/// assert_eq!(words, [0, 9]);
/// ```
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

/// An [`Algorithm`] whose state is a fixed number of words, stepped through
/// [`Words`]. A store can then keep the words as atomics under a sequence number
/// ([`WordArrayCell`](crate::stores::cell::WordArrayCell)): a refusal costs loads
/// only, a grant one compare-and-swap, and there is no lock.
///
/// The steps mirror [`Algorithm`]'s, on words; an implementor's `Algorithm` impl
/// runs them on a boxed slice. The lean try is split in two so that a lock-free
/// store can look first and write only if the look still holds:
/// [`plan_try`](Self::plan_try) reads and decides, [`apply_try`](Self::apply_try)
/// writes what it decided.
///
/// ```
/// use sluicegate::algorithms::word_array::WordArrayAlgorithm;
/// use sluicegate::algorithms::SlidingWindowBuckets;
/// use std::time::Duration;
/// let window = SlidingWindowBuckets::dropping(1, Duration::from_secs(1), Duration::from_millis(100)).unwrap();
/// let mut words = vec![0; window.state_words()];
/// window.init_words(&mut words[..], 0);
/// let (granted, take) = window.plan_try(&words[..], 0, 1);
/// assert!(granted);
/// window.apply_try(&mut words[..], take.unwrap());
/// assert_eq!(window.plan_try(&words[..], 0, 1), (false, None)); // full: refused, nothing to write
/// // The same step, with the full decision:
/// let refused = window.reserve_words(&mut words[..], 0, 1, 0);
/// assert_eq!(refused.retry_after(), Duration::from_secs(1));
/// ```
pub trait WordArrayAlgorithm: Algorithm + Copy {
    /// What a lean try writes, decided by [`plan_try`](Self::plan_try).
    type Take: Copy + std::fmt::Debug + PartialEq;

    /// The number of words of state (fixed by the configuration).
    fn state_words(&self) -> usize;

    /// Writes the state of a limit first used at `now` into `words`, which are all 0.
    fn init_words<W: WordsMut + ?Sized>(&self, words: &mut W, now: Nanos);

    /// [`Algorithm::reserve`] on words.
    fn reserve_words<W: WordsMut + ?Sized>(
        &self,
        words: &mut W,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> Decision;

    /// [`Algorithm::peek`] on words.
    fn peek_words<W: Words + ?Sized>(&self, words: &W, now: Nanos, cost: u64) -> Decision;

    /// [`Algorithm::cancel`] on words. The default restores nothing (see
    /// [`Algorithm::cancel`] for the rule, and which algorithms keep the default).
    fn cancel_words<W: WordsMut + ?Sized>(
        &self,
        words: &mut W,
        now: Nanos,
        grant: &Decision,
        acts_at: Nanos,
    ) {
        let _ = (words, now, grant, acts_at);
    }

    /// The first half of a lean non-blocking try: whether `cost` is granted at `now`
    /// with no waiting, and what to write if the state changes (a grant, or a
    /// recorded refusal). Reads only. Must be total on *any* words (see the
    /// [module docs](self)). `plan_try` then [`apply_try`](Self::apply_try) changes
    /// the state exactly as `reserve_words(now, cost, 0)` would, and answers its
    /// `is_allowed()`.
    fn plan_try<W: Words + ?Sized>(
        &self,
        words: &W,
        now: Nanos,
        cost: u64,
    ) -> (bool, Option<Self::Take>);

    /// The second half of a lean try: writes `take`, planned on these same words.
    fn apply_try<W: WordsMut + ?Sized>(&self, words: &mut W, take: Self::Take);

    /// Encodes the configuration in four words.
    fn config_words(&self) -> [u64; 4];

    /// Decodes a configuration encoded by [`config_words`](Self::config_words). Runs
    /// on every call of a lock-free cell, so it should not divide. Must not panic on
    /// any words, and must give a configuration whose steps do not panic either
    /// (clamping what it cannot use).
    fn from_config_words(words: [u64; 4]) -> Self;

    /// The words of `state`.
    fn state_to_words(state: &Self::State) -> Box<[u64]>;

    /// The state held in `words` (as many as [`state_words`](Self::state_words)).
    /// Words of another length never make a step panic (reads past the end see 0,
    /// writes there are dropped); what such a state decides is the implementor's
    /// to document.
    fn state_from_words(words: Box<[u64]>) -> Self::State;
}
