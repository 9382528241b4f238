-- The bucketed sliding window (src/algorithms/sliding_window_buckets/ring.rs), its ring
-- kept on the server as sliding_window_buckets_entries.lua (a ring that holds few
-- counts) or sliding_window_buckets_hash.lua (any other) describes. Times are whole
-- microseconds. Two steps take the same decisions: `reserve_near` on plain doubles
-- while every weighted count ("scaled", count x ns) and duration it can form stays
-- below 2^52 (the usual case: a limit and a window that are not astronomical), and
-- `reserve_exact` on exact limb arrays in ns otherwise.
-- C: 1 limit, 2 duration (us), 3 precision (us), 4 buckets B, 5 weighted (1) or
-- dropping (0), 6 ring slots (B + 1 rounded up to a power of two).
local function make_sliding_window_buckets(C)
  local LIMIT, D, P, B = C[1], C[2], C[3], C[4]
  local WEIGHTED, RING = C[5] == 1, C[6]
  local P_NS = ns(P)
  -- A ring that holds few counts (SMALL: up to 63 buckets and a limit of at most 50)
  -- is one string of its non-empty buckets (sliding_window_buckets_entries.lua); any
  -- other a hash of its non-empty slots (sliding_window_buckets_hash.lua), padded to
  -- a hash table when more than 64 slots can hold a count: at most B + 1 (the ring's
  -- buckets), and at most 2 x LIMIT (the permits a ring holds, at least one in each
  -- such slot). Lua's b % RING (b - floor(b / RING) * RING) is exact: RING is a
  -- power of two, so the division is, and it costs less than fmod's C call on a
  -- large bucket number.
  local SMALL = RING <= 64 and LIMIT <= 50
  local load, save, held, prefetch, nonempty, span, derived, clears
  if SMALL then
    load, save, held, prefetch, nonempty, span, derived, clears = buckets_entries(B, RING)
  else
    load, save, held, prefetch, nonempty, span, derived, clears =
      buckets_hash(B, RING, min(B + 1, 2 * LIMIT) > 64)
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

  -- The state after a grant of `cost` in bucket `current` (n or later), the ring's
  -- total there being `total` (a copy: the old state may still be read by a later
  -- key of the same call). K, when the ring moves a few buckets, holds the counts
  -- of buckets lo .. current - B + 1 (those leaving, then the two the new ring
  -- starts with) as the step read them (`span`); without it they are read here.
  local function commit(st, current, total, cost, lo, K)
    local new = derived(st)
    local moved = current > st.n
    local far = current - B
    if moved then
      -- Clearing an empty slot changes nothing: clear the non-empty ones of the
      -- buckets leaving (none is before o, and lo is o or later), where the layout
      -- keeps them.
      if clears then
        if K then
          local w = new.w
          for b = lo, far - 1 do
            if K[b - lo + 1] > 0 then w[b % RING] = 0 end
          end
        else
          local from, to = leaving(st.n, current)
          if from == nil then
            new.wipe = true
            new.w = {}
          elseif to - from <= 8 then
            for b = max(from, st.o), to - 1 do
              if held(st, b) > 0 then new.w[b % RING] = 0 end
            end
          else
            for _, bc in ipairs(nonempty(st, from, to - 1)) do new.w[bc[1] % RING] = 0 end
          end
        end
      end
      new.n = current
    end
    -- A grant into an empty ring: every bucket before this one is empty.
    if total == 0 then new.o = current end
    local s = current % RING
    new.t = total + cost
    if moved then
      -- The slot held nothing or a bucket that just left (slots hold counts only for
      -- the ring's buckets): the grant is its count. The copies of the new ring's far
      -- end, buckets it kept from the old ring (none after n, but the grant's own).
      new.w[s] = cost
      new.cn = cost
      local n = st.n
      if K then
        new.c0, new.c1 = K[far - lo + 1], K[far - lo + 2]
      else
        new.c0, new.c1 = 0, 0
        if far <= n then new.c0 = held(st, far) end
        if far + 1 <= n then new.c1 = held(st, far + 1) end
      end
      if far + 1 == current then new.c1 = cost end
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
    elseif new.o < far then
      new.co = 0
    end
    return new
  end

  -- The same step on doubles: counts scaled by the precision in us (the scaled count
  -- above is this x 1000), durations in ns relative to now. Exact while a scaled
  -- count of twice the limit and a bucket more (the ring's total: the window's, at
  -- most the limit, and the bucket just leaving it; `div` adds the divisor) is an
  -- integer below 2^53, and every duration from now is below 2^52 in ns;
  -- `reserve_near` answers nil (the limbs decide) for a view past that.
  local NEAR = (2 * LIMIT + 3) * P < 2 ^ 53

  -- gone_at in us is bucket x P + GONE: (bucket + B) x P dropping, (bucket + 1) x P
  -- + D weighted (integers below 2^53, so either sum is the same double).
  local GONE = B * P
  if WEIGHTED then GONE = P + D end

  -- The step's durations from now stay below 2^52 ns while (at - now + D + 2P) x 1000
  -- does (at: now, or the newest bucket's start if that is later). For an integer x,
  -- x x 1000 < 2^52 exactly when x < 4503599627371: so while at - now < FAR.
  local FAR = 4503599627371 - D - 2 * P

  -- ns from now until `us` (absolute), never negative.
  local function after(us, now) return max(us - now, 0) * 1000 end

  -- When `excess` (scaled, us) has left, counted from `start` (us) through a
  -- bucket of count c: Rust's crossing, ns from now. ceil(excess x 1000 / c) is
  -- q x 1000 + ceil(r x 1000 / c) for excess = q x c + r: no product past 2^52
  -- (q x 1000 is at most a bucket in ns, as excess is at most c x P).
  local function crossed_near(start, excess, c, now)
    if c < 1 then c = 1 end
    local q, r = div(excess, c)
    local q2, r2 = div(r * 1000, c)
    if r2 > 0 then q2 = q2 + 1 end
    return max((start + D - now) * 1000 + q * 1000 + q2, 0)
  end

  -- reset_after in ns at current bucket c (c >= n): from the newest bucket, whose
  -- count the header holds, or else the newest non-empty one still in the ring.
  local function reset_near(st, c, now)
    local n = st.n
    if c - B <= n and st.cn > 0 then return after(n * P + GONE, now) end
    local found = nonempty(st, max(c - B, 0), n)
    if #found == 0 then return 0 end
    return after(found[#found][1] * P + GONE, now)
  end

  -- A refusal's retry_after in ns (Rust's retry_at): the walk over the buckets that
  -- count, from `first` (the first whole one) to `last`, until one's count covers
  -- what is left of `excess` (permits dropping; scaled, us, weighted, the walk being
  -- at `start` us when it reaches `first`). Empty buckets change nothing but the
  -- position, so it reads the non-empty ones only: slot by slot from o (every bucket
  -- before it is empty), so that a hammered key reads the header's copies; past 8
  -- slots (a sparse ring), from the ring's non-empty slots.
  local function retry_near(st, now, excess, first, last, start)
    local b, reads, rest, i = max(first, st.o), 0, nil, 0
    while true do
      local bucket, c
      if rest then
        i = i + 1
        local bc = rest[i]
        if bc == nil then break end
        bucket, c = bc[1], bc[2]
      elseif b > last then
        break
      elseif reads == 8 then
        rest = nonempty(st, b, last)
      else
        bucket, c, reads, b = b, held(st, b), reads + 1, b + 1
      end
      if bucket and c > 0 then
        if not WEIGHTED then
          if c >= excess then return after(bucket * P + GONE, now) end
          excess = excess - c
        else
          local part = c * P
          if part >= excess then
            return crossed_near(start + (bucket - first) * P, excess, c, now)
          end
          excess = excess - part
        end
      end
    end
    if not WEIGHTED then return after(max(last + 1, first) * P + GONE, now) end
    return after(start + max(last + 1 - first, 0) * P + D, now)
  end

  -- The count of bucket b (n - B or later) in the ring at a later bucket: none after n.
  local function ring_count(st, b)
    if b > st.n then return 0 end
    return held(st, b)
  end

  -- The step on doubles, or nil past their exactness (then `reserve_exact`). Rust's
  -- view, bounds, whole and decision written out: in Redis's Lua a table or a
  -- function call costs more than the arithmetic around it. On a hammered key (a
  -- call in the newest bucket, or one that moves the ring a few buckets) the counts
  -- it needs are the header's copies or one HMGET, so a refusal in the newest
  -- bucket calls no other function and builds no table but its answer.
  local function reserve_near(st, now, cost)
    local n, o = st.n, st.o
    local at, c = now, n
    if at < n * P then at = n * P end
    if at - now >= FAR then return nil end
    local total = st.t
    -- far0 and far1: the counts of buckets c - B and c - B + 1, where the window
    -- starts. lo and K: the counts `span` read when the ring moves a few buckets.
    local far0, far1, lo, K = st.c0, st.c1, nil, nil
    if at - n * P >= P then
      c = div(at, P)
      local to = c - B
      if c - n > B then
        -- Every bucket has left the ring.
        total, far0, far1 = 0, 0, 0
      elseif n - B < to and o < to then
        -- Buckets lo .. to - 1 leave the ring (none before o holds a count). A few:
        -- read with the two after them in one HMGET; many: summed from the ring's
        -- non-empty slots.
        local gone = 0
        lo = n - B
        if lo < o then lo = o end
        if to - lo <= 8 then
          K = span(st, lo, to + 1)
          for i = 1, to - lo do gone = gone + K[i] end
          far0, far1 = K[to - lo + 1], K[to - lo + 2]
        else
          lo = nil
          for _, bc in ipairs(nonempty(st, max(n - B, 0), to - 1)) do gone = gone + bc[2] end
          far0, far1 = ring_count(st, to), ring_count(st, to + 1)
        end
        total = total - gone
        if total < 0 then total = 0 end
      else
        -- Nothing leaves that holds a count: the window starts at o or before it.
        far0, far1 = 0, 0
        if to == o then far0 = st.co end
        if to + 1 == o then
          far1 = st.co
        elseif to + 1 > o then
          far1 = ring_count(st, to + 1)
        end
      end
    end
    if total > 2 * LIMIT then return nil end
    -- Rust's bounds: the first bucket counted whole, and the partial one (weighted,
    -- once a whole window has passed) with its us inside the window.
    local first, partial, inside = c + 1 - B, nil, 0
    if first < 0 then first = 0 end
    if WEIGHTED then
      if at < D then
        first = 0
      else
        local start, boundary = at - D, first * P
        if start >= boundary then
          partial, inside = first, boundary + P - start
        else
          partial, inside = max(first - 1, 0), boundary - start
        end
        if inside < 0 then inside = 0 end
        first = partial + 1
      end
    end
    -- Rust's whole (buckets c - B .. first - 1 leave the total) and the partial
    -- bucket's count: far0 and far1 once a whole ring has passed since bucket 0.
    local whole, cp = total, 0
    if c >= B and first > c - B then
      whole = whole - far0
      if first > c - B + 1 then whole = whole - far1 end
      if whole < 0 then whole = 0 end
      if partial == c - B then cp = far0 elseif partial then cp = far1 end
    else
      for b = max(c - B, 0), first - 1 do whole = max(whole - ring_count(st, b), 0) end
      if partial then cp = ring_count(st, partial) end
    end
    local scaled, used = whole * P, whole
    if partial then
      local rest
      scaled = scaled + cp * inside
      used, rest = div(scaled, P)
      if rest > 0 then used = used + 1 end
    end
    local remaining = LIMIT - used
    if remaining < 0 then remaining = 0 end
    local reset
    -- A LONE step answers the short reply (driver.lua's `short`), which every
    -- duration here (below 2^52 ns) fits, packed; others the full 16 integers.
    if cost > LIMIT then
      reset = reset_near(st, c, now)
      if LONE then return struct_pack(SHORT5, 2, 0, reset, remaining, LIMIT), nil, 2, reset end
      return {2, 0, 0, 0, 0, (reset - reset % 1000) / 1000, reset % 1000, remaining, LIMIT, 0,
              0, 0, 0, 0, 0, 0}, nil
    end
    local allowed = (LIMIT - cost) * P
    if scaled <= allowed then
      reset = c * P + GONE - now
      if reset < 0 then reset = 0 end
      -- The receipt: the bucket the grant was counted in, and its cost (32-bit halves).
      local c_lo, cost_lo = c % 4294967296, cost % 4294967296
      if LONE then
        return struct_pack(SHORT9, 0, 0, reset * 1000, LIMIT - cost - used, LIMIT,
                (c - c_lo) / 4294967296, c_lo, (cost - cost_lo) / 4294967296, cost_lo),
          commit(st, c, total, cost, lo, K), 0, reset * 1000
      end
      return {0, 0, 0, 0, 0, reset, 0, LIMIT - cost - used, LIMIT, 0, (c - c_lo) / 4294967296,
              c_lo, (cost - cost_lo) / 4294967296, cost_lo, 0, 0}, commit(st, c, total, cost, lo, K)
    end
    -- Refused. reset_after (us and a ns remainder): from bucket n while the ring
    -- holds it and it holds a count (as a hammered key's does), or else the newest
    -- non-empty bucket.
    local reset_ns = 0
    if c - B <= n and st.cn > 0 then
      reset = n * P + GONE - now
      if reset < 0 then reset = 0 end
    else
      reset = reset_near(st, c, now)
      reset_ns = reset % 1000
      reset = (reset - reset_ns) / 1000
    end
    -- retry_after (us and a ns remainder): Rust's walk from the first whole bucket
    -- (`retry_near`), whose first non-empty bucket is usually one the step already
    -- holds (far1, n or o) and covers the excess: then answered here.
    local retry, excess, start = nil, used + cost - LIMIT, 0
    if WEIGHTED then
      excess = scaled - allowed
      if partial then
        start = at - D
        local part = cp * inside
        if part >= excess then
          retry = crossed_near(start, excess, cp, now)
        else
          excess, start = excess - part, start + inside
        end
      end
    end
    if not retry then
      local b, h = first, 0
      if b < o then b = o end
      if b == n then
        h = st.cn
      elseif b == o then
        h = st.co
      elseif c >= B and b == c - B + 1 then
        h = far1
      end
      local part = h
      if WEIGHTED then part = h * P end
      if part < excess or b > n then
        retry = retry_near(st, now, excess, first, n, start)
      elseif WEIGHTED then
        retry = crossed_near(start + (b - first) * P, excess, h, now)
      else
        retry = b * P + GONE - now
        if retry < 0 then retry = 0 end
        retry = retry * 1000
      end
    end
    if LONE then
      reset_ns = reset * 1000 + reset_ns
      return struct_pack(SHORT5, 1, retry, reset_ns, remaining, LIMIT), nil, 1, reset_ns
    end
    local retry_ns = retry % 1000
    return {1, 0, 0, (retry - retry_ns) / 1000, retry_ns, reset, reset_ns, remaining, LIMIT, 0, 0,
            0, 0, 0, 0, 0}, nil
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
      return d, commit(st, v.current, v.total, cost)
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
    local c = held(st, bucket)
    local back = min(num(grant.charge), c)
    local new = derived(st)
    new.t = max(st.t - back, 0)
    new.w[bucket % RING] = c - back
    if bucket == st.n then new.cn = c - back end
    if bucket == st.n - B then new.c0 = c - back end
    if bucket == st.n - B + 1 then new.c1 = c - back end
    if bucket == st.o then new.co = c - back end
    return new
  end

  local reserve = reserve_exact
  if NEAR then reserve = near_first(reserve_near, reserve_exact) end
  return single(load, save, reserve, cancel)
end
