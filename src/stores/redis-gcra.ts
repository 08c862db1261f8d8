import { createHash } from 'node:crypto';

/*
 * What both scripts start with: the policy from ARGV, the clock, the stored bucket (rescaled when the
 * limit changed) brought up to now, and what a decision reports of it (remaining, reset).
 */
const BUCKET_PRELUDE_LUA = `
if redis.replicate_commands then redis.replicate_commands() end
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local now
if ARGV[4] ~= '' then
  now = tonumber(ARGV[4])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local stepMs = math.floor(window / limit)
local stepFrac = window % limit
local tatMs, tatFrac = 0, 0
local stored = redis.call('GET', KEYS[1])
if stored then
  local a, b, c = string.match(stored, '^(%d+):(%d+):(%d+)$')
  if a then
    tatMs, tatFrac = tonumber(a), tonumber(b)
    local from = tonumber(c)
    if from ~= limit and tatFrac > 0 then
      local f = math.ceil(tatFrac * limit / from)
      if f >= limit then tatMs, tatFrac = tatMs + 1, 0 else tatFrac = f end
    end
  end
end
if tatMs < now then tatMs, tatFrac = now, 0 end
-- Tokens left, and ms until full, for the bucket as it stands.
local function remaining()
  if tatMs > now or tatFrac > 0 then
    local scaled = (now - tatMs + window) * limit - tatFrac
    if scaled <= 0 then return 0 end
    return math.floor(scaled / window)
  end
  return limit
end
local function reset()
  if tatMs >= now then
    local r = tatMs - now
    if tatFrac > 0 then r = r + 1 end
    return r
  end
  return 0
end
`;

/*
 * GCRA take of n tokens as one Lua script: read, decide and write happen atomically in Redis, so
 * gateways sharing a Redis share one bucket with no read-then-write race. Same exact arithmetic as
 * ./gcra.ts (TAT as whole ms + a fraction in 1/limit ms). Lua 5.1 numbers are doubles: every value
 * stays an integer below 2^53 under gcraPolicy's bounds.
 *
 * Value: "<tatMs>:<tatFrac>:<limit>" (the limit the fraction is counted in; a reload that changes the
 * limit rescales it, rounding up). Written only when a take is admitted, with PX = ms until the
 * bucket is full again, which is exactly when the entry becomes the same as no entry.
 *
 * Time: Redis's own clock (TIME), so gateways whose clocks disagree still share one timeline; ARGV[4]
 * non-empty replaces it with the caller's clock (tests; the PX expiry still runs on Redis's clock).
 *
 * KEYS[1] bucket; ARGV limit, windowMs, n, now-or-empty.
 * Returns { admitted (0|1), remaining, resetMs, retryAfterMs }.
 */
export const GCRA_TAKE_LUA = `${BUCKET_PRELUDE_LUA}local n = tonumber(ARGV[3])
local f = tatFrac + n * stepFrac
local carry = math.floor(f / limit)
local newMs = tatMs + n * stepMs + carry
local newFrac = f - carry * limit
local ahead = newMs - now
local admitted = 0
local retryAfter = 0
if ahead < window or (ahead == window and newFrac == 0) then
  admitted = 1
  tatMs, tatFrac = newMs, newFrac
  local ttl = tatMs - now
  if tatFrac > 0 then ttl = ttl + 1 end
  redis.call('SET', KEYS[1], string.format('%d:%d:%d', tatMs, tatFrac, limit), 'PX', ttl)
else
  retryAfter = newMs - window - now
  if newFrac > 0 then retryAfter = retryAfter + 1 end
  if retryAfter < 0 then retryAfter = 0 end
end
return { admitted, remaining(), reset(), retryAfter }
`;

export const GCRA_TAKE_SHA1 = createHash('sha1').update(GCRA_TAKE_LUA).digest('hex');

/*
 * `count` takes of one token each, decided one after another in one call: what `count` concurrent
 * requests of one bucket would get from `count` calls of GCRA_TAKE_LUA with n = 1 in a row (same
 * arithmetic, same clock reading). Once one is denied the rest are too (same instant), so the loop
 * stops there. The entry is written once, after the last admitted take.
 *
 * KEYS[1] bucket; ARGV limit, windowMs, count, now-or-empty.
 * Returns { admitted k, then remaining and resetMs after each admitted take (2k values), then the
 * denied takes' remaining, resetMs and retryAfterMs }.
 */
export const GCRA_TAKE_EACH_LUA = `${BUCKET_PRELUDE_LUA}local count = tonumber(ARGV[3])
local out = { 0 }
local admitted = 0
local retryAfter = 0
for i = 1, count do
  local f = tatFrac + stepFrac
  local carry = math.floor(f / limit)
  local newMs = tatMs + stepMs + carry
  local newFrac = f - carry * limit
  local ahead = newMs - now
  if ahead < window or (ahead == window and newFrac == 0) then
    tatMs, tatFrac = newMs, newFrac
    admitted = admitted + 1
    out[#out + 1] = remaining()
    out[#out + 1] = reset()
  else
    retryAfter = newMs - window - now
    if newFrac > 0 then retryAfter = retryAfter + 1 end
    if retryAfter < 0 then retryAfter = 0 end
    break
  end
end
out[1] = admitted
if admitted > 0 then
  local ttl = tatMs - now
  if tatFrac > 0 then ttl = ttl + 1 end
  redis.call('SET', KEYS[1], string.format('%d:%d:%d', tatMs, tatFrac, limit), 'PX', ttl)
end
out[#out + 1] = remaining()
out[#out + 1] = reset()
out[#out + 1] = retryAfter
return out
`;

export const GCRA_TAKE_EACH_SHA1 = createHash('sha1').update(GCRA_TAKE_EACH_LUA).digest('hex');
