// npm run plot:latency — runs the gateway (2 workers) in front of a local upstream whose answer time
// varies, drives traffic through it with autocannon, reads the gateway's own Prometheus exposition
// and draws the request and upstream latency histograms (their _bucket series, per bucket) as an
// SVG: docs/latency-histogram.svg by default. What is drawn is exactly what /metrics said.
//
// Environment (optional): PLOT_DURATION_S (6), PLOT_CONNECTIONS (16), PLOT_OUT (docs/latency-histogram.svg).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const DURATION_S = Number(process.env.PLOT_DURATION_S ?? 6);
const CONNECTIONS = Number(process.env.PLOT_CONNECTIONS ?? 16);
const OUT = process.env.PLOT_OUT ?? fileURLToPath(new URL('../../docs/latency-histogram.svg', import.meta.url));
const MAIN = fileURLToPath(new URL('../bundle/gateway.mjs', import.meta.url));
const autocannon = createRequire(import.meta.url)('autocannon') as (options: Record<string, unknown>) => Promise<{ requests: { total: number } }>;

/** The upstream: most answers at once, some after a few ms, a tail up to ~200 ms (a plausible mix). */
function answerDelayMs(path: string): number {
  if (path.startsWith('/items/')) return Math.random() < 0.8 ? 0 : Math.random() * 4;
  const r = Math.random();
  if (r < 0.5) return 2 + Math.random() * 6;
  if (r < 0.95) return 5 + -Math.log(1 - Math.random()) * 20;
  return 80 + Math.random() * 150;
}

async function main(): Promise<void> {
  const upstream = createServer((req, res) => {
    req.resume();
    setTimeout(() => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    }, answerDelayMs(req.url ?? '/'));
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamPort = (upstream.address() as AddressInfo).port;

  const dir = mkdtempSync(join(tmpdir(), 'specgate-plot-'));
  const configFile = join(dir, 'gateway.json');
  writeFileSync(
    configFile,
    JSON.stringify({
      host: '127.0.0.1',
      accessLog: { enabled: false },
      upstreams: [{ serviceType: 'static', serviceLocation: `http://127.0.0.1:${upstreamPort}`, endpoints: [{ method: 'GET', path: '/items/{id}' }, { method: 'GET', path: '/search' }] }],
    }),
  );
  const gateway = spawn(process.execPath, [MAIN, 'start', '--config', configFile, '--workers', '2', '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const stop = () => {
    if (gateway.exitCode === null) gateway.kill('SIGTERM');
    upstream.close();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const port = await new Promise<number>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`the gateway did not start: ${out}`)), 60_000);
      gateway.stdout!.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        for (const line of out.split('\n')) {
          if (!line.includes('"gateway operational"') && !line.includes('"gateway listening"')) continue;
          const found = /"port":(\d+)/.exec(line);
          if (found) {
            clearTimeout(timer);
            resolve(Number(found[1]));
          }
        }
      });
    });
    const result = await autocannon({
      url: `http://127.0.0.1:${port}`,
      connections: CONNECTIONS,
      duration: DURATION_S,
      requests: [{ path: '/items/1' }, { path: '/search' }, { path: '/items/2' }, { path: '/search' }],
    });
    await new Promise((resolve) => setTimeout(resolve, 1500)); // the workers' last deltas
    const text = await get(port, '/metrics?format=prometheus');
    const requests = bucketsOf(text, 'gateway_request_duration_seconds');
    const upstreamTimes = bucketsOf(text, 'gateway_upstream_duration_seconds');
    const svg = render(requests, upstreamTimes, {
      title: `specgate latency histogram: ${result.requests.total} requests through 2 workers (${DURATION_S} s, ${CONNECTIONS} connections)`,
      // The machine's load says how far the absolute figures can be taken (a shared machine inflates them).
      note: `from the gateway's own /metrics, ${new Date().toISOString().slice(0, 10)}, Node ${process.version}, ${cpus().length} cores, load average ${loadavg()[0]!.toFixed(1)} during the run`,
    });
    writeFileSync(OUT, svg);
    console.log(`wrote ${OUT}: ${requests.count} requests, ${upstreamTimes.count} upstream answers in the histograms`);
  } finally {
    stop();
  }
}

function get(port: number, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(body));
    })
      .on('error', reject)
      .end();
  });
}

interface Buckets {
  /** Upper bounds in seconds (the last is +Inf) and cumulative counts, summed over every label set. */
  les: number[];
  cumulative: number[];
  count: number;
}

/** Sums a histogram family's _bucket samples over its labels (what `sum by (le)` does). */
export function bucketsOf(text: string, family: string): Buckets {
  const byLe = new Map<number, number>();
  const sample = new RegExp(`^${family}_bucket\\{.*le="([^"]+)"\\} (\\S+)$`);
  for (const line of text.split('\n')) {
    const m = sample.exec(line);
    if (!m) continue;
    const le = m[1] === '+Inf' ? Infinity : Number(m[1]);
    byLe.set(le, (byLe.get(le) ?? 0) + Number(m[2]));
  }
  const les = [...byLe.keys()].sort((a, b) => a - b);
  const cumulative = les.map((le) => byLe.get(le)!);
  return { les, cumulative, count: cumulative[cumulative.length - 1] ?? 0 };
}

