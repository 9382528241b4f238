//! Worked examples from the seeds that the other window suites do not replay: each
//! test names its seed file and quotes the sentence or table it checks, and runs it
//! on virtual time (a `ManualClock` whose origin stands for the seed's first instant).
//! The Redis twins of the Redis seeds' examples are in
//! `tests/redis_store/seeds_worked_examples.rs`.

use sluicegate::algorithms::{
    FixedWindow, LeakyBucket, SlidingLog, SlidingWindowBuckets, SlidingWindowCounter, SmoothBursty,
    SmoothWarmingUp,
};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{Decision, KeyedRateLimiter, RateLimiter, Verdict};
use std::time::Duration;

const SECOND: u64 = 1_000_000_000;

const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// `h:mm:ss` after the clock's origin, in nanoseconds.
const fn hms(h: u64, m: u64, s: u64) -> u64 {
    ((h * 60 + m) * 60 + s) * SECOND
}

/// Moves `clock` forward to the absolute instant `t` (never back).
fn set(clock: &ManualClock, t: u64) {
    let now = clock.now();
    assert!(t >= now, "the tests only move time forward ({now} -> {t})");
    clock.advance_nanos(t - now);
}

/// The fields a caller sees, for comparing two algorithms' decisions.
fn fields(d: &Decision) -> (Verdict, u64, u64, Duration, Duration) {
    (
        d.verdict(),
        d.limit(),
        d.remaining(),
        d.retry_after(),
        d.reset_after(),
    )
}

/// Seed 000 (sliding window counter, 100 per minute): "This means that a user may
/// have to wait up to 2 whole intervals to be able to max out in new requests." and
/// "If it's resource specific, it might be both the client IP address and the path,
/// like `1.2.3.4:/api/widgets`". After 100 calls early in the first minute, a full
/// 100 fit again only at 2:00, two intervals after the burst; another path of the
/// same IP is a separate rateId and is not touched.
#[test]
fn seed_000_a_full_limit_comes_back_only_after_two_intervals() {
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(
        SlidingWindowCounter::new(100, secs(60)).unwrap(),
        clock.clone(),
    );
    let widgets = "1.2.3.4:/api/widgets";
    for i in 0..100 {
        set(&clock, i * 150_000_000); // 100 calls within the first 15 s
        assert!(limiter.check(&widgets, 1).unwrap().is_allowed(), "call {i}");
    }
    assert!(!limiter.check(&widgets, 1).unwrap().is_allowed());
    // Another path of the same client: its own counters.
    assert_eq!(
        limiter
            .check(&"1.2.3.4:/api/gadgets", 1)
            .unwrap()
            .remaining(),
        99
    );

    // 0.25 min into the second interval the previous one still weighs 0.75: a call
    // for the whole limit waits until the previous window has slid out, at 2:00.
    set(&clock, hms(0, 1, 15));
    let d = limiter.peek(&widgets, 100).unwrap();
    assert_eq!((d.is_allowed(), d.retry_after()), (false, secs(45)));
    set(&clock, hms(0, 1, 59));
    let d = limiter.peek(&widgets, 100).unwrap();
    assert_eq!((d.is_allowed(), d.retry_after()), (false, secs(1)));
    set(&clock, hms(0, 2, 0) - 1);
    assert!(!limiter.peek(&widgets, 100).unwrap().is_allowed());
    set(&clock, hms(0, 2, 0));
    let d = limiter.check(&widgets, 100).unwrap();
    assert_eq!((d.is_allowed(), d.remaining()), (true, 0));
}

/// The 15 calls of seed 003's fixed-window example, 10 per hour: "if all the 7
/// requests in the 1AM-2AM bucket occurs from 1:30AM-2AM, and all the 8 requests
/// from 2AM-3AM bucket occur from 2AM-2:30AM": 7 at 1:30, 1:34, ..., 1:54 and 8 at
/// 2:00, 2:04, ..., 2:28 (the clock's origin is midnight).
fn seed_003_fifteen_calls() -> Vec<u64> {
    let first = (0..7).map(|k| hms(1, 30 + 4 * k, 0));
    let second = (0..8).map(|k| hms(2, 4 * k, 0));
    first.chain(second).collect()
}

