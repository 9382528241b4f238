-- Where the bucketed sliding window (sliding_window_buckets.lua) keeps a ring that
-- holds few counts (SMALL in the step: up to 63 buckets and a limit of at most 50)
-- on the server: one string, big-endian,
--
--   n, o       two doubles: the newest bucket's number, and a bucket before which
--              every bucket is empty (set by a grant into an empty ring)
--   wide       a byte: 0 when every count below is a byte, 1 when each is a double
--   t, cn, c0, c1, co  the ring's total, and copies of the counts of buckets n,
--              n - B, n - B + 1 and o (co is 0 once o has left the ring)
--   entries    one per non-empty bucket of the ring, oldest first: its slot (a
--              byte; bucket b is in slot b mod RING, as in the Rust ring,
--              src/algorithms/sliding_window_buckets/ring.rs) and its count
--
-- n tells an entry's bucket: the one of the ring n - B .. n in its slot. Counts are
-- bytes (a bucket holds at most the limit, the ring at most twice it) unless a key
-- kept with a larger limit holds more (then doubles, exact below 2^53).
--
-- Why: a ring that moves several buckets on every grant (10 a minute in 1 s buckets
-- moves 6) costs the hash layout (sliding_window_buckets_hash.lua) a read of each
-- bucket leaving it and a delete of each non-empty one: five commands a grant.
-- Here a grant is one GET and one SET ... PX, the floor's commands, and its work
-- grows with the buckets that leave, not with the ring: those are the entries at
-- the front, read until the first that stays, and the new string is the new
-- header, the entries that stay (one substring) and the grant's entry. The string
-- is short on purpose (22 + 2 x 64 bytes at most): the server's Lua hashes every
-- byte of every string it makes, about 15 instructions a byte (BENCHMARKS.md). A
-- call on a hammered key decides from the header's copies and reads no entry; a
-- step that needs other counts decodes every entry once per call.
-- A key holding a hash is in the hash layout (the same window with a larger
-- limit): read whole (HGETALL) and written back as a string. A key holding
-- anything else (a string of another size, a hash in an older layout) is refused,
-- never read as empty.
-- buckets_entries(B, RING) returns the functions the step reads and writes the ring
-- with, as buckets_hash's (described there), and false: a step need not clear the
-- buckets leaving the ring, which are no entry of the string it writes.

local ENTRIES_NARROW, ENTRIES_WIDE = '>ddBBBBBB', '>ddBddddd'

-- Where a string's entries start, an entry's size and its format: counts as bytes,
-- or (wide) as doubles.
local function entries_format(wide)
  if wide then return 58, 9, '>Bd' end
  return 23, 2, '>BB'
end

-- A string in this layout: its header's fields, then whether its counts are
-- doubles; a string of another size is refused.
local function entries_header(raw, RING)
  local size = #raw
  if size < 22 then foreign_state() end
  local n, o, wide, t, cn, c0, c1, co = struct_unpack(ENTRIES_NARROW, raw)
  if wide == 1 and size >= 57 then
    n, o, wide, t, cn, c0, c1, co = struct_unpack(ENTRIES_WIDE, raw)
  elseif wide ~= 0 then
    foreign_state()
  end
  wide = wide == 1
  local first, step = entries_format(wide)
  if (size + 1 - first) % step ~= 0 or size + 1 - first > step * RING then foreign_state() end
  return n, o, t, cn, c0, c1, co, wide
end

-- The entries of such a string whose header's n is n: bucket -> count.
local function entries_counts(raw, n, wide, RING)
  local first, step, entry = entries_format(wide)
  local counts = {}
  for pos = first, #raw, step do
    local s, c = struct_unpack(entry, raw, pos)
    counts[n - (n - s) % RING] = c
  end
  return counts
end

