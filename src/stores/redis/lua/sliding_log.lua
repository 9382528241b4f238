-- The exact sliding log (src/algorithms/sliding_log.rs), in whole microseconds, its
-- ring in a hash of packed doubles (exact: every value is an integer below 2^53):
-- 'H' the header (the ring index of the oldest entry, the number of entries, the
-- running count before the oldest, the ring size), and one field per slot
-- "<slot>" = (time, running count after it). Packed, a read is one `struct.unpack`
-- where text took a pattern match and a decimal parse per number. As in Rust, every call
-- reads the header and the newest entry; a call that finds the entries held
-- (expired included) leave room needs nothing else, and otherwise the first live
-- entry and a refusal's exact retry_after are galloping searches from the front
-- (`first_true`: O(log d) slot reads for an answer d entries in, one or two on a
-- hammered log). A grant writes the header and one slot.
-- C: 1 limit, 2 duration (us), 3 min spacing (us), 4 record refusals (1) or not.
local function make_sliding_log(C)
  local LIMIT, D, SPACING = C[1], C[2], C[3]
  local RECORD = C[4] == 1
  local CAP = LIMIT + C[4]

  local function load(key)
    -- 'h' is the header of the text layout this one replaced: refused, not read as
    -- an empty log.
    local hdr = redis_call('HMGET', key, 'H', 'h')
    local raw = hdr[1]
    if hdr[2] or (raw and #raw ~= 32) then foreign_state() end
    if not raw then
      return {key = key, head = 0, len = 0, base = 0, ring = CAP, w = {}, cache = {}}, false
    end
    local head, len, base, ring = struct_unpack('>dddd', raw)
    return {key = key, head = head, len = len, base = base, ring = ring, w = {}, cache = {}}, true
  end

  local function entry(st, slot)
    local e = st.w[slot] or st.cache[slot]
    if e == nil then
      local raw = redis_call('HGET', st.key, tostring(slot))
      if raw then
        if #raw ~= 16 then foreign_state() end
        local at, count = struct_unpack('>dd', raw)
        e = {at, count}
      else
        e = {0, 0}
      end
      st.cache[slot] = e
    end
    return e[1], e[2]
  end

  local function save(key, st, ms)
    if st.regrown then redis_call('DEL', key) end
    local set = {'H', struct_pack('>dddd', st.head, st.len, st.base, st.ring)}
    for slot, e in pairs(st.w) do
      set[#set + 1] = tostring(slot)
      set[#set + 1] = struct_pack('>dd', e[1], e[2])
      -- In batches: unpack has a limit (a regrown ring writes every entry).
      if #set >= 2000 then
        redis_call('HSET', key, unpack(set))
        set = {}
      end
    end
    if #set > 0 then redis_call('HSET', key, unpack(set)) end
    if ms == 'keep' then return end
    if ms then redis_call('PEXPIRE', key, int(ms)) else redis_call('PERSIST', key) end
  end

  local function wrap(slot, ring)
    if slot >= ring then return slot - ring end
    return slot
  end

  -- The header as the Rust step reads it at `now`.
  local function header(st, now)
    local h = {st = st, at = now, len = min(st.len, st.ring), finish = st.base, newest = 0}
    if h.len > 0 then
      h.newest, h.finish = entry(st, wrap(st.head + h.len - 1, st.ring))
      h.at = max(now, h.newest)
    end
    return h
  end

  local function time(h, index)
    local at = entry(h.st, wrap(h.st.head + index, h.st.ring))
    return at
  end

  local function count_before(h, index)
    if index == 0 then return h.st.base end
    local _, count = entry(h.st, wrap(h.st.head + index - 1, h.st.ring))
    return count
  end

  local function from(h, index) return h.finish - count_before(h, index) end

  local function last(h)
    if h.len > 0 then return h.newest end
    return nil
  end

  local function roomy(h, cost)
    return h.finish - h.st.base + cost <= LIMIT and h.len < CAP
  end

  -- The first index in [low, high) where `holds` (false, then true for good) is
  -- true, or high: a galloping search from low (offsets 1, 2, 4, ...) and then a
  -- binary one, so an answer d entries past low costs O(log d) slot reads. The
  -- answers a hammered log asks for (the first live entry, the first to expire) lie
  -- at the front: one or two reads, whatever the limit.
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

  local function first_live(h)
    return first_true(0, h.len, function(index) return time(h, index) + D > h.at end)
  end

  local function spaced_at(at)
    if at ~= nil and SPACING > 0 then return at + SPACING end
    return 0
  end

  -- When entries from `first` on (and the recorded attempt, if any) have expired
  -- enough for `cost` to fit.
  local function fits_at(h, first, attempt, cost)
    local allowed = max(LIMIT - cost, 0)
    local extra = 0
    if attempt then extra = attempt[2] end
    local function after(index)
      if index >= h.len then return 0 end
      return from(h, index + 1) + extra
    end
    if from(h, first) + extra <= allowed then return 0 end
    local top = max(h.len - 1, 0)
    if attempt then top = h.len end
    local low = first_true(first, top, function(index) return after(index) <= allowed end)
    local at
    if attempt and low >= h.len then at = attempt[1] else at = time(h, low) end
    return at + D
  end

  local function reset_at(newest, lst)
    local expired = 0
    if newest ~= nil then expired = newest + D end
    return max(expired, spaced_at(lst))
  end

  local function judge(h, live, first, now, cost)
    local lst = last(h)
    local reset = max(reset_at(lst, lst) - now, 0)
    local remaining = max(LIMIT - live, 0)
    if cost > LIMIT then return false, decision(2, LIMIT, remaining, 0, 0, reset) end
    local spaced = h.at >= spaced_at(lst)
    if live + cost <= LIMIT and spaced then
      reset = max(reset_at(h.at, h.at) - now, 0)
      return true, decision(0, LIMIT, max(LIMIT - live - cost, 0), 0, 0, reset)
    end
    local at = max(fits_at(h, first, nil, cost), spaced_at(lst))
    return false, decision(1, LIMIT, remaining, 0, max(at - now, 0), reset)
  end

  local function recorded_refusal(h, first, now, cost)
    local held = h.len - first
    local kept = first
    if held >= CAP then kept = first + 1 end
    local live = from(h, kept) + cost
    local at = max(fits_at(h, kept, {h.at, cost}, cost), spaced_at(h.at))
    local reset = max(reset_at(h.at, h.at) - now, 0)
    return decision(1, LIMIT, max(LIMIT - live, 0), 0, max(at - now, 0), reset)
  end

  -- A log whose ring is smaller than this configuration's (its limit was raised):
  -- the same entries, moved into a ring of CAP slots starting at slot 0.
  local function regrown(st)
    local new = {key = st.key, head = 0, len = 0, base = st.base, ring = CAP, w = {}, cache = {},
                 regrown = true}
    local h = header(st, 0)
    for index = 0, h.len - 1 do
      local at, count = entry(st, wrap(st.head + index, st.ring))
      new.w[index] = {at, count}
    end
    new.len = h.len
    return new
  end

  -- The state after appending an entry (a grant, or a recorded refusal), dropping
  -- the `dropped` oldest and evicting one more if the ring is full.
  local function append(h, dropped, cost)
    local st = h.st
    if h.len - dropped >= CAP then dropped = dropped + 1 end
    local new = {key = st.key, ring = st.ring, w = {}, cache = st.cache, regrown = st.regrown}
    for k, e in pairs(st.w) do new.w[k] = e end
    new.head = wrap(st.head + dropped, st.ring)
    new.len = h.len - dropped + 1
    if dropped == 0 then new.base = st.base else new.base = count_before(h, dropped) end
    new.w[wrap(st.head + h.len, st.ring)] = {h.at, h.finish + cost}
    return new
  end

  local function reserve(st, now, cost)
    if st.ring < CAP then st = regrown(st) end
    local h = header(st, now)
    local first = first_live(h)
    local live = from(h, first)
    local granted, d = judge(h, live, first, now, cost)
    if not granted then
      if d[1] == 2 or not RECORD then return d, nil end
      d = recorded_refusal(h, first, now, cost)
    end
    local dropped = first
    if roomy(h, cost) then dropped = 0 end
    if granted then
      -- The receipt: the running count after the grant's entry, and its cost.
      d[11], d[12] = split32(h.finish + cost)
      d[13], d[14] = split32(cost)
    end
    return d, append(h, dropped, cost)
  end

  -- The Rust cancel: up to the instant the grant acts (at once), its entry is
  -- removed if it is still the newest (same running count, same cost).
  local function cancel(st, now, grant, acts_at)
    if acts_at == nil or cmp(acts_at, ns(now)) < 0 or not grant.allowed then return nil end
    local h = header(st, now)
    if h.len == 0 then return nil end
    local mark = grant.mark_halves[1] * W + grant.mark_halves[2]
    if h.finish ~= mark or from(h, h.len - 1) ~= num(grant.charge) then return nil end
    return {key = st.key, head = st.head, len = h.len - 1, base = st.base, ring = st.ring,
            w = {}, cache = st.cache}
  end
  return single(load, save, reserve, cancel)
end
