-- The fixed window (src/algorithms/fixed_window.rs), in whole microseconds.
-- C: 1 window length (us), 2 limit. State: the index of the window last
-- counted in and the permits it granted (`doubles_state`). A new key is window 0,
-- count 0.
local function make_fixed_window(C)
  local LEN, LIMIT = C[1], C[2]

  local load, save = doubles_state({0, 0})

  local function reserve(s, now, cost)
    -- A later window starts from zero; an earlier now stays in the latest window seen.
    local index, count = s[1], s[2]
    local start = index * LEN
    if now >= start and now - start >= LEN then
      index = div(now, LEN)
      start = index * LEN
      count = 0
    end
    local until_end = max(start + LEN - now, 0)
    local remaining = LIMIT - count
    local reset = until_end
    if count == 0 then reset = 0 end
    if cost > LIMIT then return decision(2, LIMIT, remaining, 0, 0, reset), nil end
    -- A LONE step answers the short reply itself (driver.lua's `short`) where it
    -- holds the durations (below 9 x 10^12 us): building the full decision and
    -- converting it costs more than the step's arithmetic.
    local lone = LONE and until_end < 9e12
    if cost > remaining then
      if lone then
        return struct_pack(SHORT5, 1, until_end * 1000, reset * 1000, remaining, LIMIT), nil, 1,
          reset * 1000
      end
      return decision(1, LIMIT, remaining, 0, until_end, reset), nil
    end
    if lone then
      -- The receipt: the grant's window index and its cost, as 32-bit halves.
      local index_lo, cost_lo = index % 4294967296, cost % 4294967296
      return struct_pack(SHORT9, 0, 0, until_end * 1000, remaining - cost, LIMIT,
          (index - index_lo) / 4294967296, index_lo, (cost - cost_lo) / 4294967296, cost_lo),
        {index, count + cost}, 0, until_end * 1000
    end
    local d = decision(0, LIMIT, remaining - cost, 0, 0, until_end)
    -- The receipt: the grant's window index and its cost.
    d[11], d[12] = split32(index)
    d[13], d[14] = split32(cost)
    return d, {index, count + cost}
  end

  -- The Rust cancel: up to the instant the grant acts (at once, for a window), its
  -- cost comes off the count of its window, if the state still counts there.
  local function cancel(s, now, grant, acts_at)
    if acts_at == nil or cmp(acts_at, ns(now)) < 0 then return nil end
    if s[1] ~= grant.mark_halves[1] * W + grant.mark_halves[2] then return nil end
    return {s[1], max(s[2] - num(grant.charge), 0)}
  end
  return single(load, save, reserve, cancel)
end
