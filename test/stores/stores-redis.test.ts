// The `redis` store (src/stores/redis-store.ts) against a real redis-server of the test's own
// (test/helpers/redis-server.ts): one atomic limit for every client, every key with a TTL, Buffers
// exactly, and a dead or hung Redis costing at most the command timeout.
import { createHash, randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { createClient } from 'redis';
import t from 'tap';
import { StoreError } from '../../src/stores/store-errors.js';
import { type GcraState, type RateDecision, gcraDecide, gcraPolicy } from '../../src/stores/gcra.js';
import { RedisStore, type RedisStoreOptions } from '../../src/stores/redis-store.js';
import { type RedisServer, findRedisServer, startRedisServer } from '../helpers/redis-server.js';
import { findFreePort } from '../../src/cluster/free-port.js';

const servers: RedisServer[] = [];
t.teardown(async () => {
  for (const server of servers) await server.stop();
});

async function server(): Promise<RedisServer> {
  const started = await startRedisServer();
  servers.push(started);
  return started;
}

function store(url: string, options: Partial<RedisStoreOptions> = {}): RedisStore {
  return new RedisStore({
    name: 'shared',
    url,
    keyPrefix: 'gw:',
    connectTimeoutMs: 1000,
    commandTimeoutMs: 200,
    connectAttempts: 3,
    breakerFailures: 5,
    breakerResetMs: 1000,
    ...options,
  });
}

async function admin(url: string) {
  const client = createClient({ url });
  client.on('error', () => {});
  await client.connect();
  return client;
}

/** Elapsed ms of a call that must fail, and its StoreError. */
async function failure(call: () => Promise<unknown>): Promise<{ ms: number; error: StoreError }> {
  const started = performance.now();
  try {
    await call();
  } catch (error) {
    if (!(error instanceof StoreError)) throw error;
    return { ms: performance.now() - started, error };
  }
  throw new Error('expected a StoreError');
}

/** How a call ends before any I/O can happen (a setImmediate): its StoreError code, or 'pending'. */
async function beforeAnyIo(call: () => Promise<unknown>): Promise<string> {
  const outcome = call().then(
    () => 'resolved',
    (error: unknown) => (error instanceof StoreError ? error.code : String(error)),
  );
  return Promise.race([outcome, new Promise<string>((resolve) => setImmediate(() => resolve('pending')))]);
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

t.test('without redis-server the Redis tests fail, saying what to install (they are not skipped)', async (t) => {
  t.throws(() => findRedisServer(['/nonexistent/bin']), /redis-server not found \(looked in \/nonexistent\/bin\).*apt-get install -y redis-server/);
  t.match(findRedisServer(), /redis-server$/, 'found here');
});

t.test('the Lua script decides exactly as src/stores/gcra.ts (caller clock, random arrivals)', async (t) => {
  const redis = await server();
  let now = 1_767_225_600_000;
  const shared = store(redis.url, { clock: () => now, commandTimeoutMs: 5000 });
  t.teardown(() => shared.close());
  await shared.settled();
  const seen = { admitted: 0, denied: 0 };
  let run = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 40 }),
      fc.integer({ min: 0, max: 120_000 }),
      fc.array(fc.record({ gap: fc.nat(), n: fc.nat() }), { minLength: 10, maxLength: 40 }),
      async (limit, extraMs, events) => {
        // Keys expire on Redis's real clock: with an emission interval of 10 s or more, no key this
        // test writes can expire while it runs, so the virtual clock alone decides.
        const windowMs = 10_000 * limit + extraMs;
        const policy = gcraPolicy(limit, windowMs);
        const state: GcraState = { tatMs: 0, tatFrac: 0 };
        const key = `differential:${run++}`;
        const step = Math.max(1, Math.ceil(windowMs / limit));
        for (const event of events) {
          now += event.gap % (3 * step);
          const n = 1 + (event.n % limit);
          const want = gcraDecide(state, policy, now, n);
          const got = await shared.take(key, policy, Infinity, n);
          seen[got.admitted ? 'admitted' : 'denied']++;
          if (JSON.stringify(got) !== JSON.stringify(want)) throw new Error(`${limit}/${windowMs} take ${n}: redis ${JSON.stringify(got)}, gcra.ts ${JSON.stringify(want)}`);
        }
      },
    ),
    { numRuns: 80 },
  );
  t.ok(seen.admitted > 300 && seen.denied > 300, `compared ${seen.admitted} admissions and ${seen.denied} denials`);
});

