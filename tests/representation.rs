//! The algorithms' shortcuts, seen through the public API: each lean path and each
//! receipt-taking step, checked against the full step or a plain model, so that they
//! never decide differently; the cancel rule at the grant's own instant; timed tries
//! measured against the caller's deadline, and a leaky bucket's capacity.

#[path = "representation/cancel_at_once.rs"]
mod cancel_at_once;
#[path = "representation/sliding_window_word.rs"]
mod sliding_window_word;
#[path = "representation/timed_try_cancel_capacity.rs"]
mod timed_try_cancel_capacity;
