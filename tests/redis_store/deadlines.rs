//! A call carries its deadline, and the server applies it only if it reaches the
//! server by then: a call whose caller gave up (timed out while the server was
//! paused) never lands when the server comes back. On the server's time with
//! many threads on the real clock, and with a deadline already past.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;
use sluicegate::algorithms::{Decision, Receipt};

use redis_support::{calls, take, unique_prefix, RedisServer, YEAR};
use sluicegate::algorithms::FixedWindow;
use sluicegate::stores::redis::{RedisOptions, RedisStore};
use sluicegate::stores::Store;
use sluicegate::{Applied, Error};
use std::time::{Duration, Instant};

fn store_on(server: &RedisServer, timeout: Duration) -> RedisStore<String, FixedWindow> {
    let options = RedisOptions::default()
        .prefix(unique_prefix("deadline"))
        .unwrap()
        .response_timeout(timeout);
    RedisStore::open_with(server.url(), options).unwrap()
}

#[test]
fn calls_that_timed_out_on_a_paused_server_never_land_when_it_resumes() {
    // Eight threads, each with its own key of a 100-per-year window, take one
    // permit, then take again while the server is frozen: every second call times
    // out. Once the server thaws it finds those calls past their deadline and
    // applies none: each key has 99 left, not 98 (the grants nobody received).
    let mut server = RedisServer::start_own();
    let store = store_on(&server, Duration::from_millis(150));
    let fw = FixedWindow::new(100, YEAR).unwrap();
    let keys: Vec<String> = (0..8).map(|i| format!("client-{i}")).collect();
    for key in &keys {
        let (first, _) = store
            .apply_key::<(Decision, Receipt)>(&fw, key, 0, take(1))
            .unwrap();
        assert_eq!(first.remaining(), 99);
    }
    let mut admin = server.connection();
    let sent_before = calls(&mut admin, "fcall");
    server.pause();
    let started = Instant::now();
    std::thread::scope(|scope| {
        let handles: Vec<_> = keys
            .iter()
            .map(|key| {
                scope.spawn(|| {
                    store
                        .apply_key::<(Decision, Receipt)>(&fw, key, 0, take(1))
                        .map(|(d, _)| d)
                })
            })
            .collect();
        for handle in handles {
            match handle.join().unwrap() {
                Err(Error::Store(e)) => assert_eq!(e.applied(), Applied::Unknown, "{e}"),
                other => panic!("expected a timeout, got {other:?}"),
            }
        }
    });
    // Every call gave up at its timeout (generous bound: a loaded machine).
    assert!(started.elapsed() < Duration::from_secs(5));
    server.resume();
    // The frozen calls reach the server now (in order, before these): refused.
    for key in &keys {
        let (next, _) = store
            .apply_key::<(Decision, Receipt)>(&fw, key, 0, take(1))
            .unwrap();
        assert_eq!(next.remaining(), 98, "{key}: only this call counted");
    }
    let mut admin = server.connection();
    assert_eq!(
        calls(&mut admin, "fcall"),
        sent_before + 16,
        "the 8 frozen calls did reach the server, which refused them"
    );
}

#[test]
fn a_call_past_its_deadline_is_refused_with_a_typed_error_and_changes_nothing() {
    // The call a store would send, replayed by hand with a deadline in 1970.
    let server = RedisServer::start();
    let store = store_on(&server, Duration::from_millis(250));
    let fw = FixedWindow::new(10, YEAR).unwrap();
    let key = "late".to_owned();
    let (server_keys, mut args) = store.step_call(&fw, &key, 0, take(1)).unwrap();
    assert_eq!(args[1], "", "a replayed call carries no deadline");
    let mut admin = server.connection();
    let functions: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .query(&mut admin)
        .unwrap();
    let name = format!("{functions:?}")
        .split('"')
        .find(|part| part.starts_with("sluicegate_"))
        .map(str::to_owned);
    // The library is loaded by the store's first call.
    let name = name.unwrap_or_else(|| {
        store
            .apply_key::<(Decision, Receipt)>(&fw, &"warm".to_owned(), 0, take(1))
            .unwrap();
        let functions: Vec<redis::Value> = redis::cmd("FUNCTION")
            .arg("LIST")
            .query(&mut admin)
            .unwrap();
        format!("{functions:?}")
            .split('"')
            .find(|part| part.starts_with("sluicegate_"))
            .unwrap()
            .to_owned()
    });
    args[1] = "1".to_owned();
    let late: redis::RedisResult<redis::Value> = redis::cmd("FCALL")
        .arg(&name)
        .arg(server_keys.len())
        .arg(&server_keys)
        .arg(&args)
        .query(&mut admin);
    let refusal = late.expect_err("a call past its deadline is refused");
    assert!(refusal.to_string().contains("EXPIRED"), "{refusal}");
    assert!(refusal.to_string().contains("not applied"), "{refusal}");
    // Nothing was written: the key has its whole window.
    let (first, _) = store
        .apply_key::<(Decision, Receipt)>(&fw, &key, 0, take(1))
        .unwrap();
    assert_eq!(first.remaining(), 9);
    // The same call with its deadline ahead runs.
    args[1] = "9007199254740990".to_owned();
    let _: redis::Value = redis::cmd("FCALL")
        .arg(&name)
        .arg(server_keys.len())
        .arg(&server_keys)
        .arg(&args)
        .query(&mut admin)
        .unwrap();
    let (third, _) = store
        .apply_key::<(Decision, Receipt)>(&fw, &key, 0, take(1))
        .unwrap();
    assert_eq!(third.remaining(), 7);
}
