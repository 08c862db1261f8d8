// npm run bench:start — what a gateway start costs, run from the bundles (dist/bundle/gateway.mjs, what
// `npm start` and the `gateway` bin run) against the compiled modules (dist/src/cli/main.js): starts
// alternated, each until /healthcheck answers 200 (discovery done, every worker serving), then stopped.
// Prints the CPU of the primary (all its threads, the compile thread included) and of each worker at
// that moment, and the time to 200; medians of BENCH_ROUNDS (5) starts of each. BENCH_WORKERS (2).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findFreePort } from '../src/cluster/free-port.js';
import { firstLine, nodeChildren, waitFor200 } from './children.js';
import { groupCpuNs, processCpuNs } from './group-cpu.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const WAYS = { bundle: join(HERE, '..', 'bundle', 'gateway.mjs'), modules: join(HERE, '..', 'src', 'cli', 'main.js') };
type Way = keyof typeof WAYS;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const WORKERS = Number(process.env.BENCH_WORKERS ?? 2);

const dir = mkdtempSync(join(tmpdir(), 'specgate-bench-start-'));
const start = nodeChildren(dir);

const upstream = start([join(HERE, 'proxy-upstream.js'), '0']);
const upstreamPort = (JSON.parse(await firstLine(upstream, 'upstream')) as { port: number }).port;
const port = await findFreePort('127.0.0.1');
const configFile = join(dir, 'gateway.json');
writeFileSync(
  configFile,
  JSON.stringify({
    host: '127.0.0.1',
    port,
    upstreams: [{ serviceType: 'static', serviceLocation: `http://127.0.0.1:${upstreamPort}`, endpoints: [{ method: 'GET', path: '/a/{id}' }] }],
  }),
);

interface Start {
  primaryMs: number;
  workerMs: number;
  readyMs: number;
}

async function once(way: Way): Promise<Start> {
  const started = performance.now();
  const gateway = start([WAYS[way], 'start', '--config', configFile, '--workers', String(WORKERS)]);
  gateway.stdout!.resume();
  // Polled every 20 ms: the time to 200 is one of the figures.
  await waitFor200(`http://127.0.0.1:${port}`, '/healthcheck', `the gateway (${way})`, gateway, 60_000, undefined, 20);
  const readyMs = performance.now() - started;
  const all = groupCpuNs(gateway.pid!);
  const primary = processCpuNs(gateway.pid!);
  const exited = new Promise((resolve) => gateway.once('exit', resolve));
  process.kill(-gateway.pid!, 'SIGTERM');
  await exited;
  return { primaryMs: primary / 1e6, workerMs: (all - primary) / WORKERS / 1e6, readyMs };
}

const results: Record<Way, Start[]> = { bundle: [], modules: [] };
for (let round = 0; round < ROUNDS; round++) {
  for (const way of (round % 2 === 0 ? ['bundle', 'modules'] : ['modules', 'bundle']) as Way[]) {
    const row = await once(way);
    results[way].push(row);
    console.log(`round ${round + 1}, ${way}: primary ${row.primaryMs.toFixed(0)} ms CPU, each worker ${row.workerMs.toFixed(0)} ms CPU, 200 after ${row.readyMs.toFixed(0)} ms`);
  }
}
const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const summary = (way: Way): Start => ({
  primaryMs: median(results[way].map((r) => r.primaryMs)),
  workerMs: median(results[way].map((r) => r.workerMs)),
  readyMs: median(results[way].map((r) => r.readyMs)),
});
const bundle = summary('bundle');
const modules = summary('modules');
console.log(`\nmedians of ${ROUNDS} starts each (${WORKERS} workers), CPU until /healthcheck is 200:`);
console.log('| | primary CPU | each worker CPU | the whole start | time to 200 |');
console.log('|---|---:|---:|---:|---:|');
for (const [name, row] of [['bundle (dist/bundle/)', bundle], ['compiled modules (dist/src/)', modules]] as const) {
  console.log(`| ${name} | ${row.primaryMs.toFixed(0)} ms | ${row.workerMs.toFixed(0)} ms | ${(row.primaryMs + WORKERS * row.workerMs).toFixed(0)} ms | ${row.readyMs.toFixed(0)} ms |`);
}
const whole = (row: Start): number => row.primaryMs + WORKERS * row.workerMs;
console.log(`bundle / modules: ${(whole(bundle) / whole(modules)).toFixed(2)}x the CPU, ${(bundle.readyMs / modules.readyMs).toFixed(2)}x the time to 200`);
process.exit(0);
