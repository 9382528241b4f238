//! The server layer's keys as its public docs describe them, checked over real
//! HTTP: keys from a header limited apart, partition keys that are the SipHash of
//! the key under the secret, and `client_ip` walking `Forwarded` lines from the
//! right.
#![cfg(feature = "tower")]

use super::server_http::get;
use crate::support::adapters::{client_of, counted_app, serve};
use axum::body::Body;
use http::{HeaderMap, Request};
use sluicegate::adapters::server::ServerLayer;
use sluicegate::algorithms::FixedWindow;
use sluicegate::clock::ManualClock;
use sluicegate::KeyedRateLimiter;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// `ServerLayer::keyed`: "One permit of the keyed limiter per request, charged to
/// the key `key` gives it". A key exhausted refuses only itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_from_a_header_are_limited_apart_and_refusals_never_reach_the_app() {
    let window = FixedWindow::new(2, Duration::from_secs(60)).unwrap();
    let limiter = KeyedRateLimiter::with_clock(window, ManualClock::new());
    let (router, runs) = counted_app();
    let base = serve(router.layer(ServerLayer::keyed(limiter.clone(), client_of))).await;
    let client = reqwest::Client::new();

    let mut statuses = Vec::new();
    for who in ["ann", "ann", "ann", "ann", "bob"] {
        statuses.push(get(&client, &base, &[("x-client", who)]).await.status);
    }
    let anonymous = get(&client, &base, &[]).await;
    assert_eq!(statuses, [200, 200, 429, 429, 200]);
    assert_eq!(
        (anonymous.status, anonymous.field("ratelimit")),
        (200, r#""default";r=1;t=60"#.to_owned())
    );
    assert_eq!(
        runs.load(Ordering::SeqCst),
        4,
        "only the granted requests ran"
    );
    // What the limiter holds: bob and anon each spent one, ann both.
    assert_eq!(limiter.peek("bob", 1).map(|d| d.remaining()), Ok(0));
    assert_eq!(limiter.peek("ann", 1).map(|d| d.is_allowed()), Ok(false));
}

/// SipHash-2-4 of `bytes` under the 16-byte key, by std's own (deprecated, but
/// SipHash-2-4) hasher: the reference algorithm, keyed as the reference keys it
/// (two little-endian words), its 64-bit result as little-endian bytes.
#[allow(deprecated)]
fn reference_siphash(secret: [u8; 16], bytes: &[u8]) -> [u8; 8] {
    use std::hash::Hasher;
    let k0 = u64::from_le_bytes(secret[..8].try_into().unwrap());
    let k1 = u64::from_le_bytes(secret[8..].try_into().unwrap());
    let mut hasher = std::hash::SipHasher::new_with_keys(k0, k1);
    hasher.write(bytes);
    hasher.finish().to_le_bytes()
}

/// The `pk` parameter of every item in a `RateLimit` field.
fn partition_keys(value: &str) -> Vec<Vec<u8>> {
    let list: sfv::List = sfv::Parser::new(value.as_bytes()).parse().unwrap();
    list.into_iter()
        .map(|entry| {
            let sfv::ListEntry::Item(item) = entry else {
                panic!("an inner list in {value}")
            };
            let (_, pk) = item
                .params
                .iter()
                .find(|(k, _)| k.as_str() == "pk")
                .expect("a pk");
            pk.as_byte_sequence().expect("pk is an sf-binary").to_vec()
        })
        .collect()
}

/// `partition_keys`: "8 bytes (an sf-binary, `pk=:…:`) that are the SipHash-2-4
/// of the request's limiter key under the 128-bit `secret`, never the key itself
/// ... the key is hashed as its `Hash` implementation writes it, integers in
/// little-endian on every platform. `RateLimit-Policy` carries no `pk`".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_keys_are_the_siphash_of_the_key_under_the_secret() {
    // The reference's own test vector (key 00..0f, message 00..07), so that the
    // oracle is the reference algorithm.
    let secret: [u8; 16] = std::array::from_fn(|i| i as u8);
    let message: [u8; 8] = std::array::from_fn(|i| i as u8);
    assert_eq!(
        reference_siphash(secret, &message),
        [0x62, 0x24, 0x93, 0x9a, 0x79, 0xf5, 0xf5, 0x93]
    );

    let window = FixedWindow::new(10, Duration::from_secs(60)).unwrap();
    let limiter: KeyedRateLimiter<u64, FixedWindow, _, _> =
        KeyedRateLimiter::with_clock(window, ManualClock::new());
    let by_id =
        |r: &Request<Body>| -> u64 { r.headers()["x-id"].to_str().unwrap().parse().unwrap() };
    let layer = ServerLayer::keyed(limiter, by_id).partition_keys(secret);
    let (router, _) = counted_app();
    let base = serve(router.layer(layer)).await;
    let client = reqwest::Client::new();

    let key = u64::from_le_bytes(message); // written as the bytes 00..07
    let seen = get(&client, &base, &[("x-id", &key.to_string())]).await;
    assert_eq!(
        partition_keys(&seen.field("ratelimit")),
        [reference_siphash(secret, &message).to_vec()]
    );
    assert!(!seen.field("ratelimit-policy").contains("pk"));
    let other = get(&client, &base, &[("x-id", "7")]).await;
    assert_eq!(
        partition_keys(&other.field("ratelimit")),
        [reference_siphash(secret, &7u64.to_le_bytes()).to_vec()]
    );
}