/// Seed 003: `{"1AM-2AM": 7, "2AM-3AM": 8}` "then effectively we have 15(7 + 8)
/// requests in the time range of 1:30AM-2:30AM, which is violating the condition of
/// 10req/hr." The fixed window admits all 15 (its docs: "up to 2x across an edge"),
/// and its per-window counts are the seed's 7 and 8.
#[test]
fn seed_003_fixed_window_admits_fifteen_between_1_30_and_2_30() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(FixedWindow::new(10, secs(3600)).unwrap(), clock.clone());
    let mut remaining = Vec::new();
    for t in seed_003_fifteen_calls() {
        set(&clock, t);
        let d = limiter.check(1).unwrap();
        assert!(d.is_allowed(), "the call at {}s", t / SECOND);
        remaining.push(d.remaining());
    }
    // "1AM-2AM": 7 (10 - 7 = 3 left), "2AM-3AM": 8 (2 left).
    assert_eq!(remaining[6], 3);
    assert_eq!(remaining[14], 2);
    assert!(clock.now() < hms(2, 30, 0), "all 15 fall within 1:30-2:30");
}

/// Seed 004 on the sliding log: "It does not suffer from the boundary conditions of
/// fixed windows. The rate limit will be enforced precisely." The same 15 calls as
/// seed 003's example: 10 pass, and the first refused one (at 2:12) is told to come
/// back at 2:30, when the 1:30 call leaves the hour.
#[test]
fn seed_004_sliding_log_holds_seed_003s_hour_to_ten() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(SlidingLog::new(10, secs(3600)).unwrap(), clock.clone());
    let mut granted = Vec::new();
    let mut first_refusal = None;
    for t in seed_003_fifteen_calls() {
        set(&clock, t);
        let d = limiter.check(1).unwrap();
        if d.is_allowed() {
            granted.push(t);
        } else if first_refusal.is_none() {
            first_refusal = Some((t, d.retry_after()));
        }
    }
    assert_eq!(granted.len(), 10);
    assert_eq!(granted.last(), Some(&hms(2, 8, 0)));
    assert_eq!(
        first_refusal,
        Some((hms(2, 12, 0), Duration::from_secs(18 * 60)))
    );
}

/// Seed 002: "to fully address the issue, we need to implement a sliding-window rate
/// limiter, where the count for requests that come in at 6:01PM and 6:59PM aren't
/// reset until roughly an hour later at 7:01PM and 7:59PM, respectively, not at
/// 7:00PM." A limit of 2 per hour in one-minute buckets (the seed's precision; the
/// clock's origin is 6:00 PM): each request's token comes back an hour after it.
#[test]
fn seed_002_sliding_window_restores_6_01_at_7_01_and_6_59_at_7_59() {
    let clock = ManualClock::new();
    let window = SlidingWindowBuckets::dropping(2, secs(3600), secs(60)).unwrap();
    let limiter = RateLimiter::with_clock(window, clock.clone());
    set(&clock, hms(0, 1, 0)); // 6:01 PM
    assert!(limiter.try_acquire());
    set(&clock, hms(0, 59, 0)); // 6:59 PM
    assert!(limiter.try_acquire());

    set(&clock, hms(1, 0, 0)); // 7:00 PM: nothing reset
    let d = limiter.check(1).unwrap();
    assert_eq!((d.is_allowed(), d.retry_after()), (false, secs(60)));
    set(&clock, hms(1, 1, 0)); // 7:01 PM: the 6:01 token is back, only that one
    let d = limiter.check(1).unwrap();
    assert_eq!((d.is_allowed(), d.remaining()), (true, 0));

    set(&clock, hms(1, 58, 0)); // 7:58 PM: 6:59 and 7:01 still count
    let d = limiter.check(1).unwrap();
    assert_eq!((d.is_allowed(), d.retry_after()), (false, secs(60)));
    set(&clock, hms(1, 59, 0)); // 7:59 PM: the 6:59 token is back
    assert!(limiter.try_acquire());
}

