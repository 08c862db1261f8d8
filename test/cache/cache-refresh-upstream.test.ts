// stale-while-revalidate's background refresh goes through the data plane's own upstream client
// (src/lifecycle/upstream-fetch.ts): an HTTPS upstream signed by a private CA that only the upstream's
// `tls` settings trust is refreshed (a client with the default trust store would fail the handshake);
// the refresh goes to the host the balancer picks, not always the first; a refresh that fails is
// counted in backgroundRefreshFailures and the entry stays served stale, and so is one answered with a
// 5xx, whatever lifetime the 5xx carries, while a 404 with a lifetime replaces the entry.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { Counters } from '../../src/metrics/counters.js';
import { buildPipeline } from '../../src/middleware/registry.js';
import { startDataPlane } from '../../src/proxy/data-plane.js';
import type { DataPlane } from '../../src/proxy/data-plane-types.js';
import { RoutingTable } from '../../src/routing/table.js';
import type { RouteEntry } from '../../src/routing/types.js';
import { rawRequest } from '../helpers/raw-http.js';
import { entry, testConfig } from '../helpers/upstream-server.js';

const dir = mkdtempSync(join(tmpdir(), 'specgate-refresh-tls-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const openssl = (...args: string[]): void => void execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
openssl('req', '-x509', ...EC, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=refresh test CA', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
openssl('req', ...EC, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1');
writeFileSync(join(dir, 'server.ext'), 'extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n');
openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.crt', '-days', '2', '-extfile', 'server.ext');
const ca = readFileSync(join(dir, 'ca.crt'), 'utf8');
const serverTls = { key: readFileSync(join(dir, 'server.key'), 'utf8'), cert: readFileSync(join(dir, 'server.crt'), 'utf8') };

interface Seen {
  host: string;
  path: string;
  ifNoneMatch: string | undefined;
}

/** An HTTPS upstream named `name`: a stale-while-revalidate answer, a 304 with version 2 to its ETag (or a dropped connection when `failRefresh`). */
async function httpsUpstream(t: Test, name: string, seen: Seen[], failRefresh = () => false): Promise<string> {
  const server = https.createServer(serverTls, (req, res) => {
    const ifNoneMatch = req.headers['if-none-match'];
    seen.push({ host: name, path: req.url ?? '', ifNoneMatch });
    if (ifNoneMatch === '"v1"') {
      if (failRefresh()) return req.socket.destroy();
      res.writeHead(304, { etag: '"v1"', 'cache-control': 'max-age=60', 'x-version': '2' });
      return res.end();
    }
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '5', etag: '"v1"', 'cache-control': 'max-age=1, stale-while-revalidate=30', 'x-version': '1' });
    res.end('stale');
  });
  server.on('tlsClientError', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function plane(t: Test, locations: string[], counters: Counters): Promise<DataPlane> {
  const plane = await startDataPlane({
    config: testConfig({ upstreams: locations.map((serviceLocation) => ({ serviceType: 'static', serviceLocation, weight: 1, specPath: '/spec', tls: { ca, rejectUnauthorized: true } })) }),
  });
  t.teardown(() => plane.close());
  const routes: RouteEntry[] = locations.map((location) => entry('GET', '/items/{id}', location));
  const { table } = RoutingTable.compile(routes);
  plane.setTable(table);
  const pipeline = buildPipeline([{ id: 'cache', type: 'responseCache', slaMs: 1000, store: 'local', maxEntryBytes: 131072, maxBytes: 1 << 24, defaultTtlMs: 0, staleIfErrorMs: 0 }], { metrics: counters, warn: () => {} });
  t.teardown(() => pipeline.close());
  plane.setPipeline(pipeline);
  return plane;
}

async function get(plane: DataPlane, path: string): Promise<{ status: number; xCache: string | undefined; version: string | undefined }> {
  const [answer] = (await rawRequest(plane.port, `GET ${path} HTTP/1.1\r\nHost: gw\r\n\r\n`, { responses: 1, waitMs: 10_000 })).responses;
  if (answer === undefined || !answer.complete) throw new Error(`GET ${path}: no complete answer`);
  return { status: answer.status, xCache: answer.headers['x-cache']?.[0], version: answer.headers['x-version']?.[0] };
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Once the entry is stale: the answers until it is no longer UPDATING (at most 10 s). */
async function untilRefreshed(plane: DataPlane, path: string): Promise<Awaited<ReturnType<typeof get>>> {
  let answer = await get(plane, path);
  for (const deadline = Date.now() + 10_000; answer.xCache === 'UPDATING' && Date.now() < deadline; ) {
    await delay(100);
    answer = await get(plane, path);
  }
  return answer;
}

function counted(counters: Counters, totals: Record<string, number>, name: string): number {
  for (const [key, n] of Object.entries(counters.take() ?? {})) totals[key] = (totals[key] ?? 0) + n;
  return totals[`middleware.cache.${name}`] ?? 0;
}

t.test('a refresh reaches an HTTPS upstream that only its tls settings trust, on the host the balancer picks', async (t) => {
  const seen: Seen[] = [];
  const hosts = [await httpsUpstream(t, 'a', seen), await httpsUpstream(t, 'b', seen)];
  const counters = new Counters();
  const totals: Record<string, number> = {};
  const gateway = await plane(t, hosts, counters);
  // Four entries: the balancer alternates, so their refreshes go to both hosts.
  const paths = ['/items/1', '/items/2', '/items/3', '/items/4'];
  for (const path of paths) t.same(await get(gateway, path), { status: 200, xCache: 'MISS', version: '1' });
  await delay(1600);
  for (const path of paths) {
    t.equal((await get(gateway, path)).xCache, 'UPDATING', `${path}: served stale while it is refreshed`);
    t.same(await untilRefreshed(gateway, path), { status: 200, xCache: 'HIT', version: '2' }, `${path}: the refreshed entry`);
  }
  const refreshes = seen.filter((s) => s.ifNoneMatch === '"v1"');
  t.same(refreshes.map((s) => s.path).sort(), paths, 'one conditional refresh per entry');
  t.same(new Set(refreshes.map((s) => s.host)), new Set(['a', 'b']), 'the refreshes went to both hosts');
  t.equal(counted(counters, totals, 'backgroundRefreshes'), 4);
  t.equal(counted(counters, totals, 'backgroundRefreshFailures'), 0);
});

t.test('a refresh that fails is counted, and the entry is served stale still', async (t) => {
  const seen: Seen[] = [];
  const host = await httpsUpstream(t, 'a', seen, () => true);
  const counters = new Counters();
  const totals: Record<string, number> = {};
  const gateway = await plane(t, [host], counters);
  t.equal((await get(gateway, '/items/3')).xCache, 'MISS');
  await delay(1600);
  t.equal((await get(gateway, '/items/3')).xCache, 'UPDATING');
  for (const deadline = Date.now() + 10_000; counted(counters, totals, 'backgroundRefreshFailures') === 0 && Date.now() < deadline; ) await delay(50);
  t.equal(counted(counters, totals, 'backgroundRefreshFailures'), 1, 'the failed refresh is counted');
  t.equal(counted(counters, totals, 'storeErrors'), 0, 'not as a store error');
  t.same(await get(gateway, '/items/3'), { status: 200, xCache: 'UPDATING', version: '1' }, 'still served stale, and refreshed again');
});

t.test('a refresh answered with a 5xx fails and keeps the entry, whatever lifetime the 5xx has; a 404 with one replaces it', async (t) => {
  // What each path's refresh gets; its first answer is a 200 that may be served stale for 30 s.
  const refreshed: Record<string, { status: number; headers: http.OutgoingHttpHeaders }> = {
    '/items/503': { status: 503, headers: { 'cache-control': 'max-age=30' } },
    '/items/500': { status: 500, headers: { 'cache-control': 'max-age=30' } },
    '/items/502-conditional': { status: 502, headers: { 'cache-control': 'max-age=30', etag: '"v1"' } },
    '/items/504-no-lifetime': { status: 504, headers: {} },
    '/items/404': { status: 404, headers: { 'cache-control': 'max-age=30' } },
  };
  const asked = new Map<string, Array<string | undefined>>();
  const server = http.createServer((req, res) => {
    const path = req.url ?? '';
    const seen = asked.get(path) ?? [];
    asked.set(path, [...seen, req.headers['if-none-match']]);
    const answer = seen.length === 0 ? undefined : refreshed[path];
    if (answer !== undefined) {
      res.writeHead(answer.status, { 'content-type': 'text/plain', 'x-version': '2', ...answer.headers });
      return res.end('refreshed');
    }
    const etag: http.OutgoingHttpHeaders = path.endsWith('-conditional') ? { etag: '"v1"' } : {};
    res.writeHead(200, { 'content-type': 'text/plain', 'cache-control': 'max-age=1, stale-while-revalidate=30', 'x-version': '1', ...etag });
    res.end('good');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const counters = new Counters();
  const totals: Record<string, number> = {};
  const gateway = await plane(t, [`http://127.0.0.1:${(server.address() as AddressInfo).port}`], counters);
  const paths = Object.keys(refreshed);
  const failing = paths.filter((path) => refreshed[path]!.status >= 500);
  for (const path of paths) t.same(await get(gateway, path), { status: 200, xCache: 'MISS', version: '1' }, `${path}: stored`);
  await delay(1600);
  for (const path of paths) t.equal((await get(gateway, path)).xCache, 'UPDATING', `${path}: served stale while it is refreshed`);
  // A 404 is the upstream's word on the resource, stored as a request's 404 with a lifetime would be.
  t.same(await untilRefreshed(gateway, '/items/404'), { status: 404, xCache: 'HIT', version: '2' }, '/items/404: replaced by the 404');
  for (const deadline = Date.now() + 10_000; counted(counters, totals, 'backgroundRefreshFailures') < failing.length && Date.now() < deadline; ) await delay(50);
  t.equal(counted(counters, totals, 'backgroundRefreshFailures'), failing.length, 'each refresh answered with a 5xx is counted as failed');
  t.equal(counted(counters, totals, 'backgroundRefreshes'), paths.length);
  for (const path of paths) t.equal(asked.get(path)?.length, 2, `${path}: refreshed once`);
  t.same(asked.get('/items/502-conditional'), [undefined, '"v1"'], 'with the entry\'s validator when it has one');
  for (const path of failing) {
    t.same(await get(gateway, path), { status: 200, xCache: 'UPDATING', version: '1' }, `${path}: the good entry is still served stale, not the ${refreshed[path]!.status}`);
  }
});
