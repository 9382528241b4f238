//! [`SmoothBursty`] on the server: `lua/smooth_bursty.lua`.
//!
//! The state is Guava's folded instant `T` in i64 nanoseconds, a packed `u64`
//! (offset by 2⁶³); a step within 2⁵¹ ns of now works on doubles relative to now,
//! any other on exact limbs. The charge of a cost (`cost as f64 × interval`,
//! truncated) and the stored permits (`(now − T) / interval`) are computed on the
//! very same doubles as in Rust (the interval, max permits and burst are derived
//! here and sent in shortest round-trip decimal), so IEEE arithmetic gives the same
//! bits on both sides.

use super::algorithm::{RedisAlgorithm, ServerStep, EXACT};
use crate::algorithms::smooth_bursty::smooth_limit;
use crate::algorithms::{SmoothBursty, WordEncoded};
use crate::error::Error;
use std::time::Duration;

impl RedisAlgorithm for SmoothBursty {}

impl ServerStep for SmoothBursty {
    const NAME: &'static str = "sb";
    const FACTORY: &'static str = "make_smooth_bursty";
    const CANCEL_RESTORES: bool = true;
    const CANCEL_ON_SERVER: bool = true;

    fn config_args(&self, args: &mut Vec<String>) -> Result<(), Error> {
        // The configuration as the Rust step uses it: Guava's stable interval in µs
        // and the burst in seconds, both f64.
        let words = self.config_words();
        let [stable_micros, burst_seconds] = [words[0], words[1]].map(f64::from_bits);
        let unlimited = stable_micros == 0.0;
        let interval = stable_micros * 1000.0;
        let burst = if unlimited {
            0
        } else {
            (burst_seconds * 1e9) as i64
        };
        let max_permits = self.max_permits();
        if burst as u64 >= EXACT || (!unlimited && max_permits >= EXACT as f64) {
            return Err(Error::InvalidDuration {
                what: "max_burst",
                value: Duration::from_secs_f64(burst_seconds.min(1e12)),
                requirement: "below 2^53 ns (104 days) and 2^53 permits for the Redis store",
            });
        }
        let limit = smooth_limit(max_permits);
        args.push(format!("{interval:e}"));
        args.push(burst.to_string());
        args.push(if unlimited {
            "0".to_owned()
        } else {
            format!("{max_permits:e}")
        });
        args.push(if limit == u64::MAX {
            "-1".to_owned()
        } else {
            limit.to_string()
        });
        args.push(u8::from(unlimited).to_string());
        Ok(())
    }
}
