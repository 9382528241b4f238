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
    if cost > remaining then return decision(1, LIMIT, remaining, 0, until_end, reset), nil end
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