t.test('concurrent single takes of one bucket are coalesced, and decided as one call each would decide them', async (t) => {
  const redis = await server();
  let now = 1_767_225_600_000;
  const shared = store(redis.url, { clock: () => now, commandTimeoutMs: 5000 });
  t.teardown(() => shared.close());
  await shared.settled();
  let run = 0;
  let takes = 0;
  const commandsBefore = shared.stats().commands;
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 60 }),
      fc.array(fc.record({ gap: fc.nat({ max: 30_000 }), burst: fc.integer({ min: 1, max: 120 }), otherPolicy: fc.boolean() }), { minLength: 1, maxLength: 6 }),
      async (limit, bursts) => {
        const policy = gcraPolicy(limit, 10_000 * limit);
        // A reload can change the policy while takes of the old one wait: never decided together. (Same
        // limit, so the stored fraction needs no rescaling and one GcraState models the bucket.)
        const other = gcraPolicy(limit, 10_000 * limit + 5_000);
        const key = `coalesced:${run++}`;
        const state: GcraState = { tatMs: 0, tatFrac: 0 };
        for (const burst of bursts) {
          now += burst.gap;
          const policies = Array.from({ length: burst.burst }, (_, i) => (burst.otherPolicy && i % 3 === 2 ? other : policy));
          const before = shared.stats().commands;
          const got = await Promise.all(policies.map((p) => shared.take(key, p)));
          const commands = shared.stats().commands - before;
          // The first goes alone at once; the rest wait for it and go together.
          if (!burst.otherPolicy && commands !== Math.min(burst.burst, 2)) throw new Error(`${burst.burst} takes in ${commands} commands`);
          takes += burst.burst;
          // Arrival order is call order; both policies take from the one stored bucket, as in Redis.
          for (let i = 0; i < policies.length; i++) {
            const p = policies[i]!;
            const want = gcraDecide(state, p, now, 1);
            if (JSON.stringify(got[i]) !== JSON.stringify(want)) throw new Error(`take ${i} of ${burst.burst} (window ${p.windowMs}): redis ${JSON.stringify(got[i])}, gcra.ts ${JSON.stringify(want)}`);
          }
        }
      },
    ),
    { numRuns: 60 },
  );
  t.comment(`${takes} takes in ${shared.stats().commands - commandsBefore} commands`);
});

t.test('two gateways on one Redis share one limit exactly under concurrency; every key has a TTL', async (t) => {
  const redis = await server();
  const a = store(redis.url, { commandTimeoutMs: 5000 });
  const b = store(redis.url, { commandTimeoutMs: 5000 });
  const inspect = await admin(redis.url);
  t.teardown(async () => {
    await a.close();
    await b.close();
    await inspect.close();
  });
  await Promise.all([a.settled(), b.settled()]);
  t.equal(a.state().state, 'ready');
  const policy = gcraPolicy(50, 600_000); // one token per 12 s: nothing refills during the test
  const takes: Array<Promise<RateDecision>> = [];
  for (let i = 0; i < 400; i++) takes.push((i % 2 === 0 ? a : b).take('ip:203.0.113.7', policy));
  const decisions = await Promise.all(takes);
  t.equal(decisions.filter((d) => d.admitted).length, 50, '50 of 400 admitted');
  const denied = decisions.find((d) => !d.admitted)!;
  t.equal(denied.remaining, 0);
  t.ok(denied.retryAfterMs > 11_000 && denied.retryAfterMs <= 12_000, `retry after ${denied.retryAfterMs} ms`);
  t.ok(denied.resetMs > 599_000 && denied.resetMs <= 600_000, `full again in ${denied.resetMs} ms`);

  for (let i = 1; i < 30; i++) await a.take(`ip:198.51.100.${i}`, gcraPolicy(10, 10_000));
  const takenAt = performance.now();
  await a.take('ip:198.51.100.0', gcraPolicy(10, 10_000));
  await b.take('x'.repeat(5000), policy);
  await a.set('cache:/a', Buffer.from('body'), 60_000);
  const keys: string[] = [];
  for await (const batch of inspect.scanIterator({ MATCH: 'gw:*', COUNT: 100 })) keys.push(...batch);
  t.equal(keys.length, 1 + 30 + 1 + 1, 'buckets and the cached value, all under the prefix');
  for (const key of keys) {
    const ttl = await inspect.pTTL(key);
    if (!(ttl > 0)) t.fail(`${key} has no TTL (${ttl})`);
  }
  const oneTaken = await inspect.pTTL(`gw:rl:~sha256:${createHash('sha256').update('ip:198.51.100.0').digest('hex')}`);
  const since = Math.ceil(performance.now() - takenAt);
  t.ok(oneTaken >= 1000 - since - 1 && oneTaken <= 1000, `one token of 10 per 10 s expires when full again: ${oneTaken} ms, read ${since} ms after`);
  t.ok(keys.every((key) => key.length < 100), 'a 5,000-character key is stored as a digest');
});

