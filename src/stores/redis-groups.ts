import { createHash } from 'node:crypto';

/**
 * Keys filed in groups, so that a group's keys go in one command (the response cache's every entry of
 * one URL: its variants, whatever their Vary values). A group is a set of full key names that lives as
 * long as its longest-lived member; a key that expires or is replaced alone stays in the set until the
 * group goes, which costs a DEL of nothing at most. Both scripts touch keys they are not given in
 * KEYS (the members): fine on one Redis server, which is what RedisStore speaks to. Not loaded at
 * connect as the rate limit's scripts are: the first EVALSHA of each on a server answers NOSCRIPT and
 * is sent again as EVAL, once per server (it keeps the script until it restarts or SCRIPT FLUSH).
 *
 * KEYS[1] the value's key, KEYS[2] the group's; ARGV[1] the value, ARGV[2] its TTL in ms.
 */
export const SET_IN_GROUP_LUA = `
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SADD', KEYS[2], KEYS[1])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
return 1
`;
export const SET_IN_GROUP_SHA1 = createHash('sha1').update(SET_IN_GROUP_LUA).digest('hex');

/** KEYS[1] the group's key. Deletes its members (in batches: unpack has a stack limit) and itself; how many members. */
export const DELETE_GROUP_LUA = `
local members = redis.call('SMEMBERS', KEYS[1])
for i = 1, #members, 1000 do
  redis.call('DEL', unpack(members, i, math.min(i + 999, #members)))
end
redis.call('DEL', KEYS[1])
return #members
`;
export const DELETE_GROUP_SHA1 = createHash('sha1').update(DELETE_GROUP_LUA).digest('hex');