/// Seed 002, "Stampeding elephants": "usually request counts get reset at the
/// beginning of the rate limiter's largest (and sometimes only) time slice. In our
/// example, at every hour on the hour, every counter that had been incremented is
/// reset." The same 6:01 and 6:59 calls under a fixed hour: both tokens are back at
/// 7:00 at once.
#[test]
fn seed_002_a_fixed_hour_resets_every_count_on_the_hour() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(FixedWindow::new(2, secs(3600)).unwrap(), clock.clone());
    set(&clock, hms(0, 1, 0));
    assert!(limiter.try_acquire());
    set(&clock, hms(0, 59, 0));
    assert!(limiter.try_acquire());
    set(&clock, hms(0, 59, 59));
    let d = limiter.check(1).unwrap();
    assert_eq!((d.is_allowed(), d.retry_after()), (false, secs(1)));
    set(&clock, hms(1, 0, 0));
    let d = limiter.check(2).unwrap();
    assert_eq!((d.is_allowed(), d.remaining()), (true, 0));
}

/// Seed 002: "You should notice that when duration is the same as precision, we have
/// regular rate limits." (sluicegate's docs: "`precision == window` with
/// `OldestBucket::Drop` is a fixed window"). Seed 001's fixed-window table, 3
/// requests per 60 s, gives the same decision field by field on both, and so does the
/// boundary burst seed 001 warns about ("3 requests at 12:00:59 and a further 3
/// requests at 12:01:00").
#[test]
fn seed_002_precision_equal_to_duration_is_seed_001s_fixed_window() {
    let fixed_clock = ManualClock::new();
    let fixed =
        RateLimiter::with_clock(FixedWindow::new(3, secs(60)).unwrap(), fixed_clock.clone());
    let ring_clock = ManualClock::new();
    let ring = RateLimiter::with_clock(
        SlidingWindowBuckets::dropping(3, secs(60), secs(60)).unwrap(),
        ring_clock.clone(),
    );
    // (12:mm:ss, allowed, remaining) from seed 001's table; the refused call at
    // 12:01:50 is told 12:02:00.
    let table = [
        (hms(0, 0, 5), true, 2),
        (hms(0, 0, 15), true, 1),
        (hms(0, 1, 1), true, 2),
        (hms(0, 1, 10), true, 1),
        (hms(0, 1, 40), true, 0),
        (hms(0, 1, 50), false, 0),
        (hms(0, 2, 20), true, 2),
    ];
    for (t, allowed, remaining) in table {
        set(&fixed_clock, t);
        set(&ring_clock, t);
        let a = fixed.check(1).unwrap();
        let b = ring.check(1).unwrap();
        assert_eq!(
            (a.is_allowed(), a.remaining()),
            (allowed, remaining),
            "at {}s",
            t / SECOND
        );
        assert_eq!(fields(&a), fields(&b), "at {}s", t / SECOND);
        if !allowed {
            assert_eq!(a.retry_after(), secs(10));
        }
    }
    // The double burst at the edge of a window, on both.
    let mut granted = [0, 0];
    for t in [
        hms(0, 2, 59),
        hms(0, 2, 59),
        hms(0, 2, 59),
        hms(0, 3, 0),
        hms(0, 3, 0),
        hms(0, 3, 0),
    ] {
        set(&fixed_clock, t);
        set(&ring_clock, t);
        let a = fixed.check(1).unwrap();
        let b = ring.check(1).unwrap();
        assert_eq!(fields(&a), fields(&b));
        granted[0] += u64::from(a.is_allowed());
        granted[1] += u64::from(b.is_allowed());
    }
    // 12:02:20's call is in the 12:02 window too, so 2 pass at 12:02:59, then 3.
    assert_eq!(granted, [5, 5]);
}

/// Seed 004, token bucket: "The bucket can hold at most b tokens. If a token arrive
/// when bucket is full the token will be discarded. When a packet of m bytes arrived
/// m tokens are removed from the bucket [...] If less than n tokens are available no
/// tokens will be removed from the bucket and the packet is considered to be
/// non-comformant." On the leaky bucket as a meter (the token bucket's twin, seed 003),
/// b = 5, one token per second.
#[test]
fn seed_004_a_non_conformant_packet_takes_no_tokens() {
    let clock = ManualClock::new();
    let bucket = RateLimiter::with_clock(LeakyBucket::meter(5, 1, secs(1)).unwrap(), clock.clone());
    let d = bucket.check(3).unwrap();
    assert_eq!((d.is_allowed(), d.remaining()), (true, 2));
    // 3 asked, 2 available: non-conformant, nothing removed.
    let d = bucket.check(3).unwrap();
    assert_eq!(
        (d.verdict(), d.remaining(), d.retry_after()),
        (Verdict::Denied, 2, secs(1))
    );
    let d = bucket.check(2).unwrap();
    assert_eq!((d.is_allowed(), d.remaining()), (true, 0));
    // A long idle time: the tokens beyond b are discarded.
    clock.advance(secs(100));
    assert_eq!(bucket.peek(1).unwrap().remaining(), 4);
    assert_eq!(bucket.check(6).unwrap().verdict(), Verdict::Never);
    assert_eq!(bucket.check(5).unwrap().remaining(), 0);
}

