//! [`FixedWindow`] on the server: `lua/fixed_window.lua`.
//!
//! The state is the window index and its count, two packed doubles; the window
//! length and `now` are whole microseconds, so the index, the window's start and
//! every duration are integers below 2⁵³ and the step's doubles compute them
//! exactly.

use super::algorithm::{exact_count, whole_micros, RedisAlgorithm, ServerStep};
use crate::algorithms::FixedWindow;
use crate::error::Error;

impl RedisAlgorithm for FixedWindow {}

impl ServerStep for FixedWindow {
    const NAME: &'static str = "fw";
    const FACTORY: &'static str = "make_fixed_window";
    const CANCEL_ON_SERVER: bool = true;

    fn config_args(&self, args: &mut Vec<String>) -> Result<(), Error> {
        let len = whole_micros("window", self.window().as_nanos() as u64)?;
        let limit = exact_count("limit", self.limit())?;
        args.push(len.to_string());
        args.push(limit.to_string());
        Ok(())
    }
}
