-- The sliding window counter (src/algorithms/sliding_window_counter/step.rs), at whole
-- microseconds. C: 1 window length (us), 2 limit, 3 floor rounding (1) or exact
-- (0), 4 counting attempts (1) or admitted (0), 5 count bits B (the Rust state word
-- keeps counts in B bits and the window index in 64 - 2B, modulo 2^(64 - 2B): the
-- script keeps the same modular index so that even an index that wrapped decides
-- the same), 6 exact index (1: the index field holds every window of the clock).
-- State: index, previous and current counts (`doubles_state`). Durations are
-- doubles in ns when every one the step can form is below 2^52 (`NEAR`: windows of
-- up to 17 days, at any limit), exact ns limb arrays otherwise.
local function make_sliding_window_counter(C)
  local LEN, LIMIT = C[1], C[2]
  local FLOOR, ATTEMPTS = C[3] == 1, C[4] == 1
  local B, EXACT_INDEX = C[5], C[6] == 1
  local KBITS = 64 - 2 * B
  local SAT = 2 ^ B - 1
  local LEN_NS = mul(bn(LEN), {1000})

  -- The index as the state word keeps it (mod 2^KBITS; indexes are below 2^53).
  local function masked(index)
    if KBITS >= 53 then return index end
    return fmod(index, 2 ^ KBITS)
  end

  -- A state as of now: its window index, previous and current counts, us elapsed
  -- in that window, and, when the stored window lies ahead of now (a clock that
  -- went back), how far ahead in ns (limbs; nil otherwise). Plain values rather than
  -- a table: this runs on every call.
  local function fresh(now)
    local now_index = div(now, LEN)
    return masked(now_index), 0, 0, now - now_index * LEN, nil
  end

  local function view(s, now)
    local index, prev, cur = s[1], s[2], s[3]
    local now_index, distance
    if EXACT_INDEX then
      local start = index * LEN
      if now >= start and now - start < LEN then return index, prev, cur, now - start, nil end
      if now < start then
        if prev + cur == 0 then return fresh(now) end
        return index, prev, cur, 0, ns(start - now)
      end
      now_index = div(now, LEN)
      distance = now_index - index
    else
      now_index = div(now, LEN)
      local back
      if KBITS >= 54 then
        -- Every index is below 2^53 <= half the modulus: a smaller now is backwards.
        distance = now_index - index
        if distance < 0 then back = index - now_index end
      else
        distance = masked(now_index) - index
        if distance < 0 then distance = distance + 2 ^ KBITS end
        if distance > 2 ^ (KBITS - 1) - 1 then back = 2 ^ KBITS - distance end
      end
      if back then
        if prev + cur == 0 then return fresh(now) end
        local start = mul(add(bn(now_index), bn(back)), LEN_NS)
        return index, prev, cur, 0, subsat(start, ns(now))
      end
    end
    if distance == 1 then
      prev, cur = cur, 0
    elseif distance > 1 then
      prev, cur = 0, 0
    end
    return masked(now_index), prev, cur, now - now_index * LEN, nil
  end

  -- The previous window's count weighted by its unelapsed part, rounded as configured.
  -- A count is below 2^24 (the state's count bits): split at 2^12, as prev = a x 4096
  -- + b, prev x rest = (a x rest) x 4096 + b x rest, and with a x rest = qa x LEN +
  -- ra the quotient is qa x 4096 + floor((ra x 4096 + b x rest) / LEN), every value
  -- below 2^53 while LEN is below 2^40 us (12 days). Longer windows take the limbs.
  local SPLIT = LEN < 2 ^ 40
  local function weighted(prev, elapsed)
    if prev == 0 then return 0 end
    local rest = LEN - elapsed
    local q, r
    if prev * rest < 9007199254740992 then
      q, r = div(prev * rest, LEN)
    elseif SPLIT then
      local b = prev % 4096
      local qa, ra = div((prev - b) / 4096 * rest, LEN)
      q, r = div(ra * 4096 + b * rest, LEN)
      q = qa * 4096 + q
    else
      local qb, rb = divmod(mul(bn(prev), bn(rest)), bn(LEN))
      q, r = num(qb), num(rb)
    end
    if not FLOOR and r > 0 then q = q + 1 end
    return q
  end

  -- The first point (ns into a window) at which `prev` weighted fits in `room`, or nil.
  local function first_fit(prev, room)
    if prev <= room then return {0} end
    if room == 0 and not FLOOR then return nil end
    local allowance
    if FLOOR then
      allowance = sub(mul(bn(room + 1), LEN_NS), {1})
    else
      allowance = mul(bn(room), LEN_NS)
    end
    local span = divmod(allowance, bn(prev))
    local first = subsat(LEN_NS, span)
    if cmp(first, LEN_NS) < 0 then return first end
    return nil
  end

  local function retry_after(v, cost)
    local used = v.cur + cost
    if used <= LIMIT then
      local first = first_fit(v.prev, LIMIT - used)
      if first then return subsat(first, ns(v.elapsed)) end
    end
    local to_next = ns(LEN - v.elapsed)
    local first = first_fit(v.cur, LIMIT - cost)
    if first then return add(to_next, first) end
    return add(to_next, LEN_NS)
  end

  local function reset_after(v)
    local to_next = ns(LEN - v.elapsed)
    if v.cur > 0 then return add(to_next, LEN_NS) end
    if v.prev > 0 then return to_next end
    return {0}
  end

  local function counter(verdict, remaining, retry, reset)
    local d = decision(verdict, LIMIT, remaining, 0, 0, 0)
    d[4], d[5] = us_ns(retry)
    d[6], d[7] = us_ns(reset)
    return d
  end

  local load, save = doubles_state({0, 0, 0})

  -- A refusal counted as an attempt (with `ATTEMPTS`, outside a set) updates the
  -- view v and the state; answers the new state, or nil.
  local function attempted(v, cost)
    if not ATTEMPTS or UNRECORDED then return nil end
    v.cur = min(v.cur + cost, SAT)
    return {v.index, v.prev, v.cur}
  end

  -- A grant's receipt: the window it counted in (the state's index) and its cost.
  local function receipt(index, cost)
    local ih, il = split32(index)
    local ch, cl = split32(cost)
    return ih, il, ch, cl
  end

  -- The same durations on doubles (ns), for a view that is not behind. A duration
  -- the step forms is at most two windows and a fit, below 3 windows: exact while
  -- 3 windows in ns are below 2^52. A fit's products stay below 2^52 while a count
  -- times (limit + 1) does (`FIT`, checked per call: larger counts take the limbs).
  local LEN_N = LEN * 1000
  local NEAR = 3 * LEN_N < 2 ^ 52
  local FIT = 2 ^ 52 / (LIMIT + 1)

  -- first_fit on doubles. span = floor((a x LEN_N - e) / prev), with a = room and
  -- e = 0 (a = room + 1 and e = 1 with floor rounding): as LEN_N = qb x prev + rb,
  -- span = a x qb + floor((a x rb - e) / prev), where a x rb < (limit + 1) x prev
  -- and a x qb <= span < LEN_N (room < prev), so every value is exact.
  local function first_fit_near(prev, room)
    if prev <= room then return 0 end
    if room == 0 and not FLOOR then return nil end
    local a, e = room, 0
    if FLOOR then a, e = room + 1, 1 end
    local qb, rb = div(LEN_N, prev)
    local x, span = a * rb - e, a * qb
    if x < 0 then
      span = span - 1
    else
      span = span + (x - x % prev) / prev
    end
    local first = LEN_N - span
    if first < 0 then return 0 end
    if first < LEN_N then return first end
    return nil
  end

  local function reset_near(prev, cur, to_next)
    if cur > 0 then return to_next + LEN_N end
    if prev > 0 then return to_next end
    return 0
  end

  -- `reserve`'s steps below, on doubles. A LONE step answers the short reply
  -- (driver.lua's `short`), which every duration here (below 2^52 ns) fits, packed
  -- and with its verdict and reset_after in ns.
  local function reserve_near(index, prev, cur, elapsed, cost, used, remaining)
    local to_next = (LEN - elapsed) * 1000
    if cost > LIMIT then
      local reset = reset_near(prev, cur, to_next)
      if LONE then return struct_pack(SHORT5, 2, 0, reset, remaining, LIMIT), nil, 2, reset end
      return decision_ns(2, LIMIT, remaining, 0, reset), nil
    end
    if used + cost > LIMIT then
      -- A refusal counted as an attempt counts before its retry_after is found.
      local changed
      if ATTEMPTS and not UNRECORDED then
        cur = min(cur + cost, SAT)
        changed = {index, prev, cur}
      end
      local retry, first
      if cur + cost <= LIMIT then first = first_fit_near(prev, LIMIT - cur - cost) end
      if first then
        retry = max(first - elapsed * 1000, 0)
      else
        retry = to_next + (first_fit_near(cur, LIMIT - cost) or LEN_N)
      end
      local reset = reset_near(prev, cur, to_next)
      if LONE then
        return struct_pack(SHORT5, 1, retry, reset, remaining, LIMIT), changed, 1, reset
      end
      return decision_ns(1, LIMIT, remaining, retry, reset), changed
    end
    cur = cur + cost
    local reset = reset_near(prev, cur, to_next)
    local ih, il, ch, cl = receipt(index, cost)
    if LONE then
      return struct_pack(SHORT9, 0, 0, reset, remaining - cost, LIMIT, ih, il, ch, cl),
        {index, prev, cur}, 0, reset
    end
    local d = decision_ns(0, LIMIT, remaining - cost, 0, reset)
    d[11], d[12], d[13], d[14] = ih, il, ch, cl
    return d, {index, prev, cur}
  end

  local function reserve(s, now, cost)
    local index, prev, cur, elapsed, behind = view(s, now)
    local used = weighted(prev, elapsed) + cur
    local remaining = max(LIMIT - used, 0)
    if NEAR and not behind and prev < FIT and cur < FIT then
      return reserve_near(index, prev, cur, elapsed, cost, used, remaining)
    end
    local v = {index = index, prev = prev, cur = cur, elapsed = elapsed}
    behind = behind or {0}
    if cost > LIMIT then
      return counter(2, remaining, {0}, add(reset_after(v), behind)), nil
    end
    if used + cost > LIMIT then
      local changed = attempted(v, cost)
      local retry = add(retry_after(v, cost), behind)
      return counter(1, remaining, retry, add(reset_after(v), behind)), changed
    end
    v.cur = v.cur + cost
    local d = counter(0, remaining - cost, {0}, add(reset_after(v), behind))
    d[11], d[12], d[13], d[14] = receipt(v.index, cost)
    return d, {v.index, v.prev, v.cur}
  end

  -- The Rust cancel: up to the instant the grant acts (at once), its cost comes off
  -- the count of its window, current or (once the state moved on by one)
  -- previous; a saturated count of attempts is left as it is.
  local function cancel(s, now, grant, acts_at)
    if acts_at == nil or cmp(acts_at, ns(now)) < 0 then return nil end
    local window = grant.mark_halves[1] * W + grant.mark_halves[2]
    local charge = num(grant.charge)
    local function back(count)
      if ATTEMPTS and count == SAT then return count end
      return max(count - charge, 0)
    end
    if s[1] == window then return {s[1], s[2], back(s[3])} end
    if s[1] == masked(window + 1) then return {s[1], back(s[2]), s[3]} end
    return nil
  end
  return single(load, save, reserve, cancel)
end
