// npm run bench:proxy — req/s, p50 and p99 through the gateway, straight to the upstream, through
// nginx (reverse proxy, same worker count), through a naive uWS + undici Pool.dispatch forwarder
// (same process count: what the gateway's own client is measured against), through a "floor"
// stand-in (uWS + node:net and nothing else: what this process model costs before any gateway work)
// and through fastify + @fastify/http-proxy, in one run on
// 127.0.0.1, with the ratios the performance targets name. Everything is started here and stopped at
// the end (also on error, SIGINT/SIGTERM and the overall deadline). Contenders run one after another,
// never concurrently (the others are stopped with SIGSTOP meanwhile); rounds are interleaved and the
// medians reported.
//
// More contenders measure what the features cost: the gateway with apiKeyAuth + rateLimit on the local
// store and on a Redis store (redis-server started here), and with responseCache where every request
// is a hit, beside nginx with proxy_cache; and with span export (OTLP/HTTP to a sink in this process) at 1%
// and 100% sampling.
//
// Environment (all optional): BENCH_DURATION_S (8), BENCH_WARMUP_S (3 in the first round, 1 after),
// BENCH_CONNECTIONS (50), BENCH_ROUNDS (3; the half-rate runs take at most 2), BENCH_ONLY (comma-separated contender ids),
// BENCH_RESULTS (where the machine-readable results go; default bench/results/proxy.json, git-ignored;
// `npm run bench:chart` draws docs/benchmark-proxy.svg from it), BENCH_TOOLS (autocannon,wrk), BENCH_PROFILE_DIR (the gateway's primary and workers run with --cpu-prof there; BENCH_PROFILE_ID picks
// which gateway contender, default `gateway`;
// the top self-time functions of its workers are printed at the end), BENCH_GATEWAY_NODE_FLAGS (more
// node flags for that gateway, e.g. --perf-basic-prof for `perf record`), BENCH_PAIRED_ROUNDS (5),
// BENCH_PAIRED_WARMUP_S (15: both sides of a pair under load before its first round), BENCH_DEADLINE_S (1200),
// BENCH_PACED_RATE (req/s of the paced latency runs; default half the gateway's peak), BENCH_WORKERS
// (2: processes of every proxy contender), BENCH_NGINX_REUSEPORT (set: nginx listens with `reuseport`,
// so its workers share the connections as the gateway's SO_REUSEPORT workers do; without it the
// kernel often hands all 50 connections to one nginx worker, which then runs at one process's cost).
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { createConnection } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LoadJob, LoadResult } from './proxy-load.js';
import { formatSelfTimes, profileFiles } from './proxy-profile.js';
import { PROXY_REQUEST_PATH as REQUEST_PATH, proxyBenchEndpoints } from './route-set.js';
import { groupCpuNs, groupSched, type SchedCounts } from './group-cpu.js';
import { formatPairs, pairsFrom, pairTargetLines, summarizePair, type PairRound, type PairSummary, type SideResult } from './proxy-paired.js';
import { firstLine as firstLineOf, get, onPath, waitFor200 as waitFor200Of } from './children.js';
import { findFreePort } from '../src/cluster/free-port.js';
import { median } from './median.js';
import { startOtlpSink } from './otlp-sink.js';

const env = process.env;
const DURATION_S = Number(env.BENCH_DURATION_S ?? 8);
const FIRST_WARMUP_S = Number(env.BENCH_WARMUP_S ?? 3);
const LATER_WARMUP_S = Math.min(1, FIRST_WARMUP_S);
const CONNECTIONS = Number(env.BENCH_CONNECTIONS ?? 50);
const ROUNDS = Number(env.BENCH_ROUNDS ?? 3);
/**
 * The paced half-rate runs (gateway, direct, gateway-off, nginx and the floor, interleaved). Their p99 swings by
 * 2-3x from one minute to the next on a shared 2-core machine, so the added latency is taken per
 * round (a contender against the direct run of the same round) and the median of those is reported.
 */
const PACED_ROUNDS = ROUNDS;
/** Rounds of each feature pair run side by side (bench/proxy-paired.ts); 0 leaves them out. Needs wrk. */
const PAIRED_ROUNDS = Number(env.BENCH_PAIRED_ROUNDS ?? 5);
/**
 * Load on both sides of a pair before its first round (1 s before the others). A contender of a later
 * pair was stopped while the pairs before it ran, after one warmed-up solo round: span export's first
 * paired rounds read 1.44x, 1.21x, 1.12x of the CPU per request and the later ones 1.00-1.12x
 * (2026-11-27), its once-a-second export code still warming up.
 */
const PAIRED_FIRST_WARMUP_S = Number(env.BENCH_PAIRED_WARMUP_S ?? 15);
const DEADLINE_S = Number(env.BENCH_DEADLINE_S ?? 1200);
const WORKERS = Number(env.BENCH_WORKERS ?? 2);
const PROFILE_DIR = env.BENCH_PROFILE_DIR || null;
/** The gateway contender that runs with --cpu-prof (and BENCH_GATEWAY_NODE_FLAGS). */
const PROFILE_ID = env.BENCH_PROFILE_ID || 'gateway';
const GATEWAY_NODE_FLAGS = (env.BENCH_GATEWAY_NODE_FLAGS ?? '').split(' ').filter((s) => s !== '');
const ONLY = env.BENCH_ONLY ? new Set(env.BENCH_ONLY.split(',').map((s) => s.trim())) : null;
const WANTED_TOOLS = new Set((env.BENCH_TOOLS ?? 'autocannon,wrk').split(',').map((s) => s.trim()));

const HERE = fileURLToPath(new URL('.', import.meta.url));
const ROOT = join(HERE, '../..');
const GATEWAY_MAIN = join(ROOT, 'dist/bundle/gateway.mjs');

type Tool = 'autocannon' | 'wrk';

interface Contender {
  id: string;
  label: string;
  origin: string | null;
  skipped: string | null;
  /** Process group whose CPU time is the contender's (the upstream's own for "direct"). */
  pgid: number;
  /** Sent with every request (the API key of the middleware contenders). */
  headers?: Record<string, string>;
}

interface Measurement {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  failures: number;
  /** CPU time of the contender's processes per request, microseconds (NaN when unknown). */
  cpuUsPerRequest: number;
}

