// The access log's hand-built lines parse to what pino wrote for the same request (same keys, same
// order; latencyMs to the microsecond), stay ASCII whatever the path holds, and nothing buffered is
// lost on flush.
import { mkdtempSync, openSync, readFileSync, readSync, rmSync, closeSync, constants } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import fc from 'fast-check';
import t, { type Test } from 'tap';
import { ACCESS_LOG_FIELDS, createAccessLog, jsonString, type FinishedRequest } from '../../src/listeners/access-log.js';

const requests: FinishedRequest[] = [
  {
    method: 'GET',
    path: '/users/42',
    routeTemplate: '/users/{id}',
    upstream: 'http://127.0.0.1:9001',
    status: 200,
    latencyMs: 0.9476680000007036,
    bytesIn: 0,
    bytesOut: 94,
    clientAddress: '203.0.113.9',
    disabledListeners: [],
    query: 'q=1&r=%C3%A9',
    userAgent: 'curl/8.5.0',
    consumer: 'acme',
    requestId: '4bf92f3577b34da6-1a',
    traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    upstreamMs: 0.61234,
    upstreamHeaderMs: 0.40017,
    cache: 'MISS',
  },
  {
    method: 'POST',
    path: '/a"b\\c/\u0001\n\t/caf\u00e9/\u{1f600}/\u007f',
    routeTemplate: null,
    upstream: null,
    status: 404,
    latencyMs: 12,
    bytesIn: 5,
    bytesOut: 120,
    clientAddress: '::1',
    disabledListeners: ['other'],
  },
  {
    method: 'DELETE',
    path: '/x',
    routeTemplate: '/x',
    upstream: 'http://u',
    status: 499,
    latencyMs: Number.NaN,
    bytesIn: 0,
    bytesOut: 0,
    clientAddress: '10.0.0.1',
    disabledListeners: [],
  },
];

function pinoLine(workerId: number, request: FinishedRequest): Record<string, unknown> {
  let out = '';
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      out += chunk.toString('utf8');
      done();
    },
  });
  const logger = pino({ base: { pid: process.pid, role: 'worker', workerId, log: 'access' } }, sink);
  logger.info(
    {
      method: request.method,
      path: request.path,
      status: request.status,
      endpoint: request.routeTemplate,
      upstream: request.upstream,
      // The access log keeps microseconds.
      latencyMs: Number.isFinite(request.latencyMs) ? Math.round(request.latencyMs * 1000) / 1000 : request.latencyMs,
      bytesIn: request.bytesIn,
      bytesOut: request.bytesOut,
      client: request.clientAddress,
      query: request.query ?? '',
      userAgent: request.userAgent ?? null,
      consumer: request.consumer ?? null,
      requestId: request.requestId || null,
      traceId: request.traceId || null,
      upstreamMs: request.upstreamMs === undefined || request.upstreamMs < 0 ? null : Math.round(request.upstreamMs * 1000) / 1000,
      upstreamHeaderMs: request.upstreamHeaderMs === undefined || request.upstreamHeaderMs < 0 ? null : Math.round(request.upstreamHeaderMs * 1000) / 1000,
      cache: request.cache ?? null,
      ...(request.cut === true ? { cut: true } : {}),
    },
    'request',
  );
  return JSON.parse(out) as Record<string, unknown>;
}

