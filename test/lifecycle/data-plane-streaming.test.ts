/*
 * 256 MiB up and 1 GiB down through the data plane, generated and consumed as streams. The client and
 * the upstream run in a child process, so the RSS sampled here (every 50 ms during each transfer) is
 * the data plane's own: backpressure has to hold both ways for it to stay flat.
 *
 * uWS 20.30 closes the connection for a request Content-Length of 10 digits or more (>= 1e9 bytes);
 * the 1 GiB sized download covers a 10-digit Content-Length on the answer side. The uploads and the
 * chunked download are a quarter of that (the suite's time: 1 GiB through loopback is about 8 s of two
 * busy cores, the chunked one about twice that); a transfer buffered whole would still be four times
 * the RSS budget. The slow readers below are where a lost cork once showed (native-notes.md).
 * STREAM_TEST_CHUNKED_MIB sets the chunked download's size for a longer run (1024: as it once was).
 */
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { startDataPlane } from '../../src/proxy/data-plane.js';
import { RoutingTable } from '../../src/routing/table.js';
import { entry, testConfig } from '../helpers/upstream-server.js';
import { reapOnExit } from '../helpers/reaper.js';
import { untapped } from '../helpers/untapped.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const RSS_BUDGET = 64 * MiB;
const TRANSFER_TIMEOUT_MS = 240_000;

const undiciUrl = pathToFileURL(createRequire(import.meta.url).resolve('undici')).href;

/** The child: a streaming upstream plus a client taking JSON-line commands on stdin. */
const CHILD = `
import http from 'node:http';
import { Readable } from 'node:stream';
import { createInterface } from 'node:readline';
const { request, Agent } = await import(${JSON.stringify(undiciUrl)});
const block = Buffer.alloc(64 * 1024, 'z');
const slice = (left) => (left >= block.length ? block : block.subarray(0, left));
const server = http.createServer((req, res) => {
  if (req.method === 'POST') {
    let received = 0;
    req.on('data', (c) => { received += c.length; });
    req.on('end', () => { const body = JSON.stringify({ received }); res.writeHead(200, { 'content-length': Buffer.byteLength(body) }); res.end(body); });
    return;
  }
  const url = new URL(req.url, 'http://x');
  const total = Number(url.searchParams.get('bytes'));
  res.writeHead(200, url.pathname.endsWith('/sized') ? { 'content-length': String(total) } : {});
  let sent = 0;
  const pump = () => {
    while (sent < total) { const c = slice(total - sent); sent += c.length; if (!res.write(c)) { res.once('drain', pump); return; } }
    res.end();
  };
  pump();
});
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ upstream: server.address().port })));
const agent = new Agent({ bodyTimeout: 120000, headersTimeout: 120000 });
function generated(total) {
  let sent = 0;
  return new Readable({ highWaterMark: block.length, read() { if (sent >= total) return this.push(null); const c = slice(total - sent); sent += c.length; this.push(c); } });
}
createInterface({ input: process.stdin }).on('line', async (line) => {
  const cmd = JSON.parse(line);
  const started = Date.now();
  try {
    if (cmd.op === 'upload') {
      const headers = cmd.chunked ? {} : { 'content-length': String(cmd.bytes) };
      const res = await request(cmd.url, { method: 'POST', body: generated(cmd.bytes), headers, dispatcher: agent });
      const body = await res.body.json();
      console.log(JSON.stringify({ status: res.statusCode, received: body.received, ms: Date.now() - started }));
    } else {
      const res = await request(cmd.url, { dispatcher: agent });
      let received = 0;
      for await (const c of res.body) {
        received += c.length;
        if (received < (cmd.slowBytes ?? 0)) await new Promise((r) => setTimeout(r, 1));
      }
      console.log(JSON.stringify({ status: res.statusCode, received, headers: res.headers, ms: Date.now() - started }));
    }
  } catch (err) {
    console.log(JSON.stringify({ error: String(err), code: err.code }));
  }
});
process.stdin.on('end', () => process.exit(0));
`;

const child = spawn(...untapped(process.execPath, ['--input-type=module', '-e', CHILD]), { stdio: ['pipe', 'pipe', 'inherit'] });
reapOnExit(child, { group: false });
const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
async function nextLine(): Promise<Record<string, unknown>> {
  const { value, done } = await lines.next();
  if (done) throw new Error('the streaming child exited');
  return JSON.parse(value as string) as Record<string, unknown>;
}
const upstreamUrl = `http://127.0.0.1:${(await nextLine()).upstream as number}`;

const config = testConfig({
  limits: { maxBodyBytes: 2 * GiB, maxHeaderBytes: 16 * 1024 },
  timeouts: { upstreamMs: 60_000, connectMs: 5000, clientRequestMs: TRANSFER_TIMEOUT_MS, shutdownGraceMs: 1000 },
  upstreams: [{ serviceType: 'static', serviceLocation: upstreamUrl, weight: 1, specPath: '/spec' }],
});
const plane = await startDataPlane({ config });
plane.setTable(
  RoutingTable.compile([entry('POST', '/upload', upstreamUrl), entry('GET', '/download/{kind}', upstreamUrl)]).table,
);
const base = `http://127.0.0.1:${plane.port}`;

