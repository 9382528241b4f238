//! What the server-layer tests over a Redis server share: store options at the
//! caller's time with short timeouts, and a window of a minute.
#![cfg(all(feature = "redis", feature = "tower"))]

use crate::support::redis::trace::caller_time_options;
use crate::support::redis::unique_prefix;
use sluicegate::algorithms::FixedWindow;
use sluicegate::stores::redis::RedisOptions;
use std::time::Duration;

/// The connect and response timeouts the stores here are given.
pub(crate) const TIMEOUT: Duration = Duration::from_millis(300);

pub(crate) fn options(test: &str) -> RedisOptions {
    caller_time_options(&unique_prefix(test))
        .connect_timeout(TIMEOUT)
        .response_timeout(TIMEOUT)
}

pub(crate) fn minute(limit: u64) -> FixedWindow {
    FixedWindow::new(limit, Duration::from_secs(60)).unwrap()
}
