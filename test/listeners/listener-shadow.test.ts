// alternateUpstream (docs/reference/listeners.md#alternateupstream): shadow traffic through a real data plane, a real primary
// upstream and a real alternate upstream. What the alternate gets, how answers are compared, what is
// counted and logged, and that the client never waits for the alternate.
import { mkdtempSync, readFileSync, existsSync, rmSync } from 'node:fs';
import http from 'node:http';
import { Readable } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { gzipSync, constants as zlibConstants } from 'node:zlib';
import t from 'tap';
import { Agent, request } from 'undici';
import { buildListeners, type Listener, type ListenerConfig } from '../../src/listeners/registry.js';
import { ALTERNATE_UPSTREAM_DEFAULTS } from '../../src/listeners/alternate-upstream.js';
import { afterBody, entry, startUpstream, type UpstreamHandler } from '../helpers/upstream-server.js';
import { planeInFrontOf } from '../helpers/data-plane.js';

const primary = await startUpstream();
const alternate = await startUpstream();
t.teardown(() => primary.close());
t.teardown(() => alternate.close());
const plane = await planeInFrontOf(t, primary.url, [entry('GET', '/items/{id}', primary.url), entry('POST', '/items', primary.url), entry('PUT', '/items/{id}', primary.url)], { config: { limits: { maxBodyBytes: 4 * 1024 * 1024 } } });
const client = new Agent({ connections: 4 });
t.teardown(() => client.close());
const dir = mkdtempSync(join(tmpdir(), 'specgate-shadow-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** Counters one listener reported through metrics.add. */
class Counts {
  readonly values = new Map<string, number>();
  readonly warnings: string[] = [];
  constructor(private readonly id: string) {}
  add = (name: string, n = 1): void => {
    this.values.set(name, (this.values.get(name) ?? 0) + n);
  };
  get(counter: string): number {
    return this.values.get(`listeners.${this.id}.${counter}`) ?? 0;
  }
  /** Shadow requests whose outcome is known. */
  get settled(): number {
    return this.get('matched') + this.get('mismatched') + this.get('errors');
  }
}

let logCounter = 0;
const active: Listener[] = [];
t.afterEach(async () => {
  plane.setListeners([]);
  await Promise.all(active.splice(0).map((listener) => listener.close()));
  primary.setHandler(json(200, { ok: true }));
  alternate.setHandler(json(200, { ok: true }));
});

/** A listener on the data plane, with its counts and its own mismatch log file. */
async function shadow(options: Partial<ListenerConfig> = {}, id = 'shadow'): Promise<{ counts: Counts; log: string; listener: Listener }> {
  const counts = new Counts(id);
  const log = join(dir, `mismatches-${++logCounter}.jsonl`);
  const config: ListenerConfig = {
    id,
    type: 'alternateUpstream',
    serviceLocation: alternate.url,
    ...ALTERNATE_UPSTREAM_DEFAULTS,
    methods: [...ALTERNATE_UPSTREAM_DEFAULTS.methods],
    ignoreHeaders: [...ALTERNATE_UPSTREAM_DEFAULTS.ignoreHeaders],
    sample: 1,
    mismatchLog: log,
    ...options,
  };
  const listener = buildListeners([config], { metrics: counts, warn: (message) => counts.warnings.push(message), seed: 7 })[0]!;
  await listener.ready();
  active.push(listener);
  plane.setListeners([listener]);
  return { counts, log, listener };
}

function json(status: number, value: unknown, headers: Record<string, string | string[]> = {}): UpstreamHandler {
  return (req, res, recorded) =>
    afterBody(req, recorded, () => {
      const body = typeof value === 'string' ? value : JSON.stringify(value);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...headers });
      res.end(body);
    });
}

async function call(path: string, init: { method?: string; headers?: Record<string, string>; body?: Buffer | Readable } = {}) {
  const response = await request(`http://127.0.0.1:${plane.port}${path}`, {
    dispatcher: client,
    method: (init.method ?? 'GET') as 'GET',
    headers: init.headers,
    body: init.body,
  });
  const body = Buffer.from(await response.body.arrayBuffer());
  return { status: response.statusCode, headers: response.headers, body };
}

