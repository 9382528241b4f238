//! What the tests of the Redis store's own behaviour share: one reserve of 1 on a
//! key, at 1 s, and its decision.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;

use redis_support::{take, SECOND};
use sluicegate::algorithms::FixedWindow;
use sluicegate::algorithms::Receipt;
use sluicegate::stores::redis::RedisStore;
use sluicegate::stores::Store;
use sluicegate::Decision;

/// One reserve of 1 on `k` at 1 s: its decision.
pub(crate) fn take_one(store: &RedisStore<&str, FixedWindow>, fw: &FixedWindow) -> Decision {
    store
        .apply_key::<(Decision, Receipt)>(fw, &"k", SECOND, take(1))
        .map(|(d, _)| d)
        .unwrap()
}
