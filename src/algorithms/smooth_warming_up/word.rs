//! The warming-up bucket's words: its state is two words (the stored permits'
//! bits and `nextFreeTicket`), and its configuration encodes as six.

use super::step::Outcome;
use super::{SmoothWarmingUp, WarmingUpState};
use crate::algorithms::words::{Plan, Words, WordsMut};
use crate::algorithms::{signed, WordEncoded};
use crate::clock::Nanos;

/// Six configuration words and two of state, each a field's exact bits.
impl WordEncoded for SmoothWarmingUp {
    type Config = [u64; 6];
    /// `(now, cost)`: the take's float half runs once the state is claimed.
    type Take = (Nanos, u64);

    #[inline(always)]
    fn config_words(&self) -> [u64; 6] {
        [
            self.stable_micros.to_bits(),
            self.warmup_nanos.to_bits(),
            self.cold_factor.to_bits(),
            self.threshold.to_bits(),
            self.max_permits.to_bits(),
            self.slope.to_bits(),
        ]
    }

    #[inline(always)]
    fn from_config_words(words: [u64; 6]) -> Self {
        SmoothWarmingUp {
            stable_micros: f64::from_bits(words[0]),
            warmup_nanos: f64::from_bits(words[1]),
            cold_factor: f64::from_bits(words[2]),
            threshold: f64::from_bits(words[3]),
            max_permits: f64::from_bits(words[4]),
            slope: f64::from_bits(words[5]),
        }
    }

    #[inline(always)]
    fn state_words(&self) -> usize {
        2
    }

    #[inline(always)]
    fn read_state<W: Words + ?Sized>(&self, words: &W) -> WarmingUpState {
        WarmingUpState {
            stored: f64::from_bits(words.word(0)),
            next_free: words.word(1) as i64,
        }
    }

    #[inline(always)]
    fn write_state<W: WordsMut + ?Sized>(&self, state: &WarmingUpState, words: &mut W) {
        words.set_word(0, state.stored.to_bits());
        words.set_word(1, state.next_free as u64);
    }

    /// Only the integer half of the step: whether the caller may act now depends on
    /// `nextFreeTicket` alone, so the plan reads one word, and the float half
    /// (spending stored permits) runs in [`apply_take`](Self::apply_take), on the
    /// same words, once a cell has claimed them.
    #[inline(always)]
    fn plan_take<W: Words + ?Sized>(&self, words: &W, now: Nanos, cost: u64) -> Plan<(Nanos, u64)> {
        let next_free = words.word(1) as i64;
        let state = WarmingUpState {
            stored: 0.0,
            next_free,
        };
        match Self::admit(&state, signed(now), 0) {
            Ok(_) => (true, Some((now, cost))),
            Err(_) => (false, None),
        }
    }

    #[inline(always)]
    fn apply_take<W: WordsMut + ?Sized>(&self, words: &mut W, (now, cost): (Nanos, u64)) {
        let state = self.read_state(words);
        // Granted by construction (same words, same integer test as the plan).
        if let Outcome::Allowed { next, .. } = self.step(&state, signed(now), cost, 0) {
            self.write_state(&next, words);
        }
    }
}
