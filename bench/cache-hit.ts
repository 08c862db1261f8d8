// node dist/bench/cache-hit.js — what a responseCache HIT costs in the data plane against a plain
// proxied request: one data plane process (one worker), one uWS upstream process, autocannon in a third
// process (bench/proxy-load.ts), 127.0.0.1. Modes, interleaved over BENCH_ROUNDS rounds (medians):
//   plain        no middleware: every request proxied
//   noop         one middleware that lets every request through (what any middleware costs)
//   hit          responseCache, every request a HIT (local store: the instance's shared LMDB store)
//   hit-worker   the same with the per-worker in-memory store the local store was before (LocalCacheStore)
//   hit-async    the same entries behind a store whose get answers with a Promise (the price of a
//                microtask and of the pipeline's SLA timer per request)
//   uncacheable  responseCache, every answer `private` (a lookup, a miss, the answer judged: BYPASS)
// First, in this process: what one HIT decision costs in the pipeline (ns, CPU), with the local
// store answering synchronously and with the same store behind a Promise.
// Environment: BENCH_DURATION_S (5), BENCH_WARMUP_S (1), BENCH_CONNECTIONS (50), BENCH_ROUNDS (3).
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LoadJob, LoadResult } from './proxy-load.js';

const env = process.env;
const DURATION_S = Number(env.BENCH_DURATION_S ?? 5);
const WARMUP_S = Number(env.BENCH_WARMUP_S ?? 1);
const CONNECTIONS = Number(env.BENCH_CONNECTIONS ?? 50);
const ROUNDS = Number(env.BENCH_ROUNDS ?? 3);
const HERE = fileURLToPath(new URL('.', import.meta.url));
const SELF = fileURLToPath(import.meta.url);
const MODES = ['plain', 'noop', 'hit', 'hit-worker', 'hit-async', 'uncacheable'] as const;
type Mode = (typeof MODES)[number];

const BODY = JSON.stringify({ id: 1347, number: 42, state: 'open', title: 'Found a bug', user: { login: 'octocat', id: 1 } });

// ---- roles run in child processes -------------------------------------------------------------------

async function upstreamRole(): Promise<void> {
  const { loadUws } = await import('../src/native/uws.js');
  const { uws } = loadUws();
  const app = uws.App();
  app.any('/*', (res, req) => {
    const cacheable = req.getUrl().startsWith('/cached/');
    res.writeStatus('200 OK');
    res.writeHeader('content-type', 'application/json');
    res.writeHeader('cache-control', cacheable ? 'public, max-age=3600' : 'private, max-age=3600');
    res.end(BODY);
  });
  app.listen('127.0.0.1', 0, (socket) => {
    if (socket === false) process.exit(1);
    console.log(JSON.stringify({ port: uws.us_socket_local_port(socket) }));
  });
}

async function gatewayRole(mode: Mode, upstreamUrl: string): Promise<void> {
  const { startDataPlane } = await import('../src/proxy/data-plane.js');
  const { RoutingTable } = await import('../src/routing/table.js');
  const { buildPipeline } = await import('../src/middleware/registry.js');
  const { LocalCacheStore } = await import('../src/cache/local-store.js');
  const { Counters } = await import('../src/metrics/counters.js');
  const { testConfig, entry } = await import('../test/helpers/upstream-server.js');
  const { storeLookup } = await import('../test/helpers/stores.js');
  // CPU time from the first request on: the data plane's cost per request, less sensitive than req/s
  // to other load on the machine.
  let requests = 0;
  let cpuAtFirst: NodeJS.CpuUsage | null = null;
  const plane = await startDataPlane({
    config: testConfig({ upstreams: [{ serviceType: 'static', serviceLocation: upstreamUrl, weight: 1, specPath: '/spec' }] }),
    listeners: [
      {
        id: 'cpu-from-first',
        done: () => {
          if (requests++ === 0) cpuAtFirst = process.cpuUsage();
        },
      },
    ],
  });
  process.on('SIGTERM', () => {
    const used = process.cpuUsage(cpuAtFirst ?? undefined);
    process.stdout.write(JSON.stringify({ cpuUs: used.user + used.system, requests }) + '\n', () => process.exit(0));
  });
  plane.setTable(RoutingTable.compile([entry('GET', '/cached/{id}', upstreamUrl), entry('GET', '/private/{id}', upstreamUrl)]).table);
  if (mode === 'noop') {
    const { Pipeline } = await import('../src/middleware/pipeline.js');
    const noop = { id: 'noop', type: 'noop', slaMs: 100, failClosed: false, decide: () => undefined, ready: () => Promise.resolve(), close: () => Promise.resolve() };
    plane.setPipeline(new Pipeline([noop], new Counters()));
  } else if (mode !== 'plain') {
    const counters = new Counters();
    setInterval(() => counters.take(), 1000).unref();
    const local = new LocalCacheStore(64 * 1024 * 1024, { added: () => {}, removed: () => {} });
    const asyncStore = {
      get: (key: string) => Promise.resolve(local.get(key)),
      set: (key: string, record: Parameters<typeof local.set>[1], ttlMs: number) => local.set(key, record, ttlMs),
      delete: (key: string) => local.delete(key),
      ready: () => Promise.resolve(),
      close: () => local.close(),
    };
    const config = {
      id: 'cache',
      type: 'responseCache' as const,
      slaMs: 100,
      store: mode === 'hit-async' ? 'async' : mode === 'hit-worker' ? 'worker' : 'local',
      maxEntryBytes: 131072,
      maxBytes: 67108864,
      defaultTtlMs: 0,
      staleIfErrorMs: 60000,
    };
    plane.setPipeline(buildPipeline([config], { metrics: counters, warn: () => {}, stores: storeLookup({ cache: (name) => (name === 'worker' ? local : asyncStore) }) }));
  }
  console.log(JSON.stringify({ port: plane.port }));
}

