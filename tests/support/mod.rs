//! Helpers shared by the integration-test crates. Each crate declares `mod support;`
//! once, at its root; a test module imports the part it needs, e.g.
//! `use crate::support::virtual_time;`. Every part allows dead code, since no crate
//! uses all of it.
//!
//! A proptest regression file sits beside its test module
//! (`tests/<crate>/<module>.proptest-regressions`), where proptest looks for it.

pub mod adapters;
pub mod gate_clock;
pub mod nested_sets;
#[cfg(feature = "redis")]
pub mod redis;
pub mod reservation_trace;
pub mod rng;
pub mod timed_clock;
pub mod virtual_time;
pub mod waiting;
