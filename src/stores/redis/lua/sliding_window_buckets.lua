-- The bucketed sliding window (src/algorithms/sliding_window_buckets.rs), its ring kept
-- in a hash: field 'n' the newest bucket's number, 't' the ring's total, 'o' a bucket
-- before which every bucket is empty (set by a grant into an empty ring; missing: 0),
-- and one field per ring slot ("0" .. RING-1, a missing slot is 0), the same slots as
-- the Rust ring, so that clearing and aliasing behave the same. A call reads the header
-- with the slots it most likely needs (one HMGET; any other slot an HGET, cached), and
-- a grant writes the slots it changed: O(1), whatever the limit or the number of
-- buckets. A refusal's exact retry_after walks the non-empty buckets from the oldest:
-- slot by slot from 'o', which on a busy key finds what it needs in a slot or two; past
-- 8 slots (a sparse ring), from one HGETALL of what the ring holds, never its empty
-- buckets. Times are whole microseconds. The weighted counts ("scaled", count x ns) and
-- the durations returned are plain doubles while every one the step can form stays
-- below 2^52 (the usual case: a limit and a window that are not astronomical), exact
-- limb arrays in ns otherwise.
-- C: 1 limit, 2 duration (us), 3 precision (us), 4 buckets B, 5 weighted (1) or
-- dropping (0), 6 ring slots (B + 1 rounded up to a power of two).
local function make_sliding_window_buckets(C)
  local LIMIT, D, P, B = C[1], C[2], C[3], C[4]
  local WEIGHTED, RING = C[5] == 1, C[6]
  local P_NS = ns(P)

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

  -- A state: the header, the slots it changed (w), whether every slot was cleared
  -- (wipe), and the server's slots read so far (shared by the copies of one key).
  -- The header comes in one HMGET with the slots a step at NOW most likely reads:
  -- the current bucket's and the two at the window's far end (the bucket leaving
  -- it, a weighted window's partial one); any other slot is read when needed.
  local function load(key)
    local current = div(NOW, P)
    local far = max(current - B, 0)
    local a, b, c = fmod(current, RING), fmod(far, RING), fmod(far + 1, RING)
    local got = redis_call('HMGET', key, 'n', 't', 'o', name(a), name(b), name(c))
    local cache = {}
    cache[a], cache[b], cache[c] = (got[4] or 0) + 0, (got[5] or 0) + 0, (got[6] or 0) + 0
    return {key = key, n = (got[1] or 0) + 0, t = (got[2] or 0) + 0, o = (got[3] or 0) + 0,
            w = {}, wipe = false, cache = cache}, got[1] ~= false
  end

  local function read(st, slot)
    local v = st.w[slot]
    if v ~= nil then return v end
    if st.wipe then return 0 end
    v = st.cache[slot]
    if v == nil then
      v = (redis_call('HGET', st.key, name(slot)) or 0) + 0
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
          if field ~= 'n' and field ~= 't' and field ~= 'o' then
            all[tonumber(field)] = tonumber(flat[i + 1])
          end
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
    local set, gone = {'n', int(st.n), 't', int(st.t), 'o', int(st.o)}, {}
    for slot, v in pairs(st.w) do
      if v == 0 then
        gone[#gone + 1] = name(slot)
      else
        set[#set + 1] = name(slot)
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

  -- The first bucket counted whole, then the partial one and its us inside the
  -- window (nil, 0 when none).
  local function bounds(v)
    local nxt = max(v.current + 1 - B, 0)
    if not WEIGHTED or v.at < D then
      if WEIGHTED then return 0, nil, 0 end
      return nxt, nil, 0
    end
    local start = v.at - D
    local boundary = nxt * P
    local partial, finish
    if start >= boundary then
      partial, finish = nxt, boundary + P
    else
      partial, finish = max(nxt - 1, 0), boundary
    end
    return partial + 1, partial, max(finish - start, 0)
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
    local first_whole, partial, inside = bounds(v)
    local scaled = mul(bn(whole(st, v, first_whole)), P_NS)
    if partial then
      scaled = add(scaled, mul(bn(count(st, v, partial)), ns(inside)))
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
    local first_whole, partial, inside = bounds(v)
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
      local c = count(st, v, partial)
      local part = mul(bn(c), ns(inside))
      if cmp(part, excess) >= 0 then return crossed(start, excess, c) end
      excess = sub(excess, part)
      start = add(start, ns(inside))
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
    local new = {key = st.key, n = st.n, t = st.t, o = st.o, w = {}, wipe = st.wipe,
                 cache = st.cache}
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
    -- A grant into an empty ring: every bucket before this one is empty.
    if total == 0 then new.o = v.current end
    local s = slot(v.current)
    new.w[s] = read(new, s) + cost
    new.t = total + cost
    return new
  end

  -- The same step on doubles: counts scaled by the precision in us (x 1000 is the
  -- scaled count above), durations in ns relative to now. Exact while a scaled
  -- count of twice the limit (the ring's total: the window's, at most the limit,
  -- and the bucket just leaving it), and every duration from now, stay below 2^52
  -- in ns; `reserve_near` answers nil (the limbs decide) for a view past that.
  local NEAR = (2 * LIMIT + 2) * P * 1000 < 2 ^ 52

  -- ns from now until `us` (absolute), never negative.
  local function after(us, now) return max(us - now, 0) * 1000 end

  local function gone_at_us(bucket)
    if WEIGHTED then return (bucket + 1) * P + D end
    return (bucket + B) * P
  end

  local function reset_near(st, v, now)
    local oldest, newest = max(v.current - B, 0), min(v.current, v.newest)
    if newest >= oldest and count(st, v, newest) > 0 then return after(gone_at_us(newest), now) end
    local found = nonempty(st, oldest, newest)
    if #found == 0 then return 0 end
    return after(gone_at_us(found[#found][1]), now)
  end

  -- When `excess` (scaled, us) has left, counted from `start` (us) through a
  -- bucket of count c: Rust's crossing, ns from now.
  local function crossed_near(start, excess, c, now)
    local q, r = div(excess * 1000, max(c, 1))
    if r > 0 then q = q + 1 end
    return max((start + D - now) * 1000 + q, 0)
  end

  -- The non-empty buckets in [from, to], ascending, as an iterator of bucket,
  -- count: slot by slot from the state's oldest possibly non-empty bucket (`o`,
  -- below which every bucket is empty), so that a refusal reads the one or two
  -- buckets it needs, not the ring; past 8 slots read, the rest from the ring's
  -- non-empty slots (what a sparse ring costs).
  local function ascending(st, v, from, to)
    local b, reads, rest, i = max(from, st.o), 0, nil, 0
    return function()
      while rest == nil and b <= to do
        if reads == 8 then
          rest = nonempty(st, b, to)
        else
          local c = count(st, v, b)
          reads, b = reads + 1, b + 1
          if c > 0 then return b - 1, c end
        end
      end
      if rest then
        i = i + 1
        local bc = rest[i]
        if bc then return bc[1], bc[2] end
      end
      return nil
    end
  end

  local function retry_near(st, v, now, excess, excess_permits, first_whole, partial, inside, c)
    local last = min(v.current, v.newest)
    if not WEIGHTED then
      for bucket, held in ascending(st, v, first_whole, last) do
        if held >= excess_permits then return after(gone_at_us(bucket), now) end
        excess_permits = excess_permits - held
      end
      return after(gone_at_us(max(last + 1, first_whole)), now)
    end
    local start = 0
    if partial then
      start = v.at - D
      local part = c * inside
      if part >= excess then return crossed_near(start, excess, c, now) end
      excess = excess - part
      start = start + inside
    end
    for bucket, held in ascending(st, v, first_whole, last) do
      local part = held * P
      if part >= excess then
        return crossed_near(start + (bucket - first_whole) * P, excess, held, now)
      end
      excess = excess - part
    end
    return after(start + max(last + 1 - first_whole, 0) * P + D, now)
  end

  local function reserve_near(st, now, cost)
    local v = view(st, now)
    if v.total > 2 * LIMIT or (v.at - now + D + 2 * P) * 1000 >= 2 ^ 52 then return nil end
    local first_whole, partial, inside = bounds(v)
    local scaled = whole(st, v, first_whole) * P
    local c = 0
    if partial then
      c = count(st, v, partial)
      scaled = scaled + c * inside
    end
    local used, rest = div(scaled, P)
    if rest > 0 then used = used + 1 end
    if cost > LIMIT then
      return decision_ns(2, LIMIT, max(LIMIT - used, 0), 0, reset_near(st, v, now)), nil
    end
    local allowed = (LIMIT - cost) * P
    if scaled <= allowed then
      local reset = after(gone_at_us(v.current), now)
      local d = decision_ns(0, LIMIT, LIMIT - cost - used, 0, reset)
      d[11], d[12] = split32(v.current)
      d[13], d[14] = split32(cost)
      return d, commit(st, v, cost)
    end
    local retry = retry_near(st, v, now, scaled - allowed, used + cost - LIMIT, first_whole,
      partial, inside, c)
    return decision_ns(1, LIMIT, max(LIMIT - used, 0), retry, reset_near(st, v, now)), nil
  end

  local function reserve_exact(st, now, cost)
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
    local new = {key = st.key, n = st.n, t = max(st.t - back, 0), o = st.o, w = {},
                 wipe = st.wipe, cache = st.cache}
    for k, v in pairs(st.w) do new.w[k] = v end
    new.w[s] = c - back
    return new
  end
  local reserve = reserve_exact
  if NEAR then reserve = near_first(reserve_near, reserve_exact) end
  return single(load, save, reserve, cancel)
end
