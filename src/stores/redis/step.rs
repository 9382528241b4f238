//! One step of the store: the `FCALL` built before anything is sent (or the typed
//! error that refuses it), sent on a blocking or async connection, and its reply
//! read back as one decision and receipt per key: the [`Store`] implementation.
//! The protocol is in the [module docs](super).

use super::algorithm::EXACT;
use super::cancels::Pending;
use super::options::RedisOptions;
use super::reply::{answers_from, cancel_args, reported_from, Layout};
use super::{keys, RedisAlgorithm, RedisStore, TimeSource};
use crate::algorithms::{Decision, Receipt, Report};
use crate::clock::Nanos;
use crate::error::Error;
use crate::stores::store::{blank, check_output, Operation, RenderKey, Reporting, Store};
use futures::future::BoxFuture;
use futures::FutureExt;
use std::hash::BuildHasher;
use std::sync::Arc;

/// One step call, built before anything is sent.
pub(super) struct Request {
    pub(super) keys: Vec<String>,
    pub(super) args: Vec<String>,
    /// Where each key's receipt is in the reply.
    layout: Layout,
    /// The step's cost: a set's receipt records it.
    cost: u64,
}

impl Request {
    /// Restarts the call's deadline (if it has one: a cancel has none) from now,
    /// for a call sent later than it was made.
    fn sent_now(&mut self, options: &RedisOptions) {
        if let Some(deadline) = self.args.get_mut(1).filter(|d| !d.is_empty()) {
            *deadline = options.deadline_from_now();
        }
    }
}

/// What a step's reply carries besides each key's decision.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Answer {
    /// Each key's receipt, to give its grant back by.
    Receipt,
    /// Nothing else: a reserve on one key whose caller keeps no receipt (step code
    /// `k`), which the server answers in the short form without a receipt.
    Bare,
    /// A reserve on one key, with its receipt and how every limit stands after it
    /// (step code `e`).
    Report,
}

impl<K, A: RedisAlgorithm> RedisStore<K, A> {
    /// Builds the call on `keys` (`None` when there is nothing to send), or the
    /// typed error that refuses it before sending, its reply carrying `answer`.
    pub(super) fn request<'k, Q: RenderKey + ?Sized + 'k>(
        &self,
        algorithm: &A,
        keys: impl IntoIterator<Item = &'k Q, IntoIter: ExactSizeIterator>,
        now: Nanos,
        step: Operation<'_>,
        answer: Answer,
    ) -> Result<Option<Request>, Error> {
        let keys = keys.into_iter();
        let count = keys.len();
        // Nothing to send: no key, or a cancel that gives nothing back.
        if count == 0 || (matches!(step, Operation::Cancel { .. }) && !algorithm.cancel_route()?) {
            return Ok(None);
        }
        let mut suffixes = Vec::new();
        algorithm.key_suffixes(&mut suffixes);
        let mut server_keys = Vec::with_capacity(count * suffixes.len());
        let mut text = String::new();
        for key in keys {
            self.push_server_keys(key, &suffixes, &mut text, &mut server_keys);
        }
        if self.cluster && count > 1 {
            keys::check_one_slot(&server_keys)?;
        }
        let (code, cost, max_wait) = match step {
            Operation::Reserve { cost, max_wait } => match answer {
                Answer::Report if count == 1 => ("e", cost, max_wait),
                Answer::Bare if count == 1 => ("k", cost, max_wait),
                _ => ("r", cost, max_wait),
            },
            Operation::Peek { cost } => ("p", cost, 0),
            Operation::Cancel { .. } => ("c", 1, 0),
        };
        let grace = self.options.grace().as_millis().min(u128::from(EXACT));
        let mut config = format!("{grace} {}", A::KIND);
        let mut words = Vec::new();
        algorithm.config_args(&mut words)?;
        for word in &words {
            config.push(' ');
            config.push_str(word);
        }
        // `call`'s ARGV (lua/driver.lua): the call's text, its deadline (none for a
        // cancel, which its caller does not wait for), then `now`, left off at the
        // server's time unless a cancel's grants follow it. The exact cost: Lua's
        // tonumber rounds it as Rust's `cost as f64` does.
        let max_wait = if max_wait == u64::MAX {
            -1
        } else {
            (max_wait / 1_000).min(EXACT - 1) as i64
        };
        let mut args = Vec::with_capacity(3);
        args.push(format!("{config};{code} {cost} {max_wait}"));
        let cancel = matches!(step, Operation::Cancel { .. });
        args.push(if cancel {
            String::new()
        } else {
            self.options.deadline_from_now()
        });
        match self.options.time_source {
            TimeSource::Caller => args.push((now / 1_000).min(EXACT - 1).to_string()),
            TimeSource::Server if cancel => args.push(String::new()),
            TimeSource::Server => {}
        }
        let layout = algorithm.layout();
        if let Operation::Cancel { receipts, acts_at } = step {
            cancel_args(receipts, &layout, acts_at, now, count, &mut args);
        }
        Ok(Some(Request {
            keys: server_keys,
            args,
            layout,
            cost,
        }))
    }

