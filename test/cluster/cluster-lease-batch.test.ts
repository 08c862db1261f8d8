// rateLimit on the local store with many new keys at once, through the running gateway (2 workers, real
// IPC): each worker's acquires of one event-loop turn reach the primary's bank as one batch and its
// grants come back batched (src/cluster/lease-outbox.ts). Every key still gets its limit across both
// workers, never more.
import t from 'tap';
import { startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { rawRequest } from '../helpers/raw-http.js';

const KEYS = 60;
const PER_KEY = 5;
const LIMIT = 3;

const app = await startUpstream(t, { name: 'app' });
const gateway = await startGateway(t, {
  config: testConfig([{ serviceType: 'static', serviceLocation: app.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }], {
    accessLog: { enabled: false },
    // One token back every 60 s: none comes back while the test runs. A take that passes its slaMs is
    // let through (onStoreError allow): 10 s, so that on a busy machine the books decide, not the clock.
    middleware: [{ id: 'per-client', type: 'rateLimit', limit: LIMIT, windowMs: 60_000 * LIMIT, key: 'header:x-client', scope: 'global', slaMs: 10_000 }],
  }),
  waitFor: (line) => line.msg === 'gateway operational',
});

t.test(`${KEYS} new keys x ${PER_KEY} requests at once, each on a fresh connection: each key admitted its limit, never more`, async (t) => {
  // A fresh connection each: the kernel spreads them over both workers; /healthcheck first names the worker.
  const head = (path: string, extra = ''): string => `GET ${path} HTTP/1.1\r\nHost: gw\r\n${extra}\r\n`;
  const jobs: Array<{ key: string; i: number }> = [];
  for (let i = 0; i < PER_KEY; i++) for (let k = 0; k < KEYS; k++) jobs.push({ key: `client-${k}`, i });
  const results = await Promise.all(
    jobs.map(async ({ key, i }) => {
      const res = await rawRequest(gateway.port, head('/healthcheck') + head(`/items/${i}`, `X-Client: ${key}\r\n`), { responses: 2, waitMs: 10_000 });
      return { key, worker: res.responses[0]?.headers['x-gateway-worker']?.[0], status: res.responses[1]?.status };
    }),
  );
  const admitted = new Map<string, number>();
  const workers = new Map<string, Set<string | undefined>>();
  for (const { key, worker, status } of results) {
    if (status !== 200 && status !== 429) t.fail(`${key}: status ${status}`);
    if (status === 200) admitted.set(key, (admitted.get(key) ?? 0) + 1);
    if (!workers.has(key)) workers.set(key, new Set());
    workers.get(key)!.add(worker);
  }
  // Never more than the limit; at most one less (docs/reference/stores.md: a lease in flight, rarely).
  const keys = [...Array(KEYS).keys()].map((k) => `client-${k}`);
  const over = keys.filter((key) => (admitted.get(key) ?? 0) > LIMIT);
  const under = keys.filter((key) => (admitted.get(key) ?? 0) < LIMIT - 1);
  const show = (list: string[]): string => list.map((k) => `${k}: ${admitted.get(k) ?? 0}`).join(', ');
  t.same(over, [], `no key admitted more than ${LIMIT} times (${show(over)})`);
  t.same(under, [], `no key admitted fewer than ${LIMIT - 1} times (${show(under)})`);
  t.comment(`${keys.filter((key) => admitted.get(key) === LIMIT).length} of ${KEYS} keys admitted exactly ${LIMIT} times`);
  const both = [...workers.values()].filter((set) => set.size === 2).length;
  t.ok(both >= KEYS / 2, `keys asked through both workers: ${both} of ${KEYS}`);
});

t.test("a header holding a client's address spends a bucket of its own, not that client's; an empty one counts as none", async (t) => {
  const ask = async (extra: string): Promise<number | undefined> =>
    (await rawRequest(gateway.port, `GET /items/k HTTP/1.1\r\nHost: gw\r\n${extra}\r\n`, { responses: 1, waitMs: 10_000 })).responses[0]?.status;
  // The client's own (loopback) address in the header, one more time than the limit.
  const spoofed: Array<number | undefined> = [];
  for (let i = 0; i <= LIMIT; i++) spoofed.push(await ask('X-Client: 127.0.0.1\r\n'));
  t.same(spoofed, [...Array(LIMIT).fill(200), 429], 'the header value has its own bucket');
  // The address's bucket is untouched: without the header, or with an empty one, the limit is still whole.
  const own: Array<number | undefined> = [];
  for (let i = 0; i <= LIMIT; i++) own.push(await ask(i % 2 === 0 ? '' : 'X-Client:\r\n'));
  t.same(own, [...Array(LIMIT).fill(200), 429], "the address's own bucket, shared by no header value");
});
