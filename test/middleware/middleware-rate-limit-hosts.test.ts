// rateLimit with virtual hosts, through the running gateway (2 workers, the local store, fresh
// connections spread over both): scope "endpoint" keeps a bucket per host set, so a.test's clients
// do not spend b.test's quota for the same template; hosts served by the same upstreams share one;
// scope "global" stays one bucket per key across every host.
import t from 'tap';
import { httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

const a = await startUpstream(t, { name: 'a' });
const b = await startUpstream(t, { name: 'b' });
const endpoints = [
  { method: 'GET', path: '/y', 'x-disabled-middleware': ['global'] },
  { method: 'GET', path: '/g', 'x-disabled-middleware': ['limit'] },
];
/**
 * 3 a window long enough that nothing refills while the test runs, and an SLA out of the way of
 * the count (a take past slaMs is admitted by onStoreError "allow").
 */
const policy = { limit: 3, windowMs: 600_000, slaMs: 5000 };
const gateway = await startGateway(t, {
  config: testConfig(
    [
      { serviceType: 'static', serviceLocation: a.location, hosts: ['a.test', 'c.test'], endpoints },
      { serviceType: 'static', serviceLocation: b.location, hosts: ['b.test'], endpoints },
    ],
    {
      accessLog: { enabled: false },
      middleware: [
        { id: 'limit', type: 'rateLimit', ...policy },
        { id: 'global', type: 'rateLimit', scope: 'global', ...policy },
      ],
    },
  ),
  waitFor: (line) => line.msg === 'gateway operational',
  startTimeoutMs: 60_000,
});

async function statuses(host: string, path: string, count: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < count; i++) out.push((await httpRequest(gateway.port, path, { headers: { host } })).status);
  return out;
}

t.test('scope "endpoint": one bucket per host set', async (t) => {
  t.same(await statuses('a.test', '/y', 4), [200, 200, 200, 429], 'a.test spends its 3');
  t.same(await statuses('c.test', '/y', 1), [429], 'c.test, served by the same upstream, shares the bucket');
  t.same(await statuses('b.test', '/y', 4), [200, 200, 200, 429], "b.test has its own 3: a.test's requests did not spend them");
  t.same([a.seen.get('GET /y'), b.seen.get('GET /y')], [3, 3]);
});

t.test('scope "global": one bucket per key across the hosts', async (t) => {
  t.same(await statuses('a.test', '/g', 3), [200, 200, 200]);
  t.same(await statuses('b.test', '/g', 1), [429], "b.test's request counts against the same bucket");
});