    /// Waits, blocking, until the cancels given to this store before now are
    /// settled (see [`cancels`](super::cancels)): a step must not overtake them.
    /// A step that waited carries a deadline from the end of its wait, when it is
    /// sent.
    fn after_cancels(&self, request: &mut Request) -> Result<(), Error> {
        if let Some(pending) = self.cancels.pending() {
            pending.settled_blocking(self.options.response_timeout)?;
            request.sent_now(&self.options);
        }
        Ok(())
    }

    /// What an async step made now waits for, with the options it then sends by.
    fn pending_cancels(&self) -> Option<(Pending, RedisOptions)> {
        let pending = self.cancels.pending()?;
        Some((pending, self.options.clone()))
    }

    /// Sends the step on `keys` and writes one answer per key into `out` (none
    /// for a cancel, which answers nothing).
    fn run<'k, Q: RenderKey + ?Sized + 'k>(
        &self,
        algorithm: &A,
        keys: impl IntoIterator<Item = &'k Q, IntoIter: ExactSizeIterator>,
        now: Nanos,
        step: Operation<'_>,
        answer: Answer,
        out: &mut [(Decision, Receipt)],
    ) -> Result<(), Error> {
        let Some(mut request) = self.request(algorithm, keys, now, step, answer)? else {
            return Ok(());
        };
        self.after_cancels(&mut request)?;
        let reply = self
            .connections
            .run_blocking(&request.keys, &request.args)?;
        if let Operation::Cancel { .. } = step {
            return Ok(());
        }
        let peek = matches!(step, Operation::Peek { .. });
        answers_from(&reply, out, &request.layout, request.cost, peek)
    }
}

