-- Guava's SmoothBursty (src/algorithms/smooth_bursty/step.rs): one instant T, the time
-- the bucket would have been empty, in i64 ns since the clock's origin (an exact
-- limb array: today's time is 1.7e18 ns). The f64 parts (a cost's charge, the
-- stored permits) are the Rust formulas operation for operation on the same
-- doubles. C: 1 interval in ns (f64), 2 max burst in ns (integer below 2^53), 3 max
-- permits (f64, below 2^53), 4 limit (-1: unlimited), 5 unlimited rate (1) or not.
-- T is an i64 and a cancel can take it below zero (near the clock's origin), so it
-- is kept offset by 2^63, as an unsigned limb array: T + 2^63 in [0, 2^64). The
-- i64 operations map one to one (i64::MAX is u64::MAX; saturating at the bounds
-- is saturating at 0 and u64::MAX; T's i64 bits are the offset value's, top bit
-- flipped). State: the offset T, a u64 (`u64_state`).
local function make_smooth_bursty(C)
  local INTERVAL, BURST, MAX_PERMITS, LIMIT = C[1], C[2], C[3], C[4]
  local UNLIMITED = C[5] == 1
  local BURST_BN = bn(BURST)
  local OFFSET = {0, 0, 32768}

  -- Offset a + b, saturating at u64::MAX (Rust's saturating i64 addition).
  local function add_sat(a, b)
    local s = add(a, b)
    if cmp(s, U64_MAX) > 0 then return U64_MAX end
    return s
  end

  -- The i64 bits of an offset value: its u64 bits with the top bit flipped.
  local function i64_halves(a)
    local hi, lo = halves(a)
    return fmod(hi + 2147483648, 4294967296), lo
  end

  local function bursty(verdict, remaining, wait, retry, reset)
    local d = decision(verdict, LIMIT, remaining, 0, 0, 0)
    d[2], d[3] = us_ns(wait)
    d[4], d[5] = us_ns(retry)
    d[6], d[7] = us_ns(reset)
    return d
  end

  local load, save = u64_state(2147483648, 0)

  -- `reserve` on doubles relative to now, for a state and a charge within 2^51 ns
  -- of it, written out (a call costs more here than the arithmetic). No
  -- saturation can happen there: now + 2^63 stays 2^57 below 2^64. Returns nil
  -- otherwise.
  local NEAR = BURST < 2 ^ 51
  local function reserve_near(s, now, cost)
    local c = cost * INTERVAL
    if c >= 2 ^ 51 then return nil end
    local hi, lo = ns_halves(now)
    hi = hi + 2147483648 -- the offset, 2^63
    local rel = (s[1] - hi) * W + (s[2] - lo)
    if rel > 2 ^ 51 then return nil end
    -- Resync: T <- max(T, now - burst).
    if rel < -BURST then rel = -BURST end
    local wait = 0
    if rel > 0 then wait = rel end
    if MAX_WAIT >= 0 and wait > MAX_WAIT * 1000 then
      local reset = rel + BURST
      -- The short reply for a LONE step (driver.lua's `short`), packed, with its
      -- verdict and reset_after; else the full 16.
      if LONE then return struct_pack(SHORT5, 1, wait, reset, 0, LIMIT), nil, 1, reset end
      local wr, sr = wait % 1000, reset % 1000
      return {1, 0, 0, (wait - wr) / 1000, wr, (reset - sr) / 1000, sr, 0, LIMIT, 0,
              0, 0, 0, 0, 0, 0}, nil
    end
    local charge = floor(c)
    local next = rel + charge
    local remaining = -1
    if not UNLIMITED then
      local stored = 0
      if next < 0 then stored = -next / INTERVAL end
      remaining = floor(min(stored, MAX_PERMITS))
    end
    local reset = next + BURST
    if reset < 0 then reset = 0 end
    local nhi, nlo = halves_add(hi, lo, next)
    local cl = charge % W
    -- The mark is T's i64 bits: the offset value's, top bit flipped.
    local mhi, chi = (nhi + 2147483648) % W, (charge - cl) / W
    if LONE then
      return struct_pack(SHORT9, 0, wait, reset, remaining, LIMIT, mhi, nlo, chi, cl), {nhi, nlo},
        0, reset
    end
    local wr, sr = wait % 1000, reset % 1000
    return {0, (wait - wr) / 1000, wr, 0, 0, (reset - sr) / 1000, sr, remaining, LIMIT, 0,
            mhi, nlo, chi, cl, 0, 0}, {nhi, nlo}
  end

  local function reserve_exact(s, now, cost)
    local tat = from_halves(s[1], s[2])
    local now_ns = add(ns(now), OFFSET)
    -- Resync: T <- max(T, now - burst).
    tat = maxbn(tat, sub(now_ns, BURST_BN))
    if cmp(tat, U64_MAX) == 0 then
      local d = decision(2, LIMIT, 0, 0, 0, 0)
      d[6] = -1
      return d, nil
    end
    local wait = subsat(tat, now_ns)
    if too_long(wait) then
      return bursty(1, 0, {0}, wait, subsat(add_sat(tat, BURST_BN), now_ns)), nil
    end
    -- (cost as f64 * interval) as i64: truncated, saturating.
    local c = cost * INTERVAL
    local charge
    if c >= 2 ^ 63 then charge = I64_MAX else charge = bn(floor(c)) end
    local next = add_sat(tat, charge)
    local reset = subsat(add_sat(next, BURST_BN), now_ns)
    local remaining = -1
    if not UNLIMITED then
      -- Stored permits: (now - next) / interval, at most max permits, truncated.
      local stored = num(subsat(now_ns, next)) / INTERVAL
      remaining = floor(min(stored, MAX_PERMITS))
    end
    local d = bursty(0, remaining, wait, {0}, reset)
    d[11], d[12] = i64_halves(next)
    d[13], d[14] = halves(charge)
    return d, {halves(next)}
  end

  -- The Rust cancel: give back the charge minus what later grants reserved behind
  -- it, never below now - burst.
  local function cancel(s, now, grant, acts_at)
    local tat = from_halves(s[1], s[2])
    local now_ns = ns(now)
    if UNLIMITED or acts_at == nil or cmp(acts_at, now_ns) < 0 or not grant.allowed then
      return nil
    end
    -- The mark is T's i64 bits: offset, it is the same word with the top bit flipped.
    local hi, lo = grant.mark_halves[1], grant.mark_halves[2]
    local mark = from_halves(fmod(hi + 2147483648, 4294967296), lo)
    local restore = subsat(grant.charge, subsat(tat, mark))
    if (#restore == 1 and restore[1] == 0) or cmp(tat, U64_MAX) == 0 then return nil end
    local restored = subsat(tat, minbn(restore, I64_MAX))
    return {halves(maxbn(restored, sub(add(now_ns, OFFSET), BURST_BN)))}
  end

  -- The Rust `standing`: with debt to pay (reset beyond a burst), nil (the peek
  -- rule); otherwise the next permit is when the stored permits first read
  -- remaining + 1, (remaining + 1) x interval rounded up (then up to two ns more,
  -- as the quotient reads it), after T = now - (burst - reset).
  local function standing(d)
    if d[6] < 0 then return nil end
    local reset = d[6] * 1000 + d[7]
    if reset > BURST then return nil end
    local more = d[8] + 1
    local saved = ceil(more * INTERVAL)
    for _ = 1, 2 do
      if min(floor(saved / INTERVAL), MAX_PERMITS) < more then saved = saved + 1 end
    end
    local t = saved - (BURST - reset)
    if t < 1 then t = 1 end
    local tn = t % 1000
    return short_of_whole(d, (t - tn) / 1000, tn)
  end

  local reserve = reserve_exact
  if NEAR then reserve = near_first(reserve_near, reserve_exact) end
  local alg = single(load, save, reserve, cancel)
  alg.standing = standing
  return alg
end
