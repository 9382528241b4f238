-- sluicegate: the library's one function, `call`, running one step of the
-- algorithm its configuration names on every identity of the call. An identity
-- is ALG.nkeys consecutive keys (one for a single algorithm; a set's members'
-- keys). Every identity is read once; one that appears twice is
-- stepped again on its updated copy; a reserve commits every changed state only if
-- every identity allowed it (one identity: whatever the algorithm left, as in
-- memory), each with an expiry equal to its reset_after (deleted once that is
-- zero, kept without expiry when it is for ever), and a peek writes nothing.
--
-- ARGV: 1 the call: the expiry grace in ms, the algorithm's kind (its FACTORIES
-- index) and its words, space-separated; then ';', the step ('r', 'p', 'c'; 'e': a
-- reserve on one identity that also reports how every limit stands after it, one
-- more decision per limit after its own; 'k': a reserve on one identity whose
-- caller keeps no receipt, answered without one), the cost and the max wait in
-- whole us (-1: for ever), space-separated. 2 the call's deadline in us since 1970 (absent or
-- '': none); 3 now in us (absent or '': the server's TIME); a cancel's grants
-- follow. A call whose deadline the server's TIME has passed is refused before it
-- reads anything (an `EXPIRED` error: its caller has given up on it, so it must not
-- land). Few arguments where there could be six: Redis builds ARGV afresh on every
-- call, each argument a string and, at the 1st, 2nd, 3rd and 5th, a table resize,
-- while the text of a call seen before is one table lookup.

-- Algorithms built from their configuration text, kept between calls: building
-- one (its closures, its constants) is most of what a step would otherwise cost.
-- Bounded: a server that sees many configurations rebuilds them now and then.
local built, nbuilt = {}, 0
local function algorithm(text)
  local alg = built[text]
  if alg == nil then
    local words = {}
    for word in string.gmatch(text, '%S+') do words[#words + 1] = tonumber(word) end
    local grace = table.remove(words, 1)
    local make = FACTORIES[table.remove(words, 1)]
    if make == nil then return error('sluicegate: unknown algorithm in ' .. text) end
    alg = make(words)
    alg.grace = grace
    if nbuilt >= 256 then built, nbuilt = {}, 0 end
    built[text], nbuilt = alg, nbuilt + 1
  end
  return alg
end

-- Calls parsed from their text, kept between calls: a server sees the same few
-- again and again (one per limiter and kind of call). Bounded like `built`.
local plans, nplans = {}, 0
local function plan(text)
  local p = plans[text]
  if p == nil then
    local config, step, cost, wait = match(text, '^(.*);(%a) (%S+) (%S+)$')
    if config == nil then return error('sluicegate: a call in another format: ' .. text) end
    local alg = algorithm(config)
    p = {alg = alg, step = step, report = step == 'e', bare = step == 'k',
         cost = cost + 0, cost_text = cost, max_wait = wait + 0, pure_peek = step == 'p',
         unrecorded = alg.leaves ~= nil}
    if p.report or p.bare then p.step = 'r' end
    if step == 'p' then p.max_wait = 0 end
    -- LONE, for a call on one identity.
    p.lone = alg.nkeys == 1 and not p.report and not alg.leaves
    if nplans >= 256 then plans, nplans = {}, 0 end
    plans[text], nplans = p, nplans + 1
  end
  return p
end

-- Writes one identity's changed state after a decision of this verdict whose
-- reset_after is reset_ns (-1: for ever): with that expiry, deleted once it is
-- zero, without expiry when it is for ever; a refused step that changed the state
-- rewrites only a key the server holds: a refusal creates nothing.
local function commit(ALG, keys, state, verdict, reset_ns, held)
  if reset_ns < 0 then
    ALG.save(keys, state, nil)
  elseif reset_ns == 0 then
    ALG.drop(keys)
  elseif verdict == 0 or held then
    ALG.save(keys, state, ceil(reset_ns / 1000000) + GRACE_MS)
  end
end

-- The reset_after of a full decision in ns (a double), -1 for ever.
local function reset_of(d)
  if d[6] < 0 then return -1 end
  return d[6] * 1000 + d[7]
end

-- A lone identity's full decision d as the short reply, packed (prelude.lua's
-- SHORT5...; Redis turns each integer of an array reply into text, as costly per
-- integer as a small step's arithmetic): durations as whole ns (-1: for ever), no
-- limit index (a single algorithm's is 0); 5 integers for a refusal (no receipt),
-- 9 for a grant (11 when its stored-permits bits are not zero), 5 for a grant to a
-- BARE call (which keeps no receipt). With `index` (a set's), the 5 and that index.
-- d itself where a duration is 9 x 10^12 us or more, whose ns a double would not
-- hold. A LONE step may build the short reply itself.
local function short(d, index)
  local wait, retry, reset = d[2], d[4], d[6]
  if wait >= 9e12 or retry >= 9e12 or reset >= 9e12 then return d end
  if reset >= 0 then reset = reset * 1000 + d[7] end
  if d[1] ~= 0 then
    if retry >= 0 then retry = retry * 1000 + d[5] end
    if index then return struct_pack(SHORT6, d[1], retry, reset, d[8], d[9], index) end
    return struct_pack(SHORT5, d[1], retry, reset, d[8], d[9])
  end
  if wait >= 0 then wait = wait * 1000 + d[3] end
  if index then return struct_pack(SHORT6, 0, wait, reset, d[8], d[9], index) end
  if BARE then return struct_pack(SHORT5, 0, wait, reset, d[8], d[9]) end
  if d[15] == 0 and d[16] == 0 then
    return struct_pack(SHORT9, 0, wait, reset, d[8], d[9], d[11], d[12], d[13], d[14])
  end
  return struct_pack(SHORT11, 0, wait, reset, d[8], d[9], d[11], d[12], d[13], d[14], d[15],
    d[16])
end

-- Any other reply, a list of integers below 2^53, packed the same way: as many
-- doubles as it has integers (in pieces: `unpack` takes a bounded number of
-- values), the formats made once per length.
local formats = {}
local function format_of(n)
  local f = formats[n]
  if f == nil then
    f = '>' .. string.rep('d', n)
    formats[n] = f
  end
  return f
end

local function packed(t)
  local n = #t
  if n <= 1024 then return struct_pack(format_of(n), unpack(t, 1, n)) end
  local parts = {}
  for first = 1, n, 1024 do
    local last = min(first + 1023, n)
    parts[#parts + 1] = struct_pack(format_of(last - first + 1), unpack(t, first, last))
  end
  return table.concat(parts)
end

local function call(KEYS, ARGV)
  if not floor then
    redis_call, redis_pcall, floor, ceil, fmod, max, min, match, tonumber, struct_pack,
      struct_unpack, format, substring = library_functions()
  end
  local P = plans[ARGV[1]] or plan(ARGV[1])
  local ALG = P.alg
  GRACE_MS, STEP, REPORT, BARE, COST, COST_TEXT, MAX_WAIT =
    ALG.grace, P.step, P.report, P.bare, P.cost, P.cost_text, P.max_wait
  LONE, UNRECORDED = false, P.unrecorded
  local deadline, now = ARGV[2], ARGV[3]
  SERVER_TIME = now == nil or now == ''
  if SERVER_TIME then
    local t = redis_call('TIME')
    NOW = t[1] * 1000000 + t[2]
  else
    -- Arithmetic coercion parses as tonumber does, without the cost of a call.
    NOW = now + 0
  end
  if deadline ~= nil and deadline ~= '' then
    local server_now = NOW
    if not SERVER_TIME then
      local t = redis_call('TIME')
      server_now = t[1] * 1000000 + t[2]
    end
    if server_now > deadline + 0 then
      return redis.error_reply('EXPIRED sluicegate: the call reached the server after its ' ..
        'deadline (its caller had given up on it), so it was not applied')
    end
  end
  local K = ALG.nkeys
  if #KEYS == K and STEP ~= 'c' then
    -- One identity (most calls): the rule below without its bookkeeping.
    PURE_PEEK, LONE = P.pure_peek, P.lone
    local s, held = ALG.load(KEYS)
    local d, changed, verdict, reset = ALG.reserve(s, NOW, COST)
    if REPORT then
      local out = {}
      for j = 1, #d do out[#out + 1] = d[j] end
      if ALG.report then
        ALG.report(s, changed, out)
      else
        append(out, standing(ALG, changed or s, NOW, d))
      end
      if STEP == 'r' and changed then commit(ALG, KEYS, changed, d[1], reset_of(d), held) end
      return packed(out)
    end
    -- A LONE step that answered the short reply packed it and said its verdict and
    -- reset_after; a grant to a BARE call ends before its receipt. A full decision
    -- (16 integers) becomes the short reply here where its durations fit; so does
    -- a set's refusal (which gives nothing back) and its grant to a BARE call, as
    -- the short form and the deciding member's index.
    if verdict then
      if BARE and verdict == 0 then d = substring(d, 1, 40) end
    else
      verdict, reset = d[1], reset_of(d)
      if LONE then
        d = short(d)
      elseif ALG.leaves and (verdict ~= 0 or BARE) then
        d = short(d, d[10])
      end
      if type(d) == 'table' then d = packed(d) end
    end
    if STEP == 'r' and changed then commit(ALG, KEYS, changed, verdict, reset, held) end
    return d
  end
  local states, dirty, last, held, keysof, order = {}, {}, {}, {}, {}, {}
  local out = {}
  local all = true
  local n = #KEYS / K
  PURE_PEEK = STEP == 'p' and n == 1

  -- A cancel: ARGV 4 is when the grant was to act, relative to now (ns, decimal;
  -- '-': already past), then per identity its receipt: per leaf (one for a single
  -- algorithm, one per single algorithm in a set), allowed (1/0), mark, charge and
  -- stored-permits bits (each as 32-bit halves). Keys the server does not hold have
  -- nothing to give back; the others keep their expiry. The answer (the grants
  -- themselves) is the caller's.
  if STEP == 'c' then
    local acts_at = nil
    local W = 7 * (ALG.leaves or 1)
    if ARGV[4] ~= '-' then acts_at = add(ns(NOW), decimal(ARGV[4])) end
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
        local w, g = {}, 5 + (i - 1) * W
        for j = 1, W do w[j] = tonumber(ARGV[g + j - 1]) end
        local grant
        if ALG.leaves then
          grant = {leaves = w, at = 1}
        else
          grant = grant_of(w, 1)
        end
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
        commit(ALG, keysof[id], states[id], last[id][1], reset_of(last[id]), held[id])
      end
    end
  end
  return packed(out)
end
