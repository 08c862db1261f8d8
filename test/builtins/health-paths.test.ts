// Built-in paths moved by config are served at the new paths; the old paths go to routing.
import t from 'tap';
import { httpRequest, startGateway, startUpstream, testConfig, untilWorkersAnswer } from '../helpers/gateway-process.js';

const upstream = await startUpstream(t, { name: 'app' });
const gateway = await startGateway(t, {
  config: testConfig(
    [
      {
        serviceType: 'static',
        serviceLocation: upstream.location,
        endpoints: [
          { method: 'GET', path: '/healthcheck' },
          { method: 'GET', path: '/ops/health' },
        ],
      },
    ],
    { paths: { healthcheck: '/ops/health', metrics: '/ops/metrics', spec: '/ops/spec' } },
  ),
  waitFor: (line) => line.msg === 'gateway operational',
});

t.test('the new paths serve the built-ins, winning over an upstream endpoint', async (t) => {
  // 'gateway operational' is logged as the primary pushes the ready report to the workers: a request
  // right after it may reach a worker that has not read the push yet (503 in one fresh-clone CI run).
  await untilWorkersAnswer(gateway.port, '/ops/health', { healthPath: '/ops/health' });
  const health = await httpRequest(gateway.port, '/ops/health');
  t.equal(health.status, 200);
  t.ok('buildInfo' in JSON.parse(health.body), 'the health report, not the upstream');
  t.equal(upstream.seen.get('GET /ops/health'), undefined, 'nothing forwarded');

  const metrics = await httpRequest(gateway.port, '/ops/metrics');
  t.equal(metrics.status, 200);
  t.ok('requests' in JSON.parse(metrics.body));

  const spec = await httpRequest(gateway.port, '/ops/spec');
  t.equal(spec.status, 200);
  t.equal(JSON.parse(spec.body).swagger, '2.0');
  t.ok(JSON.parse(spec.body).paths['/ops/health'], 'the spec describes the built-ins at their paths');
  const openapi3 = await httpRequest(gateway.port, '/ops/spec?format=openapi3');
  t.equal(openapi3.status, 200);
  t.match(JSON.parse(openapi3.body).openapi, /^3\.0\./);
});

t.test('the old paths are routed like any other path', async (t) => {
  const health = await httpRequest(gateway.port, '/healthcheck');
  t.equal(health.status, 200);
  t.same(JSON.parse(health.body).upstream, 'app', 'an upstream endpoint at the old path is reached');
  t.equal((await httpRequest(gateway.port, '/metrics')).status, 404);
  t.equal((await httpRequest(gateway.port, '/spec')).status, 404);
});

t.test('a built-in refuses other methods with 405', async (t) => {
  const res = await httpRequest(gateway.port, '/ops/health', { method: 'POST' });
  t.equal(res.status, 405);
  t.match(res.headers.allow, /GET/);
  t.match(res.headers['content-type'], /^application\/problem\+json/);
});