/// Seed 004 describes Guava's token bucket as a record of "the next time a token is
/// available", where "RateLimiter allows preconsumption. After a thread preconsumes
/// any tokens, the next thread needs to wait until nextFreeTicketMicros". So
/// `SmoothBursty` differs from the non-conformance rule above, as its docs say ("pay
/// later"): with 5 stored, a packet of 8 passes and the *next* call waits for the 3
/// it borrowed, 3 × 0.2 s.
#[test]
fn seed_004_guava_bursty_preconsumes_instead_of_refusing() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(SmoothBursty::new(5.0).unwrap(), clock.clone());
    clock.advance(secs(1)); // one second of idleness stores 5
    assert!(limiter.check(8).unwrap().is_allowed());
    let d = limiter.check(1).unwrap();
    assert_eq!(
        (d.is_allowed(), d.retry_after()),
        (false, Duration::from_millis(600))
    );
    limiter.acquire().unwrap();
    assert_eq!(clock.take_sleeps(), vec![Duration::from_millis(600)]);
}

/// Seed 004's warm-up diagram: "'warmup period' is the area of the trapezoid between
/// thresholdPermits and maxPermits", "When used, [...] the time it takes [...] is
/// equal to the integral of our function", and "When unused, we go right at a
/// constant rate! The rate at which we move to the right is chosen as maxPermits /
/// warmupPeriod. This ensures that the time it takes to go from 0 to maxPermits is
/// equal to warmupPeriod." With 1 permit per second and a 10 s warm-up (cold factor
/// 3: threshold 5, maxPermits 10), the five permits above the threshold cost 2.8,
/// 2.4, 2.0, 1.6 and 1.2 s (10 s in all, the warm-up period), then 1 s each; idle
/// for the warm-up period, the limiter is cold again; idle for half of it, it is at
/// the threshold.
#[test]
fn seed_004_the_warm_up_trapezoid_takes_the_warm_up_period() {
    let clock = ManualClock::new();
    let limiter =
        RateLimiter::with_clock(SmoothWarmingUp::new(1.0, secs(10)).unwrap(), clock.clone());
    let ms = Duration::from_millis;
    // Ten calls spend all ten stored permits: the five above the threshold, then
    // the five below it.
    let mut cold = vec![ms(0), ms(2800), ms(2400), ms(2000), ms(1600), ms(1200)];
    cold.extend([ms(1000); 4]);
    for _ in 0..cold.len() {
        limiter.acquire().unwrap();
    }
    assert_eq!(clock.take_sleeps(), cold);
    assert_eq!(cold[1..6].iter().sum::<Duration>(), secs(10));

    // The last call's own second is owed; then 10 s unused fill all 10 permits again.
    clock.advance(secs(11));
    for _ in 0..cold.len() {
        limiter.acquire().unwrap();
    }
    assert_eq!(clock.take_sleeps(), cold);

    // Half the warm-up period unused: 5 permits, exactly the threshold, each
    // costing the stable interval.
    clock.advance(secs(1 + 5));
    for _ in 0..7 {
        limiter.acquire().unwrap();
    }
    assert_eq!(
        clock.take_sleeps(),
        vec![
            ms(0),
            ms(1000),
            ms(1000),
            ms(1000),
            ms(1000),
            ms(1000),
            ms(1000)
        ]
    );
}

