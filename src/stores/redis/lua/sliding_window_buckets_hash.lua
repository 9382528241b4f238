-- Where the bucketed sliding window (sliding_window_buckets.lua) keeps a ring that
-- can hold many counts (a limit above 50, or 64 buckets or more) on the server: a
-- hash of packed big-endian doubles (exact: integers below 2^53). Field 'H', the
-- header: the newest bucket's number n, the ring's total, o (a bucket before which
-- every bucket is empty, set by a grant into an empty ring), and copies of the counts
-- of buckets n, n - B, n - B + 1 and o (0 once o has left the ring). One field per
-- non-empty ring slot ("0" .. RING-1, a missing slot is 0), the same slots as the Rust
-- ring (src/algorithms/sliding_window_buckets/ring.rs), so that clearing and
-- aliasing behave the same. A ring that holds few counts is one string instead
-- (sliding_window_buckets_entries.lua says why); a key in that layout (the same
-- window with a smaller limit) is read whole and written back as a hash.
-- Why the copies: a call needs, besides the total, only a few counts (the newest for
-- reset_after, the one leaving a dropping window or the partial one of a weighted
-- window, the oldest non-empty one where a refusal's walk starts), and whoever writes
-- the header knows them; so on a hammered key a refusal reads one field and a grant
-- in the newest bucket writes the header and one slot (one HSET), whatever the limit;
-- a step that moves the ring a few buckets reads the counts the header lacks in one
-- HMGET. Any other slot is an HGET, cached for the call. A refusal's exact
-- retry_after walks the non-empty buckets from the oldest: slot by slot from 'o';
-- past 8 slots (a sparse ring), from one HGETALL of what the ring holds, never its
-- empty buckets. A key without 'H' but holding something is in an older layout
-- (decimal fields 'n', 't', 'o'): refused, never read as empty.
-- A ring that can hold more than 64 non-empty slots (PADDED) pads 'H' with two more
-- doubles (0), 72 bytes in all, so that Redis keeps its hash as a hash table rather
-- than a listpack, whose field lookups scan it from the start (sliding_log.lua says
-- why): a grant on a full ring of 300 buckets costs the server 121k instructions in
-- a listpack, 93k in a hash table, which takes 4.5x the memory. A ring that can
-- hold 64 or fewer (up to 63 buckets, or a limit of at most 32) keeps the listpack.
-- buckets_hash(B, RING, PADDED) returns the functions the step reads and writes the
-- ring with, for B buckets in RING slots: load, save, held, prefetch, nonempty, span
-- and derived (each described where it is defined); and true: a step clears the
-- slots of the buckets leaving the ring.
--
-- Both layouts' `held`: the count of `bucket` (one the ring holds: n - B or later)
-- in st's ring: the header's copies first, none before o, then what the state wrote
-- (w, by slot), then stored(st, slot, bucket), what the server holds.
local function held_by(B, RING, stored)
  return function(st, bucket)
    local n = st.n
    if bucket == n then return st.cn end
    if bucket == n - B then return st.c0 end
    if bucket == n - B + 1 then return st.c1 end
    local o = st.o
    if bucket == o then return st.co end
    if bucket < o then return 0 end
    local s = bucket % RING
    local v = st.w[s]
    if v ~= nil then return v end
    return stored(st, s, bucket)
  end
end

-- A key in the entries layout (sliding_window_buckets_entries.lua, a ring that holds
-- few counts) read whole: the header's fields and `counts`, bucket -> count of every
-- non-empty bucket. Defined there.
local entries_whole

-- A key in this layout read whole, for the entries layout (a limit lowered to SMALL),
-- the same way; a key in no layout of the window's is refused.
local function hash_whole(key, RING)
  local flat = redis_pcall('HGETALL', key)
  if flat.err then foreign_state() end
  local header, counts, slots = nil, {}, {}
  for i = 1, #flat, 2 do
    local field, value = flat[i], flat[i + 1]
    if field == 'H' then
      header = value
    else
      local s = tonumber(field)
      if s == nil or s >= RING or #value ~= 8 then foreign_state() end
      slots[s] = struct_unpack('>d', value)
    end
  end
  if not header or (#header ~= 56 and #header ~= 72) then foreign_state() end
  local n, t, o, cn, c0, c1, co = struct_unpack('>ddddddd', header)
  for s, c in pairs(slots) do counts[n - (n - s) % RING] = c end
  return {n = n, t = t, o = o, cn = cn, c0 = c0, c1 = c1, co = co, counts = counts}
end

local function buckets_hash(B, RING, PADDED)
  -- The slots' field names, each made once (tostring formats through sprintf).
  local names = {}
  local function name(slot)
    local v = names[slot]
    if v == nil then
      v = tostring(slot)
      names[slot] = v
    end
    return v
  end

  local HEADER = '>ddddddd'
  if PADDED then HEADER = '>ddddddddd' end
  -- A loaded state's writes: none, in one table shared by every load (a state's own
  -- writes go to a new table), which saves a table per call.
  local NONE = {}

  -- A state: the header (n, t, o; cn, c0, c1 and co the copies of buckets n, n - B,
  -- n - B + 1 and o: co is 0 once o has left the ring), the slots it changed (w),
  -- whether every slot was cleared (wipe), whether the server holds the key at all
  -- (fresh: it does not), and the server's slots read so far (cache,
  -- shared by the copies of one key).
  local function load(keys)
    local key = keys[1]
    local raw = redis_pcall('HGET', key, 'H')
    if not raw then
      if redis_call('EXISTS', key) == 1 then foreign_state() end
      return {key = key, n = 0, t = 0, o = 0, cn = 0, c0 = 0, c1 = 0, co = 0, w = NONE,
              wipe = false, fresh = true}, false
    end
    local size = #raw
    if size ~= 56 and size ~= 72 then
      if type(raw) ~= 'table' then foreign_state() end
      -- An error reply, the key not a hash: the entries layout, read whole and
      -- written back as a hash.
      local st = entries_whole(key, RING)
      local cache = {}
      for b, c in pairs(st.counts) do cache[b % RING] = c end
      st.key, st.w, st.wipe, st.cache, st.counts, st.whole, st.retype = key, NONE, false, cache,
        nil, true, true
      return st, true
    end
    -- The header's first seven doubles, padded or not (a limit changed on a key in
    -- use may find either).
    local n, t, o, cn, c0, c1, co = struct_unpack('>ddddddd', raw)
    return {key = key, n = n, t = t, o = o, cn = cn, c0 = c0, c1 = c1, co = co, w = NONE,
            wipe = false}, true
  end

  -- A slot's count from its packed double (missing: 0).
  local function unpacked(raw)
    if not raw then return 0 end
    if #raw ~= 8 then foreign_state() end
    local c = struct_unpack('>d', raw)
    return c
  end

  local function read(st, slot)
    local v = st.w[slot]
    if v ~= nil then return v end
    if st.wipe then return 0 end
    local cache = st.cache
    if not cache then
      cache = {}
      st.cache = cache
    end
    v = cache[slot]
    if v == nil then
      if st.whole then return 0 end
      v = unpacked(redis_call('HGET', st.key, name(slot)))
      cache[slot] = v
    end
    return v
  end

  local held = held_by(B, RING, read)

  -- Reads the slots of buckets first..last (ring buckets) that `held` would read one
  -- HGET at a time in one HMGET instead, when there are several.
  local function prefetch(st, first, last)
    if st.wipe or st.whole then return end
    if not st.cache then st.cache = {} end
    local want, slots = {}, {}
    local n, o, w, cache = st.n, st.o, st.w, st.cache
    for b = max(first, o), last do
      local s = b % RING
      if b ~= n and b ~= n - B and b ~= n - B + 1 and b ~= o and w[s] == nil
          and cache[s] == nil then
        want[#want + 1] = name(s)
        slots[#slots + 1] = s
      end
    end
    if #slots < 2 then return end
    local got = redis_call('HMGET', st.key, unpack(want))
    for i = 1, #slots do cache[slots[i]] = unpacked(got[i]) end
  end

  -- Every non-empty slot of the state: slot -> count. One HGETALL per key and call
  -- (the hash holds only non-empty slots, so it costs what is in the ring, not B).
  local function all_slots(st)
    local slots = {}
    if st.whole and not st.wipe then
      for slot, c in pairs(st.cache) do slots[slot] = c end
    elseif not st.wipe then
      if not st.cache then st.cache = {} end
      if not st.cache.all then
        local all = {}
        local flat = redis_call('HGETALL', st.key)
        for i = 1, #flat, 2 do
          local field = flat[i]
          if field ~= 'H' then all[tonumber(field)] = unpacked(flat[i + 1]) end
        end
        st.cache.all = all
      end
      for slot, c in pairs(st.cache.all) do slots[slot] = c end
    end
    for slot, c in pairs(st.w) do slots[slot] = c end
    return slots
  end

  -- The non-empty buckets in [from, to] (to - from < RING, so each slot is at most
  -- one of them), ascending, as {bucket, count}.
  local function nonempty(st, from, to)
    local found = {}
    if to < from then return found end
    for slot, c in pairs(all_slots(st)) do
      if c > 0 then
        local b = from + fmod(slot - fmod(from, RING) + RING, RING)
        if b <= to then found[#found + 1] = {b, c} end
      end
    end
    table.sort(found, function(x, y) return x[1] < y[1] end)
    return found
  end

  local function save(keys, st, ms)
    local key = keys[1]
    local header = struct_pack(HEADER, st.n, st.t, st.o, st.cn, st.c0, st.c1, st.co, 0, 0)
    local only = st.only
    if st.retype then
      -- The key holds the entries layout: rewritten whole as a hash, keeping its
      -- expiry where asked to.
      local ttl
      if ms == 'keep' then ttl = redis_call('PTTL', key) end
      redis_call('DEL', key)
      local set = {'H', header}
      for s, c in pairs(all_slots(st)) do
        if c ~= 0 then
          set[#set + 1] = name(s)
          set[#set + 1] = struct_pack('>d', c)
        end
      end
      redis_call('HSET', key, unpack(set))
      if ms == 'keep' then
        if ttl > 0 then redis_call('PEXPIRE', key, ttl) end
        return
      end
    elseif only then
      -- One grant in the newest bucket (most calls): one HSET, no lists to build.
      redis_call('HSET', key, 'H', header, name(only), struct_pack('>d', st.w[only]))
    else
      -- A key the server does not hold has nothing to wipe.
      if st.wipe and not st.fresh then redis_call('DEL', key) end
      local set, gone = {'H', header}, {}
      for s, v in pairs(st.w) do
        if v == 0 then
          gone[#gone + 1] = name(s)
        else
          set[#set + 1] = name(s)
          set[#set + 1] = struct_pack('>d', v)
        end
      end
      redis_call('HSET', key, unpack(set))
      if #gone > 0 and not st.wipe then redis_call('HDEL', key, unpack(gone)) end
    end
    if ms == 'keep' then return end
    if ms then redis_call('PEXPIRE', key, int(ms)) else redis_call('PERSIST', key) end
  end

  -- The counts of buckets lo .. hi (o or later, a few; one after n counts nothing),
  -- in an array from 1: the header's copies, the state's writes and what the call
  -- read before, the rest in one HMGET.
  local function span(st, lo, hi)
    local n, o, w, cache = st.n, st.o, st.w, st.cache
    local K, want, at = {}, nil, nil
    for b = lo, hi do
      local v
      if b > n then
        v = 0
      elseif b == n then
        v = st.cn
      elseif b == n - B then
        v = st.c0
      elseif b == n - B + 1 then
        v = st.c1
      elseif b == o then
        v = st.co
      else
        local s = b % RING
        v = w[s]
        if v == nil and st.wipe then v = 0 end
        if v == nil and cache then v = cache[s] end
        if v == nil and st.whole then v = 0 end
        if v == nil then
          if not want then want, at = {}, {} end
          want[#want + 1] = name(s)
          at[#at + 1] = b - lo + 1
          v = false
        end
      end
      K[b - lo + 1] = v
    end
    if want then
      local got = redis_call('HMGET', st.key, unpack(want))
      for i = 1, #want do K[at[i]] = unpacked(got[i]) end
    end
    return K
  end

  -- A state to step on from st: the same header, the same server view (what the
  -- call read, shared), and a copy of st's writes.
  local function derived(st)
    local new = {key = st.key, n = st.n, t = st.t, o = st.o, cn = st.cn, c0 = st.c0, c1 = st.c1,
                 co = st.co, w = {}, wipe = st.wipe, cache = st.cache, dirty = true,
                 fresh = st.fresh, whole = st.whole, retype = st.retype}
    if st.dirty then for k, c in pairs(st.w) do new.w[k] = c end end
    return new
  end

  return load, save, held, prefetch, nonempty, span, derived, true
end
