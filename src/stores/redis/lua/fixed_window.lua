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
    return decision(0, LIMIT, remaining - cost, 0, 0, until_end), {index, count + cost}
  end
  return single(load, save, reserve)
end
