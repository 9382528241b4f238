-- Guava's SmoothBursty (src/algorithms/smooth_bursty.rs): one instant T, the time
-- the bucket would have been empty, in i64 ns since the clock's origin (an exact
-- limb array: today's time is 1.7e18 ns). The f64 parts (a cost's charge, the
-- stored permits) are the Rust formulas operation for operation on the same
-- doubles. C: 1 interval in ns (f64), 2 max burst in ns (integer below 2^53), 3 max
-- permits (f64, below 2^53), 4 limit (-1: unlimited), 5 unlimited rate (1) or not.
-- State: T's limbs "l0 l1 l2" (T >= 0: it starts at 0 and only moves up).
local function make_smooth_bursty(C)
  local INTERVAL, BURST, MAX_PERMITS, LIMIT = C[1], C[2], C[3], C[4]
  local UNLIMITED = C[5] == 1
  local BURST_BN = bn(BURST)

  local function decode(raw)
    if not raw then return {0} end
    local l0, l1, l2 = string.match(raw, '^(%d+) (%d+) (%d+)$')
    return limbs(tonumber(l0), tonumber(l1), tonumber(l2))
  end

  local function encode(t)
    return int(t[1] or 0) .. ' ' .. int(t[2] or 0) .. ' ' .. int(t[3] or 0)
  end

  local function bursty(verdict, remaining, wait, retry, reset)
    local d = decision(verdict, LIMIT, remaining, 0, 0, 0)
    d[2], d[3] = us_ns(wait)
    d[4], d[5] = us_ns(retry)
    d[6], d[7] = us_ns(reset)
    return d
  end

  local load, save = string_state(decode, encode)

  local function reserve(tat, now, cost)
    local now_ns = ns(now)
    -- Resync: T <- max(T, now - burst).
    if cmp(now_ns, BURST_BN) > 0 then tat = maxbn(tat, sub(now_ns, BURST_BN)) end
    if cmp(tat, I64_MAX) == 0 then
      local d = decision(2, LIMIT, 0, 0, 0, 0)
      d[6] = -1
      return d, nil
    end
    local wait = subsat(tat, now_ns)
    if too_long(wait) then
      return bursty(1, 0, {0}, wait, subsat(add_i64(tat, BURST_BN), now_ns)), nil
    end
    -- (cost as f64 * interval) as i64: truncated, saturating.
    local c = cost * INTERVAL
    local charge
    if c >= 2 ^ 63 then charge = I64_MAX else charge = bn(math.floor(c)) end
    local next = add_i64(tat, charge)
    local reset = subsat(add_i64(next, BURST_BN), now_ns)
    local remaining = -1
    if not UNLIMITED then
      -- Stored permits: (now - next) / interval, at most max permits, truncated.
      local stored = num(subsat(now_ns, next)) / INTERVAL
      remaining = math.floor(math.min(stored, MAX_PERMITS))
    end
    local d = bursty(0, remaining, wait, {0}, reset)
    d[11], d[12] = halves(next)
    d[13], d[14] = halves(charge)
    return d, next
  end
  return single(load, save, reserve)
end
