-- Exact unsigned integers of any size for the steps whose Rust arithmetic is u64 or
-- u128 (absolute tick counts reach 2^64; products reach 2^96). A number is an array
-- of base-2^24 limbs, least significant first, without leading zero limbs. Every
-- intermediate stays below 2^53: limb x limb < 2^48, plus carries.
local BASE = 16777216

local function bn(x) -- x: an integer double, 0 <= x < 2^53
  local a, i = {}, 1
  repeat
    local r = fmod(x, BASE)
    a[i] = r
    x = (x - r) / BASE
    i = i + 1
  until x == 0
  return a
end

local function trim(a)
  local n = #a
  while n > 1 and a[n] == 0 do
    a[n] = nil
    n = n - 1
  end
  return a
end

local function cmp(a, b)
  local na, nb = #a, #b
  if na ~= nb then
    if na < nb then return -1 end
    return 1
  end
  for i = na, 1, -1 do
    if a[i] ~= b[i] then
      if a[i] < b[i] then return -1 end
      return 1
    end
  end
  return 0
end

local function add(a, b)
  local r, carry = {}, 0
  for i = 1, max(#a, #b) do
    local s = (a[i] or 0) + (b[i] or 0) + carry
    if s >= BASE then
      r[i] = s - BASE
      carry = 1
    else
      r[i] = s
      carry = 0
    end
  end
  if carry > 0 then r[#r + 1] = carry end
  return r
end

local function sub(a, b) -- a >= b
  local r, borrow = {}, 0
  for i = 1, #a do
    local s = a[i] - (b[i] or 0) - borrow
    if s < 0 then
      r[i] = s + BASE
      borrow = 1
    else
      r[i] = s
      borrow = 0
    end
  end
  return trim(r)
end

-- a - b, or 0 when b >= a (Rust's saturating_sub).
local function subsat(a, b)
  if cmp(a, b) <= 0 then return {0} end
  return sub(a, b)
end

local function mul(a, b)
  local r, nb = {}, #b
  for i = 1, #a + nb do r[i] = 0 end
  for i = 1, #a do
    local ai, carry = a[i], 0
    for j = 1, nb do
      local t = r[i + j - 1] + ai * b[j] + carry
      local lo = fmod(t, BASE)
      r[i + j - 1] = lo
      carry = (t - lo) / BASE
    end
    local k = i + nb
    while carry > 0 do
      local t = r[k] + carry
      local lo = fmod(t, BASE)
      r[k] = lo
      carry = (t - lo) / BASE
      k = k + 1
    end
  end
  return trim(r)
end

-- The value as a double: exact below 2^53, an estimate above.
local function num(a)
  local x = 0
  for i = #a, 1, -1 do x = x * BASE + a[i] end
  return x
end

-- floor(a / d) and a mod d. Long division one limb at a time: each quotient limb is
-- estimated from doubles (relative error about 2^-50) and corrected exactly.
local function divmod(a, d)
  if cmp(a, d) < 0 then return {0}, a end
  if #d == 1 then
    -- A one-limb divisor: r < d < 2^24, so r * BASE + limb < 2^48 is exact.
    local q, r, dv = {}, 0, d[1]
    for i = #a, 1, -1 do
      local t = r * BASE + a[i]
      r = fmod(t, dv)
      q[i] = (t - r) / dv
    end
    return trim(q), {r}
  end
  local q, r = {}, {0}
  local dn = num(d)
  for i = #a, 1, -1 do
    -- r = r * BASE + a[i]
    if #r == 1 and r[1] == 0 then
      r = {a[i]}
    else
      table.insert(r, 1, a[i])
    end
    local qi = 0
    if cmp(r, d) >= 0 then
      qi = floor(num(r) / dn)
      if qi >= BASE then qi = BASE - 1 end
      local p = mul(d, {qi})
      while cmp(p, r) > 0 do
        qi = qi - 1
        p = sub(p, d)
      end
      r = sub(r, p)
      while cmp(r, d) >= 0 do
        qi = qi + 1
        r = sub(r, d)
      end
    end
    q[i] = qi
  end
  return trim(q), r
end

local function maxbn(a, b)
  if cmp(a, b) >= 0 then return a end
  return b
end

local function minbn(a, b)
  if cmp(a, b) <= 0 then return a end
  return b
end

-- Absolute times near now, on doubles: the fast paths of the leaky bucket and
-- SmoothBursty. Their state is one u64 kept as its 32-bit halves {hi, lo} (exact
-- doubles; 8 bytes on the server, see `u64_state`). The difference of two such
-- values is exact while it is below 2^53 in size, as a step's relative quantities
-- are (a span, a burst, a wait), so a step that finds its state that near now runs
-- on plain doubles; any other converts to limb arrays. Division by 2^32 is exact,
-- so Lua's % splits any integer double exactly.
local W = 4294967296

-- Whole microseconds (below 2^53) in ns, as halves.
local function ns_halves(us)
  local b = us % W
  local x = b * 1000
  local lo = x % W
  return (us - b) / W * 1000 + (x - lo) / W, lo
end

-- (hi, lo) + x for an integer x below 2^53 in size (negative too, while the sum
-- is not).
local function halves_add(hi, lo, x)
  local xl = x % W
  lo = lo + xl
  hi = hi + (x - xl) / W
  if lo >= W then return hi + 1, lo - W end
  return hi, lo
end

-- A limb array from config words: limbs given least significant first.
local function limbs(l0, l1, l2)
  return trim({l0, l1, l2})
end

-- 2^64 - 1, the largest u64.
local U64_MAX = {BASE - 1, BASE - 1, 65535}

-- A duration in ns as whole microseconds and the ns remainder (the reply's format),
-- exact up to u64::MAX ns. From 2^53 us (285 years) on, where a double no longer
-- holds every integer, the microseconds are a multiple of 4 (exact below 2^55, and
-- u64::MAX ns is 2^54.04 us) and the remainder runs up to 3,999 ns: the value is
-- still us * 1000 + rest, and comparing (us, rest) pairs in order still orders the
-- values (a step of 4 us outweighs any difference of remainders).
local function us_ns(a)
  if #a < 3 or a[3] < 32 then
    -- Below 2^53: plain doubles.
    local x = num(a)
    local rest = fmod(x, 1000)
    return (x - rest) / 1000, rest
  end
  local us, rest = divmod(a, {1000})
  -- Below 2^53 us: limbs {0, 0, 32} are 32 * 2^48.
  if cmp(us, {0, 0, 32}) < 0 then return num(us), num(rest) end
  local fours, rest4 = divmod(a, {4000})
  return num(fours) * 4, num(rest4)
end

-- The high and low 32-bit halves of a value below 2^64 (the reply's grant mark).
local function halves(a)
  local l0, l1, l2 = a[1] or 0, a[2] or 0, a[3] or 0
  local l1lo = fmod(l1, 256)
  return (l1 - l1lo) / 256 + l2 * 65536, l0 + l1lo * BASE
end

-- 2^63 - 1, the largest i64, and Rust's saturating i64 addition of non-negatives.
local I64_MAX = {BASE - 1, BASE - 1, 32767}
local function add_i64(a, b)
  local s = add(a, b)
  if cmp(s, I64_MAX) > 0 then return I64_MAX end
  return s
end

-- A duration in ns from whole microseconds.
local function ns(us) return mul(bn(us), {1000}) end

-- True if a wait of `wait` ns is longer than the caller accepts (MAX_WAIT, in us;
-- below 2^48 ns the doubles compare exactly).
local function too_long(wait)
  if MAX_WAIT < 0 then return false end
  if #wait < 3 then return num(wait) > MAX_WAIT * 1000 end
  return cmp(wait, ns(MAX_WAIT)) > 0
end

-- A non-negative integer from its decimal text.
local function decimal(text)
  local a = {0}
  for i = 1, #text do a = add(mul(a, {10}), {tonumber(string.sub(text, i, i))}) end
  return trim(a)
end

-- The exact cost, for a set's grant charge: parsed only when a set grants.
local function cost_bn() return decimal(COST_TEXT) end

-- A 64-bit word from its 32-bit halves.
local function from_halves(hi, lo)
  return add(mul(bn(hi), {0, 256}), bn(lo))
end
