// npm run bench:client — the data plane's upstream client alone: our UpstreamPool against undici's
// Pool.dispatch (what the data plane uses today) and Pool.request, on one local upstream, in one run.
// Each contender keeps BENCH_CONCURRENCY requests in flight on as many keep-alive connections;
// rounds are interleaved (the order rotates each round) and the medians reported, as requests/s and
// CPU microseconds of this process per request. Ratios are the result; absolute figures depend on
// the machine and its load.
//
// Environment (all optional): BENCH_UPSTREAM (raw: a net server answering a fixed response, the
// least noisy; http: node:http), BENCH_CONCURRENCY (64), BENCH_ROUND_MS (2000), BENCH_ROUNDS (5),
// BENCH_ONLY (comma-separated contender ids).
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { Pool, type Dispatcher } from 'undici';
import { UpstreamPool } from '../src/upstream/pool.js';
import type { ResponseHead } from '../src/upstream/response-parser.js';
import { median } from './median.js';

const BODY = JSON.stringify({ id: 1347, number: 42, state: 'open', title: 'Found a bug', user: { login: 'octocat', id: 1 } });
const RESPONSE = Buffer.from(
  'HTTP/1.1 200 OK\r\n' +
    'Content-Type: application/json; charset=utf-8\r\n' +
    'Cache-Control: private, max-age=60\r\n' +
    'ETag: "a00049ba79152d03380c34652f2cb612"\r\n' +
    'X-Request-Id: 7f3a9c2e-1b4d-4e8f-9a6b-2c1d3e4f5a6b\r\n' +
    'Vary: Accept, Accept-Encoding\r\n' +
    'Date: Mon, 23 Nov 2026 10:00:00 GMT\r\n' +
    'Keep-Alive: timeout=5\r\n' +
    `Content-Length: ${Buffer.byteLength(BODY)}\r\n\r\n` +
    BODY,
);
/** What the data plane forwards for a typical API call. */
const REQUEST_HEADERS = [
  'user-agent', 'Mozilla/5.0 (X11; Linux x86_64) bench',
  'accept', 'application/json',
  'accept-encoding', 'gzip, br',
  'x-forwarded-for', '203.0.113.7',
  'x-forwarded-proto', 'http',
  'x-forwarded-host', 'api.example.com',
  'via', '1.1 specgate',
];
const PATH = '/repos/octocat/hello-world/issues/1347?per_page=10';

// ---- the upstream (child process) -------------------------------------------------------------------

function runUpstream(kind: string): void {
  const onListening = (server: net.Server | http.Server): void => {
    console.log(JSON.stringify({ port: (server.address() as net.AddressInfo).port }));
  };
  if (kind === 'http') {
    const server = http.createServer({ keepAliveTimeout: 60_000 }, (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(BODY) });
      res.end(BODY);
    });
    server.listen(0, '127.0.0.1', () => onListening(server));
    return;
  }
  const server = net.createServer((socket) => {
    socket.setNoDelay(true);
    socket.on('error', () => {});
    let tail = '';
    socket.on('data', (chunk) => {
      // Requests are bodiless: one answer per blank line.
      const text = tail + chunk.toString('latin1');
      let count = 0;
      let at = text.indexOf('\r\n\r\n');
      let last = 0;
      while (at >= 0) {
        count++;
        last = at + 4;
        at = text.indexOf('\r\n\r\n', last);
      }
      tail = text.slice(last);
      if (count === 1) socket.write(RESPONSE);
      else if (count > 1) socket.write(Buffer.concat(Array(count).fill(RESPONSE)));
    });
  });
  server.listen(0, '127.0.0.1', () => onListening(server));
}

// ---- contenders --------------------------------------------------------------------------------------

interface Contender {
  id: string;
  label: string;
  /** Starts one request; calls done() when its answer was read completely. */
  start(done: () => void): void;
  close(): Promise<void>;
}

/** Our pool, with a handler shaped like the data plane's (one object per request, no closures in the hot path). */
function ours(origin: string, concurrency: number): Contender {
  const pool = new UpstreamPool({ origin, connections: concurrency, maxQueue: concurrency * 4 });
  class Handler {
    bytes = 0;
    constructor(private readonly done: () => void) {}
    onHead(_status: number, head: ResponseHead): boolean {
      this.bytes += head.headers.length;
      return true;
    }
    onData(chunk: Buffer): boolean {
      this.bytes += chunk.length;
      return true;
    }
    onEnd(): void {
      this.done();
    }
    onError(err: Error): void {
      throw err;
    }
    onBodyDrain(): void {}
  }
  return {
    id: 'ours',
    label: 'UpstreamPool.request',
    start: (done) => void pool.request('GET', PATH, REQUEST_HEADERS, null, new Handler(done)),
    close: () => pool.close(),
  };
}

