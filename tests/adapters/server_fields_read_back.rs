//! The server layer's fields read back by an independent structured-field parser:
//! policy names of any printable ASCII, quotas and windows come back intact, and a
//! refusal's item and `Retry-After` agree with the decision.
#![cfg(feature = "tower")]

use crate::support::adapters::sf_list;
use proptest::prelude::*;
use sluicegate::adapters::server::{Policy, RateLimitHeaders};
use sluicegate::Decision;
use std::time::Duration;

proptest! {
    /// Any printable-ASCII policy names (quotes and backslashes included), quotas
    /// and windows come back intact, a refusal's item says nothing is left
    /// (`r=0`), and its `Retry-After` equals its `t` and is never earlier than
    /// the decision's `retry_after`.
    #[test]
    fn policies_and_refusals_parse_back(
        names in proptest::collection::vec("[ -~]{0,12}", 1..4),
        quota in 0u64..1_000_000_000_000_000,
        window_ms in 0u64..10_000_000,
        retry in 1u64..u64::MAX / 2,
        remaining in 0u64..u64::MAX,
    ) {
        let policies: Vec<Policy> = names
            .iter()
            .map(|n| Policy::new(n.clone(), quota, Duration::from_millis(window_ms)))
            .collect();
        let headers = RateLimitHeaders::new().policies(policies);
        let index = (names.len() - 1) as u32;
        let refusal = Decision::denied(quota, remaining, retry, retry).with_limit_index(index);
        let mut out = http::HeaderMap::new();
        headers.write(&refusal, &mut out);

        let window = window_ms.div_ceil(1000).max(1) as i64;
        let expected: Vec<(String, Vec<(String, i64)>)> = names
            .iter()
            .map(|n| (n.clone(), vec![("q".to_owned(), quota as i64), ("w".to_owned(), window)]))
            .collect();
        prop_assert_eq!(sf_list(&out["ratelimit-policy"]), expected);

        let limit = sf_list(&out["ratelimit"]);
        prop_assert_eq!(limit.len(), 1);
        prop_assert_eq!(&limit[0].0, names.last().unwrap());
        let t = limit[0].1.iter().find(|(k, _)| k == "t").unwrap().1;
        let r = limit[0].1.iter().find(|(k, _)| k == "r").unwrap().1;
        prop_assert_eq!(r, 0);
        let retry_after: u64 = out["retry-after"].to_str().unwrap().parse().unwrap();
        prop_assert_eq!(retry_after, t as u64);
        prop_assert!(u128::from(retry_after) * 1_000_000_000 >= u128::from(retry));
        prop_assert!(u128::from(retry_after - 1) * 1_000_000_000 < u128::from(retry));
    }
}
