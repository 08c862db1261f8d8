// What the response cache must not share (found by probing a running gateway the way cache-poisoning
// and cache-deception attacks do), through the running gateway with one worker and real upstreams:
// - an answer the gateway chose by Accept (two upstreams producing different media types for one
//   endpoint) is not served to a request whose Accept chose the other;
// - an answer to a request with Authorization stays personal when apiKeyAuth removed the header
//   before the cache (RFC 9111 3.5 is about the request the client sent);
// - from a trusted proxy, the key holds every forwarding field the upstream gets, whole: a list in
//   X-Forwarded-Host, an odd X-Forwarded-Proto, X-Forwarded-Prefix;
// - a targeted field counts a repeated directive as its last, and Expires is ignored beside it (RFC 9213);
// - the same URL with and without the default port is one entry, dropped by one invalidation;
// - a 304 does not change the stored body's Content-Type or Content-Encoding.
import { createHash } from 'node:crypto';
import t from 'tap';
import { startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { rawRequest } from '../helpers/raw-http.js';

let etagCalls = 0;
const app = await startUpstream(t, {
  name: 'app',
  handle: (req, res) => {
    const url = new URL(req.url ?? '/', 'http://upstream');
    const path = url.pathname;
    if (req.method === 'PUT') {
      res.writeHead(204);
      res.end();
      return;
    }
    if (path.startsWith('/neg/')) {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=60' });
      res.end('{"format":"json"}');
      return;
    }
    if (path.startsWith('/me/')) {
      res.writeHead(200, { 'content-type': 'text/plain', 'cache-control': 'max-age=60' });
      res.end(`consumer=${String(req.headers['x-consumer'])}`);
      return;
    }
    if (path.startsWith('/links/')) {
      // As frameworks do: the first item of a list, and the prefix.
      const host = String(req.headers['x-forwarded-host'] ?? '').split(',')[0]!.trim();
      const proto = String(req.headers['x-forwarded-proto'] ?? '').split(',')[0]!.trim();
      res.writeHead(200, { 'content-type': 'text/plain', 'cache-control': 'max-age=60' });
      res.end(`${proto}://${host}${String(req.headers['x-forwarded-prefix'] ?? '')}/next`);
      return;
    }
    if (path === '/cdn/dup') {
      res.writeHead(200, { 'cache-control': 'no-store', 'cdn-cache-control': 'max-age=3600, max-age=0', 'content-type': 'text/plain' });
      res.end(`dup ${Date.now()}`);
      return;
    }
    if (path === '/cdn/expires') {
      res.writeHead(200, { 'cache-control': 'no-store', 'cdn-cache-control': 'public', expires: new Date(Date.now() + 3_600_000).toUTCString(), 'content-type': 'text/plain' });
      res.end(`expires ${Date.now()}`);
      return;
    }
    if (path === '/etag/1') {
      etagCalls++;
      if (req.headers['if-none-match'] === '"v1"') {
        res.writeHead(304, { etag: '"v1"', 'cache-control': 'max-age=0', 'content-type': 'text/html', 'content-encoding': 'gzip' });
        res.end();
        return;
      }
      res.writeHead(200, { etag: '"v1"', 'cache-control': 'max-age=0', 'content-type': 'text/plain' });
      res.end('<script>alert(1)</script>');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain', 'cache-control': 'max-age=600' });
    res.end(`${path} #${Date.now()}`);
  },
});
const xml = await startUpstream(t, {
  name: 'xml',
  handle: (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/xml', 'cache-control': 'max-age=60' });
    res.end('<format>xml</format>');
  },
});

const sha = (text: string): string => createHash('sha256').update(text).digest('hex');
/** Every endpoint but /me/{id} goes without the key check (and so without Authorization, which would keep answers personal). */
const open = { 'x-disabled-middleware': ['auth'] };
const gateway = await startGateway(t, {
  config: testConfig(
    [
      {
        serviceType: 'static',
        serviceLocation: app.location,
        endpoints: [
          { method: 'GET', path: '/neg/{id}', produces: ['application/json'], ...open },
          { method: 'GET', path: '/me/{id}' },
          { method: 'GET', path: '/links/{id}', ...open },
          { method: 'GET', path: '/cdn/{id}', ...open },
          { method: 'GET', path: '/etag/{id}', ...open },
          { method: 'GET', path: '/s/{id}', ...open },
          { method: 'PUT', path: '/s/{id}', ...open },
        ],
      },
      { serviceType: 'static', serviceLocation: xml.location, endpoints: [{ method: 'GET', path: '/neg/{id}', produces: ['application/xml'], ...open }] },
    ],
    {
      accessLog: { enabled: false },
      trustedProxies: ['127.0.0.1'],
      middleware: [
        {
          id: 'auth',
          type: 'apiKeyAuth',
          header: 'authorization',
          keys: [
            { consumer: 'alice', sha256: sha('Bearer alice-token') },
            { consumer: 'bob', sha256: sha('Bearer bob-token') },
          ],
        },
        { id: 'cache', type: 'responseCache', targetedCacheControl: ['CDN-Cache-Control'] },
      ],
    },
  ),
  waitFor: (line) => line.msg === 'gateway operational',
  startTimeoutMs: 60_000,
  workers: 1,
});

/** A request with the given headers (Host gw.test unless given). */
async function ask(method: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; xCache: string | undefined; type: string | undefined; body: string }> {
  const all: Record<string, string> = { host: 'gw.test', ...headers };
  const head = `${method} ${path} HTTP/1.1\r\n${Object.entries(all)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')}${method === 'PUT' ? 'content-length: 0\r\n' : ''}\r\n`;
  const [answer] = (await rawRequest(gateway.port, head, { responses: 1, waitMs: 5000 })).responses;
  if (answer === undefined || !answer.complete) throw new Error(`${method} ${path}: no complete answer`);
  return { status: answer.status, xCache: answer.headers['x-cache']?.[0], type: answer.headers['content-type']?.[0], body: answer.body.toString() };
}

t.test('an answer chosen by Accept among upstreams is not served to another Accept', async (t) => {
  const first = await ask('GET', '/neg/1', { accept: 'application/xml' });
  t.same([first.xCache, first.body], ['MISS', '<format>xml</format>']);
  const other = await ask('GET', '/neg/1', { accept: 'application/json' });
  t.same([other.xCache, other.body], ['MISS', '{"format":"json"}'], 'the JSON upstream answers the JSON request');
  t.same([(await ask('GET', '/neg/1', { accept: 'application/xml' })).body, (await ask('GET', '/neg/1', { accept: 'application/json' })).body], ['<format>xml</format>', '{"format":"json"}'], 'each stored apart');
});

t.test("an Authorization that apiKeyAuth removed still keeps the answer personal", async (t) => {
  const alice = await ask('GET', '/me/1', { authorization: 'Bearer alice-token' });
  t.same([alice.status, alice.body], [200, 'consumer=alice']);
  const bob = await ask('GET', '/me/1', { authorization: 'Bearer bob-token' });
  t.same([bob.status, bob.body], [200, 'consumer=bob'], "bob does not get alice's answer");
});

t.test("from a trusted proxy, the key holds the forwarding fields the upstream gets, whole", async (t) => {
  const good = { 'x-forwarded-host': 'good.test', 'x-forwarded-proto': 'https' };
  const attacks: Array<Record<string, string>> = [
    { 'x-forwarded-host': 'evil.test, good.test', 'x-forwarded-proto': 'https' },
    { 'x-forwarded-host': 'good.test', 'x-forwarded-proto': 'evil, https' },
    { 'x-forwarded-host': 'good.test', 'x-forwarded-proto': 'https', 'x-forwarded-prefix': '/evil' },
  ];
  for (const [i, attack] of attacks.entries()) {
    const path = `/links/${i}`;
    t.notMatch((await ask('GET', path, attack)).body, /^https:\/\/good\.test\/next$/, `attack ${i} builds another link`);
    const victim = await ask('GET', path, good);
    t.same([victim.xCache, victim.body], ['MISS', 'https://good.test/next'], `the victim of attack ${i} gets its own answer`);
  }
});

t.test('targeted cache control: the last of a repeated directive, and no Expires beside it', async (t) => {
  await ask('GET', '/cdn/dup');
  t.equal((await ask('GET', '/cdn/dup')).xCache, 'MISS', 'max-age=3600, max-age=0 is 0');
  await ask('GET', '/cdn/expires');
  t.equal((await ask('GET', '/cdn/expires')).xCache, 'MISS', 'CDN-Cache-Control: public with an Expires an hour ahead gives no lifetime');
});

t.test('the default port: one entry, dropped by one invalidation', async (t) => {
  const first = await ask('GET', '/s/1', { host: 'a.test' });
  t.equal(first.xCache, 'MISS');
  t.same([(await ask('GET', '/s/1', { host: 'a.test:80' })).xCache, (await ask('GET', '/s/1', { host: 'A.Test' })).xCache], ['HIT', 'HIT'], 'the same URI');
  t.equal((await ask('PUT', '/s/1', { host: 'a.test' })).status, 204);
  t.equal((await ask('GET', '/s/1', { host: 'a.test:80' })).xCache, 'MISS', 'dropped under every spelling');
});

t.test("a 304 does not change what the stored body is said to be", async (t) => {
  t.same([(await ask('GET', '/etag/1')).type], ['text/plain']);
  const again = await ask('GET', '/etag/1');
  t.equal(again.xCache, 'REVALIDATED');
  t.equal(again.type, 'text/plain', 'Content-Type kept');
  t.equal(etagCalls, 2);
  const third = await ask('GET', '/etag/1');
  t.equal(third.type, 'text/plain');
  t.notOk('content-encoding' in (await rawRequest(gateway.port, 'GET /etag/1 HTTP/1.1\r\nhost: gw.test\r\n\r\n', { responses: 1 })).responses[0]!.headers, 'no Content-Encoding either');
});
