import { existsSync, readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Realistic route sets from bench/data/route-corpus.json.gz (operations of 400 public API
 * descriptions and of GitHub's REST API): about 50 services, each mounted under its own prefix as a
 * gateway would, with their real templates (ids, nested items, `{name}:cancel`, `$count`), plus a few
 * regex and catch-all templates.
 */
export interface BenchRoute {
  method: string;
  template: string;
  /** A concrete request path that this template matches. */
  sample: string;
  service: string;
}

interface Corpus {
  apis: Array<{ api: string; endpoints: Array<[string, string]> }>;
  github: Array<[string, string]>;
}

/** The corpus ships with the repository, gzipped: bench/data/route-corpus.json.gz (read from dist/bench/ or bench/). */
export function corpusPath(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const up of ['../..', '..']) {
    const candidate = join(here, up, 'bench/data/route-corpus.json.gz');
    if (existsSync(candidate)) return candidate;
  }
  throw new Error('route corpus not found: expected bench/data/route-corpus.json.gz in the repository');
}

export function loadCorpus(): Corpus {
  return JSON.parse(gunzipSync(readFileSync(corpusPath())).toString('utf8')) as Corpus;
}

/** A deterministic pseudo-random generator (mulberry32), so every run benches the same set. */
export function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SERVICES = 50;

export function realisticRouteSet(count: number, corpus = loadCorpus()): BenchRoute[] {
  const services = [{ api: 'github.com/rest', endpoints: corpus.github }, ...corpus.apis]
    .filter((s) => s.endpoints.length >= 20)
    .sort((a, b) => b.endpoints.length - a.endpoints.length || (a.api < b.api ? -1 : 1))
    .slice(0, SERVICES);
  const routes: BenchRoute[] = [];
  const seen = new Set<string>();
  const next = services.map(() => 0);
  const rnd = random(count);
  // Take endpoints round-robin so that every service contributes about count/50 templates.
  for (let round = 0; routes.length < count && round < 100_000; round++) {
    const i = round % services.length;
    const service = services[i]!;
    const slug = service.api.replace(/\.json$/, '').replace(/[^a-z0-9]+/gi, '-').toLowerCase();
    if (next[i] === 0 && i % 10 === 0) {
      // A few regex and catch-all templates, as gateways in front of file and order services have.
      push(`GET`, `/${slug}/static/{+path}`, slug);
      push(`GET`, `/${slug}/orders/{id: [0-9]+}`, slug);
    }
    const endpoint = service.endpoints[next[i]!++];
    if (endpoint === undefined) continue;
    push(endpoint[0].toUpperCase(), `/${slug}${endpoint[1] === '/' ? '' : endpoint[1]}`, slug);
  }
  return routes.slice(0, count);

  function push(method: string, template: string, service: string): void {
    const key = `${method} ${template}`;
    if (seen.has(key) || routes.length >= count) return;
    seen.add(key);
    routes.push({ method, template, sample: instantiate(template, rnd), service });
  }
}

const VALUES = ['42', 'octocat', 'a1b2c3', 'main', '2024-01-01', 'user_17', 'x9'];

/** A path the template matches: each variable gets a plausible value. */
export function instantiate(template: string, rnd: () => number): string {
  return template.replace(/\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}/g, (_, expr: string) => {
    if (expr.startsWith('+')) return 'assets/img/logo.png';
    if (expr.startsWith('.')) return '.json';
    if (expr.includes(':')) return String(1000 + Math.floor(rnd() * 9000));
    return VALUES[Math.floor(rnd() * VALUES.length)]!;
  });
}

/** The path every proxy bench contender is asked: GitHub's "get an issue", among its 47 sibling templates. */
export const PROXY_REQUEST_PATH = '/github-com-rest/repos/octocat/hello-world/issues/1347';

/**
 * The gateway's endpoints in the proxy benches (bench:proxy, bench:instructions): 350 realistic
 * routes plus every GitHub template under /repos/{owner}/{repo}/issues, so that PROXY_REQUEST_PATH
 * is routed among its real siblings.
 */
export function proxyBenchEndpoints(routeCount = 350): Array<{ method: string; path: string }> {
  const corpus = loadCorpus();
  const routes = realisticRouteSet(routeCount, corpus);
  const endpoints = routes.map((r) => ({ method: r.method, path: r.template }));
  const seen = new Set(endpoints.map((e) => `${e.method} ${e.path}`));
  for (const [method, template] of corpus.github) {
    if (!template.startsWith('/repos/{owner}/{repo}/issues')) continue;
    const endpoint = { method: method.toUpperCase(), path: `/github-com-rest${template}` };
    if (!seen.has(`${endpoint.method} ${endpoint.path}`)) endpoints.push(endpoint);
  }
  return endpoints;
}
