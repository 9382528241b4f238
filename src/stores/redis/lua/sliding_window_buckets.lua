-- The bucketed sliding window (src/algorithms/sliding_window_buckets/ring.rs), its ring kept
-- in a hash of packed big-endian doubles (exact: integers below 2^53). Field 'H', the
-- header: the newest bucket's number n, the ring's total, o (a bucket before which
-- every bucket is empty, set by a grant into an empty ring), and copies of the counts
-- of buckets n, n - B, n - B + 1 and o (0 once o has left the ring). One field per
-- non-empty ring slot ("0" .. RING-1, a missing slot is 0), the same slots as the Rust
-- ring, so that clearing and aliasing behave the same.
-- Why the copies: a call needs, besides the total, only a few counts (the newest for
-- reset_after, the one leaving a dropping window or the partial one of a weighted
-- window, the oldest non-empty one where a refusal's walk starts), and whoever writes
-- the header knows them; so on a hammered key (a dropping window, `reserve_fast`) a
-- refusal reads one field and a grant in the newest bucket writes the header and one
-- slot (one HSET), whatever the limit; a grant that moves the ring a few buckets reads
-- the counts the header lacks in one HMGET (`grant_moved`). Any other slot is an HGET,
-- cached for the call (the buckets leaving the ring when it moves, in one HMGET). A refusal's exact
-- retry_after otherwise walks the non-empty buckets from the oldest: slot by slot from
-- 'o'; past 8 slots (a sparse ring), from one HGETALL of what the ring holds, never its
-- empty buckets. A key without 'H' but holding something is in an older layout
-- (decimal fields 'n', 't', 'o'): refused, never read as empty. Times are whole
-- microseconds. The weighted counts ("scaled", count x ns) and the durations returned
-- are plain doubles while every one the step can form stays below 2^52 (the usual
-- case: a limit and a window that are not astronomical), exact limb arrays in ns
-- otherwise.
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

  local HEADER = '>ddddddd'
  -- A loaded state's writes: none, in one table shared by every load (a state's own
  -- writes go to a new table), which saves a table per call.
  local NONE = {}

  -- A state: the header (n, t, o; cn, c0, c1 and co the copies of buckets n, n - B,
  -- n - B + 1 and o: co is 0 once o has left the ring), the slots it changed (w),
  -- whether every slot was cleared (wipe), and the server's slots read so far (cache,
  -- shared by the copies of one key).
  local function load(keys)
    local key = keys[1]
    local raw = redis_call('HGET', key, 'H')
    if not raw then
      if redis_call('EXISTS', key) == 1 then foreign_state() end
      return {key = key, n = 0, t = 0, o = 0, cn = 0, c0 = 0, c1 = 0, co = 0, w = NONE,
              wipe = false}, false
    end
    if #raw ~= 56 then foreign_state() end
    local n, t, o, cn, c0, c1, co = struct_unpack(HEADER, raw)
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
      v = unpacked(redis_call('HGET', st.key, name(slot)))
      cache[slot] = v
    end
    return v
  end

  -- Lua's % (a - floor(a / RING) * RING) is exact here: RING is a power of two, so
  -- the division is, and it costs less than fmod's C call on a large bucket number.
  local function slot(bucket) return bucket % RING end

  -- The count of `bucket` (one the ring holds: n - B or later) in st's ring: the
  -- header's copies first, and none before o.
  local function held(st, bucket)
    local n = st.n
    if bucket == n then return st.cn end
    if bucket == n - B then return st.c0 end
    if bucket == n - B + 1 then return st.c1 end
    if bucket == st.o then return st.co end
    if bucket < st.o then return 0 end
    return read(st, slot(bucket))
  end

  -- Reads the slots of buckets first..last (ring buckets) that `held` would read one
  -- HGET at a time in one HMGET instead, when there are several.
  local function prefetch(st, first, last)
    if st.wipe then return end
    if not st.cache then st.cache = {} end
    local want, slots = {}, {}
    for b = max(first, st.o), last do
      local s = slot(b)
      if b ~= st.n and b ~= st.n - B and b ~= st.n - B + 1 and st.w[s] == nil
          and st.cache[s] == nil then
        want[#want + 1] = name(s)
        slots[#slots + 1] = s
      end
    end
    if #slots < 2 then return end
    local got = redis_call('HMGET', st.key, unpack(want))
    for i = 1, #slots do st.cache[slots[i]] = unpacked(got[i]) end
  end

  -- The copies for a state whose slots are final (w, wipe) and whose newest bucket
  -- is n: read through it, not through its copies.
  local function copied(st, n)
    local c0, c1 = 0, 0
    if n - B >= 0 then c0 = read(st, slot(n - B)) end
    if n - B + 1 >= 0 then c1 = read(st, slot(n - B + 1)) end
    return read(st, slot(n)), c0, c1
  end

  -- Every non-empty slot of the state: slot -> count. One HGETALL per key and call
  -- (the hash holds only non-empty slots, so it costs what is in the ring, not B).
  local function all_slots(st)
    local slots = {}
    if not st.wipe then
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
    local header = struct_pack(HEADER, st.n, st.t, st.o, st.cn, st.c0, st.c1, st.co)
    local only = st.only
    if only then
      -- One grant in the newest bucket (most calls): one HSET, no lists to build.
      redis_call('HSET', key, 'H', header, name(only), struct_pack('>d', st.w[only]))
    else
      if st.wipe then redis_call('DEL', key) end
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

  local function count(st, v, bucket)
    if bucket > v.newest then return 0 end
    return held(st, bucket)
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
          -- With the two buckets a grant's new ring starts with (its copies).
          prefetch(st, from, to + 1)
          for b = from, to - 1 do gone = gone + held(st, b) end
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
    local new = {key = st.key, n = st.n, t = st.t, o = st.o, cn = st.cn, c0 = st.c0, c1 = st.c1,
                 co = st.co, w = {}, wipe = st.wipe, cache = st.cache, dirty = true}
    if st.dirty then for k, c in pairs(st.w) do new.w[k] = c end end
    local total, current = st.t, v.current
    local moved = current > v.newest
    if moved then
      local from, to = leaving(v.newest, current)
      if from == nil then
        new.wipe = true
        new.w = {}
      else
        -- Clearing an empty slot changes nothing: clear the non-empty ones (none is
        -- before o).
        if to - from <= 8 then
          for b = max(from, st.o), to - 1 do new.w[slot(b)] = 0 end
        else
          for _, bc in ipairs(nonempty(st, from, to - 1)) do new.w[slot(bc[1])] = 0 end
        end
      end
      new.n = current
      total = v.total
    end
    -- A grant into an empty ring: every bucket before this one is empty.
    if total == 0 then new.o = current end
    local s = slot(current)
    new.t = total + cost
    if moved then
      new.w[s] = read(new, s) + cost
      new.cn, new.c0, new.c1 = copied(new, current)
    else
      local c = st.cn + cost
      new.w[s] = c
      new.cn = c
      -- The state's one write, if its parent had none: `save`'s short way.
      if not st.dirty then new.only = s end
    end
    -- o's count: this grant's if it is o's, none once o has left the ring.
    if current == new.o then
      new.co = new.cn
    elseif new.o < current - B then
      new.co = 0
    end
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
    local c = held(st, bucket)
    local back = min(num(grant.charge), c)
    local new = {key = st.key, n = st.n, t = max(st.t - back, 0), o = st.o, cn = st.cn,
                 c0 = st.c0, c1 = st.c1, co = st.co, w = {}, wipe = st.wipe, cache = st.cache,
                 dirty = true}
    for k, v in pairs(st.w) do new.w[k] = v end
    new.w[s] = c - back
    if bucket == st.n then new.cn = c - back end
    if bucket == st.n - B then new.c0 = c - back end
    if bucket == st.n - B + 1 then new.c1 = c - back end
    if bucket == st.o then new.co = c - back end
    return new
  end
  -- A dropping window's step where the header alone decides, as `reserve_near` would
  -- (its guard, its arithmetic), or nil: the step in the newest bucket, or a later one
  -- when every bucket leaving the ring is before o (empty), the count leaving the
  -- window and a refusal's first non-empty bucket being the header's copies. That is
  -- a hammered key's call: no slot read, no view table, no walk.
  -- Keeps the counts `grant_moved` read (those at `index` in counts, from bucket low)
  -- in the state's cache, for the general step that answers instead: nil.
  local function remember(st, low, counts, index)
    local cache = st.cache
    if not cache then
      cache = {}
      st.cache = cache
    end
    for i = 1, #index do cache[slot(low + index[i] - 1)] = counts[index[i]] end
    return nil
  end

  -- `reserve_fast`'s grant that moves the ring a few buckets (to bucket c, at most 8
  -- on): the counts the header does not hold, of the buckets leaving and the two the
  -- new ring starts with, in one HMGET, and `commit` written out. Nil for anything
  -- else (a refusal, a state this call already changed), which the general step
  -- answers.
  local function grant_moved(st, now, cost, n, c, at)
    if c - n > 8 or st.dirty or cost > LIMIT or (at - now + D + 2 * P) * 1000 >= 2 ^ 52 then
      return nil
    end
    local o = st.o
    local low = max(n - B, o, 0)
    local counts, want, index = {}, {}, {}
    for b = low, c - B + 1 do
      local v = false
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
      end
      counts[b - low + 1] = v
      if not v then
        want[#want + 1] = name(slot(b))
        index[#index + 1] = b - low + 1
      end
    end
    if #want > 0 then
      local got = redis_call('HMGET', st.key, unpack(want))
      for i = 1, #want do counts[index[i]] = unpacked(got[i]) end
    end
    -- Rust's view (the buckets before c - B leave) and, dropping, bucket c - B is in
    -- the ring but not in the window.
    local total = st.t
    for b = low, c - B - 1 do total = total - counts[b - low + 1] end
    if total < 0 then total = 0 end
    local out = counts[c - B - low + 1]
    local used = total - out
    if used < 0 then used = 0 end
    local reset
    if WEIGHTED then
      -- Rust's bounds and whole: bucket c - B and, when the window starts after it,
      -- c - B + 1 are not whole; the partial one counts for its part inside.
      if at < D then return remember(st, low, counts, index) end
      local from = at - D
      local nxt = c + 1 - B
      local partial, inside = nxt - 1, nxt * P - from
      if from >= nxt * P then
        partial, inside = nxt, (nxt + 1) * P - from
        used = used - counts[nxt - low + 1]
        if used < 0 then used = 0 end
      end
      if inside < 0 then inside = 0 end
      local scaled = used * P + counts[partial - low + 1] * inside
      local rest
      used, rest = div(scaled, P)
      if rest > 0 then used = used + 1 end
      if total > 2 * LIMIT or scaled > (LIMIT - cost) * P then
        return remember(st, low, counts, index)
      end
      reset = (c + 1) * P + D - now
    else
      if total > 2 * LIMIT or used + cost > LIMIT then return remember(st, low, counts, index) end
      reset = (c + B) * P - now
    end
    -- Rust's commit: the non-empty leaving buckets cleared, the grant in bucket c
    -- (whose slot they cleared or never held a count), the copies of the new ring.
    local new = {key = st.key, n = c, t = total + cost, o = o, cn = cost, c0 = out,
                 c1 = counts[c - B + 2 - low], co = st.co, w = {}, wipe = false,
                 cache = st.cache, dirty = true}
    for b = low, c - B - 1 do
      if counts[b - low + 1] > 0 then new.w[slot(b)] = 0 end
    end
    new.w[slot(c)] = cost
    if total == 0 then new.o = c end
    if c == new.o then
      new.co = cost
    elseif new.o < c - B then
      new.co = 0
    end
    if reset < 0 then reset = 0 end
    local c_lo, cost_lo = c % 4294967296, cost % 4294967296
    local d = {0, 0, 0, 0, 0, reset, 0, LIMIT - cost - used, LIMIT, 0, (c - c_lo) / 4294967296,
               c_lo, (cost - cost_lo) / 4294967296, cost_lo, 0, 0}
    return d, new
  end

  local function reserve_fast(st, now, cost)
    local n, o = st.n, st.o
    local start = n * P
    local at, c = now, n
    if at < start then at = start end
    if at - start >= P then
      c = div(at, P)
      if c - n > B then return nil end
      if c - B > o then return grant_moved(st, now, cost, n, c, at) end
    end
    local total = st.t
    if total > 2 * LIMIT or (at - now + D + 2 * P) * 1000 >= 2 ^ 52 or cost > LIMIT then
      return nil
    end
    -- The whole buckets: the ring's total less bucket c - B, in the ring but not in
    -- the window.
    local used = total
    if c - B >= 0 and c - B >= o then
      if c ~= n then return nil end
      used = total - st.c0
      if used < 0 then used = 0 end
    end
    if used + cost <= LIMIT then
      local reset = (c + B) * P - now
      if reset < 0 then reset = 0 end
      local c_lo, cost_lo = c % 4294967296, cost % 4294967296
      local d = {0, 0, 0, 0, 0, reset, 0, LIMIT - cost - used, LIMIT, 0, (c - c_lo) / 4294967296,
                 c_lo, (cost - cost_lo) / 4294967296, cost_lo, 0, 0}
      return d, commit(st, {current = c, newest = n, total = total}, cost)
    end
    -- Refused: retry_after from the first non-empty bucket that counts, reset_after
    -- from the newest.
    local b = c + 1 - B
    if b < o then b = o end
    local held
    if b == n then
      held = st.cn
    elseif b == n - B + 1 then
      held = st.c1
    elseif b == o then
      held = st.co
    else
      return nil
    end
    if held < used + cost - LIMIT or st.cn == 0 then return nil end
    local retry, reset, remaining = (b + B) * P - now, (n + B) * P - now, LIMIT - used
    if retry < 0 then retry = 0 end
    if reset < 0 then reset = 0 end
    if remaining < 0 then remaining = 0 end
    return {1, 0, 0, retry, 0, reset, 0, remaining, LIMIT, 0, 0, 0, 0, 0, 0, 0}, nil
  end

  -- The count of bucket b (c - B or later) at current bucket c from the header alone,
  -- or nil: later than the newest, a copy, or before o.
  local function header_count(st, c, b)
    local n = st.n
    if b > n then return 0 end
    if b == n then return st.cn end
    if b == n - B + 1 then return st.c1 end
    if b == n - B and c == n then return st.c0 end
    if b == st.o then return st.co end
    if b < st.o then return 0 end
    return nil
  end

  -- `reserve_fast` for a weighted window: the same conditions, and `bounds`, `whole`
  -- and `retry_near` written out on the header's counts (the partial bucket and the
  -- first whole one are the copies of n - B and n - B + 1 when the duration is a
  -- multiple of the precision).
  local function reserve_fast_weighted(st, now, cost)
    local n, o = st.n, st.o
    local start = n * P
    local at, c = now, n
    if at < start then at = start end
    if at - start >= P then
      c = div(at, P)
      if c - n > B then return nil end
      if c - B > o then return grant_moved(st, now, cost, n, c, at) end
    end
    local total = st.t
    if total > 2 * LIMIT or (at - now + D + 2 * P) * 1000 >= 2 ^ 52 or cost > LIMIT
        or at < D then
      return nil
    end
    local nxt = max(c + 1 - B, 0)
    local from, boundary = at - D, nxt * P
    local partial, finish = max(nxt - 1, 0), boundary
    if from >= boundary then partial, finish = nxt, boundary + P end
    local inside = max(finish - from, 0)
    local first_whole = partial + 1
    local whole = total
    for b = max(c - B, 0), first_whole - 1 do
      local held = header_count(st, c, b)
      if held == nil then return nil end
      whole = max(whole - held, 0)
    end
    local cp = header_count(st, c, partial)
    if cp == nil then return nil end
    local scaled = whole * P + cp * inside
    local used, rest = div(scaled, P)
    if rest > 0 then used = used + 1 end
    local allowed = (LIMIT - cost) * P
    if scaled <= allowed then
      local d = decision_ns(0, LIMIT, LIMIT - cost - used, 0, after(gone_at_us(c), now))
      d[11], d[12] = split32(c)
      d[13], d[14] = split32(cost)
      return d, commit(st, {current = c, newest = n, total = total}, cost)
    end
    if st.cn == 0 then return nil end
    local reset = after(gone_at_us(n), now)
    local excess = scaled - allowed
    local part = cp * inside
    local retry
    if part >= excess then
      retry = crossed_near(from, excess, cp, now)
    else
      excess = excess - part
      local b = max(first_whole, o)
      if b > n then return nil end
      local held = header_count(st, c, b)
      if held == nil or held == 0 or held * P < excess then return nil end
      retry = crossed_near(from + inside + (b - first_whole) * P, excess, held, now)
    end
    return decision_ns(1, LIMIT, max(LIMIT - used, 0), retry, reset), nil
  end

  local reserve = reserve_exact
  if NEAR then reserve = near_first(reserve_near, reserve_exact) end
  if NEAR and not WEIGHTED then reserve = near_first(reserve_fast, reserve) end
  if NEAR and WEIGHTED then reserve = near_first(reserve_fast_weighted, reserve) end
  return single(load, save, reserve, cancel)
end
