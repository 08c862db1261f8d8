// One upstream declaring a template far deeper than routing allows (docs/reference/routing.md#path-templates)
// costs that endpoint only: the workers apply the table, every other endpoint routes, the gateway gets ready.
import t from 'tap';
import { httpRequest, startGateway, startUpstream, swaggerDoc, testConfig } from '../helpers/gateway-process.js';

const DEEP = '/many' + '/{p}'.repeat(3000);
const ok = { '200': { description: 'ok' } };

const good = await startUpstream(t, { name: 'good', spec: swaggerDoc('good', { '/good/{id}': ['GET'] }) });
const deep = await startUpstream(t, {
  name: 'deep',
  spec: { swagger: '2.0', info: { title: 'deep', version: '1' }, paths: { [DEEP]: { get: { responses: ok } }, '/shallow': { get: { responses: ok } } } },
});

const gateway = await startGateway(t, {
  config: testConfig([
    { serviceType: 'swagger2', serviceLocation: good.location, specPath: '/spec' },
    { serviceType: 'swagger2', serviceLocation: deep.location, specPath: '/spec' },
  ]),
  waitFor: (line) => line.msg === 'gateway operational',
  startTimeoutMs: 15_000,
});

t.test('the gateway gets ready and routes both upstreams, the deep template left out', async (t) => {
  const health = await httpRequest(gateway.port, '/healthcheck');
  t.equal(health.status, 200);
  const upstreams = (JSON.parse(health.body) as { upstreams: Array<{ serviceLocation: string; endpoints: number; problems?: Array<{ path: string; reason: string }> }> }).upstreams;
  const reported = upstreams.find((u) => u.serviceLocation === deep.location)!;
  t.equal(reported.endpoints, 1, 'the deep upstream keeps its other endpoint');
  t.match(reported.problems, [{ path: DEEP, reason: /^left out: 3001 path segments; at most 256 are routed/ }]);
  t.equal((await httpRequest(gateway.port, '/good/1')).status, 200);
  t.equal((await httpRequest(gateway.port, '/shallow')).status, 200);
  t.same(JSON.parse((await httpRequest(gateway.port, '/shallow')).body), { upstream: 'deep', method: 'GET', path: '/shallow' });
});

t.test('the primary logs the refused template, naming its upstream', async (t) => {
  const line = gateway.lines.find((l) => l.template === DEEP);
  t.ok(line, 'a log line names the template');
  t.equal(line?.upstream, deep.location);
  t.notOk(
    gateway.lines.some((l) => l.msg?.startsWith('could not apply')),
    'no worker failed to apply the table',
  );
});