async function until(what: string, condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function logLines(path: string): Array<Record<string, any>> {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line));
}

t.test('equal JSON with other key order counts as a match; the alternate gets what the primary got', async (t) => {
  const { counts, log } = await shadow();
  primary.setHandler(json(200, { id: 1, name: 'a', tags: ['x', 'y'], nested: { b: 2, a: [1, { d: 4, c: 3 }] } }));
  alternate.setHandler(json(200, '{ "nested": {"a": [1, {"c": 3, "d": 4}], "b": 2}, "tags": ["x","y"], "name": "a", "id": 1 }'));
  const answer = await call('/items/1?b=2&a=1', { headers: { 'x-custom': 'kept', accept: 'application/json' } });
  t.equal(answer.status, 200);
  await until('the comparison', () => counts.settled === 1);
  t.equal(counts.get('sent'), 1);
  t.equal(counts.get('matched'), 1);
  t.equal(counts.get('mismatched'), 0);
  t.same(logLines(log), [], 'no mismatch, no line');

  const primaryGot = primary.requests.at(-1)!;
  const alternateGot = alternate.requests.at(-1)!;
  t.equal(alternateGot.method, 'GET');
  t.equal(alternateGot.url, '/items/1?b=2&a=1', 'same path and raw query');
  t.equal(alternateGot.headers['x-custom'], 'kept');
  t.equal(alternateGot.headers['x-forwarded-for'], primaryGot.headers['x-forwarded-for'], 'the same client address');
  t.equal(alternateGot.headers['x-forwarded-host'], primaryGot.headers['x-forwarded-host']);
  t.equal(alternateGot.headers.via, primaryGot.headers.via);
  t.equal(alternateGot.headers.host, `127.0.0.1:${alternate.port}`, "the alternate's own Host");
});

t.test('a changed value is a mismatch, with one log line saying what differed', async (t) => {
  const { counts, log } = await shadow();
  primary.setHandler(json(200, { id: 7, price: 10, items: [{ sku: 'a' }, { sku: 'b' }] }, { etag: '"v1"' }));
  alternate.setHandler(json(200, { items: [{ sku: 'a' }, { sku: 'B' }], price: 10, id: 7 }, { etag: '"v2"' }));
  const answer = await call('/items/7?verbose=1', { headers: { accept: 'application/json', authorization: 'Bearer secret-token' } });
  t.same(JSON.parse(answer.body.toString()), { id: 7, price: 10, items: [{ sku: 'a' }, { sku: 'b' }] }, "the client got the primary's answer");
  await until('the comparison', () => counts.settled === 1);
  t.equal(counts.get('mismatched'), 1);
  await until('the log line', () => logLines(log).length === 1);
  const line = logLines(log)[0]!;
  t.equal(line.listener, 'shadow');
  t.equal(line.alternate, alternate.url);
  t.match(line.request, { method: 'GET', path: '/items/7', query: 'verbose=1', endpoint: 'GET /items/{id}', upstream: primary.url });
  t.equal(line.request.headers.accept, 'application/json');
  t.notOk('authorization' in line.request.headers, 'credentials are never logged');
  t.notOk(readFileSync(log, 'utf8').includes('secret-token'));
  t.same(line.status, { client: 200, alternate: 200 });
  t.same(line.differences, ['headers', 'body']);
  t.same(line.headers, [{ name: 'etag', client: ['"v1"'], alternate: ['"v2"'] }]);
  t.same(line.body, { kind: 'json', pointer: '/items/1/sku', client: '"b"', alternate: '"B"' });
  t.equal(line.truncated, false);
  t.ok(!Number.isNaN(Date.parse(line.time)));
});

