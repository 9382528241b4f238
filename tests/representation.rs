//! The algorithms' internal representations and shortcuts: each state packed in
//! words, each lean or lock-free path, and each receipt-taking step, checked against
//! the full step or a plain model, so that they never decide differently; the edges
//! of configuration words; the cancel rule at the grant's own instant; timed tries
//! measured against the caller's deadline, and a leaky bucket's capacity.

#[path = "representation/cancel_at_once.rs"]
mod cancel_at_once;
#[path = "representation/config_words.rs"]
mod config_words;
#[path = "representation/sliding_window_word.rs"]
mod sliding_window_word;
#[path = "representation/timed_try_cancel_capacity.rs"]
mod timed_try_cancel_capacity;
#[path = "representation/try_take_is_reserve.rs"]
mod try_take_is_reserve;
