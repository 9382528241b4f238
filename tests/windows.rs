//! The window counters: the fixed window and the sliding window counter, their
//! seeds' worked examples, and the bounds all window-like algorithms keep on random
//! traces (the leaky bucket's included).

#[path = "windows/fixed_window.rs"]
mod fixed_window;
#[path = "windows/properties.rs"]
mod properties;
#[path = "windows/sliding_window_counter.rs"]
mod sliding_window_counter;