t.test('a different status is a mismatch; a key only one side has is reported with null on the other', async (t) => {
  const { counts, log } = await shadow();
  primary.setHandler(json(200, { a: 1 }));
  alternate.setHandler(json(404, { a: 1, extra: true }));
  await call('/items/2');
  await until('the log line', () => logLines(log).length === 1);
  const line = logLines(log)[0]!;
  t.same(line.status, { client: 200, alternate: 404 });
  t.same(line.differences, ['status', 'body']);
  t.same(line.body, { kind: 'json', pointer: '/extra', client: null, alternate: 'true' });
  t.equal(counts.get('mismatched'), 1);
});

t.test('a slow alternate does not delay the client', async (t) => {
  const { counts } = await shadow({ timeoutMs: 30_000 });
  primary.setHandler(json(200, { fast: true }));
  const held: http.ServerResponse[] = [];
  alternate.setHandler((req, res, recorded) => afterBody(req, recorded, () => held.push(res)));
  const before = alternate.requests.length;

  const first = await call('/items/1');
  t.equal(first.status, 200);
  await until('the shadow request', () => held.length === 1);
  t.equal(alternate.requests.length, before + 1, 'the alternate holds the shadow request, unanswered');
  // The client's connection is free and the worker serves on while the alternate still holds it.
  const second = await call('/items/2');
  t.equal(second.status, 200);
  t.same(JSON.parse(second.body.toString()), { fast: true });
  await until('the second shadow request', () => held.length === 2);
  t.equal(counts.settled, 0, 'both comparisons are still waiting for the alternate');

  for (const res of held) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"fast":true}');
  }
  await until('the comparisons', () => counts.settled === 2);
  t.equal(counts.get('matched'), 2);
});

t.test('unlisted methods are not sent', async (t) => {
  const { counts } = await shadow({ methods: ['get'] });
  const before = alternate.requests.length;
  t.equal((await call('/items', { method: 'POST', body: Buffer.from('{"a":1}'), headers: { 'content-type': 'application/json' } })).status, 200);
  t.equal((await call('/items/3', { method: 'PUT', body: Buffer.from('x') })).status, 200);
  t.equal((await call('/items/3', { method: 'HEAD' })).status, 200, 'HEAD is not listed either');
  t.equal((await call('/items/4')).status, 200);
  await alternate.waitForRequests(before + 1);
  await until('the comparison', () => counts.settled === 1);
  t.equal(alternate.requests.length, before + 1, 'only the GET reached the alternate');
  t.equal(alternate.requests.at(-1)!.method, 'GET');
  t.equal(alternate.requests.at(-1)!.url, '/items/4');
  t.equal(counts.get('sent'), 1);
  t.equal(counts.get('dropped'), 0);
});

t.test('over maxInFlight is dropped and counted; a slot is free again once a comparison is over', async (t) => {
  const { counts } = await shadow({ maxInFlight: 2, timeoutMs: 30_000 });
  const held: http.ServerResponse[] = [];
  alternate.setHandler((req, res, recorded) => afterBody(req, recorded, () => held.push(res)));
  const before = alternate.requests.length;
  for (let i = 0; i < 5; i++) t.equal((await call(`/items/${i}`)).status, 200, 'every client is answered');
  await until('the shadow requests', () => held.length === 2);
  t.equal(alternate.requests.length, before + 2);
  t.equal(counts.get('dropped'), 3);
  t.equal(counts.get('sent'), 2);
  for (const res of held.splice(0)) res.end(JSON.stringify({ ok: true }));
  await until('the comparisons', () => counts.settled === 2);
  alternate.setHandler(json(200, { ok: true }));
  await call('/items/9');
  await until('the next comparison', () => counts.settled === 3);
  t.equal(counts.get('sent'), 3);
  t.equal(counts.get('dropped'), 3);
  t.equal(alternate.requests.length, before + 3);
  t.equal(alternate.requests.at(-1)!.url, '/items/9');
});

