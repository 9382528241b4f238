//! What the async and keyed front-end tests share (`keyed_answers_from_docs`,
//! `async_waits_from_docs`, `async_bad_input_from_docs`,
//! `async_on_the_real_clock_from_docs`, `async_on_redis_from_docs`): a keyed
//! limiter on `&'static str` keys, durations, a runtime on this thread, and a paced
//! limit without burst.

use sluicegate::algorithms::SmoothBursty;
use sluicegate::KeyedRateLimiter;
use std::time::Duration;

pub(crate) type Keyed<A, S, C> = KeyedRateLimiter<&'static str, A, S, C>;

pub(crate) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(crate) fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A tokio runtime on this thread with time and I/O.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

pub(crate) fn cadence() -> SmoothBursty {
    SmoothBursty::new(2.0)
        .unwrap()
        .with_max_burst(Duration::ZERO)
        .unwrap()
}
