#!lua name=straight
-- Straight-line grants on the library's server layouts, for
-- examples/redis_instructions.rs: what a grant's commands, argument parsing and
-- packing cost by themselves, with nothing of the library's general step (no
-- driver, no state tables, no helper calls). Each function runs one shape only,
-- the one the harness measures, and answers an error for any other, so that a
-- count is never of another shape. ARGV as the library sends it: the call's text
-- (read here for its limit and window only), the deadline and now, in us. The two
-- functions repeat their first lines (the text, the deadline, now) rather than call
-- a helper: a Lua call is part of what the harness tells apart.

local redis_call, pack, unpack, format, ceil, match
local configs = {}

-- The limit and the window (us) of a call's text, kept by text as the library's
-- driver keeps its plans.
local function config(text)
  local c = configs[text]
  if c == nil then
    local first, second = match(text, '^%d+ %d+ (%d+) (%d+)')
    c = {first + 0, second + 0}
    configs[text] = c
  end
  return c
end

local function bind()
  redis_call, pack, unpack, format, ceil, match =
    redis.call, struct.pack, struct.unpack, string.format, math.ceil, string.match
end

-- The fixed window's grant (lua/fixed_window.lua): a string of two doubles, the
-- window's index and its count. Text: grace, kind, window, limit.
local function fixed(KEYS, ARGV)
  if not redis_call then bind() end
  local c = configs[ARGV[1]] or config(ARGV[1])
  local LEN, LIMIT = c[1], c[2]
  local t = redis_call('TIME')
  if t[1] * 1000000 + t[2] > ARGV[2] + 0 then return redis.error_reply('EXPIRED') end
  local now = ARGV[3] + 0
  local key = KEYS[1]
  local raw = redis_call('GET', key)
  local index, count = 0, 0
  if raw then index, count = unpack('>dd', raw) end
  local start = index * LEN
  if now >= start and now - start >= LEN then
    index = (now - now % LEN) / LEN
    start = index * LEN
    count = 0
  end
  local until_end = start + LEN - now
  local remaining = LIMIT - count
  if remaining < 1 or until_end <= 0 then return redis.error_reply('not the measured shape') end
  local index_lo = index % 4294967296
  local reply = pack('>ddddddddd', 0, 0, until_end * 1000, remaining - 1, LIMIT,
    (index - index_lo) / 4294967296, index_lo, 0, 1)
  redis_call('SET', key, pack('>dd', index, count + 1), 'PX',
    format('%d', ceil(until_end / 1000) + 3600000))
  return reply
end

-- The sliding log's paced grant (lua/sliding_log.lua): the log is full, its oldest
-- entry has expired and the next is live, so the grant drops the oldest and
-- appends one entry. Reads the header and the next oldest entry's slot, writes
-- the header and the previous newest entry's slot, sets the expiry. Text: grace,
-- kind, limit, window, spacing (0), record (0).
local function log(KEYS, ARGV)
  if not redis_call then bind() end
  local c = configs[ARGV[1]] or config(ARGV[1])
  local LIMIT, D = c[1], c[2]
  local t = redis_call('TIME')
  if t[1] * 1000000 + t[2] > ARGV[2] + 0 then return redis.error_reply('EXPIRED') end
  local now = ARGV[3] + 0
  local key = KEYS[1]
  local raw = redis_call('HGET', key, 'H')
  if not raw or (#raw ~= 64 and #raw ~= 72) then
    return redis.error_reply('not the measured shape')
  end
  local head, len, base, ring, ot, oc, nt, nc = unpack('>dddddddd', raw)
  local at = now
  if nt > now then at = nt end
  if len ~= LIMIT or ring ~= LIMIT or at - ot < D then
    return redis.error_reply('not the measured shape')
  end
  local slot = head + 1
  if slot >= ring then slot = slot - ring end
  local t1, c1 = unpack('>dd', redis_call('HGET', key, pack('>I4', slot)))
  local live = nc - oc
  if at - t1 >= D or live + 1 > LIMIT then return redis.error_reply('not the measured shape') end
  local reset = at - now + D
  local mark = nc + 1
  local mark_lo = mark % 4294967296
  local reply = pack('>ddddddddd', 0, 0, reset * 1000, LIMIT - live - 1, LIMIT,
    (mark - mark_lo) / 4294967296, mark_lo, 0, 1)
  local newest = head + len - 1
  if newest >= ring then newest = newest - ring end
  -- The library's header, padded past 64 bytes for a ring of more than 64 slots.
  local header = '>dddddddd'
  if ring > 64 then header = '>ddddddddd' end
  redis_call('HSET', key, 'H', pack(header, slot, len, oc, ring, t1, c1, at, mark, 0),
    pack('>I4', newest), pack('>dd', nt, nc))
  redis_call('PEXPIRE', key, format('%d', ceil(reset / 1000) + 3600000))
  return reply
end

redis.register_function('straight_fixed', fixed)
redis.register_function('straight_log', log)
