//! What the server-layer tests over real HTTP share: every field the layer may
//! write, a request's cost from its `x-cost` header, one request sent with reqwest
//! and what came back (its status and its rate-limit fields), and many concurrent
//! clients sending requests.
#![cfg(feature = "tower")]

use axum::body::Body;
use http::{HeaderMap, Request};

/// Every field the layer may write.
const FIELDS: [&str; 9] = [
    "ratelimit",
    "ratelimit-policy",
    "retry-after",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "x-rate-limit-limit",
    "x-rate-limit-remaining",
    "x-rate-limit-reset",
];

/// The `x-cost` header, 1 without one.
pub(crate) fn cost_of(request: &Request<Body>) -> u64 {
    request
        .headers()
        .get("x-cost")
        .and_then(|v| v.to_str().ok())
        .map_or(1, |v| v.parse().unwrap())
}

/// What came back: the status and the rate-limit fields (several lines of one
/// field joined with ", ", as a list spanning lines reads).
#[derive(Debug)]
pub(crate) struct Seen {
    pub(crate) status: u16,
    pub(crate) fields: HeaderMap,
}

impl Seen {
    pub(crate) fn get(&self, name: &str) -> Option<String> {
        let lines: Vec<&str> = self
            .fields
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        (!lines.is_empty()).then(|| lines.join(", "))
    }

    pub(crate) fn field(&self, name: &str) -> String {
        self.get(name)
            .unwrap_or_else(|| panic!("no {name} in {:?}", self.fields))
    }

    /// The rate-limit fields present, in the order of [`FIELDS`].
    pub(crate) fn present(&self) -> Vec<&'static str> {
        FIELDS
            .into_iter()
            .filter(|name| self.fields.contains_key(*name))
            .collect()
    }
}

/// Sends one request to `url` with the given headers.
pub(crate) async fn send(
    client: &reqwest::Client,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
) -> Seen {
    let mut builder = client.request(method.parse().unwrap(), url);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let response = builder.send().await.unwrap();
    Seen {
        status: response.status().as_u16(),
        fields: response.headers().clone(),
    }
}

pub(crate) async fn get(client: &reqwest::Client, url: &str, headers: &[(&str, &str)]) -> Seen {
    send(client, "GET", url, headers).await
}

/// Sends `per_client` requests from each of `clients` concurrent clients, each
/// with its own connection, keyed by `key(i)`; answers every (key, response).
pub(crate) async fn hammer(
    base: &str,
    clients: usize,
    per_client: usize,
    key: fn(usize) -> String,
) -> Vec<(String, Seen)> {
    let mut tasks = Vec::new();
    for i in 0..clients {
        let base = base.to_owned();
        tasks.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut seen = Vec::new();
            for _ in 0..per_client {
                seen.push((key(i), get(&client, &base, &[("x-client", &key(i))]).await));
            }
            seen
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all
}
