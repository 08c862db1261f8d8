// Request IDs, W3C trace context, span export and the access log file, through the real gateway
// process: what the client, the upstream, the access log and an OTLP/HTTP receiver of the test see.
import { createHash } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, renameSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { startOtlpReceiver, type OtlpSpan } from '../helpers/otlp-receiver.js';
import { findFreePort } from '../../src/cluster/free-port.js';

const attribute = (span: OtlpSpan, key: string): unknown => {
  const value = span.attributes.find((a) => a.key === key)?.value;
  return value === undefined ? undefined : (value.stringValue ?? (value.intValue !== undefined ? Number(value.intValue) : value));
};

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'specgate-observe-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function readLines(file: string): Array<Record<string, unknown>> {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

const endpoints = [{ method: 'GET', path: '/items/{id}' }];
/** Headers the upstream received, by request path. */
const upstreamSaw = new Map<string, IncomingHttpHeaders>();
const upstream = await startUpstream(t, {
  name: 'app',
  handle(req, res) {
    upstreamSaw.set(req.url!, req.headers);
    res.writeHead(req.url === '/items/404' ? 404 : 200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  },
});
const GENERATED = /^[0-9a-f]{16}-[0-9a-z]+$/;

t.test('from a trusted peer: IDs kept, traces continued, spans exported, every answer and line carries the ID', async (t) => {
  const dir = tempDir(t);
  const logFile = join(dir, 'access.log');
  const receiver = await startOtlpReceiver(t);
  // Nothing listens there: the upstream of /dead/{id} refuses every connection.
  const deadPort = await findFreePort('127.0.0.1');
  const gateway = await startGateway(t, {
    config: testConfig(
      [
        { serviceType: 'static', serviceLocation: upstream.location, endpoints },
        { serviceType: 'static', serviceLocation: `http://127.0.0.1:${deadPort}`, endpoints: [{ method: 'GET', path: '/dead/{id}' }] },
      ],
      {
        trustedProxies: ['127.0.0.1'],
        accessLog: { enabled: true, destination: logFile },
        tracing: { otlpEndpoint: receiver.url, sampleRatio: 1, serviceName: 'gw-under-test' },
      },
    ),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
  });

  const made = await httpRequest(gateway.port, '/items/1?color=red', { headers: { 'user-agent': 'observe-test/1' } });
  t.equal(made.status, 200);
  const madeId = made.headers['x-request-id'] as string;
  t.match(madeId, GENERATED, 'an ID is made when none came');
  t.equal(upstreamSaw.get('/items/1?color=red')!['x-request-id'], madeId, 'and forwarded upstream');

  const kept = await httpRequest(gateway.port, '/items/2', { headers: { 'x-request-id': 'client-chose-this' } });
  t.equal(kept.headers['x-request-id'], 'client-chose-this', "a trusted peer's ID is kept");
  t.equal(upstreamSaw.get('/items/2')!['x-request-id'], 'client-chose-this');

  const tooLong = await httpRequest(gateway.port, '/items/3', { headers: { 'x-request-id': 'x'.repeat(201) } });
  t.match(tooLong.headers['x-request-id'], GENERATED, 'an ID over 200 characters is replaced');

  const missing = await httpRequest(gateway.port, '/nowhere');
  t.equal(missing.status, 404);
  t.match(missing.headers['content-type'], /problem\+json/);
  t.match(missing.headers['x-request-id'], GENERATED, 'a problem+json answer carries one');
  const health = await httpRequest(gateway.port, '/healthcheck');
  t.match(health.headers['x-request-id'], GENERATED, 'a built-in answer carries one');

  const callerTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
  const callerSpan = '00f067aa0ba902b7';
  const traced = await httpRequest(gateway.port, '/items/4', {
    headers: { traceparent: `00-${callerTrace}-${callerSpan}-01`, tracestate: 'congo=t61rcWkgMzE' },
  });
  t.equal(traced.status, 200);
  const sent = upstreamSaw.get('/items/4')!;
  const [version, traceId, parentId, flags] = String(sent.traceparent).split('-');
  t.equal(version, '00');
  t.equal(traceId, callerTrace, 'the trace goes on with the same trace id');
  t.not(parentId, callerSpan, 'with a new parent id');
  t.match(parentId, /^[0-9a-f]{16}$/);
  t.equal(flags, '01', 'still sampled');
  t.equal(sent.tracestate, 'congo=t61rcWkgMzE', 'tracestate passed on');

  const started = upstreamSaw.get('/items/1?color=red')!;
  t.match(started.traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/, 'without one the gateway starts a trace (sampled at ratio 1)');
  const badTrace = await httpRequest(gateway.port, '/items/5', { headers: { traceparent: `00-${callerTrace.toUpperCase()}-${callerSpan}-01`, tracestate: 'a=b' } });
  t.equal(badTrace.status, 200);
  t.not(String(upstreamSaw.get('/items/5')!.traceparent).split('-')[1], callerTrace.toUpperCase(), 'an invalid traceparent starts a new trace');
  t.equal(upstreamSaw.get('/items/5')!.tracestate, undefined, 'and its tracestate is dropped');
  const otherTrace = '0af7651916cd43dd8448eb211c80319c';
  const badState = await httpRequest(gateway.port, '/items/6', { headers: { traceparent: `00-${otherTrace}-${callerSpan}-01`, tracestate: 'foo=1,foo=2' } });
  t.equal(badState.status, 200);
  t.equal(String(upstreamSaw.get('/items/6')!.traceparent).split('-')[1], otherTrace, 'a valid traceparent is continued when its tracestate is invalid');
  t.equal(upstreamSaw.get('/items/6')!.tracestate, undefined, 'and that tracestate (a key twice) is not passed on');

  // The access log file.
  // Each worker flushes its own lines: wait for every request's line, not for a count of them.
  const logged = ['/items/1', '/items/2', '/items/3', '/items/4', '/items/5', '/items/6', '/nowhere', '/healthcheck'];
  const lines = await eventually(
    async () => {
      const lines = readLines(logFile);
      return logged.every((path) => lines.some((line) => line.path === path)) ? lines : undefined;
    },
    5000,
    50,
    `an access line for each of ${logged.join(', ')}`,
  );
  const byPath = (path: string) => lines.find((line) => line.path === path)!;
  t.match(byPath('/items/1'), {
    requestId: madeId,
    query: 'color=red',
    userAgent: 'observe-test/1',
    consumer: null,
    cache: null,
    traceId: String(started.traceparent).split('-')[1],
    upstream: upstream.location,
    endpoint: '/items/{id}',
  });
  t.type(byPath('/items/1').upstreamMs, 'number');
  t.ok((byPath('/items/1').upstreamMs as number) <= (byPath('/items/1').latencyMs as number), 'upstreamMs is within latencyMs');
  t.equal(byPath('/items/2').requestId, 'client-chose-this');
  t.match(byPath('/nowhere'), { status: 404, requestId: missing.headers['x-request-id'], upstreamMs: null });
  t.equal(byPath('/items/4').traceId, callerTrace);

  // The spans.
  const server = await eventually(
    async () => receiver.spans.find((s) => s.traceId === callerTrace && s.kind === 2),
    8000,
    100,
    'the server span of the traced request',
  );
  t.ok(receiver.services.has('gw-under-test'), 'service.name from the config');
  t.equal(server.name, 'GET /items/{id}', 'named by the route template');
  t.equal(server.parentSpanId, callerSpan, "the caller's span is its parent");
  t.equal(attribute(server, 'http.request.method'), 'GET');
  t.equal(attribute(server, 'http.route'), '/items/{id}');
  t.equal(attribute(server, 'server.address'), '127.0.0.1', "the client's Host");
  t.equal(attribute(server, 'server.port'), gateway.port);
  t.equal(attribute(server, 'url.path'), '/items/4');
  t.equal(attribute(server, 'http.response.status_code'), 200);
  t.equal(attribute(server, 'gateway.request_id'), traced.headers['x-request-id']);
  const client = await eventually(async () => receiver.spans.find((s) => s.traceId === callerTrace && s.kind === 3), 5000, 100, 'the client span');
  t.equal(client.parentSpanId, server.spanId, 'the upstream call is a child of the server span');
  t.equal(client.spanId, parentId, 'whose id is the parent id the upstream saw');
  t.equal(attribute(client, 'server.port'), upstream.port);
  t.ok(BigInt(client.startTimeUnixNano) >= BigInt(server.startTimeUnixNano) && BigInt(client.endTimeUnixNano) <= BigInt(server.endTimeUnixNano), 'inside the server span');
  const notFound = await eventually(async () => receiver.spans.find((s) => attribute(s, 'url.path') === '/nowhere'), 5000, 100, 'the 404 span');
  t.equal(notFound.name, 'GET', 'no route: named by the method alone');
  t.equal(attribute(notFound, 'http.response.status_code'), 404);

  // The client span tells what the upstream did, not what the client got.
  t.equal((await httpRequest(gateway.port, '/dead/1')).status, 502);
  const refused = await eventually(async () => receiver.spans.find((s) => s.kind === 3 && attribute(s, 'url.full') === `http://127.0.0.1:${deadPort}/dead/1`), 5000, 100, 'the client span of /dead/1');
  t.equal(attribute(refused, 'http.response.status_code'), undefined, 'the upstream never answered: no status code');
  t.equal(attribute(refused, 'error.type'), 'connect_refused', 'error.type says why the call failed');
  t.equal(refused.status?.code, 2, 'ERROR');
  t.equal((await httpRequest(gateway.port, '/items/404')).status, 404);
  const upstream404 = await eventually(async () => receiver.spans.find((s) => s.kind === 3 && attribute(s, 'url.full') === `${upstream.location}/items/404`), 5000, 100, 'the client span of /items/404');
  t.equal(attribute(upstream404, 'http.response.status_code'), 404);
  t.equal(attribute(upstream404, 'error.type'), '404');
  t.equal(upstream404.status?.code, 2, 'a 4xx from the upstream is an error of the client span');
  const server404 = receiver.spans.find((s) => s.kind === 2 && s.spanId === upstream404.parentSpanId)!;
  t.equal(server404.status?.code ?? 0, 0, 'but not of the server span');
});

t.test('from an untrusted peer an incoming ID is replaced; with the collector down requests go on and drops are counted', async (t) => {
  // A port that was free a moment ago: nothing listens there.
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const deadPort = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints }], {
      accessLog: { enabled: true },
      tracing: { otlpEndpoint: `http://127.0.0.1:${deadPort}/v1/traces`, sampleRatio: 1 },
    }),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
  });
  const answer = await httpRequest(gateway.port, '/items/10', { headers: { 'x-request-id': 'spoofed' } });
  t.match(answer.headers['x-request-id'], GENERATED, "an untrusted peer's ID is replaced");
  t.equal(upstreamSaw.get('/items/10')!['x-request-id'], answer.headers['x-request-id'], 'upstream gets the replacement');
  const line = await eventually(async () => gateway.accessLines().find((l) => l.path === '/items/10'), 10_000, 50, 'its access line');
  t.equal(line.requestId, answer.headers['x-request-id'], 'logged on stdout too');

  const N = 200;
  const statuses: number[] = [];
  for (let i = 0; i < N; i += 20) {
    const batch = await Promise.all(Array.from({ length: 20 }, (_, j) => httpRequest(gateway.port, `/items/${100 + i + j}`)));
    statuses.push(...batch.map((r) => r.status));
  }
  t.equal(statuses.filter((s) => s === 200).length, N, 'every request answered while the collector is down');
  const dropped = await eventually(
    async () => {
      const metrics = JSON.parse((await httpRequest(gateway.port, '/metrics')).body) as { tracing?: { spansDropped?: number } };
      const count = metrics.tracing?.spansDropped ?? 0;
      return count >= N * 2 ? count : undefined;
    },
    20_000,
    250,
    'dropped spans counted in /metrics',
  );
  t.ok(dropped >= N * 2, `${dropped} spans counted as dropped (server and client span of each request)`);
  t.ok(gateway.lines.some((l) => typeof l.msg === 'string' && l.msg.startsWith('span export failed')), 'and a warning logged');
});

