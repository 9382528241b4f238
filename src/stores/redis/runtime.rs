//! Where the async side runs: redis-rs's async connections are tokio's (its
//! `tokio-comp`), whose I/O and timers need a tokio runtime, while the crate's
//! async API is runtime-agnostic (a bare `futures::executor::block_on`,
//! async-std, smol). So a call made inside a tokio runtime runs there, as it is;
//! a call made outside one runs as a task on the store's own runtime, one thread
//! started by the first such call and shared by every store of the process, and
//! the caller awaits its answer from any executor. Dropping the caller's future
//! aborts the task, as dropping it inside a runtime would drop the call.

use super::connection::failure;
use crate::error::{Applied, Error};
use parking_lot::Mutex;
use redis::{ErrorKind, RedisError};
use std::future::Future;
use tokio::runtime::{Builder, Handle};
use tokio::task::JoinHandle;

/// Runs `call` inside a tokio runtime: the caller's if it is in one, else the
/// store's own (see the module docs).
pub(super) async fn in_tokio<T, F>(call: F) -> Result<T, Error>
where
    F: Future<Output = Result<T, Error>> + Send + 'static,
    T: Send + 'static,
{
    if Handle::try_current().is_ok() {
        return call.await;
    }
    let mut task = Aborting(own()?.spawn(call));
    match (&mut task.0).await {
        Ok(answer) => answer,
        // The task panicked or was cancelled: the call may have been sent.
        Err(e) => Err(failure(
            Applied::Unknown,
            RedisError::from((
                ErrorKind::Io,
                "the call's task on the store's own runtime ended without an answer",
                e.to_string(),
            )),
        )),
    }
}

/// The store's own runtime, started on a thread of its own the first time it is
/// needed. A failure to start it (no thread can be spawned) is the call's error,
/// and the next call tries again. It also sends the cancels given on a
/// current-thread runtime (see `cancels.rs`).
pub(super) fn own() -> Result<Handle, Error> {
    static OWN: Mutex<Option<Handle>> = Mutex::new(None);
    let mut own = OWN.lock();
    if let Some(handle) = &*own {
        return Ok(handle.clone());
    }
    let not_started = |e: std::io::Error| {
        failure(
            Applied::No,
            RedisError::from((
                ErrorKind::Io,
                "cannot start the runtime that runs async calls made outside a tokio runtime",
                e.to_string(),
            )),
        )
    };
    let runtime = Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(not_started)?;
    let handle = runtime.handle().clone();
    std::thread::Builder::new()
        .name("sluicegate-redis".to_owned())
        // A current-thread runtime runs its tasks while it blocks on something:
        // here, for ever.
        .spawn(move || runtime.block_on(std::future::pending::<()>()))
        .map_err(not_started)?;
    *own = Some(handle.clone());
    Ok(handle)
}

/// A task aborted when its caller stops waiting for it.
struct Aborting<T>(JoinHandle<T>);

impl<T> Drop for Aborting<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