t.test('sample 0 sends nothing; sample 1 sends everything', async (t) => {
  const second = await startUpstream(json(200, { ok: true }));
  t.teardown(() => second.close());
  const never = new Counts('never');
  const always = new Counts('always');
  const base = { type: 'alternateUpstream' as const, ...ALTERNATE_UPSTREAM_DEFAULTS, methods: ['GET'], ignoreHeaders: [], mismatchLog: null };
  const listeners = buildListeners([{ ...base, id: 'never', serviceLocation: alternate.url, sample: 0 }], { metrics: never, warn: () => {} }).concat(
    buildListeners([{ ...base, id: 'always', serviceLocation: second.url, sample: 1 }], { metrics: always, warn: () => {} }),
  );
  active.push(...listeners);
  plane.setListeners(listeners);
  const before = alternate.requests.length;
  for (let i = 0; i < 20; i++) await call(`/items/${i}`);
  await until('every comparison', () => always.settled === 20);
  t.equal(always.get('sent'), 20);
  t.equal(always.get('matched'), 20);
  t.equal(second.requests.length, 20);
  t.equal(alternate.requests.length, before, 'sample 0: the alternate saw nothing');
  t.same([...never.values], [], 'nothing counted either');
});

t.test('a request body is replayed byte for byte; larger than maxBodyBytes is dropped', async (t) => {
  const { counts } = await shadow({ methods: ['POST'], maxBodyBytes: 256 * 1024 });
  const before = alternate.requests.length;
  const sized = randomBytes(200 * 1024);
  await call('/items', { method: 'POST', body: sized, headers: { 'content-type': 'application/octet-stream' } });
  await alternate.waitForRequests(before + 1);
  const got = alternate.requests.at(-1)!;
  await until('the whole body', () => got.bodyComplete);
  t.ok(got.body.equals(sized), 'the same bytes');
  t.equal(got.headers['content-length'], String(sized.length));
  t.equal(got.headers['content-type'], 'application/octet-stream');

  // Chunked from the client (no Content-Length): the alternate gets the same bytes, framed by length.
  const streamed = randomBytes(100 * 1024);
  await call('/items', { method: 'POST', body: Readable.from([streamed.subarray(0, 50_000), streamed.subarray(50_000)]) });
  await alternate.waitForRequests(before + 2);
  const got2 = alternate.requests.at(-1)!;
  await until('the whole body', () => got2.bodyComplete);
  t.ok(got2.body.equals(streamed));

  // Larger than maxBodyBytes: declared (dropped at routing) and streamed (dropped once known).
  await call('/items', { method: 'POST', body: randomBytes(300 * 1024) });
  await call('/items', { method: 'POST', body: Readable.from([randomBytes(200 * 1024), randomBytes(100 * 1024)]) });
  await until('the comparisons', () => counts.settled === 2);
  // A marker: the alternate sees it only after anything sent before it.
  const marker = Buffer.from('marker');
  await call('/items', { method: 'POST', body: marker });
  await until('the marker', () => counts.settled === 3);
  t.equal(alternate.requests.length, before + 3, 'the large bodies were not sent');
  t.ok(alternate.requests.at(-1)!.body.equals(marker));
  t.equal(counts.get('dropped'), 2);
  t.equal(counts.get('sent'), 3);
});

t.test('ignoreHeaders, header names in any case, repeated headers as lists', async (t) => {
  primary.setHandler(json(200, { a: 1 }, { 'x-build': '1', server: 'old', vary: ['accept', 'accept-encoding'], 'x-same': 'yes' }));
  alternate.setHandler(json(200, { a: 1 }, { 'X-Build': '2', Server: 'new', Vary: 'accept, accept-encoding', 'X-Same': 'yes' }));
  const ignoring = await shadow({ ignoreHeaders: ['X-BUILD', 'server'] });
  await call('/items/1');
  await until('the comparison', () => ignoring.counts.settled === 1);
  t.equal(ignoring.counts.get('matched'), 1, 'x-build and server ignored; vary equal as a list');
  plane.setListeners([]);

  const defaults = await shadow();
  await call('/items/1');
  await until('the comparison', () => defaults.counts.settled === 1);
  t.equal(defaults.counts.get('mismatched'), 1);
  await until('the log line', () => logLines(defaults.log).length === 1);
  const line = logLines(defaults.log)[0]!;
  t.same(line.headers, [{ name: 'x-build', client: ['1'], alternate: ['2'] }], 'server is ignored by default; x-build differs');
  t.same(line.differences, ['headers']);
});

