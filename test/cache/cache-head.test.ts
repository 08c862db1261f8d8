// HEAD misses through the running gateway (2 workers, the shared `local` store) and a real upstream:
// on an endpoint without a HEAD operation a HEAD goes upstream as GET, so its miss leads (or joins)
// the same flight as a GET's: concurrent HEADs make one upstream GET, its answer is stored, and the
// next GET is a hit. A body too large to keep is not read on behind a HEAD.
import type { ServerResponse } from 'node:http';
import t from 'tap';
import { eventually, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { rawRequest } from '../helpers/raw-http.js';

const SIZE = 200_000;
const file = Buffer.alloc(SIZE, 'f');
const HUGE = 4 * 1024 * 1024;
/** Methods the upstream saw, by path. */
const methods = new Map<string, string[]>();
/** Streamed answers the gateway dropped before their end, by path. */
const dropped = new Set<string>();

function streamSlowly(res: ServerResponse, path: string): void {
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'cache-control': 'max-age=600' });
  const chunk = Buffer.alloc(64 * 1024, 's');
  let sent = 0;
  res.on('close', () => {
    if (!res.writableFinished) dropped.add(path);
  });
  const next = (): void => {
    if (res.destroyed) return;
    if (sent === 64) return void res.end();
    sent++;
    res.write(chunk);
    setTimeout(next, 10);
  };
  next();
}

const app = await startUpstream(t, {
  name: 'app',
  handle: (req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    methods.set(path, [...(methods.get(path) ?? []), req.method ?? '']);
    if (path.startsWith('/files/')) {
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': SIZE, 'cache-control': 'max-age=600' });
        res.end(req.method === 'HEAD' ? undefined : file);
      }, 300);
    } else if (path.startsWith('/huge/')) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': HUGE, 'cache-control': 'max-age=600' });
      res.end(req.method === 'HEAD' ? undefined : Buffer.alloc(HUGE, 'h'));
    } else {
      streamSlowly(res, path);
    }
  },
});
const endpoints = ['/files/{id}', '/huge/{id}', '/stream/{id}'].map((path) => ({ method: 'GET', path }));
const gateway = await startGateway(t, {
  config: testConfig([{ serviceType: 'static', serviceLocation: app.location, endpoints }], {
    accessLog: { enabled: false },
    middleware: [{ id: 'cache', type: 'responseCache', maxEntryBytes: 1024 * 1024 }],
  }),
  waitFor: (line) => line.msg === 'gateway operational',
  startTimeoutMs: 60_000,
});

/** One request on a fresh connection (so that they spread over both workers). */
async function ask(method: 'GET' | 'HEAD', path: string) {
  const result = await rawRequest(gateway.port, `${method} ${path} HTTP/1.1\r\nHost: gw\r\n\r\n`, { responses: 1, waitMs: 10_000, head: method === 'HEAD' });
  const answer = result.responses[0];
  if (answer === undefined || !answer.complete) throw new Error(`${method} ${path}: no complete answer`);
  return { status: answer.status, xCache: answer.headers['x-cache']?.[0], length: answer.headers['content-length']?.[0], body: answer.body };
}

t.test('20 concurrent HEADs of an uncached resource: one upstream GET, stored; the next GET is a hit', async (t) => {
  const heads = await Promise.all(Array.from({ length: 20 }, () => ask('HEAD', '/files/a')));
  t.ok(heads.every((h) => h.status === 200 && h.length === String(SIZE) && h.body.length === 0), 'each HEAD: 200, the length of the GET, no body');
  t.same(heads.map((h) => h.xCache).sort(), [...Array(19).fill('HIT'), 'MISS'], 'one MISS (the leader), the others HIT');
  t.same(methods.get('/files/a'), ['GET'], 'one upstream request, a GET');
  const get = await ask('GET', '/files/a');
  t.same([get.status, get.xCache, get.body.length], [200, 'HIT', SIZE], 'the GET is served from what the HEAD stored');
  t.same(methods.get('/files/a'), ['GET'], 'still one upstream request');
});

t.test('a HEAD of an answer larger than maxEntryBytes is not stored, and its body is not read on', async (t) => {
  const head = await ask('HEAD', '/huge/a');
  t.same([head.status, head.xCache, head.length], [200, 'MISS', String(HUGE)]);
  t.equal((await ask('GET', '/huge/a')).xCache, 'MISS', 'not stored');

  // No Content-Length: read for the entry until it passes maxEntryBytes, then the call is dropped.
  const streamed = await ask('HEAD', '/stream/a');
  t.same([streamed.status, streamed.xCache], [200, 'MISS']);
  await eventually(async () => (dropped.has('/stream/a') ? true : undefined), 10_000, 50, 'the upstream answer dropped');
  t.pass('the gateway stopped reading past maxEntryBytes (4 MB streamed, 1 MB kept at most)');
  t.equal((await ask('GET', '/stream/a')).xCache, 'MISS', 'not stored');
});
