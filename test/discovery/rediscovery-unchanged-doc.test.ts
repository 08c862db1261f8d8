// docs/reference/processes.md#re-discovery: a re-discovered doc that comes back unchanged is not read
// again. An upstream that gave an ETag is asked with If-None-Match and its 304 keeps the upstream
// ready with its endpoints; one with no ETag that answers the very same bytes is not parsed,
// validated or compiled again. A doc that does change is still read and routed.
import http from 'node:http';
import type net from 'node:net';
import t from 'tap';
import { eventually, httpRequest, startGateway, swaggerDoc, testConfig, type Teardown } from '../helpers/gateway-process.js';

interface DocServer {
  location: string;
  /** The If-None-Match of each doc request, in order ('' when none). */
  conditions: string[];
  setDoc(doc: object, etag: string | null): void;
}

async function docServer(t: Teardown, doc: object, etag: string | null): Promise<DocServer> {
  let body = JSON.stringify(doc);
  let tag = etag;
  const conditions: string[] = [];
  const server = http.createServer((req, res) => {
    if (req.url !== '/spec') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    const condition = req.headers['if-none-match'] ?? '';
    conditions.push(condition);
    if (tag !== null && condition === tag) return void res.writeHead(304, { etag: tag }).end();
    res.writeHead(200, { 'content-type': 'application/json', ...(tag === null ? {} : { etag: tag }) }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => server.close());
  return {
    location: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    conditions,
    setDoc(next, nextTag) {
      body = JSON.stringify(next);
      tag = nextTag;
    },
  };
}

const config = (location: string) =>
  testConfig([{ serviceType: 'swagger2', serviceLocation: location }], {
    discovery: { fetchTimeoutMs: 2000, retries: 0, backoffMs: 50, refreshIntervalMs: 200 },
  });

interface Health {
  upstreams: Array<{ state: string; endpoints: number; lastError?: string }>;
}

t.test('an upstream with an ETag is asked with If-None-Match; its 304 keeps it ready; a new doc is routed', async (t) => {
  const upstream = await docServer(t, swaggerDoc('a', { '/a': ['GET'] }), '"v1"');
  const gateway = await startGateway(t, { config: config(upstream.location), env: { GATEWAY_LOG_LEVEL: 'debug' }, waitFor: (l) => l.msg === 'gateway operational' });
  await gateway.waitForLog((l) => l.msg === 'upstream doc unchanged (304, or the same bytes): not read again', 10_000, 'an unchanged doc not read again');
  t.equal(upstream.conditions[0], '', 'the first discovery asks unconditionally');
  t.ok(upstream.conditions.slice(1).includes('"v1"'), 'a re-discovery asks with the ETag it got');
  const health = JSON.parse((await httpRequest(gateway.port, '/healthcheck')).body) as Health;
  t.match(health.upstreams[0], { state: 'ready', endpoints: 1 });
  t.notOk(health.upstreams[0]!.lastError, 'a 304 is no error');
  t.equal((await httpRequest(gateway.port, '/a')).status, 200);

  upstream.setDoc(swaggerDoc('a', { '/a': ['GET'], '/b': ['GET'] }), '"v2"');
  await eventually(async () => ((await httpRequest(gateway.port, '/b')).status === 200 ? true : undefined), 10_000, 50, 'the changed doc routed');
});

t.test('an upstream with no ETag that answers the same bytes is not read again; a changed doc is', async (t) => {
  const upstream = await docServer(t, swaggerDoc('a', { '/a': ['GET'] }), null);
  const gateway = await startGateway(t, { config: config(upstream.location), env: { GATEWAY_LOG_LEVEL: 'debug' }, waitFor: (l) => l.msg === 'gateway operational' });
  await gateway.waitForLog((l) => l.msg === 'upstream doc unchanged (304, or the same bytes): not read again', 10_000, 'the same bytes not read again');
  t.same(new Set(upstream.conditions), new Set(['']), 'no If-None-Match without an ETag');
  upstream.setDoc(swaggerDoc('a', { '/a': ['GET'], '/b': ['GET'] }), null);
  await eventually(async () => ((await httpRequest(gateway.port, '/b')).status === 200 ? true : undefined), 10_000, 50, 'the changed doc routed');
});
