//! A row of the table: one algorithm at one limit on the Redis store, filled by
//! pipelined calls and measured in each regime, every call's decision counted.

use super::measure::{Bench, Measured};
use super::plan::{Pace, Plan};
use crate::redis_server;
use crate::{BATCH, START, US};
use sluicegate::algorithms::{Decision, Receipt};
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore, TimeSource};
use sluicegate::stores::{Operation, Store};
use std::time::{Duration, Instant};

/// A row of the table: one algorithm at one limit, in each regime.
pub(crate) trait Case {
    fn name(&self) -> &str;
    /// Measures every regime once: (fill time, a figure per regime).
    fn run(&self, bench: &mut Bench) -> (Duration, [Measured; 3]);
}

struct Row<A> {
    name: String,
    algorithm: A,
    plan: Plan,
}

pub(crate) fn row<A: RedisAlgorithm + 'static>(
    name: String,
    algorithm: A,
    plan: Plan,
) -> Box<dyn Case> {
    Box::new(Row {
        name,
        algorithm,
        plan,
    })
}

fn reserve(cost: u64, max_wait: u64) -> Operation<'static> {
    Operation::Reserve { cost, max_wait }
}

impl<A: RedisAlgorithm> Case for Row<A> {
    fn name(&self) -> &str {
        &self.name
    }

    fn run(&self, bench: &mut Bench) -> (Duration, [Measured; 3]) {
        let (name, plan, algorithm) = (&self.name, &self.plan, &self.algorithm);
        bench.flush();
        let options = RedisOptions::default()
            .prefix("regimes:")
            .unwrap()
            .time_source(TimeSource::Caller)
            .expiry_grace(Duration::from_secs(3600))
            .response_timeout(Duration::from_secs(60));
        let store: RedisStore<String, A> =
            RedisStore::open_with(&bench.server.url, options).unwrap();
        let receipts = bench.receipts;
        let apply = |key: &String, now: u64, step: Operation<'_>| {
            let decision = if receipts {
                store
                    .apply_key::<(Decision, Receipt)>(algorithm, key, now, step)
                    .map(|(decision, _)| decision)
            } else {
                store.apply_key::<Decision>(algorithm, key, now, step)
            };
            decision.unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        // Loads the library and builds this configuration's step, on a key of its own.
        apply(&"warm".to_owned(), START, reserve(1, 0));
        let hot = "hot".to_owned();

        // The fill, pipelined, every call granted.
        let started = Instant::now();
        let function = redis_server::function_name(&mut bench.admin);
        for batch in plan.fill.chunks(BATCH) {
            let mut pipe = redis::pipe();
            for &(at, cost) in batch {
                let (keys, args) = store
                    .step_call(algorithm, &hot, at, reserve(cost, plan.fill_wait))
                    .unwrap();
                pipe.cmd("FCALL")
                    .arg(&function)
                    .arg(keys.len())
                    .arg(keys)
                    .arg(args);
            }
            let replies: Vec<redis::Value> = pipe.query(&mut bench.admin).unwrap();
            let replies = replies
                .into_iter()
                .map(|r| RedisStore::<String, A>::step_reply(r).unwrap());
            for (reply, (at, cost)) in replies.zip(batch) {
                assert_eq!(
                    reply.first(),
                    Some(&0),
                    "{name}: the fill's call of {cost} at {} µs was not granted: {reply:?}",
                    (at - START) / US
                );
            }
        }
        let fill = started.elapsed();

        let hammer = plan.hammer;
        let hammered = bench.measure(name, false, |i| {
            apply(&hot, hammer + i % 3 * US, reserve(1, plan.wait)).is_allowed()
        });
        assert_eq!(
            hammered.granted, 0,
            "{name}, hammered: {} of {} calls granted (every call must be refused)",
            hammered.granted, bench.calls
        );

        let at: Box<dyn Fn(u64) -> u64> = match plan.pace {
            Pace::Every { from, every } => Box::new(move |i| from + i * every),
            Pace::SkipWindowStart { from, every, limit } => Box::new(move |i| {
                from + i / (limit - 1) * every * limit + (1 + i % (limit - 1)) * every
            }),
            Pace::AfterPeek { every } => {
                let peek = apply(&hot, hammer, Operation::Peek { cost: 1 });
                assert!(!peek.is_allowed(), "{name}: the filled key admits a call");
                let from = (hammer + peek.retry_after_nanos()).div_ceil(US) * US;
                Box::new(move |i| from + i * every)
            }
        };
        let granted = bench.measure(name, false, |i| {
            apply(&hot, at(i), reserve(1, plan.wait)).is_allowed()
        });
        assert_eq!(
            granted.granted, bench.calls,
            "{name}, granted: {} of {} calls granted (every call must be)",
            granted.granted, bench.calls
        );

        let fresh = bench.measure(name, true, |i| {
            apply(&format!("fresh{i}"), START + i * US, reserve(1, plan.wait)).is_allowed()
        });
        assert_eq!(
            fresh.granted, bench.calls,
            "{name}, fresh: {} of {} calls granted (every call must be)",
            fresh.granted, bench.calls
        );
        (fill, [hammered, granted, fresh])
    }
}
