//! A lock-free cell for a state of many words (the sliding log's and the bucketed
//! window's rings).

use super::{backoff, claim_sequence, Reconfiguration, StateCell};
use crate::algorithms::word_array::{WordArrayAlgorithm, Words, WordsMut};
use crate::algorithms::Decision;
use crate::clock::Nanos;
use crate::error::Error;
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// A lock-free cell for a [`WordArrayAlgorithm`]: the state's words are atomics, and
/// one sequence number guards them and the configuration, the way a sequence lock
/// guards data too wide for one atomic.
///
/// ```text
///   try:    s = sequence (even)   plan from the words
///           refused: sequence == s ?  done (loads only)  else retry
///           granted: CAS sequence s -> s+1 (else retry)   write the plan   sequence = s+2
///   other:  CAS sequence (even) s -> s+1   step   sequence = s+2 (s if unchanged)
/// ```
///
/// A non-blocking try ([`Storable::try_take`](super::Storable::try_take)) looks
/// first: it reads the few words its decision needs and plans. A refusal checks
/// that the sequence did not move meanwhile and answers: it writes nothing and
/// costs no atomic read-modify-write. A grant claims the sequence by one
/// compare-and-swap *from the value it read*: success proves no write landed since
/// the look (so it needs no check of its own), and the planned writes are stored
/// and the sequence released. If the swap fails another caller wrote first and the
/// try starts over.
///
/// Every other step ([`reserve`](StateCell::reserve) with its full [`Decision`],
/// [`peek`](StateCell::peek), a reconfiguration) claims the sequence first and runs
/// on words nobody else writes, like a spin lock: these steps may walk the ring
/// (an exact `retry_after` does), and a walk over words that change under it would
/// have to be proved safe on every possible mix. A caller that finds the sequence
/// claimed spins briefly, then yields the thread. Steps are short, but a holder that
/// is descheduled makes the others yield until it runs again; a `parking_lot` mutex
/// would park them instead.
///
/// The number of words is fixed when the cell is made: a reconfiguration whose new
/// state has another size fails with [`Error::InvalidCount`] and changes nothing.
///
/// ```
/// use sluicegate::algorithms::SlidingLog;
/// use sluicegate::stores::{StateCell, Storable, WordArrayCell};
/// use std::time::Duration;
/// let log = SlidingLog::new(2, Duration::from_secs(60)).unwrap();
/// let cell = WordArrayCell::new(log, 0);
/// assert!(SlidingLog::try_take(&cell, 0, 1));
/// assert!(cell.reserve(0, 1, 0).is_allowed());
/// assert!(!SlidingLog::try_take(&cell, 0, 1)); // the log is full
/// assert_eq!(cell.peek(0, 1).retry_after(), Duration::from_secs(60));
/// // The state's size is fixed: a new limit must keep the capacity.
/// let err = cell.reconfigure(&|log, _| {
///     *log = SlidingLog::new(3, Duration::from_secs(60))?;
///     Ok(())
/// });
/// assert!(err.is_err());
/// assert_eq!(cell.algorithm(), log); // refused: nothing changed
/// ```
#[derive(Debug)]
// The words every call reads first (sequence and configuration) fill one cache line
// of their own.
#[repr(align(64))]
pub struct WordArrayCell<A: WordArrayAlgorithm> {
    sequence: AtomicU64,
    config: [AtomicU64; 4],
    words: Box<[AtomicU64]>,
    _algorithm: std::marker::PhantomData<A>,
}

/// The cell's words seen through [`Words`]: relaxed loads and stores, ordered by the
/// sequence number's fences. Written only while the sequence is claimed.
struct Shared<'a>(&'a [AtomicU64]);

impl Words for Shared<'_> {
    #[inline(always)]
    fn word(&self, index: usize) -> u64 {
        self.0
            .get(index)
            .map_or(0, |word| word.load(Ordering::Relaxed))
    }
}

impl WordsMut for Shared<'_> {
    #[inline(always)]
    fn set_word(&mut self, index: usize, value: u64) {
        if let Some(word) = self.0.get(index) {
            word.store(value, Ordering::Relaxed);
        }
    }
}

/// A claim on the sequence, released when dropped (even by a panic, so that a
/// failed step cannot leave every other caller spinning): to `seen + 2` if the
/// words may have changed, back to `seen` if they certainly did not.
struct Claim<'a> {
    sequence: &'a AtomicU64,
    seen: u64,
    wrote: bool,
}

impl Drop for Claim<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        let released = if self.wrote {
            self.seen.wrapping_add(2)
        } else {
            self.seen
        };
        self.sequence.store(released, Ordering::Release);
    }
}

impl<A: WordArrayAlgorithm> WordArrayCell<A> {
    /// Waits for no write to be in progress; returns the (even) sequence seen and the
    /// configuration read under it, valid only if [`unchanged_since`] agrees later.
    ///
    /// [`unchanged_since`]: Self::unchanged_since
    #[inline(always)]
    fn begin(&self) -> (u64, A) {
        let mut spins = 0;
        loop {
            let seen = self.sequence.load(Ordering::Acquire);
            if seen & 1 == 0 {
                return (seen, self.configuration());
            }
            backoff(&mut spins);
        }
    }