/** An empty access.log in a fresh directory that is removed after the test. */
function tempLogFile(t: Test): { file: string; fd: number } {
  const dir = mkdtempSync(join(tmpdir(), 'specgate-access-log-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'access.log');
  return { file, fd: openSync(file, 'w') };
}

t.test('lines parse to what pino wrote, keys in the same order, ASCII only', async (t) => {
  const { file, fd } = tempLogFile(t);
  const log = createAccessLog({ workerId: 3, fd, flushIntervalMs: 10_000 });
  await log.ready;
  for (const request of requests) log.record(request);
  log.record({ ...requests[0]!, path: '/quiet', disabledListeners: ['accessLog'] });
  await log.flush();
  closeSync(fd);
  const text = readFileSync(file, 'latin1');
  t.match(text, /^[\x20-\x7e\n]*$/, 'ASCII only');
  const lines = text.trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
  t.equal(lines.length, requests.length, 'the disabled one is not logged');
  for (let i = 0; i < requests.length; i++) {
    const expected = pinoLine(3, requests[i]!);
    t.type(lines[i]!.time, 'number');
    t.ok(Math.abs((lines[i]!.time as number) - (expected.time as number)) < 5000);
    t.same(Object.keys(lines[i]!), Object.keys(expected), 'key order');
    t.same({ ...lines[i], time: 0 }, { ...expected, time: 0 });
  }
});

t.test('accessLog.omit leaves fields out, the rest in the same order', async (t) => {
  const { file, fd } = tempLogFile(t);
  const omit = ['query', 'client', 'userAgent', 'upstreamMs'];
  const log = createAccessLog({ workerId: 2, fd, omit, flushIntervalMs: 10_000 });
  await log.ready;
  log.record(requests[0]!);
  await log.flush();
  closeSync(fd);
  const line = JSON.parse(readFileSync(file, 'latin1')) as Record<string, unknown>;
  const expected = pinoLine(2, requests[0]!);
  for (const field of omit) delete expected[field];
  t.same(Object.keys(line), Object.keys(expected), 'key order without the omitted fields');
  t.same({ ...line, time: 0 }, { ...expected, time: 0 });
  // `cut` is written only for an answer cut short (below).
  for (const field of ACCESS_LOG_FIELDS) if (!omit.includes(field) && field !== 'cut') t.ok(field in line, `${field} is written`);
});

t.test('many lines, written in chunks, all arrive in order', async (t) => {
  const { file, fd } = tempLogFile(t);
  const log = createAccessLog({ workerId: 1, fd, flushIntervalMs: 5 });
  await log.ready;
  const N = 5000;
  for (let i = 0; i < N; i++) {
    log.record({ ...requests[0]!, path: `/users/${i}` });
    if (i % 1000 === 0) await new Promise((resolve) => setTimeout(resolve, 10));
  }
  await log.flush();
  closeSync(fd);
  const paths = readFileSync(file, 'latin1').trimEnd().split('\n').map((line) => (JSON.parse(line) as { path: string }).path);
  t.equal(paths.length, N);
  t.ok(paths.every((path, i) => path === `/users/${i}`), 'in order');
});

t.test('a batch whose request strings are too long for the scratch, and one that needs escaping: lines as pino writes them', async (t) => {
  const { file, fd } = tempLogFile(t);
  const log = createAccessLog({ workerId: 5, fd, flushIntervalMs: 10_000 });
  await log.ready;
  // 64 lines make a batch: 64 paths of 2 KiB do not fit the 64 KiB the plain copy uses, and are written escaped one by one.
  const long = Array.from({ length: 64 }, (_, i) => ({ ...requests[0]!, path: `/${i}/${'x'.repeat(2048)}` }));
  // The next batch: all plain but one path with a quote.
  const quoted = Array.from({ length: 64 }, (_, i) => ({ ...requests[0]!, path: i === 40 ? '/say"hi"' : `/p/${i}` }));
  for (const request of [...long, ...quoted]) log.record(request);
  await log.flush();
  closeSync(fd);
  const lines = readFileSync(file, 'latin1').trimEnd().split('\n');
  t.equal(lines.length, 128);
  const mismatched = [...long, ...quoted].filter((request, i) => {
    const line = JSON.parse(lines[i]!) as Record<string, unknown>;
    return JSON.stringify({ ...line, time: 0 }) !== JSON.stringify({ ...pinoLine(5, request), time: 0 });
  });
  t.equal(mismatched.length, 0, 'every line is what pino writes');
});

t.test('jsonString', async (t) => {
  const values = ['', 'plain', 'a"b', 'back\\slash', '\u0000\u001f', 'caf\u00e9', '\u{1f600}', '\ud800 lone', '\u2028\u2029'];
  values.forEach((value, i) => {
    // Named by index: some of these would break a TAP line.
    const literal = jsonString(value);
    t.match(literal, /^[\x20-\x7e]*$/, `value ${i} is written as ASCII`);
    t.equal(JSON.parse(literal), value, `value ${i} parses back`);
  });
});

t.test('latencyMs is written to the microsecond', async (t) => {
  const { file, fd } = tempLogFile(t);
  const log = createAccessLog({ workerId: 1, fd, flushIntervalMs: 10_000 });
  await log.ready;
  const latencies = [0, 0.0004, 0.0005, 0.001, 0.01, 0.1, 0.9476680000007036, 1, 12, 12.05, 12.5, 1.23456, 999.9999, 86_400_000.25, 5e9 + 0.1234, 1e300, Number.NaN, Number.POSITIVE_INFINITY];
  for (const latencyMs of latencies) log.record({ ...requests[0]!, latencyMs });
  await log.flush();
  closeSync(fd);
  const lines = readFileSync(file, 'latin1').trimEnd().split('\n');
  t.equal(lines.length, latencies.length);
  latencies.forEach((latencyMs, i) => {
    const expected = Number.isFinite(latencyMs) ? Math.round(latencyMs * 1000) / 1000 : null;
    const text = /"latencyMs":([^,]*),/.exec(lines[i]!)![1];
    t.equal(JSON.parse(lines[i]!).latencyMs, expected, `latency ${i}`);
    if (expected !== null) t.equal(text, JSON.stringify(expected), `latency ${i} is written as JSON writes it`);
  });
});

// Property: whatever the run of requests and whichever fields are left out, every line parses to what
// pino writes for its request. Values are drawn from small sets so that consecutive lines share some
// of them and not others: the blocks kept encoded between lines (Segment) are reused and rebuilt.
t.test('any run of requests, any omitted fields: each line is what pino writes', async (t) => {
  const pick = <T>(values: readonly T[]): fc.Arbitrary<T> => fc.constantFrom(...values);
  const request: fc.Arbitrary<FinishedRequest> = fc.record({
    method: pick(['GET', 'POST', 'DELETE']),
    path: pick(['/a', '/users/42', '/q"x', '/caf\u00e9']),
    routeTemplate: pick([null, '/a', '/users/{id}']),
    upstream: pick([null, 'http://127.0.0.1:9001', 'http://u']),
    status: pick([200, 404, 502, 499]),
    latencyMs: pick([0, 0.5, 1.25, 12]),
    bytesIn: pick([0, 5]),
    bytesOut: pick([0, 94, 120]),
    clientAddress: pick(['127.0.0.1', '::1']),
    disabledListeners: fc.constant([] as string[]),
    query: pick([undefined, '', 'q=1']),
    userAgent: pick([undefined, 'curl/8.5.0', 'wrk']),
    consumer: pick([undefined, null, 'acme']),
    requestId: pick([undefined, 'r-1', 'r-2']),
    traceId: pick([undefined, '4bf92f3577b34da6a3ce929d0e0e4736']),
    upstreamMs: pick([undefined, -1, 0.25]),
    upstreamHeaderMs: pick([undefined, -1, 0.125]),
    cache: pick([undefined, null, 'HIT', 'MISS']),
    cut: pick([undefined, false, true]),
  });
  const omit = fc.subarray([...ACCESS_LOG_FIELDS]);
  let run = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(request, { minLength: 1, maxLength: 12 }), omit, async (records, omitted) => {
      const { file, fd } = tempLogFile(t);
      const log = createAccessLog({ workerId: 4, fd, omit: omitted, flushIntervalMs: 10_000 });
      await log.ready;
      for (const record of records) log.record(record);
      await log.flush();
      closeSync(fd);
      const lines = readFileSync(file, 'latin1').trimEnd().split('\n');
      run++;
      if (lines.length !== records.length) return false;
      return records.every((record, i) => {
        const line = JSON.parse(lines[i]!) as Record<string, unknown>;
        const expected = pinoLine(4, record);
        for (const field of omitted) delete expected[field];
        return JSON.stringify({ ...line, time: 0 }) === JSON.stringify({ ...expected, time: 0 });
      });
    }),
    { numRuns: 150 },
  );
  t.equal(run, 150);
});