t.teardown(async () => {
  child.stdin!.end();
  await plane.close();
});

/** Runs one child command while sampling this process's RSS. */
async function transfer(command: Record<string, unknown>): Promise<{ reply: Record<string, unknown>; growth: number }> {
  (globalThis as { gc?: () => void }).gc?.();
  await new Promise((r) => setTimeout(r, 100));
  const baseline = process.memoryUsage.rss();
  let peak = baseline;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 50);
  try {
    child.stdin!.write(`${JSON.stringify(command)}\n`);
    const reply = await nextLine();
    peak = Math.max(peak, process.memoryUsage.rss());
    return { reply, growth: peak - baseline };
  } finally {
    clearInterval(sampler);
  }
}

function report(t: Test, what: string, bytes: number, reply: Record<string, unknown>, growth: number): void {
  const seconds = (reply.ms as number) / 1000;
  const mb = (n: number): string => (n / MiB).toFixed(1);
  t.comment(`${what}: ${mb(bytes)} MiB in ${seconds.toFixed(1)} s (${mb(bytes / seconds)} MiB/s); data plane RSS grew ${mb(growth)} MiB`);
  t.ok(growth < RSS_BUDGET, `${what}: data plane RSS grew by ${mb(growth)} MiB (< 64 MiB)`);
}

// One-time growth (V8 young generation sizing, JIT, first pool connection, malloc arenas) is not
// per-transfer memory: measured cold, the first 1 GiB upload showed 36-45 MiB, a repeat 0 MiB.
t.test('warm-up (not measured)', async (t) => {
  const up = await transfer({ op: 'upload', url: `${base}/upload`, bytes: 32 * MiB, chunked: true });
  t.equal(up.reply.received, 32 * MiB);
  const down = await transfer({ op: 'download', url: `${base}/download/sized?bytes=${32 * MiB}` });
  t.equal(down.reply.received, 32 * MiB);
  t.comment(`warm-up RSS growth: ${(up.growth / MiB).toFixed(1)} + ${(down.growth / MiB).toFixed(1)} MiB`);
});

for (const [kind, bytes] of [['chunked', 256 * MiB], ['sized', 256 * MiB]] as const) {
  const size = `${bytes / MiB} MiB`;
  t.test(`${size} ${kind} upload streams through`, { timeout: TRANSFER_TIMEOUT_MS }, async (t) => {
    const { reply, growth } = await transfer({ op: 'upload', url: `${base}/upload`, bytes, chunked: kind === 'chunked' });
    t.same(reply.error, undefined);
    t.equal(reply.status, 200);
    t.equal(reply.received, bytes, 'the upstream received every byte');
    report(t, `${size} ${kind} upload`, bytes, reply, growth);
  });
}

const CHUNKED_DOWNLOAD_BYTES = Number(process.env.STREAM_TEST_CHUNKED_MIB ?? 256) * MiB;

for (const kind of ['sized', 'chunked'] as const) {
  const bytes = kind === 'sized' ? GiB : CHUNKED_DOWNLOAD_BYTES;
  const size = bytes === GiB ? '1 GiB' : `${bytes / MiB} MiB`;
  t.test(`${size} ${kind} download streams through`, { timeout: TRANSFER_TIMEOUT_MS }, async (t) => {
    const { reply, growth } = await transfer({ op: 'download', url: `${base}/download/${kind}?bytes=${bytes}` });
    t.same(reply.error, undefined);
    t.equal(reply.status, 200);
    t.equal(reply.received, bytes, 'the client received every byte');
    const headers = reply.headers as Record<string, string>;
    if (kind === 'sized') t.equal(headers['content-length'], String(bytes));
    else t.equal(headers['transfer-encoding'], 'chunked');
    report(t, `${size} ${kind} download`, bytes, reply, growth);
  });
}

// A slow reader keeps the gateway's socket full: the case where uWS 20.30 lost a corked write that
// did not fit its cork buffer (src/http/cork-budget.ts). The chunked answer's framing must stay whole.
for (const kind of ['sized', 'chunked'] as const) {
  t.test(`a slow reader of a ${kind} download holds the upstream back and gets every byte`, { timeout: TRANSFER_TIMEOUT_MS }, async (t) => {
    const total = 256 * MiB;
    const { reply, growth } = await transfer({ op: 'download', url: `${base}/download/${kind}?bytes=${total}`, slowBytes: 32 * MiB });
    t.same(reply.error, undefined);
    t.equal(reply.received, total);
    report(t, `256 MiB ${kind} download, first 32 MiB read slowly`, total, reply, growth);
  });
}

t.test('nothing left in flight', async (t) => {
  t.equal(plane.inFlight(), 0);
});
