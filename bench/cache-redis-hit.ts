// node dist/bench/cache-redis-hit.js — what a responseCache lookup that hits costs on a `redis` store:
// RemoteCacheStore.get on a RedisStore (one script call, src/stores/redis-groups.ts GET_IN_GROUP_LUA)
// against a redis-server of its own on 127.0.0.1, BENCH_CONCURRENCY gets in flight, each answered get
// followed by the next. Per round: hits/s, CPU µs per hit of this process (the store and node-redis)
// and of redis-server (INFO's used_cpu_*), and the script's own time in Redis (INFO commandstats:
// EVALSHA's usec_per_call, the command alone, without reading and answering it). With BENCH_BEFORE=<a directory holding another build's
// dist/>, that build's store is measured too, rounds alternated in the same process: before and after
// figures from one run. Environment: BENCH_MS (2000), BENCH_ROUNDS (5), BENCH_CONCURRENCY (16).
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startRedisServer } from '../test/helpers/redis-server.js';

const env = process.env;
const MEASURE_MS = Number(env.BENCH_MS ?? 2000);
const ROUNDS = Number(env.BENCH_ROUNDS ?? 5);
const CONCURRENCY = Number(env.BENCH_CONCURRENCY ?? 16);
const BODY = JSON.stringify({ id: 1347, number: 42, state: 'open', title: 'Found a bug', user: { login: 'octocat', id: 1 } });

interface Result {
  rate: number;
  cpu: number;
  redisCpu: number;
  script: number;
}

interface Build {
  label: string;
  get: (key: string) => Promise<unknown>;
  close: () => Promise<void>;
}

/** A RedisStore and a RemoteCacheStore of the build whose compiled sources are under `dist`, with one entry stored. */
async function open(label: string, dist: string, url: string, key: string): Promise<Build> {
  const load = (path: string) => import(pathToFileURL(join(dist, path)).href);
  const { RedisStore } = await load('src/stores/redis-store.js');
  const { RemoteCacheStore } = await load('src/cache/remote-store.js');
  const { StoredResponse } = await load('src/cache/record.js');
  const { judge } = await load('src/cache/rules.js');
  const store = new RedisStore({ name: 'bench', url, keyPrefix: `${label}:`, connectTimeoutMs: 1000, commandTimeoutMs: 1000, connectAttempts: 3, breakerFailures: 5, breakerResetMs: 1000 });
  await store.settled();
  const cache = new RemoteCacheStore(store, 'cache', () => Promise.resolve());
  const headers = ['content-type', 'application/json', 'cache-control', 'public, max-age=3600'];
  const policy = judge(key, [], 200, headers, 0).policy;
  await cache.set(key, new StoredResponse(200, headers, Buffer.from(BODY), policy, key, Date.now()), 3_600_000);
  return { label, get: (k) => cache.get(k), close: () => store.close() };
}

/** Hits for MEASURE_MS with CONCURRENCY in flight: how many. */
async function hits(build: Build, key: string, ms: number): Promise<number> {
  const until = performance.now() + ms;
  let count = 0;
  const loop = async (): Promise<void> => {
    while (performance.now() < until) {
      if ((await build.get(key)) === undefined) throw new Error(`${build.label}: a miss where a hit was expected`);
      count++;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, loop));
  return count;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

const redis = await startRedisServer();
const key = 'http://gw.bench/items/1 /items/{}';
const builds = [await open('after', fileURLToPath(new URL('..', import.meta.url)), redis.url, key)];
if (env.BENCH_BEFORE !== undefined) builds.unshift(await open('before', join(env.BENCH_BEFORE, 'dist'), redis.url, key));
// After the stores: node-redis must load after their stand-in for its VerbatimString (src/stores/verbatim-string-shim.ts).
const { createClient } = await import('redis');
const info = createClient({ url: redis.url });
await info.connect();
const redisCpuUs = async (): Promise<number> => {
  const text = await info.info('cpu');
  const seconds = (name: string): number => Number(new RegExp(`^used_cpu_${name}:([\\d.]+)`, 'm').exec(text)?.[1] ?? NaN);
  return (seconds('sys') + seconds('user')) * 1e6;
};
const scriptUs = async (): Promise<number> => Number(/^cmdstat_evalsha:.*usec_per_call=([\d.]+)/m.exec(await info.info('commandstats'))?.[1] ?? NaN);

const results = new Map<string, Array<Result>>(builds.map((b) => [b.label, []]));
for (const build of builds) await hits(build, key, 500);
for (let round = 0; round < ROUNDS; round++) {
  for (const build of round % 2 === 0 ? builds : [...builds].reverse()) {
    await info.configResetStat();
    const redisBefore = await redisCpuUs();
    const cpu = process.cpuUsage();
    const count = await hits(build, key, MEASURE_MS);
    const used = process.cpuUsage(cpu);
    const redisUsed = (await redisCpuUs()) - redisBefore;
    const result = { rate: (count * 1000) / MEASURE_MS, cpu: (used.user + used.system) / count, redisCpu: redisUsed / count, script: await scriptUs() };
    results.get(build.label)!.push(result);
    process.stderr.write(
      `[cache-redis-hit] round ${round + 1} ${build.label}: ${Math.round(result.rate)} hits/s, ${result.cpu.toFixed(2)} µs CPU/hit here, ` +
        `${result.redisCpu.toFixed(2)} µs in redis-server, of which the script ${result.script.toFixed(2)}\n`,
    );
  }
}
console.log(`| build | hits/s (median of ${ROUNDS}, ${CONCURRENCY} in flight) | CPU µs/hit, this process | CPU µs/hit, redis-server | of which the script |`);
console.log('|---|---:|---:|---:|---:|');
for (const [label, runs] of results) {
  const at = (pick: (r: Result) => number, digits: number) => median(runs.map(pick)).toFixed(digits);
  console.log(`| ${label} | ${at((r) => r.rate, 0)} | ${at((r) => r.cpu, 2)} | ${at((r) => r.redisCpu, 2)} | ${at((r) => r.script, 2)} |`);
}
const before = results.get('before');
if (before !== undefined) {
  // Each round's two builds ran back to back: their ratio is steadier than either figure on a shared machine.
  const after = results.get('after')!;
  const ratio = (pick: (r: Result) => number) => median(after.map((r, i) => pick(r) / pick(before[i]!))).toFixed(3);
  console.log(
    `after / before, median of the rounds' ratios: hits/s ${ratio((r) => r.rate)}, CPU here ${ratio((r) => r.cpu)}, ` +
      `CPU in redis-server ${ratio((r) => r.redisCpu)}, the script ${ratio((r) => r.script)}`,
  );
}
for (const build of builds) await build.close();
info.destroy();
await redis.stop();
