//! Detached cancels, sent one after another in the order they were given.
//!
//! By the cancel rule a grant gives back only what the grants after it leave, so
//! the order of cancels matters: the async keyed limiter gives back the latest of
//! several abandoned grants first, and the server must run them in that order.
//! Requests handed to separate tasks would reach the server in the order the
//! tasks happen to run; so the cancels of one store wait in one queue, and a
//! single sender at a time takes them from its front, sending each once the one
//! before it has been answered (or has failed): on a task of the tokio runtime
//! the cancel was given on, or, outside one, on the calling thread over a
//! blocking connection. A cancel given while a sender is at work joins the queue
//! behind the others and is sent by that sender.

use super::connection::Connections;
use super::step::Request;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;

/// The cancels of one store (shared by its clones) waiting to be sent.
#[derive(Default)]
pub(super) struct Cancels {
    queue: Mutex<Queue>,
}

#[derive(Default)]
struct Queue {
    requests: VecDeque<Request>,
    /// A sender is at work: it will send what joins the queue.
    sending: bool,
}

impl Cancels {
    /// Sends `request` after every cancel given before it, without waiting for
    /// its reply (inside a tokio runtime, without waiting at all).
    pub(super) fn send(self: &Arc<Self>, connections: &Arc<Connections>, request: Request) {
        {
            let mut queue = self.queue.lock();
            queue.requests.push_back(request);
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
            Ok(runtime) => {
                let connections = Arc::clone(connections);
                runtime.spawn(sender.send_async(connections));
            }
            Err(_) => sender.send_blocking(connections),
        }
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
        }
    }

    fn send_blocking(mut self, connections: &Connections) {
        while let Some(request) = self.next() {
            let _ = connections.run_blocking(&request.keys, &request.args);
        }
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        if !self.done {
            let mut queue = self.cancels.queue.lock();
            queue.requests.clear();
            queue.sending = false;
        }
    }
}