t.test('SIGUSR1 reopens the access log file: a rotation under load loses no line', async (t) => {
  const dir = tempDir(t);
  const logFile = join(dir, 'access.log');
  const rotated = join(dir, 'access.log.1');
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints }], {
      accessLog: { enabled: true, destination: logFile },
    }),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
  });
  let sent = 0;
  let rotatedAt = -1;
  const load = async (worker: number): Promise<void> => {
    for (let i = 0; i < 150; i++) {
      const answer = await httpRequest(gateway.port, `/items/rot-${worker}-${i}`);
      if (answer.status === 200) sent++;
      if (worker === 0 && i === 60) {
        renameSync(logFile, rotated);
        rotatedAt = sent;
        gateway.signal('SIGUSR1');
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, (_, w) => load(w)));
  t.ok(rotatedAt > 0, 'rotated while requests were running');
  await gateway.waitForLog((l) => l.msg === 'SIGUSR1: workers reopen their log files', 10_000);
  gateway.signal('SIGTERM');
  t.same(await gateway.exited, { code: 0, signal: null });
  const before = readLines(rotated).filter((l) => String(l.path).startsWith('/items/rot-'));
  const after = readLines(logFile).filter((l) => String(l.path).startsWith('/items/rot-'));
  t.ok(before.length > 0, `${before.length} lines in the rotated file`);
  t.ok(after.length > 0, `${after.length} lines in the reopened file`);
  t.equal(before.length + after.length, sent, 'every request has its line, in one file or the other');
  t.equal(new Set([...before, ...after].map((l) => l.path)).size, sent, 'each once');
});

