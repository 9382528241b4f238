//! [`LeakyBucket`] on the server: `lua/leaky_bucket.lua`.
//!
//! The Rust bucket counts *ticks* (a tick is the interval split into `K = ⌈interval⌉`
//! parts, just under a nanosecond when the interval is fractional) in a `u64`
//! since its clock's origin, and reads `now` with a 128-bit product and quotient. The
//! server's `TIME` since 1970 is about 1.7 × 10¹⁸ ns, far beyond a double's 2⁵³, so
//! the theoretical arrival time is kept as a packed `u64` and handled as two 32-bit
//! halves. A step whose state is at most a span (`capacity × K` ticks, required
//! below 2⁵¹, about 26 days of burst) ahead of now, and whose reading of `now` fits
//! the same bound, works on plain doubles relative to the reading; any other
//! transcribes each step of the Rust code (`read`, `until`, the reserve) on the exact
//! limb arrays of `lua/exact.lua`. Both give the Rust step's integers.

use super::algorithm::{exact_count, RedisAlgorithm, ServerStep, EXACT};
use crate::algorithms::{LeakyBucket, LeakyMode};
use crate::error::Error;

/// A `u64` as three base-2²⁴ limbs, least significant first.
fn limbs(value: u64, args: &mut Vec<String>) {
    for shift in [0, 24, 48] {
        args.push(((value >> shift) & 0xff_ffff).to_string());
    }
}

impl RedisAlgorithm for LeakyBucket {}

impl ServerStep for LeakyBucket {
    const NAME: &'static str = "lb";
    const FACTORY: &'static str = "make_leaky_bucket";
    const CANCEL_RESTORES: bool = true;
    const CANCEL_ON_SERVER: bool = true;

    fn config_args(&self, args: &mut Vec<String>) -> Result<(), Error> {
        // The tick arithmetic of the Rust bucket (`Ticks`), from its public reduced
        // interval `period / count`.
        let (period, count) = self.interval();
        let per_permit = period.div_ceil(count);
        let (num, den) = if count == 1 {
            (1, 1)
        } else {
            (count * per_permit, period)
        };
        let span = per_permit
            .checked_mul(self.capacity())
            .filter(|&span| span < EXACT);
        if span.is_none() {
            return Err(Error::InvalidCount {
                what: "capacity",
                value: self.capacity(),
                requirement: "small enough that capacity x interval is below 2^53 ns (about 104 \
                              days of burst) for the Redis store",
            });
        }
        args.push(exact_count("ticks per permit", per_permit)?.to_string());
        args.push(self.capacity().to_string());
        args.push((num - den).to_string());
        limbs(num, args);
        limbs(den, args);
        args.push(u8::from(self.mode() == LeakyMode::Queue).to_string());
        Ok(())
    }
}
