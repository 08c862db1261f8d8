// /spec?host=: the combined spec of exactly the upstreams a request with that Host routes among (two
// upstreams on different hosts plus a host-less one), checked against what the gateway routes; a bad
// host is 400, a host nobody serves is 404, both problem+json.
import t from 'tap';
import { httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

interface Swagger {
  paths: Record<string, Record<string, { 'x-upstreams'?: string[] }>>;
}

/** Every "METHOD /path" of a doc that an upstream serves (the built-ins left out). */
function operations(doc: Swagger): string[] {
  const ops: string[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) if (op['x-upstreams']) ops.push(`${method.toUpperCase()} ${path}`);
  }
  return ops.sort();
}

t.test('/spec?host= describes what a request with that Host is routed among', async (t) => {
  const api = await startUpstream(t, { name: 'api' });
  const shop = await startUpstream(t, { name: 'shop' });
  const common = await startUpstream(t, { name: 'common' });
  const gateway = await startGateway(t, {
    config: testConfig([
      { serviceType: 'static', serviceLocation: api.location, hosts: ['api.example.com'], endpoints: [{ method: 'GET', path: '/items/special' }, { method: 'POST', path: '/orders' }] },
      { serviceType: 'static', serviceLocation: shop.location, hosts: ['*.shop.test'], endpoints: [{ method: 'GET', path: '/items/{id}' }, { method: 'GET', path: '/cart' }] },
      { serviceType: 'static', serviceLocation: common.location, endpoints: [{ method: 'GET', path: '/status' }] },
    ]),
    waitFor: (line) => line.msg === 'gateway operational',
    workers: 1,
    startTimeoutMs: 60_000,
  });
  const spec = async (query: string) => {
    const res = await httpRequest(gateway.port, `/spec${query}`);
    return { status: res.status, type: res.headers['content-type'], body: JSON.parse(res.body) as Swagger & { detail?: string; openapi?: string } };
  };

  const all = await spec('');
  t.same(operations(all.body), ['GET /cart', 'GET /items/special', 'GET /items/{id}', 'GET /status', 'POST /orders'], 'without host: every upstream, as before');

  const cases: Array<[string, string[]]> = [
    ['api.example.com', ['GET /items/special', 'GET /status', 'POST /orders']],
    ['API.Example.COM:8443', ['GET /items/special', 'GET /status', 'POST /orders']],
    ['api.example.com.', ['GET /items/special', 'GET /status', 'POST /orders']],
    ['x.shop.test', ['GET /cart', 'GET /items/{id}', 'GET /status']],
    ['a.b.shop.test', ['GET /cart', 'GET /items/{id}', 'GET /status']],
    ['shop.test', ['GET /status']],
    ['nobody.test', ['GET /status']],
    ['127.0.0.1:80', ['GET /status']],
    ['[::1]:8080', ['GET /status']],
  ];
  // Each probe and the operations that can take it (/items/special is also an /items/{id}).
  const probes: Array<[string, string, string[]]> = [
    ['GET', '/items/special', ['GET /items/special', 'GET /items/{id}']],
    ['GET', '/items/7', ['GET /items/{id}']],
    ['GET', '/cart', ['GET /cart']],
    ['GET', '/status', ['GET /status']],
    ['POST', '/orders', ['POST /orders']],
  ];
  for (const [host, expected] of cases) {
    const doc = await spec(`?host=${encodeURIComponent(host)}`);
    t.equal(doc.status, 200, host);
    t.same(operations(doc.body), expected, `${host}: the upstreams serving it and the host-less one`);
    t.ok(doc.body.paths['/healthcheck'], `${host}: the built-ins are on every host`);
    // The same rule as routing: an operation is in the host's spec exactly when a request with that Host reaches it.
    for (const [method, path, takers] of probes) {
      const res = await httpRequest(gateway.port, path, { method, headers: { host } });
      t.equal(res.status === 200, takers.some((op) => expected.includes(op)), `${host} ${method} ${path}: routed iff its spec has it (got ${res.status})`);
    }
  }
  const shopDoc = await spec('?host=x.shop.test');
  t.same(shopDoc.body.paths['/items/{id}']!.get!['x-upstreams'], [shop.location]);

  const openapi3 = await spec('?host=api.example.com&format=openapi3');
  t.equal(openapi3.status, 200);
  t.match(openapi3.body.openapi, /^3\./);
  t.same(Object.keys(openapi3.body.paths).filter((p) => !['/healthcheck', '/metrics', '/spec'].includes(p)).sort(), ['/items/special', '/orders', '/status']);

  // 253 characters, the longest a host name can be.
  const longest = `${'a'.repeat(60)}.${'b'.repeat(60)}.${'c'.repeat(60)}.${'d'.repeat(60)}.shop.test`;
  t.equal(longest.length, 253);
  t.same(operations((await spec(`?host=${longest}`)).body), ['GET /cart', 'GET /items/{id}', 'GET /status'], 'a 253-character name is a host');
  t.same(operations((await spec('?host=x.shop.test:99999')).body), ['GET /cart', 'GET /items/{id}', 'GET /status'], 'the port aside, as in routing');
  for (const bad of ['', 'not a host', 'a..b', '-x.test', `x${longest}`, `${'a'.repeat(64)}.test`, 'x.test:port', '[::zz]', '*.shop.test']) {
    const res = await spec(`?host=${encodeURIComponent(bad)}`);
    t.equal(res.status, 400, `host=${JSON.stringify(bad)} is refused`);
    t.equal(res.type, 'application/problem+json');
    t.equal(typeof res.body.detail, 'string');
  }
  // A Host the accept phase takes but that is no DNS name: /spec?host= refuses it, and no virtual host
  // serves a request with it (the *.shop.test wildcard stands for DNS labels only).
  const shopBefore = shop.seen.get('GET /items/7') ?? 0;
  for (const odd of ['..shop.test', 'evil.example,x.shop.test', 'evil.example;x.shop.test', '*.shop.test', `x${longest}`]) {
    t.equal((await spec(`?host=${encodeURIComponent(odd)}`)).status, 400, `host=${JSON.stringify(odd)} is refused`);
    t.equal((await httpRequest(gateway.port, '/items/7', { headers: { host: odd } })).status, 404, `Host ${odd}: not routed to *.shop.test's upstream`);
    t.equal((await httpRequest(gateway.port, '/status', { headers: { host: odd } })).status, 200, `Host ${odd}: the host-less upstream serves it`);
  }
  t.equal(shop.seen.get('GET /items/7') ?? 0, shopBefore, "*.shop.test's upstream never got one");
  const twice = await spec('?host=api.example.com&host=x.shop.test');
  t.equal(twice.status, 400, 'two hosts are refused');
});

t.test('/spec?host= for a host no upstream serves is 404, like a request to it', async (t) => {
  const api = await startUpstream(t, { name: 'api' });
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: api.location, hosts: ['api.example.com'], endpoints: [{ method: 'GET', path: '/items' }] }]),
    waitFor: (line) => line.msg === 'gateway operational',
    workers: 1,
    startTimeoutMs: 60_000,
  });
  const served = await httpRequest(gateway.port, '/spec?host=api.example.com');
  t.equal(served.status, 200);
  t.ok((JSON.parse(served.body) as Swagger).paths['/items']);
  const res = await httpRequest(gateway.port, '/spec?host=nobody.test');
  t.equal(res.status, 404);
  t.equal(res.headers['content-type'], 'application/problem+json');
  t.match(JSON.parse(res.body), { status: 404, detail: 'no upstream serves this host' });
  t.equal((await httpRequest(gateway.port, '/items', { headers: { host: 'nobody.test' } })).status, 404, 'as a request to that host is');
  t.equal((await httpRequest(gateway.port, '/spec')).status, 200, 'without host: the spec as before');
});
