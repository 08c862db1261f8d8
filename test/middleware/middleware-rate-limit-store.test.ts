// rateLimit when its store fails (docs/reference/rate-limit.md#store-failures): what the client gets with
// onStoreError allow and deny, against a real data plane. A store that does not answer and does not
// bound its own wait (the local store while the primary stalls) is failed by the rate limit before
// slaMs: "deny" must not become the pipeline's SLA skip, which lets the request through.
import t from 'tap';
import { Counters } from '../../src/metrics/counters.js';
import { buildPipeline, type MiddlewareConfig } from '../../src/middleware/registry.js';
import type { RateLimitStore } from '../../src/stores/types.js';
import { rawRequest } from '../helpers/raw-http.js';
import { storeLookup } from '../helpers/stores.js';
import { entry, startUpstream } from '../helpers/upstream-server.js';
import { planeInFrontOf } from '../helpers/data-plane.js';

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const plane = await planeInFrontOf(t, upstream.url, [entry('GET', '/items/{id}', upstream.url)]);

const failing: Record<string, RateLimitStore> = {
  throwing: {
    name: 'throwing',
    take: () => {
      throw new Error('store down');
    },
  },
  rejecting: { name: 'rejecting', take: () => Promise.reject(new Error('store down')) },
  // As the local store while the primary's lease bank does not answer: it does not bound its own wait.
  stalled: { name: 'stalled', take: () => new Promise(() => {}) },
};

function use(store: string, onStoreError: 'allow' | 'deny'): void {
  const config = { id: 'limit', type: 'rateLimit', slaMs: 200, limit: 5, windowMs: 10_000, key: 'ip', scope: 'endpoint', store, onStoreError } as MiddlewareConfig;
  plane.setPipeline(buildPipeline([config], { metrics: new Counters(), warn: () => {}, stores: storeLookup({ rateLimit: (name) => failing[name] }) }));
}

const get = async () => (await rawRequest(plane.port, 'GET /items/1 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 })).responses[0]!;

for (const store of Object.keys(failing)) {
  t.test(`store failing (${store}), onStoreError deny: 503 with Retry-After`, async (t) => {
    use(store, 'deny');
    const res = await get();
    t.equal(res.status, 503);
    t.same(res.headers['retry-after'], ['1'], 'the client is told when to try again');
    t.same(res.headers['ratelimit-policy'], ['"limit";q=5;w=10']);
    t.equal(res.headers['ratelimit'], undefined, 'no remaining quota is invented');
  });

  t.test(`store failing (${store}), onStoreError allow: admitted with the policy, no RateLimit`, async (t) => {
    use(store, 'allow');
    const res = await get();
    t.equal(res.status, 200);
    t.same(res.headers['ratelimit-policy'], ['"limit";q=5;w=10']);
    t.equal(res.headers['ratelimit'], undefined, 'the remaining quota is unknown');
    t.equal(res.headers['retry-after'], undefined);
  });
}

t.test('a store that never answers and does not bound its wait: deny answers 503 before slaMs, allow admits', async (t) => {
  const seen = upstream.requests.length;
  use('stalled', 'deny');
  const started = Date.now();
  const denied = await get();
  t.equal(denied.status, 503, 'deny: 503, not the SLA skip');
  t.ok(Date.now() - started < 1000, 'within about slaMs');
  t.equal(upstream.requests.length, seen, 'nothing reached the upstream');
  use('stalled', 'allow');
  t.equal((await get()).status, 200, 'allow: admitted');
});

t.test('RateLimit-Policy states a window that is not whole seconds rounded up (w is whole seconds)', async (t) => {
  for (const [windowMs, w] of [[500, 1], [1_500, 2], [2_000, 2]] as const) {
    const config = { id: 'limit', type: 'rateLimit', slaMs: 200, limit: 5, windowMs, key: 'ip', scope: 'endpoint', store: 'rejecting', onStoreError: 'allow' } as MiddlewareConfig;
    plane.setPipeline(buildPipeline([config], { metrics: new Counters(), warn: () => {}, stores: storeLookup({ rateLimit: (name) => failing[name] }) }));
    const res = await get();
    t.same(res.headers['ratelimit-policy'], [`"limit";q=5;w=${w}`], `windowMs ${windowMs}`);
  }
});
