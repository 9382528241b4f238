//! The window counters: the fixed window and the sliding window counter, their
//! seeds' worked examples, and the bounds all window-like algorithms keep on random
//! traces (the leaky bucket's included); `seeds_worked_examples` replays the seeds'
//! examples the others do not (Guava's warm-up, the leaky bucket and the logs among them)
//! on the limiter front ends.

#[path = "windows/fixed_window.rs"]
mod fixed_window;
#[path = "windows/properties.rs"]
mod properties;
#[path = "windows/seeds_worked_examples.rs"]
mod seeds_worked_examples;
#[path = "windows/sliding_window_counter.rs"]
mod sliding_window_counter;
