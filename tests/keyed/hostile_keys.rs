//! Hostile keys: ten million distinct keys, each used once, over advancing virtual
//! time. The store must hold only the keys active within their horizon.

use sluicegate::algorithms::SmoothBursty;
use sluicegate::clock::ManualClock;
use sluicegate::KeyedRateLimiter;

#[test]
fn ten_million_one_shot_keys_stay_bounded() {
    const KEYS: u64 = 10_000_000;
    // 10 per second with a 1 s burst: a key used once is replenished 0.1 s later.
    // At 10 µs of virtual time per call, about 10 000 keys are active at any time.
    const STEP_NANOS: u64 = 10_000;
    const ACTIVE: usize = 10_000;
    let clock = ManualClock::new();
    // A server that has been up a while: every new key starts with its full burst.
    clock.advance(std::time::Duration::from_secs(10));
    let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(10.0).unwrap(), clock.clone());
    let before = resident_bytes();
    let mut most = 0;
    for key in 0..KEYS {
        clock.advance_nanos(STEP_NANOS);
        // Every key is new, and a new key starts with its burst: always allowed.
        assert!(limiter.try_acquire(&key));
        if key % 65_536 == 0 {
            let live = limiter.live_keys();
            most = most.max(live);
            assert!(live <= 4 * ACTIVE, "{live} live keys after {key} keys");
        }
    }
    let after = resident_bytes();
    println!(
        "hostile keys: {KEYS} seen, at most {most} live (about {ACTIVE} active); table bytes {}; \
         resident memory before {:?} MiB, after {:?} MiB",
        limiter.store().table_bytes(),
        before.map(|b| b >> 20),
        after.map(|b| b >> 20),
    );
    assert!(
        most >= ACTIVE / 2,
        "the test must actually hold the active keys"
    );
}

/// Resident memory of this process in bytes (Linux `/proc/self/statm`), if known.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}
