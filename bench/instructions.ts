// npm run bench:instructions — user-space instructions per proxied request, counted by valgrind's
// callgrind: the floor stand-in (bench/proxy-floor.ts: uWS + node:net, nothing else), the gateway
// with metrics, access log and request IDs off, and with them on; one process each (the gateway: one
// worker), the same upstream, route set and request as bench:proxy.
//
// Why a count and not a time: on this project's shared 2-core host the CPU time per request of one
// build moves 10-20% between runs, more than the changes this bench is for. Counts of the same build
// do not: a function's count repeats to the instruction, a total within 1-2% (what varies is the
// work done per unit of time, below), whatever else the host is doing. What it leaves out: the
// kernel (about half of a request's CPU here, the same system calls for the floor and the gateway plus
// one getpeername), cache misses and waits. So it says where the gateway's own work goes and whether a
// change removed some of it; CPU time (bench:proxy) still says what the host pays.
//
// How: each contender runs under `valgrind --tool=callgrind --trace-children=yes` with V8's optimizing
// compiler made synchronous (--no-concurrent-recompilation; under valgrind the compiler thread hardly
// runs, and counts would be of unoptimized code). After BENCH_WARM requests, the counters are zeroed,
// BENCH_REQUESTS requests are made over 10 keep-alive connections, and every process dumps its counts;
// then the contender idles as long as the load took and dumps again. The idle count (timers: process
// metrics, health reports, metrics shipping, all slowed 20-50x under valgrind relative to requests) is
// subtracted. Per-function counts of the busiest process are printed with BENCH_TOP=n, JIT-compiled
// JavaScript named from V8's perf map (--perf-basic-prof).
//
// Needs valgrind (Debian's package); without it, says so and exits 0. BENCH_ONLY=floor,gateway-off,gateway;
// optional contenders: gateway-log, gateway-metrics, gateway-ids (one feature each), gateway-cache (a
// response-cache hit), gateway-ws (a WebSocket echo: BENCH_REQUESTS counts echoes) and gateway-ws-upgrade
// (a WebSocket connection opened, one echo, closed: BENCH_REQUESTS counts connections; a few thousand do);
// gateway-trace-1 and gateway-trace-100: all three on plus span export at 1% and 100% sampling, to an
// OTLP/HTTP sink in this process that reads and drops them, as bench:proxy's.
// BENCH_KEEP_DIR=dir keeps each contender's callgrind files and V8 perf maps in dir/<id> (for
// callgrind_annotate --tree=caller and the like); otherwise they go with the run.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startOtlpSink } from './otlp-sink.js';
import { WebSocket } from 'ws';
import { findFreePort } from '../src/cluster/free-port.js';
import { firstLine, nodeChildren, onPath, waitFor200, waitForUpgrade } from './children.js';
import { PROXY_REQUEST_PATH, proxyBenchEndpoints } from './route-set.js';

const env = process.env;
const WARM = Number(env.BENCH_WARM ?? 5000);
const REQUESTS = Number(env.BENCH_REQUESTS ?? 10_000);
const CONNECTIONS = 10;
const TOP = Number(env.BENCH_TOP ?? 0);
const KEEP_DIR = env.BENCH_KEEP_DIR ?? '';
const ONLY = env.BENCH_ONLY ? new Set(env.BENCH_ONLY.split(',').map((s) => s.trim())) : null;
const HERE = dirname(fileURLToPath(import.meta.url));
const GATEWAY_MAIN = join(HERE, '..', 'bundle', 'gateway.mjs');

if (!onPath('valgrind') || !onPath('callgrind_control')) {
  console.log('bench:instructions needs valgrind (apt-get install valgrind); skipped.');
  process.exit(0);
}