/** The quantile as Prometheus' histogram_quantile estimates it (linear within a bucket). */
export function quantile(q: number, b: Buckets): number {
  const rank = q * b.count;
  for (let i = 0; i < b.les.length; i++) {
    if (b.cumulative[i]! >= rank) {
      if (b.les[i] === Infinity) return b.les[i - 1] ?? 0;
      const lower = i === 0 ? 0 : b.les[i - 1];
      const below = i === 0 ? 0 : b.cumulative[i - 1];
      const inBucket = b.cumulative[i]! - below!;
      return inBucket === 0 ? b.les[i]! : lower! + ((b.les[i]! - lower!) * (rank - below!)) / inBucket;
    }
  }
  return NaN;
}

function label(seconds: number): string {
  if (seconds === Infinity) return '+Inf';
  if (seconds < 0.001) return `${+(seconds * 1e6).toPrecision(3)} µs`;
  if (seconds < 1) return `${+(seconds * 1e3).toPrecision(3)} ms`;
  return `${+seconds.toPrecision(3)} s`;
}

function escape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Two bar series per bucket (requests filled, upstream answers outlined), counts per bucket, not cumulative. */
export function render(requests: Buckets, upstreams: Buckets, text: { title: string; note: string }): string {
  const W = 900;
  const H = 420;
  const left = 70;
  const right = 20;
  const top = 60;
  const bottom = 90;
  const n = requests.les.length;
  const per = (b: Buckets) => b.cumulative.map((c, i) => c - (i === 0 ? 0 : b.cumulative[i - 1]!));
  const reqCounts = per(requests);
  const upCounts = upstreams.les.length === n ? per(upstreams) : new Array<number>(n).fill(0);
  const max = Math.max(1, ...reqCounts, ...upCounts);
  const plotW = W - left - right;
  const plotH = H - top - bottom;
  const slot = plotW / Math.max(1, n);
  const barW = slot * 0.38;
  const y = (v: number) => top + plotH - (v / max) * plotH;
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`);
  parts.push(`<rect width="${W}" height="${H}" fill="#ffffff"/>`);
  parts.push(`<text x="${left}" y="24" font-size="15" font-weight="bold">${escape(text.title)}</text>`);
  parts.push(`<text x="${left}" y="42" fill="#555">${escape(text.note)}</text>`);
  for (let k = 0; k <= 4; k++) {
    const v = (max * k) / 4;
    parts.push(`<line x1="${left}" x2="${W - right}" y1="${y(v)}" y2="${y(v)}" stroke="#e5e5e5"/>`);
    parts.push(`<text x="${left - 6}" y="${y(v) + 4}" text-anchor="end" fill="#555">${Math.round(v)}</text>`);
  }
  for (let i = 0; i < n; i++) {
    const x = left + i * slot + slot * 0.1;
    parts.push(`<rect x="${x}" y="${y(reqCounts[i]!)}" width="${barW}" height="${top + plotH - y(reqCounts[i]!)}" fill="#3b6fb6"><title>${reqCounts[i]} requests</title></rect>`);
    parts.push(`<rect x="${x + barW}" y="${y(upCounts[i]!)}" width="${barW}" height="${top + plotH - y(upCounts[i]!)}" fill="#f2a541"><title>${upCounts[i]} upstream answers</title></rect>`);
    const lower = i === 0 ? '0' : label(requests.les[i - 1]!);
    parts.push(`<text x="${left + i * slot + slot / 2}" y="${top + plotH + 16}" text-anchor="end" transform="rotate(-40 ${left + i * slot + slot / 2} ${top + plotH + 16})" fill="#333">${escape(`${lower} – ${label(requests.les[i]!)}`)}</text>`);
  }
  parts.push(`<line x1="${left}" x2="${W - right}" y1="${top + plotH}" y2="${top + plotH}" stroke="#333"/>`);
  const q = (b: Buckets) => [0.5, 0.9, 0.99].map((p) => `p${p * 100} ≈ ${label(quantile(p, b))}`).join(', ');
  parts.push(`<rect x="${left + 10}" y="${top}" width="12" height="12" fill="#3b6fb6"/><text x="${left + 28}" y="${top + 10}">request latency (${requests.count}): ${escape(q(requests))}</text>`);
  parts.push(`<rect x="${left + 10}" y="${top + 18}" width="12" height="12" fill="#f2a541"/><text x="${left + 28}" y="${top + 28}">upstream answer time (${upstreams.count}): ${escape(q(upstreams))}</text>`);
  parts.push(`<text x="16" y="${top + plotH / 2}" transform="rotate(-90 16 ${top + plotH / 2})" text-anchor="middle" fill="#333">requests in the bucket</text>`);
  parts.push(`<text x="${left + plotW / 2}" y="${H - 8}" text-anchor="middle" fill="#333">latency bucket (gateway_*_duration_seconds_bucket, per bucket; percentiles as histogram_quantile estimates them)</text>`);
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
