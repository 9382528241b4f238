//! A lock-free cell for a state of one word.

use super::{config_atomics, load_config, store_config, Reconfiguration, SequenceLock, StateCell};
use crate::algorithms::words::Words;
use crate::algorithms::words::MAX_CONFIG_WORDS;
use crate::algorithms::{Decision, Receipt, WordEncoded};
use crate::clock::Nanos;
use crate::error::ConfigError;
use std::sync::atomic::{AtomicU64, Ordering};

/// A lock-free cell for a [`OneWord`](crate::algorithms::OneWord) algorithm: the
/// state is one `AtomicU64` updated by compare-and-swap, the configuration a few
/// more words under a [`SequenceLock`].
///
/// A step reads the configuration (checking the sequence has not moved), loads the
/// state word, runs the pure algorithm step on a copy, and publishes the new word
/// with one compare-and-swap, retrying from a fresh read if another thread got there
/// first. A step that leaves the word unchanged (a refusal, as a rule) writes
/// nothing. Reconfiguration (a rate change) is rare: it locks the sequence (readers
/// wait), rewrites the state word by compare-and-swap, stores the new configuration
/// and releases. A step whose swap lands before the rewrite is ordered before the
/// change; one that would land after fails its swap and retries under the new
/// configuration.
#[derive(Debug)]
pub struct WordCell<A: WordEncoded> {
    /// Written on every grant: alone in its cache line, so that threads contending
    /// on it do not also evict the read-mostly words below (nor the clock's
    /// calibration next to the cell), which every call reads.
    state: OwnLine<AtomicU64>,
    lock: SequenceLock,
    config: [AtomicU64; MAX_CONFIG_WORDS],
    _algorithm: std::marker::PhantomData<A>,
}

/// A value alone in a 64-byte cache line.
#[derive(Debug)]
#[repr(align(64))]
struct OwnLine<T>(T);

impl<A: WordEncoded> WordCell<A> {
    /// Reads a consistent configuration and the state word that goes with it.
    #[inline(always)]
    fn snapshot(&self) -> (A, u64) {
        loop {
            let seen = self.lock.begin();
            let config = load_config::<A>(&self.config);
            let word = self.state.0.load(Ordering::Acquire);
            if self.lock.unchanged_since(seen) {
                return (A::from_own_config_words(config), word);
            }
        }
    }

    /// Replaces the state word `seen` with `new`, unless another thread changed it
    /// meanwhile: whether the state is now `new` (an unchanged word writes nothing).
    #[inline(always)]
    fn publish(&self, seen: u64, new: u64) -> bool {
        new == seen
            || self
                .state
                .0
                .compare_exchange_weak(seen, new, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    /// Applies `step` to a copy of the state word until its result is published.
    /// `step` returns its answer and whether to write the new word.
    ///
    /// A failed compare-and-swap retries from a fresh snapshot. (Retrying on the word
    /// the swap hands back, after a sequence check, as governor does, measured no
    /// better with two threads and half a nanosecond slower with one.)
    #[inline(always)]
    fn update<R>(&self, mut step: impl FnMut(&A, &mut [u64; 1]) -> (R, bool)) -> R {
        loop {
            let (algorithm, word) = self.snapshot();
            let mut words = [word];
            let (answer, write) = step(&algorithm, &mut words);
            if !write || self.publish(word, words[0]) {
                return answer;
            }
        }
    }
}

impl<A: WordEncoded> StateCell<A> for WordCell<A> {
    fn new(algorithm: A, now: Nanos) -> Self {
        let mut words = [0];
        algorithm.init_words(&mut words[..], now);
        WordCell {
            state: OwnLine(AtomicU64::new(words[0])),
            lock: SequenceLock::new(),
            config: config_atomics(&algorithm),
            _algorithm: std::marker::PhantomData,
        }
    }

    #[inline(always)]
    fn reserve(&self, now: Nanos, cost: u64, max_wait: Nanos) -> (Decision, Receipt) {
        // Publish whatever the step left: only allowed steps change the state,
        // except under an algorithm configured to record refused attempts. A step
        // that changed nothing writes nothing.
        self.update(|algorithm, words| {
            let answer = algorithm.reserve_words(&mut words[..], now, cost, max_wait);
            (answer, true)
        })
    }

    #[inline(always)]
    fn try_take(&self, now: Nanos, cost: u64) -> bool {
        // `update`'s loop written out: through a closure, the compiler leaves a
        // large plan (the leaky bucket's step, compiled for two kinds of tick) out
        // of line.
        loop {
            let (algorithm, word) = self.snapshot();
            let mut words = [word];
            let (granted, take) = algorithm.plan_take(&words[..], now, cost);
            let Some(take) = take else {
                return granted;
            };
            algorithm.apply_take(&mut words[..], take);
            if self.publish(word, words[0]) {
                return granted;
            }
        }
    }

    /// Publishes what the algorithm's `check_words`
    /// settled, and lets it describe the decision after the compare-and-swap.
    #[inline(always)]
    fn check(&self, now: Nanos, cost: u64) -> Decision {
        loop {
            let (algorithm, word) = self.snapshot();
            let mut words = [word];
            let publish = |words: &[u64]| self.publish(word, words.word(0));
            if let Some(decision) = algorithm.check_words(&mut words[..], now, cost, publish) {
                return decision;
            }
        }
    }

    #[inline]
    fn peek(&self, now: Nanos, cost: u64) -> Decision {
        let (algorithm, word) = self.snapshot();
        algorithm.peek_words(&[word][..], now, cost)
    }

    fn cancel(&self, now: Nanos, receipt: &Receipt, acts_at: Nanos) {
        self.update(|algorithm, words| {
            algorithm.cancel_words(&mut words[..], now, receipt, acts_at);
            ((), true)
        });
    }

    fn algorithm(&self) -> A {
        self.snapshot().0
    }

    fn reconfigure(&self, change: &Reconfiguration<'_, A>) -> Result<(), ConfigError> {
        let mut claim = self.lock.lock();
        let current = A::from_own_config_words(load_config::<A>(&self.config));
        // Validate on a copy first: a rejected change touches nothing (and the claim
        // is released as unwritten).
        {
            let mut probe = current;
            let mut state = current.read_state(&[self.state.0.load(Ordering::Acquire)][..]);
            change(&mut probe, &mut state)?;
        }
        claim.wrote();
        let mut word = self.state.0.load(Ordering::Acquire);
        let new_config = loop {
            let mut algorithm = current;
            let mut state = current.read_state(&[word][..]);
            // Validated above, and a change is a pure function of its inputs, so this
            // succeeds too; should it not, the state is left as it was.
            if change(&mut algorithm, &mut state).is_err() {
                break current;
            }
            let mut words = [0];
            algorithm.write_state(&state, &mut words[..]);
            match self.state.0.compare_exchange_weak(
                word,
                words[0],
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break algorithm,
                Err(actual) => word = actual,
            }
        };
        store_config(&self.config, &new_config);
        Ok(())
    }
}