const dir = mkdtempSync(join(tmpdir(), 'specgate-bench-instructions-'));
// Synchronous optimization (see above); JIT code named in /tmp/perf-<pid>.map. --perf-basic-prof
// also has V8 write an isolate-*-v8.log: into the run's directory, not the working directory.
const NODE_FLAGS = ['--no-concurrent-recompilation', '--perf-basic-prof', `--logfile=${join(dir, 'v8.log')}`];
const start = nodeChildren(dir);
const upstream = start([join(HERE, 'proxy-upstream.js'), '0']);
const upstreamOrigin = `http://127.0.0.1:${(JSON.parse(await firstLine(upstream, 'upstream')) as { port: number }).port}`;
/** The WebSocket echo upstream (bench/websocket-echo.ts), started for gateway-ws only. */
let wsUpstream = '';
function wsUpstreamOrigin(): string {
  if (wsUpstream === '') throw new Error('the WebSocket upstream was not started');
  return wsUpstream;
}
if (ONLY?.has('gateway-ws') || ONLY?.has('gateway-ws-upgrade')) {
  const wsPort = await findFreePort('127.0.0.1');
  const echo = start([join(HERE, 'websocket-echo.js'), String(wsPort)]);
  await firstLine(echo, 'websocket upstream');
  wsUpstream = `http://127.0.0.1:${wsPort}`;
}

/** Where the tracing contenders export spans (started for them only): an OTLP/HTTP sink that reads and drops them. */
let otlpSink = '';
function otlpSinkUrl(): string {
  if (otlpSink === '') throw new Error('the OTLP sink was not started');
  return otlpSink;
}
if (ONLY?.has('gateway-trace-1') || ONLY?.has('gateway-trace-100')) otlpSink = await startOtlpSink();

interface Contender {
  id: string;
  label: string;
  args: (port: number) => string[];
  optional?: boolean;
  /** What a count is of: a request (the default, compared with the floor's) or a WebSocket echo. */
  unit?: 'request' | 'echo' | 'upgrade';
  /** How it is loaded; HTTP GETs of the bench's path when absent. */
  driver?: (port: number) => Driver;
}

/** Loads a contender: `ready` once it serves, then `load(n)` for n requests (or echoes), then `close`. */
interface Driver {
  ready(child: ChildProcess, stderr: () => string): Promise<void>;
  load(count: number): Promise<void>;
  close(): Promise<void>;
}

function httpDriver(port: number, id: string): Driver {
  return {
    ready: (child, stderr) => waitFor200(`http://127.0.0.1:${port}`, PROXY_REQUEST_PATH, id, child, 300_000, stderr, 500),
    load: (count) => load(port, count),
    close: async () => {},
  };
}

/**
 * WebSocket echo through the gateway (BENCH_ONLY=gateway-ws): WS_CONNECTIONS connections opened once
 * it upgrades, each keeping 4 messages of 64 bytes in flight; a count is of echoes (one message each
 * way). The connections are opened before the counters are zeroed and closed after the dump, so the
 * count is of relaying alone (upgrades and closes run other code, and V8 compiling it would be counted).
 */
const WS_CONNECTIONS = 20;
function wsDriver(port: number): Driver {
  const url = `ws://127.0.0.1:${port}/echo`;
  const message = Buffer.alloc(64, 0x61).toString();
  let sockets: WebSocket[] = [];
  let onEcho: (socket: WebSocket) => void = () => {};
  const open = (): Promise<WebSocket> =>
    new Promise((resolve, reject) => {
      const socket = new WebSocket(url, { perMessageDeflate: false });
      socket.once('open', () => resolve(socket));
      socket.once('error', reject);
    });
  return {
    async ready(child, stderr) {
      await waitForUpgrade(url, 'gateway-ws', 300_000, child, stderr, 500);
      sockets = await Promise.all(Array.from({ length: WS_CONNECTIONS }, open));
      for (const socket of sockets) socket.on('message', () => onEcho(socket));
    },
    load(count) {
      return new Promise((resolve) => {
        let echoed = 0;
        let sent = 0;
        onEcho = (socket) => {
          if (++echoed === count) resolve();
          if (sent < count) {
            sent++;
            socket.send(message);
          }
        };
        for (const socket of sockets) for (let i = 0; i < 4 && sent < count; i++, sent++) socket.send(message);
      });
    },
    async close() {
      for (const socket of sockets) socket.terminate();
      sockets = [];
    },
  };
}

