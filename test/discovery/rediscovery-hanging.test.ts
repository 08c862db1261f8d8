// Re-discovery beside an upstream whose doc endpoint hangs (accepts the request, never answers): a
// change in another upstream's doc is routed after that upstream's next re-fetch, not once the
// hanging fetch and its retries gave up (fetchTimeoutMs × (retries + 1) plus back-off, 6.2 s here).
import t from 'tap';
import { httpRequest, startGateway, startUpstream, swaggerDoc, testConfig, type UpstreamOptions, untilWorkersAnswer } from '../helpers/gateway-process.js';

const REFRESH_MS = 300;
const FETCH_TIMEOUT_MS = 3000;

const usersOptions: UpstreamOptions = { name: 'users', spec: swaggerDoc('users', { '/users/{id}': ['GET'] }) };
const users = await startUpstream(t, usersOptions);
const stuckOptions: UpstreamOptions = { name: 'stuck', spec: swaggerDoc('stuck', { '/stuck/{id}': ['GET'] }) };
const stuck = await startUpstream(t, stuckOptions);

const gateway = await startGateway(t, {
  config: testConfig(
    [
      { serviceType: 'swagger2', serviceLocation: users.location },
      { serviceType: 'swagger2', serviceLocation: stuck.location },
    ],
    { discovery: { fetchTimeoutMs: FETCH_TIMEOUT_MS, retries: 1, backoffMs: 200, refreshIntervalMs: REFRESH_MS } },
  ),
  waitFor: (line) => line.msg === 'gateway operational',
});

t.test("a doc endpoint that hangs holds back no other upstream's change", async (t) => {
  t.equal((await httpRequest(gateway.port, '/stuck/1')).status, 200);
  // From now on the stuck upstream's doc requests get no answer.
  stuckOptions.holdSpec = new Promise<void>(() => {});
  const hanging = new Promise<void>((resolve) => {
    const onRequest = (req: { url?: string }): void => {
      if (req.url !== '/spec') return;
      stuck.server.off('request', onRequest);
      resolve();
    };
    stuck.server.prependListener('request', onRequest);
  });
  await hanging;
  // Well into the hanging fetch: a sweep of every upstream would now wait seconds for it.
  await new Promise((resolve) => setTimeout(resolve, 2 * REFRESH_MS));

  const changedAt = Date.now();
  usersOptions.spec = swaggerDoc('users', { '/users/{id}': ['GET'], '/orders': ['GET'] });
  await untilWorkersAnswer(gateway.port, '/orders', { status: 200, timeoutMs: 15_000, description: '/orders routed on both workers' });
  const tookMs = Date.now() - changedAt;
  t.ok(tookMs < FETCH_TIMEOUT_MS, `routed ${tookMs} ms after the change (interval ${REFRESH_MS} ms; one hanging fetch alone takes ${FETCH_TIMEOUT_MS} ms)`);
  t.equal((await httpRequest(gateway.port, '/stuck/1')).status, 200, 'the hanging upstream keeps its last known endpoints');
});