// ---- processes -------------------------------------------------------------------------------------

const children = new Set<ChildProcess>();
let workDir = '';
let cleaning: Promise<void> | null = null;

function log(text: string): void {
  process.stderr.write(`[bench:proxy] ${text}\n`);
}

/** Every child in its own process group, so stopping it stops whatever it forked. */
function startChild(command: string, args: string[], options: { env?: NodeJS.ProcessEnv; stdout?: number | 'pipe' | 'ignore' } = {}): ChildProcess {
  const child = spawn(command, args, {
    detached: true,
    stdio: ['ignore', options.stdout ?? 'pipe', 'pipe'],
    env: options.env ?? process.env,
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  let stderr = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  (child as ChildProcess & { stderrTail: () => string }).stderrTail = () => stderr;
  return child;
}

function stderrTail(child: ChildProcess): string {
  return (child as ChildProcess & { stderrTail?: () => string }).stderrTail?.() ?? '';
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** SIGTERM to the group (SIGTERM to the leader only when `leaderOnly`), SIGKILL after `graceMs`. */
async function stopChild(child: ChildProcess, graceMs = 3000, leaderOnly = false): Promise<void> {
  if (child.pid === undefined) return;
  const done = exited(child);
  // A group the spotlight stopped would hold SIGTERM until continued.
  signalGroup(child.pid, 'SIGCONT');
  try {
    process.kill(leaderOnly ? child.pid : -child.pid, 'SIGTERM');
  } catch {
    // already gone
  }
  const timer = setTimeout(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  }, graceMs);
  await done;
  clearTimeout(timer);
  // Whatever the leader forked and left behind.
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // none left
  }
}

function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    await Promise.all([...children].map((child) => stopChild(child)));
    if (workDir !== '') rmSync(workDir, { recursive: true, force: true });
  })();
  return cleaning;
}

/** A child's first line on stdout; errors carry its stderr's tail. */
function firstLine(child: ChildProcess, what: string, timeoutMs = 20_000): Promise<string> {
  return firstLineOf(child, what, timeoutMs, () => stderrTail(child));
}

function waitFor200(origin: string, path: string, what: string, child: ChildProcess, timeoutMs = 30_000): Promise<void> {
  return waitFor200Of(origin, path, what, child, timeoutMs, () => stderrTail(child));
}

// ---- contenders ------------------------------------------------------------------------------------

const groups = new Map<string, number>();

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // the group is gone
  }
}

/**
 * Only the contender under measurement runs: every other one is stopped (SIGSTOP to its process
 * group), so their timers, GC and idle wakeups don't share the two cores with it. Idle, the gateway
 * contenders alone woke about 40 times a second per worker; with ten contenders up that is a few
 * percent of a core and a cache disturbed at random. The upstream ("direct") and redis always run.
 * `null` continues every contender.
 */
function spotlight(active: readonly Contender[], measured: Contender | readonly Contender[] | null): void {
  const running = measured === null ? null : Array.isArray(measured) ? measured : [measured];
  for (const contender of active) {
    if (contender.id === 'direct' || contender.pgid === 0) continue;
    signalGroup(contender.pgid, running === null || running.includes(contender) ? 'SIGCONT' : 'SIGSTOP');
  }
}

async function startUpstream(): Promise<string> {
  const child = startChild(process.execPath, [join(HERE, 'proxy-upstream.js'), '0']);
  groups.set('direct', child.pid!);
  const { port } = JSON.parse(await firstLine(child, 'upstream')) as { port: number };
  return `http://127.0.0.1:${port}`;
}

/** The API key every request of the middleware contenders carries, and its digest for the config. */
const API_KEY = 'bench-key-0123456789abcdef';
/** Where the tracing contenders export spans: an OTLP/HTTP sink in this process that reads and drops them. */
let otlpSinkUrl = '';

async function startSink(): Promise<void> {
  otlpSinkUrl = await startOtlpSink();
}
const API_KEY_HEADERS = { 'x-api-key': API_KEY };

/** Middleware (and stores) of each gateway contender: none for "gateway" and "gateway-off". */
function featureConfig(id: string, redisUrl: string | null): Record<string, unknown> {
  const sha256 = createHash('sha256').update(API_KEY).digest('hex');
  // A limit no run reaches: what is measured is the decision, not rejections.
  const auth = { id: 'auth', type: 'apiKeyAuth', header: 'x-api-key', keys: [{ consumer: 'bench', sha256 }] };
  const limit = (store: string) => ({ id: 'limit', type: 'rateLimit', limit: 10_000_000, windowMs: 1000, key: 'consumer', scope: 'global', store, slaMs: 100 });
  switch (id) {
    case 'gateway-mw':
      return { middleware: [auth, limit('local')] };
    case 'gateway-mw-redis':
      return { kvStores: { shared: { type: 'redis', url: redisUrl, keyPrefix: 'bench:' } }, middleware: [auth, limit('shared')] };
    case 'gateway-trace-1':
      return { tracing: { otlpEndpoint: otlpSinkUrl, sampleRatio: 0.01 } };
    case 'gateway-trace-100':
      return { tracing: { otlpEndpoint: otlpSinkUrl, sampleRatio: 1 } };
    case 'gateway-cache':
      // The bench upstream sends no Cache-Control: defaultTtlMs makes its 200s storable.
      return { middleware: [{ id: 'cache', type: 'responseCache', store: 'local', defaultTtlMs: 600_000 }] };
    default:
      return {};
  }
}