    /// The configuration as the words now read (consistent only under a claim, or
    /// once [`unchanged_since`](Self::unchanged_since) agrees).
    #[inline(always)]
    fn configuration(&self) -> A {
        A::from_config_words([
            self.config[0].load(Ordering::Relaxed),
            self.config[1].load(Ordering::Relaxed),
            self.config[2].load(Ordering::Relaxed),
            self.config[3].load(Ordering::Relaxed),
        ])
    }

    /// True if nothing was written since `seen` was read, so every load made in
    /// between saw one consistent state.
    #[inline(always)]
    fn unchanged_since(&self, seen: u64) -> bool {
        // Orders the data loads before the second sequence load: if any of them saw
        // a concurrent write, that load sees the sequence moved.
        fence(Ordering::Acquire);
        self.sequence.load(Ordering::Relaxed) == seen
    }

    /// Claims the right to write if the sequence is still `seen` (even).
    #[inline(always)]
    fn claim(&self, seen: u64) -> Option<Claim<'_>> {
        // Built only on success: a `Claim` releases the sequence when dropped, so one
        // made for a failed swap would release somebody else's claim.
        if claim_sequence(&self.sequence, seen) {
            Some(Claim {
                sequence: &self.sequence,
                seen,
                wrote: false,
            })
        } else {
            None
        }
    }

    /// Claims the sequence whatever its value, waiting for a writer to finish.
    fn lock(&self) -> (Claim<'_>, A) {
        let mut spins = 0;
        loop {
            let seen = self.sequence.load(Ordering::Relaxed);
            if seen & 1 == 0 {
                if let Some(claim) = self.claim(seen) {
                    return (claim, self.configuration());
                }
            }
            backoff(&mut spins);
        }
    }

    /// The lean non-blocking try: plans from an optimistic read, refuses without
    /// writing, and claims the sequence only to write a grant (or a recorded
    /// refusal).
    #[inline(always)]
    pub(crate) fn try_take(&self, now: Nanos, cost: u64) -> bool {
        loop {
            let (seen, algorithm) = self.begin();
            let (granted, take) = algorithm.plan_try(&Shared(&self.words), now, cost);
            let Some(take) = take else {
                if self.unchanged_since(seen) {
                    return granted;
                }
                continue;
            };
            // No separate check before a write: the claim itself fails if anything
            // was written since `seen` was read. (If a load above saw a write, the
            // writer's claim happens before this fence, and so before the swap,
            // which then cannot find `seen`.)
            fence(Ordering::Acquire);
            let Some(mut claim) = self.claim(seen) else {
                continue;
            };
            claim.wrote = true;
            algorithm.apply_try(&mut Shared(&self.words), take);
            return granted;
        }
    }
}

impl<A: WordArrayAlgorithm> StateCell<A> for WordArrayCell<A> {
    fn new(algorithm: A, now: Nanos) -> Self {
        let words: Box<[AtomicU64]> = (0..algorithm.state_words())
            .map(|_| AtomicU64::new(0))
            .collect();
        algorithm.init_words(&mut Shared(&words), now);
        WordArrayCell {
            sequence: AtomicU64::new(0),
            config: algorithm.config_words().map(AtomicU64::new),
            words,
            _algorithm: std::marker::PhantomData,
        }
    }

    fn reserve(&self, now: Nanos, cost: u64, max_wait: Nanos) -> Decision {
        let (mut claim, algorithm) = self.lock();
        claim.wrote = true;
        algorithm.reserve_words(&mut Shared(&self.words), now, cost, max_wait)
    }

    fn peek(&self, now: Nanos, cost: u64) -> Decision {
        let (_claim, algorithm) = self.lock();
        algorithm.peek_words(&Shared(&self.words), now, cost)
    }

    fn cancel(&self, now: Nanos, grant: &Decision, acts_at: Nanos) {
        let (mut claim, algorithm) = self.lock();
        claim.wrote = true;
        algorithm.cancel_words(&mut Shared(&self.words), now, grant, acts_at);
    }

    fn algorithm(&self) -> A {
        let (_claim, algorithm) = self.lock();
        algorithm
    }

    fn reconfigure(&self, change: &Reconfiguration<'_, A>) -> Result<(), Error> {
        let (mut claim, mut algorithm) = self.lock();
        let words: Box<[u64]> = (0..self.words.len())
            .map(|index| Shared(&self.words).word(index))
            .collect();
        let mut state = A::state_from_words(words);
        // A rejected change returns before anything is written.
        change(&mut algorithm, &mut state)?;
        let words = A::state_to_words(&state);
        // Both sizes must match the cell's: the new configuration's (which the steps
        // index by) and the state's. A change that replaces only the configuration
        // leaves the state at the old size, so checking the state alone would let a
        // configuration of another size step words not made for it.
        for size in [algorithm.state_words(), words.len()] {
            if size != self.words.len() {
                return Err(Error::InvalidCount {
                    what: "words of state after a reconfiguration",
                    value: size as u64,
                    requirement: "the cell's size, fixed when it was made",
                });
            }
        }
        claim.wrote = true;
        let mut shared = Shared(&self.words);
        for (index, word) in words.iter().enumerate() {
            shared.set_word(index, *word);
        }
        for (atomic, word) in self.config.iter().zip(algorithm.config_words()) {
            atomic.store(word, Ordering::Relaxed);
        }
        Ok(())
    }
}
