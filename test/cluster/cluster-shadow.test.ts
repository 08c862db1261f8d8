// Shadow traffic through the running gateway (2 workers): a listener configured in `listeners` sends
// every sampled request to the alternate, counts matches and mismatches in /metrics, logs mismatches,
// and is listed ready in the health report.
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

const dir = mkdtempSync(join(tmpdir(), 'specgate-shadow-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const log = join(dir, 'mismatches.jsonl');

const primary = await startUpstream(t, {
  name: 'primary',
  handle: (req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id: req.url, version: 1, tags: ['a', 'b'] }));
  },
});
const alternate = await startUpstream(t, {
  name: 'alternate',
  handle: (req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    // Key order differs (a match); /items/changed has another value (a mismatch).
    res.end(JSON.stringify({ tags: ['a', 'b'], version: req.url === '/items/changed' ? 2 : 1, id: req.url }));
  },
});

const gateway = await startGateway(t, {
  config: testConfig([{ serviceType: 'static', serviceLocation: primary.location, endpoints: [{ method: 'GET', path: '/items/{id}' }, { method: 'POST', path: '/items' }] }], {
    accessLog: { enabled: false },
    listeners: [{ id: 'shadow', type: 'alternateUpstream', serviceLocation: alternate.location, sample: 1, mismatchLog: log }],
  }),
  waitFor: (line) => line.msg === 'gateway operational',
});

t.test('the listener is ready; sampled GETs are compared, POST is not sent', async (t) => {
  const health = JSON.parse((await httpRequest(gateway.port, '/healthcheck')).body);
  t.same(health.listeners, { pending: [], ready: ['shadow'] });
  for (let i = 0; i < 6; i++) t.equal((await httpRequest(gateway.port, `/items/${i}`)).status, 200);
  t.equal((await httpRequest(gateway.port, '/items/changed')).status, 200, 'the client gets the primary\'s answer');
  t.equal((await httpRequest(gateway.port, '/items', { method: 'POST', body: '{}' })).status, 200);
  const counts = await eventually(async () => {
    const body = JSON.parse((await httpRequest(gateway.port, '/metrics')).body) as { listeners?: { shadow?: Record<string, number> } };
    const shadow = body.listeners?.shadow;
    return shadow !== undefined && (shadow.matched ?? 0) + (shadow.mismatched ?? 0) >= 7 ? shadow : undefined;
  }, 5000);
  t.equal(counts.sent, 7, 'the 7 GETs sent, the POST not');
  t.equal(counts.matched, 6, 'other key order: a match');
  t.equal(counts.mismatched, 1);
  t.equal(alternate.seen.get('POST /items'), undefined, 'the alternate never saw the POST');
  const lines = await eventually(async () => {
    const text = readFileSync(log, 'utf8').trim();
    return text === '' ? undefined : text.split('\n').map((line) => JSON.parse(line));
  }, 10_000);
  t.equal(lines.length, 1);
  t.match(lines[0], { listener: 'shadow', request: { method: 'GET', path: '/items/changed' } });
});

t.test('SIGUSR1 to the primary: the mismatch log is opened again (logrotate without copytruncate)', async (t) => {
  const rotated = `${log}.1`;
  renameSync(log, rotated);
  gateway.signal('SIGUSR1');
  await gateway.waitForLog((l) => l.msg === 'SIGUSR1: workers reopen their log files', 10_000);
  // Each worker reopens when the primary's message reaches it: ask until a mismatch lands in the new file.
  const lines = await eventually(async () => {
    t.equal((await httpRequest(gateway.port, '/items/changed')).status, 200);
    if (!existsSync(log)) return undefined;
    const text = readFileSync(log, 'utf8').trim();
    return text === '' ? undefined : text.split('\n').map((line) => JSON.parse(line));
  }, 5000);
  t.match(lines[0], { listener: 'shadow', request: { path: '/items/changed' } }, 'a new mismatch goes to the new file');
  t.equal(readFileSync(rotated, 'utf8').trim().split('\n').length >= 1, true, 'the rotated one keeps what it had');
});
