//! Detached cancels, sent one after another in the order they were given, and
//! ahead of every later step of the same store.
//!
//! By the cancel rule a grant gives back only what the grants after it leave, so
//! the order of cancels matters: the async keyed limiter gives back the latest of
//! several abandoned grants first, and the server must run them in that order.
//! Requests handed to separate tasks would reach the server in the order the
//! tasks happen to run; so the cancels of one store wait in one queue, and a
//! single sender at a time takes them from its front, sending each once the one
//! before it has been answered (or has failed): on a task of the multi-thread
//! tokio runtime the cancel was given on; on a task of the store's own runtime
//! (see `runtime.rs`) when given on a current-thread runtime, which runs its tasks
//! only while it is driven; or, outside a runtime, on the calling thread over a
//! blocking connection. A cancel given while a sender is at work joins the queue
//! behind the others and is sent by that sender.
//!
//! A step of the store made after a cancel was given must not overtake it: a
//! request made right after others timed out would otherwise reach the server
//! first, count as a grant after theirs, and leave them nothing to give back. So
//! every step first waits until the cancels given before it have been answered
//! (or have failed, or were dropped), at most the response timeout; when none is
//! pending, which is almost always, that is one uncontended lock.

use super::connection::Connections;
use super::runtime::own as own_runtime;
use super::step::Request;
use crate::error::{Applied, Error, StoreError};
use futures::future::{select, Either};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::RuntimeFlavor;
use tokio::sync::watch;

/// The cancels of one store (shared by its clones) waiting to be sent.
pub(super) struct Cancels {
    queue: Mutex<Queue>,
    /// How many of the cancels given so far are settled: answered, failed, or
    /// dropped unsent. Steps wait on it.
    settled: watch::Sender<u64>,
}

impl Default for Cancels {
    fn default() -> Self {
        Cancels {
            queue: Mutex::default(),
            settled: watch::Sender::new(0),
        }
    }
}

#[derive(Default)]
struct Queue {
    requests: VecDeque<Request>,
    /// A sender is at work: it will send what joins the queue.
    sending: bool,
    /// How many cancels were given so far.
    given: u64,
}

/// A step's wait for the cancels given before it: until as many are settled.
pub(super) struct Pending {
    settled: watch::Receiver<u64>,
    given: u64,
}

impl Pending {
    /// Waits until the cancels given before the step are settled, at most
    /// `timeout`; after it, the step fails unsent, as one that timed out
    /// connecting: the server has not answered the cancels ahead of it.
    pub(super) async fn settled(mut self, timeout: Duration) -> Result<(), Error> {
        let given = self.given;
        let settled = self.settled.wait_for(move |settled| *settled >= given);
        match select(Box::pin(settled), futures_timer::Delay::new(timeout)).await {
            Either::Left(_) => Ok(()),
            Either::Right(_) => {
                let text = format!(
                    "timed out after {timeout:?} waiting for this store's earlier cancels to \
                     be answered (the response timeout); the step was not sent"
                );
                let source = std::io::Error::new(std::io::ErrorKind::TimedOut, text);
                Err(Error::Store(StoreError::new("redis", Applied::No, source)))
            }
        }
    }

    /// [`settled`](Self::settled), blocking the calling thread.
    pub(super) fn settled_blocking(self, timeout: Duration) -> Result<(), Error> {
        futures::executor::block_on(self.settled(timeout))
    }
}

impl Cancels {
    /// Sends `request` after every cancel given before it, without waiting for
    /// its reply (inside a tokio runtime, without waiting at all).
    pub(super) fn send(self: &Arc<Self>, connections: &Arc<Connections>, request: Request) {
        {
            let mut queue = self.queue.lock();
            queue.requests.push_back(request);
            queue.given += 1;
            if queue.sending {
                return;
            }
            queue.sending = true;
        }
        let sender = Sender {
            cancels: Arc::clone(self),
            done: false,
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if runtime.runtime_flavor() != RuntimeFlavor::CurrentThread => {
                let connections = Arc::clone(connections);
                runtime.spawn(sender.send_async(connections));
            }
            // A current-thread runtime runs its tasks only while it is driven: a
            // blocking step on its thread, or one made between its `block_on`s,
            // would wait for a sender that cannot run. The store's own runtime
            // sends them instead; should it not start, they are dropped unsent
            // (their permits stay taken, the safe direction).
            Ok(_) => {
                if let Ok(own) = own_runtime() {
                    let connections = Arc::clone(connections);
                    own.spawn(sender.send_async(connections));
                }
            }
            Err(_) => sender.send_blocking(connections),
        }
    }

    /// What a step made now waits for: `None` when every cancel given so far is
    /// settled.
    pub(super) fn pending(&self) -> Option<Pending> {
        let given = self.queue.lock().given;
        if *self.settled.borrow() >= given {
            return None;
        }
        Some(Pending {
            settled: self.settled.subscribe(),
            given,
        })
    }

    /// Counts `n` more cancels settled, waking the steps that wait for them.
    fn settle(&self, n: u64) {
        self.settled.send_modify(|settled| *settled += n);
    }
}

/// The one sender at work. Should its task be dropped before the queue is empty
/// (its runtime shut down), the cancels left are dropped with it, so that none is
/// sent long after it was made: their permits stay taken, the safe direction.
struct Sender {
    cancels: Arc<Cancels>,
    done: bool,
}

impl Sender {
    /// The next cancel to send; `None` once the queue is empty, which ends the
    /// sender's work.
    fn next(&mut self) -> Option<Request> {
        let mut queue = self.cancels.queue.lock();
        let next = queue.requests.pop_front();
        if next.is_none() {
            queue.sending = false;
            self.done = true;
        }
        next
    }

    async fn send_async(mut self, connections: Arc<Connections>) {
        while let Some(request) = self.next() {
            // A failed cancel leaves its permits taken; the next one still goes.
            let _ = Arc::clone(&connections)
                .run_async(request.keys, request.args)
                .await;
            self.cancels.settle(1);
        }
    }

    fn send_blocking(mut self, connections: &Connections) {
        while let Some(request) = self.next() {
            let _ = connections.run_blocking(&request.keys, &request.args);
            self.cancels.settle(1);
        }
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        if !self.done {
            let mut queue = self.cancels.queue.lock();
            let dropped = queue.requests.len() as u64;
            queue.requests.clear();
            queue.sending = false;
            drop(queue);
            self.cancels.settle(dropped);
        }
    }
}
