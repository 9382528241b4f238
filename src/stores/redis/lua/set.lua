-- A set of limits (src/algorithms/multi/mod.rs, for AllOf and Limits), all-or-nothing
-- in one script. C: 1 the number of members, then for each: its kind (the FACTORIES
-- index), the number of its configuration words, the words. An identity's keys: each
-- member's keys in order (an empty set has one key, never read or written). Every
-- member steps on the same state, time, cost and wait; any refusal leaves every
-- member as it was and answers the tally's refusal (never beats denied; among
-- denials the longest retry_after, the first on a tie); otherwise every member
-- keeps its new state and the answer is the tightest member's (fewest remaining),
-- with the longest wait and reset_after of all.
--
-- The set keeps no record of its grants: its answer carries, after its 16
-- integers, its receipt as its members' own, one leaf of 7 integers per single
-- algorithm in it, depth first (allowed, mark, charge, stored-permits bits, each as
-- 32-bit halves; all 0 where nothing was granted), and a cancel hands each member
-- its leaves back (Rust's `Receipt::members`).
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

-- A single algorithm's grant, as its cancel reads it, from a leaf's 7 integers at
-- w[at..at+6] (also the driver's, for a single algorithm's cancel).
local function grant_of(w, at)
  return {
    allowed = w[at] == 1,
    mark = from_halves(w[at + 1], w[at + 2]),
    mark_halves = {w[at + 1], w[at + 2]},
    charge = from_halves(w[at + 3], w[at + 4]),
    spent_bits = {w[at + 5], w[at + 6]},
  }
end

local function make_set(C)
  local members, nkeys, nleaves, at = {}, 0, 0, 2
  for m = 1, C[1] do
    local kind, len = C[at], C[at + 1]
    local sub = {}
    for j = 1, len do sub[j] = C[at + 1 + j] end
    at = at + 2 + len
    local alg = FACTORIES[kind](sub)
    members[m] = {alg = alg, first = nkeys + 1, leaves = alg.leaves or 1}
    nkeys = nkeys + alg.nkeys
    nleaves = nleaves + (alg.leaves or 1)
  end

  -- A table of one slot per member, made at that size (growing one from empty
  -- reallocates it at 1, 2 and 4 slots).
  local FALSES = {}
  for m = 1, #members do FALSES[m] = false end
  local function per_member() return {unpack(FALSES)} end

  local function slice(keys, member)
    local t = {}
    for j = 1, member.alg.nkeys do t[j] = keys[member.first + j - 1] end
    return t
  end

  -- A member's state is held if any member's key is. The members' keys are kept
  -- with the state, for its save.
  local function load(keys)
    local st = {members = per_member(), changed = per_member(), keys = per_member()}
    local held = false
    for m, member in ipairs(members) do
      local mine = slice(keys, member)
      local s, h = member.alg.load(mine)
      st.members[m], st.keys[m] = s, mine
      held = held or h
    end
    return st, held
  end

  -- Each changed member keeps its own expiry: its own reset_after, or after a
  -- cancel the expiry it had.
  local function save(keys, st, ms)
    for m, member in ipairs(members) do
      if st.changed[m] then
        local mine = st.keys[m]
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

  -- A decision with room for the receipt's leaves after its 16 integers: one
  -- table made at its full width (appending would grow it twice).
  local WIDE = {}
  for j = 1, 16 + 7 * nleaves do WIDE[j] = 0 end
  local function wide(verdict, limit, remaining)
    local d = {unpack(WIDE)}
    d[1], d[8], d[9] = verdict, remaining, limit
    return d
  end

  -- Writes into d, after its 16 integers, the receipt of a grant whose members
  -- answered `decisions` (or zeros: a refusal gives nothing back).
  local function put_leaves(d, decisions)
    local at = 16
    for m, member in ipairs(members) do
      local md = decisions and decisions[m]
      if member.alg.leaves then
        for j = 17, 16 + 7 * member.leaves do
          at = at + 1
          d[at] = (md and md[j]) or 0
        end
      elseif md and md[1] == 0 then
        d[at + 1], d[at + 2], d[at + 3], d[at + 4], d[at + 5], d[at + 6], d[at + 7] =
          1, md[11], md[12], md[13], md[14], md[15], md[16]
        at = at + 7
      else
        at = at + 7
      end
    end
    return d
  end

  local function reserve(st, now, cost)
    local reset_us, reset_ns, wait_us, wait_ns = 0, 0, 0, 0
    -- The tightest grant (remaining, limit, index; none yet: index nil) and the
    -- refusal to answer (verdict, retry us and ns, remaining, limit, index).
    local t_rem, t_lim, t_at = -1, -1, nil
    local r_verdict, r_us, r_ns, r_rem, r_lim, r_at = nil, 0, 0, 0, 0, 0
    local decisions, news = per_member(), per_member()
    for m, member in ipairs(members) do
      local d, new = member.alg.reserve(st.members[m], now, cost)
      decisions[m], news[m] = d, new
      if longer(d[6], d[7], reset_us, reset_ns) then reset_us, reset_ns = d[6], d[7] end
      if d[1] == 0 then
        if longer(d[2], d[3], wait_us, wait_ns) then wait_us, wait_ns = d[2], d[3] end
        if t_at == nil or fewer(d[8], t_rem) then t_rem, t_lim, t_at = d[8], d[9], m - 1 end
      else
        local replace = r_verdict == nil
          or (r_verdict ~= 2 and (d[1] == 2 or longer(d[4], d[5], r_us, r_ns)))
        if replace then
          r_verdict, r_us, r_ns, r_rem, r_lim, r_at = d[1], d[4], d[5], d[8], d[9], m - 1
        end
      end
    end
    if REPORT then st.reported = decisions end
    if r_verdict then
      local d
      if BARE then d = decision(r_verdict, r_lim, r_rem, 0, 0, 0) else d = wide(r_verdict, r_lim, r_rem) end
      if r_verdict == 1 then d[4], d[5] = r_us, r_ns end
      d[6], d[7], d[10] = reset_us, reset_ns, r_at
      return d, nil
    end
    -- No member (an empty Limits): every call fits, with no limit.
    local d
    if BARE then d = decision(0, t_lim, t_rem, 0, 0, 0) else d = wide(0, t_lim, t_rem) end
    d[2], d[3], d[6], d[7], d[10] = wait_us, wait_ns, reset_us, reset_ns, t_at or 0
    if not BARE then put_leaves(d, decisions) end
    if PURE_PEEK then return d, nil end
    local new = {members = per_member(), changed = per_member(), decisions = decisions,
                 keys = st.keys}
    for m = 1, #members do
      new.members[m] = news[m] or st.members[m]
      new.changed[m] = news[m] ~= nil
    end
    return d, new
  end

  -- The Rust set's cancel: each member gets its own leaves of the set's receipt
  -- (grant.leaves, 7 integers each from grant.at) and gives back what its rule
  -- allows, by the caller's time to act.
  local function cancel(st, now, grant, acts_at)
    local new = {members = per_member(), changed = per_member(), keys = st.keys}
    local any = false
    local at = grant.at
    for m, member in ipairs(members) do
      new.members[m] = st.members[m]
      if member.alg.cancel then
        local g
        if member.alg.leaves then
          g = {leaves = grant.leaves, at = at}
        else
          g = grant_of(grant.leaves, at)
        end
        local changed = member.alg.cancel(st.members[m], now, g, acts_at)
        if changed then
          new.members[m] = changed
          new.changed[m] = true
          any = true
        end
      end
      at = at + 7 * member.leaves
    end
    if any then return new end
    return nil
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

  return {nkeys = max(nkeys, 1), leaves = nleaves, load = load, save = save, drop = drop,
          reserve = reserve, cancel = cancel, report = report}
end