t.test('an alternate that refuses connections, or answers too slowly, is counted as errors', async (t) => {
  const closed = http.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const port = (closed.address() as AddressInfo).port;
  await new Promise<void>((resolve) => closed.close(() => resolve()));

  const refused = await shadow({ serviceLocation: `http://127.0.0.1:${port}` });
  for (let i = 0; i < 3; i++) t.equal((await call(`/items/${i}`)).status, 200, 'the client is answered');
  await until('the errors', () => refused.counts.settled === 3);
  t.equal(refused.counts.get('errors'), 3);
  t.equal(refused.counts.get('sent'), 3);
  t.equal(refused.counts.warnings.length, 1, 'one warning, not one per failure');
  t.match(refused.counts.warnings[0], /ECONNREFUSED/);
  plane.setListeners([]);

  const held: http.ServerResponse[] = [];
  alternate.setHandler((req, res, recorded) => afterBody(req, recorded, () => held.push(res)));
  const slow = await shadow({ timeoutMs: 200 });
  await call('/items/1');
  await until('the timeout', () => slow.counts.settled === 1);
  t.equal(slow.counts.get('errors'), 1);
  t.match(slow.counts.warnings[0], /within 200 ms/);
  for (const res of held) res.destroy();
});

t.test('only answers that came whole from the upstream are compared', async (t) => {
  const { counts } = await shadow();
  primary.setHandler((req) => req.socket.destroy());
  const before = alternate.requests.length;
  t.equal((await call('/items/1')).status, 502);
  await until('the skip', () => counts.get('skipped') === 1);
  t.equal(counts.get('sent'), 0);
  primary.setHandler(json(200, { ok: true }));
  await call('/items/2');
  await until('the comparison', () => counts.settled === 1);
  t.equal(alternate.requests.length, before + 1);
  t.equal(alternate.requests.at(-1)!.url, '/items/2');
});

t.test('a HEAD served by GET goes to the alternate as GET; status and headers are compared, not bodies', async (t) => {
  const { counts } = await shadow();
  primary.setHandler(json(200, { body: 'primary' }, { 'x-kind': 'item' }));
  alternate.setHandler(json(200, { body: 'alternate, a different one' }, { 'x-kind': 'item' }));
  const answer = await call('/items/1', { method: 'HEAD' });
  t.equal(answer.status, 200);
  await until('the comparison', () => counts.settled === 1);
  t.equal(alternate.requests.at(-1)!.method, 'GET');
  t.equal(counts.get('matched'), 1);
});

t.test('compressed bodies are compared decoded', async (t) => {
  const value = { list: Array.from({ length: 200 }, (_, i) => ({ i, name: `item ${i}` })) };
  const reordered = { list: value.list.map(({ i, name }) => ({ name, i })) };
  const gzipped = (body: unknown, level: number): UpstreamHandler => (req, res, recorded) =>
    afterBody(req, recorded, () => {
      const bytes = gzipSync(JSON.stringify(body), { level, strategy: zlibConstants.Z_DEFAULT_STRATEGY });
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': String(bytes.length) });
      res.end(bytes);
    });
  primary.setHandler(gzipped(value, 1));
  alternate.setHandler(gzipped(reordered, 9));
  const { counts, log } = await shadow();
  await call('/items/1', { headers: { 'accept-encoding': 'gzip' } });
  await until('the comparison', () => counts.settled === 1);
  t.equal(counts.get('matched'), 1, 'other compressed bytes, same JSON value');

  alternate.setHandler(gzipped({ list: [...reordered.list.slice(0, 199), { name: 'changed', i: 199 }] }, 9));
  await call('/items/1', { headers: { 'accept-encoding': 'gzip' } });
  await until('the comparison', () => counts.settled === 2);
  await until('the log line', () => logLines(log).length === 1);
  t.same(logLines(log)[0]!.body, { kind: 'json', pointer: '/list/199/name', client: '"item 199"', alternate: '"changed"' });
});