// ---- the decision alone ------------------------------------------------------------------------------

async function decisionCost(): Promise<void> {
  const { buildPipeline } = await import('../src/middleware/registry.js');
  const { RequestContext } = await import('../src/exchange/context.js');
  const { LocalCacheStore } = await import('../src/cache/local-store.js');
  const { judge } = await import('../src/cache/rules.js');
  const { StoredResponse } = await import('../src/cache/record.js');
  const { primaryKey } = await import('../src/cache/key.js');
  const { storeLookup } = await import('../test/helpers/stores.js');
  type Route = NonNullable<InstanceType<typeof RequestContext>['route']>;
  const route = { id: 0, method: 'GET', template: '/items/{id}', canonical: '/items/{}', targets: [], paramNames: ['id'] } as unknown as Route;
  const local = new LocalCacheStore(1 << 26, { added: () => {}, removed: () => {} });
  const behindPromise = {
    get: (key: string) => Promise.resolve(local.get(key)),
    set: local.set.bind(local),
    delete: local.delete.bind(local),
    ready: () => Promise.resolve(),
    close: () => Promise.resolve(),
  };
  const key = primaryKey('http://gw.bench', '/items/{}', '/items/1', '');
  const headers = ['content-type', 'application/json', 'cache-control', 'public, max-age=3600'];
  const policy = judge(key, [], 200, headers, 0).policy!;
  local.set(key, new StoredResponse(200, headers, Buffer.from(BODY), policy, key, Date.now()), 3_600_000);
  const request = ['accept', '*/*', 'user-agent', 'bench', 'x-forwarded-for', '127.0.0.1', 'x-forwarded-proto', 'http', 'via', '1.1 gw'];
  const { SharedCacheStore } = await import('../src/cache/shared-store.js');
  const shared = new SharedCacheStore(undefined, 'c', 1 << 26, { added: () => {}, removed: () => {} });
  shared.set(key, new StoredResponse(200, headers, Buffer.from(BODY), policy, key, Date.now()), 3_600_000);
  for (const store of ['sync', 'shared', 'async', 'sync', 'shared', 'async']) {
    const config = { id: 'c', type: 'responseCache' as const, slaMs: 1000, store, maxEntryBytes: 131072, maxBytes: 1 << 26, defaultTtlMs: 0, staleIfErrorMs: 0 };
    const pipeline = buildPipeline([config], { metrics: { add: () => {} }, warn: () => {}, stores: storeLookup({ cache: (name) => (name === 'sync' ? local : name === 'shared' ? shared : behindPromise) }) });
    const batch = (n: number) =>
      new Promise<void>((resolve) => {
        let left = n;
        const done = (answer: unknown) => {
          if (answer === null) throw new Error('a miss where a hit was expected');
          if (--left === 0) resolve();
        };
        for (let i = 0; i < n; i++) {
          const ctx = new RequestContext({ method: 'GET', url: '/items/1', query: '', peer: '127.0.0.1', startedAt: 0, xForwardedFor: undefined, hasBody: false, secure: false, contentLength: -1, forward: request.slice() });
          ctx.route = route;
          pipeline.run(ctx, pipeline.entries, 0, done);
        }
      });
    for (let i = 0; i < 200; i++) await batch(100);
    const decisions = 200_000;
    const cpu = process.cpuUsage();
    for (let i = 0; i < decisions / 100; i++) await batch(100);
    const used = process.cpuUsage(cpu);
    process.stderr.write(`[cache-hit] one HIT decision, ${store} store: ${(((used.user + used.system) * 1000) / decisions).toFixed(0)} ns CPU (with its RequestContext)\n`);
  }
}

