-- sluicegate: the driver every step script ends with. The algorithm above defines
-- load(key) -> state, held (a new key's state is the algorithm's initial state),
-- save(key, state, ms) and reserve(state, now, cost) -> decision, new state (nil:
-- unchanged), the wait the caller accepts being MAX_WAIT.
-- Every key is read once; a key that appears twice is stepped again on its updated
-- copy; a reserve commits every changed state only if every key allowed it (one key:
-- whatever the algorithm left, as in memory), and a peek writes nothing.
local states, dirty, last, held = {}, {}, {}, {}
local out = {}
local all = true
for i = 1, #KEYS do
  local k = KEYS[i]
  local s = states[k]
  if s == nil then
    s, held[k] = load(k)
    states[k] = s
  end
  local d, changed = reserve(s, NOW, COST)
  if changed then
    states[k] = changed
    dirty[k] = true
  end
  last[k] = d
  if d[1] ~= 0 then all = false end
  for j = 1, #d do out[#out + 1] = d[j] end
end
if STEP == 'r' and (all or #KEYS == 1) then
  for k in pairs(dirty) do
    local d = last[k]
    local reset_ns = d[6] * 1000 + d[7]
    if d[6] < 0 then
      -- Never replenishes (a saturated state): kept without expiry.
      save(k, states[k], nil)
    elseif reset_ns <= 0 then
      redis.call('DEL', k)
    elseif d[1] == 0 or held[k] then
      save(k, states[k], math.ceil(reset_ns / 1000000) + GRACE_MS)
    end
  end
end
return out
