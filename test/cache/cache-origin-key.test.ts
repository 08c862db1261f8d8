// The request's origin is part of every cache key: the upstream is sent the client's Host as
// X-Forwarded-Host and may build its answer from it (absolute links, redirects), so an answer made for
// one host must never be served to another (cache poisoning through an unkeyed header). Through the
// running gateway with a real upstream that writes the host it was told into its body.
import t from 'tap';
import { startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { rawRequest } from '../helpers/raw-http.js';

const app = await startUpstream(t, {
  name: 'app',
  handle: (req, res) => {
    const url = new URL(req.url ?? '/', 'http://upstream');
    if (req.method === 'POST') {
      res.writeHead(204);
      res.end();
      return;
    }
    if (url.pathname === '/pages/empty') {
      res.writeHead(204, { 'cache-control': 'max-age=600' });
      res.end();
      return;
    }
    const headers: Record<string, string> = { 'content-type': 'text/plain', 'cache-control': 'max-age=600', via: '1.1 origin-proxy' };
    if (url.pathname.startsWith('/pages/vary')) headers.vary = 'host';
    res.writeHead(200, headers);
    res.end(`link: http://${String(req.headers['x-forwarded-host'])}${url.pathname}`);
  },
});
const gateway = await startGateway(t, {
  config: testConfig(
    [
      {
        serviceType: 'static',
        serviceLocation: app.location,
        endpoints: [
          { method: 'GET', path: '/pages/{id}' },
          { method: 'POST', path: '/pages/{id}' },
        ],
      },
    ],
    { accessLog: { enabled: false }, middleware: [{ id: 'cache', type: 'responseCache' }] },
  ),
  waitFor: (line) => line.msg === 'gateway operational',
  startTimeoutMs: 60_000,
  workers: 1,
});

async function ask(method: string, path: string, host: string): Promise<{ status: number; xCache: string | undefined; body: string }> {
  const length = method === 'POST' ? 'Content-Length: 0\r\n' : '';
  const result = await rawRequest(gateway.port, `${method} ${path} HTTP/1.1\r\nHost: ${host}\r\n${length}\r\n`, { responses: 1 });
  const response = result.responses[0]!;
  return { status: response.status, xCache: response.headers['x-cache']?.[0], body: response.body.toString() };
}

t.test('an answer stored for one Host is not served for another', async (t) => {
  const evil = await ask('GET', '/pages/home', 'evil.example');
  t.same([evil.xCache, evil.body], ['MISS', 'link: http://evil.example/pages/home']);
  const good = await ask('GET', '/pages/home', 'gw.example');
  t.same([good.xCache, good.body], ['MISS', 'link: http://gw.example/pages/home'], "another host's entry is not this one's");
  const again = await ask('GET', '/pages/home', 'GW.example');
  t.same([again.xCache, again.body], ['HIT', 'link: http://gw.example/pages/home'], 'the same host, in any letter case, hits its own');
});

t.test('Vary: Host selects by the Host the client sent, not the one sent upstream', async (t) => {
  t.equal((await ask('GET', '/pages/vary', 'a.example')).xCache, 'MISS');
  const b = await ask('GET', '/pages/vary', 'b.example');
  t.same([b.xCache, b.body], ['MISS', 'link: http://b.example/pages/vary']);
});

t.test('an unsafe request through another Host invalidates only that host\'s entries', async (t) => {
  t.equal((await ask('GET', '/pages/kept', 'gw.example')).xCache, 'MISS');
  t.equal((await ask('GET', '/pages/kept', 'gw.example')).xCache, 'HIT');
  t.equal((await ask('POST', '/pages/kept', 'attacker.example')).status, 204);
  t.equal((await ask('GET', '/pages/kept', 'gw.example')).xCache, 'HIT', 'still stored for its own host');
  t.equal((await ask('POST', '/pages/kept', 'gw.example')).status, 204);
  t.equal((await ask('GET', '/pages/kept', 'gw.example')).xCache, 'MISS', 'dropped by a request through its own host');
});

t.test("a stored 204 is answered without Content-Length, as the upstream's was (RFC 9110 8.6)", async (t) => {
  for (const [method, label] of [['GET', 'MISS'], ['GET', 'HIT'], ['HEAD', 'HIT']] as const) {
    const result = await rawRequest(gateway.port, `${method} /pages/empty HTTP/1.1\r\nHost: gw.example\r\n\r\n`, { responses: 1, head: method === 'HEAD' });
    const response = result.responses[0]!;
    t.equal(response.status, 204, `${method} ${label}`);
    t.equal(response.headers['x-cache']?.[0], label);
    t.equal(response.headers['content-length'], undefined, `${method} ${label}: no Content-Length`);
  }
});

t.test("a hit carries the upstream's Via entries before the gateway's, as the miss did (RFC 9111 3.1)", async (t) => {
  const via = async (): Promise<{ xCache: string | undefined; via: string }> => {
    const response = (await rawRequest(gateway.port, 'GET /pages/via HTTP/1.1\r\nHost: gw.example\r\n\r\n', { responses: 1 })).responses[0]!;
    return { xCache: response.headers['x-cache']?.[0], via: (response.headers.via ?? []).join(', ') };
  };
  const miss = await via();
  const hit = await via();
  t.same([miss.xCache, hit.xCache], ['MISS', 'HIT']);
  t.match(miss.via, /^1\.1 origin-proxy, 1\.1 \S+$/, 'the upstream entry, then the gateway\'s');
  t.equal(hit.via, miss.via, 'the same chain from the store');
});