t.test("a bucket's Redis key is a digest: a header value (an API key, a token) is never readable from Redis", async (t) => {
  const redis = await server();
  const limits = store(redis.url, { commandTimeoutMs: 5000 });
  const inspect = await admin(redis.url);
  t.teardown(async () => {
    await limits.close();
    await inspect.close();
  });
  await limits.settled();
  const policy = gcraPolicy(2, 60_000);
  const key = 'h|GET /a|h:sk_live_SECRET_alice';
  t.ok((await limits.take(key, policy)).admitted);
  t.ok((await limits.take(key, policy)).admitted);
  t.notOk((await limits.take(key, policy)).admitted, 'still one bucket: the third take of two is refused');
  t.ok((await limits.take('h|GET /a|h:sk_live_SECRET_bob', policy)).admitted, 'another value, another bucket');
  const keys: string[] = [];
  for await (const batch of inspect.scanIterator({ MATCH: '*', COUNT: 100 })) keys.push(...batch);
  t.equal(keys.length, 2);
  t.notOk(keys.some((k) => k.includes('SECRET')), `no value in a key name: ${keys.join(', ')}`);
  t.notOk(keys.some((k) => k.includes('sk_live')));
});

t.test('get/set/delete round-trip Buffers exactly, with their TTL', async (t) => {
  const redis = await server();
  const kv = store(redis.url, { commandTimeoutMs: 5000 });
  t.teardown(() => kv.close());
  await kv.settled();
  const values = [Buffer.alloc(0), Buffer.from([0, 255, 0xc3, 0x28, 13, 10]), randomBytes(1 << 20)];
  for (const [i, value] of values.entries()) {
    await kv.set(`v${i}`, value, 60_000);
    const back = await kv.get(`v${i}`);
    t.ok(back !== null && Buffer.compare(back, value) === 0, `${value.length} bytes back exactly`);
  }
  t.equal(await kv.get('missing'), null);
  t.equal(await kv.delete('v1'), true);
  t.equal(await kv.delete('v1'), false);
  t.equal(await kv.get('v1'), null);
  await kv.set('short', Buffer.from('x'), 50);
  await new Promise((resolve) => setTimeout(resolve, 120));
  t.equal(await kv.get('short'), null, 'gone after its TTL');
  await t.rejects(kv.set('bad', Buffer.from('x'), 0), RangeError);
});

t.test('a Redis that lost its scripts (SCRIPT FLUSH) still decides: EVALSHA falls back to EVAL', async (t) => {
  const redis = await server();
  const shared = store(redis.url, { commandTimeoutMs: 5000 });
  const inspect = await admin(redis.url);
  t.teardown(async () => {
    await shared.close();
    await inspect.close();
  });
  await shared.settled();
  const policy = gcraPolicy(2, 60_000);
  t.ok((await shared.take('k', policy)).admitted);
  await inspect.scriptFlush();
  const before = shared.stats().commands;
  t.ok((await shared.take('k', policy)).admitted, 'decided after the flush');
  t.equal(shared.stats().commands - before, 2, 'EVALSHA, then EVAL');
  t.notOk((await shared.take('k', policy)).admitted);
  t.equal(shared.stats().errors, 0, 'NOSCRIPT is not an error');
});

t.test('settled(): after the first answer, or once the connection attempts are spent', async (t) => {
  const redis = await server();
  const up = store(redis.url);
  t.equal(up.state().state, 'connecting');
  await up.settled();
  t.same(up.state(), { state: 'ready', breaker: 'closed', lastError: null, reason: null });
  await up.close();

  const stopped = await server();
  await stopped.stop(); // a port where nothing listens
  const down = store(stopped.url, { connectAttempts: 3 });
  t.teardown(() => down.close());
  const started = Date.now();
  await down.settled();
  t.ok(Date.now() - started < 2000, `settled after 3 attempts in ${Date.now() - started} ms`);
  t.equal(down.state().state, 'down');
  t.match(down.state().lastError, /ECONNREFUSED/);
  t.equal(await beforeAnyIo(() => down.take('k', gcraPolicy(1, 1000))), 'offline', 'fails at once when not connected');
});

