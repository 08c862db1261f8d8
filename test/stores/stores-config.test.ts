// `kvStores` config (src/stores/config.ts): the schema fragment with ajv as the gateway's loader runs
// it (defaults filled, bad entries refused), the URL checks, and createStores on a real Redis.
import { Ajv } from 'ajv';
import t from 'tap';
import { type KvStoresConfig, REDIS_STORE_DEFAULTS, createStores, kvStoreProblems, kvStoresSchema, redactedUrl } from '../../src/stores/config.js';
import { gcraPolicy } from '../../src/stores/gcra.js';
import { LeaseClient } from '../../src/stores/lease-client.js';
import { startRedisServer } from '../helpers/redis-server.js';

const validate = new Ajv({ allErrors: true, useDefaults: true }).compile({
  type: 'object',
  additionalProperties: false,
  properties: { kvStores: kvStoresSchema },
});

function check(config: unknown): { ok: boolean; config: unknown; errors: string[] } {
  const copy = structuredClone(config);
  const ok = validate(copy) as boolean;
  return { ok, config: copy, errors: (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`) };
}

t.test('defaults are filled in; an absent kvStores is {}', async (t) => {
  t.same(check({}).config, { kvStores: {} });
  const { ok, config } = check({ kvStores: { shared: { type: 'redis', url: 'redis://10.0.0.5:6379/0' } } });
  t.ok(ok);
  t.same(config, { kvStores: { shared: { type: 'redis', url: 'redis://10.0.0.5:6379/0', ...REDIS_STORE_DEFAULTS } } });
  t.same(REDIS_STORE_DEFAULTS, { keyPrefix: 'gw:', connectTimeoutMs: 1000, commandTimeoutMs: 50, connectAttempts: 3, breakerFailures: 5, breakerResetMs: 1000 });
});

t.test('refused: odd names, unknown keys, other types, missing url, bad numbers', async (t) => {
  const redis = { type: 'redis', url: 'redis://h:6379' };
  for (const [kvStores, why] of [
    [{ 'a b': redis }, 'space in a name'],
    [{ ['x'.repeat(65)]: redis }, 'name too long'],
    [{ shared: { ...redis, keyprefix: 'x' } }, 'unknown key'],
    [{ shared: { type: 'memcached', url: 'redis://h' } }, 'another type'],
    [{ shared: { type: 'redis' } }, 'no url'],
    [{ shared: { type: 'redis', url: 'http://h:6379' } }, 'not a redis URL'],
    [{ shared: { ...redis, commandTimeoutMs: 0 } }, 'a zero timeout'],
    [{ shared: { ...redis, breakerFailures: 1.5 } }, 'a fractional count'],
  ] as const) {
    const result = check({ kvStores });
    t.notOk(result.ok, `${why}: refused (${result.errors.join('; ')})`);
  }
});

t.test('every key of a Redis store has a description', async (t) => {
  const properties = kvStoresSchema.additionalProperties.properties as Record<string, { description?: string }>;
  for (const [key, schema] of Object.entries(properties)) t.ok((schema.description ?? '').length > 10, key);
  t.ok(kvStoresSchema.description.length > 10);
});

t.test('checks the schema does not make (reserved name, URL shape), with JSON pointers', async (t) => {
  const entry = (url: string) => ({ type: 'redis' as const, url, ...REDIS_STORE_DEFAULTS });
  t.same(kvStoreProblems({ a: entry('redis://h:6379/0'), b: entry('rediss://user:pw@h:6380'), c: entry('redis://h') }), []);
  t.same(kvStoreProblems({ 'x/y': entry('redis://h:6379/cache') }), [
    { pointer: '/kvStores/x~1y/url', reason: 'the path may only be a database number, e.g. "/0"; got "/cache"' },
  ]);
  t.match(kvStoreProblems({ a: entry('redis://') }), [{ pointer: '/kvStores/a/url' }]);
  t.match(kvStoreProblems({ a: entry('redis://h:6379/0?x=1') }), [{ reason: 'no query or fragment' }]);
  t.same(kvStoreProblems({ local: entry('redis://h') }), [
    { pointer: '/kvStores/local', reason: 'the name "local" is reserved for the instance\'s own store; choose another' },
  ]);
  t.equal(redactedUrl('redis://alice:s3cret@h:6379/2'), 'redis://h:6379/2');
});

t.test('createStores: local and a Redis store, by name; snapshot for health and metrics', async (t) => {
  const redis = await startRedisServer();
  const local = new LeaseClient({ send: () => {}, sweepIntervalMs: 0 });
  const kvStores: KvStoresConfig = { shared: { type: 'redis', url: redis.url, ...REDIS_STORE_DEFAULTS, commandTimeoutMs: 2000 } };
  const stores = await createStores(kvStores, { local });
  t.teardown(async () => {
    await stores.close();
    await redis.stop();
  });
  t.equal(stores.rateLimitStore('local'), local);
  t.equal(stores.rateLimitStore('nope'), undefined);
  t.equal(stores.keyValueStore('local'), undefined, 'no local key-value store here (the response cache keeps its own)');
  await stores.settled();
  const shared = stores.rateLimitStore('shared')!;
  const decision = await shared.take('ip:192.0.2.1', gcraPolicy(3, 60_000));
  t.same(decision, { admitted: true, remaining: 2, resetMs: 20_000, retryAfterMs: 0 });
  await stores.keyValueStore('shared')!.set('k', Buffer.from('v'), 1000);
  const snapshot = stores.snapshot();
  t.same(snapshot.local, { type: 'local', state: 'ready', lastError: null });
  // Five SCRIPT LOADs at connect, the take, the set.
  t.match(snapshot.shared, { type: 'redis', url: `${redis.url}`, state: 'ready', breaker: 'closed', lastError: null, stats: { commands: 7, errors: 0, timeouts: 0 } });
  await t.rejects(createStores({ local: kvStores.shared! }, { local }), /reserved/);
});
