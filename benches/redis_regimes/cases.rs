//! The table's rows: every algorithm at a small limit and at large ones, and a set
//! of three limits, with the names its members' rows go by.

use super::plan::{Pace, Plan};
use super::row::{row, Case};
use crate::{DAY, FOREVER, HOUR, MIN, SEC, START};
use sluicegate::algorithms::{
    AllOf, FixedWindow, LeakyBucket, SlidingLog, SlidingWindowBuckets, SlidingWindowCounter,
    SmoothBursty, SmoothWarmingUp,
};
use std::time::Duration;

/// "10/min", "10,000/h", "1,000,000/day".
pub(crate) fn per(limit: u64, window: u64) -> String {
    let digits = limit.to_string();
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let unit = match window {
        SEC => "s",
        MIN => "min",
        HOUR => "h",
        DAY => "day",
        _ => unreachable!("windows are a second, a minute, an hour or a day"),
    };
    format!("{grouped}/{unit}")
}

fn d(ns: u64) -> Duration {
    Duration::from_nanos(ns)
}

/// The limits every window-like algorithm is measured at: (limit, window).
const LIMITS: [(u64, u64); 4] = [(10, MIN), (10_000, HOUR), (100_000, MIN), (1_000_000, DAY)];

/// A bucketed window's bucket for `window`: 60 buckets a minute or an hour, 24 a day.
fn bucket_of(window: u64) -> u64 {
    match window {
        MIN => SEC,
        HOUR => MIN,
        _ => HOUR,
    }
}

/// The bucketed windows' limits: [`LIMITS`] and 100,000 an hour in minutes.
const BUCKET_LIMITS: [(u64, u64); 5] = [
    (10, MIN),
    (10_000, HOUR),
    (100_000, MIN),
    (100_000, HOUR),
    (1_000_000, DAY),
];

/// The sliding log's limits: [`LIMITS`] and 100 and 500 a minute, full logs of a
/// few hundred entries (a hash Redis would keep as a listpack, whose lookups scan
/// it, unless the step makes it a hash table).
const LOG_LIMITS: [(u64, u64); 6] = [
    LIMITS[0],
    (100, MIN),
    (500, MIN),
    LIMITS[1],
    LIMITS[2],
    LIMITS[3],
];

/// The set's limits (its members are the table's rows at these limits).
pub(crate) const SET_LIMITS: [(u64, u64); 2] = [(10, MIN), (10_000, HOUR)];

pub(crate) fn cases() -> Vec<Box<dyn Case>> {
    let mut cases = Vec::new();
    for (limit, window) in LIMITS {
        let every = window / limit;
        cases.push(row(
            format!("fixed window {}", per(limit, window)),
            FixedWindow::new(limit, d(window)).unwrap(),
            Plan::window(
                limit,
                window,
                Pace::Every {
                    from: START + window,
                    every,
                },
            ),
        ));
    }
    for (limit, window) in LIMITS {
        let every = window / limit;
        cases.push(row(
            format!("sliding window counter {}", per(limit, window)),
            SlidingWindowCounter::new(limit, d(window)).unwrap(),
            Plan::window(
                limit,
                window,
                Pace::SkipWindowStart {
                    from: START + window,
                    every,
                    limit,
                },
            ),
        ));
    }
    for (limit, window) in LIMITS {
        cases.push(row(
            format!("leaky bucket meter {}", per(limit, window)),
            LeakyBucket::meter(limit, limit, d(window)).unwrap(),
            Plan::leaky(limit, window, 0),
        ));
    }
    for (limit, window) in LIMITS {
        cases.push(row(
            format!("leaky bucket queue {}", per(limit, window)),
            LeakyBucket::queue(limit, limit, d(window)).unwrap(),
            Plan::leaky(limit, window, FOREVER),
        ));
    }
    // The smooth limiters at 10 a second (their default one-second burst), and at
    // the large limits as a rate with the window as burst or warm-up.
    let smooth: [(u64, u64); 4] = [(10, SEC), LIMITS[1], LIMITS[2], LIMITS[3]];
    for (limit, window) in smooth {
        let rate = limit as f64 * SEC as f64 / window as f64;
        let mut bursty = SmoothBursty::new(rate).unwrap();
        if window != SEC {
            bursty = bursty.with_max_burst(d(window)).unwrap();
        }
        let cost = bursty.max_permits().ceil() as u64 + 1;
        cases.push(row(
            format!("smooth bursty {}", per(limit, window)),
            bursty,
            Plan::smooth(cost, window / limit),
        ));
    }
    for (limit, window) in smooth {
        let rate = limit as f64 * SEC as f64 / window as f64;
        let warming = SmoothWarmingUp::new(rate, d(window)).unwrap();
        let cost = warming.max_permits().ceil() as u64 + 1;
        cases.push(row(
            format!("smooth warming up {}", per(limit, window)),
            warming,
            Plan::smooth(cost, window / limit),
        ));
    }
    for (limit, window) in LOG_LIMITS {
        cases.push(row(
            format!("sliding log {}", per(limit, window)),
            SlidingLog::new(limit, d(window)).unwrap(),
            Plan::log(limit, window),
        ));
    }
    for weighted in [false, true] {
        for (limit, window) in BUCKET_LIMITS {
            let every = window / limit;
            let bucket = bucket_of(window);
            let (kind, buckets, pace) = if weighted {
                (
                    "weighted",
                    SlidingWindowBuckets::weighted(limit, d(window), d(bucket)),
                    Pace::SkipWindowStart {
                        from: START + window,
                        every,
                        limit,
                    },
                )
            } else {
                (
                    "dropping",
                    SlidingWindowBuckets::dropping(limit, d(window), d(bucket)),
                    Pace::Every {
                        from: START + window,
                        every,
                    },
                )
            };
            cases.push(row(
                format!(
                    "buckets {kind} {} in {}",
                    per(limit, window),
                    unit_name(bucket)
                ),
                buckets.unwrap(),
                Plan::buckets(limit, window, bucket, pace),
            ));
        }
    }
    for (limit, window) in SET_LIMITS {
        let set = AllOf::new((
            FixedWindow::new(limit, d(window)).unwrap(),
            SlidingWindowBuckets::dropping(limit, d(window), d(bucket_of(window))).unwrap(),
            SlidingLog::new(limit, d(window)).unwrap(),
        ));
        cases.push(row(set_name(limit, window), set, Plan::log(limit, window)));
    }
    cases
}

fn unit_name(bucket: u64) -> &'static str {
    match bucket {
        SEC => "1 s",
        MIN => "1 min",
        _ => "1 h",
    }
}

pub(crate) fn set_name(limit: u64, window: u64) -> String {
    format!("set of 3 {}", per(limit, window))
}

/// The members' rows of the set at (limit, window).
pub(crate) fn member_names(limit: u64, window: u64) -> [String; 3] {
    [
        format!("fixed window {}", per(limit, window)),
        format!(
            "buckets dropping {} in {}",
            per(limit, window),
            unit_name(bucket_of(window))
        ),
        format!("sliding log {}", per(limit, window)),
    ]
}