/// `partition_keys`: "the key is hashed as its `Hash` implementation writes it":
/// a `String` writes its bytes and then `0xff` (`Hasher::write_str`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_string_keys_partition_key_is_the_siphash_of_what_its_hash_writes() {
    let secret = *b"a secret of 16 b";
    let window = FixedWindow::new(10, Duration::from_secs(60)).unwrap();
    let limiter = KeyedRateLimiter::with_clock(window, ManualClock::new());
    let layer = ServerLayer::keyed(limiter, client_of).partition_keys(secret);
    let (router, _) = counted_app();
    let base = serve(router.layer(layer)).await;
    let client = reqwest::Client::new();

    let seen = get(&client, &base, &[("x-client", "user-42")]).await;
    assert_eq!(
        partition_keys(&seen.field("ratelimit")),
        [reference_siphash(secret, b"user-42\xff").to_vec()]
    );
}

/// `client_ip`: behind trusted proxies "the walk goes from the right (the last
/// hop) leftwards, skipping trusted addresses, and stops at the first untrusted
/// one"; "An entry that is not an address ... stops the walk at the trusted hop
/// that wrote it, which is then the key"; "If every hop is trusted, the left-most
/// is the answer. Every line of the field counts, in order, as one list."
#[test]
fn client_ip_walks_forwarded_lines_from_the_right_as_documented() {
    use sluicegate::adapters::server::{client_ip, Forwarding};
    use std::net::IpAddr;
    let ip = |text: &str| text.parse::<IpAddr>().unwrap();
    let ours = |address: IpAddr| matches!(address, IpAddr::V4(v4) if v4.octets()[0] == 10);
    let proxy = ip("10.0.0.2");
    let field = |name: &str, lines: &[&str]| {
        let mut headers = HeaderMap::new();
        for line in lines {
            headers.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                line.parse().unwrap(),
            );
        }
        headers
    };

    let rfc7239 = field(
        "forwarded",
        &[
            r#"for=192.0.2.60;proto=http, for="[2001:db8::1]:4711""#,
            "for=10.0.0.5",
        ],
    );
    assert_eq!(
        client_ip(proxy, &rfc7239, Forwarding::Forwarded, ours),
        ip("2001:db8::1")
    );
    let unknown = field(
        "forwarded",
        &["for=198.51.100.1, for=unknown, for=10.0.0.7"],
    );
    assert_eq!(
        client_ip(proxy, &unknown, Forwarding::Forwarded, ours),
        ip("10.0.0.7")
    );
    let written_by_peer = field("x-forwarded-for", &["1.2.3.4, garbage"]);
    assert_eq!(
        client_ip(proxy, &written_by_peer, Forwarding::XForwardedFor, ours),
        proxy
    );
    let all_ours = field("x-forwarded-for", &["10.0.0.9, 10.0.0.8"]);
    assert_eq!(
        client_ip(proxy, &all_ours, Forwarding::XForwardedFor, ours),
        ip("10.0.0.9")
    );
    let two_lines = field(
        "x-forwarded-for",
        &["198.51.100.4, 203.0.113.1", "10.0.0.3"],
    );
    assert_eq!(
        client_ip(proxy, &two_lines, Forwarding::XForwardedFor, ours),
        ip("203.0.113.1")
    );
    // The wrong field is ignored: the peer's own field names no one.
    assert_eq!(
        client_ip(proxy, &two_lines, Forwarding::Forwarded, ours),
        proxy
    );
}
