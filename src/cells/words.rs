//! A lock-free cell for a state of several words.

use super::{config_atomics, load_config, store_config, Reconfiguration, SequenceLock, StateCell};
use crate::algorithms::words::{Words, WordsMut, MAX_CONFIG_WORDS};
use crate::algorithms::{Decision, Receipt, WordEncoded};
use crate::clock::Nanos;
use crate::error::ConfigError;
use std::sync::atomic::{AtomicU64, Ordering};

/// A lock-free cell for a [`WordArray`](crate::algorithms::WordArray) algorithm
/// (Guava's warm-up, the sliding log's and the bucketed window's rings): the
/// state's words are atomics, and one [`SequenceLock`] guards them and the
/// configuration.
///
/// ```text
///   take:   s = begin()   plan from the words
///           refused: unchanged_since(s) ?  done (loads only)  : retry
///           granted: claim(s) (else retry)   apply the plan   release
///   other:  lock()   step   release
/// ```
///
/// A non-blocking take ([`try_take`](StateCell::try_take)) looks first: it reads the
/// few words its decision needs and plans. A refusal checks that the sequence did
/// not move meanwhile and answers: it writes nothing and costs no atomic
/// read-modify-write. A grant claims the sequence *from the value it read*: success
/// proves no write landed since the look, and the plan is applied and the sequence
/// released. If the swap fails another caller wrote first and the take starts over.
///
/// A full step ([`reserve`](StateCell::reserve) with its [`Decision`],
/// [`peek`](StateCell::peek)) on a state of a few words (Guava's warm-up: two) is
/// optimistic too: it copies the words under the sequence, steps the copy, and
/// publishes a changed copy by claiming the sequence from the value it read, so a
/// refusal costs loads only. On a larger state (a ring), and for every other step
/// ([`cancel`](StateCell::cancel), a reconfiguration), it locks the sequence first
/// and runs on words nobody else writes, like a spin lock: these steps may walk a
/// ring (an exact `retry_after` does), and a walk over words that change under it
/// would have to be proved safe on every possible mix. Steps are short, but a
/// holder that is descheduled makes the others yield until it runs again; a
/// `parking_lot` mutex would park them instead.
///
/// The number of words is fixed when the cell is made: a reconfiguration whose new
/// state has another size fails with [`ConfigError::InvalidCount`](crate::ConfigError::InvalidCount) and changes nothing.
#[derive(Debug)]
// The words every call reads first (sequence and configuration) start a cache line
// of their own.
#[repr(align(64))]
pub struct WordsCell<A: WordEncoded> {
    lock: SequenceLock,
    config: [AtomicU64; MAX_CONFIG_WORDS],
    words: Box<[AtomicU64]>,
    _algorithm: std::marker::PhantomData<A>,
}

/// The cell's words seen through [`Words`]: relaxed loads and stores, ordered by the
/// sequence lock's fences. Written only while the sequence is claimed.
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

/// The largest state a full step copies and steps optimistically.
const COPIED: usize = 4;

impl<A: WordEncoded> WordsCell<A> {
    /// The configuration as the words now read (consistent under a claim, or once
    /// the sequence is found unchanged).
    #[inline(always)]
    fn configuration(&self) -> A {
        A::from_own_config_words(load_config::<A>(&self.config))
    }

    /// A consistent copy of a small state: the sequence it was read under, the
    /// configuration and the words.
    #[inline(always)]
    fn copy(&self) -> (u64, A, [u64; COPIED]) {
        loop {
            let seen = self.lock.begin();
            let algorithm = self.configuration();
            let shared = Shared(&self.words);
            let words = std::array::from_fn(|index| shared.word(index));
            if self.lock.unchanged_since(seen) {
                return (seen, algorithm, words);
            }
        }
    }
}

impl<A: WordEncoded> StateCell<A> for WordsCell<A> {
    fn new(algorithm: A, now: Nanos) -> Self {
        let words: Box<[AtomicU64]> = (0..algorithm.state_words())
            .map(|_| AtomicU64::new(0))
            .collect();
        algorithm.init_words(&mut Shared(&words), now);
        WordsCell {
            lock: SequenceLock::new(),
            config: config_atomics(&algorithm),
            words,
            _algorithm: std::marker::PhantomData,
        }
    }

    #[inline(always)]
    fn reserve(&self, now: Nanos, cost: u64, max_wait: Nanos) -> (Decision, Receipt) {
        let len = self.words.len();
        if len <= COPIED {
            loop {
                let (seen, algorithm, before) = self.copy();
                let mut after = before;
                let answer = algorithm.reserve_words(&mut after[..len], now, cost, max_wait);
                if after == before {
                    return answer;
                }
                if let Some(mut claim) = self.lock.claim(seen) {
                    claim.wrote();
                    let mut shared = Shared(&self.words);
                    for (index, word) in after[..len].iter().enumerate() {
                        shared.set_word(index, *word);
                    }
                    return answer;
                }
            }
        }
        let mut claim = self.lock.lock();
        claim.wrote();
        let algorithm = self.configuration();
        algorithm.reserve_words(&mut Shared(&self.words), now, cost, max_wait)
    }

    #[inline(always)]
    fn try_take(&self, now: Nanos, cost: u64) -> bool {
        loop {
            let seen = self.lock.begin();
            let algorithm = self.configuration();
            let (granted, take) = algorithm.plan_take(&Shared(&self.words), now, cost);
            let Some(take) = take else {
                if self.lock.unchanged_since(seen) {
                    return granted;
                }
                continue;
            };
            // The claim itself fails if anything was written since `seen` was read.
            let Some(mut claim) = self.lock.claim(seen) else {
                continue;
            };
            claim.wrote();
            algorithm.apply_take(&mut Shared(&self.words), take);
            return granted;
        }
    }

    fn peek(&self, now: Nanos, cost: u64) -> Decision {
        let len = self.words.len();
        if len <= COPIED {
            let (_, algorithm, words) = self.copy();
            return algorithm.peek_words(&words[..len], now, cost);
        }
        let _claim = self.lock.lock();
        self.configuration()
            .peek_words(&Shared(&self.words), now, cost)
    }

    fn cancel(&self, now: Nanos, receipt: &Receipt, acts_at: Nanos) {
        let mut claim = self.lock.lock();
        claim.wrote();
        self.configuration()
            .cancel_words(&mut Shared(&self.words), now, receipt, acts_at);
    }

    fn algorithm(&self) -> A {
        let _claim = self.lock.lock();
        self.configuration()
    }

    fn reconfigure(&self, change: &Reconfiguration<'_, A>) -> Result<(), ConfigError> {
        let mut claim = self.lock.lock();
        let mut algorithm = self.configuration();
        let mut state = algorithm.read_state(&Shared(&self.words));
        // A rejected change returns before anything is written.
        change(&mut algorithm, &mut state)?;
        // The new configuration's size must match the cell's: the steps index by it.
        let size = algorithm.state_words();
        if size != self.words.len() {
            return Err(ConfigError::InvalidCount {
                what: "words of state after a reconfiguration",
                value: size as u64,
                requirement: "the cell's size, fixed when it was made",
            });
        }
        claim.wrote();
        algorithm.write_state(&state, &mut Shared(&self.words));
        store_config(&self.config, &algorithm);
        Ok(())
    }
}
