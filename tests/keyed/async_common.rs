//! What the async and keyed front-end tests share (`keyed_answers_from_docs`,
//! `async_waits_from_docs`, `async_bad_input_from_docs`,
//! `async_on_the_real_clock_from_docs`, `async_on_redis_from_docs`): a keyed
//! limiter on `&'static str` keys, durations, a runtime on this thread, and a slow
//! paced limit without burst.

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

/// One permit every 5 s, none saved: a turn taken now leaves the next one 5 s
/// away, far more than a loaded machine takes to start the waiters that need it
/// still ahead of them.
pub(crate) fn cadence() -> SmoothBursty {
    SmoothBursty::new(0.2)
        .unwrap()
        .with_max_burst(Duration::ZERO)
        .unwrap()
}
