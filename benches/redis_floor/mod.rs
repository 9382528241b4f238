//! The floor of any scripted decision: the smallest atomic Lua step that reads
//! `TIME`, `GET`s a key and `SET`s it with an expiry. `benches/redis.rs` times it
//! and `examples/redis_instructions.rs` counts its instructions: both load it from
//! here, so that both measure the same three commands.

/// The step's body, as a script or as the function `floor` runs it.
pub const BODY: &str = "local t = redis.call('TIME') local v = redis.call('GET', KEYS[1]) \
                        redis.call('SET', KEYS[1], t[2], 'PX', 60000) return 1";

/// Loads the step as the function `floor` (`FUNCTION LOAD REPLACE`), which
/// `FCALL floor 1 <key>` then runs.
pub fn load(conn: &mut redis::Connection) -> redis::RedisResult<()> {
    let library = format!(
        "#!lua name=floor\nredis.register_function('floor', function(KEYS, ARGV) {BODY} end)"
    );
    let _: redis::Value = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(library)
        .query(conn)?;
    Ok(())
}

/// One run of the loaded step on `key` (`FCALL floor 1 <key>`), which answers 1.
pub fn call(conn: &mut redis::Connection, key: &str) -> redis::RedisResult<i64> {
    redis::cmd("FCALL").arg("floor").arg(1).arg(key).query(conn)
}
