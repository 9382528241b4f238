-- The bucketed sliding window (src/algorithms/sliding_window_buckets.rs), its ring
-- kept in a hash: field 'n' the newest bucket's number, 't' the ring's total, and
-- one field per ring slot ("0" .. RING-1, a missing slot is 0), the same slots as
-- the Rust ring, so that clearing and aliasing behave the same. A call reads the
-- header and the few slots it needs (HGET each, cached), and a grant writes the
-- slots it changed: O(1) amortized, whatever the limit or the number of buckets.
-- A refusal's exact retry_after walks the non-empty slots (one HGETALL of what the
-- ring holds, never its empty buckets). Times are whole microseconds; the weighted counts ("scaled", count x ns)
-- and returned durations are exact limb arrays in ns.
-- C: 1 limit, 2 duration (us), 3 precision (us), 4 buckets B, 5 weighted (1) or
-- dropping (0), 6 ring slots (B + 1 rounded up to a power of two).
local function make_sliding_window_buckets(C)
  local LIMIT, D, P, B = C[1], C[2], C[3], C[4]
  local WEIGHTED, RING = C[5] == 1, C[6]
  local P_NS = ns(P)

  -- A state: the header, the slots it changed (w), whether every slot was cleared
  -- (wipe), and the server's slots read so far (shared by the copies of one key).
  local function load(key)
    local header = redis_call('HMGET', key, 'n', 't')
    local held = header[1] ~= false
    return {key = key, n = tonumber(header[1] or '0'), t = tonumber(header[2] or '0'),
            w = {}, wipe = false, cache = {}}, held
  end

  local function read(st, slot)
    local v = st.w[slot]
    if v ~= nil then return v end
    if st.wipe then return 0 end
    v = st.cache[slot]
    if v == nil then
      v = tonumber(redis_call('HGET', st.key, tostring(slot)) or '0')
      st.cache[slot] = v
    end
    return v
  end

  -- Every non-empty slot of the state: slot -> count. One HGETALL per key and call
  -- (the hash holds only non-empty slots, so it costs what is in the ring, not B).
  local function all_slots(st)
    local slots = {}
    if not st.wipe then
      if not st.cache.all then
        local all = {}
        local flat = redis_call('HGETALL', st.key)
        for i = 1, #flat, 2 do
          local field = flat[i]
          if field ~= 'n' and field ~= 't' then all[tonumber(field)] = tonumber(flat[i + 1]) end
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

  local function save(key, st, ms)
    if st.wipe then redis_call('DEL', key) end
    local set, gone = {'n', int(st.n), 't', int(st.t)}, {}
    for slot, v in pairs(st.w) do
      if v == 0 then
        gone[#gone + 1] = tostring(slot)
      else
        set[#set + 1] = tostring(slot)
        set[#set + 1] = int(v)
      end
    end
    redis_call('HSET', key, unpack(set))
    if #gone > 0 and not st.wipe then redis_call('HDEL', key, unpack(gone)) end
    if ms == 'keep' then return end
    if ms then redis_call('PEXPIRE', key, int(ms)) else redis_call('PERSIST', key) end
  end

  local function slot(bucket) return fmod(bucket, RING) end

  local function count(st, v, bucket)
    if bucket > v.newest then return 0 end
    return read(st, slot(bucket))
  end

  -- The buckets leaving the ring when it moves from newest to current: [from, to),
  -- or nil when every bucket has left.
  local function leaving(newest, current)
    if current - newest > B then return nil end
    local to = max(current - B, 0)
    return min(max(newest - B, 0), to), to
  end

  local function view(st, now)
    local newest = st.n
    local start = newest * P
    local at = max(now, start)
    local current = newest
    if at - start >= P then current = div(at, P) end
    local total
    if current == newest then
      total = st.t
    else
      local from, to = leaving(newest, current)
      if from == nil then
        total = 0
      else
        -- A few buckets: read their slots; many: sum the non-empty ones.
        local gone = 0
        if to - from <= 8 then
          for b = from, to - 1 do gone = gone + read(st, slot(b)) end
        else
          for _, bc in ipairs(nonempty(st, from, to - 1)) do gone = gone + bc[2] end
        end
        total = max(st.t - gone, 0)
      end
    end
    return {at = at, newest = newest, current = current, total = total}
  end

  -- The first bucket counted whole, and the partial one {bucket, ns inside} or nil.
  local function bounds(v)
    local nxt = max(v.current + 1 - B, 0)
    if not WEIGHTED or v.at < D then
      if WEIGHTED then return 0, nil end
      return nxt, nil
    end
    local start = v.at - D
    local boundary = nxt * P
    local partial, finish
    if start >= boundary then
      partial, finish = nxt, boundary + P
    else
      partial, finish = max(nxt - 1, 0), boundary
    end
    return partial + 1, {partial, max(finish - start, 0)}
  end

  local function whole(st, v, first_whole)
    local w = v.total
    local b = max(v.current - B, 0)
    while b < first_whole do
      w = max(w - count(st, v, b), 0)
      b = b + 1
    end
    return w
  end

  -- Permits counted, scaled by the precision in ns (whole buckets x precision, plus
  -- the partial bucket's count x its ns inside the window).
  local function used_scaled(st, v)
    local first_whole, partial = bounds(v)
    local scaled = mul(bn(whole(st, v, first_whole)), P_NS)
    if partial then
      scaled = add(scaled, mul(bn(count(st, v, partial[1])), ns(partial[2])))
    end
    return scaled
  end

  local function permits(scaled)
    local q, r = divmod(scaled, P_NS)
    q = num(q)
    if not (#r == 1 and r[1] == 0) then q = q + 1 end
    return q
  end

  -- When the counts in `bucket` stop counting, in ns.
  local function gone_at(bucket)
    if WEIGHTED then return ns((bucket + 1) * P + D) end
    return ns((bucket + B) * P)
  end

  local function reset_after(st, v, now_ns)
    -- The newest non-empty bucket still in the ring: usually the current one.
    local oldest, newest = max(v.current - B, 0), min(v.current, v.newest)
    if newest >= oldest and count(st, v, newest) > 0 then
      return subsat(gone_at(newest), now_ns)
    end
    local found = nonempty(st, oldest, newest)
    if #found == 0 then return {0} end
    return subsat(gone_at(found[#found][1]), now_ns)
  end

  local function crossed(start, excess, c)
    local q, r = divmod(excess, bn(max(c, 1)))
    if not (#r == 1 and r[1] == 0) then q = add(q, {1}) end
    return add(add(start, q), ns(D))
  end

  local function retry_at(st, v, excess, excess_permits)
    local first_whole, partial = bounds(v)
    -- The Rust step walks every bucket from first_whole to last; empty ones change
    -- nothing but the position, so this walks the non-empty ones only.
    local last = min(v.current, v.newest)
    local found = nonempty(st, first_whole, last)
    if not WEIGHTED then
      for _, bc in ipairs(found) do
        if bc[2] >= excess_permits then return gone_at(bc[1]) end
        excess_permits = excess_permits - bc[2]
      end
      return gone_at(max(last + 1, first_whole))
    end
    local start
    if partial then
      start = ns(v.at - D)
      local c = count(st, v, partial[1])
      local part = mul(bn(c), ns(partial[2]))
      if cmp(part, excess) >= 0 then return crossed(start, excess, c) end
      excess = sub(excess, part)
      start = add(start, ns(partial[2]))
    else
      start = {0}
    end
    -- `start` when the walk reaches bucket b is start + (b - first_whole) x precision.
    for _, bc in ipairs(found) do
      local at = add(start, ns((bc[1] - first_whole) * P))
      local part = mul(bn(bc[2]), P_NS)
      if cmp(part, excess) >= 0 then return crossed(at, excess, bc[2]) end
      excess = sub(excess, part)
    end
    return add(add(start, ns(max(last + 1 - first_whole, 0) * P)), ns(D))
  end

  local function windowed(verdict, remaining, retry, reset)
    local d = decision(verdict, LIMIT, remaining, 0, 0, 0)
    d[4], d[5] = us_ns(retry)
    d[6], d[7] = us_ns(reset)
    return d
  end

  -- The state after a grant of `cost` in the current bucket (a copy: the old one may
  -- still be read by a later key of the same call).
  local function commit(st, v, cost)
    local new = {key = st.key, n = st.n, t = st.t, w = {}, wipe = st.wipe, cache = st.cache}
    for k, c in pairs(st.w) do new.w[k] = c end
    local total = st.t
    if v.current > v.newest then
      local from, to = leaving(v.newest, v.current)
      if from == nil then
        new.wipe = true
        new.w = {}
      else
        -- Clearing an empty slot changes nothing: clear the non-empty ones.
        if to - from <= 8 then
          for b = from, to - 1 do new.w[slot(b)] = 0 end
        else
          for _, bc in ipairs(nonempty(st, from, to - 1)) do new.w[slot(bc[1])] = 0 end
        end
      end
      new.n = v.current
      total = v.total
    end
    local s = slot(v.current)
    new.w[s] = read(new, s) + cost
    new.t = total + cost
    return new
  end

  local function reserve(st, now, cost)
    local now_ns = ns(now)
    local v = view(st, now)
    local scaled = used_scaled(st, v)
    local used = permits(scaled)
    if cost > LIMIT then
      return windowed(2, max(LIMIT - used, 0), {0}, reset_after(st, v, now_ns)), nil
    end
    local allowed_scaled = mul(bn(LIMIT - cost), P_NS)
    if cmp(scaled, allowed_scaled) <= 0 then
      local reset = subsat(gone_at(v.current), now_ns)
      local d = windowed(0, LIMIT - cost - used, {0}, reset)
      -- The receipt: the bucket the grant was counted in, and its cost.
      d[11], d[12] = split32(v.current)
      d[13], d[14] = split32(cost)
      return d, commit(st, v, cost)
    end
    local reset = reset_after(st, v, now_ns)
    local at = retry_at(st, v, sub(scaled, allowed_scaled), used + cost - LIMIT)
    return windowed(1, max(LIMIT - used, 0), subsat(at, now_ns), reset), nil
  end

  -- The Rust cancel: up to the instant the grant acts (at once), its cost comes
  -- off its bucket while the ring still holds that bucket, never below zero.
  local function cancel(st, now, grant, acts_at)
    if acts_at == nil or cmp(acts_at, ns(now)) < 0 then return nil end
    local bucket = grant.mark_halves[1] * W + grant.mark_halves[2]
    if bucket > st.n or bucket < max(st.n - B, 0) then return nil end
    local s = slot(bucket)
    local c = read(st, s)
    local back = min(num(grant.charge), c)
    local new = {key = st.key, n = st.n, t = max(st.t - back, 0), w = {}, wipe = st.wipe,
                 cache = st.cache}
    for k, v in pairs(st.w) do new.w[k] = v end
    new.w[s] = c - back
    return new
  end
  return single(load, save, reserve, cancel)
end
