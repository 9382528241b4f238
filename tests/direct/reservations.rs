//! Reservations and their cancellation, with Go `x/time/rate`'s `Reservation.Cancel`
//! rule: a reservation cancelled no later than its time to act gives its permits
//! back as far as later reservations allow; after its time to act, nothing.

use crate::support::virtual_time;
use virtual_time::{assert_acquires_slept, bursty};

use sluicegate::algorithms::{SmoothBursty, SmoothWarmingUp};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::CellAlgorithm;
use sluicegate::{RateLimiter, Reservation};
use std::time::Duration;

/// The start of Go's cancel tests: 10 permits a second, the first 2 taken at once,
/// so the next permit is free at 200 ms.
fn two_taken() -> (RateLimiter<SmoothBursty, ManualClock>, ManualClock) {
    let (limiter, clock) = bursty(10.0);
    limiter.acquire_n(2).unwrap();
    (limiter, clock)
}

/// A warming-up limiter of 2 permits a second on a manual clock.
fn warming_up(warmup: Duration) -> (RateLimiter<SmoothWarmingUp, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let limiter = RateLimiter::warming_up_with_clock(2.0, warmup, clock.clone()).unwrap();
    (limiter, clock)
}

/// Reserves `permits`, asserting the reservation is told to wait `delay`.
#[track_caller]
fn reserve_waiting<A: CellAlgorithm>(
    limiter: &RateLimiter<A, ManualClock>,
    permits: u64,
    delay: Duration,
) -> Reservation<A, ManualClock> {
    let r = limiter.reserve(permits).unwrap();
    assert_eq!(r.delay(), delay);
    r
}

/// The step of Go's cancel tests: once `after` has passed, `r` is cancelled, and a
/// reservation of `permits` made then must wait `delay`, which shows what the cancel
/// gave back.
#[track_caller]
fn cancel_after<A: CellAlgorithm>(
    limiter: &RateLimiter<A, ManualClock>,
    r: Reservation<A, ManualClock>,
    after: Duration,
    permits: u64,
    delay: Duration,
) {
    limiter.clock().advance(after);
    r.cancel();
    reserve_waiting(limiter, permits, delay);
}