/// For `K` and its borrowed form (`str` for `String` keys), which must render
/// the same text, as the standard library's do.
impl<K, Q, A> Store<Q, A> for RedisStore<K, A>
where
    Q: ToOwned<Owned = K> + RenderKey + ?Sized,
    A: RedisAlgorithm,
{
    type Pending = BoxFuture<'static, Result<Vec<(Decision, Receipt)>, Error>>;

    fn apply(
        &self,
        algorithm: &A,
        keys: &[Q],
        now: Nanos,
        step: Operation<'_>,
        out: &mut [(Decision, Receipt)],
    ) -> Result<(), Error>
    where
        Q: Sized,
    {
        check_output(keys.len(), out.len())?;
        self.run(algorithm, keys, now, step, Answer::Receipt, out)
    }

    /// A report that keeps no receipt is answered without one: for a set, its
    /// members' receipts are most of the reply. The call is checked before it is
    /// sent: a configuration the server cannot hold exactly is a typed error, and
    /// a server that cannot be reached fails the call with
    /// [`Applied::No`](crate::Applied::No).
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::redis::RedisStore;
    /// use sluicegate::stores::{Operation, Store};
    /// use sluicegate::{Applied, Decision, Error};
    /// use std::time::Duration;
    /// let store: RedisStore<&str, FixedWindow> =
    ///     RedisStore::open("redis+unix:///nonexistent/redis.sock").unwrap(); // no server
    /// let take = Operation::Reserve { cost: 1, max_wait: 0 };
    /// let window = FixedWindow::new(5, Duration::from_secs(1)).unwrap();
    /// let taken: Result<Result<(), Decision>, Error> = store.apply_key(&window, &"k", 0, take);
    /// let Err(Error::Store(failure)) = taken else { panic!("{taken:?}") };
    /// assert_eq!(failure.applied(), Applied::No); // never sent: safe to retry
    /// let odd = FixedWindow::new(5, Duration::from_nanos(1_500)).unwrap(); // not whole µs
    /// let refused: Result<Decision, Error> = store.apply_key(&odd, &"k", 0, take);
    /// assert!(matches!(refused, Err(Error::InvalidDuration { .. })), "{refused:?}");
    /// ```
    fn apply_key<R: Report>(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
    ) -> Result<R, Error> {
        let mut out = [blank()];
        let answer = if R::KEEPS_RECEIPT {
            Answer::Receipt
        } else {
            Answer::Bare
        };
        self.run(algorithm, [key], now, step, answer, &mut out)?;
        let [(decision, receipt)] = out;
        Ok(R::decided(decision, receipt))
    }

    /// A reserve runs and reports in one call: the server appends each limit's
    /// standing to the key's decision.
    fn apply_key_each(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
        each: &mut dyn FnMut(Decision),
    ) -> Result<(Decision, Receipt), Error> {
        let Some(mut request) = self.request(algorithm, [key], now, step, Answer::Report)? else {
            return Ok(blank());
        };
        self.after_cancels(&mut request)?;
        let reply = self
            .connections
            .run_blocking(&request.keys, &request.args)?;
        let (answer, limits) = reported_from(&reply, &step, &request.layout)?;
        limits.into_iter().for_each(each);
        Ok(answer)
    }

    fn apply_key_each_async(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
    ) -> Reporting
    where
        Q: Sized,
    {
        let mut request = match self.request(algorithm, [key], now, step, Answer::Report) {
            Ok(Some(request)) => request,
            Ok(None) => return Box::pin(futures::future::ready(Ok((blank(), Vec::new())))),
            Err(e) => return Box::pin(futures::future::ready(Err(e))),
        };
        // The future owns what it needs: the request, and what kind of step it is.
        let step: Operation<'static> = match step {
            Operation::Reserve { cost, max_wait } => Operation::Reserve { cost, max_wait },
            Operation::Peek { cost } => Operation::Peek { cost },
            Operation::Cancel { .. } => Operation::Cancel {
                receipts: &[],
                acts_at: 0,
            },
        };
        let connections = Arc::clone(&self.connections);
        let pending = self.pending_cancels();
        Box::pin(async move {
            if let Some((pending, options)) = pending {
                pending.settled(options.response_timeout).await?;
                request.sent_now(&options);
            }
            let reply = connections.run_async(request.keys, request.args).await?;
            reported_from(&reply, &step, &request.layout)
        })
    }

    fn apply_async(
        &self,
        algorithm: &A,
        keys: &[Q],
        now: Nanos,
        step: Operation<'_>,
    ) -> Self::Pending
    where
        Q: Sized,
    {
        let blank = vec![blank(); keys.len()];
        let mut request = match self.request(algorithm, keys, now, step, Answer::Receipt) {
            Ok(Some(request)) => request,
            Ok(None) => return futures::future::ready(Ok(blank)).boxed(),
            Err(e) => return futures::future::ready(Err(e)).boxed(),
        };
        // The future owns what it needs: the request, and what kind of step it is.
        let (cancel, peek) = (
            matches!(step, Operation::Cancel { .. }),
            matches!(step, Operation::Peek { .. }),
        );
        let connections = Arc::clone(&self.connections);
        let pending = self.pending_cancels();
        async move {
            if let Some((pending, options)) = pending {
                pending.settled(options.response_timeout).await?;
                request.sent_now(&options);
            }
            let reply = connections.run_async(request.keys, request.args).await?;
            let mut out = blank;
            if !cancel {
                answers_from(&reply, &mut out, &request.layout, request.cost, peek)?;
            }
            Ok(out)
        }
        .boxed()
    }

    /// Sends the cancel after every cancel given to this store (or a clone) before
    /// it, in order, each once the one before has been answered, and ahead of
    /// every step made after it (which waits for it, at most the response
    /// timeout), and returns at once: inside a multi-thread tokio runtime one task
    /// sends the queued cancels on the multiplexed connection; inside a
    /// current-thread runtime (which runs tasks only while driven, so a blocking
    /// step on its thread would wait for them in vain) a task of the store's own
    /// runtime does; outside one the calling thread sends them on a blocking
    /// connection, each waiting at most the response timeout, unless a sender is
    /// already at work. Replies and failures
    /// are not awaited by the caller (a lost cancel leaves the permits taken).
    fn cancel_detached(
        &self,
        algorithm: &A,
        keys: &[Q],
        now: Nanos,
        receipts: &[Receipt],
        acts_at: Nanos,
    ) where
        Q: Sized,
    {
        let step = Operation::Cancel { receipts, acts_at };
        if let Ok(Some(request)) = self.request(algorithm, keys, now, step, Answer::Receipt) {
            self.cancels.send(&self.connections, request);
        }
    }

    /// A hash of the key's text, keyed at random per store (clones share it).
    fn key_id(&self, key: &Q) -> Option<u64> {
        let mut text = String::new();
        key.render_key(&mut text);
        Some(self.ids.hash_one(text))
    }
}
