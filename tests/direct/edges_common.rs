//! What the documented-edge tests of the in-memory limiters share
//! (`time_edges_from_docs`, `reservation_edges_from_docs`, `cost_edges_from_docs`,
//! `set_edges_from_docs`): a second and a millisecond in nanoseconds, and a never
//! decision's `retry_after`.

use sluicegate::clock::Nanos;
use std::time::Duration;

pub(crate) const SECOND: Nanos = 1_000_000_000;
pub(crate) const MS: Nanos = 1_000_000;

/// `Duration` of `u64::MAX` ns: a never decision's `retry_after`.
pub(crate) const FOREVER: Duration = Duration::from_nanos(u64::MAX);