function undiciDispatch(origin: string, concurrency: number): Contender {
  const pool = new Pool(origin, { connections: concurrency, pipelining: 1 });
  class Handler implements Dispatcher.DispatchHandler {
    bytes = 0;
    constructor(private readonly done: () => void) {}
    onConnect(): void {}
    onHeaders(_status: number, headers: Buffer[]): boolean {
      this.bytes += headers.length;
      return true;
    }
    onData(chunk: Buffer): boolean {
      this.bytes += chunk.length;
      return true;
    }
    onComplete(): void {
      this.done();
    }
    onError(err: Error): void {
      throw err;
    }
  }
  return {
    id: 'undici-dispatch',
    label: 'undici Pool.dispatch',
    start: (done) => void pool.dispatch({ method: 'GET', path: PATH, headers: REQUEST_HEADERS, body: null }, new Handler(done)),
    close: () => pool.close(),
  };
}

function undiciRequest(origin: string, concurrency: number): Contender {
  const pool = new Pool(origin, { connections: concurrency, pipelining: 1 });
  return {
    id: 'undici-request',
    label: 'undici Pool.request',
    start: (done) => {
      pool
        .request({ method: 'GET', path: PATH, headers: REQUEST_HEADERS })
        .then((res) => res.body.dump())
        .then(done, (err) => {
          throw err;
        });
    },
    close: () => pool.close(),
  };
}

// ---- measurement ---------------------------------------------------------------------------------------

interface Sample {
  rps: number;
  cpuUs: number;
}

/** Keeps `concurrency` requests in flight for `ms`; requests finished and CPU per request. */
function measure(contender: Contender, concurrency: number, ms: number): Promise<Sample> {
  return new Promise((resolve) => {
    let completed = 0;
    let inFlight = 0;
    let stopping = false;
    const cpuStart = process.cpuUsage();
    const started = performance.now();
    const done = (): void => {
      completed++;
      inFlight--;
      if (!stopping) {
        inFlight++;
        contender.start(done);
      } else if (inFlight === 0) {
        const elapsed = performance.now() - started;
        const cpu = process.cpuUsage(cpuStart);
        resolve({ rps: (completed * 1000) / elapsed, cpuUs: (cpu.user + cpu.system) / completed });
      }
    };
    for (let i = 0; i < concurrency; i++) {
      inFlight++;
      contender.start(done);
    }
    setTimeout(() => (stopping = true), ms);
  });
}

async function main(): Promise<void> {
  const env = process.env;
  const upstreamKind = env.BENCH_UPSTREAM ?? 'raw';
  const concurrency = Number(env.BENCH_CONCURRENCY ?? 64);
  const roundMs = Number(env.BENCH_ROUND_MS ?? 2000);
  const rounds = Number(env.BENCH_ROUNDS ?? 5);
  const only = env.BENCH_ONLY ? new Set(env.BENCH_ONLY.split(',')) : null;

  const child: ChildProcess = spawn(process.execPath, [fileURLToPath(import.meta.url), 'upstream', upstreamKind], { stdio: ['ignore', 'pipe', 'inherit'] });
  const stop = (): void => {
    child.kill('SIGTERM');
  };
  process.on('exit', stop);
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.once('data', (line: Buffer) => resolve(JSON.parse(line.toString()).port));
    child.once('exit', (code) => reject(new Error(`the upstream exited (${code})`)));
  });
  const origin = `http://127.0.0.1:${port}`;
  const contenders = [ours, undiciDispatch, undiciRequest].map((make) => make(origin, concurrency)).filter((c) => only === null || only.has(c.id));
  const samples = new Map<string, Sample[]>(contenders.map((c) => [c.id, []]));

  process.stderr.write(`[bench:client] upstream ${upstreamKind} on ${origin}, concurrency ${concurrency}, ${rounds} rounds of ${roundMs} ms each\n`);
  for (const c of contenders) await measure(c, concurrency, 500); // warm-up: connections and JIT
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < contenders.length; i++) {
      const c = contenders[(i + round) % contenders.length]!;
      const sample = await measure(c, concurrency, roundMs);
      samples.get(c.id)!.push(sample);
      process.stderr.write(`[bench:client] round ${round + 1} ${c.id}: ${Math.round(sample.rps)} req/s, ${sample.cpuUs.toFixed(1)} CPU µs/req\n`);
    }
  }
  for (const c of contenders) await c.close();
  stop();

  const base = samples.get('ours');
  const baseRps = base ? median(base.map((s) => s.rps)) : NaN;
  const baseCpu = base ? median(base.map((s) => s.cpuUs)) : NaN;
  console.log(`\nupstream: ${upstreamKind}; concurrency ${concurrency}; medians of ${rounds} interleaved rounds of ${roundMs} ms\n`);
  console.log('| client | req/s | CPU µs/req (client process) | req/s vs ours | CPU/req vs ours |');
  console.log('|---|---:|---:|---:|---:|');
  for (const c of contenders) {
    const list = samples.get(c.id)!;
    const rps = median(list.map((s) => s.rps));
    const cpu = median(list.map((s) => s.cpuUs));
    console.log(`| ${c.label} | ${Math.round(rps).toLocaleString('en-US')} | ${cpu.toFixed(1)} | ${(rps / baseRps).toFixed(2)}x | ${(cpu / baseCpu).toFixed(2)}x |`);
  }
}

if (process.argv[2] === 'upstream') {
  runUpstream(process.argv[3] ?? 'raw');
  process.on('SIGTERM', () => process.exit(0));
  process.on('disconnect', () => process.exit(0));
} else {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
