//! A store that is always down, for trying a failure policy.

use crate::algorithms::{Algorithm, Decision, Receipt, Report};
use crate::clock::Nanos;
use crate::error::{Applied, Error, StoreError};
use crate::stores::{Operation, Store};

/// A [`Store`] whose every step fails with [`Error::Store`] ([`Applied::No`]):
/// a server that refuses connections, without a server. For trying a
/// [`FailoverStore`](super::FailoverStore)'s policy in tests and examples.
///
/// ```
/// use sluicegate::algorithms::FixedWindow;
/// use sluicegate::stores::failover::Unreachable;
/// use sluicegate::stores::{Operation, Store};
/// use sluicegate::{Applied, Decision, Error};
/// let window = FixedWindow::new(1, std::time::Duration::from_secs(1)).unwrap();
/// let step = Operation::Reserve { cost: 1, max_wait: 0 };
/// let err = Store::<&str, _>::apply_key::<Decision>(&Unreachable, &window, &"k", 0, step).unwrap_err();
/// assert!(matches!(err, Error::Store(e) if e.applied() == Applied::No));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Unreachable;

fn down() -> Error {
    Error::Store(StoreError::new(
        "unreachable",
        Applied::No,
        "the store is unreachable",
    ))
}

impl<K: ?Sized, A: Algorithm> Store<K, A> for Unreachable {
    type Pending = futures::future::Ready<Result<Vec<(Decision, Receipt)>, Error>>;

    fn apply(
        &self,
        _: &A,
        _: &[K],
        _: Nanos,
        _: Operation<'_>,
        _: &mut [(Decision, Receipt)],
    ) -> Result<(), Error>
    where
        K: Sized,
    {
        Err(down())
    }

    fn apply_key<R: Report>(&self, _: &A, _: &K, _: Nanos, _: Operation<'_>) -> Result<R, Error> {
        Err(down())
    }

    fn apply_async(&self, _: &A, _: &[K], _: Nanos, _: Operation<'_>) -> Self::Pending
    where
        K: Sized,
    {
        futures::future::ready(Err(down()))
    }

    fn cancel_detached(&self, _: &A, _: &[K], _: Nanos, _: &[Receipt], _: Nanos)
    where
        K: Sized,
    {
    }
}