t.test('settled() does not wait for ever on a Redis that accepts connections but does not answer', async (t) => {
  const redis = await server();
  const pauser = await admin(redis.url);
  t.teardown(() => pauser.close());
  await pauser.sendCommand(['CLIENT', 'PAUSE', '4000', 'ALL']);
  const hung = store(redis.url, { connectTimeoutMs: 200, commandTimeoutMs: 50, connectAttempts: 2 });
  t.teardown(() => hung.close());
  const started = Date.now();
  await hung.settled();
  const took = Date.now() - started;
  // The bound is the settle deadline (2 attempts of connect + command timeout, and 1 s), with 500 ms for a busy host's late timers.
  t.ok(took <= 2 * (200 + 50) + 1000 + 500, `settled in ${took} ms`);
  t.equal(hung.state().state, 'down');
  t.ok(hung.state().lastError !== null, `last error: ${hung.state().lastError}`);

  // With a database in the URL the handshake itself (SELECT) hangs, and only the deadline settles it.
  const handshake = store(`${redis.url}/1`, { connectTimeoutMs: 200, commandTimeoutMs: 50, connectAttempts: 2 });
  t.teardown(() => handshake.close());
  const again = Date.now();
  await handshake.settled();
  const tookToo = Date.now() - again;
  t.ok(tookToo >= 2 * (200 + 50) + 1000 - 20 && tookToo <= 2 * (200 + 50) + 1000 + 500, `settled at the deadline: ${tookToo} ms`);
  t.equal(handshake.state().state, 'down');
  t.match(handshake.state().lastError, /no answer within 1500 ms/);
});

t.test('Redis killed mid-test: each take fails within the timeout, the breaker then fails fast without the network, the limit applies again once Redis is back', async (t) => {
  const redis = await server();
  const commandTimeoutMs = 50;
  const shared = store(redis.url, { commandTimeoutMs, breakerFailures: 3, breakerResetMs: 300 });
  t.teardown(() => shared.close());
  await shared.settled();
  const policy = gcraPolicy(5, 600_000);
  // On a loaded host a live Redis can take longer than 50 ms to answer (seen once in CI): the take before
  // the kill may be tried again, twice at most so that the breaker (3 failures) stays closed.
  let admitted = false;
  for (let i = 0; i < 3 && !admitted; i++) admitted = await shared.take('k', policy).then((decision) => decision.admitted, () => false);
  t.ok(admitted, 'a take is admitted while Redis runs');

  await redis.kill();
  const codes: string[] = [];
  for (let i = 0; i < 6; i++) {
    const { ms, error } = await failure(() => shared.take('k', policy));
    codes.push(error.code);
    // At most the command timeout, with room for a busy host's late timer: far below connectTimeoutMs (1 s).
    t.ok(ms <= commandTimeoutMs + 250, `take ${i} failed (${error.code}) in ${ms.toFixed(1)} ms`);
  }
  t.equal(shared.state().state, 'down');
  t.equal(shared.stats().breakerOpens, 1, 'the breaker opened');
  const sent = shared.stats().commands;
  for (let i = 0; i < 20; i++) {
    const outcome = await beforeAnyIo(() => shared.take('k', policy));
    if (outcome !== 'breaker-open' && outcome !== 'offline') t.fail(`take ${i}: ${outcome}, not a failure before any I/O`);
  }
  t.equal(shared.stats().commands, sent, 'no command sent while open or disconnected');

  await redis.restart();
  await until('the store to answer again', async () => {
    try {
      await shared.take('probe', policy);
      return true;
    } catch {
      return false;
    }
  });
  t.equal(shared.state().state, 'ready');
  // The restarted Redis kept nothing (no persistence): a fresh bucket, and the limit holds again.
  const decisions = await Promise.all(Array.from({ length: 12 }, () => shared.take('k', policy)));
  t.equal(decisions.filter((d) => d.admitted).length, 5, '5 of 12 after the outage');
});

