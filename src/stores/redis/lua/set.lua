-- A set of limits (src/algorithms/multi/mod.rs, for AllOf and Limits), all-or-nothing
-- in one script. C: 1 the number of members, then for each: its kind (the FACTORIES
-- index), the number of its configuration words, the words. An identity's keys: each
-- member's keys in order (an empty set has one key, never read or written). Every
-- member steps on the same state, time, cost and wait; any refusal leaves every
-- member as it was and answers the tally's refusal (never beats denied; among
-- denials the longest retry_after, the first on a tie); otherwise every member
-- keeps its new state and the answer is the tightest member's (fewest remaining),
-- with the longest wait and reset_after of all. The answer's limit index counts
-- leaf limits, depth first: a nested set's limits in its place, its answer's own
-- index among them.
--
-- The set keeps no record of its grants: its answer carries, after its 16
-- integers, its receipt as its members' own, one leaf of 7 integers per single
-- algorithm in it, depth first (allowed, mark, charge, stored-permits bits, each as
-- 32-bit halves; all 0 where nothing was granted), and a cancel hands each member
-- its leaves back (Rust's `Receipt::members`).
-- FACTORIES, every algorithm's factory by kind: filled after this file, by a line
-- that library.rs writes from its list FACTORIES (the kinds' one source).
local FACTORIES = {}

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
  -- The members, by index: each one's algorithm, its first key among the
  -- identity's, its number of keys and of leaves, and whether it is a set itself
  -- (whose leaves are its own). Arrays rather than a table per member: a named
  -- field costs a hash lookup on every call.
  -- OFFSET[m]: the leaf limits before member m, by which limit indices count.
  local ALGS, FIRST, NK, LEAVES, NESTED, OFFSET = {}, {}, {}, {}, {}, {}
  local nkeys, nleaves, at = 0, 0, 2
  local M = C[1]
  for m = 1, M do
    local kind, len = C[at], C[at + 1]
    local sub = {}
    for j = 1, len do sub[j] = C[at + 1 + j] end
    at = at + 2 + len
    local alg = FACTORIES[kind](sub)
    ALGS[m], FIRST[m], NK[m] = alg, nkeys + 1, alg.nkeys
    LEAVES[m], NESTED[m], OFFSET[m] = alg.leaves or 1, alg.leaves ~= nil, nleaves
    nkeys = nkeys + alg.nkeys
    nleaves = nleaves + (alg.leaves or 1)
  end

  -- A state is one array of 4 slots per member, made at its size from a template
  -- (a table grown from empty is reallocated at 1, 2, 4, ... slots, and a table
  -- per part would cost one allocation each): member m's state at m, its keys at
  -- M + m, whether it changed since the load at 2M + m, and the decision of the
  -- step that made the state at 3M + m (false: none, as after a load or a cancel).
  local M2, M3 = 2 * M, 3 * M
  local TEMPLATE = {}
  for j = 1, 4 * M do TEMPLATE[j] = false end

  -- A member's state is held if any member's key is.
  local function load(keys)
    local st = {unpack(TEMPLATE)}
    local held = false
    for m = 1, M do
      local first, mine = FIRST[m], nil
      if NK[m] == 1 then
        mine = {keys[first]}
      else
        mine = {}
        for j = 1, NK[m] do mine[j] = keys[first + j - 1] end
      end
      local s, h = ALGS[m].load(mine)
      st[m], st[M + m] = s, mine
      held = held or h
    end
    return st, held
  end

  -- Each changed member keeps its own expiry: its own reset_after, or after a
  -- cancel the expiry it had.
  local function save(keys, st, ms)
    for m = 1, M do
      if st[M2 + m] then
        local mine, d, alg = st[M + m], st[M3 + m], ALGS[m]
        if ms == 'keep' or not d then
          alg.save(mine, st[m], 'keep')
        elseif d[6] < 0 then
          alg.save(mine, st[m], nil)
        else
          local reset_ns = d[6] * 1000 + d[7]
          if reset_ns <= 0 then
            alg.drop(mine)
          else
            alg.save(mine, st[m], ceil(reset_ns / 1000000) + GRACE_MS)
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

  -- Writes into d, after its 16 integers, the receipt of a grant whose members
  -- answered the decisions the state st holds.
  local function put_leaves(d, st)
    local at = 16
    for m = 1, M do
      local md = st[M3 + m]
      if NESTED[m] then
        for j = 17, 16 + 7 * LEAVES[m] do
          at = at + 1
          d[at] = md[j] or 0
        end
      else
        if md[1] == 0 then
          d[at + 1], d[at + 2], d[at + 3], d[at + 4], d[at + 5], d[at + 6], d[at + 7] =
            1, md[11], md[12], md[13], md[14], md[15], md[16]
        end
        at = at + 7
      end
    end
    return d
  end

  -- Durations are {us, ns} pairs, us -1 for ever; counts are -1 for u64::MAX. The
  -- comparisons are written out: a Lua function call costs more than they do. A
  -- member's limit index is its first leaf's, plus a nested set's own index.
  local function reserve(st, now, cost)
    local reset_us, reset_ns, wait_us, wait_ns = 0, 0, 0, 0
    -- The tightest grant (remaining, limit, index; none yet: index nil) and the
    -- refusal to answer (verdict, retry us and ns, remaining, limit, index).
    local t_rem, t_lim, t_at = -1, -1, nil
    local r_verdict, r_us, r_ns, r_rem, r_lim, r_at = nil, 0, 0, 0, 0, 0
    local new = {unpack(TEMPLATE)}
    for m = 1, M do
      local d, n = ALGS[m].reserve(st[m], now, cost)
      new[m], new[M + m], new[M2 + m], new[M3 + m] = n or st[m], st[M + m], n ~= nil or st[M2 + m], d
      -- The longest reset_after.
      local u = d[6]
      if reset_us >= 0 and (u < 0 or u > reset_us or (u == reset_us and d[7] > reset_ns)) then
        reset_us, reset_ns = u, d[7]
      end
      if d[1] == 0 then
        -- The longest wait, and the fewest remaining (the first on a tie).
        u = d[2]
        if wait_us >= 0 and (u < 0 or u > wait_us or (u == wait_us and d[3] > wait_ns)) then
          wait_us, wait_ns = u, d[3]
        end
        local rem = d[8]
        if t_at == nil or (rem >= 0 and (t_rem < 0 or rem < t_rem)) then
          t_rem, t_lim, t_at = rem, d[9], OFFSET[m]
          if NESTED[m] then t_at = t_at + d[10] end
        end
      else
        -- Never beats denied; among denials the longest retry_after.
        u = d[4]
        local replace = r_verdict == nil or (r_verdict ~= 2 and (d[1] == 2
          or (r_us >= 0 and (u < 0 or u > r_us or (u == r_us and d[5] > r_ns)))))
        if replace then
          r_verdict, r_us, r_ns, r_rem, r_lim, r_at = d[1], u, d[5], d[8], d[9], OFFSET[m]
          if NESTED[m] then r_at = r_at + d[10] end
        end
      end
    end
    if r_verdict then
      -- What each member answered, for `report`.
      if REPORT then st[4 * M + 1] = new end
      local d
      if BARE then d = decision(r_verdict, r_lim, r_rem, 0, 0, 0) else
        d = {unpack(WIDE)}
        d[1], d[8], d[9] = r_verdict, r_rem, r_lim
      end
      if r_verdict == 1 then d[4], d[5] = r_us, r_ns end
      d[6], d[7], d[10] = reset_us, reset_ns, r_at
      return d, nil
    end
    -- No member (an empty Limits): every call fits, with no limit.
    local d
    if BARE then d = decision(0, t_lim, t_rem, 0, 0, 0) else
      d = put_leaves({unpack(WIDE)}, new)
      d[8], d[9] = t_rem, t_lim
    end
    d[2], d[3], d[6], d[7], d[10] = wait_us, wait_ns, reset_us, reset_ns, t_at or 0
    if PURE_PEEK then return d, nil end
    return d, new
  end

  -- The Rust set's cancel: each member gets its own leaves of the set's receipt
  -- (grant.leaves, 7 integers each from grant.at) and gives back what its rule
  -- allows, by the caller's time to act.
  local function cancel(st, now, grant, acts_at)
    local new = {unpack(TEMPLATE)}
    local any = false
    local at = grant.at
    for m = 1, M do
      local alg = ALGS[m]
      new[m], new[M + m] = st[m], st[M + m]
      if alg.cancel then
        local g
        if NESTED[m] then
          g = {leaves = grant.leaves, at = at}
        else
          g = grant_of(grant.leaves, at)
        end
        local changed = alg.cancel(st[m], now, g, acts_at)
        if changed then
          new[m], new[M2 + m] = changed, true
          any = true
        end
      end
      at = at + 7 * LEAVES[m]
    end
    if any then return new end
    return nil
  end

  -- Appends to out how each leaf limit stands after a reserve (Rust's
  -- reserve_each), depth first: a nested set's limits in its place. After a grant
  -- (`standings`, of the new state `new`), each limit's standing; after a refusal
  -- (`answers`), each limit's own answer to the call, from x, what the reserve
  -- left of this set: its new state if it granted, else its state, whose slot
  -- 4M + 1 holds what its members answered.
  local function standings(new, out)
    for m = 1, M do
      if NESTED[m] then
        ALGS[m].standings(new[m], out)
      else
        append(out, standing(ALGS[m], new[m], NOW, new[M3 + m]))
      end
    end
  end

  local function answers(x, out)
    local answered = x[4 * M + 1] or x
    for m = 1, M do
      if NESTED[m] then
        ALGS[m].answers(answered[m], out)
      else
        append(out, answered[M3 + m])
      end
    end
  end

  local function report(st, new, out)
    if new then standings(new, out) else answers(st, out) end
  end

  return {nkeys = max(nkeys, 1), leaves = nleaves, load = load, save = save, drop = drop,
          reserve = reserve, cancel = cancel, report = report, standings = standings,
          answers = answers}
end
