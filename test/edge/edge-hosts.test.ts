// Virtual hosts end to end: two upstreams with overlapping templates on different hosts; a Host no
// upstream serves is 404 problem+json; `gateway routes` / `explain` with --host.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { gateway as cli } from '../helpers/cli.js';
import { httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

t.test('Host picks the upstreams: the more specific template of another host does not capture the request', async (t) => {
  const api = await startUpstream(t, { name: 'api' });
  const shop = await startUpstream(t, { name: 'shop' });
  const gateway = await startGateway(t, {
    config: testConfig([
      { serviceType: 'static', serviceLocation: api.location, hosts: ['api.example.com'], endpoints: [{ method: 'GET', path: '/items/special' }, { method: 'PROPFIND', path: '/dav' }] },
      { serviceType: 'static', serviceLocation: shop.location, hosts: ['*.shop.test'], endpoints: [{ method: 'GET', path: '/items/{id}' }] },
    ]),
    waitFor: (line) => line.msg === 'gateway operational',
    workers: 1,
    startTimeoutMs: 60_000,
  });
  const get = (host: string, path: string) => httpRequest(gateway.port, path, { headers: { host } });
  const upstreamOf = async (host: string, path: string) => {
    const res = await get(host, path);
    return res.status === 200 ? (JSON.parse(res.body) as { upstream: string }).upstream : res.status;
  };
  t.equal(await upstreamOf('api.example.com', '/items/special'), 'api');
  t.equal(await upstreamOf('API.Example.COM:8080', '/items/special'), 'api', 'port and case aside');
  t.equal(await upstreamOf('x.shop.test', '/items/special'), 'shop', 'another host routes to its own /items/{id}');
  t.equal(await upstreamOf('a.b.shop.test', '/items/7'), 'shop', '*. stands for one or more labels');
  t.equal(await upstreamOf('api.example.com', '/items/7'), 404, 'api.example.com has no /items/{id}');
  t.equal(await upstreamOf('shop.test', '/items/7'), 404, '*.shop.test does not match shop.test');
  const none = await get('nobody.test', '/items/7');
  t.equal(none.status, 404);
  t.equal(none.headers['content-type'], 'application/problem+json');
  t.match(JSON.parse(none.body).detail, 'no upstream serves this host');
  t.equal((await get('nobody.test', '/healthcheck')).status, 200, 'built-ins answer on every host');
});

t.test("one host's x-disabled-middleware does not turn the middleware off for another host's endpoint of the same template", async (t) => {
  const open = await startUpstream(t, { name: 'open' });
  const guarded = await startUpstream(t, { name: 'guarded' });
  const gateway = await startGateway(t, {
    config: testConfig(
      [
        { serviceType: 'static', serviceLocation: open.location, hosts: ['public.test'], endpoints: [{ method: 'GET', path: '/admin/{id}', 'x-disabled-middleware': ['auth'] }] },
        { serviceType: 'static', serviceLocation: guarded.location, hosts: ['internal.test'], endpoints: [{ method: 'GET', path: '/admin/{id}' }] },
      ],
      { middleware: [{ id: 'auth', type: 'apiKeyAuth', keys: [{ consumer: 'ops', sha256: createHash('sha256').update('ops-key').digest('hex') }] }] },
    ),
    waitFor: (line) => line.msg === 'gateway operational',
    workers: 1,
    startTimeoutMs: 60_000,
  });
  const get = (host: string, headers: Record<string, string> = {}) => httpRequest(gateway.port, '/admin/users', { headers: { host, ...headers } });
  // Each order, on the one worker: whichever host comes first must not decide for the other.
  for (let round = 0; round < 2; round++) {
    t.equal((await get('public.test')).status, 200, `round ${round}: public.test has auth off`);
    const refused = await get('internal.test');
    t.equal(refused.status, 401, `round ${round}: internal.test still asks for a key`);
    t.equal((await get('internal.test', { 'x-api-key': 'ops-key' })).status, 200, `round ${round}: and admits one`);
  }
  t.equal(guarded.seen.get('GET /admin/users'), 2, 'the guarded upstream got only the requests with a key');
});

t.test('gateway routes and explain take --host', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'specgate-hosts-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'gw.json');
  writeFileSync(
    file,
    JSON.stringify({
      upstreams: [
        { serviceType: 'static', serviceLocation: 'http://127.0.0.1:9001', hosts: ['api.example.com'], endpoints: [{ method: 'GET', path: '/items/special' }] },
        { serviceType: 'static', serviceLocation: 'http://127.0.0.1:9002', hosts: ['*.example.com'], endpoints: [{ method: 'GET', path: '/items/{id}' }] },
      ],
    }),
  );
  const routes = await cli('routes', '--config', file, '--host', 'www.example.com');
  t.equal(routes.code, 0);
  t.same(routes.stdout.trim().split('\n').map((l) => l.split(/\s+/)), [['GET', '/items/{id}', 'http://127.0.0.1:9002']]);
  const both = await cli('routes', '--config', file, '--host', 'api.example.com');
  t.equal(both.stdout.trim().split('\n').length, 2, 'api.example.com is also served by the wildcard upstream');
  const explain = await cli('explain', '--config', file, '--host', 'api.example.com', 'GET', '/items/special', 'GET', '/items/1');
  const [special, one] = explain.stdout.trim().split('\n').map((l) => JSON.parse(l) as { status: number; upstreams: string[] });
  t.same(special!.upstreams, ['http://127.0.0.1:9001']);
  t.same(one!.upstreams, ['http://127.0.0.1:9002']);
  const nobody = await cli('explain', '--config', file, '--host', 'nobody.test', 'GET', '/items/1');
  t.equal((JSON.parse(nobody.stdout) as { status: number }).status, 404, 'a host no upstream serves is 404');
});
