//! Shared by the adapter tests: a virtual clock whose async sleeps wait for the test
//! to move time, polling helpers, and a reader of structured-field lists.
#![allow(dead_code)]

use futures::task::noop_waker_ref;
use sluicegate::clock::{duration_to_nanos, Clock, ManualClock, Nanos};
use sluicegate::Error;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// Virtual time whose async sleeps do not move time: a sleep stays pending until the
/// test advances the clock past its end (a zero sleep is ready at once). So a future
/// that had to wait is observably mid-wait, deterministically.
#[derive(Clone, Debug, Default)]
pub struct HeldClock(pub ManualClock);

impl HeldClock {
    pub fn advance(&self, by: Duration) {
        self.0.advance(by);
    }
}

/// The sleep of a [`HeldClock`] (and of the other held clocks in `support`): ready
/// once `clock` reads `until` or later.
pub struct HeldSleep {
    pub clock: ManualClock,
    pub until: Nanos,
}

impl Future for HeldSleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if self.clock.now() >= self.until {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Clock for HeldClock {
    type Sleep = HeldSleep;

    fn now(&self) -> Nanos {
        self.0.now()
    }

    fn sleep(&self, duration: Duration) {
        self.0.sleep(duration);
    }

    fn sleep_async(&self, duration: Duration) -> HeldSleep {
        HeldSleep {
            clock: self.0.clone(),
            until: self.0.now().saturating_add(duration_to_nanos(duration)),
        }
    }
}

/// Polls once with a waker that does nothing.
pub fn poll_once<F: Future + ?Sized>(future: Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(noop_waker_ref()))
}

/// Polls a stream once with a waker that does nothing.
pub fn poll_next<S: futures::Stream + ?Sized>(stream: Pin<&mut S>) -> Poll<Option<S::Item>> {
    stream.poll_next(&mut Context::from_waker(noop_waker_ref()))
}

/// `rate` permits a second with no saved burst: each permit comes its own interval
/// after the last, however long the limiter sat idle.
pub fn unbursting(rate: f64) -> sluicegate::algorithms::SmoothBursty {
    sluicegate::algorithms::SmoothBursty::new(rate)
        .unwrap()
        .with_max_burst(Duration::ZERO)
        .unwrap()
}

/// Seconds as f64, two decimals, for readable schedules.
pub fn secs(nanos: Nanos) -> f64 {
    (nanos as f64 / 1e7).round() / 100.0
}

/// A store that answers asynchronously, like a remote one: its replies arrive one
/// poll late, and it counts its round trips. The states live in a `MemoryStore`.
pub struct Remote<K, A: sluicegate::algorithms::Algorithm> {
    states: sluicegate::stores::MemoryStore<K, A>,
    round_trips: Arc<std::sync::atomic::AtomicUsize>,
    /// Steps taken through the blocking `apply` (a caller's thread waited).
    pub blocking: Arc<std::sync::atomic::AtomicUsize>,
}

impl<K, A: sluicegate::algorithms::Algorithm> Remote<K, A> {
    /// An empty store counting its round trips in `round_trips`.
    pub fn new(round_trips: Arc<std::sync::atomic::AtomicUsize>) -> Self {
        Remote {
            states: sluicegate::stores::MemoryStore::new(),
            round_trips,
            blocking: Arc::default(),
        }
    }
}

impl<K, A> sluicegate::stores::Store<K, A> for Remote<K, A>
where
    K: std::hash::Hash + Eq + Clone + Send + Sync,
    A: sluicegate::algorithms::Algorithm,
{
    type Pending = std::pin::Pin<
        Box<
            dyn std::future::Future<
                    Output = Result<
                        Vec<(sluicegate::Decision, sluicegate::algorithms::Receipt)>,
                        Error,
                    >,
                > + Send,
        >,
    >;

    fn apply(
        &self,
        algorithm: &A,
        keys: &[K],
        now: u64,
        step: sluicegate::stores::Operation<'_>,
        out: &mut [(sluicegate::Decision, sluicegate::algorithms::Receipt)],
    ) -> Result<(), Error> {
        self.round_trips
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.blocking
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.states.apply(algorithm, keys, now, step, out)
    }

    fn apply_key<R: sluicegate::algorithms::Report>(
        &self,
        algorithm: &A,
        key: &K,
        now: u64,
        step: sluicegate::stores::Operation<'_>,
    ) -> Result<R, Error> {
        self.round_trips
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.blocking
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.states.apply_key(algorithm, key, now, step)
    }

    fn cancel_detached(
        &self,
        algorithm: &A,
        keys: &[K],
        now: u64,
        receipts: &[sluicegate::algorithms::Receipt],
        acts_at: u64,
    ) {
        self.round_trips
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.states
            .cancel_detached(algorithm, keys, now, receipts, acts_at)
    }

    fn apply_async(
        &self,
        algorithm: &A,
        keys: &[K],
        now: u64,
        step: sluicegate::stores::Operation<'_>,
    ) -> Self::Pending {
        self.round_trips
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let reply = self.states.apply_async(algorithm, keys, now, step);
        let mut late = true;
        Box::pin(async move {
            // The reply is in flight for one poll.
            futures::future::poll_fn(|cx| {
                if std::mem::take(&mut late) {
                    cx.waker().wake_by_ref();
                    std::task::Poll::Pending
                } else {
                    std::task::Poll::Ready(())
                }
            })
            .await;
            reply.await
        })
    }
}

/// A structured-field List read by `sfv`: each item's name and integer parameters.
#[cfg(feature = "tower")]
pub fn sf_list(value: &http::HeaderValue) -> Vec<(String, Vec<(String, i64)>)> {
    let list: sfv::List = sfv::Parser::new(value.as_bytes()).parse().unwrap();
    list.into_iter()
        .map(|entry| {
            let sfv::ListEntry::Item(item) = entry else {
                panic!("an inner list in {value:?}")
            };
            let name = item.bare_item.as_string().unwrap().as_str().to_owned();
            let params = item
                .params
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), i64::from(v.as_integer().unwrap())))
                .collect();
            (name, params)
        })
        .collect()
}

/// Serves `router` on 127.0.0.1 on a free port, with the peer's address in each
/// request (axum's `ConnectInfo`); answers its base URL.
pub async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = router.into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}/")
}

/// An application answering "hello" on every path and method, and how many times
/// it ran.
pub fn counted_app() -> (axum::Router, Arc<std::sync::atomic::AtomicUsize>) {
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&runs);
    let hello = move || {
        let counter = Arc::clone(&counter);
        async move {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            "hello"
        }
    };
    let router = axum::Router::new()
        .route("/", axum::routing::any(hello.clone()))
        .route("/{*rest}", axum::routing::any(hello));
    (router, runs)
}

/// A request's `x-client` header, or "anon" without one: the key of the server
/// tests' limits.
pub fn client_of(request: &http::Request<axum::body::Body>) -> String {
    request
        .headers()
        .get("x-client")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("anon")
        .to_owned()
}
