// Local replies (cache hits, problem+json) are written two ways (src/lifecycle/uws/uws-client.ts,
// reply()): at once when they are made inside uWS's request handler of their own request, where uWS
// has corked the socket already, and through res.cork() otherwise (a reply made later, such as the
// 502 for an upstream that refused the connection or the 504 of its timeout). Both must put every
// byte on the wire in order, and uWS.js must print no warning about writes outside a cork (on
// stderr, which the test reads): a reply written at once from a timer would print one.
import t from 'tap';
import { startCacheUpstream } from '../helpers/cache-gateway.js';
import { httpRequest, startGateway, testConfig } from '../helpers/gateway-process.js';
import { closedPort, rawRequest } from '../helpers/raw-http.js';

/** Larger than uWS's 16 KiB cork buffer (the reply cannot go out in one corked write), below maxEntryBytes' default. */
const BIG = 100 * 1024;

function bodyOf(path: string): string {
  const size = path.startsWith('/big') ? BIG : 64;
  return path.slice(1, 2).repeat(size);
}

t.test('replies inside the request handler and after it: whole, in order, and no uWS cork warning', async (t) => {
  const upstream = await startCacheUpstream(t, (path, res) => {
    if (path.startsWith('/hang')) return; // answered by the gateway's upstream timeout
    res.writeHead(200, { 'content-type': 'text/plain', 'cache-control': 'max-age=600' });
    res.end(bodyOf(path));
  });
  const endpoints = (...paths: string[]) => paths.map((path) => ({ method: 'GET', path }));
  const gateway = await startGateway(t, {
    config: testConfig(
      [
        { serviceType: 'static', serviceLocation: upstream.location, endpoints: endpoints('/small/{n}', '/big/{n}', '/hang/{n}') },
        { serviceType: 'static', serviceLocation: `http://127.0.0.1:${await closedPort()}`, endpoints: endpoints('/down/{n}') },
      ],
      { accessLog: { enabled: false }, middleware: [{ id: 'cache', type: 'responseCache' }], timeouts: { upstreamMs: 300 } },
    ),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });

  // Inside the handler: hits and 404s, pipelined in one write, so uWS answers them all in one read
  // (a pipelined request behind a pending answer would close the connection: native-notes.md).
  for (const path of ['/small/1', '/big/1']) {
    const first = await httpRequest(gateway.port, path);
    t.equal(first.status, 200, `${path}: first request answered`);
  }
  const paths = ['/small/1', '/nope', '/big/1', '/small/1', '/nope/2', '/big/1', '/small/1'];
  // The Host the first requests had: it is part of the cache key.
  const payload = paths.map((path) => `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${gateway.port}\r\n\r\n`).join('');
  const raw = await rawRequest(gateway.port, payload, { responses: paths.length, waitMs: 10_000 });
  const answers = raw.responses;
  t.equal(answers.length, paths.length, `one answer per pipelined request (${answers.map((answer) => answer.status).join(', ')}; ${raw.data.length} bytes, closed ${raw.closedByServer}, reset ${raw.reset}, timed out ${raw.timedOut}, ${raw.elapsedMs} ms)`);
  answers.forEach((answer, i) => {
    const path = paths[i]!;
    if (path.startsWith('/nope')) {
      t.equal(answer.status, 404, `${path}: 404`);
      t.match(answer.headers['content-type']?.[0], /application\/problem\+json/, `${path}: problem+json`);
    } else {
      t.equal(answer.status, 200, `${path}: 200`);
      t.same(answer.headers['x-cache'], ['HIT'], `${path}: from the cache`);
      t.equal(answer.body.toString(), bodyOf(path), `${path}: the whole body, in its place`);
    }
  });

  // After the handler: the answer to a refused connection or an upstream that never answers is made
  // later (the 504 by a timer, outside any cork).
  // Keep-alive requests: with `Connection: close` (as node:http's agent-less requests send) the answer
  // takes the closing path (closing-reply.ts) instead.
  for (const [path, status] of [['/down/1', 502], ['/hang/1', 504], ['/down/2', 502], ['/hang/2', 504]] as const) {
    const raw = await rawRequest(gateway.port, `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${gateway.port}\r\n\r\n`, { responses: 1, waitMs: 10_000 });
    const answer = raw.responses[0];
    t.equal(answer?.status, status, `${path}: ${status}`);
    t.match(answer?.headers['content-type']?.[0], /application\/problem\+json/, `${path}: problem+json`);
    t.match(JSON.parse(answer?.body.toString() ?? 'null'), { status }, `${path}: the whole problem document`);
    t.notOk(raw.closedByServer, `${path}: the connection stays open`);
  }

  t.notMatch(gateway.text(), /corked callback/, 'uWS.js printed no warning about writes outside a cork');
});