async function startRedis(): Promise<string> {
  const port = await findFreePort('127.0.0.1');
  const child = startChild('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdout: 'pipe' });
  groups.set('redis', child.pid!);
  const deadline = Date.now() + 10_000;
  for (;;) {
    const up = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ host: '127.0.0.1', port }, () => {
        socket.end();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (up) return `redis://127.0.0.1:${port}`;
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`redis-server did not start\n${stderrTail(child)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function startGateway(id: string, upstream: string, endpoints: Array<{ method: string; path: string }>, observe: boolean, redisUrl: string | null = null): Promise<string> {
  const port = await findFreePort('127.0.0.1');
  const configFile = join(workDir, `${id}.json`);
  writeFileSync(
    configFile,
    JSON.stringify({
      host: '127.0.0.1',
      port,
      workers: WORKERS,
      upstreams: [{ serviceType: 'static', serviceLocation: upstream, endpoints }],
      discovery: { refreshIntervalMs: 0 },
      accessLog: { enabled: observe },
      metrics: { enabled: observe },
      requestId: { enabled: observe },
      ...featureConfig(id, redisUrl),
    }),
  );
  // The access log goes to the gateway's stdout: a file, as a production log would.
  const out = openSync(join(workDir, `${id}.log`), 'w');
  // Node 20 refuses --cpu-prof in NODE_OPTIONS; cluster workers inherit the primary's execArgv.
  const nodeFlags: string[] = [];
  if (PROFILE_DIR !== null && id === PROFILE_ID) {
    mkdirSync(PROFILE_DIR, { recursive: true });
    nodeFlags.push('--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`);
  }
  if (GATEWAY_NODE_FLAGS.length > 0 && id === PROFILE_ID) nodeFlags.push(...GATEWAY_NODE_FLAGS);
  const child = startChild(process.execPath, [...nodeFlags, GATEWAY_MAIN, 'start', '--config', configFile, '--workers', String(WORKERS)], { stdout: out });
  closeSync(out);
  gatewayProcesses.set(id, child);
  groups.set(id, child.pid!);
  const origin = `http://127.0.0.1:${port}`;
  await waitFor200(origin, '/healthcheck', id, child);
  return origin;
}
const gatewayProcesses = new Map<string, ChildProcess>();

function nginxConfig(dir: string, port: number, upstream: string, cache: boolean): string {
  const up = new URL(upstream);
  // Cached for 10 minutes in a keys zone (the file is read through the page cache: nginx's usual setup).
  const cacheZone = cache ? `proxy_cache_path ${dir}/cache levels=1:2 keys_zone=bench:10m max_size=64m inactive=10m use_temp_path=off;` : '';
  const cacheUse = cache ? 'proxy_cache bench;\n      proxy_cache_valid 200 10m;\n      add_header X-Cache $upstream_cache_status;' : '';
  return `# written by bench/proxy.ts
${process.getuid?.() === 0 ? 'user root;' : ''}
worker_processes ${WORKERS};
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  # Logged like the gateway's access log: every request, to a file, through a buffer flushed often.
  access_log ${dir}/access.log combined buffer=64k flush=250ms;
  ${cacheZone}
  upstream bench_upstream {
    server ${up.hostname}:${up.port};
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:${port}${env.BENCH_NGINX_REUSEPORT ? " reuseport" : ""};
    # nginx closes a keep-alive connection after 1,000 requests by default; the gateway does not.
    keepalive_requests 1000000;
    location / {
      proxy_pass http://bench_upstream;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      # The header work the gateway does too (docs/reference/forward.md#forwarding-headers).
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Host $host;
      proxy_set_header Via "1.1 nginx";
      add_header Via "1.1 nginx";
      ${cacheUse}
    }
  }
}
`;
}

async function startNginx(id: string, upstream: string, cache: boolean): Promise<string> {
  const dir = join(workDir, id);
  mkdirSync(dir, { recursive: true });
  const port = await findFreePort('127.0.0.1');
  const conf = join(dir, 'nginx.conf');
  writeFileSync(conf, nginxConfig(dir, port, upstream, cache));
  const child = startChild('nginx', ['-p', dir, '-e', join(dir, 'error.log'), '-c', conf, '-g', 'daemon off;']);
  groups.set(id, child.pid!);
  const origin = `http://127.0.0.1:${port}`;
  await waitFor200(origin, REQUEST_PATH, id, child, 10_000);
  return origin;
}

/** A Node stand-in of bench/ (proxy-<id>.js, node:cluster with WORKERS processes). */
async function startStandIn(id: 'naive' | 'floor', upstream: string): Promise<string> {
  const port = await findFreePort('127.0.0.1');
  const child = startChild(process.execPath, [join(HERE, `proxy-${id}.js`), upstream, String(port), String(WORKERS)]);
  groups.set(id, child.pid!);
  await firstLine(child, id);
  return `http://127.0.0.1:${port}`;
}

async function startFastify(upstream: string): Promise<string> {
  const port = await findFreePort('127.0.0.1');
  const child = startChild(process.execPath, [join(HERE, 'proxy-fastify.js'), upstream, String(port), String(WORKERS)]);
  groups.set('fastify', child.pid!);
  await firstLine(child, 'fastify');
  return `http://127.0.0.1:${port}`;
}

// ---- load ------------------------------------------------------------------------------------------

/** Runs a load job in a child; `onMeasuring` is called when its warm-up is over. */
function runLoadChild(job: LoadJob, onMeasuring: () => void = () => {}): Promise<LoadResult> {
  const child = startChild(process.execPath, [join(HERE, 'proxy-load.js'), JSON.stringify(job)]);
  const timer = setTimeout(() => void stopChild(child), (job.warmupS + job.durationS) * 1000 + 30_000);
  return new Promise((resolve, reject) => {
    let buffered = '';
    let result: LoadResult | null = null;
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      buffered += chunk;
      let newline: number;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        if (line === 'measuring') onMeasuring();
        else result = JSON.parse(line) as LoadResult;
      }
    });
    // 'close', not 'exit': at 'exit' the last of stdout may not have been read yet (seen: wrk's whole report).
    child.once('close', (code) => {
      clearTimeout(timer);
      if (result !== null && code === 0) resolve(result);
      else reject(new Error(`load on ${job.url} failed (${code})\n${stderrTail(child)}`));
    });
  });
}

function parseWrkTime(text: string): number {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(text.trim());
  if (match === null) return NaN;
  const value = Number(match[1]);
  return { us: value / 1000, ms: value, s: value * 1000, m: value * 60_000 }[match[2] as 'us' | 'ms' | 's' | 'm'];
}

