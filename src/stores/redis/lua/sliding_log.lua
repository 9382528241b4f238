-- The exact sliding log (src/algorithms/sliding_log/ring.rs), in whole microseconds, its
-- ring in a hash of packed big-endian doubles (exact: every value is an integer below
-- 2^53). Field 'H', the header: the ring index of the oldest entry, the number of
-- entries, the running count before the oldest, the ring size, and copies of the
-- oldest and the newest entry (time, running count after it). One field per slot,
-- named by the slot as 4 big-endian bytes (a C pack, where decimal text took
-- sprintf): the entry (time, running count after it). Only the entries between the
-- oldest and the newest are read from their slots, so the newest one's slot is
-- written when a later entry follows it: a new key's first grant writes the header
-- alone.
-- Why the copies: every call needs the newest entry, and a refusal on a full log
-- needs the oldest (is it live? when does its count leave?), so with both in the
-- header a hammered refusal reads one field, and a grant that drops the oldest
-- reads one slot more (the next oldest, the header's new copy). Both are known to
-- whoever writes the header. Any other entry comes from its slot: the first live
-- entry and a refusal's exact retry_after are galloping searches from the front
-- (`first_true`: O(log d) slot reads for an answer d entries in). A grant writes
-- the header and one slot (one HSET). In Redis's Lua a table, a named field and a
-- function call each cost more than the arithmetic around them, so the state a
-- step works on is a set of upvalues (a lone call builds no table for it; see
-- LIVE), read by search predicates built once, and the hot decisions are written
-- out.
-- A ring of more than 64 slots pads 'H' with a ninth double (0), 72 bytes in all: a
-- value over 64 bytes (`hash-max-listpack-value`'s default) makes Redis keep the hash
-- as a hash table rather than a listpack, whose field lookups scan it from the start
-- (in a listpack a grant on a full log of 500 costs the server over 1.5x what it
-- costs in a hash table). A smaller ring keeps the listpack: a scan of up to 65 fields
-- costs a grant up to 8%, and a listpack takes about a third of the memory.
-- A key without 'H' but holding something, or an 'H' of any other size, is in an older
-- layout (the text one had 'h'; the packed one before this, a 32-byte 'H'): refused,
-- never read as empty.
-- C: 1 limit, 2 duration (us), 3 min spacing (us), 4 record refusals (1) or not.
local function make_sliding_log(C)
  local LIMIT, D, SPACING = C[1], C[2], C[3]
  local RECORD = C[4] == 1
  local CAP = LIMIT + C[4]
  local HEADER, PADDED = '>dddddddd', '>ddddddddd'
  -- Rust's reset_at(x, x) for an entry at x: x + RESET_SPAN (its expiry, or the end
  -- of the spacing after it if that is later).
  local RESET_SPAN = D
  if SPACING > D then RESET_SPAN = SPACING end

  -- The state a step works on lives in the upvalues below, so that a lone call (the
  -- driver's LONE: one key, one step) builds no table for it: `load` fills them and
  -- answers LIVE, `reserve` steps them in place and answers LIVE, `save` writes
  -- them. Any other call (a set's member, a report, a key repeated in one call, a
  -- cancel) keeps each state as an array, one table constructor (named fields cost a
  -- hash insertion each), which `use` copies into the upvalues and `state` builds from
  -- them: the step itself is the same code for both. The array: 1-8 the header as
  -- packed (head, len, base, ring, then the oldest and the newest entry's time and
  -- count); 9 the key; 10 the slots it wrote since the load (slot -> packed entry;
  -- false: at most one, kept in 11 and 12 alone), 11 the last of them and 12 its
  -- packed entry, 13 how many; 14 the server's slots read so far (shared by the
  -- states of one key in one call; false: none yet, or a single one, which only the
  -- memo below keeps); 15 fresh (the server holds none of its slots); 16 regrown (the
  -- server's hash is to be replaced).
  local LIVE = {}
  local HEAD, STORED, BASE, RING, OT, OC, NT, NC, KEY
  local WRITTEN, LAST_SLOT, LAST_RAW, WRITES, CACHE, FRESH, REGROWN
  -- The array the upvalues came from (nil: none), which a slot cache made later
  -- joins; whether the state is an array's (SHARED: its tables are the array's too,
  -- so a step copies before it writes; false: LIVE); and the last slot read from the
  -- server and its packed entry (false: none), so that a call that reads one slot (a
  -- paced grant) builds no cache.
  local OWNER, SHARED, MEMO_SLOT, MEMO_RAW

  -- The step's header at its instant: the number of entries, the running count
  -- after the newest, the instant used; and the bound and extra permits `clears`
  -- compares with. Set by the step, read by the helpers.
  local LEN, FIN, AT, EXTRA, ALLOWED

  local function use(st)
    HEAD, STORED, BASE, RING, OT, OC, NT, NC, KEY = st[1], st[2], st[3], st[4], st[5], st[6],
      st[7], st[8], st[9]
    WRITTEN, LAST_SLOT, LAST_RAW, WRITES, CACHE, FRESH, REGROWN = st[10], st[11], st[12], st[13],
      st[14], st[15], st[16]
    OWNER, SHARED, MEMO_SLOT = st, true, false
  end

  local function state()
    return {HEAD, STORED, BASE, RING, OT, OC, NT, NC, KEY, WRITTEN, LAST_SLOT, LAST_RAW, WRITES,
            CACHE, FRESH, REGROWN}
  end

  local function load(keys)
    local key = keys[1]
    local raw = redis_call('HGET', key, 'H')
    if raw then
      if #raw ~= 64 and #raw ~= 72 then foreign_state() end
      HEAD, STORED, BASE, RING, OT, OC, NT, NC = struct_unpack(HEADER, raw)
      FRESH = false
    else
      if redis_call('EXISTS', key) == 1 then foreign_state() end
      HEAD, STORED, BASE, RING, OT, OC, NT, NC = 0, 0, 0, CAP, 0, 0, 0, 0
      FRESH = true
    end
    KEY, WRITTEN, LAST_SLOT, LAST_RAW, WRITES, CACHE, REGROWN = key, false, false, false, 0, false,
      false
    OWNER, SHARED, MEMO_SLOT = nil, not LONE, false
    if LONE then return LIVE, raw ~= false end
    return state(), raw ~= false
  end

  -- Entry `index` of the state (0: the oldest): its time and the running count
  -- after it. A slot comes from what the state wrote, else from the server, read
  -- once per key and call: the last read is kept as the memo, and a second one
  -- starts the slot cache.
  local function entry(index)
    if index == 0 then return OT, OC end
    if index == LEN - 1 then return NT, NC end
    local slot = HEAD + index
    if slot >= RING then slot = slot - RING end
    local raw
    if slot == LAST_SLOT then
      raw = LAST_RAW
    elseif WRITTEN then
      raw = WRITTEN[slot]
    end
    if raw == nil then
      if slot == MEMO_SLOT then
        raw = MEMO_RAW
      else
        if CACHE then raw = CACHE[slot] end
        if raw == nil then
          raw = not FRESH and redis_call('HGET', KEY, struct_pack('>I4', slot))
          if CACHE then
            CACHE[slot] = raw
          elseif MEMO_SLOT then
            CACHE = {[MEMO_SLOT] = MEMO_RAW, [slot] = raw}
            if OWNER then OWNER[14] = CACHE end
          end
        end
        MEMO_SLOT, MEMO_RAW = slot, raw
      end
    end
    if not raw then return 0, 0 end
    if #raw ~= 16 then foreign_state() end
    local at, count = struct_unpack('>dd', raw)
    return at, count
  end

  -- The running count just before entry `index`.
  local function count_before(index)
    if index == 0 then return BASE end
    local _, count = entry(index - 1)
    return count
  end

  local function is_live(index)
    local at = entry(index)
    return AT - at < D
  end

  -- Whether the permits still logged once entries up to `index` have expired (the
  -- attempt's EXTRA included) are within ALLOWED.
  local function clears(index)
    if index >= LEN then return true end
    return FIN - count_before(index + 1) + EXTRA <= ALLOWED
  end

  -- The first index in [low, high) where `holds` (false, then true for good) is
  -- true, or high: a galloping search from low (offsets 1, 2, 4, ...) and then a
  -- binary one, so an answer d entries past low costs O(log d) slot reads. The
  -- answers a hammered log asks for (the first live entry, the first to expire) lie
  -- at the front: the header's copy, or one slot.
  local function first_true(low, high, holds)
    if low >= high or holds(low) then return low end
    local lo, step, probe = low + 1, 1, low + 1
    while probe < high and not holds(probe) do
      lo = probe + 1
      step = step * 2
      probe = low + step
    end
    local hi = min(probe, high)
    while lo < hi do
      local middle = lo + floor((hi - lo) / 2)
      if holds(middle) then hi = middle else lo = middle + 1 end
    end
    return lo
  end

  -- When entries from `first` on (and an attempt of `cost` at `attempt_at`, if
  -- given: a recorded refusal's own entry) have expired enough for `cost` to fit,
  -- relative to `now` (0: already).
  local function fits_at(first, attempt_at, cost, now)
    ALLOWED = max(LIMIT - cost, 0)
    EXTRA = 0
    if attempt_at then EXTRA = cost end
    if FIN - count_before(first) + EXTRA <= ALLOWED then return 0 end
    local top = max(LEN - 1, 0)
    if attempt_at then top = LEN end
    local low = first_true(first, top, clears)
    local at
    if attempt_at and low >= LEN then at = attempt_at else at = entry(low) end
    return at - now + D
  end

  local function save(keys, st, ms)
    if st ~= LIVE then use(st) end
    local key = keys[1]
    local packing = HEADER
    if RING > 64 then packing = PADDED end
    local header = struct_pack(packing, HEAD, STORED, BASE, RING, OT, OC, NT, NC, 0)
    if REGROWN then redis_call('DEL', key) end
    if WRITES == 0 then
      -- No slot written (a new key's first entry, or one that follows the oldest).
      redis_call('HSET', key, 'H', header)
    elseif not WRITTEN then
      -- One step's write (most calls): one HSET, no argument list to build.
      redis_call('HSET', key, 'H', header, struct_pack('>I4', LAST_SLOT), LAST_RAW)
    else
      local set = {'H', header}
      for slot, raw in pairs(WRITTEN) do
        set[#set + 1] = struct_pack('>I4', slot)
        set[#set + 1] = raw
        -- In batches: unpack has a limit (a regrown ring writes every entry).
        if #set >= 2000 then
          redis_call('HSET', key, unpack(set))
          set = {}
        end
      end
      if #set > 0 then redis_call('HSET', key, unpack(set)) end
    end
    if ms == 'keep' then return end
    if ms then redis_call('PEXPIRE', key, format('%d', ms)) else redis_call('PERSIST', key) end
  end

  -- A log whose ring is smaller than this configuration's (its limit was raised):
  -- the same entries, moved into a ring of CAP slots starting at slot 0, every one
  -- of them written.
  local function regrow()
    LEN = min(STORED, RING)
    local w = {}
    for index = 0, LEN - 1 do w[index] = struct_pack('>dd', entry(index)) end
    HEAD, STORED, RING = 0, LEN, CAP
    WRITTEN, LAST_SLOT, LAST_RAW, WRITES, CACHE, FRESH, REGROWN = w, false, false, LEN, false,
      true, true
    -- The slots are all written now: none is read from the server, and no cache
    -- joins the array the state came from.
    OWNER, MEMO_SLOT = nil, false
  end

  local function reserve(st, now, cost)
    if st ~= LIVE then use(st) end
    if RING < CAP then regrow() end
    -- The header at now (Rust's `header`), and the first live entry (`first_live`):
    -- the oldest, by its copy, unless it has expired; then the next one, unless it
    -- has too (a paced grant's case, written out).
    local len, base = STORED, BASE
    if len > RING then len = RING end
    LEN, FIN, AT = len, base, now
    local lst, t1, c1 = nil, nil, nil
    local first = 0
    if len > 0 then
      FIN, lst = NC, NT
      if lst > now then AT = lst end
      if AT - OT >= D then
        first = 1
        if len > 1 then
          t1, c1 = entry(1)
          if AT - t1 >= D then first = first_true(2, len, is_live) end
        end
      end
    end
    -- The permits from the first live entry on, and Rust's `judge` (then
    -- `recorded_refusal` for a refusal it records), with `spaced_at`, `reset_at` and
    -- the decision's table written out: a Lua function call costs more than their
    -- arithmetic. Times are compared and measured from one another (x - now + D,
    -- never x + D - now): x + D can pass 2^53, where a double skips odd integers,
    -- while a difference of two times, and a duration that follows from it, stay
    -- below.
    local live = FIN - base
    if first == 1 then
      live = FIN - OC
    elseif first > 1 then
      live = FIN - count_before(first)
    end
    local remaining = LIMIT - live
    if remaining < 0 then remaining = 0 end
    local reset = 0
    if lst then
      reset = lst - now + RESET_SPAN
      if reset < 0 then reset = 0 end
    end
    if cost > LIMIT then return decision(2, LIMIT, remaining, 0, 0, reset), nil end
    -- A LONE step's short reply is packed, with its verdict and reset_after in ns.
    local d, verdict, reset_ns
    if live + cost <= LIMIT and (lst == nil or SPACING == 0 or AT - lst >= SPACING) then
      reset = AT - now + RESET_SPAN
      if reset < 0 then reset = 0 end
      -- The receipt: the running count after the grant's entry, and its cost (each
      -- as 32-bit halves: exact splits of integer doubles).
      local mark, charge = FIN + cost, cost
      local mark_lo, charge_lo = mark % 4294967296, charge % 4294967296
      -- A LONE step answers the short reply (driver.lua's `short`) where it holds
      -- the durations (below 9 x 10^12 us); others the full 16 integers.
      if LONE and reset < 9e12 then
        verdict, reset_ns = 0, reset * 1000
        d = struct_pack(SHORT9, 0, 0, reset_ns, LIMIT - live - cost, LIMIT,
          (mark - mark_lo) / 4294967296, mark_lo, (charge - charge_lo) / 4294967296, charge_lo)
      else
        d = {0, 0, 0, 0, 0, reset, 0, LIMIT - live - cost, LIMIT, 0, (mark - mark_lo) / 4294967296,
             mark_lo, (charge - charge_lo) / 4294967296, charge_lo, 0, 0}
      end
    elseif not RECORD or UNRECORDED then
      -- fits_at(first): on a hammered log, the oldest entry's copy answers.
      local allowed, at = LIMIT - cost, 0
      if live > allowed then
        if first == 0 and (len == 1 or FIN - OC <= allowed) then
          at = OT - now + D
        else
          at = fits_at(first, nil, cost, now)
        end
      end
      if lst and SPACING > 0 and lst - now + SPACING > at then at = lst - now + SPACING end
      if at < 0 then at = 0 end
      if LONE and at < 9e12 and reset < 9e12 then
        return struct_pack(SHORT5, 1, at * 1000, reset * 1000, remaining, LIMIT), nil, 1,
          reset * 1000
      end
      return {1, 0, 0, at, 0, reset, 0, remaining, LIMIT, 0, 0, 0, 0, 0, 0, 0}, nil
    else
      -- As if the attempt were already logged, so that a retry at retry_after fits:
      -- the entries that stay after dropping the expired and evicting for room.
      local kept = first
      if len - first >= CAP then kept = first + 1 end
      local held = FIN - count_before(kept) + cost
      local at = fits_at(kept, AT, cost, now)
      if SPACING > 0 then at = max(at, AT - now + SPACING) end
      d = decision(1, LIMIT, max(LIMIT - held, 0), 0, max(at, 0),
        max(AT - now + RESET_SPAN, 0))
    end
    -- The state after appending an entry of `cost` at AT (a grant, or a recorded
    -- refusal), dropping the `dropped` oldest (Rust's `dropped`: none when the
    -- entries held leave room, `roomy`) and evicting one more if the ring is full;
    -- entry 1 is t1, c1 if the step read it. The slots an array's state wrote are
    -- copied first: the array it came from keeps its own.
    local dropped = first
    if FIN - base + cost <= LIMIT and len < CAP then dropped = 0 end
    if LEN - dropped >= CAP then dropped = dropped + 1 end
    local head = HEAD + dropped
    if head >= RING then head = head - RING end
    local size, before = LEN - dropped + 1, BASE
    local nt, nc = AT, FIN + cost
    local ot, oc = nt, nc
    if dropped == 0 then
      if size > 1 then ot, oc = OT, OC end
    elseif dropped == 1 then
      before = OC
      if size > 1 then
        if t1 then ot, oc = t1, c1 else ot, oc = entry(1) end
      end
    else
      before = count_before(dropped)
      if size > 1 then ot, oc = entry(dropped) end
    end
    -- The previous newest entry's slot, once the new entry makes it a middle one
    -- (neither the oldest nor the newest, whose header copies are read instead).
    if LEN - 1 - dropped >= 1 then
      local slot = HEAD + LEN - 1
      if slot >= RING then slot = slot - RING end
      local raw = struct_pack('>dd', NT, NC)
      if WRITTEN then
        if SHARED then
          local w = {}
          for s, r in pairs(WRITTEN) do w[s] = r end
          WRITTEN = w
        end
        WRITTEN[slot] = raw
      elseif WRITES > 0 then
        WRITTEN = {[LAST_SLOT] = LAST_RAW, [slot] = raw}
      end
      LAST_SLOT, LAST_RAW, WRITES = slot, raw, WRITES + 1
    end
    HEAD, STORED, BASE, OT, OC, NT, NC = head, size, before, ot, oc, nt, nc
    if SHARED then return d, state(), verdict, reset_ns end
    return d, LIVE, verdict, reset_ns
  end

  -- The Rust cancel: up to the instant the grant acts (at once), its entry is
  -- removed if it is still the newest (same running count, same cost).
  local function cancel(st, now, grant, acts_at)
    if acts_at == nil or cmp(acts_at, ns(now)) < 0 or not grant.allowed then return nil end
    use(st)
    LEN = min(STORED, RING)
    if LEN == 0 then return nil end
    FIN = NC
    local mark = grant.mark_halves[1] * W + grant.mark_halves[2]
    if FIN ~= mark or FIN - count_before(LEN - 1) ~= num(grant.charge) then return nil end
    -- The entry before it becomes the newest: the header's copy follows.
    if LEN > 1 then NT, NC = entry(LEN - 2) end
    STORED = LEN - 1
    return state()
  end
  return single(load, save, reserve, cancel)
end
