import FindMyWay from 'find-my-way';
import { normalizePath } from '../src/http/normalize-path.js';
import { RoutingOracle } from '../src/routing/oracle.js';
import { emptySelection, RoutingTable } from '../src/routing/table.js';
import { parseTemplate } from '../src/routing/template.js';
import type { RouteEntry } from '../src/routing/types.js';
import { random, realisticRouteSet, type BenchRoute } from './route-set.js';

// npm run bench:routing — lookups per second of the trie, find-my-way and the linear scan of docs/reference/routing.md#specificity
// on the same realistic route sets, measured in one run; the ratios are what the targets name.

const SIZES = [100, 1_000, 10_000];
const MEASURE_MS = Number(process.env.BENCH_MS ?? 5000);

function toEntries(routes: BenchRoute[]): RouteEntry[] {
  return routes.map((r) => ({ method: r.method, template: r.template, upstream: `http://${r.service}:80`, consumes: [], produces: [], disabledMiddleware: [], disabledListeners: [] }));
}

/** find-my-way spelling of a template, or null where its syntax cannot say it. */
function toFindMyWay(template: string): string | null {
  let out = '';
  const parts = template.split(/(\{[^{}]*\})/);
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    if (!part.startsWith('{')) {
      if (part.includes(':') || part.includes('*')) return null;
      out += part;
      continue;
    }
    const next = parts[i + 1] ?? '';
    const endsSegment = next === '' || next.startsWith('/');
    const expr = part.slice(1, -1);
    if (expr.startsWith('+')) {
      if (i !== parts.length - 2 || next !== '') return null;
      out += '*';
    } else if (expr.startsWith('.') || !endsSegment) {
      return null;
    } else if (expr.includes(':')) {
      const [name = '', re = ''] = expr.split(/:(.*)/s);
      if (re.includes('/')) return null;
      out += `:${name.trim()}(^${re.trim()}$)`;
    } else {
      out += `:${expr.trim() || 'p'}`;
    }
  }
  return out;
}

function opsPerSecond(fn: (i: number) => void, ms = MEASURE_MS): number {
  // Warm up, then count whole batches until the time is up.
  for (let i = 0; i < 5_000; i++) fn(i);
  const batch = 1000;
  let done = 0;
  const start = process.hrtime.bigint();
  const limit = BigInt(ms) * 1_000_000n;
  let elapsed = 0n;
  while (elapsed < limit) {
    for (let i = 0; i < batch; i++) fn(done + i);
    done += batch;
    elapsed = process.hrtime.bigint() - start;
  }
  return (done * 1e9) / Number(elapsed);
}

