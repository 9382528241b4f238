//! The keyed limiter and its in-memory store: per-key decisions, every algorithm
//! and set keyed, keyed reservations, the store's forgetting and cap, hostile
//! keys, keys looked up by their borrowed form, the source of a multi-key grant,
//! and the store wrappers (deny cache, leases, failover) tested from their docs, and
//! the async front end, multi-key calls and sets tested from their docs in memory
//! and on Redis; waiting (order of waiters, refused timed tries, idle bursts,
//! impossible costs, what cancels and dropped waits give back) on virtual time and
//! on the real clock; hostile input to every call and to the store's builders
//! (`hostile_input_from_docs`).

mod support;

#[path = "keyed/async_bad_input_from_docs.rs"]
mod async_bad_input_from_docs;
#[path = "keyed/async_common.rs"]
mod async_common;
#[path = "keyed/async_on_redis_from_docs.rs"]
mod async_on_redis_from_docs;
#[path = "keyed/async_on_the_real_clock_from_docs.rs"]
mod async_on_the_real_clock_from_docs;
#[path = "keyed/async_waits_from_docs.rs"]
mod async_waits_from_docs;
#[path = "keyed/borrowed_keys.rs"]
mod borrowed_keys;
#[path = "keyed/deny_cache_from_docs.rs"]
mod deny_cache_from_docs;
#[path = "keyed/every_algorithm.rs"]
mod every_algorithm;
#[path = "keyed/failover_from_docs.rs"]
mod failover_from_docs;
#[path = "keyed/from_the_readme.rs"]
mod from_the_readme;
#[path = "keyed/hostile_input_from_docs.rs"]
mod hostile_input_from_docs;
#[path = "keyed/hostile_keys.rs"]
mod hostile_keys;
#[path = "keyed/keyed_answers_from_docs.rs"]
mod keyed_answers_from_docs;
#[path = "keyed/leases_from_docs.rs"]
mod leases_from_docs;
#[path = "keyed/limiter.rs"]
mod limiter;
#[path = "keyed/memory_store_from_docs.rs"]
mod memory_store_from_docs;
#[path = "keyed/multi_key_sources.rs"]
mod multi_key_sources;
#[path = "keyed/probe_store.rs"]
mod probe_store;
#[path = "keyed/repeated_keys.rs"]
mod repeated_keys;
#[path = "keyed/reservations.rs"]
mod reservations;
#[path = "keyed/store.rs"]
mod store;
#[path = "keyed/waiting_from_docs.rs"]
mod waiting_from_docs;
#[path = "keyed/waiting_on_the_real_clock_from_docs.rs"]
mod waiting_on_the_real_clock_from_docs;
#[path = "keyed/wrappers_on_the_real_clock_from_docs.rs"]
mod wrappers_on_the_real_clock_from_docs;