function runWrk(url: string, durationS: number, headers: Record<string, string> = {}): Promise<Measurement & { requests: number }> {
  return new Promise((resolve, reject) => {
    const headerArgs = Object.entries(headers).flatMap(([name, value]) => ['-H', `${name}: ${value}`]);
    const child = startChild('wrk', ['-t1', `-c${CONNECTIONS}`, `-d${durationS}s`, '--latency', ...headerArgs, url]);
    let out = '';
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => (out += chunk));
    const timer = setTimeout(() => void stopChild(child), (durationS + 30) * 1000);
    // 'close', not 'exit': at 'exit' the last of stdout may not have been read yet (a paired run once
    // failed with "wrk ... failed (0):" and an empty report).
    child.once('close', (code) => {
      clearTimeout(timer);
      const rps = /Requests\/sec:\s*([\d.]+)/.exec(out);
      const total = /(\d+) requests in/.exec(out);
      const p50 = /^\s*50%\s+(\S+)/m.exec(out);
      const p99 = /^\s*99%\s+(\S+)/m.exec(out);
      if (code !== 0 || rps === null || total === null || p50 === null || p99 === null) {
        reject(new Error(`wrk on ${url} failed (${code}):\n${out}${stderrTail(child)}`));
        return;
      }
      const non2xx = /Non-2xx or 3xx responses:\s*(\d+)/.exec(out);
      const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
      const failures = Number(non2xx?.[1] ?? 0) + (socket === null ? 0 : socket.slice(1).reduce((sum, n) => sum + Number(n), 0));
      resolve({ rps: Number(rps[1]), requests: Number(total[1]), p50Ms: parseWrkTime(p50[1]!), p99Ms: parseWrkTime(p99[1]!), failures, cpuUsPerRequest: NaN });
    });
  });
}

async function measure(tool: Tool, contender: Contender, warmupS: number): Promise<Measurement> {
  const url = `${contender.origin}${REQUEST_PATH}`;
  let cpuAtStart = 0;
  if (tool === 'wrk') {
    if (warmupS > 0) await runWrk(url, warmupS, contender.headers);
    cpuAtStart = groupCpuNs(contender.pgid);
    const result = await runWrk(url, DURATION_S, contender.headers);
    return { ...result, cpuUsPerRequest: (groupCpuNs(contender.pgid) - cpuAtStart) / 1000 / result.requests };
  }
  const result = await runLoadChild({ mode: 'autocannon', url, headers: contender.headers, connections: CONNECTIONS, durationS: DURATION_S, warmupS }, () => {
    cpuAtStart = groupCpuNs(contender.pgid);
  });
  const cpuUsPerRequest = (groupCpuNs(contender.pgid) - cpuAtStart) / 1000 / result.requests;
  return { rps: result.rps, p50Ms: result.p50Ms, p99Ms: result.p99Ms, failures: result.failures, cpuUsPerRequest };
}

/** Two contenders at once, each under its own wrk (bench/proxy-paired.ts says why). */
async function measurePair(base: Contender, variant: Contender, warmupS: number): Promise<PairRound> {
  const urlOf = (c: Contender): string => `${c.origin}${REQUEST_PATH}`;
  if (warmupS > 0) await Promise.all([runWrk(urlOf(base), warmupS, base.headers), runWrk(urlOf(variant), warmupS, variant.headers)]);
  const baseAtStart = groupCpuNs(base.pgid);
  const variantAtStart = groupCpuNs(variant.pgid);
  const [b, v] = await Promise.all([runWrk(urlOf(base), DURATION_S, base.headers), runWrk(urlOf(variant), DURATION_S, variant.headers)]);
  const side = (m: { rps: number; requests: number }, cpuNs: number): SideResult => ({ requests: m.requests, rps: m.rps, cpuUsPerRequest: cpuNs / 1000 / m.requests });
  return { base: side(b, groupCpuNs(base.pgid) - baseAtStart), variant: side(v, groupCpuNs(variant.pgid) - variantAtStart) };
}

// ---- report ----------------------------------------------------------------------------------------

/**
 * A paced run with what the scheduler did to the contender's processes meanwhile, per request: its
 * on-CPU time, its time runnable but waiting for a CPU, and its preemptions. On 2 cores shared with the
 * load generator and the upstream, a contender's tail at a fixed rate follows how much of the cores
 * everything takes (docs/benchmarks.md), and these say where its requests waited.
 */
interface PacedResult extends LoadResult {
  cpuUs: number;
  waitUs: number;
  preemptedPer1k: number;
}

function withSched(load: LoadResult, atStart: SchedCounts | null, atEnd: SchedCounts): PacedResult {
  const n = load.requests > 0 && atStart !== null ? load.requests : NaN;
  const start = atStart ?? atEnd;
  return {
    ...load,
    cpuUs: (atEnd.runNs - start.runNs) / 1000 / n,
    waitUs: (atEnd.waitNs - start.waitNs) / 1000 / n,
    preemptedPer1k: ((atEnd.preempted - start.preempted) * 1000) / n,
  };
}

/** p99 of `runs` less p99 of `direct` round by round (run i beside direct run i), and their median. */
function addedP99(runs: readonly LoadResult[], direct: readonly LoadResult[]): { perRound: number[]; median: number } {
  const perRound: number[] = [];
  for (let i = 0; i < runs.length && i < direct.length; i++) perRound.push(runs[i]!.p99Ms - direct[i]!.p99Ms);
  return { perRound, median: median(perRound) };
}

function medianOf(runs: Measurement[]): Measurement {
  return {
    rps: median(runs.map((r) => r.rps)),
    p50Ms: median(runs.map((r) => r.p50Ms)),
    p99Ms: median(runs.map((r) => r.p99Ms)),
    failures: runs.reduce((sum, r) => sum + r.failures, 0),
    cpuUsPerRequest: median(runs.map((r) => r.cpuUsPerRequest)),
  };
}

const fmtRps = (n: number): string => Math.round(n).toLocaleString('en-US');
const fmtMs = (n: number): string => n.toFixed(2);

function targetLine(name: string, measured: string, ok: boolean, missedBy: number): string {
  return `- ${name}: ${measured} — ${ok ? 'met' : `MISSED by ${(missedBy * 100).toFixed(0)}%`}`;
}

