-- sluicegate: the prelude of the step library (see src/stores/redis/library.rs).
-- The library is loaded once per server (FUNCTION LOAD); its one function, `call`
-- (driver.lua), runs one step. The call's parameters below are set by `call` before
-- each step and read by the algorithms' closures as upvalues:
-- STEP ('r' reserve, 'p' peek, 'c' cancel); NOW in us (the server's TIME unless the
-- caller sent its own, SERVER_TIME says which); COST (the nearest double, as Rust's
-- `cost as f64`) and COST_TEXT (its exact decimal text); MAX_WAIT in whole us (-1:
-- for ever; a peek accepts no wait); PURE_PEEK: a peek on one identity runs the
-- algorithm's peek (on several, the memory store runs zero-wait reserves on copies;
-- the answers are the same); REPORT: a reserve that also reports how every limit
-- stands after it (see `standing`); BARE: a reserve on one identity whose caller
-- keeps no receipt (a set leaves its leaves off); GRACE_MS, the expiry grace; LONE:
-- a reserve or peek on one identity of a single algorithm, whose step may answer
-- with the short reply (`short` in driver.lua) straight away rather than the full
-- decision; UNRECORDED: a step of a set's members, whose refusals record nothing
-- (a set's refusal records nothing in any member, Rust's `peek_unrecorded`), so a
-- member whose refusals count answers as if they did not. Every number is an integer below 2^53, so a Lua double holds it
-- exactly, except the cost and f64 configuration words (sent in shortest
-- round-trip decimal, which tonumber reads back to the same double).
local STEP, NOW, SERVER_TIME, COST, COST_TEXT, MAX_WAIT, PURE_PEEK, REPORT, BARE, GRACE_MS
local LONE, UNRECORDED

-- Lua's library functions the steps use, bound by the first call (a library's
-- chunk runs without them) and kept as upvalues: here a global lookup costs more
-- than the arithmetic it serves.
local function library_functions()
  return redis.call, redis.pcall, math.floor, math.ceil, math.fmod, math.max, math.min,
    string.match, tonumber, struct.pack, struct.unpack, string.format, string.sub
end
local redis_call, redis_pcall, floor, ceil, fmod, max, min, match, tonumber, struct_pack
local struct_unpack, format, substring

