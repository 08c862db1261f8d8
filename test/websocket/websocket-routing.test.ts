// A WebSocket upgrade is routed exactly as the same GET: virtual hosts (upstreams[].hosts), the Host
// header's checks, and the built-in paths with an admin listener. Whatever the GET is answered with
// (404, 400, a built-in's 200), the upgrade is answered with too, and no upstream sees it.
import t from 'tap';
import { httpRequest, startGateway, testConfig } from '../helpers/gateway-process.js';
import { rawRequest } from '../helpers/raw-http.js';
import { openClient, startWsUpstream, wsUpstreamConfig } from '../helpers/ws-upstream.js';

type Refusal = { status: number; body: string };

/** 'upgraded', or the status and body of the HTTP answer the upgrade got instead. */
async function upgrade(port: number, path: string, host?: string): Promise<'upgraded' | Refusal> {
  try {
    const client = await openClient(`ws://127.0.0.1:${port}${path}`, [], host === undefined ? {} : { host });
    client.close();
    return 'upgraded';
  } catch (err) {
    const { status, body } = err as Refusal;
    return { status, body };
  }
}

async function plainGet(port: number, path: string, host: string): Promise<Refusal> {
  const { status, body } = await httpRequest(port, path, { headers: { host } });
  return { status, body };
}

t.test('virtual hosts: an upgrade reaches only the upstreams serving its Host', async (t) => {
  const a = await startWsUpstream(t);
  const b = await startWsUpstream(t);
  const internal = await startWsUpstream(t);
  const config = testConfig([
    { ...wsUpstreamConfig(a.location, ['/ws/{name}']), hosts: ['a.example'] },
    { ...wsUpstreamConfig(b.location, ['/ws/{name}']), hosts: ['b.example'] },
    { ...wsUpstreamConfig(internal.location, ['/raw/{name}']), hosts: ['internal.example'] },
  ]);
  const gateway = await startGateway(t, { config, waitFor: (line) => line.msg === 'gateway operational', startTimeoutMs: 60_000, workers: 1 });

  for (let i = 0; i < 6; i++) t.equal(await upgrade(gateway.port, '/ws/tag', 'b.example'), 'upgraded', `Host b.example, upgrade ${i + 1}`);
  t.equal(b.handshakes.length, 6, 'every b.example upgrade reached b.example\'s upstream');
  t.equal(a.handshakes.length, 0, 'none reached a.example\'s');
  t.equal(await upgrade(gateway.port, '/ws/tag', 'A.Example:8080'), 'upgraded', 'the Host is matched as for a request: port and case aside');
  t.equal(a.handshakes.length, 1, 'and reaches a.example\'s upstream');

  const nobody = await upgrade(gateway.port, '/ws/tag', 'nobody.example');
  t.match(nobody, { status: 404, body: /no upstream serves this host/ }, 'a Host no upstream serves: 404');
  t.same(nobody, await plainGet(gateway.port, '/ws/tag', 'nobody.example'), 'as the same GET');

  const outside = await upgrade(gateway.port, '/raw/x', 'public.example');
  t.match(outside, { status: 404 }, 'an endpoint of an upstream restricted to internal.example, with another Host: 404');
  t.same(outside, await plainGet(gateway.port, '/raw/x', 'public.example'), 'as the same GET');
  t.match(await upgrade(gateway.port, '/raw/x', 'a.example'), { status: 404 }, 'nor with the Host of another upstream');
  t.equal(internal.handshakes.length, 0, 'the internal upstream saw no upgrade with another Host');
  t.equal(await upgrade(gateway.port, '/raw/x', 'internal.example'), 'upgraded', 'with its own Host it is reached');
  t.equal(internal.handshakes.length, 1);

  // The Host header's own checks apply as for any request: two Host lines are a 400.
  const key = 'dGhlIHNhbXBsZSBub25jZQ==';
  const twoHosts = await rawRequest(
    gateway.port,
    `GET /ws/tag HTTP/1.1\r\nHost: b.example\r\nHost: a.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    { responses: 1 },
  );
  t.equal(twoHosts.responses[0]?.status, 400, 'an upgrade with two Host headers: 400');
  t.match(twoHosts.responses[0]?.body.toString(), /more than one Host/);
  t.equal(a.handshakes.length + b.handshakes.length, 7, 'and no upstream saw it');
});

t.test('with an admin listener, upgrades to the built-in paths are answered as the same GET', async (t) => {
  const upstream = await startWsUpstream(t);
  const config = testConfig([wsUpstreamConfig(upstream.location, ['/healthcheck', '/metrics', '/spec', '/chat'])], { admin: { host: '127.0.0.1', port: 0 } });
  const gateway = await startGateway(t, { config, waitFor: (line) => line.msg === 'gateway operational', startTimeoutMs: 60_000, workers: 1 });
  for (const path of ['/metrics', '/spec']) {
    const answer = await upgrade(gateway.port, path);
    t.match(answer, { status: 404, body: /admin listener/ }, `${path}: the public port's 404`);
    t.same(answer, await plainGet(gateway.port, path, 'localhost'), `${path}: as the same GET`);
  }
  const health = await upgrade(gateway.port, '/healthcheck');
  t.match(health, { status: 200 }, '/healthcheck: the built-in health report');
  t.same(Object.keys(JSON.parse((health as Refusal).body)), Object.keys(JSON.parse((await plainGet(gateway.port, '/healthcheck', 'localhost')).body)), 'as the same GET');
  t.equal(upstream.handshakes.length, 0, 'the upstream declaring those paths saw no upgrade');
  t.equal(await upgrade(gateway.port, '/chat'), 'upgraded', 'its other endpoint upgrades');
});

t.test('a responseCache on the route takes no part in an upgrade: a cached GET does not answer it, an upgrade leads nothing the next GET waits for', async (t) => {
  let gets = 0;
  const upstream = await startWsUpstream(t, {
    http: (_req, res) => {
      gets++;
      res.writeHead(200, { 'content-type': 'text/plain', 'cache-control': 'max-age=600' });
      res.end(`plain GET #${gets}`);
    },
  });
  const config = testConfig([wsUpstreamConfig(upstream.location, ['/graphql', '/feed'])], { middleware: [{ id: 'cache', type: 'responseCache' }] });
  const gateway = await startGateway(t, { config, waitFor: (line) => line.msg === 'gateway operational', startTimeoutMs: 60_000, workers: 1 });
  t.equal((await httpRequest(gateway.port, '/graphql')).body, 'plain GET #1');
  t.equal((await httpRequest(gateway.port, '/graphql')).headers['x-cache'], 'HIT', 'the GET is cached');
  t.equal(await upgrade(gateway.port, '/graphql'), 'upgraded', 'the upgrade of a cached URL is upgraded, not answered from the cache');
  t.equal(await upgrade(gateway.port, '/feed'), 'upgraded', 'an upgrade of a URL not cached yet');
  const started = Date.now();
  const after = await httpRequest(gateway.port, '/feed');
  t.equal(after.status, 200);
  t.equal(after.headers['x-cache'], 'MISS');
  t.ok(Date.now() - started < 2000, `the next GET went upstream at once (${Date.now() - started} ms), waiting for no upgrade`);
  t.equal(upstream.handshakes.length, 2);
});
