/**
 * `npm run bench:chart [-- RESULTS.json [OUT.svg] [--tool wrk|autocannon]]`: draws the req/s of every
 * contender of a bench:proxy run as a horizontal bar chart (a hand-written SVG, no service involved),
 * with each one's CPU time per request beside its bar. Reads the results bench:proxy writes
 * (bench/results/proxy.json by default); writes docs/benchmark-proxy.svg by default.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

interface ToolResult {
  rps: number;
  cpuUsPerRequest: number;
  p99Ms?: number;
}

export interface ProxyResults {
  tool: 'bench:proxy';
  at: string;
  node?: string;
  cpus?: number;
  cpuModel?: string | null;
  /** Said under the chart instead of the line made from `at`, `cpus` and `node`. */
  caption?: string;
  contenders: Array<{ id: string; label: string; skipped: string | null; results: Partial<Record<'wrk' | 'autocannon', ToolResult>> }>;
}

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

const escape = (text: string): string => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const thousands = (n: number): string => Math.round(n).toLocaleString('en-US');

/** The bar colour says what a contender is: this gateway, another proxy, or the upstream alone. */
function colour(id: string): string {
  if (id === 'direct') return '#9aa5b1';
  if (id.startsWith('gateway')) return '#2563eb';
  return '#f59e0b';
}

export function renderChart(results: ProxyResults, tool: 'wrk' | 'autocannon'): string {
  const rows = results.contenders
    .filter((c) => c.skipped === null && c.results[tool] !== undefined)
    .map((c) => ({ ...c, r: c.results[tool]! }))
    .sort((a, b) => b.r.rps - a.r.rps);
  if (rows.length === 0) throw new Error(`no contender has ${tool} results`);
  const labelWidth = 330;
  const barWidth = 430;
  const valueWidth = 200;
  const rowHeight = 26;
  const top = 48;
  const width = labelWidth + barWidth + valueWidth;
  const caption =
    results.caption ?? `bench:proxy run of ${results.at}, ${tool}; ${results.cpus ?? '?'} CPUs (${results.cpuModel ?? '?'}), Node ${results.node ?? '?'}.`;
  const height = top + rows.length * rowHeight + 56;
  const max = Math.max(...rows.map((row) => row.r.rps));
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, Segoe UI, sans-serif" font-size="13">`);
  out.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(`<text x="16" y="26" font-size="16" font-weight="600" fill="#111827">Requests per second through each proxy (${escape(tool)}, 50 connections; longer is better)</text>`);
  rows.forEach((row, i) => {
    const y = top + i * rowHeight;
    const w = Math.max(1, (row.r.rps / max) * barWidth);
    out.push(`<text x="${labelWidth - 10}" y="${y + 17}" text-anchor="end" fill="#111827">${escape(row.label)}</text>`);
    out.push(`<rect x="${labelWidth}" y="${y + 4}" width="${w.toFixed(1)}" height="${rowHeight - 8}" rx="2" fill="${colour(row.id)}"/>`);
    const cpu = Number.isFinite(row.r.cpuUsPerRequest) ? `, ${row.r.cpuUsPerRequest.toFixed(1)} µs CPU/req` : '';
    out.push(`<text x="${(labelWidth + w + 6).toFixed(1)}" y="${y + 17}" fill="#374151">${thousands(row.r.rps)}${cpu}</text>`);
  });
  const legendY = top + rows.length * rowHeight + 18;
  const legend: Array<[string, string]> = [
    ['#2563eb', 'this gateway'],
    ['#f59e0b', 'other proxies and stand-ins'],
    ['#9aa5b1', 'the upstream alone'],
  ];
  let x = 16;
  for (const [fill, text] of legend) {
    out.push(`<rect x="${x}" y="${legendY - 10}" width="12" height="12" fill="${fill}"/>`);
    out.push(`<text x="${x + 18}" y="${legendY}" fill="#374151">${escape(text)}</text>`);
    x += 30 + text.length * 7;
  }
  out.push(`<text x="16" y="${legendY + 24}" font-size="12" fill="#6b7280">${escape(caption)}</text>`);
  out.push('</svg>');
  return out.join('\n') + '\n';
}

const runDirectly = process.argv[1] !== undefined && import.meta.url === new URL(`file://${process.argv[1]}`).href;
if (runDirectly) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { tool: { type: 'string' } } });
  const input = positionals[0] ?? join(ROOT, 'bench/results/proxy.json');
  const output = positionals[1] ?? join(ROOT, 'docs/benchmark-proxy.svg');
  const results = JSON.parse(readFileSync(input, 'utf8')) as ProxyResults;
  const has = (tool: 'wrk' | 'autocannon') => results.contenders.some((c) => c.results[tool] !== undefined);
  const tool = (values.tool as 'wrk' | 'autocannon' | undefined) ?? (has('wrk') ? 'wrk' : 'autocannon');
  writeFileSync(output, renderChart(results, tool));
  console.log(`${output}: ${tool} req/s of ${results.contenders.filter((c) => c.results[tool]).length} contenders from ${input}`);
}