local function buckets_entries(B, RING)
  local NARROW, WIDE = ENTRIES_NARROW, ENTRIES_WIDE
  local NONE = {}

  -- A state: the header; raw, the string the server holds (nil: none, or a hash)
  -- and rn, its n (which its entries' slots are relative to); wide, when its counts
  -- are doubles; the slots the state wrote (w); retype, when the server holds a
  -- hash; counts (bucket -> count, the non-empty buckets the server holds), once a
  -- step needed them.
  local function load(keys)
    local key = keys[1]
    local raw = redis_pcall('GET', key)
    if not raw then
      return {key = key, n = 0, t = 0, o = 0, cn = 0, c0 = 0, c1 = 0, co = 0, w = NONE, rn = 0,
              counts = NONE}, false
    end
    if #raw < 22 and type(raw) == 'table' then
      -- An error reply: the key holds a hash, the hash layout's.
      local st = hash_whole(key, RING)
      st.key, st.w, st.rn, st.retype = key, NONE, st.n, true
      return st, true
    end
    local n, o, t, cn, c0, c1, co, wide = entries_header(raw, RING)
    return {key = key, n = n, t = t, o = o, cn = cn, c0 = c0, c1 = c1, co = co, w = NONE,
            raw = raw, rn = n, wide = wide}, true
  end

  local function counts_of(st)
    local counts = st.counts
    if counts then return counts end
    counts = entries_counts(st.raw, st.rn, st.wide, RING)
    st.counts = counts
    return counts
  end

  local held = held_by(B, RING, function(st, _, bucket)
    return counts_of(st)[bucket] or 0
  end)

  -- Every count is in the string the call holds: nothing to read ahead.
  local function prefetch() end

  local function nonempty(st, from, to)
    local found = {}
    for b = from, to do
      local c = held(st, b)
      if c > 0 then found[#found + 1] = {b, c} end
    end
    return found
  end

  -- The counts of buckets lo .. hi; on a state as loaded, from the entries at the
  -- front up to hi: a moving ring's leaving buckets are its oldest.
  local function span(st, lo, hi)
    local K = {}
    local raw = st.raw
    if st.w ~= NONE or st.counts or not raw then
      for b = lo, hi do
        if b > st.n then K[b - lo + 1] = 0 else K[b - lo + 1] = held(st, b) end
      end
      return K
    end
    for i = 1, hi - lo + 1 do K[i] = 0 end
    local rn = st.rn
    local first, step, entry = entries_format(st.wide)
    for pos = first, #raw, step do
      local s, c = struct_unpack(entry, raw, pos)
      local b = rn - (rn - s) % RING
      if b > hi then break end
      if b >= lo then K[b - lo + 1] = c end
    end
    return K
  end

  local function derived(st)
    local new = {key = st.key, n = st.n, t = st.t, o = st.o, cn = st.cn, c0 = st.c0, c1 = st.c1,
                 co = st.co, w = {}, raw = st.raw, rn = st.rn, wide = st.wide,
                 counts = st.counts, retype = st.retype, dirty = true}
    if st.dirty then for k, c in pairs(st.w) do new.w[k] = c end end
    return new
  end

  -- The string for state st: its header, then its ring's non-empty buckets. On a
  -- grant (no write but in the newest bucket's slot, and clears of buckets the
  -- server's entries do not hold) the entries that stay are one substring of raw:
  -- from the first in the ring to the last, or to the one before it if that is the
  -- newest bucket, whose count the grant's entry replaces. Otherwise every count
  -- in the ring, as `held` reads it.
  local function encode(st)
    local n, w, t, cn, c0, c1, co = st.n, st.w, st.t, st.cn, st.c0, st.c1, st.co
    local raw, rn, top = st.raw, st.rn, n % RING
    local simple = not st.retype
    for s, c in pairs(w) do
      if s ~= top then
        local b = n - (n - s) % RING
        if c ~= 0 or (raw and b <= rn and b >= n - B) then simple = false end
      end
    end
    -- Byte counts (the grant's own is cn); a string with doubles is rewritten whole,
    -- in bytes again once its counts fit.
    if (raw and st.wide) or t > 255 or cn > 255 or c0 > 255 or c1 > 255 or co > 255 then
      simple = false
    end
    local c = w[top]
    if simple then
      local header = struct_pack(NARROW, n, st.o, 0, t, cn, c0, c1, co)
      local kept = ''
      if raw then
        local first, last = 23, #raw
        while first < last do
          local s = struct_unpack('>B', raw, first)
          if rn - (rn - s) % RING >= n - B then break end
          first = first + 2
        end
        if c ~= nil and last > first then
          local s = struct_unpack('>B', raw, last - 1)
          if rn - (rn - s) % RING == n then last = last - 2 end
        end
        kept = substring(raw, first, last)
      end
      if c == nil or c == 0 then return header .. kept end
      return header .. kept .. struct_pack('>BB', top, c)
    end
    local buckets, counts = {}, {}
    local wide = t > 255 or cn > 255 or c0 > 255 or c1 > 255 or co > 255
    for b = max(n - B, 0), n do
      local h = held(st, b)
      if h > 0 then
        buckets[#buckets + 1] = b
        counts[#counts + 1] = h
        if h > 255 then wide = true end
      end
    end
    local parts, entry = {}, '>BB'
    if wide then
      parts[1], entry = struct_pack(WIDE, n, st.o, 1, t, cn, c0, c1, co), '>Bd'
    else
      parts[1] = struct_pack(NARROW, n, st.o, 0, t, cn, c0, c1, co)
    end
    for i = 1, #buckets do parts[i + 1] = struct_pack(entry, buckets[i] % RING, counts[i]) end
    return table.concat(parts)
  end

  return load, string_save(encode), held, prefetch, nonempty, span, derived, false
end

-- A key in this layout read whole, for the hash layout (a limit raised past SMALL):
-- the header's fields and `counts`, bucket -> count of every non-empty bucket; a
-- key in no layout of the window's is refused.
entries_whole = function(key, RING)
  local raw = redis_pcall('GET', key)
  if type(raw) ~= 'string' then foreign_state() end
  local n, o, t, cn, c0, c1, co, wide = entries_header(raw, RING)
  return {n = n, t = t, o = o, cn = cn, c0 = c0, c1 = c1, co = co,
          counts = entries_counts(raw, n, wide, RING)}
end