// ---- main ------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const startedAt = Date.now();
  workDir = mkdtempSync(join(tmpdir(), 'specgate-bench-proxy-'));
  const tools: Tool[] = [];
  const toolNotes: string[] = [];
  if (WANTED_TOOLS.has('autocannon')) tools.push('autocannon');
  if (WANTED_TOOLS.has('wrk')) {
    if (onPath('wrk')) tools.push('wrk');
    else toolNotes.push('wrk: skipped (wrk not installed)');
  }
  const wanted = (id: string): boolean => ONLY === null || ONLY.has(id);

  log(`building the route set and starting the upstream`);
  const endpoints = proxyBenchEndpoints();
  const upstream = await startUpstream();
  const direct = await get(upstream, REQUEST_PATH);
  if (direct.status !== 200) throw new Error(`upstream answered ${direct.status}`);

  const contenders: Contender[] = [
    { id: 'direct', label: 'direct to the upstream', origin: upstream, skipped: null, pgid: 0 },
    { id: 'gateway', label: 'gateway (metrics + access log on)', origin: null, skipped: null, pgid: 0 },
    { id: 'gateway-off', label: 'gateway (metrics + access log off)', origin: null, skipped: null, pgid: 0 },
    { id: 'nginx', label: `nginx (${WORKERS} workers, keepalive 64)`, origin: null, skipped: null, pgid: 0 },
    { id: 'naive', label: `naive uWS + undici Pool.dispatch (${WORKERS} processes, no routing/metrics/log)`, origin: null, skipped: null, pgid: 0 },
    { id: 'floor', label: `floor: uWS + net.Socket, nothing else (${WORKERS} processes; see bench/proxy-floor.ts)`, origin: null, skipped: null, pgid: 0 },
    { id: 'fastify', label: `fastify + @fastify/http-proxy (${WORKERS} processes)`, origin: null, skipped: null, pgid: 0 },
    { id: 'gateway-mw', label: 'gateway + apiKeyAuth + rateLimit (local store)', origin: null, skipped: null, pgid: 0, headers: API_KEY_HEADERS },
    { id: 'gateway-mw-redis', label: 'gateway + apiKeyAuth + rateLimit (Redis store)', origin: null, skipped: null, pgid: 0, headers: API_KEY_HEADERS },
    { id: 'gateway-cache', label: 'gateway + responseCache (local), every request a hit', origin: null, skipped: null, pgid: 0 },
    { id: 'gateway-trace-1', label: 'gateway + span export (OTLP/HTTP), 1% sampled', origin: null, skipped: null, pgid: 0 },
    { id: 'gateway-trace-100', label: 'gateway + span export (OTLP/HTTP), every request sampled', origin: null, skipped: null, pgid: 0 },
    { id: 'nginx-cache', label: `nginx + proxy_cache, every request a hit`, origin: null, skipped: null, pgid: 0 },
  ];
  const byId = (id: string): Contender => contenders.find((c) => c.id === id)!;
  log(`starting the contenders (${endpoints.length} routes on the gateway)`);
  const starts: Array<Promise<void>> = [];
  const start = (id: string, run: () => Promise<string>): void => {
    const contender = byId(id);
    if (!wanted(id)) {
      contender.skipped = 'skipped (BENCH_ONLY)';
      return;
    }
    starts.push(run().then((origin) => void (contender.origin = origin)));
  };
  if (!wanted('direct')) byId('direct').skipped = 'skipped (BENCH_ONLY)';
  start('gateway', () => startGateway('gateway', upstream, endpoints, true));
  start('gateway-off', () => startGateway('gateway-off', upstream, endpoints, false));
  if (onPath('nginx')) {
    start('nginx', () => startNginx('nginx', upstream, false));
    start('nginx-cache', () => startNginx('nginx-cache', upstream, true));
  } else {
    byId('nginx').skipped = 'skipped (nginx not installed)';
    byId('nginx-cache').skipped = 'skipped (nginx not installed)';
  }
  start('gateway-mw', () => startGateway('gateway-mw', upstream, endpoints, true));
  start('gateway-cache', () => startGateway('gateway-cache', upstream, endpoints, true));
  if (wanted('gateway-trace-1') || wanted('gateway-trace-100')) await startSink();
  start('gateway-trace-1', () => startGateway('gateway-trace-1', upstream, endpoints, true));
  start('gateway-trace-100', () => startGateway('gateway-trace-100', upstream, endpoints, true));
  if (onPath('redis-server')) start('gateway-mw-redis', async () => startGateway('gateway-mw-redis', upstream, endpoints, true, await startRedis()));
  else byId('gateway-mw-redis').skipped = 'skipped (redis-server not installed)';
  start('naive', () => startStandIn('naive', upstream));
  start('floor', () => startStandIn('floor', upstream));
  start('fastify', () => startFastify(upstream));
  await Promise.all(starts);
  for (const contender of contenders) {
    if (contender.origin === null || contender.skipped !== null) continue;
    const answer = await get(contender.origin, REQUEST_PATH, contender.headers);
    if (answer.status !== 200 || answer.body !== direct.body) {
      throw new Error(`${contender.id} answered ${answer.status} ${answer.body.slice(0, 200)} for ${REQUEST_PATH}`);
    }
  }
  const active = contenders.filter((c) => c.origin !== null && c.skipped === null);
  for (const contender of active) contender.pgid = groups.get(contender.id) ?? 0;
  log(`ready in ${((Date.now() - startedAt) / 1000).toFixed(1)} s; ${ROUNDS} round(s) x ${tools.join('+')} x ${active.map((c) => c.id).join(', ')}, ${DURATION_S} s each`);

  // Interleaved rounds; each round starts with a different contender so none always follows another.
  const runs = new Map<string, Measurement[]>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const tool of tools) {
      for (let k = 0; k < active.length; k++) {
        const contender = active[(k + round) % active.length]!;
        spotlight(active, contender);
        const m = await measure(tool, contender, round === 0 ? FIRST_WARMUP_S : LATER_WARMUP_S);
        const key = `${contender.id}\0${tool}`;
        runs.set(key, [...(runs.get(key) ?? []), m]);
        log(`round ${round + 1} ${tool.padEnd(10)} ${contender.id.padEnd(12)} ${fmtRps(m.rps).padStart(7)} req/s  p50 ${fmtMs(m.p50Ms)} ms  p99 ${fmtMs(m.p99Ms)} ms  CPU ${m.cpuUsPerRequest.toFixed(1)} us/req${m.failures ? `  ${m.failures} failures` : ''}`);
      }
    }
  }
  const result = (id: string, tool: Tool): Measurement | null => {
    const list = runs.get(`${id}\0${tool}`);
    return list === undefined ? null : medianOf(list);
  };

  // What a feature costs, measured beside the gateway without it (bench/proxy-paired.ts).
  const pairs: PairSummary[] = [];
  if (tools.includes('wrk')) {
    for (const spec of pairsFrom(env.BENCH_PAIRS)) {
      const base = active.find((c) => c.id === spec.base);
      const variant = active.find((c) => c.id === spec.variant);
      if (base === undefined || variant === undefined) {
        log(`paired ${spec.base}:${spec.variant}: skipped (${base === undefined ? spec.base : spec.variant} is not running)`);
        continue;
      }
      const rounds: PairRound[] = [];
      for (let round = 0; round < PAIRED_ROUNDS; round++) {
        spotlight(active, [base, variant]);
        const r = await measurePair(base, variant, round === 0 ? PAIRED_FIRST_WARMUP_S : LATER_WARMUP_S);
        rounds.push(r);
        log(`paired ${round + 1} ${spec.base} ${r.base.cpuUsPerRequest.toFixed(1)} us/req, ${spec.variant} ${r.variant.cpuUsPerRequest.toFixed(1)} us/req: ${(r.variant.cpuUsPerRequest / r.base.cpuUsPerRequest).toFixed(3)}x`);
      }
      if (rounds.length > 0) pairs.push(summarizePair(spec, rounds));
    }
  }

  // Added latency at half the gateway's peak: a paced, evenly spread fixed rate (see proxy-load.ts).
  const peakTool: Tool = tools.includes('wrk') ? 'wrk' : 'autocannon';
  const peak = result('gateway', peakTool)?.rps ?? 0;
  const halfRate = env.BENCH_PACED_RATE ? Number(env.BENCH_PACED_RATE) : Math.round(peak / 2);
  const paced = new Map<string, PacedResult[]>();
  if (peak > 0 && byId('direct').origin !== null && !byId('direct').skipped) {
    // gateway-off, nginx and the floor too, when they run: how much of the added tail is metrics and the
    // access log, what a C proxy adds at the same rate on the same cores, and what uWS and a socket
    // with nothing else add (the least a Node proxy of this shape can).
    const ids = ['gateway', 'direct', 'gateway-off', 'nginx', 'floor'].filter((id) => byId(id).origin !== null && !byId(id).skipped);
    for (let round = 0; round < PACED_ROUNDS; round++) {
      for (const id of round % 2 === 0 ? ids : [...ids].reverse()) {
        const contender = byId(id);
        spotlight(active, contender);
        let atStart: SchedCounts | null = null;
        const load = await runLoadChild(
          {
            mode: 'paced',
            url: `${contender.origin}${REQUEST_PATH}`,
            connections: CONNECTIONS,
            durationS: DURATION_S,
            warmupS: LATER_WARMUP_S,
            rate: halfRate,
          },
          () => (atStart = groupSched(contender.pgid)),
        );
        const r = withSched(load, atStart, groupSched(contender.pgid));
        paced.set(id, [...(paced.get(id) ?? []), r]);
        log(
          `half-rate ${round + 1} ${id.padEnd(12)} ${fmtRps(r.rps).padStart(7)} req/s  p50 ${fmtMs(r.p50Ms)} ms  p99 ${fmtMs(r.p99Ms)} ms  ` +
            `CPU ${r.cpuUs.toFixed(1)} us/req  waiting ${r.waitUs.toFixed(1)} us/req  preempted ${r.preemptedPer1k.toFixed(0)}/1k req` +
            `${r.failures ? `  ${r.failures} failures` : ''}${r.late ? `  ${r.late} late` : ''}`,
        );
      }
    }
  }

  spotlight(active, null);

  // ---- output ----
  const out: string[] = [];
  const cpu = cpus();
  out.push(`## bench:proxy — ${new Date().toISOString()}`);
  out.push('');
  out.push(
    `${cpu.length} CPUs (${cpu[0]?.model ?? '?'}), load average before ${loadavg()[0]!.toFixed(2)}; Node ${process.version}. ` +
      `GET ${REQUEST_PATH} (${endpoints.length} templates on the gateway), ${CONNECTIONS} connections, no pipelining, ` +
      `${DURATION_S} s per run after a warm-up, ${ROUNDS} interleaved round(s), medians. The load generator runs on the same ` +
      `${cpu.length} cores as the proxy and the upstream (the same for every contender). CPU µs/req: on-CPU time of the ` +
      `contender's own processes (all threads; for "direct", the upstream's) per request, from /proc — steadier than req/s ` +
      `on a shared machine.`,
  );
  out.push('');
  out.push('| contender | load tool | req/s | p50 ms | p99 ms | CPU µs/req | req/s per round |');
  out.push('|---|---|---:|---:|---:|---:|---|');
  for (const contender of contenders) {
    if (contender.skipped !== null || contender.origin === null) {
      out.push(`| ${contender.label} | — | ${contender.skipped ?? 'not started'} | | | | |`);
      continue;
    }
    for (const tool of tools) {
      const m = result(contender.id, tool)!;
      const each = runs.get(`${contender.id}\0${tool}`)!.map((r) => fmtRps(r.rps)).join(', ');
      out.push(`| ${contender.label} | ${tool} | ${fmtRps(m.rps)} | ${fmtMs(m.p50Ms)} | ${fmtMs(m.p99Ms)} | ${m.cpuUsPerRequest.toFixed(1)} | ${each}${m.failures ? ` (${m.failures} failures)` : ''} |`);
    }
  }
  for (const note of toolNotes) out.push(`\n${note}`);
  if (paced.size > 0) {
    out.push('');
    out.push(
      env.BENCH_PACED_RATE
        ? `A fixed ${fmtRps(halfRate)} req/s (BENCH_PACED_RATE), paced evenly over ${CONNECTIONS} connections:`
        : `Half the gateway's peak (${peakTool}: ${fmtRps(peak)} req/s) = ${fmtRps(halfRate)} req/s, paced evenly over ${CONNECTIONS} connections:`,
    );
    out.push('');
    out.push('| contender | req/s | p50 ms | p99 ms | p99 per round | CPU µs/req | waiting for a CPU µs/req | preempted per 1k req |');
    out.push('|---|---:|---:|---:|---|---:|---:|---:|');
    for (const id of ['direct', 'gateway', 'gateway-off', 'nginx', 'floor']) {
      const list = paced.get(id) ?? [];
      if (list.length === 0) continue;
      out.push(
        `| ${byId(id).label} | ${fmtRps(median(list.map((r) => r.rps)))} | ${fmtMs(median(list.map((r) => r.p50Ms)))} | ${fmtMs(median(list.map((r) => r.p99Ms)))} | ${list.map((r) => fmtMs(r.p99Ms)).join(', ')} | ` +
          `${median(list.map((r) => r.cpuUs)).toFixed(1)} | ${median(list.map((r) => r.waitUs)).toFixed(1)} | ${median(list.map((r) => r.preemptedPer1k)).toFixed(0)} |`,
      );
    }
    out.push('');
    out.push(
      'CPU, waiting and preempted: the contender\'s threads (for "direct", the upstream\'s) during the measured part of each paced run, from ' +
        '/proc/<pid>/task/<tid>/schedstat and status, medians of the rounds.',
    );
  }

  out.push(...formatPairs(pairs, CONNECTIONS, DURATION_S));
  out.push('');
  out.push('Targets:');
  for (const tool of tools) {
    const gw = result('gateway', tool);
    const nginx = result('nginx', tool);
    const fastify = result('fastify', tool);
    const off = result('gateway-off', tool);
    if (gw !== null && nginx !== null) {
      const ratio = gw.rps / nginx.rps;
      out.push(targetLine(`req/s >= 0.75x nginx (${tool})`, `${ratio.toFixed(2)}x (${fmtRps(gw.rps)} vs ${fmtRps(nginx.rps)})`, ratio >= 0.75, (0.75 - ratio) / 0.75));
    } else {
      out.push(`- req/s >= 0.75x nginx (${tool}): ${byId('nginx').skipped ?? 'not measured'}`);
    }
    if (gw !== null && Number.isFinite(gw.cpuUsPerRequest)) {
      const cpu = gw.cpuUsPerRequest;
      out.push(targetLine(`CPU <= 40 µs per request (${tool})`, `${cpu.toFixed(1)} µs`, cpu <= 40, (cpu - 40) / 40));
    }
    const naive = result('naive', tool);
    if (gw !== null && naive !== null) {
      out.push(`- for comparison, gateway / naive uWS + undici (${tool}): ${(gw.rps / naive.rps).toFixed(2)}x req/s, CPU ${gw.cpuUsPerRequest.toFixed(1)} vs ${naive.cpuUsPerRequest.toFixed(1)} µs/req`);
    }
    const floor = result('floor', tool);
    if (gw !== null && floor !== null) {
      out.push(`- for comparison, gateway / floor (uWS + net.Socket alone) (${tool}): ${(gw.rps / floor.rps).toFixed(2)}x req/s, CPU ${gw.cpuUsPerRequest.toFixed(1)} vs ${floor.cpuUsPerRequest.toFixed(1)} µs/req`);
    }
    if (gw !== null && fastify !== null) {
      const ratio = gw.rps / fastify.rps;
      out.push(targetLine(`req/s >= 3x @fastify/http-proxy (${tool})`, `${ratio.toFixed(2)}x`, ratio >= 3, (3 - ratio) / 3));
      // What the target asks of the architecture in this run: the floor is uWS and a socket with
      // nothing else, so a gateway cannot pass 3x where the floor does not.
      const reach: string[] = [];
      if (floor !== null) reach.push(`floor ${(floor.rps / fastify.rps).toFixed(2)}x`);
      if (nginx !== null) reach.push(`nginx ${(nginx.rps / fastify.rps).toFixed(2)}x`);
      if (reach.length > 0) out.push(`- for comparison, against @fastify/http-proxy (${tool}): ${reach.join(', ')}`);
    }
    if (gw !== null && off !== null) {
      const cost = 1 - gw.rps / off.rps;
      out.push(targetLine(`metrics + access log cost <= 5% of req/s (${tool})`, `${(cost * 100).toFixed(1)}% (${fmtRps(gw.rps)} vs ${fmtRps(off.rps)})`, cost <= 0.05, (cost - 0.05) / 0.05));
    }
  }
  for (const tool of tools) {
    const gw = result('gateway', tool);
    if (gw === null) continue;
    const cost = (id: string, limit: number, what: string): void => {
      const m = result(id, tool);
      if (m === null) {
        out.push(`- ${what} (${tool}): ${byId(id).skipped ?? 'not measured'}`);
        return;
      }
      const rpsCost = 1 - m.rps / gw.rps;
      const cpuCost = m.cpuUsPerRequest / gw.cpuUsPerRequest - 1;
      const worst = Math.max(rpsCost, cpuCost);
      out.push(targetLine(`${what} costs <= ${limit * 100}% of req/s and of CPU/req (${tool})`, `req/s ${(rpsCost * 100).toFixed(1)}% (${fmtRps(m.rps)} vs ${fmtRps(gw.rps)}), CPU ${(cpuCost * 100).toFixed(1)}% (${m.cpuUsPerRequest.toFixed(1)} vs ${gw.cpuUsPerRequest.toFixed(1)} µs)`, worst <= limit, (worst - limit) / limit));
    };
    cost('gateway-mw', 0.1, 'apiKeyAuth + rateLimit on the local store');
    cost('gateway-mw-redis', 0.3, 'apiKeyAuth + rateLimit on a Redis store');
    cost('gateway-trace-1', 0.03, 'span export at 1% sampling');
    const everySpan = result('gateway-trace-100', tool);
    if (everySpan !== null) {
      out.push(`- span export at 100% sampling (${tool}): req/s ${((1 - everySpan.rps / gw.rps) * 100).toFixed(1)}% below the gateway (${fmtRps(everySpan.rps)} vs ${fmtRps(gw.rps)}), CPU ${everySpan.cpuUsPerRequest.toFixed(1)} vs ${gw.cpuUsPerRequest.toFixed(1)} µs/req`);
    }
    const cached = result('gateway-cache', tool);
    if (cached !== null) {
      const ratio = cached.rps / gw.rps;
      out.push(targetLine(`cache hits >= 1.5x the uncached gateway's req/s (${tool})`, `${ratio.toFixed(2)}x (${fmtRps(cached.rps)} vs ${fmtRps(gw.rps)})`, ratio >= 1.5, (1.5 - ratio) / 1.5));
      const direct = result('direct', tool);
      const nginxCache = result('nginx-cache', tool);
      const beside = [direct && `direct ${fmtRps(direct.rps)} (${(cached.rps / direct.rps).toFixed(2)}x)`, nginxCache && `nginx proxy_cache ${fmtRps(nginxCache.rps)} (${(cached.rps / nginxCache.rps).toFixed(2)}x)`].filter(Boolean);
      if (beside.length > 0) out.push(`- cache hits beside (${tool}): ${beside.join(', ')}`);
    }
  }
  out.push(...pairTargetLines(pairs));
  if (paced.has('gateway') && paced.has('direct')) {
    const added = addedP99(paced.get('gateway')!, paced.get('direct')!);
    const figure = `${fmtMs(added.median)} ms (median of ${added.perRound.length} rounds, each the gateway's p99 less direct's of the same round: ${added.perRound.map(fmtMs).join(', ')})`;
    if (env.BENCH_PACED_RATE) out.push(`- p99 added latency at ${fmtRps(halfRate)} req/s (not the target's rate): ${figure}`);
    else out.push(targetLine(`p99 added latency < 2 ms at half peak`, figure, added.median < 2, (added.median - 2) / 2));
    for (const id of ['gateway-off', 'nginx', 'floor']) {
      const list = paced.get(id);
      if (list === undefined) continue;
      const other = addedP99(list, paced.get('direct')!);
      out.push(`- for comparison, p99 added by ${id} at the same rate: ${fmtMs(other.median)} ms (per round: ${other.perRound.map(fmtMs).join(', ')})`);
    }
  }
  out.push('');
  out.push(
    'Fairness: the gateway (metrics and access log on) writes its JSON access log to a file (buffered, 256 KiB async writes); ' +
      'nginx logs every request to a file too (combined format, buffer=64k flush=250ms) and sets the same X-Forwarded-*/Via ' +
      'headers. nginx has no route table (one `location /`); the gateway routes every request through its table. ' +
      `fastify and the naive uWS + undici stand-in run ${WORKERS} processes (node:cluster), no log. Upstream: one uWS process, a fixed JSON body. ` +
      'While one contender is measured every other one is stopped (SIGSTOP to its process group; the upstream and redis run).',
  );
  const accessLog = join(workDir, 'gateway.log');
  try {
    out.push(`Gateway access log written during the run: ${(statSync(accessLog).size / 1e6).toFixed(0)} MB.`);
  } catch {
    // not started
  }
  out.push(`Total bench time: ${((Date.now() - startedAt) / 1000).toFixed(0)} s.`);

  // Profiles are written when the workers exit: stop the profiled gateway first (SIGTERM to its primary).
  if (PROFILE_DIR !== null && gatewayProcesses.has(PROFILE_ID)) {
    const primary = gatewayProcesses.get(PROFILE_ID)!;
    await stopChild(primary, 15_000, true);
    // CPU.<date>.<time>.<pid>.<tid>.<seq>.cpuprofile; the primary's are left out.
    const files = profileFiles([PROFILE_DIR]).filter((f) => basename(f).split('.')[3] !== String(primary.pid));
    const fresh = files.filter((f) => statSync(f).mtimeMs >= startedAt);
    if (fresh.length > 0) {
      out.push('');
      out.push(`Gateway worker CPU profile (${PROFILE_ID}, ${PROFILE_DIR}), top self time:`);
      out.push('');
      out.push(formatSelfTimes(fresh, 30));
    }
  }
  console.log(out.join('\n'));
  writeResults(contenders, tools, result, runs, halfRate, paced, pairs);
}

