-- sluicegate: the driver every step script ends with, running ALG (an algorithm
-- object, see `single` in the prelude) on every identity of the call. An identity
-- is ALG.nkeys consecutive KEYS (one for a single algorithm; a set's serial key and
-- its members' keys). Every identity is read once; one that appears twice is
-- stepped again on its updated copy; a reserve commits every changed state only if
-- every identity allowed it (one identity: whatever the algorithm left, as in
-- memory), each with an expiry equal to its reset_after (deleted once that is
-- zero, kept without expiry when it is for ever), and a peek writes nothing.
local K = ALG.nkeys
local states, dirty, last, held, keysof, order = {}, {}, {}, {}, {}, {}
local out = {}
local all = true
local n = #KEYS / K
PURE_PEEK = STEP == 'p' and n == 1

-- A cancel: after the configuration, when the grant was to act, relative to now
-- (ns, decimal; negative: already past, sent as '-'), then per identity its grant: allowed (1/0), mark, charge and stored-permits bits (each
-- as 32-bit halves). Keys the server does not hold have nothing to give back; the
-- others keep their expiry. The answer (the grants themselves) is the caller's.
if STEP == 'c' then
  local base = 7 + #CONFIG
  local acts_at = nil
  if ARGV[base] ~= '-' then acts_at = add(ns(NOW), decimal(ARGV[base])) end
  local cancelled = {}
  for i = 1, n do
    local keys = {}
    for j = 1, K do keys[j] = KEYS[(i - 1) * K + j] end
    local id = keys[1]
    if states[id] == nil then
      states[id], held[id] = ALG.load(keys)
      keysof[id] = keys
      order[#order + 1] = id
    end
    if held[id] then
      local g = base + 1 + (i - 1) * 7
      local grant = {
        allowed = ARGV[g] == '1',
        mark = from_halves(tonumber(ARGV[g + 1]), tonumber(ARGV[g + 2])),
        mark_halves = {tonumber(ARGV[g + 1]), tonumber(ARGV[g + 2])},
        charge = from_halves(tonumber(ARGV[g + 3]), tonumber(ARGV[g + 4])),
        spent_bits = {tonumber(ARGV[g + 5]), tonumber(ARGV[g + 6])},
      }
      local new = ALG.cancel(states[id], NOW, grant, acts_at)
      if new then
        states[id] = new
        cancelled[id] = true
      end
    end
  end
  for _, id in ipairs(order) do
    if cancelled[id] then ALG.save(keysof[id], states[id], 'keep') end
  end
  return {}
end
for i = 1, n do
  local keys = {}
  for j = 1, K do keys[j] = KEYS[(i - 1) * K + j] end
  local id = keys[1]
  local s = states[id]
  if s == nil then
    s, held[id] = ALG.load(keys)
    states[id] = s
    keysof[id] = keys
    order[#order + 1] = id
  end
  local d, changed = ALG.reserve(s, NOW, COST)
  if changed then
    states[id] = changed
    dirty[id] = true
  end
  last[id] = d
  if d[1] ~= 0 then all = false end
  for j = 1, #d do out[#out + 1] = d[j] end
end
if STEP == 'r' and (all or n == 1) then
  for _, id in ipairs(order) do
    if dirty[id] then
      local d = last[id]
      local reset_ns = d[6] * 1000 + d[7]
      if d[6] < 0 then
        ALG.save(keysof[id], states[id], nil)
      elseif reset_ns <= 0 then
        ALG.drop(keysof[id])
      elseif d[1] == 0 or held[id] then
        ALG.save(keysof[id], states[id], math.ceil(reset_ns / 1000000) + GRACE_MS)
      end
    end
  end
end
return out
