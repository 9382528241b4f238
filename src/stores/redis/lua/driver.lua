-- sluicegate: the driver every step script ends with. The algorithm above defines
-- decode(raw) -> state (raw false: a new key), encode(state) -> string and
-- reserve(state, now, cost) -> decision, new state (nil: unchanged), the wait the
-- caller accepts being MAX_WAIT.
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
    local raw = redis.call('GET', k)
    held[k] = raw and true or false
    s = decode(raw)
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
      redis.call('SET', k, encode(states[k]))
    elseif reset_ns <= 0 then
      redis.call('DEL', k)
    elseif d[1] == 0 or held[k] then
      local ms = math.ceil(reset_ns / 1000000) + GRACE_MS
      redis.call('SET', k, encode(states[k]), 'PX', int(ms))
    end
  end
end
return out