/** The figures above as JSON, for `npm run bench:chart` (bench/chart.ts reads this shape). */
function writeResults(
  contenders: readonly Contender[],
  tools: readonly Tool[],
  result: (id: string, tool: Tool) => Measurement | null,
  runs: Map<string, Measurement[]>,
  halfRate: number,
  paced: Map<string, PacedResult[]>,
  pairs: readonly PairSummary[],
): void {
  const file = env.BENCH_RESULTS ?? join(fileURLToPath(new URL('../..', import.meta.url)), 'bench/results/proxy.json');
  const direct = paced.get('direct') ?? [];
  const document = {
    tool: 'bench:proxy',
    at: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? null,
    request: REQUEST_PATH,
    connections: CONNECTIONS,
    durationS: DURATION_S,
    rounds: ROUNDS,
    contenders: contenders.map((c) => ({
      id: c.id,
      label: c.label,
      skipped: c.skipped,
      results: Object.fromEntries(
        tools.flatMap((tool) => {
          const m = c.skipped === null ? result(c.id, tool) : null;
          return m === null ? [] : [[tool, { ...m, roundsRps: (runs.get(`${c.id}\0${tool}`) ?? []).map((r) => r.rps) }]];
        }),
      ),
    })),
    paced: {
      rate: halfRate,
      addedP99Ms: Object.fromEntries([...paced].filter(([id]) => id !== 'direct' && direct.length > 0).map(([id, list]) => [id, addedP99(list, direct)])),
      sched: Object.fromEntries(
        [...paced].map(([id, list]) => [id, { cpuUsPerRequest: median(list.map((r) => r.cpuUs)), waitUsPerRequest: median(list.map((r) => r.waitUs)), preemptedPer1k: median(list.map((r) => r.preemptedPer1k)) }]),
      ),
    },
    paired: pairs.map((s) => ({ ...s.spec, rounds: s.rounds, cpuAdded: s.cpuAdded, rpsLost: s.rpsLost })),
  };
  mkdirSync(join(file, '..'), { recursive: true });
  writeFileSync(file, JSON.stringify(document, null, 2) + '\n');
  log(`results written to ${file}`);
}

let exitCode = 0;
const deadline = setTimeout(() => {
  log(`deadline of ${DEADLINE_S} s passed: stopping everything`);
  exitCode = 1;
  void cleanup().then(() => process.exit(1));
}, DEADLINE_S * 1000);
deadline.unref();
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    log(`${signal}: stopping everything`);
    void cleanup().then(() => process.exit(130));
  });
}
main()
  .catch((err: unknown) => {
    // A run cut short by SIGINT or the deadline fails its load child: that is not news.
    if (cleaning === null) console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    exitCode = 1;
  })
  .finally(async () => {
    await cleanup();
    clearTimeout(deadline);
    process.exit(exitCode);
  });