t.test('an access log that cannot be written says so in a JSON error line, and requests go on', async (t) => {
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints }], {
      accessLog: { enabled: true, destination: '/dev/full' },
    }),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  t.equal((await httpRequest(gateway.port, '/items/full-1')).status, 200);
  const line = await gateway.waitForLog((l) => typeof l.msg === 'string' && l.msg.includes('lines are dropped until it works again'), 5000, 'the error line');
  t.equal(line.level, 50, 'at error level, on stdout with the other log lines');
  t.match(line.msg, 'writing to /dev/full failed (ENOSPC)');
  t.equal((await httpRequest(gateway.port, '/items/full-2')).status, 200, 'and requests are still served');
});

t.test('with middleware: consumer and cache status logged, a middleware span exported', async (t) => {
  const dir = tempDir(t);
  const logFile = join(dir, 'access.log');
  const receiver = await startOtlpReceiver(t);
  const key = 'observe-key-0123456789';
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints }], {
      accessLog: { enabled: true, destination: logFile },
      tracing: { otlpEndpoint: receiver.url, sampleRatio: 1 },
      middleware: [
        { id: 'auth', type: 'apiKeyAuth', header: 'x-api-key', keys: [{ consumer: 'acme', sha256: createHash('sha256').update(key).digest('hex') }] },
        { id: 'cache', type: 'responseCache', store: 'local', defaultTtlMs: 60_000 },
      ],
    }),
    workers: 1,
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
  });
  const first = await httpRequest(gateway.port, '/items/mw', { headers: { 'x-api-key': key } });
  t.equal(first.headers['x-cache'], 'MISS');
  // The entry is stored once the answer is over: asked again until it is served from the cache.
  const second = await eventually(
    async () => {
      const answer = await httpRequest(gateway.port, '/items/mw', { headers: { 'x-api-key': key } });
      return answer.headers['x-cache'] === 'HIT' ? answer : undefined;
    },
    5000,
    50,
    'a cache hit',
  );
  const refused = await httpRequest(gateway.port, '/items/mw');
  t.same([first.status, second.status, refused.status], [200, 200, 401]);
  t.not(second.headers['x-request-id'], first.headers['x-request-id'], 'a cache hit gets its own request ID');
  t.match(refused.headers['x-request-id'], GENERATED, "a middleware's refusal carries one");
  const lines = await eventually(
    async () => {
      const lines = readLines(logFile);
      // Each worker flushes its own lines: wait for all three.
      const ids = [first, second, refused].map((answer) => answer.headers['x-request-id']);
      return ids.every((id) => lines.some((l) => l.requestId === id)) ? lines : undefined;
    },
    5000,
    50,
    'the access lines of the three requests',
  );
  const byId = (answer: { headers: IncomingHttpHeaders }) => lines.find((l) => l.requestId === answer.headers['x-request-id'])!;
  t.match(byId(first), { consumer: 'acme', cache: 'MISS', status: 200 });
  t.type(byId(first).upstreamMs, 'number');
  t.match(byId(second), { consumer: 'acme', cache: 'HIT', status: 200, upstreamMs: null });
  t.match(byId(refused), { consumer: null, status: 401 });

  const traceOf = (answer: { headers: IncomingHttpHeaders }) => byId(answer).traceId as string;
  const spansOf = async (answer: { headers: IncomingHttpHeaders }, count: number) =>
    eventually(
      async () => {
        const spans = receiver.spans.filter((s) => s.traceId === traceOf(answer));
        return spans.length >= count ? spans : undefined;
      },
      8000,
      100,
      `${count} spans`,
    );
  const missSpans = await spansOf(first, 3);
  const server = missSpans.find((s) => s.kind === 2)!;
  const middleware = missSpans.find((s) => s.name === 'middleware')!;
  t.ok(middleware, 'a middleware span');
  t.equal(middleware.parentSpanId, server.spanId, 'child of the server span');
  t.ok(missSpans.some((s) => s.kind === 3 && s.parentSpanId === server.spanId), 'and the upstream call');
  const hitSpans = await spansOf(second, 2);
  t.same(hitSpans.map((s) => s.name).sort(), ['GET /items/{id}', 'middleware'], 'a hit: no upstream span');
});
