import { createHash } from 'node:crypto';

/**
 * Keys filed in groups, so that a group's keys go in one command (the response cache's every entry of
 * one URL: its variants, whatever their Vary values). A group is a set of full key names that lives as
 * long as its longest-lived member; a key that expires or is replaced alone stays in the set until the
 * group goes, which costs a DEL of nothing at most. A key is read only while it is filed in its group
 * (GET_IN_GROUP_LUA), so whatever Redis evicts, deleteGroup leaves nothing readable. The scripts
 * touch keys they are not given in KEYS (the members): fine on one Redis server, which is what
 * RedisStore speaks to. Loaded at connect with the rate limit's scripts.
 *
 * Generations: each deleteGroup counts one more in the group's slot of one hash (GROUP_SLOTS fields,
 * so bounded whatever the number of groups; groups that share a slot share a count). A value read
 * with its group's generation and written back only if the generation has not moved cannot outlive a
 * deleteGroup that came between the two: the response cache's answer fetched while its URL was
 * invalidated elsewhere is not stored. A shared slot only ever makes a write be refused that could
 * have been let in, never the other way.
 *
 * The hash may be evicted too, and made again by the next script, its counts back at nothing: a
 * generation read before and a write after would then match, and an answer that predates a
 * deleteGroup be stored. So a generation is a base plus the slot's count, the base being Redis's clock
 * in µs when the hash was made (field `base`, set by whichever script finds the hash without one): a
 * hash made again has a later base, and a generation read before never matches one after, since each
 * deleteGroup takes Redis more than a µs, so no slot counts as far as the clock moved meanwhile. A
 * write that finds no base is refused.
 */

/** Lua: gives `base` (the generations hash's, read into it, nil when it has none) a value, and the hash that base. */
const ENSURE_BASE = (hash: string): string => `if not base then
  local time = redis.call('TIME')
  base = time[1] .. string.format('%06d', tonumber(time[2]))
  redis.call('HSET', ${hash}, 'base', base)
end`;

/** Slots of the generations hash. */
export const GROUP_SLOTS = 65536;

/** The slot of `group` in the generations hash (FNV-1a of its UTF-16 code units). */
export function groupSlot(group: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < group.length; i++) hash = Math.imul(hash ^ group.charCodeAt(i), 0x01000193);
  return (hash >>> 0) % GROUP_SLOTS;
}

/**
 * KEYS[1] the value's key, KEYS[2] its group's, KEYS[3] the generations hash; ARGV[1] the group's slot.
 * {value or nil, the hash's base, the slot's count}: the generation is base + count.
 *
 * A value is read only while it is filed in its group: a Redis whose maxmemory-policy evicts (allkeys-lru, the usual for a cache) may evict the group and keep the value
 * (before, every hit read the value and nothing read the group), and deleteGroup, finding no group,
 * would leave the value to be served. Unfiled, it is a miss, and the answer fetched again is filed
 * anew. The alternatives: touching the group on each read only makes its eviction rarer (LRU is
 * sampled, allkeys-random ignores use); keeping a URL's values as fields of one hash, evicted whole,
 * needs per-field expiry (Redis 7.4). The check is one SISMEMBER of a value that was found, and it
 * keeps the group as recently used as its most read value.
 */
export const GET_IN_GROUP_LUA = `
local value = redis.call('GET', KEYS[1])
if value and redis.call('SISMEMBER', KEYS[2], KEYS[1]) == 0 then value = false end
local generation = redis.call('HMGET', KEYS[3], 'base', ARGV[1])
local base = generation[1]
${ENSURE_BASE('KEYS[3]')}
return {value, base, generation[2] or '0'}
`;
export const GET_IN_GROUP_SHA1 = createHash('sha1').update(GET_IN_GROUP_LUA).digest('hex');

/**
 * KEYS[1] the value's key, KEYS[2] the group's, KEYS[3] the generations hash; ARGV[1] the value,
 * ARGV[2] its TTL in ms, ARGV[3] the group's slot, ARGV[4] the generation the value was read at ('' :
 * whatever it is now). 1 when stored, 0 when the generation moved (nothing written).
 */
export const SET_IN_GROUP_LUA = `
if ARGV[4] ~= '' then
  local generation = redis.call('HMGET', KEYS[3], 'base', ARGV[3])
  if not generation[1] or tonumber(generation[1]) + tonumber(generation[2] or '0') ~= tonumber(ARGV[4]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SADD', KEYS[2], KEYS[1])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
return 1
`;
export const SET_IN_GROUP_SHA1 = createHash('sha1').update(SET_IN_GROUP_LUA).digest('hex');

/**
 * KEYS[1] the group's key, KEYS[2] the generations hash; ARGV[1] the group's slot. Deletes the members
 * (in batches: unpack has a stack limit) and the group, and moves the slot's generation on; how many
 * members.
 */
export const DELETE_GROUP_LUA = `
local base = redis.call('HGET', KEYS[2], 'base')
${ENSURE_BASE('KEYS[2]')}
local members = redis.call('SMEMBERS', KEYS[1])
for i = 1, #members, 1000 do
  redis.call('DEL', unpack(members, i, math.min(i + 999, #members)))
end
redis.call('DEL', KEYS[1])
redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
return #members
`;
export const DELETE_GROUP_SHA1 = createHash('sha1').update(DELETE_GROUP_LUA).digest('hex');
