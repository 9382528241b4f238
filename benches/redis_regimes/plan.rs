//! How a key is put in each regime: the fill that brings it there, where the
//! hammered calls land, and the pace of the granted ones.

use crate::{FOREVER, START, US};

/// When the granted regime's calls land.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Pace {
    /// `from + i × every`.
    Every { from: u64, every: u64 },
    /// `limit - 1` calls a window (`every × limit`) from the window-aligned `from`,
    /// at the instants `j × every` for `j` in `1..limit`: each window's first
    /// instant left empty.
    SkipWindowStart { from: u64, every: u64, limit: u64 },
    /// One call every `every` from the first instant a peek on the hammered key
    /// reports (rounded up to a whole µs).
    AfterPeek { every: u64 },
}

/// How a key is put in each regime.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// The fill: (instant, cost) of each call, in order.
    pub(crate) fill: Vec<(u64, u64)>,
    /// The fill's max wait.
    pub(crate) fill_wait: u64,
    /// The measured calls' max wait.
    pub(crate) wait: u64,
    /// Hammered calls land at this instant plus 0, 1 or 2 µs.
    pub(crate) hammer: u64,
    pub(crate) pace: Pace,
}

impl Plan {
    /// A window of `limit` per `window` filled by one call at [`START`], hammered in
    /// its last 3 µs, paced from the next window on.
    pub(crate) fn window(limit: u64, window: u64, pace: Pace) -> Plan {
        Plan {
            fill: vec![(START, limit)],
            fill_wait: 0,
            wait: 0,
            hammer: START + window - 3 * US,
            pace,
        }
    }

    /// A log of `limit` per `window`: `limit` entries one interval apart.
    pub(crate) fn log(limit: u64, window: u64) -> Plan {
        let every = window / limit;
        Plan {
            fill: (0..limit).map(|i| (START + i * every, 1)).collect(),
            ..Plan::window(
                limit,
                window,
                Pace::Every {
                    from: START + window,
                    every,
                },
            )
        }
    }

    /// A bucketed window of `limit` per `window` in buckets of `bucket`: one call
    /// per bucket, of the paced grants it would hold, at the first of them.
    pub(crate) fn buckets(limit: u64, window: u64, bucket: u64, pace: Pace) -> Plan {
        let every = window / limit;
        let mut fill: Vec<(u64, u64)> = Vec::new();
        for i in 0..limit {
            let at = i * every;
            match fill.last_mut() {
                Some((first, cost)) if (*first - START) / bucket == at / bucket => *cost += 1,
                _ => fill.push((START + at, 1)),
            }
        }
        Plan {
            fill,
            ..Plan::window(limit, window, pace)
        }
    }

    /// A leaky bucket of `limit` per `window` filled at [`START`] and hammered
    /// there; one permit drains every interval.
    pub(crate) fn leaky(limit: u64, window: u64, wait: u64) -> Plan {
        let every = window / limit;
        Plan {
            fill: vec![(START, limit)],
            fill_wait: wait,
            wait,
            hammer: START,
            pace: Pace::Every {
                from: START + every,
                every,
            },
        }
    }

    /// A smooth limiter of `every` ns per permit, emptied at [`START`] by one call of
    /// `cost` and hammered there; paced from its next free instant.
    pub(crate) fn smooth(cost: u64, every: u64) -> Plan {
        Plan {
            fill: vec![(START, cost)],
            fill_wait: FOREVER,
            wait: 0,
            hammer: START,
            pace: Pace::AfterPeek { every },
        }
    }
}
