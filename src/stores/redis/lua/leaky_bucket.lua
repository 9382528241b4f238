-- The driftless leaky bucket (src/algorithms/leaky_bucket.rs), transcribed with exact
-- integers. C: 1 K = ticks per permit, 2 capacity in permits, 3 excess = num - den,
-- 4-6 num and 7-9 den as base-2^24 limbs (num/den ticks per ns; both 1 when a tick
-- is a ns), 10 queue (1) or meter (0). K x capacity < 2^53, so the bucket's span in
-- ticks is a plain double; absolute tick counts (up to 2^64) are exact limb arrays.
-- State: the theoretical arrival time TAT in ticks, as its limbs "l0 l1 l2".
local function make_leaky_bucket(C)
  local K, CAP, EXCESS = C[1], C[2], C[3]
  local NUM, DEN = limbs(C[4], C[5], C[6]), limbs(C[7], C[8], C[9])
  local QUEUE = C[10] == 1
  local CAPT = CAP * K
  local CAPT_BN = bn(CAPT)
  local EXCESS_BN = bn(EXCESS)
  -- The fast path (`reserve_near`) needs num and den as doubles and every product
  -- it forms below 2^53: ns * excess reduced modulo den (now_us * 1000 * excess)
  -- and (delta * excess + dropped) for deltas up to twice the span.
  local NUM_N, DEN_N, E = num(NUM), num(DEN), EXCESS * 1000
  local NEAR = #NUM <= 2 and #DEN <= 2
    and (EXCESS == 0 or (DEN_N * E < 2 ^ 53 and (2 * CAPT + 1) * EXCESS + DEN_N < 2 ^ 53))

  local function decode(raw)
    if not raw then return {0} end
    local l0, l1, l2 = match(raw, '^(%d+) (%d+) (%d+)$')
    return limbs(tonumber(l0), tonumber(l1), tonumber(l2))
  end

  local function encode(tat)
    return int(tat[1] or 0) .. ' ' .. int(tat[2] or 0) .. ' ' .. int(tat[3] or 0)
  end

  -- The clock reading now_us in ticks, rounded down, and the remainder it dropped:
  -- ticks = ns + floor(ns * excess / den), dropped = ns * excess mod den.
  local function read(now_us)
    local ns = mul(bn(now_us), {1000})
    if EXCESS == 0 then return ns, {0} end
    local q, r = divmod(mul(ns, EXCESS_BN), DEN)
    return add(ns, q), r
  end

  -- How long after the reading the clock first reads at least `target` ticks:
  -- delta - floor((delta * excess + dropped) / num), the exact ceil((delta * den -
  -- dropped) / num) of the Rust step.
  local function until_(ticks, dropped, target)
    if cmp(target, ticks) <= 0 then return {0} end
    local delta = sub(target, ticks)
    if EXCESS == 0 then return delta end
    local q = divmod(add(mul(delta, EXCESS_BN), dropped), NUM)
    return sub(delta, q)
  end

  local function leaky(verdict, remaining, wait, retry, reset)
    local d = decision(verdict, CAP, remaining, 0, 0, 0)
    d[2], d[3] = us_ns(wait)
    d[4], d[5] = us_ns(retry)
    d[6], d[7] = us_ns(reset)
    return d
  end

  -- The same for durations that are doubles below 2^53.
  local function leaky_near(verdict, remaining, wait, retry, reset)
    local d = decision(verdict, CAP, remaining, 0, 0, 0)
    d[2], d[3] = div(wait, 1000)
    d[4], d[5] = div(retry, 1000)
    d[6], d[7] = div(reset, 1000)
    return d
  end

  local load, save = string_state(decode, encode)

  -- `reserve` on doubles, for a state at most a span ahead of now (every state a
  -- grant leaves, while time runs forward): the same steps on the same integers,
  -- relative to the reading. Returns nil when the state is elsewhere.
  local function reserve_near(tat, now, cost)
    local hi, lo = ns_pair(now)
    local dropped = 0
    if EXCESS > 0 then
      -- ticks = ns + floor(ns * excess / den), with ns * excess = now * E.
      local whole, part = div(now, DEN_N)
      local q
      q, dropped = div(part * E, DEN_N)
      q = q + whole * E
      if q >= 2 ^ 53 then return nil end
      hi, lo = pair_add(hi, lo, q)
    end
    local thi, tlo = pair(tat)
    local backlog = pair_sub(thi, tlo, hi, lo)
    if backlog > CAPT then return nil end
    if backlog < 0 then backlog = 0 end
    -- How long until the clock reads `delta` ticks past the reading (`until_`).
    local function after(delta)
      if delta <= 0 or EXCESS == 0 then return max(delta, 0) end
      return delta - div(delta * EXCESS + dropped, NUM_N)
    end
    local free = 0
    if backlog < CAPT then free = div(CAPT - backlog, K) end
    if cost > CAP then return leaky_near(2, free, 0, 0, after(backlog)), nil end
    local level = backlog + cost * K
    local wait = 0
    if QUEUE then wait = after(backlog) end
    local late = MAX_WAIT >= 0 and wait > MAX_WAIT * 1000
    if level > CAPT or late then
      local retry = after(level - CAPT)
      if late then retry = max(retry, wait) end
      return leaky_near(1, free, 0, retry, after(backlog)), nil
    end
    local remaining = CAP - cost
    if backlog > 0 then remaining = div(CAPT - level, K) end
    local d = leaky_near(0, remaining, wait, 0, after(level))
    local fhi, flo = pair_add(hi, lo, level)
    d[11], d[12] = pair_halves(fhi, flo)
    d[13], d[14] = split32(cost * K)
    return d, pair_limbs(fhi, flo)
  end

  local function reserve(tat, now, cost)
    if NEAR then
      local d, new = reserve_near(tat, now, cost)
      if d then return d, new end
    end
    local ticks, dropped = read(now)
    local start = maxbn(tat, ticks)
    local backlog = sub(start, ticks)
    local function free()
      if cmp(backlog, CAPT_BN) >= 0 then return 0 end
      return floor((CAPT - num(backlog)) / K)
    end
    if cost > CAP then
      return leaky(2, free(), {0}, {0}, until_(ticks, dropped, start)), nil
    end
    local charge = cost * K
    local finish = add(start, bn(charge))
    if cmp(finish, U64_MAX) > 0 then
      return leaky(2, free(), {0}, {0}, until_(ticks, dropped, start)), nil
    end
    local level = add(backlog, bn(charge))
    local wait = {0}
    if QUEUE then wait = until_(ticks, dropped, start) end
    if cmp(level, CAPT_BN) > 0 or too_long(wait) then
      local drained = until_(ticks, dropped, sub(finish, minbn(CAPT_BN, finish)))
      -- A queue's turn stays where it is while the caller waits: past its
      -- deadline, only a caller who does not wait fits, at the turn itself.
      local retry = drained
      if too_long(wait) then retry = maxbn(drained, wait) end
      return leaky(1, free(), {0}, retry, until_(ticks, dropped, start)), nil
    end
    local remaining
    if #backlog == 1 and backlog[1] == 0 then
      remaining = CAP - cost
    else
      remaining = floor((CAPT - num(level)) / K)
    end
    local d = leaky(0, remaining, wait, {0}, until_(ticks, dropped, finish))
    d[11], d[12] = halves(finish)
    d[13], d[14] = split32(charge)
    return d, finish
  end
  -- Go's rule, as the Rust cancel: a grant not yet acted on gives back its charge
  -- minus whatever later grants queued behind it; never below now.
  local function cancel(tat, now, grant, acts_at)
    if acts_at == nil or cmp(acts_at, ns(now)) < 0 or not grant.allowed then return nil end
    local restore = subsat(grant.charge, subsat(tat, grant.mark))
    if #restore == 1 and restore[1] == 0 then return nil end
    local ticks = read(now)
    return maxbn(subsat(tat, restore), ticks)
  end

  return single(load, save, reserve, cancel)
end
