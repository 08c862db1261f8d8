// An answer that began and did not reach the client whole says so in its access-log line (`"cut":true`):
// the upstream going away mid-body, or the client leaving mid-download. A whole answer's line has no
// `cut` (docs/observability-tracing.md, the access log's fields).
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { rawRequest } from '../helpers/raw-http.js';

const dir = mkdtempSync(join(tmpdir(), 'specgate-access-cut-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const logFile = join(dir, 'access.log');

const upstream = await startUpstream(t, {
  name: 'app',
  handle(req, res) {
    if (req.url === '/items/dies') {
      // Promises 100,000 bytes, sends 1,000, goes away.
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': '100000' });
      res.write(Buffer.alloc(1000, 97));
      setTimeout(() => res.socket?.destroy(), 50);
      return;
    }
    if (req.url === '/items/endless') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const timer = setInterval(() => res.write('data: tick\n\n'), 20);
      res.on('close', () => clearInterval(timer));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  },
});

const gateway = await startGateway(t, {
  config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }], {
    accessLog: { enabled: true, destination: logFile },
  }),
  waitFor: (line) => line.msg === 'gateway operational',
  startTimeoutMs: 60_000,
});

function lineFor(path: string): Promise<Record<string, unknown>> {
  return eventually(
    async () => {
      if (!existsSync(logFile)) return undefined;
      const lines = readFileSync(logFile, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>);
      return lines.find((l) => l.path === path);
    },
    5000,
    50,
    `the access line of ${path}`,
  );
}

t.test('a whole answer: no cut', async (t) => {
  t.equal((await httpRequest(gateway.port, '/items/whole')).status, 200);
  const line = await lineFor('/items/whole');
  t.notOk('cut' in line);
});

t.test('the upstream goes away mid-body: the client sees a short answer, the line says cut', async (t) => {
  const result = await rawRequest(gateway.port, 'GET /items/dies HTTP/1.1\r\nHost: gw\r\n\r\n', { waitMs: 5000 });
  t.equal(result.responses[0]?.status, 200);
  t.notOk(result.responses[0]?.complete, 'the client can tell');
  const line = await lineFor('/items/dies');
  t.equal(line.status, 200, 'the status the answer began with');
  t.equal(line.cut, true);
  t.ok((line.bytesOut as number) < 100_000);
});

t.test('the client leaves mid-stream: the line says cut', async (t) => {
  await new Promise<void>((resolve) => {
    const socket = net.connect(gateway.port, '127.0.0.1', () => socket.write('GET /items/endless HTTP/1.1\r\nHost: gw\r\n\r\n'));
    let seen = 0;
    socket.on('data', (chunk) => {
      seen += chunk.length;
      if (seen > 200) socket.destroy();
    });
    socket.on('close', () => resolve());
  });
  const line = await lineFor('/items/endless');
  t.equal(line.cut, true);
});