/**
 * WebSocket upgrades through the gateway (BENCH_ONLY=gateway-ws-upgrade): WS_CONNECTIONS loops, each
 * opening a connection, echoing one message and closing it, then the next; a count is of connections,
 * from the upgrade request to the client's close event.
 */
function wsUpgradeDriver(port: number): Driver {
  const url = `ws://127.0.0.1:${port}/echo`;
  const message = Buffer.alloc(64, 0x61).toString();
  const once = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const socket = new WebSocket(url, { perMessageDeflate: false });
      socket.once('open', () => socket.send(message));
      socket.once('message', () => socket.close());
      socket.once('close', () => resolve());
      socket.once('error', reject);
    });
  return {
    ready: (child, stderr) => waitForUpgrade(url, 'gateway-ws-upgrade', 300_000, child, stderr, 500),
    async load(count) {
      let started = 0;
      const loop = async (): Promise<void> => {
        while (started < count) {
          started++;
          await once();
        }
      };
      await Promise.all(Array.from({ length: WS_CONNECTIONS }, loop));
    },
    close: async () => {},
  };
}

interface Features {
  accessLog: boolean;
  metrics: boolean;
  requestId: boolean;
}
const ALL_ON: Features = { accessLog: true, metrics: true, requestId: true };
const ALL_OFF: Features = { accessLog: false, metrics: false, requestId: false };

/** A gateway contender's command line; `extra` (read when it starts) adds to or replaces parts of its config. */
function gatewayArgs(id: string, features: Features, extra: () => Record<string, unknown> = () => ({})): (port: number) => string[] {
  return (port) => {
    const configFile = join(dir, `${id}.json`);
    writeFileSync(
      configFile,
      JSON.stringify({
        host: '127.0.0.1',
        port,
        workers: 1,
        upstreams: [{ serviceType: 'static', serviceLocation: upstreamOrigin, endpoints: proxyBenchEndpoints() }],
        discovery: { refreshIntervalMs: 0 },
        // The access log to a file, as bench:proxy writes it.
        accessLog: features.accessLog ? { enabled: true, destination: join(dir, `${id}-access.log`) } : { enabled: false },
        metrics: { enabled: features.metrics },
        requestId: { enabled: features.requestId },
        ...extra(),
      }),
    );
    return [GATEWAY_MAIN, 'start', '--config', configFile];
  };
}

