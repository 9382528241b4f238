-- The driftless leaky bucket (src/algorithms/leaky_bucket/step.rs,
-- src/algorithms/leaky_bucket/ticks.rs), transcribed with exact integers. C: 1 K =
-- ticks per permit, 2 capacity in permits, 3 excess = num - den, 4-6 num and 7-9 den as
-- base-2^24 limbs (num/den ticks per ns; both 1 when a tick is a ns), 10 queue (1) or
-- meter (0). K x capacity < 2^53, so the bucket's span in ticks is a plain double;
-- absolute tick counts (up to 2^64) are exact limb arrays. State: the theoretical
-- arrival time TAT in ticks, a u64 (`u64_state`).
local function make_leaky_bucket(C)
  local K, CAP, EXCESS = C[1], C[2], C[3]
  local NUM, DEN = limbs(C[4], C[5], C[6]), limbs(C[7], C[8], C[9])
  local QUEUE = C[10] == 1
  local CAPT = CAP * K
  local CAPT_BN = bn(CAPT)
  local EXCESS_BN = bn(EXCESS)
  -- The fast path (`reserve_near`) needs num and den as doubles and each value it
  -- forms below 2^52 (with room for Lua's exact %): ns * excess reduced modulo den
  -- (now_us * 1000 * excess), ticks up to twice the span, and `after`'s products.
  local NUM_N, DEN_N, E = num(NUM), num(DEN), EXCESS * 1000
  local NEAR = #NUM <= 2 and #DEN <= 2 and CAPT < 2 ^ 51
    and (EXCESS == 0 or (DEN_N * (E + 1) < 2 ^ 52 and NUM_N * (EXCESS + 1) + DEN_N < 2 ^ 52))

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

  local load, save = u64_state(0, 0)

  -- until_ for a delta below 2^52 ticks after the reading, in the fast path, with a
  -- tick that is not a ns: delta - floor((delta * excess + dropped) / num). As
  -- delta = a * num + b, the floor is a * excess + floor((b * excess + dropped) /
  -- num), where b * excess + dropped < num * excess + den and a * excess < delta:
  -- exact at any delta, without forming delta * excess.
  local function after(delta, dropped)
    if delta <= 0 then return 0 end
    local b = delta % NUM_N
    local x = b * EXCESS + dropped
    return delta - (delta - b) / NUM_N * EXCESS - (x - x % NUM_N) / NUM_N
  end

  -- A decision from durations that are doubles below 2^52 (a grant's with its mark
  -- and charge as halves): the short reply for a LONE step, packed, with its
  -- verdict and reset_after (prelude.lua's SHORT5), else the full 16.
  local function answer(verdict, remaining, wait, retry, reset, mhi, mlo, chi, clo)
    if LONE then
      if verdict == 0 then
        return struct_pack(SHORT9, 0, wait, reset, remaining, CAP, mhi, mlo, chi, clo), 0, reset
      end
      return struct_pack(SHORT5, verdict, retry, reset, remaining, CAP), verdict, reset
    end
    local w, r, s = wait % 1000, retry % 1000, reset % 1000
    return {verdict, (wait - w) / 1000, w, (retry - r) / 1000, r, (reset - s) / 1000, s,
            remaining, CAP, 0, mhi or 0, mlo or 0, chi or 0, clo or 0, 0, 0}
  end

  -- `reserve` on doubles, for a state at most a span ahead of now (every state a
  -- grant leaves, while time runs forward): the same steps on the same integers,
  -- relative to the reading, written out (a call costs more here than the
  -- arithmetic: `ns_halves` is inlined, and `after` is called only when a tick is
  -- not a ns, being the identity on positive deltas otherwise).
  -- Returns nil when the state is elsewhere.
  local function reserve_near(s, now, cost)
    if now >= 2 ^ 52 then return nil end
    local b = now % W
    local x = b * 1000
    local lo = x % W
    local hi = (now - b) / W * 1000 + (x - lo) / W
    -- ticks = ns + q, q = floor(ns * excess / den) (ns * excess = now * E), kept
    -- apart from ns's halves: the backlog subtracts it, a grant's new state adds it.
    local dropped, q = 0, 0
    if EXCESS > 0 then
      local part = now % DEN_N
      local y = part * E
      dropped = y % DEN_N
      q = (now - part) / DEN_N * E + (y - dropped) / DEN_N
      if q >= 2 ^ 52 then return nil end
    end
    local backlog = (s[1] - hi) * W + (s[2] - lo) - q
    if backlog > CAPT then return nil end
    if backlog < 0 then backlog = 0 end
    local free = 0
    if backlog < CAPT then free = (CAPT - backlog - (CAPT - backlog) % K) / K end
    -- Until the backlog drains: a queue's wait, a refusal's reset.
    local drained = backlog
    if EXCESS > 0 then drained = after(backlog, dropped) end
    if cost > CAP then
      local d, verdict, reset = answer(2, free, 0, 0, drained)
      return d, nil, verdict, reset
    end
    local charge = cost * K
    local level = backlog + charge
    local wait = 0
    if QUEUE then wait = drained end
    local late = MAX_WAIT >= 0 and wait > MAX_WAIT * 1000
    if level > CAPT or late then
      local retry = level - CAPT
      if retry < 0 then
        retry = 0
      elseif EXCESS > 0 then
        retry = after(retry, dropped)
      end
      if late and wait > retry then retry = wait end
      if LONE then return struct_pack(SHORT5, 1, retry, drained, free, CAP), nil, 1, drained end
      return answer(1, free, 0, retry, drained), nil
    end
    local remaining = CAP - cost
    if backlog > 0 then remaining = (CAPT - level - (CAPT - level) % K) / K end
    local reset = level
    if EXCESS > 0 then reset = after(level, dropped) end
    local fhi, flo = halves_add(hi, lo, q + level)
    local cl = charge % W
    local d, verdict = answer(0, remaining, wait, 0, reset, fhi, flo, (charge - cl) / W, cl)
    return d, {fhi, flo}, verdict, reset
  end

  local function reserve_exact(s, now, cost)
    local tat = from_halves(s[1], s[2])
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
    return d, {halves(finish)}
  end
  -- Go's rule, as the Rust cancel: a grant not yet acted on gives back its charge
  -- minus whatever later grants queued behind it; never below now.
  local function cancel(s, now, grant, acts_at)
    if acts_at == nil or cmp(acts_at, ns(now)) < 0 or not grant.allowed then return nil end
    local tat = from_halves(s[1], s[2])
    local restore = subsat(grant.charge, subsat(tat, grant.mark))
    if #restore == 1 and restore[1] == 0 then return nil end
    local ticks = read(now)
    return {halves(maxbn(subsat(tat, restore), ticks))}
  end

  local reserve = reserve_exact
  if NEAR then reserve = near_first(reserve_near, reserve_exact) end
  return single(load, save, reserve, cancel)
end
