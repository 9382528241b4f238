//! Bad input to the async keyed calls, tested from the public docs alone: typed
//! errors, never a panic, nothing consumed, in memory (the same on Redis in
//! `async_on_redis_from_docs`).

use super::async_common::{runtime, secs, Keyed};

use sluicegate::algorithms::{AllOf, FixedWindow, Limits, SmoothBursty};
use sluicegate::clock::ManualClock;
use sluicegate::stores::Store;
use sluicegate::{Error, KeyedRateLimiter};
use std::time::Duration;

type Guarded = AllOf<(SmoothBursty, FixedWindow)>;

pub(crate) fn guarded() -> Guarded {
    AllOf::new((
        SmoothBursty::new(5.0).unwrap(),
        FixedWindow::new(3, secs(1)).unwrap(),
    ))
}

/// Every async call's documented errors on a set whose window holds 3, and an
/// empty `Limits`, which admits any cost; afterwards no key has been charged.
pub(crate) fn bad_input_is_typed<S, E>(
    limiter: Keyed<Guarded, S, ManualClock>,
    empty: Keyed<Limits, E, ManualClock>,
    rt: &tokio::runtime::Runtime,
) where
    S: Store<&'static str, Guarded> + 'static,
    E: Store<&'static str, Limits> + 'static,
{
    let handle = limiter.to_async();
    rt.block_on(async {
        assert!(matches!(handle.check(&"a", 0).await, Err(Error::ZeroCost)));
        assert!(matches!(
            handle.acquire_n(&"a", 0).await,
            Err(Error::ZeroCost)
        ));
        assert!(matches!(
            handle.acquire_all(&["a"], 0).await,
            Err(Error::ZeroCost)
        ));
        assert!(matches!(
            handle.acquire_all(&[], 1).await,
            Err(Error::InvalidCount { .. })
        ));
        assert!(matches!(
            handle.reserve_all(&[], 1).await,
            Err(Error::InvalidCount { .. })
        ));
        assert!(matches!(
            handle.reserve(&"a", 0).await,
            Err(Error::ZeroCost)
        ));
        assert!(matches!(
            handle.try_acquire_n_timeout(&"a", 0, secs(1)).await,
            Err(Error::ZeroCost)
        ));
        assert_eq!(
            handle.acquire_n(&"a", 4).await,
            Err(Error::Never { cost: 4 })
        );
        assert_eq!(
            handle.acquire_all(&["a", "b"], 4).await,
            Err(Error::Never { cost: 4 })
        );
        assert_eq!(
            handle.acquire_n(&"a", u64::MAX).await,
            Err(Error::Never { cost: u64::MAX })
        );
        assert!(handle.check(&"a", u64::MAX).await.unwrap().is_never());
        assert_eq!(
            handle.try_acquire_n_timeout(&"a", 4, secs(10)).await,
            Ok(false),
            "a cost never grantable cannot be had within any timeout"
        );
        let never = handle.reserve_all(&["a", "b"], 4).await.unwrap();
        assert!(!never.is_ok() && never.decision().is_never());
        assert_eq!(never.decision().limit_index(), 1, "the window refuses 4");
        assert_eq!(never.delay(), Duration::from_nanos(u64::MAX));
        never.cancel_async().await.unwrap(); // not ok: nothing to give back
    });
    assert!(
        limiter.check_all(&["a", "b"], 3).unwrap().is_allowed(),
        "nothing was consumed"
    );

    let free = empty.check(&"k", u64::MAX).unwrap();
    assert!(free.is_allowed(), "an empty set admits any cost: {free:?}");
    assert_eq!((free.limit(), free.remaining()), (u64::MAX, u64::MAX));
    let waited = rt.block_on(empty.to_async().acquire_all(&["k", "j"], u64::MAX));
    assert_eq!(waited, Ok(Duration::ZERO));
}

#[test]
fn bad_input_to_the_async_keyed_calls_is_a_typed_error_in_memory() {
    bad_input_is_typed(
        KeyedRateLimiter::with_clock(guarded(), ManualClock::new()),
        KeyedRateLimiter::with_clock(Limits::new(), ManualClock::new()),
        &runtime(),
    );
}