const CONTENDERS: Contender[] = [
  { id: 'floor', label: 'floor: uWS + net.Socket, nothing else (1 process)', args: (port) => [join(HERE, 'proxy-floor.js'), upstreamOrigin, String(port), '1'] },
  { id: 'gateway-off', label: 'gateway, metrics + access log + request IDs off (1 worker)', args: gatewayArgs('gateway-off', ALL_OFF) },
  { id: 'gateway', label: 'gateway, metrics + access log + request IDs on (1 worker)', args: gatewayArgs('gateway', ALL_ON) },
  // One feature at a time (BENCH_ONLY=gateway-log,...): not run by default.
  { id: 'gateway-log', label: 'gateway, access log only (1 worker)', args: gatewayArgs('gateway-log', { ...ALL_OFF, accessLog: true }), optional: true },
  { id: 'gateway-metrics', label: 'gateway, metrics only (1 worker)', args: gatewayArgs('gateway-metrics', { ...ALL_OFF, metrics: true }), optional: true },
  { id: 'gateway-ids', label: 'gateway, request IDs only (1 worker)', args: gatewayArgs('gateway-ids', { ...ALL_OFF, requestId: true }), optional: true },
  // Span export (BENCH_ONLY=gateway-trace-1,gateway-trace-100): the same config as bench:proxy's tracing contenders.
  {
    id: 'gateway-trace-1',
    label: 'gateway + span export (OTLP/HTTP), 1% sampled, all three on (1 worker)',
    args: gatewayArgs('gateway-trace-1', ALL_ON, () => ({ tracing: { otlpEndpoint: otlpSinkUrl(), sampleRatio: 0.01 } })),
    optional: true,
  },
  {
    id: 'gateway-trace-100',
    label: 'gateway + span export (OTLP/HTTP), every request sampled, all three on (1 worker)',
    args: gatewayArgs('gateway-trace-100', ALL_ON, () => ({ tracing: { otlpEndpoint: otlpSinkUrl(), sampleRatio: 1 } })),
    optional: true,
  },
  {
    id: 'gateway-ws',
    label: 'gateway, WebSocket echo of 64 bytes, per echo (a message each way), all three on (1 worker)',
    args: gatewayArgs('gateway-ws', ALL_ON, () => ({
      upstreams: [{ serviceType: 'static', serviceLocation: wsUpstreamOrigin(), endpoints: [{ method: 'GET', path: '/echo' }] }],
    })),
    driver: wsDriver,
    unit: 'echo',
    optional: true,
  },
  {
    id: 'gateway-ws-upgrade',
    label: 'gateway, WebSocket connection (upgrade, one echo, close), per connection, all three on (1 worker)',
    args: gatewayArgs('gateway-ws-upgrade', ALL_ON, () => ({
      upstreams: [{ serviceType: 'static', serviceLocation: wsUpstreamOrigin(), endpoints: [{ method: 'GET', path: '/echo' }] }],
    })),
    driver: wsUpgradeDriver,
    unit: 'upgrade',
    optional: true,
  },
  // Every request a hit of the shared (LMDB) store after the warm-up, as bench:proxy's gateway-cache: BENCH_ONLY=gateway-cache.
  {
    id: 'gateway-cache',
    label: 'gateway + responseCache (local), every request a hit, all three on (1 worker)',
    args: gatewayArgs('gateway-cache', ALL_ON, () => ({ middleware: [{ id: 'cache', type: 'responseCache', store: 'local', defaultTtlMs: 600_000 }] })),
    optional: true,
  },
];

const require = createRequire(import.meta.url);
type Autocannon = (
  opts: Record<string, unknown>,
  cb: (err: Error | null, result: { '2xx': number; non2xx: number; errors: number; timeouts: number }) => void,
) => unknown;

/** Exactly `count` GETs of the bench's path (autocannon's `amount`), CONNECTIONS at a time; every one must be a 2xx. */
function load(port: number, count: number): Promise<void> {
  const autocannon = require('autocannon') as Autocannon;
  return new Promise((resolve, reject) => {
    autocannon({ url: `http://127.0.0.1:${port}${PROXY_REQUEST_PATH}`, connections: CONNECTIONS, pipelining: 1, amount: count, timeout: 60 }, (err, result) => {
      if (err) return reject(err);
      const failed = result.non2xx + result.errors + result.timeouts;
      if (failed > 0 || result['2xx'] !== count) return reject(new Error(`load: ${result['2xx']} of ${count} answered 2xx (${failed} failed)`));
      resolve();
    });
  });
}

/**
 * Where this run's callgrind processes keep their vgdb pipes. Not the default (/tmp/vgdb-pipe): every
 * callgrind_control on the host finds the processes there, so two runs at once (other checkouts)
 * zeroed and dumped each other's counters at random moments.
 */
const VGDB_PREFIX = join(dir, 'vgdb-pipe');

/** Zeroes or dumps the counters of this run's callgrind processes (and only those). */
function callgrindControl(command: '-z' | '-d'): void {
  const result = spawnSync('callgrind_control', [`--vgdb-prefix=${VGDB_PREFIX}`, command], { encoding: 'utf8', timeout: 120_000 });
  if (result.status !== 0) throw new Error(`callgrind_control ${command} failed: ${result.stderr || result.stdout}`);
}

interface PartCounts {
  pid: number;
  command: string;
  /** Instructions of the load part and of the idle part. */
  load: number;
  idle: number;
}

function totals(file: string): { command: string; total: number } {
  const text = readFileSync(file, 'latin1');
  // `summary` is what callgrind_annotate reports as the program's total; `totals` only in older formats.
  const total = /^summary: (\d+)/m.exec(text) ?? /^totals: (\d+)/m.exec(text);
  const command = /^cmd: (.*)$/m.exec(text);
  return { command: command?.[1] ?? '', total: total === null ? 0 : Number(total[1]) };
}

