import t from 'tap';
import { request } from 'undici';
import SwaggerParser from '@apidevtools/swagger-parser';
import { startExampleUpstreams } from '../../examples/upstreams.js';
import { loadConfig } from '../../src/config/load.js';
import { discoverUpstream } from '../../src/discovery/index.js';
import { buildCombinedSpec } from '../../src/builtins/spec.js';

t.test('the shipped default config discovers the bundled examples and /spec validates', async (t) => {
  const examples = await startExampleUpstreams(0);
  t.teardown(() => examples.close());
  t.same(examples.servers.map((s) => s.name), ['users', 'files', 'catalog-a', 'catalog-b']);

  // The default config names the fixed ports 9101..9104; point it at wherever the examples started.
  const portOf = new Map(examples.servers.map((s, i) => [String(9101 + i), new URL(s.url).port]));
  const config = loadConfig('config/default.json', {});
  const upstreams = config.upstreams.map((u) => ({ ...u, serviceLocation: u.serviceLocation.replace(/\d+$/, (port) => portOf.get(port)!) }));

  const discovered = await Promise.all(upstreams.map((u) => discoverUpstream(u, { fetchTimeoutMs: 2000, retries: 0, backoffMs: 10 })));
  const routes = discovered.map((d) => d.entries.map((e) => `${e.method} ${e.template}`));
  t.same(routes[0], [
    'GET /api/users',
    'POST /api/users',
    'GET /api/users/me',
    'GET /api/users/{id}',
    'PUT /api/users/{id}',
    'DELETE /api/users/{id}',
    'GET /api/users/{id}/avatar{.format}',
    'GET /api/orders/{id: [0-9]+}',
  ]);
  t.same(routes[1], ['GET /files/{+path}', 'PUT /files/{+path}', 'GET /files/{id}/meta']);
  t.same(routes[2], routes[3], 'the two catalog instances declare the same endpoints');
  t.same(routes[4], ['GET /api/products/featured', 'GET /static/ping']);

  const spec = buildCombinedSpec({ upstreams: discovered, builtinPaths: config.paths }) as Record<string, any>;
  await t.resolves(SwaggerParser.validate(structuredClone(spec) as never));
  t.equal(spec.paths['/api/products/{id}'].get['x-upstreams'].length, 2, 'catalog endpoints are load balanced');
});

t.test('an example answers with who it is and what it received', async (t) => {
  const examples = await startExampleUpstreams(0);
  t.teardown(() => examples.close());
  const catalogB = examples.servers[3]!;
  const response = await request(`${catalogB.url}/api/products/42?color=red`, { method: 'POST', body: 'abc' });
  t.same(await response.body.json(), {
    service: 'catalog',
    instance: 'catalog-b',
    port: Number(new URL(catalogB.url).port),
    method: 'POST',
    path: '/api/products/42',
    query: '?color=red',
    bodyBytes: 3,
    forwardedFor: null,
    via: null,
  });
});
