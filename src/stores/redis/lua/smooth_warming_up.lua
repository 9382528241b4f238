-- Guava's SmoothWarmingUp (src/algorithms/smooth_warming_up/step.rs): stored permits (an
-- f64) and nextFreeTicket (i64 ns, an exact limb array), every float formula
-- transcribed operation for operation: IEEE doubles give the same bits in Lua and
-- Rust. f64 values travel as their bit patterns (two 32-bit halves, unpacked with
-- the struct library), so infinities and NaNs survive too.
-- C: 1-12 stable micros, warm-up ns, cold factor, threshold, max permits, slope (as
-- bit halves), 13 limit (-1: unlimited). State: the stored permits and nextFreeTicket
-- as 16 bytes (a big-endian double and the tick's 32-bit halves), held as {stored,
-- hi, lo}; the exact steps below work on {stored, next_free as limbs}.
local function make_smooth_warming_up(C)
  local function f64(hi, lo) return (struct_unpack('>d', struct_pack('>I4I4', hi, lo))) end
  local function bits(x)
    local hi, lo = struct_unpack('>I4I4', struct_pack('>d', x))
    return hi, lo
  end
  local STABLE_MICROS, WARMUP = f64(C[1], C[2]), f64(C[3], C[4])
  local THRESHOLD, MAX_PERMITS, SLOPE = f64(C[7], C[8]), f64(C[9], C[10]), f64(C[11], C[12])
  local LIMIT = C[13]
  local STABLE = STABLE_MICROS * 1000.0
  local FILLS_FOR_SURE = 1.0 + 1.0 / 1099511627776.0
  local COOL_DOWN
  if MAX_PERMITS == 0.0 then COOL_DOWN = math.huge else COOL_DOWN = WARMUP / MAX_PERMITS end

  -- Rust's f64::min: the other operand when one is NaN.
  local function fmin(a, b)
    if a ~= a then return b end
    if b ~= b then return a end
    if b < a then return b end
    return a
  end

  -- Rust's `x as i64` for x >= 0 or NaN, as a limb array: truncated, saturating.
  local function to_i64(x)
    if x ~= x or x <= 0 then return {0} end
    if x >= 2 ^ 63 then return I64_MAX end
    return bn(floor(x))
  end

  -- Rust's `x as u64` (NaN and negatives 0, saturating), as a limb array.
  local function to_u64(x)
    if x ~= x or x <= 0 then return {0} end
    if x >= 2 ^ 64 then return U64_MAX end
    return bn(floor(x))
  end

  local function decode(raw)
    if not raw then return {MAX_PERMITS, 0, 0} end
    if #raw ~= 16 then foreign_state() end
    local stored, hi, lo = struct_unpack('>dI4I4', raw)
    return {stored, hi, lo}
  end

  local function encode(s) return struct_pack('>dI4I4', s[1], s[2], s[3]) end

  -- The held form and the exact steps' form of a state.
  local function exact(s) return {stored = s[1], next_free = from_halves(s[2], s[3])} end
  local function held(s)
    local hi, lo = halves(s.next_free)
    return {s.stored, hi, lo}
  end

  local load, save = string_state(decode, encode)

  local function resync(s, now_ns)
    if cmp(now_ns, s.next_free) <= 0 then return s end
    -- now - next_free below 2^63 fits three limbs, whose Horner sum rounds once:
    -- the same double as Rust's `as f64`.
    local idle = num(sub(now_ns, s.next_free))
    local stored
    if s.stored >= MAX_PERMITS or idle >= (MAX_PERMITS - s.stored) * COOL_DOWN * FILLS_FOR_SURE then
      stored = MAX_PERMITS
    else
      stored = fmin(MAX_PERMITS, s.stored + idle / COOL_DOWN)
    end
    return {stored = stored, next_free = now_ns}
  end

  local function permits_to_time(permits) return STABLE + permits * SLOPE end

  local function stored_permits_to_wait(stored, take)
    local above = stored - THRESHOLD
    local nanos = {0}
    if above > 0.0 then
      local t = fmin(above, take)
      local length = permits_to_time(above) + permits_to_time(above - t)
      nanos = to_i64(t * length / 2.0)
      take = take - t
    end
    return add_i64(nanos, to_i64(STABLE * take))
  end

  -- Durations as the reply wants them: u64::MAX (saturated) is -1.
  local function dur(a)
    if cmp(a, U64_MAX) >= 0 then return -1, 0 end
    return us_ns(a)
  end

  local function reset_after(s, now_ns)
    local missing = max(MAX_PERMITS - s.stored, 0.0)
    if missing ~= missing then missing = 0.0 end
    local total = add(subsat(s.next_free, now_ns), to_u64(missing * COOL_DOWN))
    if cmp(total, U64_MAX) > 0 then return U64_MAX end
    return total
  end

  local function warming(verdict, remaining, wait, retry, reset)
    local d = decision(verdict, LIMIT, remaining, 0, 0, 0)
    d[2], d[3] = dur(wait)
    d[4], d[5] = dur(retry)
    d[6], d[7] = dur(reset)
    return d
  end

  -- `reserve` on doubles relative to now, for a state whose next free tick is
  -- within 2^51 ns of it and a step whose every integer stays below 2^51 (`nil`
  -- otherwise): the float formulas unchanged, the tick arithmetic on halves. No
  -- saturation can happen there (now stays 2^57 below i64::MAX).
  local NEAR = WARMUP < 2 ^ 51 and STABLE < 2 ^ 51
  local function reserve_near(s, now, cost)
    local hi, lo = ns_halves(now)
    -- next_free - now: one rounding of the exact difference, as Rust's `as f64`.
    local rel = (s[2] - hi) * W + (s[3] - lo)
    if rel > 2 ^ 51 then return nil end
    local stored = s[1]
    local wait = 0
    if rel > 0 then
      wait = rel
    elseif rel < 0 then
      -- resync: permits accrue over the idle time, and next free moves to now.
      local idle = -rel
      if stored >= MAX_PERMITS or idle >= (MAX_PERMITS - stored) * COOL_DOWN * FILLS_FOR_SURE then
        stored = MAX_PERMITS
      else
        stored = fmin(MAX_PERMITS, stored + idle / COOL_DOWN)
      end
    end
    local late = MAX_WAIT >= 0 and wait > MAX_WAIT * 1000
    local spend, charge = 0, 0
    if not late then
      spend = fmin(cost, stored)
      local take, nanos = spend, 0
      local above = stored - THRESHOLD
      if above > 0.0 then
        local t = fmin(above, take)
        nanos = t * (permits_to_time(above) + permits_to_time(above - t)) / 2.0
        take = take - t
      end
      local fresh = (cost - spend) * STABLE
      take = STABLE * take
      if not (nanos < 2 ^ 51 and take < 2 ^ 51 and fresh < 2 ^ 51) then return nil end
      -- `as i64`: truncated; NaN and negatives are 0.
      if nanos > 0 then charge = floor(nanos) end
      if take > 0 then charge = charge + floor(take) end
      if fresh > 0 then charge = charge + floor(fresh) end
      stored = stored - spend
    end
    local ahead = wait + charge
    local missing = max(MAX_PERMITS - stored, 0.0)
    local reset = missing * COOL_DOWN
    if missing ~= missing or not (reset > 0) then reset = 0 else reset = floor(reset) end
    reset = reset + ahead
    -- A LONE step answers the short reply (driver.lua's `short`), packed, where it
    -- holds the durations: below 9 x 10^15 ns.
    local short = LONE and reset < 9e15
    if late then
      if short then return struct_pack(SHORT5, 1, wait, reset, 0, LIMIT), nil, 1, reset end
      local ws, rs = wait % 1000, reset % 1000
      return {1, 0, 0, (wait - ws) / 1000, ws, (reset - rs) / 1000, rs, 0, LIMIT, 0,
              0, 0, 0, 0, 0, 0}, nil
    end
    local remaining = 0
    if ahead <= 0 then
      if stored ~= stored or stored <= 0 then
        remaining = 0
      elseif stored >= 2 ^ 64 then
        remaining = -1
      else
        remaining = floor(stored)
      end
    end
    local nhi, nlo = halves_add(hi, lo, ahead)
    local cl = charge % W
    local ch = (charge - cl) / W
    -- Spending +0.0 permits has all-zero bits, which the short reply leaves out.
    if short and spend == 0 and 1 / spend > 0 then
      return struct_pack(SHORT9, 0, wait, reset, remaining, LIMIT, nhi, nlo, ch, cl),
        {stored, nhi, nlo}, 0, reset
    end
    local bhi, blo = bits(spend)
    if short then
      return struct_pack(SHORT11, 0, wait, reset, remaining, LIMIT, nhi, nlo, ch, cl, bhi, blo),
        {stored, nhi, nlo}, 0, reset
    end
    local ws, rs = wait % 1000, reset % 1000
    return {0, (wait - ws) / 1000, ws, 0, 0, (reset - rs) / 1000, rs, remaining, LIMIT, 0,
            nhi, nlo, ch, cl, bhi, blo}, {stored, nhi, nlo}
  end

  local function reserve_exact(held_state, now, cost)
    local s = exact(held_state)
    local now_ns = ns(now)
    local next_free = maxbn(s.next_free, now_ns)
    if cmp(next_free, I64_MAX) == 0 then
      local d = decision(2, LIMIT, 0, 0, 0, 0)
      d[6] = -1
      return d, nil
    end
    local wait = subsat(next_free, now_ns)
    if too_long(wait) then
      return warming(1, 0, {0}, wait, reset_after(resync(s, now_ns), now_ns)), nil
    end
    local synced = resync(s, now_ns)
    local spend = fmin(cost, synced.stored)
    local fresh = cost - spend
    local charge = add_i64(stored_permits_to_wait(synced.stored, spend), to_i64(fresh * STABLE))
    local new = {stored = synced.stored - spend, next_free = add_i64(synced.next_free, charge)}
    local remaining = 0
    if cmp(new.next_free, now_ns) <= 0 then
      local r = to_u64(new.stored)
      if cmp(r, U64_MAX) == 0 then remaining = -1 else remaining = num(r) end
    end
    local d = warming(0, remaining, wait, {0}, reset_after(new, now_ns))
    d[11], d[12] = halves(new.next_free)
    d[13], d[14] = halves(charge)
    d[15], d[16] = bits(spend)
    return d, held(new)
  end
  -- The Rust cancel: give back the share of the charge no later grant reserved
  -- behind, with the same share of the stored permits the grant spent.
  local function cancel(held_state, now, grant, acts_at)
    local s = exact(held_state)
    local now_ns = ns(now)
    if STABLE_MICROS == 0.0 or acts_at == nil or cmp(acts_at, now_ns) < 0 or not grant.allowed then
      return nil
    end
    local restore = subsat(grant.charge, subsat(s.next_free, grant.mark))
    if (#restore == 1 and restore[1] == 0) or cmp(s.next_free, I64_MAX) == 0 then return nil end
    -- `restore as f64 / charge as f64`: both below 2^64, three limbs, rounded once.
    local share = num(restore) / num(grant.charge)
    local stored = s.stored + f64(grant.spent_bits[1], grant.spent_bits[2]) * share
    local restore_i64 = minbn(restore, I64_MAX)
    local next_free
    if cmp(s.next_free, restore_i64) >= 0 and cmp(sub(s.next_free, restore_i64), now_ns) >= 0 then
      next_free = sub(s.next_free, restore_i64)
    else
      -- now - rolled_back, where rolled_back = next_free - restore may be negative.
      local behind
      if cmp(s.next_free, restore_i64) >= 0 then
        behind = sub(now_ns, sub(s.next_free, restore_i64))
      else
        behind = add(now_ns, sub(restore_i64, s.next_free))
      end
      stored = stored + num(behind) / STABLE
      next_free = now_ns
    end
    return held({stored = fmin(MAX_PERMITS, stored), next_free = next_free})
  end

  local reserve = reserve_exact
  if NEAR then reserve = near_first(reserve_near, reserve_exact) end
  return single(load, save, reserve, cancel)
end
