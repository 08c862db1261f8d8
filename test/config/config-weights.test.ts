// upstreams[].weight is at most 1000000: two weights of 1e308 passed the checks and their sum overflowed
// to Infinity in the balancer. At the bound, weights still share the traffic as they say.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { MAX_WEIGHT } from '../../src/config/schema.js';
import { gateway } from '../helpers/cli.js';
import { httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

const endpoints = [{ method: 'GET', path: '/items/{id}' }];

t.test('gateway check refuses a weight over 1000000', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'specgate-weight-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'gateway.json');
  const upstreams = ['http://127.0.0.1:9', 'http://127.0.0.1:10'].map((serviceLocation) => ({ serviceType: 'static', serviceLocation, endpoints, weight: 1e308 }));
  writeFileSync(file, JSON.stringify({ port: 0, upstreams }));
  const { code, stderr } = await gateway('check', '--config', file);
  t.equal(code, 1);
  t.equal(
    stderr,
    `error: ${file}: /upstreams/0/weight: must be <= 1000000 (got 1e+308)\nerror: ${file}: /upstreams/1/weight: must be <= 1000000 (got 1e+308)\ngateway check: ${file} has 2 problem(s)\n`,
  );
});

t.test('weights at the bound share the traffic as they say', async (t) => {
  const a = await startUpstream(t, { name: 'a' });
  const b = await startUpstream(t, { name: 'b' });
  const c = await startUpstream(t, { name: 'c' });
  const upstreams = [
    { serviceType: 'static', serviceLocation: a.location, endpoints, weight: MAX_WEIGHT },
    { serviceType: 'static', serviceLocation: b.location, endpoints, weight: MAX_WEIGHT },
    { serviceType: 'static', serviceLocation: c.location, endpoints, weight: 1 },
  ];
  const gw = await startGateway(t, { config: testConfig(upstreams, { accessLog: { enabled: false } }), workers: 1, waitFor: (line) => line.msg === 'gateway operational' });
  for (let i = 0; i < 20; i++) t.equal((await httpRequest(gw.port, `/items/${i}`)).status, 200);
  t.same([a.total(), b.total(), c.total()], [10, 10, 0], 'the two equal weights alternate; weight 1 of 2000001 gets none of 20');
});
