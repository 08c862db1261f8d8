// Self time by function in V8 .cpuprofile files (node --cpu-prof), merged over the files given.
// Used by bench/proxy.ts for the gateway's worker profiles; also runs alone:
//   node dist/bench/proxy-profile.js <file.cpuprofile | dir> [...] [--top N]
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface SelfTime {
  name: string;
  where: string;
  ms: number;
  share: number;
}

export function profileFiles(paths: string[]): string[] {
  const files: string[] = [];
  for (const path of paths) {
    if (statSync(path).isDirectory()) {
      for (const name of readdirSync(path)) if (name.endsWith('.cpuprofile')) files.push(join(path, name));
    } else {
      files.push(path);
    }
  }
  return files;
}

function shortUrl(url: string): string {
  if (url === '') return '';
  const path = url.startsWith('file://') ? new URL(url).pathname : url;
  const nm = path.lastIndexOf('node_modules/');
  if (nm >= 0) return path.slice(nm + 'node_modules/'.length);
  return path.startsWith('/') ? relative(process.cwd(), path) : path;
}

/** Sampled time per function (self time, not including callees), largest first. */
export function selfTimes(files: string[]): { total: number; rows: SelfTime[] } {
  const byKey = new Map<string, SelfTime>();
  let total = 0;
  for (const file of files) {
    const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
    const nodeById = new Map<number, ProfileNode>();
    for (const node of profile.nodes) nodeById.set(node.id, node);
    for (let i = 0; i < profile.samples.length; i++) {
      const node = nodeById.get(profile.samples[i]!);
      if (node === undefined) continue;
      const us = profile.timeDeltas[i] ?? 0;
      const { functionName, url, lineNumber } = node.callFrame;
      const name = functionName || '(anonymous)';
      const where = url ? `${shortUrl(url)}:${lineNumber + 1}` : '';
      const key = `${name}\0${where}`;
      let row = byKey.get(key);
      if (row === undefined) byKey.set(key, (row = { name, where, ms: 0, share: 0 }));
      row.ms += us / 1000;
      total += us / 1000;
    }
  }
  const rows = [...byKey.values()].sort((a, b) => b.ms - a.ms);
  for (const row of rows) row.share = total > 0 ? row.ms / total : 0;
  return { total, rows };
}

export function formatSelfTimes(files: string[], top = 25): string {
  const { total, rows } = selfTimes(files);
  const lines = [`| self % | self ms | function | where |`, `|---:|---:|---|---|`];
  for (const row of rows.slice(0, top)) {
    lines.push(`| ${(row.share * 100).toFixed(1)} | ${row.ms.toFixed(0)} | ${row.name} | ${row.where} |`);
  }
  return `${files.length} profile(s), ${(total / 1000).toFixed(1)} s sampled\n\n${lines.join('\n')}`;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = process.argv.slice(2);
  const topAt = args.indexOf('--top');
  const top = topAt >= 0 ? Number(args.splice(topAt, 2)[1]) : 25;
  console.log(formatSelfTimes(profileFiles(args), top));
}
