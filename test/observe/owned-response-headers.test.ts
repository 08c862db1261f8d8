// Headers the gateway sets on every answer (the request ID, the response cache's X-Cache) replace an
// upstream's of the same name: the client gets one line, ours, the one the access log has; a cache hit
// does not replay the upstream's either.
import t from 'tap';
import { eventually, startGateway, startUpstream, testConfig, type GatewayProcess } from '../helpers/gateway-process.js';
import { rawRequest, type ParsedResponse } from '../helpers/raw-http.js';

const GENERATED = /^[0-9a-f]{16}-[0-9a-z]+$/;
const endpoints = [{ method: 'GET', path: '/items/{id}' }];

const upstream = await startUpstream(t, {
  name: 'app',
  handle(req, res) {
    res.setHeader('x-request-id', 'chosen-by-upstream');
    res.setHeader('x-correlation-id', 'correlation-by-upstream');
    res.setHeader('X-Cache', 'HIT');
    res.setHeader('cache-control', req.url!.startsWith('/items/cached') ? 'max-age=60' : 'no-store');
    res.setHeader('content-type', 'application/json');
    res.end('{"ok":true}');
  },
});

async function get(gateway: GatewayProcess, path: string): Promise<ParsedResponse> {
  const result = await rawRequest(gateway.port, `GET ${path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n`);
  const answer = result.responses[0];
  if (answer === undefined) throw new Error(`no answer to ${path}`);
  return answer;
}

t.test('request ID and X-Cache: the client gets the gateway\'s only, on misses, bypasses and hits', async (t) => {
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints }], {
      middleware: [{ id: 'cache', type: 'responseCache', store: 'local', defaultTtlMs: 60_000 }],
    }),
    workers: 1,
    waitFor: (line) => line.msg === 'gateway operational',
  });
  const bypass = await get(gateway, '/items/no-store');
  t.equal(bypass.status, 200);
  t.equal(bypass.headers['x-request-id']?.length, 1, `one x-request-id line: ${bypass.headers['x-request-id']?.join(' | ')}`);
  t.match(bypass.headers['x-request-id']?.[0], GENERATED, "the gateway's");
  t.same(bypass.headers['x-cache'], ['BYPASS'], "one X-Cache, the cache's");

  const miss = await get(gateway, '/items/cached');
  t.same(miss.headers['x-cache'], ['MISS']);
  t.equal(miss.headers['x-request-id']?.length, 1);
  t.match(miss.headers['x-request-id']?.[0], GENERATED);

  // Stored once the answer is over: asked again until served from the entry, which holds the upstream's headers.
  const hit = await eventually(
    async () => {
      const answer = await get(gateway, '/items/cached');
      return answer.headers['x-cache']?.includes('HIT') ? answer : undefined;
    },
    5000,
    50,
    'a cache hit',
  );
  t.same(hit.headers['x-cache'], ['HIT'], 'the X-Cache of the entry, not the upstream\'s beside it');
  t.equal(hit.headers['x-request-id']?.length, 1, `one x-request-id line on a hit: ${hit.headers['x-request-id']?.join(' | ')}`);
  t.match(hit.headers['x-request-id']?.[0], GENERATED, 'the stored upstream ID is not replayed');
  t.same(hit.headers['x-correlation-id'], ['correlation-by-upstream'], 'headers the gateway does not own pass as stored');

  const logged = await eventually(
    async () => {
      const ids = new Set(gateway.accessLines().map((line) => line.requestId));
      return [bypass, miss, hit].every((answer) => ids.has(answer.headers['x-request-id']![0])) ? ids : undefined;
    },
    5000,
    50,
    'the access lines of the three answers',
  );
  t.notOk(logged.has('chosen-by-upstream'));
});

t.test('another request ID header name is the one replaced; with IDs off the upstream\'s passes', async (t) => {
  const renamed = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints }], {
      requestId: { enabled: true, header: 'X-Correlation-Id' },
    }),
    workers: 1,
    waitFor: (line) => line.msg === 'gateway operational',
  });
  const answer = await get(renamed, '/items/1');
  t.equal(answer.headers['x-correlation-id']?.length, 1, `one x-correlation-id line: ${answer.headers['x-correlation-id']?.join(' | ')}`);
  t.match(answer.headers['x-correlation-id']?.[0], GENERATED);
  t.same(answer.headers['x-request-id'], ['chosen-by-upstream'], 'not the gateway\'s header here: passed as sent');

  const off = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints }], {
      requestId: { enabled: false },
    }),
    workers: 1,
    waitFor: (line) => line.msg === 'gateway operational',
  });
  t.same((await get(off, '/items/2')).headers['x-request-id'], ['chosen-by-upstream']);
});
