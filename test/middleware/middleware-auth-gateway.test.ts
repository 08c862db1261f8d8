// apiKeyAuth through the real gateway process (docs/reference/api-key-auth.md#on-every-endpoint): what the upstream
// gets and what the access log and spans show on every endpoint, not only where the middleware runs
// (auth-disabled endpoints, WebSocket upgrades, 404s, built-ins), with two apiKeyAuth entries.
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { closed, openClient, startWsUpstream } from '../helpers/ws-upstream.js';

const digest = (key: string): string => createHash('sha256').update(key).digest('hex');
const ALICE = 'alice-key-0123';
const PARTNER = 'partner-key-4567';

/** What the upstream got, by path (with its query). */
const saw = new Map<string, IncomingHttpHeaders>();
const upstream = await startUpstream(t, {
  name: 'app',
  handle(req, res) {
    saw.set(req.url!, req.headers);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  },
});
const ws = await startWsUpstream(t);
const dir = mkdtempSync(join(tmpdir(), 'specgate-auth-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const logFile = join(dir, 'access.log');
const receiver = await startOtlpReceiver(t);

const gateway = await startGateway(t, {
  config: testConfig(
    [
      {
        serviceType: 'static',
        serviceLocation: upstream.location,
        endpoints: [
          { method: 'GET', path: '/items/{id}', 'x-disabled-middleware': ['partner'] },
          { method: 'GET', path: '/partner/{id}', 'x-disabled-middleware': ['auth'] },
          { method: 'GET', path: '/open/{id}', 'x-disabled-middleware': ['auth', 'partner'] },
        ],
      },
      { serviceType: 'static', serviceLocation: ws.location, endpoints: [{ method: 'GET', path: '/ws/open', 'x-disabled-middleware': ['auth', 'partner'] }] },
    ],
    {
      accessLog: { enabled: true, destination: logFile },
      tracing: { otlpEndpoint: receiver.url, sampleRatio: 1 },
      middleware: [
        { id: 'auth', type: 'apiKeyAuth', query: 'api_key', keys: [{ consumer: 'alice', sha256: digest(ALICE) }] },
        { id: 'partner', type: 'apiKeyAuth', header: 'x-partner-key', query: 'token', hideCredentials: false, keys: [{ consumer: 'partner-co', sha256: digest(PARTNER) }] },
      ],
    },
  ),
  workers: 1,
  waitFor: (line) => line.msg === 'gateway operational',
  startTimeoutMs: 60_000,
});

/** The access log line of the answer (by its request ID), once written. */
async function logged(answer: { headers: IncomingHttpHeaders }): Promise<Record<string, unknown>> {
  const id = answer.headers['x-request-id'];
  return eventually(
    async () => {
      if (!existsSync(logFile)) return undefined;
      const lines = readFileSync(logFile, 'utf8').split('\n').filter((l) => l !== '');
      return lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.requestId === id);
    },
    5000,
    50,
    `the access line of ${String(id)}`,
  );
}

t.test('an auth-disabled endpoint: no client X-Consumer, no hidden key (header or query) reaches the upstream', async (t) => {
  const answer = await httpRequest(gateway.port, `/open/1?api_key=${ALICE}&keep=1&token=${PARTNER}`, {
    headers: { 'x-consumer': 'admin', 'x-api-key': ALICE, 'x-partner-key': PARTNER },
  });
  t.equal(answer.status, 200);
  const headers = saw.get(`/open/1?keep=1&token=${PARTNER}`);
  t.ok(headers, 'the hidden query key is gone, the not-hidden one (hideCredentials false) stays');
  t.equal(headers?.['x-consumer'], undefined, "the client's X-Consumer is removed");
  t.equal(headers?.['x-api-key'], undefined, 'the hidden key header is removed');
  t.equal(headers?.['x-partner-key'], PARTNER, 'a key header with hideCredentials false is forwarded');
  const line = await logged(answer);
  t.equal(line.query, 'keep=1', 'neither query key is in the access log');
  t.equal(line.consumer, null);
});

t.test('where one entry runs, the other entry hides its key too; the consumer is the one that admitted', async (t) => {
  const answer = await httpRequest(gateway.port, `/partner/2?token=${PARTNER}&api_key=${ALICE}`, { headers: { 'x-consumer': 'admin', 'x-api-key': ALICE } });
  t.equal(answer.status, 200);
  const headers = saw.get(`/partner/2?token=${PARTNER}`);
  t.ok(headers, 'forwarded with its own (not hidden) key, without the other entry\'s hidden one');
  t.equal(headers?.['x-consumer'], 'partner-co');
  t.equal(headers?.['x-api-key'], undefined);
  const line = await logged(answer);
  t.equal(line.query, '', 'a forwarded query key is not logged either');
  t.equal(line.consumer, 'partner-co');
  const spans = await eventually(
    async () => {
      const found = receiver.spans.filter((s) => s.traceId === line.traceId);
      return found.length >= 2 ? found : undefined;
    },
    8000,
    100,
    'the spans',
  );
  const urls = spans.flatMap((s) => s.attributes.filter((a) => a.key.startsWith('url.')).map((a) => String(a.value.stringValue ?? '')));
  t.ok(urls.some((u) => u.endsWith('/partner/2')), `the upstream call's url.full has no key: ${urls.join(' ')}`);
  t.notOk(urls.some((u) => u.includes(PARTNER) || u.includes(ALICE)), 'no span attribute holds a key');
});

t.test('a query key is never logged, whatever the answer, in whatever spelling', async (t) => {
  const cases: Array<[string, number, string]> = [
    [`/nowhere?api_key=${ALICE}&x=1`, 404, 'x=1'],
    [`/healthcheck?api_key=${ALICE}`, 200, ''],
    [`/items/1?api_key=%ZZ&api_key=${ALICE}`, 401, ''],
    [`/items/1?token=${PARTNER}&b=2&token=${PARTNER}`, 401, 'b=2'],
    [`/items/2?api%5Fkey=${ALICE}`, 200, ''],
  ];
  for (const [path, status, query] of cases) {
    const answer = await httpRequest(gateway.port, path);
    t.equal(answer.status, status, path);
    t.equal((await logged(answer)).query, query, `${path}: logged query`);
  }
  t.ok(saw.has('/items/2'), 'an encoded name is the same parameter: read as the key, and hidden');
  t.equal(saw.get('/items/2')?.['x-consumer'], 'alice');
});

t.test('an empty key header is no header: the query key is read', async (t) => {
  const answer = await httpRequest(gateway.port, `/items/3?api_key=${ALICE}`, { headers: { 'x-api-key': '' } });
  t.equal(answer.status, 200);
  t.equal(saw.get('/items/3')?.['x-consumer'], 'alice');
  t.equal(saw.get('/items/3')?.['x-api-key'], undefined, 'the empty header is not forwarded either');
});

t.test('a WebSocket upgrade to an auth-disabled endpoint: no client X-Consumer or hidden key upstream', async (t) => {
  const client = await openClient(`ws://127.0.0.1:${gateway.port}/ws/open?api_key=${ALICE}&v=1`, [], { 'x-consumer': 'admin', 'x-api-key': ALICE });
  const handshake = ws.handshakes.at(-1)!;
  t.equal(handshake.url, '/ws/open?v=1');
  t.equal(handshake.headers['x-consumer'], undefined);
  t.equal(handshake.headers['x-api-key'], undefined);
  client.close(1000);
  await closed(client);
});