/** The processes of one contender, their load and idle counts (parts 1 and 2 of each dump file). */
function readParts(outDir: string): PartCounts[] {
  const parts: PartCounts[] = [];
  for (const name of readdirSync(outDir)) {
    const match = /^cg\.(\d+)\.out\.1$/.exec(name);
    if (match === null) continue;
    const load = totals(join(outDir, name));
    const idleFile = join(outDir, `cg.${match[1]}.out.2`);
    const idle = existsSync(idleFile) ? totals(idleFile).total : 0;
    parts.push({ pid: Number(match[1]), command: load.command, load: load.total, idle });
  }
  return parts.sort((a, b) => b.load - a.load);
}

interface Result {
  id: string;
  label: string;
  unit: 'request' | 'echo' | 'upgrade';
  /** Instructions per request: load less idle, all processes. */
  perRequest: number;
  processes: Array<{ role: string; perRequest: number; idlePerRequest: number }>;
  loadMs: number;
}

async function measure(contender: Contender): Promise<Result> {
  const port = await findFreePort('127.0.0.1');
  const outDir = join(KEEP_DIR === '' ? dir : KEEP_DIR, contender.id);
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  const child: ChildProcess = spawn(
    'valgrind',
    ['--tool=callgrind', '--trace-children=yes', `--vgdb-prefix=${VGDB_PREFIX}`, `--callgrind-out-file=${outDir}/cg.%p.out`, process.execPath, ...NODE_FLAGS, ...contender.args(port)],
    { detached: true, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-4000)));
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      process.kill(-child.pid!, 'SIGTERM');
    } catch {
      // gone
    }
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // gone
      }
    }, 30_000);
    await exited;
    clearTimeout(timer);
  };
  const driver = contender.driver?.(port) ?? httpDriver(port, contender.id);
  try {
    await driver.ready(child, () => stderr);
    await driver.load(WARM);
    callgrindControl('-z');
    const started = performance.now();
    await driver.load(REQUESTS);
    const loadMs = performance.now() - started;
    callgrindControl('-d');
    await new Promise((resolve) => setTimeout(resolve, loadMs));
    callgrindControl('-d');
    await driver.close();
    await stop();
    const parts = readParts(outDir);
    if (parts.length === 0) throw new Error(`${contender.id}: no callgrind output\n${stderr}`);
    // The busiest by load less idle: a primary's timers can outweigh a worker's load part under valgrind.
    parts.sort((a, b) => b.load - b.idle - (a.load - a.idle));
    if (TOP > 0) printTop(contender.id, parts[0]!.pid, join(outDir, `cg.${parts[0]!.pid}.out.1`));
    const processes = parts.map((p) => ({ role: roleOf(p.command), perRequest: (p.load - p.idle) / REQUESTS, idlePerRequest: p.idle / REQUESTS }));
    return { id: contender.id, label: contender.label, unit: contender.unit ?? 'request', perRequest: processes.reduce((sum, p) => sum + p.perRequest, 0), processes, loadMs };
  } finally {
    await stop();
    for (const name of existsSync(outDir) ? readdirSync(outDir) : []) {
      const match = /^cg\.(\d+)\.out$/.exec(name);
      if (match === null) continue;
      const map = `/tmp/perf-${match[1]}.map`;
      if (KEEP_DIR !== '' && existsSync(map)) copyFileSync(map, join(outDir, `perf-${match[1]}.map`));
      rmSync(map, { force: true });
    }
  }
}

/** A gateway's worker or primary, or a stand-in's process, by its command line. */
function roleOf(command: string): string {
  if (command.includes('worker.mjs')) return 'worker';
  if (command.includes('gateway.mjs')) return 'primary';
  return 'process';
}

