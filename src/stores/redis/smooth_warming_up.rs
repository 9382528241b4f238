//! [`SmoothWarmingUp`] on the server: `lua/smooth_warming_up.lua`.
//!
//! The state is Guava's two numbers, packed: the stored permits (an `f64`) and
//! `nextFreeTicket` in i64 nanoseconds; a step whose integers stay within 2⁵¹ of
//! now works on doubles relative to now, any other on exact limbs. The
//! configuration's six `f64` words travel as bit patterns, and every float formula
//! of the Rust step (resync, the trapezoid integral, the charge) is transcribed
//! operation for operation, so the server computes the same bits.

use super::algorithm::{RedisAlgorithm, ServerStep, EXACT};
use crate::algorithms::smooth_bursty::smooth_limit;
use crate::algorithms::{SmoothWarmingUp, WordEncoded};
use crate::error::Error;

impl RedisAlgorithm for SmoothWarmingUp {}

impl ServerStep for SmoothWarmingUp {
    const NAME: &'static str = "wu";
    const FACTORY: &'static str = "make_smooth_warming_up";
    const CANCEL_RESTORES: bool = true;
    const CANCEL_ON_SERVER: bool = true;

    fn config_args(&self, args: &mut Vec<String>) -> Result<(), Error> {
        let words = self.config_words();
        let limit = if f64::from_bits(words[0]) == 0.0 {
            u64::MAX
        } else {
            smooth_limit(self.max_permits())
        };
        if limit != u64::MAX && limit >= EXACT {
            return Err(Error::InvalidCount {
                what: "max permits",
                value: limit,
                requirement: "below 2^53 for the Redis store (Lua numbers are doubles)",
            });
        }
        for word in words {
            args.push((word >> 32).to_string());
            args.push((word & 0xffff_ffff).to_string());
        }
        args.push(if limit == u64::MAX {
            "-1".to_owned()
        } else {
            limit.to_string()
        });
        Ok(())
    }
}