t.test('an alternate body over maxBodyBytes is a mismatch (tooLarge), read no further', async (t) => {
  primary.setHandler(json(200, { small: true }));
  alternate.setHandler(json(200, { big: 'x'.repeat(10_000) }));
  const { counts, log } = await shadow({ maxBodyBytes: 1000 });
  await call('/items/1');
  await until('the log line', () => logLines(log).length === 1);
  t.equal(counts.get('mismatched'), 1);
  t.match(logLines(log)[0]!.body, { kind: 'tooLarge', limit: 1000 });

  // The client's answer over maxBodyBytes: nothing to compare it with, so nothing is sent.
  primary.setHandler(json(200, { big: 'x'.repeat(10_000) }));
  const before = alternate.requests.length;
  const answer = await call('/items/2');
  t.equal(answer.body.toString(), JSON.stringify({ big: 'x'.repeat(10_000) }), 'the client gets all of it');
  await until('the drop', () => counts.get('dropped') === 1);
  t.equal(counts.get('sent'), 1);
  t.equal(alternate.requests.length, before);
});

t.test('close: no more sampling; in-flight comparisons end first', async (t) => {
  const held: http.ServerResponse[] = [];
  alternate.setHandler((req, res, recorded) => afterBody(req, recorded, () => held.push(res)));
  const { counts, listener } = await shadow({ timeoutMs: 30_000 });
  await call('/items/1');
  await until('the shadow request', () => held.length === 1);
  let closed = false;
  const closing = listener.close().then(() => (closed = true));
  await call('/items/2');
  await new Promise((resolve) => setTimeout(resolve, 20));
  t.notOk(closed, 'close waits for the comparison in flight');
  held[0]!.writeHead(200, { 'content-type': 'application/json' });
  held[0]!.end('{"ok":true}');
  await closing;
  t.equal(counts.get('sent'), 1, 'nothing sampled after close');
  t.equal(counts.get('matched'), 1);
});

t.test('a mismatch log that cannot be opened: ready() rejects naming the listener and the path', async (t) => {
  const counts = new Counts('bad');
  const config: ListenerConfig = {
    id: 'bad',
    type: 'alternateUpstream',
    serviceLocation: alternate.url,
    ...ALTERNATE_UPSTREAM_DEFAULTS,
    methods: ['GET'],
    ignoreHeaders: [],
    mismatchLog: join(dir, 'no-such-dir', 'x.jsonl'),
  };
  const listener = buildListeners([config], { metrics: counts, warn: () => {} })[0]!;
  await t.rejects(listener.ready(), /listener "bad": mismatchLog: cannot open .*no-such-dir.*ENOENT/);
  await listener.close();
  t.throws(() => buildListeners([{ ...config, serviceLocation: 'http://a:1/path' }], { metrics: counts, warn: () => {} }), /serviceLocation.*has a path/);
});

t.test('a relative mismatchLog resolves against the working directory given', async (t) => {
  const counts = new Counts('rel');
  const config: ListenerConfig = {
    id: 'rel',
    type: 'alternateUpstream',
    serviceLocation: alternate.url,
    ...ALTERNATE_UPSTREAM_DEFAULTS,
    methods: ['GET'],
    ignoreHeaders: [],
    sample: 1,
    mismatchLog: 'relative.jsonl',
  };
  const listener = buildListeners([config], { metrics: counts, warn: () => {}, cwd: dir })[0]!;
  await listener.ready();
  active.push(listener);
  plane.setListeners([listener]);
  primary.setHandler(json(200, { v: 1 }));
  alternate.setHandler(json(200, { v: 2 }));
  await call('/items/1');
  await until('the log line', () => logLines(join(dir, 'relative.jsonl')).length === 1);
  t.equal(logLines(join(dir, 'relative.jsonl'))[0]!.listener, 'rel');
});