/// Seed 001, "Tokens Used for each Request": "a request to GET /user would use 1
/// token from the {id}:user:{timestamp} bucket, however a request to POST /user would
/// remove 2 tokens from the same bucket", and "all responses include HTTP headers
/// [...] X-Rate-Limit-Limit [...] X-Rate-Limit-Remaining": the decision's `limit` and
/// `remaining`, on the fixed window of the seed's tables (3 per 60 s).
#[test]
fn seed_001_post_costs_two_tokens_of_the_same_bucket() {
    let clock = ManualClock::new();
    let limiter =
        KeyedRateLimiter::with_clock(FixedWindow::new(3, secs(60)).unwrap(), clock.clone());
    let user = "user1:user";
    set(&clock, hms(0, 0, 5));
    let get = limiter.check(&user, 1).unwrap();
    assert_eq!(
        (get.is_allowed(), get.limit(), get.remaining()),
        (true, 3, 2)
    );
    set(&clock, hms(0, 0, 15));
    let post = limiter.check(&user, 2).unwrap();
    assert_eq!(
        (post.is_allowed(), post.limit(), post.remaining()),
        (true, 3, 0)
    );
    set(&clock, hms(0, 0, 30));
    let refused = limiter.check(&user, 1).unwrap();
    assert_eq!(
        (refused.is_allowed(), refused.limit(), refused.remaining()),
        (false, 3, 0)
    );
    assert_eq!(refused.retry_after(), secs(30));
    // Another user's bucket is separate.
    assert_eq!(limiter.check(&"user2:user", 2).unwrap().remaining(), 1);
    set(&clock, hms(0, 1, 1));
    let post = limiter.check(&user, 2).unwrap();
    assert_eq!((post.is_allowed(), post.remaining()), (true, 1));
    let post = limiter.check(&user, 2).unwrap();
    assert_eq!((post.is_allowed(), post.remaining()), (false, 1));
    assert_eq!(limiter.check(&user, 4).unwrap().verdict(), Verdict::Never);
}

/// Seed 001, "HTTP Responses": "When rejecting a user who is over the limit we choose
/// a 429 Too Many Requests response. In addition to the 429 rejection, all responses
/// include HTTP headers [...] X-Rate-Limit-Limit [...] X-Rate-Limit-Remaining". The
/// server layer (feature `tower`) spells them so with `Legacy::XRateDashLimit`; seed
/// 001's fixed-window table, 3 requests per 60 s, as HTTP requests of `user1`.
#[test]
fn seed_001_fixed_window_table_as_http_responses() {
    use http::{Request, Response, StatusCode};
    use sluicegate::adapters::server::{Legacy, RateLimitHeaders, ServerLayer};
    use tower::{service_fn, Layer, ServiceExt};

    let clock = ManualClock::new();
    let per_user =
        KeyedRateLimiter::with_clock(FixedWindow::new(3, secs(60)).unwrap(), clock.clone());
    let app =
        service_fn(|_: Request<()>| async { Ok::<_, std::convert::Infallible>(Response::new(())) });
    let server = ServerLayer::keyed(per_user, |r: &Request<()>| {
        r.headers()["x-user"].to_str().unwrap().to_owned()
    })
    .headers(RateLimitHeaders::new().legacy_only(Legacy::XRateDashLimit))
    .layer(app);
    // (12:mm:ss, status, X-Rate-Limit-Remaining, Retry-After)
    let table = [
        (hms(0, 0, 5), StatusCode::OK, "2", None),
        (hms(0, 0, 15), StatusCode::OK, "1", None),
        (hms(0, 1, 1), StatusCode::OK, "2", None),
        (hms(0, 1, 10), StatusCode::OK, "1", None),
        (hms(0, 1, 40), StatusCode::OK, "0", None),
        (
            hms(0, 1, 50),
            StatusCode::TOO_MANY_REQUESTS,
            "0",
            Some("10"),
        ),
        (hms(0, 2, 20), StatusCode::OK, "2", None),
    ];
    for (t, status, remaining, retry_after) in table {
        set(&clock, t);
        let request = Request::builder()
            .header("x-user", "user1")
            .body(())
            .unwrap();
        let response = futures::executor::block_on(server.clone().oneshot(request)).unwrap();
        let h = response.headers();
        let at = format!("at {}s", t / SECOND);
        assert_eq!(response.status(), status, "{at}");
        assert_eq!(h["x-rate-limit-limit"], "3", "{at}");
        assert_eq!(h["x-rate-limit-remaining"], remaining, "{at}");
        assert_eq!(
            h.get("retry-after").map(|v| v.to_str().unwrap()),
            retry_after,
            "{at}"
        );
        assert!(h.get("ratelimit").is_none(), "{at}: legacy fields only");
    }
}
