-- A set of limits (src/algorithms/multi/mod.rs, for AllOf and Limits), all-or-nothing
-- in one script. C: 1 the number of members, then for each: its kind (the FACTORIES
-- index), the number of its configuration words, the words. An identity's keys: the
-- set's serial key (its grant counter, the mark of its grants), then each member's
-- keys in order. Every member steps on the same state, time, cost and wait; any
-- refusal leaves every member as it was and answers the tally's refusal (never
-- beats denied; among denials the longest retry_after, the first on a tie);
-- otherwise every member keeps its new state, the serial moves on, and the answer
-- is the tightest member's (fewest remaining), with the longest wait and
-- reset_after of all.
-- FACTORIES, every algorithm's factory by kind: filled after this file, by a line
-- that library.rs writes from its list FACTORIES (the kinds' one source).
local FACTORIES = {}

-- a > b for durations sent as {us, ns} (us -1: for ever).
local function longer(a_us, a_ns, b_us, b_ns)
  if a_us < 0 then return b_us >= 0 end
  if b_us < 0 then return false end
  if a_us ~= b_us then return a_us > b_us end
  return a_ns > b_ns
end

-- a < b for counts (-1: u64::MAX).
local function fewer(a, b)
  if a < 0 then return false end
  if b < 0 then return true end
  return a < b
end

local function make_set(C)
  local members, nkeys, at = {}, 1, 2
  for m = 1, C[1] do
    local kind, len = C[at], C[at + 1]
    local sub = {}
    for j = 1, len do sub[j] = C[at + 1 + j] end
    at = at + 2 + len
    local alg = FACTORIES[kind](sub)
    members[m] = {alg = alg, first = nkeys + 1}
    nkeys = nkeys + alg.nkeys
  end

  local function slice(keys, member)
    local t = {}
    for j = 1, member.alg.nkeys do t[j] = keys[member.first + j - 1] end
    return t
  end

  -- The serial key holds the set's last grant (Rust's LastGrant and its members'
  -- grants): "serial live acts_at(3 limbs)" then, per member, "allowed mark(2)
  -- charge(2) spent(2)" as 32-bit halves.
  local function encode(st)
    local parts = {int(st.serial), st.live and '1' or '0'}
    local a = st.acts_at
    for j = 1, 3 do parts[#parts + 1] = int(a[j] or 0) end
    for m = 1, #members do
      local g = st.grants[m] or {0, 0, 0, 0, 0, 0, 0}
      for j = 1, 7 do parts[#parts + 1] = int(g[j]) end
    end
    return table.concat(parts, ' ')
  end

  local function load(keys)
    local raw = redis_call('GET', keys[1])
    local st = {serial = 0, live = false, acts_at = {0}, grants = {}, members = {}, changed = {}}
    if raw then
      local w = {}
      for word in string.gmatch(raw, '%d+') do w[#w + 1] = tonumber(word) end
      st.serial, st.live, st.acts_at = w[1], w[2] == 1, limbs(w[3], w[4], w[5])
      for m = 1, #members do
        local g = {}
        for j = 1, 7 do g[j] = w[5 + (m - 1) * 7 + j] or 0 end
        st.grants[m] = g
      end
    end
    for m, member in ipairs(members) do st.members[m] = member.alg.load(slice(keys, member)) end
    return st, raw ~= false
  end

  -- Each changed member keeps its own expiry (its own reset_after; after a cancel,
  -- the expiry it had); the serial key lives as long as the longest, as the set's
  -- state does in memory.
  local save_serial = string_save(encode)
  local function save(keys, st, ms)
    save_serial(keys, st, ms)
    for m, member in ipairs(members) do
      if st.changed[m] then
        local mine = slice(keys, member)
        local d = st.decisions and st.decisions[m]
        if ms == 'keep' or d == nil then
          member.alg.save(mine, st.members[m], 'keep')
        else
          local reset_ns = d[6] * 1000 + d[7]
          if d[6] < 0 then
            member.alg.save(mine, st.members[m], nil)
          elseif reset_ns <= 0 then
            member.alg.drop(mine)
          else
            member.alg.save(mine, st.members[m], ceil(reset_ns / 1000000) + GRACE_MS)
          end
        end
      end
    end
  end

  local function drop(keys)
    for j = 1, nkeys do redis_call('DEL', keys[j]) end
  end

  local function reserve(st, now, cost)
    local reset_us, reset_ns, wait_us, wait_ns = 0, 0, 0, 0
    local tight, refusal = nil, nil
    local decisions, news = {}, {}
    for m, member in ipairs(members) do
      local d, new = member.alg.reserve(st.members[m], now, cost)
      decisions[m], news[m] = d, new
      if longer(d[6], d[7], reset_us, reset_ns) then reset_us, reset_ns = d[6], d[7] end
      if d[1] == 0 then
        if longer(d[2], d[3], wait_us, wait_ns) then wait_us, wait_ns = d[2], d[3] end
        if tight == nil or fewer(d[8], tight[1]) then tight = {d[8], d[9], m - 1} end
      else
        local replace = refusal == nil
          or (refusal[1] ~= 2 and (d[1] == 2 or longer(d[4], d[5], refusal[2], refusal[3])))
        if replace then refusal = {d[1], d[4], d[5], d[8], d[9], m - 1} end
      end
    end
    if REPORT then st.reported = decisions end
    if refusal then
      local d = decision(refusal[1], refusal[5], refusal[4], 0, 0, 0)
      if refusal[1] == 1 then d[4], d[5] = refusal[2], refusal[3] end
      d[6], d[7], d[10] = reset_us, reset_ns, refusal[6]
      return d, nil
    end
    -- No member (an empty Limits): every call fits, with no limit.
    if tight == nil then tight = {-1, -1, 0} end
    local d = decision(0, tight[2], tight[1], 0, 0, 0)
    d[2], d[3], d[6], d[7], d[10] = wait_us, wait_ns, reset_us, reset_ns, tight[3]
    if PURE_PEEK then return d, nil end
    -- Record the grant (Rust's LastGrant::record): the serial moves on, the time
    -- to act is now plus the set's wait, and the members' grants are kept for a
    -- cancel.
    local acts_at = add(ns(now), add(ns(wait_us), bn(wait_ns)))
    if cmp(acts_at, U64_MAX) > 0 then acts_at = U64_MAX end
    local new = {serial = st.serial + 1, live = true, acts_at = acts_at, grants = {},
                 members = {}, changed = {}, decisions = decisions}
    for m = 1, #members do
      new.members[m] = news[m] or st.members[m]
      new.changed[m] = news[m] ~= nil
      local g = decisions[m]
      new.grants[m] = {g[1] == 0 and 1 or 0, g[11], g[12], g[13], g[14], g[15], g[16]}
    end
    d[11], d[12] = split32(new.serial)
    d[13], d[14] = halves(cost_bn())
    return d, new
  end

  -- The Rust set's cancel: only its last grant, identified by its mark (the serial),
  -- and only once, gives back what each member's rule allows, by the grant's
  -- recorded time to act. Neither that time nor the caller's (for a call over
  -- several keys, the latest of theirs) may have passed, so a receipt from before
  -- the state was forgotten never matches a new grant with the same serial.
  local function cancel(st, now, grant, acts_at)
    local hi, lo = split32(st.serial)
    local ours = st.live and grant.allowed
      and grant.mark_halves[1] == hi and grant.mark_halves[2] == lo and acts_at ~= nil
    if not ours or cmp(acts_at, ns(now)) < 0 or cmp(st.acts_at, ns(now)) < 0 then return nil end
    acts_at = st.acts_at
    local new = {serial = st.serial, live = false, acts_at = st.acts_at, grants = st.grants,
                 members = {}, changed = {}}
    for m, member in ipairs(members) do
      new.members[m] = st.members[m]
      local g = st.grants[m]
      if member.alg.cancel and g then
        local changed = member.alg.cancel(st.members[m], now, {
          allowed = g[1] == 1,
          mark = from_halves(g[2], g[3]),
          mark_halves = {g[2], g[3]},
          charge = from_halves(g[4], g[5]),
          spent_bits = {g[6], g[7]},
        }, acts_at)
        if changed then
          new.members[m] = changed
          new.changed[m] = true
        end
      end
    end
    return new
  end

  -- Appends to out how each member stands after a reserve (Rust's reserve_each):
  -- after a grant (new state `new`), each member's standing; after a refusal, each
  -- member's own answer to the call.
  local function report(st, new, out)
    for m, member in ipairs(members) do
      if new then
        append(out, standing(member.alg, new.members[m], NOW, new.decisions[m]))
      else
        append(out, st.reported[m])
      end
    end
  end

  return {nkeys = nkeys, load = load, save = save, drop = drop, reserve = reserve, cancel = cancel,
          report = report}
end