-- The short reply (`short` in driver.lua) of 5, 6, 9 or 11 integers goes back
-- packed as that many big-endian doubles in one string (every value is an integer
-- below 2^53, so a double holds it exactly): Redis copies a string reply as it is,
-- where an array costs it a conversion per integer and, per table, a lookup of
-- each special field name ('err', 'ok', ...). A LONE step that answers the short
-- reply returns it packed, its new state, and its verdict and reset_after in ns
-- (what the driver's commit needs).
local SHORT5, SHORT6, SHORT9, SHORT11 = '>ddddd', '>dddddd', '>ddddddddd', '>ddddddddddd'

-- Exact integer text for a double holding an integer below 2^53 (tostring keeps 14
-- digits): '%d' (a C long) is exact there, and cheaper than '%.0f'.
local function int(x) return format('%d', x) end

-- floor(a / b) and a mod b for integers 0 <= a, 0 < b below 2^53. While a + b
-- stays below 2^53, a / b cannot round up to the next integer, so Lua's a % b
-- (a - floor(a / b) * b) is exact and cheap; beyond, fmod is exact.
local function div(a, b)
  local r
  if a + b < 9007199254740992 then r = a % b else r = fmod(a, b) end
  return (a - r) / b, r
end

-- A decision, 16 integers (a key's part of the reply): 1 verdict (0 allowed, 1 denied,
-- 2 never); 2-3 wait, 4-5 retry_after, 6-7 reset_after, each as whole microseconds and
-- a sub-microsecond remainder in ns (-1 us: u64::MAX ns; from 2^53 us on, a multiple
-- of 4 us and a remainder below 4,000 ns, see `us_ns`); 8 remaining, 9 limit (-1:
-- u64::MAX); 10 the deciding limit's index; 11-12 the grant's mark, 13-14 its charge
-- and 15-16 the bits of its stored-permits f64, each as high and low 32-bit halves.
local function decision(verdict, limit, remaining, wait, retry, reset)
  return {verdict, wait, 0, retry, 0, reset, 0, remaining, limit, 0, 0, 0, 0, 0, 0, 0}
end

-- A decision of a step on doubles, its durations plain ns below 2^53.
local function decision_ns(verdict, limit, remaining, retry, reset)
  local r, s = retry % 1000, reset % 1000
  return {verdict, 0, 0, (retry - r) / 1000, r, (reset - s) / 1000, s, remaining, limit, 0,
          0, 0, 0, 0, 0, 0}
end

-- The standing of a grant d whose permit beyond its remaining is retry_us us and
-- retry_ns ns away (Rust's `short_of_whole`): a refusal with d's limit, remaining,
-- reset_after and limit index.
local function short_of_whole(d, retry_us, retry_ns)
  local out = decision(1, d[9], d[8], 0, retry_us, 0)
  out[5], out[6], out[7], out[10] = retry_ns, d[6], d[7], d[10]
  return out
end

-- How a limit stands after its answer d (Rust's `Algorithm::standing`): a grant
-- that left fewer permits than the limit holds (remaining < limit, -1 being
-- u64::MAX) reports the refusal remaining + 1 permits would get now, if they are
-- refused (a peek: no wait accepted, nothing recorded), with d's remaining and
-- reset_after; an algorithm with its own rule (`alg.standing`, nil to fall back on
-- this one) answers it; any other answer reports itself.
local function standing(alg, state, now, d)
  if d[1] ~= 0 or d[8] < 0 or (d[9] >= 0 and d[8] >= d[9]) then return d end
  if alg.standing then
    local own = alg.standing(d)
    if own then return own end
  end
  local more = d[8] + 1
  local max_wait, pure, cost, text = MAX_WAIT, PURE_PEEK, COST, COST_TEXT
  MAX_WAIT, PURE_PEEK, COST, COST_TEXT = 0, true, more, int(more)
  local next = alg.reserve(state, now, more)
  MAX_WAIT, PURE_PEEK, COST, COST_TEXT = max_wait, pure, cost, text
  if next[1] == 1 then return short_of_whole(d, next[4], next[5]) end
  return d
end

-- Appends decision d's 16 integers to the list out.
local function append(out, d)
  for j = 1, 16 do out[#out + 1] = d[j] end
end

-- The high and low 32-bit halves of an integer double in [0, 2^64).
local function split32(x)
  local hi = floor(x / 4294967296)
  return hi, x - hi * 4294967296
end

-- save(keys, state, ms) (ms nil: no expiry, 'keep': the key's) for a single
-- algorithm's state kept as one string at keys[1], `encode`d: SET ... PX.
local function string_save(encode)
  return function(keys, state, ms)
    if ms == 'keep' then
      redis_call('SET', keys[1], encode(state), 'KEEPTTL')
    elseif ms then
      redis_call('SET', keys[1], encode(state), 'PX', int(ms))
    else
      redis_call('SET', keys[1], encode(state))
    end
  end
end

-- load(keys) -> state, held, and save, for such a state: GET, `decode`d.
local function string_state(decode, encode)
  local function load(keys)
    local raw = redis_call('GET', keys[1])
    return decode(raw), raw ~= false
  end
  return load, string_save(encode)
end

-- A packed state of the wrong size: written by another version of the library (or
-- by hand). The call fails before any write, rather than decide on garbage.
local function foreign_state()
  error('sluicegate: a state in another format at this key (written by another version?): '
    .. 'clear the key or use another prefix')
end

-- load and save for a state that is one u64, {hi, lo} as 32-bit halves (see
-- `ns_halves`), kept as 8 big-endian bytes: no text to format or parse. A new key
-- holds `hi, lo`.
local function u64_state(hi, lo)
  -- string_state's load with its decode written in: a Lua call per decision less,
  -- on the two algorithms whose steps cost least.
  local function load(keys)
    local raw = redis_call('GET', keys[1])
    if not raw then return {hi, lo}, false end
    if #raw ~= 8 then foreign_state() end
    local h, l = struct_unpack(">I4I4", raw)
    return {h, l}, true
  end
  return load, string_save(function(s) return struct_pack(">I4I4", s[1], s[2]) end)
end

-- load and save for a state of two or three integers below 2^53, kept as that
-- many big-endian doubles (exact for such integers): no text to format or parse.
-- A new key holds a copy of `empty`.
local function doubles_state(empty)
  local n = #empty
  local format = '>' .. string.rep('d', n)
  local function decode(raw)
    if not raw then return {empty[1], empty[2], empty[3]} end
    if #raw ~= 8 * n then foreign_state() end
    local a, b, c = struct_unpack(format, raw)
    if n == 2 then return {a, b} end
    return {a, b, c}
  end
  local function encode(s) return struct_pack(format, s[1], s[2], s[3]) end
  return string_state(decode, encode)
end

-- A reserve that tries its fast path first: `near` answers nil where its doubles
-- would not be exact, and `exact` (limb arithmetic) takes the step instead.
local function near_first(near, exact)
  return function(s, now, cost)
    local d, new, verdict, reset = near(s, now, cost)
    if d then return d, new, verdict, reset end
    return exact(s, now, cost)
  end
end

-- An algorithm as the driver (and a set) uses it: load(keys) -> state, held;
-- save(keys, state, ms) (ms: nil for no expiry, 'keep' to keep the key's); drop(keys);
-- reserve(state, now, cost) -> decision, new state or nil; cancel(state, now, grant,
-- acts_at) -> new state or nil, for the algorithms whose cancel gives permits back;
-- nkeys, the server keys of one identity. A single algorithm has one key, keys[1]
-- (its load and save take the table, as a set's would: no call in between).
local function single(load, save, reserve, cancel)
  return {
    cancel = cancel,
    nkeys = 1,
    load = load,
    save = save,
    drop = function(keys) redis_call('DEL', keys[1]) end,
    reserve = reserve,
  }
end
