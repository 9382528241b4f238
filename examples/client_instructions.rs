//! The measurement harness for the client layer's cost per request, in
//! instructions (repeatable on a loaded machine, unlike wall-clock time):
//!
//! ```text
//! cargo build --release --example client_instructions --features tower
//! B=target/release/examples/client_instructions
//! valgrind --tool=callgrind --toggle-collect='*measured*' $B honouring 2000
//! valgrind --tool=callgrind --toggle-collect='*measured*' $B honouring 12000
//! ```
//!
//! The two counts' difference over the 10,000 extra requests is the cost of one
//! request (the setup and the first request are counted in both). `bare`: the
//! inner service called directly; `alone`: through the client layer over a
//! direct leaky meter that grants every request at once; `honouring`: the same,
//! also honouring the server (a `HoldBack` looked up before the request and the
//! `200`, without fields, read after it). Each request is driven to its response
//! by `futures::executor::block_on`, whose cost is in every row, `bare` included.

use futures::executor::block_on;
use http::{Request, Response};
use sluicegate::adapters::client::ClientLayer;
use sluicegate::adapters::HoldBack;
use sluicegate::algorithms::LeakyBucket;
use sluicegate::clock::ManualClock;
use sluicegate::RateLimiter;
use std::convert::Infallible;
use std::hint::black_box;
use std::time::Duration;
use tower::{service_fn, Layer, Service};

#[inline(never)]
fn measured<S: Service<Request<()>>>(service: &mut S) -> bool {
    block_on(service.call(Request::new(()))).is_ok()
}

fn run<S: Service<Request<()>>>(mut service: S, count: usize) {
    let ok = (0..count)
        .filter(|_| black_box(measured(&mut service)))
        .count();
    assert_eq!(ok, count, "every request answered");
}

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "honouring".into());
    let count: usize = args.next().map_or(12_000, |n| n.parse().expect("a count"));
    let inner = service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new(())) });
    // Virtual time that stays at 0: a meter of a million never refuses these.
    let clock = ManualClock::new();
    let meter = LeakyBucket::meter(1_000_000, 1_000_000, Duration::from_secs(1)).unwrap();
    let limiter = RateLimiter::with_clock(meter, clock.clone());
    match which.as_str() {
        "bare" => run(inner, count),
        "alone" => run(ClientLayer::new(limiter).layer(inner), count),
        "honouring" => run(
            ClientLayer::new(limiter)
                .honour_server(HoldBack::new(clock))
                .layer(inner),
            count,
        ),
        other => panic!("bare, alone or honouring, not {other}"),
    }
}