t.test('to a pipe, a line longer than one atomic write (4 KiB) is written with its strings shortened, marked truncated; to a file, whole', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'specgate-access-log-fifo-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const fifo = join(dir, 'log.fifo');
  execFileSync('mkfifo', [fifo]);
  const readFd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  const writeFd = openSync(fifo, constants.O_WRONLY);
  t.teardown(() => {
    closeSync(readFd);
    closeSync(writeFd);
  });
  const long: FinishedRequest[] = [
    { ...requests[0]!, userAgent: 'a'.repeat(8000) },
    { ...requests[0]!, path: `/${'\u00e9'.repeat(3000)}`, query: `q=${'"'.repeat(2000)}` },
    { ...requests[0]!, routeTemplate: `/${'t'.repeat(5000)}`, requestId: 'r'.repeat(200) },
  ];
  const piped = createAccessLog({ workerId: 3, fd: writeFd, flushIntervalMs: 10_000 });
  await piped.ready;
  for (const request of long) piped.record(request);
  piped.record(requests[0]!);
  piped.recordConnection({ ...requests[0]!, path: `/ws/${'w'.repeat(6000)}` }, { durationMs: 5, bytesIn: 1, bytesOut: 2, messagesIn: 1, messagesOut: 1, closeCode: 1000, closedBy: 'client' });
  await piped.flush();
  const chunks: Buffer[] = [];
  const buffer = Buffer.alloc(65536);
  for (;;) {
    let n: number;
    try {
      n = readSync(readFd, buffer);
    } catch {
      break;
    }
    if (n <= 0) break;
    chunks.push(Buffer.from(buffer.subarray(0, n)));
  }
  const lines = Buffer.concat(chunks).toString('latin1').trimEnd().split('\n');
  t.equal(lines.length, 5, 'five lines');
  for (const line of lines) t.ok(line.length + 1 <= 4096, `a line of ${line.length + 1} bytes fits in one write to a pipe`);
  const parsed = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  for (let i = 0; i < 3; i++) t.equal(parsed[i]!.truncated, true, `long line ${i}: marked truncated`);
  t.ok(String(parsed[0]!.userAgent).startsWith('aaaa') && String(parsed[0]!.userAgent).length < 8000, 'its user agent shortened, from the start');
  t.ok(String(parsed[1]!.path).startsWith('/\u00e9\u00e9') && String(parsed[1]!.query).startsWith('q="'), 'escaped strings shortened and still JSON');
  t.equal(parsed[2]!.requestId, 'r'.repeat(200), 'a string under the cap kept whole');
  t.equal(parsed[3]!.truncated, undefined, 'a short line: whole, not marked');
  t.match(parsed[4], { msg: 'websocket', truncated: true }, 'a connection line likewise');

  const { file, fd } = tempLogFile(t);
  const filed = createAccessLog({ workerId: 3, fd, flushIntervalMs: 10_000 });
  await filed.ready;
  filed.record(long[0]!);
  await filed.flush();
  closeSync(fd);
  const whole = JSON.parse(readFileSync(file, 'latin1').trimEnd()) as Record<string, unknown>;
  t.equal(whole.userAgent, 'a'.repeat(8000), 'to a file: the line whole');
  t.equal(whole.truncated, undefined);
});