function shuffled<T>(items: T[], seed: number): T[] {
  const rnd = random(seed);
  const out = items.slice();
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

interface Row {
  size: number;
  trie: number;
  same: number;
  fmw: number;
  fmwRoutes: number;
  linear: number;
  compileMs: number;
  transferBytes: number;
  agreeing: number;
  checked: number;
}

// The smaller sets are seeded samples of the largest one, so every size has the same mix of services,
// depths and forms, and the comparison across sizes isolates the number of templates.
const largest = realisticRouteSet(Math.max(...SIZES));
interface Prepared extends Omit<Row, 'trie' | 'same' | 'fmw'> {
  trieLookup: (i: number) => void;
  trieSameLookup: (i: number) => void;
  fmwLookup: (i: number) => void;
}

const prepared: Prepared[] = [];
for (const size of SIZES) {
  const routes = size === largest.length ? largest : shuffled(largest, 1).slice(0, size);
  const entries = toEntries(routes);
  const t0 = process.hrtime.bigint();
  const { table, problems } = RoutingTable.compile(entries);
  const compileMs = Number(process.hrtime.bigint() - t0) / 1e6;
  if (problems.length > 0) console.error(`${size}: ${problems.length} template problems, e.g. ${problems[0]!.message}`);
  const transferBytes = Buffer.byteLength(JSON.stringify(table.toTransferable()));
  const requests = shuffled(routes, size).map((r) => ({ method: r.method, path: r.sample }));
  const n = requests.length;
  // The same 100 requests on every table (their templates are in every set): isolates table size
  // from the size of the request working set.
  const same = shuffled(largest, 1).slice(0, SIZES[0]).map((r) => ({ method: r.method, path: r.sample }));

  // Ours, as the data plane calls it: normalize, then select into a reused selection.
  const out = emptySelection();
  const trieOver = (list: typeof requests) => (i: number) => {
    const r = list[i % list.length]!;
    table.select(r.method, normalizePath(r.path)!, undefined, undefined, false, out);
  };
  const trieLookup = trieOver(requests);
  const trieSameLookup = trieOver(same);

  const router = FindMyWay({ ignoreTrailingSlash: true });
  let fmwRoutes = 0;
  for (const r of routes) {
    const spelled = toFindMyWay(r.template);
    if (spelled === null) continue;
    try {
      router.on(r.method as 'GET', spelled, () => {});
      fmwRoutes++;
    } catch {
      // a duplicate in find-my-way's eyes (same shape, other param names)
    }
  }
  const fmwLookup = (i: number) => {
    const r = requests[i % n]!;
    router.find(r.method as 'GET', r.path);
  };

  const oracle = new RoutingOracle(entries.map((e) => ({ method: e.method, template: parseTemplate(e.template) })));
  const linear = opsPerSecond((i) => {
    const r = requests[i % n]!;
    oracle.lookup(r.method, r.path);
  }, 600);

  // The figures are only worth quoting if the trie picks what the oracle picks.
  let agreeing = 0;
  const checked = Math.min(n, 2000);
  for (let i = 0; i < checked; i++) {
    const r = requests[i]!;
    const got = table.select(r.method, r.path, undefined, undefined, false).route?.canonical ?? null;
    const want = oracle.lookup(r.method, r.path).template?.canonical ?? null;
    if (got === want) agreeing++;
  }
  prepared.push({ size, trieLookup, trieSameLookup, fmwLookup, fmwRoutes, linear, compileMs, transferBytes, agreeing, checked });
}

// Rounds interleave every size and router, and the median of each is kept: a noisy neighbour on this
// shared machine then slows all of them alike instead of skewing one figure.
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const samples = new Map<string, number[]>();
for (let round = 0; round < ROUNDS; round++) {
  for (const p of prepared) {
    for (const [name, fn] of [['trie', p.trieLookup], ['same', p.trieSameLookup], ['fmw', p.fmwLookup]] as const) {
      const key = `${name}:${p.size}`;
      samples.set(key, [...(samples.get(key) ?? []), opsPerSecond(fn, MEASURE_MS / ROUNDS)]);
    }
  }
  console.error(`round ${round + 1}/${ROUNDS}`);
}
const median = (xs: number[]) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const rows: Row[] = prepared.map(({ trieLookup, trieSameLookup, fmwLookup, ...p }) => ({
  ...p,
  trie: median(samples.get(`trie:${p.size}`)!),
  same: median(samples.get(`same:${p.size}`)!),
  fmw: median(samples.get(`fmw:${p.size}`)!),
}));

const fmt = (x: number) => Math.round(x).toLocaleString('en-US');
console.log('\nRouting lookups per second (one run, same machine, same route sets; median of interleaved rounds)\n');
console.log('| templates | trie lookups/s | find-my-way lookups/s (routes it can express) | linear scan lookups/s | trie / find-my-way | trie / linear | trie, same 100 requests | compile ms | transferable bytes | agrees with oracle |');
console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const r of rows) {
  console.log(
    `| ${fmt(r.size)} | ${fmt(r.trie)} | ${fmt(r.fmw)} (${fmt(r.fmwRoutes)}) | ${fmt(r.linear)} | ${(r.trie / r.fmw).toFixed(2)}x | ${fmt(r.trie / r.linear)}x | ${fmt(r.same)} | ${r.compileMs.toFixed(0)} | ${fmt(r.transferBytes)} | ${r.agreeing}/${r.checked} |`,
  );
}
const small = rows.find((r) => r.size === 100)!;
const large = rows.find((r) => r.size === 10_000)!;
const mid = rows.find((r) => r.size === 1_000)!;
const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED');
console.log(`\nTargets: at 1,000 templates trie / find-my-way = ${(mid.trie / mid.fmw).toFixed(2)}x (>= 1.5x: ${verdict(mid.trie / mid.fmw >= 1.5)}), trie / linear = ${fmt(mid.trie / mid.linear)}x (>= 100x: ${verdict(mid.trie / mid.linear >= 100)})`);
console.log(`         10,000 vs 100 templates, the same 100 requests: ${(small.same / large.same).toFixed(2)}x slower (within 2x: ${verdict(small.same / large.same <= 2)})`);
console.log(`         10,000 vs 100 templates, requests over every template: ${(small.trie / large.trie).toFixed(2)}x slower (within 2x: ${verdict(small.trie / large.trie <= 2)}; find-my-way: ${(small.fmw / large.fmw).toFixed(2)}x)`);
console.log(`         transferable form of ${fmt(large.size)} templates: ${fmt(large.transferBytes)} bytes of JSON (${(large.transferBytes / large.size).toFixed(0)} bytes per template)`);