/// Cancels `r`, then asserts its one permit is the one left: a grant, then a refusal.
#[track_caller]
fn cancel_gives_back_the_one_permit<A: CellAlgorithm>(
    limiter: &RateLimiter<A, ManualClock>,
    r: Reservation<A, ManualClock>,
) {
    r.cancel();
    assert!(limiter.try_acquire());
    assert!(!limiter.try_acquire());
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn reserve_reports_when_to_act_and_takes_the_permits() {
    let (limiter, clock) = bursty(10.0);
    let first = limiter.reserve(2).unwrap();
    assert!(first.is_ok());
    assert_eq!(first.delay(), Duration::ZERO);
    assert_eq!(first.acts_at(), 0);
    let second = limiter.reserve(1).unwrap();
    assert_eq!(second.delay(), ms(200)); // pays for the first's 2 permits
    assert_eq!(second.acts_at(), 200_000_000);
    clock.advance(ms(50));
    assert_eq!(second.delay(), ms(150)); // relative to now
    assert_eq!(second.wait(), ms(150));
    assert_eq!(clock.now(), 200_000_000);
    reserve_waiting(&limiter, 1, ms(100));
}

#[test]
fn reserving_never_sleeps() {
    let (limiter, clock) = bursty(1.0);
    for _ in 0..5 {
        let _ = limiter.reserve(1).unwrap();
    }
    assert!(clock.sleeps().is_empty());
    assert_eq!(clock.now(), 0);
}

#[test]
fn dropping_a_reservation_keeps_the_permits_taken() {
    let (limiter, _clock) = bursty(1.0);
    drop(limiter.reserve(1).unwrap());
    assert!(!limiter.try_acquire());
}

#[test]
fn cancel_the_last_reservation_restores_it_all() {
    // Go's TestCancelLast, in pay-later form.
    let (limiter, _clock) = two_taken();
    let r = reserve_waiting(&limiter, 2, ms(200));
    // As if `r` never happened: the next caller waits for the first 2 permits only.
    cancel_after(&limiter, r, ms(100), 2, ms(100));
}

#[test]
fn cancel_an_immediate_reservation_at_once() {
    // Its time to act is now, which has not passed yet: Go restores it.
    let (limiter, _clock) = bursty(1.0);
    let r = reserve_waiting(&limiter, 1, Duration::ZERO);
    cancel_gives_back_the_one_permit(&limiter, r);
}

#[test]
fn cancel_too_late_restores_nothing() {
    // Go's TestCancelTooLate.
    let (limiter, _clock) = two_taken();
    let r = limiter.reserve(2).unwrap();
    // 300 ms is past its time to act (200 ms).
    cancel_after(&limiter, r, ms(300), 2, ms(100));
}

#[test]
fn cancel_behind_later_reservations_restores_nothing() {
    // Go's TestCancel0Tokens: what was reserved after it stays reserved.
    let (limiter, clock) = two_taken();
    let r = limiter.reserve(1).unwrap(); // acts at 200 ms, pays 100 ms on
    let _later = reserve_waiting(&limiter, 1, ms(300)); // acts at 300 ms
    r.cancel();
    reserve_waiting(&limiter, 1, ms(400));
    assert_eq!(clock.now(), 0);
}

#[test]
fn cancel_restores_what_later_reservations_allow() {
    // Go's TestCancel1Token: reservations of 2 then 1; cancelling the 2 at exactly
    // its time to act gives back 2 - 1 = 1 permit.
    let (limiter, _clock) = two_taken(); // next free at 200 ms
    let r = limiter.reserve(2).unwrap(); // acts at 200 ms, next free at 400 ms
    let later = limiter.reserve(1).unwrap(); // acts at 400 ms, next free at 500 ms
    assert_eq!(r.delay(), ms(200));
    assert_eq!(later.delay(), ms(400));
    // Next free moved back from 500 ms to 400 ms.
    cancel_after(&limiter, r, ms(200), 2, ms(200));
}

#[test]
fn cancel_of_a_big_pay_later_grant_restores_the_state_before_it() {
    let (limiter, clock) = bursty(10.0);
    clock.advance(Duration::from_secs(5)); // a full 1 s burst is stored
    limiter.acquire_n(10).unwrap(); // spends the burst
    let r = reserve_waiting(&limiter, 30, Duration::ZERO); // pay-later: acts now, next free in 3 s
    r.cancel();
    // Back to just after the burst was spent: one pay-later grant, then refused.
    let granted = (0..100).take_while(|_| limiter.try_acquire()).count();
    assert_eq!(granted, 1);
}

#[test]
fn cancelling_a_refused_reservation_does_nothing() {
    let (limiter, _clock) = bursty(f64::MIN_POSITIVE);
    assert!(limiter.try_acquire());
    let r = limiter.reserve(1).unwrap();
    assert!(!r.is_ok());
    assert!(r.decision().is_never());
    assert_eq!(r.wait(), Duration::ZERO);
    assert!(!limiter.try_acquire());
}

#[test]
fn cancel_on_an_unlimited_limiter_is_harmless() {
    let (limiter, _clock) = bursty(f64::INFINITY);
    let r = reserve_waiting(&limiter, 1_000, Duration::ZERO);
    r.cancel();
    assert!(limiter.try_acquire_n(u64::MAX).unwrap());
}

#[test]
fn warming_up_cancel_of_the_last_reservation_restores_its_time() {
    let (limiter, clock) = warming_up(Duration::from_secs(4));
    // Warm it fully: spend all 8 stored permits, wait out the debt.
    limiter.acquire_n(8).unwrap();
    limiter.acquire().unwrap();
    clock.advance(limiter.peek(1).unwrap().retry_after());
    assert!(limiter.peek(1).unwrap().is_allowed());
    clock.take_sleeps();

    limiter.acquire().unwrap();
    let r = reserve_waiting(&limiter, 1, ms(500));
    let later = reserve_waiting(&limiter, 1, ms(1000));
    later.cancel();
    r.cancel(); // now the last one: restored too
    reserve_waiting(&limiter, 1, ms(500));
}

#[test]
fn warming_up_cancel_too_late_restores_nothing() {
    let (limiter, _clock) = warming_up(Duration::ZERO);
    limiter.acquire().unwrap();
    let r = reserve_waiting(&limiter, 1, ms(500));
    cancel_after(&limiter, r, ms(600), 1, ms(400));
}

#[test]
fn warming_up_zero_warmup_cancel_at_once() {
    let (limiter, _clock) = warming_up(Duration::ZERO);
    let r = limiter.reserve(1).unwrap();
    cancel_gives_back_the_one_permit(&limiter, r);
}

#[test]
fn warming_up_cancel_gives_back_the_cold_permits_it_spent() {
    // A cold 2/s limiter with a 4 s warm-up: the first stored permits cost 1.375 s,
    // 1.125 s, ... A reservation that spends one and is cancelled must leave the
    // limiter as cold as it found it, not one permit warmer.
    let (limiter, _clock) = warming_up(Duration::from_secs(4));
    let untouched = limiter.peek(1).unwrap();
    limiter.reserve(1).unwrap().cancel();
    assert_eq!(limiter.peek(1).unwrap(), untouched);
    assert_acquires_slept(&limiter, &[0.0, 1.38, 1.13]);
}