t.test('a hung Redis (CLIENT PAUSE) costs each take at most the command timeout, or the caller\'s shorter budget', async (t) => {
  const redis = await server();
  // 300 ms: a busy host's late timers stay well clear of both the caller's 20 ms and the 2.5 s pause.
  const commandTimeoutMs = 300;
  const shared = store(redis.url, { commandTimeoutMs, breakerFailures: 3, breakerResetMs: 400 });
  const pauser = await admin(redis.url);
  t.teardown(async () => {
    await shared.close();
    await pauser.close();
  });
  await shared.settled();
  const policy = gcraPolicy(100, 600_000);
  t.ok((await shared.take('k', policy)).admitted);

  await pauser.sendCommand(['CLIENT', 'PAUSE', '2500', 'ALL']);
  const short = await failure(() => shared.take('k', policy, 20));
  t.equal(short.error.code, 'timeout');
  t.ok(short.ms >= 15 && short.ms < commandTimeoutMs - 50, `caller budget 20 ms: failed in ${short.ms.toFixed(1)} ms, well before the command timeout (${commandTimeoutMs} ms)`);
  for (let i = 0; i < 2; i++) {
    const { ms, error } = await failure(() => shared.take('k', policy));
    t.equal(error.code, 'timeout');
    t.ok(ms >= commandTimeoutMs - 5 && ms <= commandTimeoutMs + 250, `timed out in ${ms.toFixed(1)} ms (command timeout ${commandTimeoutMs} ms; the pause lasts 2500 ms)`);
  }
  t.equal(await beforeAnyIo(() => shared.take('k', policy)), 'breaker-open', 'then fails fast, before any I/O');
  t.equal(shared.stats().timeouts, 3);

  await until('Redis to answer after the pause', async () => {
    try {
      return (await shared.take('k', policy)).admitted;
    } catch {
      return false;
    }
  });
  t.equal(shared.state().state, 'ready');
  const remaining = (await shared.take('k', policy)).remaining;
  const takesSent = shared.stats().commands - 5 - shared.stats().probes; // all but the five SCRIPT LOADs at connect and the store's probes
  t.equal(remaining, 100 - takesSent, `every take sent ran once, those that timed out included (${takesSent} sent)`);
});

t.test('a Redis that refuses every write (a READONLY replica) is failing, with its reply; the breaker stays closed; ready again by itself', async (t) => {
  const redis = await server();
  const shared = store(redis.url, { breakerFailures: 3, breakerResetMs: 200 });
  const control = await admin(redis.url);
  t.teardown(async () => {
    await shared.close();
    await control.close();
  });
  await shared.settled();
  const policy = gcraPolicy(100, 600_000);
  t.ok((await shared.take('k', policy)).admitted);

  // A replica of a primary that is not there: it answers, and refuses every write.
  const nowhere = await findFreePort('127.0.0.1');
  await control.sendCommand(['REPLICAOF', '127.0.0.1', String(nowhere)]);
  for (let i = 0; i < 3; i++) {
    const { error } = await failure(() => shared.take('k', policy));
    t.equal(error.code, 'server-error');
    t.match(error.detail, /^READONLY You can't write against a read only replica/, `take ${i}: the reply itself`);
    if (i < 2) t.equal(shared.state().state, 'ready', `ready after ${i + 1} error replies (breakerFailures 3)`);
  }
  t.equal(await shared.get('a'), null, 'reads still work on the replica');
  const failing = shared.state();
  t.match(failing, { state: 'failing', breaker: 'closed', reason: /^EVALSHA: READONLY You can't write against a read only replica/ });
  t.match(shared.stats(), { errorReplies: 3, breakerOpens: 0 });

  await control.sendCommand(['REPLICAOF', 'NO', 'ONE']);
  const started = Date.now();
  await until('the store to be ready without a take', async () => shared.state().state === 'ready', 5000);
  t.pass(`ready ${Date.now() - started} ms after REPLICAOF NO ONE, without a take`);
  t.ok(shared.stats().probes >= 1, `the store probed by itself (${shared.stats().probes})`);
  t.equal(shared.state().reason, null);
  t.ok((await shared.take('k', policy)).admitted);
});

t.test('a store down after an outage shows ready once Redis is back, with no take to probe it', async (t) => {
  const redis = await server();
  // The breaker opens just before Redis comes back, and reconnecting takes less than its reset: only a
  // probe of the store's own can close it on a quiet gateway.
  const shared = store(redis.url, { commandTimeoutMs: 50, breakerFailures: 3, breakerResetMs: 3000 });
  t.teardown(() => shared.close());
  await shared.settled();
  const policy = gcraPolicy(5, 600_000);
  t.ok((await shared.take('k', policy)).admitted);
  await redis.kill();
  for (let i = 0; i < 3; i++) await failure(() => shared.take('k', policy));
  t.match(shared.state(), { state: 'down', breaker: 'open' });
  t.ok(shared.state().reason, `with what opened the breaker: ${shared.state().reason}`);
  await redis.restart();
  const started = Date.now();
  await until('the store to be ready without a take', async () => shared.state().state === 'ready', 8000);
  t.pass(`ready ${Date.now() - started} ms after Redis answered again, without a take`);
  t.ok((await shared.take('k', policy)).admitted);
});