// ---- the parent ----------------------------------------------------------------------------------------

const children = new Set<ChildProcess>();

interface Started {
  child: ChildProcess;
  port: number;
  /** Lines the child printed after its first. */
  lines: string[];
}

function start(args: string[]): Promise<Started> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  children.add(child);
  const lines: string[] = [];
  return new Promise((resolve, reject) => {
    let text = '';
    let first = true;
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      text += chunk;
      let newline: number;
      while ((newline = text.indexOf('\n')) >= 0) {
        const line = text.slice(0, newline);
        text = text.slice(newline + 1);
        if (first) {
          first = false;
          resolve({ child, port: (JSON.parse(line) as { port: number }).port, lines });
        } else {
          lines.push(line);
        }
      }
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited (${code})`)));
  });
}

function stop(child: ChildProcess): Promise<void> {
  children.delete(child);
  if (child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

function load(url: string): Promise<LoadResult> {
  const job: LoadJob = { mode: 'autocannon', url, connections: CONNECTIONS, durationS: DURATION_S, warmupS: WARMUP_S };
  const child = spawn(process.execPath, [join(HERE, 'proxy-load.js'), JSON.stringify(job)], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.add(child);
  return new Promise((resolve, reject) => {
    let text = '';
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => (text += chunk));
    // 'close', not 'exit': at 'exit' the last of stdout may not have been read yet.
    child.once('close', (code) => {
      children.delete(child);
      const line = text.split('\n').find((l) => l.startsWith('{'));
      if (code === 0 && line !== undefined) resolve(JSON.parse(line) as LoadResult);
      else reject(new Error(`load failed (${code})`));
    });
  });
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function main(): Promise<void> {
  await decisionCost();
  const upstream = await start([SELF, 'upstream']);
  const upstreamUrl = `http://127.0.0.1:${upstream.port}`;
  const results = new Map<Mode, LoadResult[]>(MODES.map((mode) => [mode, []]));
  const cpu = new Map<Mode, number[]>(MODES.map((mode) => [mode, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const mode of MODES) {
      const gateway = await start([SELF, 'gateway', mode, upstreamUrl]);
      const path = mode === 'uncacheable' ? '/private/1' : '/cached/1';
      const result = await load(`http://127.0.0.1:${gateway.port}${path}`);
      await stop(gateway.child);
      const used = JSON.parse(gateway.lines[0] ?? '{"cpuUs":0,"requests":0}') as { cpuUs: number; requests: number };
      const cpuPerRequest = used.cpuUs / Math.max(1, used.requests);
      results.get(mode)!.push(result);
      cpu.get(mode)!.push(cpuPerRequest);
      process.stderr.write(
        `[cache-hit] round ${round + 1} ${mode}: ${Math.round(result.rps)} req/s, p50 ${result.p50Ms.toFixed(2)} ms, p99 ${result.p99Ms.toFixed(2)} ms, ` +
          `data plane CPU ${cpuPerRequest.toFixed(1)} µs/request, failures ${result.failures}\n`,
      );
    }
  }
  await stop(upstream.child);
  const plain = median(results.get('plain')!.map((r) => r.rps));
  const plainCpu = median(cpu.get('plain')!);
  console.log(`| mode | req/s (median of ${ROUNDS}) | vs plain | data plane CPU µs/request | vs plain | p50 ms | p99 ms |`);
  console.log('|---|---|---|---|---|---|---|');
  for (const mode of MODES) {
    const runs = results.get(mode)!;
    const rps = median(runs.map((r) => r.rps));
    const us = median(cpu.get(mode)!);
    console.log(
      `| ${mode} | ${Math.round(rps)} | ${(rps / plain).toFixed(2)}x | ${us.toFixed(1)} | ${(us / plainCpu).toFixed(2)}x | ` +
        `${median(runs.map((r) => r.p50Ms)).toFixed(2)} | ${median(runs.map((r) => r.p99Ms)).toFixed(2)} |`,
    );
  }
}

const role = process.argv[2];
if (role === 'upstream') {
  void upstreamRole();
  process.on('SIGTERM', () => process.exit(0));
} else if (role === 'gateway') {
  void gatewayRole(process.argv[3] as Mode, process.argv[4]!);
} else {
  const cleanUp = () => {
    for (const child of children) child.kill('SIGTERM');
  };
  process.on('SIGINT', () => {
    cleanUp();
    process.exit(130);
  });
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      cleanUp();
      console.error(err instanceof Error ? err.message : String(err));
      process.exit(1);
    },
  );
}
