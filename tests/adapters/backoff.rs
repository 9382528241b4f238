//! `HoldBack` on its own: what each response asks for, what is ignored, the cap,
//! and that a hold only ever grows.
#![cfg(feature = "tower")]

use http::{HeaderMap, StatusCode};
use sluicegate::adapters::HoldBack;
use sluicegate::clock::ManualClock;
use std::time::{Duration, UNIX_EPOCH};

const TOO_MANY: StatusCode = StatusCode::TOO_MANY_REQUESTS;
const UNAVAILABLE: StatusCode = StatusCode::SERVICE_UNAVAILABLE;

fn headers(fields: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in fields {
        map.append(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    map
}

/// The pause one response asks of a fresh `HoldBack` (wall clock at 1000 s after the
/// epoch, for HTTP-dates without a `Date` field).
fn pause(status: StatusCode, fields: &[(&str, &str)]) -> Option<Duration> {
    let hold = HoldBack::new(ManualClock::new());
    let wall = UNIX_EPOCH + Duration::from_secs(1000);
    hold.observe_at("k", status, &headers(fields), wall)
}

#[test]
fn retry_after_in_both_forms_on_429_and_503() {
    let s = Duration::from_secs;
    assert_eq!(pause(TOO_MANY, &[("retry-after", "7")]), Some(s(7)));
    assert_eq!(pause(UNAVAILABLE, &[("retry-after", " 2 ")]), Some(s(2)));
    // An HTTP-date against the response's Date (clock skew does not matter)...
    let dated = [
        ("date", "Sun, 06 Nov 1994 08:49:37 GMT"),
        ("retry-after", "Sun, 06 Nov 1994 08:50:00 GMT"),
    ];
    assert_eq!(pause(TOO_MANY, &dated), Some(s(23)));
    // ...in the obsolete forms too...
    let rfc850 = [
        ("date", "Sunday, 06-Nov-94 08:49:37 GMT"),
        ("retry-after", "Sun Nov  6 08:49:47 1994"),
    ];
    assert_eq!(pause(UNAVAILABLE, &rfc850), Some(s(10)));
    // ...or against the local wall clock without a Date (1000 s after the epoch).
    let undated = [("retry-after", "Thu, 01 Jan 1970 00:17:00 GMT")];
    assert_eq!(pause(TOO_MANY, &undated), Some(s(20)));
}

#[test]
fn a_retry_after_in_the_past_or_zero_asks_for_nothing() {
    let past = [
        ("date", "Sun, 06 Nov 1994 08:49:37 GMT"),
        ("retry-after", "Sun, 06 Nov 1994 08:00:00 GMT"),
    ];
    assert_eq!(pause(TOO_MANY, &past), None);
    assert_eq!(pause(TOO_MANY, &[("retry-after", "0")]), None);
}

#[test]
fn malformed_fields_are_ignored() {
    let fallback = Some(Duration::from_secs(1));
    // A bad Retry-After on a 429 leaves the bare-429 fallback.
    for bad in ["-5", "1.5", "soon", "Sun, 06 Nov 1994 08:49:37 UTC", ""] {
        assert_eq!(
            pause(TOO_MANY, &[("retry-after", bad)]),
            fallback,
            "{bad:?}"
        );
    }
    // A bad RateLimit counts for nothing; a good one beside it still does.
    assert_eq!(
        pause(StatusCode::OK, &[("ratelimit", r#""a";r=0;t=5,"#)]),
        None
    );
    assert_eq!(pause(StatusCode::OK, &[("ratelimit", "a;r=0;t=x")]), None);
    let one_good = [("ratelimit", "junk;;"), ("ratelimit", r#""a";r=0;t=4"#)];
    assert_eq!(
        pause(StatusCode::OK, &one_good),
        Some(Duration::from_secs(4))
    );
    // A negative t is not a pause.
    assert_eq!(
        pause(StatusCode::OK, &[("ratelimit", r#""a";r=0;t=-3"#)]),
        None
    );
}

#[test]
fn ratelimit_fields_pause_only_for_spent_quota_unless_refused() {
    let s = Duration::from_secs;
    let spent_and_not = [("ratelimit", r#""sec";r=0;t=1, "day";r=10;t=50000"#)];
    // OK: only the spent item counts.
    assert_eq!(pause(StatusCode::OK, &spent_and_not), Some(s(1)));
    // Items split over two field lines are one list.
    let split = [
        ("ratelimit", r#""sec";r=0;t=1"#),
        ("ratelimit", r#""min";r=0;t=9"#),
    ];
    assert_eq!(pause(StatusCode::OK, &split), Some(s(9)));
    // Refused with quota left everywhere: the longest t.
    let left = [("ratelimit", r#""sec";r=2;t=3, "min";r=1;t=8"#)];
    assert_eq!(pause(TOO_MANY, &left), Some(s(8)));
    assert_eq!(pause(StatusCode::OK, &left), None);
    // Retry-After wins over RateLimit on a refusal.
    let both = [("retry-after", "2"), ("ratelimit", r#""sec";r=0;t=30"#)];
    assert_eq!(pause(TOO_MANY, &both), Some(s(2)));
}

#[test]
fn statuses_without_hints() {
    assert_eq!(pause(TOO_MANY, &[]), Some(Duration::from_secs(1)));
    assert_eq!(
        pause(UNAVAILABLE, &[]),
        None,
        "a bare 503 may not be about rate"
    );
    assert_eq!(pause(StatusCode::OK, &[("retry-after", "5")]), None);
    let hold = HoldBack::new(ManualClock::new()).with_fallback(Duration::ZERO);
    assert_eq!(hold.observe((), TOO_MANY, &HeaderMap::new()), None);
}

#[test]
fn holds_are_capped_grow_only_and_expire_with_the_clock() {
    let clock = ManualClock::new();
    let hold = HoldBack::new(clock.clone()).with_cap(Duration::from_secs(20));
    let ask = |secs: &str| headers(&[("retry-after", secs)]);
    assert_eq!(
        hold.observe(1, TOO_MANY, &ask("99999999999999999999999")),
        Some(Duration::from_secs(20))
    );
    assert_eq!(hold.remaining(&1), Duration::from_secs(20));
    clock.advance(Duration::from_secs(5));
    // Asked for less than what is left: the hold stays.
    assert_eq!(
        hold.observe(1, TOO_MANY, &ask("3")),
        Some(Duration::from_secs(3))
    );
    assert_eq!(hold.remaining(&1), Duration::from_secs(15));
    // Asked for more: it grows.
    hold.observe(1, TOO_MANY, &ask("18"));
    assert_eq!(hold.remaining(&1), Duration::from_secs(18));
    clock.advance(Duration::from_secs(18));
    assert_eq!(hold.remaining(&1), Duration::ZERO);
    // A zero cap disables holding.
    let off = HoldBack::new(clock).with_cap(Duration::ZERO);
    assert_eq!(off.observe(1, TOO_MANY, &ask("5")), None);
    assert_eq!(off.remaining(&1), Duration::ZERO);
}

#[test]
fn many_keys_are_forgotten_once_their_holds_pass() {
    let clock = ManualClock::new();
    let hold = HoldBack::new(clock.clone());
    let ask = headers(&[("retry-after", "1")]);
    for key in 0..2_000u32 {
        hold.observe(key, TOO_MANY, &ask);
    }
    clock.advance(Duration::from_secs(2));
    hold.observe(5_000, TOO_MANY, &ask);
    // The expired 2 000 were pruned on the way: only the new key is remembered.
    assert!(format!("{hold:?}").contains("held_keys: 1"), "{hold:?}");
    assert_eq!(hold.remaining(&5_000), Duration::from_secs(1));
}
