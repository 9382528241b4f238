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

  local function decode(raw)
    if not raw then return {0} end
    local l0, l1, l2 = string.match(raw, '^(%d+) (%d+) (%d+)$')
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

  local load, save = string_state(decode, encode)

  local function reserve(tat, now, cost)
    local ticks, dropped = read(now)
    local start = maxbn(tat, ticks)
    local backlog = sub(start, ticks)
    local function free()
      if cmp(backlog, CAPT_BN) >= 0 then return 0 end
      return math.floor((CAPT - num(backlog)) / K)
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
      remaining = math.floor((CAPT - num(level)) / K)
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
