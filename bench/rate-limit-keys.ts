// npm run bench:rate-limit — what a new rate-limit key costs on the `local` store, through the running
// gateway (2 workers, real IPC): wrk against rateLimit keyed by a header, once with one key for every
// request and once with a new key for every request (a Lua script counting up), rounds alternated. A
// new key costs a round trip to the primary's lease bank (an acquire and a grant, later a release)
// and, past the key caps, an eviction. Prints req/s and the CPU per request of every gateway process
// (and the primary's share), medians of BENCH_ROUNDS (3) rounds of BENCH_DURATION_S (10) s.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { firstLine, nodeChildren, waitFor200 } from './children.js';
import { groupCpuNs, processCpuNs } from './group-cpu.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const MAIN = join(HERE, '..', 'bundle', 'gateway.mjs');
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
const PORT = Number(process.env.BENCH_PORT ?? 9320);

if (spawnSync('wrk', ['--version']).error !== undefined) {
  console.error('bench:rate-limit needs wrk (apt-get install wrk)');
  process.exit(1);
}

const dir = mkdtempSync(join(tmpdir(), 'specgate-bench-rl-'));
const start = nodeChildren(dir);

const upstream = start([join(HERE, 'proxy-upstream.js'), '0']);
const upstreamPort = (JSON.parse(await firstLine(upstream, 'upstream')) as { port: number }).port;
const configFile = join(dir, 'gateway.json');
writeFileSync(
  configFile,
  JSON.stringify({
    host: '127.0.0.1',
    port: PORT,
    upstreams: [{ serviceType: 'static', serviceLocation: `http://127.0.0.1:${upstreamPort}`, endpoints: [{ method: 'GET', path: '/a/{id}' }] }],
    middleware: [{ id: 'limit', type: 'rateLimit', limit: 10_000_000, windowMs: 60_000, key: 'header:x-client', scope: 'global', store: 'local' }],
    accessLog: { enabled: false },
  }),
);
const gateway = start([MAIN, 'start', '--config', configFile, '--workers', '2']);
gateway.stdout!.resume();
await waitFor200(`http://127.0.0.1:${PORT}`, '/healthcheck', 'the gateway', gateway);

const scripts = {
  'one key': 'request = function() return wrk.format(nil, nil, {["x-client"] = "same"}) end\n',
  'a new key per request': 'local n = 0\nrequest = function()\n  n = n + 1\n  return wrk.format(nil, nil, {["x-client"] = "c" .. n})\nend\n',
};
type Mode = keyof typeof scripts;

function wrk(mode: Mode, seconds: number): Promise<number> {
  const script = join(dir, `${mode.replace(/\W+/g, '-')}.lua`);
  writeFileSync(script, scripts[mode]);
  return new Promise((resolve, reject) => {
    const child = spawn('wrk', ['-t1', '-c25', `-d${seconds}s`, '-s', script, `http://127.0.0.1:${PORT}/a/1`], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.once('exit', (code) => {
      const requests = /(\d+) requests in/.exec(out);
      if (code !== 0 || requests === null || /Non-2xx/.test(out)) reject(new Error(`wrk failed (${code}):\n${out}`));
      else resolve(Number(requests[1]));
    });
  });
}

const results = new Map<Mode, Array<{ rps: number; cpuUs: number; primaryUs: number }>>();
for (let round = 0; round < ROUNDS; round++) {
  for (const mode of Object.keys(scripts) as Mode[]) {
    await wrk(mode, 2); // warm-up
    const cpu0 = groupCpuNs(gateway.pid!);
    const primary0 = processCpuNs(gateway.pid!);
    const requests = await wrk(mode, DURATION_S);
    const cpu = groupCpuNs(gateway.pid!) - cpu0;
    const primary = processCpuNs(gateway.pid!) - primary0;
    const row = { rps: requests / DURATION_S, cpuUs: cpu / requests / 1000, primaryUs: primary / requests / 1000 };
    console.log(`round ${round + 1}, ${mode}: ${Math.round(row.rps)} req/s, ${row.cpuUs.toFixed(1)} µs CPU per request (primary ${row.primaryUs.toFixed(1)})`);
    (results.get(mode) ?? results.set(mode, []).get(mode)!).push(row);
  }
}
const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
console.log(`\nmedians of ${ROUNDS} rounds of ${DURATION_S} s (wrk -t1 -c25, 2 workers):`);
for (const [mode, rows] of results) {
  console.log(`  ${mode.padEnd(22)} ${Math.round(median(rows.map((r) => r.rps)))} req/s, ${median(rows.map((r) => r.cpuUs)).toFixed(1)} µs CPU per request (primary ${median(rows.map((r) => r.primaryUs)).toFixed(1)})`);
}
process.exit(0);
