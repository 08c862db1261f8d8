// A Redis that answers every write with an error reply (here a READONLY replica, as after a failover;
// OOM at maxmemory and MISCONF look the same) through a running gateway: the 503 says what Redis
// answered, the store is "failing" in /healthcheck and gateway_store_up is 0, one warning says so
// (not one per request), and once Redis takes writes again the store is back without any traffic.
import t from 'tap';
import { createClient } from 'redis';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { parsePrometheus, sampleValue } from '../helpers/prometheus.js';
import { findFreePort } from '../../src/cluster/free-port.js';

const redis = await startRedisServer();
t.teardown(() => redis.stop());
const app = await startUpstream(t, { name: 'app' });
const control = createClient({ url: redis.url });
control.on('error', () => {});
await control.connect();
t.teardown(() => control.quit().catch(() => {}));

const gateway = await startGateway(t, {
  config: testConfig([{ serviceType: 'static', serviceLocation: app.location, endpoints: [{ method: 'GET', path: '/limited/{id}' }] }], {
    accessLog: { enabled: false },
    kvStores: { shared: { type: 'redis', url: redis.url, keyPrefix: 'failtest:', commandTimeoutMs: 200, breakerFailures: 3, breakerResetMs: 300 } },
    middleware: [
      { id: 'limit', type: 'rateLimit', limit: 1000, windowMs: 60_000, store: 'shared', onStoreError: 'deny', slaMs: 300 },
      // Reads work on a replica: the cache's GETs succeed while every write fails.
      { id: 'cache', type: 'responseCache', store: 'shared', slaMs: 300 },
    ],
  }),
  workers: 2,
  waitFor: (l) => l.msg === 'gateway operational',
  startTimeoutMs: 60_000,
});

interface StoreHealth {
  state: string;
  reason?: string;
  lastError?: string;
}

async function storeHealth(): Promise<StoreHealth> {
  return (JSON.parse((await httpRequest(gateway.port, '/healthcheck')).body) as { kvStores: Record<string, StoreHealth> }).kvStores.shared!;
}

/** A sample of the store's in /metrics once it is `expected` (the metrics report trails the health report a little). */
async function storeSample(family: string, expected: (value: number) => boolean, description: string): Promise<number> {
  return eventually(
    async () => {
      const text = (await httpRequest(gateway.port, '/metrics', { headers: { accept: 'text/plain' } })).body;
      const value = sampleValue(parsePrometheus(text), family, family, { store: 'shared' });
      return value !== undefined && expected(value) ? value : undefined;
    },
    5000,
    50,
    description,
  );
}

const failingLines = () => gateway.lines.filter((l) => /^store "shared" answers with errors: /.test(String(l.msg)));

t.test('READONLY: 503 with the reply, failing in health and metrics, one warning', async (t) => {
  await eventually(async () => ((await storeHealth()).state === 'ready' ? true : undefined), 10_000, 50, 'the store ready');
  t.equal(await storeSample('gateway_store_up', (v) => v === 1, 'gateway_store_up 1'), 1);
  await control.sendCommand(['REPLICAOF', '127.0.0.1', String(await findFreePort('127.0.0.1'))]);

  // One at a time: concurrent takes of one bucket share a call, and it takes breakerFailures (3) error
  // replies on a worker to make its store failing; of 30 calls one worker gets at least 15.
  const answers = [];
  for (let i = 0; i < 30; i++) answers.push(await httpRequest(gateway.port, `/limited/${i}`));
  t.same([...new Set(answers.map((a) => a.status))], [503], 'onStoreError deny: every request 503');
  const detail = (JSON.parse(answers[0]!.body) as { detail: string }).detail;
  t.match(detail, /^the rate limit store of limit answers with errors: READONLY You can't write against a read only replica/, `the detail says what Redis answered: ${detail}`);

  const health = await eventually(async () => {
    const store = await storeHealth();
    return store.state === 'failing' ? store : undefined;
  }, 5000, 50, 'the store failing in /healthcheck');
  t.match(health.reason, /READONLY You can't write against a read only replica/, 'with the reply as its reason');
  t.equal(await storeSample('gateway_store_up', (v) => v === 0, 'gateway_store_up 0'), 0, 'gateway_store_up 0');
  const replies = await storeSample('gateway_store_error_replies_total', (v) => v >= 30, 'the error replies counted');
  t.pass(`gateway_store_error_replies_total ${replies}`);

  const warned = await eventually(async () => failingLines()[0], 5000, 50, 'the failing warning');
  t.match(warned, { level: 40, store: 'shared', state: 'failing', previous: 'ready', reason: /READONLY/ });
  for (let i = 0; i < 30; i++) await httpRequest(gateway.port, `/limited/more-${i}`);
  await new Promise((resolve) => setTimeout(resolve, 500));
  t.equal(failingLines().length, 1, 'one line for the change, not one per request');
});

t.test('writable again: back in health and metrics without traffic; one back line, without a reason', async (t) => {
  await control.sendCommand(['REPLICAOF', 'NO', 'ONE']);
  const started = Date.now();
  await eventually(async () => ((await storeHealth()).state === 'ready' ? true : undefined), 5000, 50, 'the store ready again without traffic');
  t.pass(`ready ${Date.now() - started} ms after REPLICAOF NO ONE, no request sent`);
  t.equal(await storeSample('gateway_store_up', (v) => v === 1, 'gateway_store_up 1'), 1, 'gateway_store_up 1 again');
  const back = await gateway.waitForLog((l) => l.msg === 'store "shared" is back', 5000, 'the back line');
  t.match(back, { level: 30, state: 'ready', previous: 'failing' });
  t.notOk('reason' in back, 'no stale reason on the back line');
  t.equal((await httpRequest(gateway.port, '/limited/after')).status, 200);
});