/** Exclusive counts per function of one process's load part, JIT code named from V8's perf map. */
function printTop(id: string, pid: number, file: string): void {
  const ranges: Array<[number, number, string]> = [];
  const mapFile = `/tmp/perf-${pid}.map`;
  if (existsSync(mapFile)) {
    for (const line of readFileSync(mapFile, 'utf8').split('\n')) {
      const m = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line);
      if (m) ranges.push([parseInt(m[1]!, 16), parseInt(m[2]!, 16), m[3]!]);
    }
  }
  ranges.sort((a, b) => a[0] - b[0]);
  const jsName = (address: number): string | null => {
    let lo = 0;
    let hi = ranges.length - 1;
    let best: [number, number, string] | null = null;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (ranges[mid]![0] <= address) {
        best = ranges[mid]!;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return best !== null && address < best[0] + best[1] ? best[2] : null;
  };
  const annotated = spawnSync('callgrind_annotate', ['--auto=no', '--threshold=100', file], { encoding: 'utf8', maxBuffer: 1 << 28 });
  const counts = new Map<string, number>();
  for (const line of annotated.stdout.split('\n')) {
    const m = /^\s*([\d,]+) \([ \d.]+%\)\s+(.*)$/.exec(line);
    if (m === null || m[2]!.includes('PROGRAM TOTALS')) continue;
    // Frames that only call others (main, the event loop, thread starts) carry no work of their own here.
    if (/libc-start|below main|ld-linux|NodeMainInstance|SpinEventLoop|node::Start|\?\?\?:main |clone\.S|start_thread/.test(m[2]!)) continue;
    let name = m[2]!;
    const jit = /^\?\?\?:0x([0-9a-f]+)(?:'\d+)? \[\?\?\?\]/.exec(name);
    if (jit !== null) name = `JS ${jsName(parseInt(jit[1]!, 16)) ?? `(unnamed code at 0x${jit[1]})`}`;
    else name = name.replace(/^\?\?\?:/, '').replace(/ \[\/usr\/bin\/node\]$/, '').slice(0, 140);
    counts.set(name, (counts.get(name) ?? 0) + Number(m[1]!.replace(/,/g, '')));
  }
  console.log(`\n${id}: instructions per request by function (busiest process, idle not subtracted), top ${TOP}:`);
  for (const [name, count] of [...counts].sort((a, b) => b[1] - a[1]).slice(0, TOP)) console.log(`${String(Math.round(count / REQUESTS)).padStart(8)}  ${name}`);
}

const results: Result[] = [];
for (const contender of CONTENDERS) {
  if (ONLY !== null ? !ONLY.has(contender.id) : contender.optional === true) continue;
  console.error(`[bench:instructions] ${contender.id}: starting under valgrind (a gateway takes about a minute)`);
  results.push(await measure(contender));
}

const floor = results.find((r) => r.id === 'floor');
const busiest = (r: Result): number => r.processes[0]?.perRequest ?? 0;
console.log(`\nUser-space instructions per request (callgrind; ${REQUESTS} requests after ${WARM} of warm-up, idle counts subtracted):\n`);
console.log('| contender | the process that serves | / the floor\'s | all processes | each process |');
console.log('|---|---:|---:|---:|---|');
for (const r of results) {
  const processes = r.processes.map((p) => `${Math.round(p.perRequest)} (${p.role})`).join(', ');
  // An echo or a connection is not a request: no ratio to the floor's.
  const ratio = floor !== undefined && r.unit === 'request' ? `${(busiest(r) / busiest(floor)).toFixed(2)}x` : '';
  console.log(`| ${r.label} | ${Math.round(busiest(r))} | ${ratio} | ${Math.round(r.perRequest)} | ${processes} |`);
}
console.log(
  '\nWork done per unit of time (the primary merging metrics deltas every 200 ms, a worker encoding them, process metrics every' +
    ' 5 s) weighs 20-50x more per request here than at full speed: under valgrind requests are that much slower. The primary\'s' +
    ' count is almost all such work; read the serving process\'s.',
);
const resultsDir = join(HERE, '..', '..', 'bench', 'results');
mkdirSync(resultsDir, { recursive: true });
writeFileSync(join(resultsDir, 'instructions.json'), JSON.stringify({ requests: REQUESTS, warm: WARM, results }, null, 2) + '\n');
process.exit(0);
