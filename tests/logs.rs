//! The sliding log and the bucketed sliding window: their seeds' worked examples,
//! and random traces checked against a brute-force oracle.

#[path = "logs/properties.rs"]
mod properties;
#[path = "logs/sliding_log.rs"]
mod sliding_log;
#[path = "logs/sliding_window_buckets.rs"]
mod sliding_window_buckets;
