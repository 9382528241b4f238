//! A set's step allocates nothing: counted by a global allocator that tallies the
//! allocations of the current thread only (so the test harness's own threads do
//! not interfere).

use sluicegate::algorithms::{Algorithm, AllOf, Decision, Limits, SmoothBursty, SmoothWarmingUp};
use sluicegate::clock::ManualClock;
use sluicegate::RateLimiter;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// The forbid(unsafe_code) of the crate does not reach its tests; a global allocator
// cannot be written without `unsafe impl`.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract for `alloc` is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc` is `System.dealloc`'s.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

fn members() -> (SmoothBursty, SmoothBursty, SmoothWarmingUp) {
    (
        SmoothBursty::new(10.0).unwrap(),
        SmoothBursty::new(2.0).unwrap(),
        SmoothWarmingUp::new(5.0, Duration::from_secs(1)).unwrap(),
    )
}

#[test]
fn the_hot_path_does_not_allocate() {
    // The counter sees allocations at all.
    assert!(allocations_during(|| drop(std::hint::black_box(Vec::<u8>::with_capacity(8)))) >= 1);

    let (a, b, c) = members();
    let limits = Limits::new().with(a).with(b).with(c);
    let set = AllOf::new((a, b, c));
    let mut dyn_state = limits.initial_state(0);
    let mut state = set.initial_state(0);
    let (mut allowed, mut refused) = (0, 0);
    let n = allocations_during(|| {
        for step in 0..2_000u64 {
            let now = step * 50_000_000;
            for _ in 0..3 {
                let d = limits.reserve::<Decision>(&mut dyn_state, now, 1, 0);
                let s = set.reserve::<Decision>(&mut state, now, 1, 0);
                assert_eq!(d, s);
                if d.is_allowed() {
                    allowed += 1;
                } else {
                    refused += 1;
                }
                let _ = limits.peek(&dyn_state, now, 1);
                let _ = set.peek(&state, now, 1);
            }
        }
    });
    assert_eq!(n, 0);
    assert!(allowed > 100 && refused > 100);

    // The same through the limiter's try_acquire.
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(limits, clock.clone());
    let n = allocations_during(|| {
        for _ in 0..1_000 {
            let _ = limiter.try_acquire();
            clock.advance_nanos(10_000_000);
        }
    });
    assert_eq!(n, 0);
}

#[test]
fn a_set_holding_sets_does_not_allocate_when_the_caller_keeps_no_receipt() {
    let (a, b, c) = members();
    // A nested AllOf of plain states (reserved in pass 1) and a nested Limits.
    let limits = Limits::new()
        .with(AllOf::new((a, b)))
        .with(Limits::new().with(c).with(a));
    let flat = AllOf::new((a, b, c));
    let mut state = limits.initial_state(0);
    let mut flat_state = flat.initial_state(0);
    let (mut allowed, mut refused) = (0, 0);
    let n = allocations_during(|| {
        for step in 0..2_000u64 {
            let now = step * 50_000_000;
            for _ in 0..3 {
                let d = limits.reserve::<Decision>(&mut state, now, 1, 0);
                let f = flat.reserve::<Decision>(&mut flat_state, now, 1, 0);
                assert_eq!(d.is_allowed(), f.is_allowed());
                if d.is_allowed() {
                    allowed += 1;
                } else {
                    refused += 1;
                }
            }
        }
    });
    assert_eq!(n, 0);
    assert!(allowed > 100 && refused > 100);

    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(limits.clone(), clock.clone());
    let n = allocations_during(|| {
        for _ in 0..1_000 {
            let _ = limiter.try_acquire();
            clock.advance_nanos(10_000_000);
        }
    });
    assert_eq!(n, 0);

    // A reservation keeps its receipt: the nested sets' receipts are built then.
    let mut state = limits.initial_state(0);
    let n = allocations_during(|| {
        let (grant, receipt) =
            limits.reserve::<(Decision, sluicegate::algorithms::Receipt)>(&mut state, 0, 1, 0);
        assert!(grant.is_allowed());
        drop(receipt);
    });
    assert!(n >= 1);
}
