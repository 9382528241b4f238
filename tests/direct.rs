//! The direct limiter (`RateLimiter`): Guava's vectors and properties for the two
//! Guava limiters, timed tries and rate changes, reservations and their cancel,
//! async acquires, thread safety, bad input, one smoke test on the real clock, and
//! the documented edges of every algorithm and front end (`*_edges_from_docs`:
//! parameters, zero, huge and never costs, the clock's ends, reservations, sets;
//! `many_callers_from_docs`: many callers at once), and each algorithm's decision
//! fields, pace and standing at the exact instants its docs name
//! (`algorithm_edges_from_docs`, `algorithm_edges_from_docs_sets`), and
//! every constructor and call fed hostile input as its docs describe the answer
//! (`hostile_constructors_from_docs`, `hostile_calls_from_docs`).

mod support;

#[path = "direct/algorithm_edges_from_docs.rs"]
mod algorithm_edges_from_docs;
#[path = "direct/algorithm_edges_from_docs_sets.rs"]
mod algorithm_edges_from_docs_sets;
#[path = "direct/async_acquire.rs"]
mod async_acquire;
#[path = "direct/bad_input.rs"]
mod bad_input;
#[path = "direct/cost_edges_from_docs.rs"]
mod cost_edges_from_docs;
#[path = "direct/edges_common.rs"]
mod edges_common;
#[path = "direct/guava_bound.rs"]
mod guava_bound;
#[path = "direct/guava_bursty.rs"]
mod guava_bursty;
#[path = "direct/guava_calls.rs"]
mod guava_calls;
#[path = "direct/guava_edges.rs"]
mod guava_edges;
#[path = "direct/guava_reference.rs"]
mod guava_reference;
#[path = "direct/guava_warming_up.rs"]
mod guava_warming_up;
#[path = "direct/hostile_calls_from_docs.rs"]
mod hostile_calls_from_docs;
#[path = "direct/hostile_constructors_from_docs.rs"]
mod hostile_constructors_from_docs;
#[path = "direct/many_callers_from_docs.rs"]
mod many_callers_from_docs;
#[path = "direct/parameter_edges_from_docs.rs"]
mod parameter_edges_from_docs;
#[path = "direct/real_clock_smoke.rs"]
mod real_clock_smoke;
#[path = "direct/reservation_edges_from_docs.rs"]
mod reservation_edges_from_docs;
#[path = "direct/reservations.rs"]
mod reservations;
#[path = "direct/set_edges_from_docs.rs"]
mod set_edges_from_docs;
#[path = "direct/thread_safety.rs"]
mod thread_safety;
#[path = "direct/time_edges_from_docs.rs"]
mod time_edges_from_docs;
