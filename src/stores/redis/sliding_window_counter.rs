//! [`SlidingWindowCounter`] on the server: `lua/sliding_window_counter.lua`.
//!
//! The state is the window index and the two counts, three packed doubles. Window
//! indexes and positions are whole microseconds (below 2⁵³); the weighted
//! previous count, the first instant a call fits and every returned duration are
//! computed exactly: on doubles while `(limit + 2) × window` stays below 2⁵² ns,
//! with limb arrays otherwise (a floor-rounded `retry_after` is not always a whole
//! microsecond). The step keeps the window index modulo the same power of two as
//! the Rust state word, so that even an idle state whose index wrapped decides the
//! same as in memory.

use super::algorithm::{whole_micros, RedisAlgorithm, ServerStep};
use crate::algorithms::{SlidingWindowCounter, WordEncoded};
use crate::error::Error;

/// Bits needed to write `value` (as the Rust state word counts them).
fn bits(value: u64) -> u32 {
    u64::BITS - value.leading_zeros()
}

impl RedisAlgorithm for SlidingWindowCounter {}

impl ServerStep for SlidingWindowCounter {
    const NAME: &'static str = "swc";
    const FACTORY: &'static str = "make_sliding_window_counter";
    const CANCEL_ON_SERVER: bool = true;

    fn config_args(&self, args: &mut Vec<String>) -> Result<(), Error> {
        let len_ns = self.window().as_nanos() as u64;
        // Windows below 2⁵² µs, so that a window end plus a whole window stays exact.
        let len = whole_micros("window", len_ns).and_then(|len| {
            if len < 1 << 52 {
                Ok(len)
            } else {
                whole_micros("window", u64::MAX)
            }
        })?;
        // The options, as the configuration words carry them (bit 32: floor
        // rounding, bit 33: counting attempts).
        let options = self.config_words()[1];
        let floor = options >> 32 & 1;
        let attempts = options >> 33 & 1;
        let count_bits = if attempts == 1 {
            (bits(self.limit()) + 8).min(24)
        } else {
            bits(self.limit())
        };
        let index_bits = u64::BITS - 2 * count_bits;
        let exact_index = len_ns > u64::MAX >> index_bits;
        for word in [
            len,
            self.limit(),
            floor,
            attempts,
            u64::from(count_bits),
            u64::from(exact_index),
        ] {
            args.push(word.to_string());
        }
        Ok(())
    }
}
