/*
 * The request line checked like nginx checks it: a target longer than limits.maxUrlBytes is 414, at the
 * boundary, in one segment and split across segments; extension methods as uWS 20.30 treats them.
 */
import t from 'tap';
import { startDataPlane } from '../../src/proxy/data-plane.js';
import { RoutingTable } from '../../src/routing/table.js';
import { rawRequest } from '../helpers/raw-http.js';
import { entry, startUpstream, testConfig } from '../helpers/upstream-server.js';

const upstream = await startUpstream();
t.teardown(() => upstream.close());
/** Below uWS's 4 KiB fallback buffer, so that a split head reaches the data plane (see native-notes.md). */
const LIMIT = 2000;
const { table } = RoutingTable.compile([entry('GET', '/t/{+rest}', upstream.url), entry('PROPFIND', '/dav', upstream.url), entry('M-SEARCH', '/ssdp', upstream.url)]);

async function plane(maxUrlBytes?: number) {
  const limits = maxUrlBytes === undefined ? { maxHeaderBytes: 16384, maxBodyBytes: 1000 } : { maxHeaderBytes: 16384, maxBodyBytes: 1000, maxUrlBytes };
  const p = await startDataPlane({ config: testConfig({ limits, upstreams: [{ serviceType: 'static', serviceLocation: upstream.url, weight: 1, specPath: '/spec' }] }) });
  p.setTable(table);
  t.teardown(() => p.close());
  return p;
}

/** A target of exactly `length` bytes: path and query. */
function target(length: number): string {
  const query = '?q=1';
  return '/t/' + 'a'.repeat(length - 3 - query.length) + query;
}

t.test('414 above limits.maxUrlBytes, the limit itself is routed; in one segment and split', async (t) => {
  const p = await plane(LIMIT);
  for (const split of [false, true]) {
    for (const [length, status] of [[LIMIT, 200], [LIMIT + 1, 414]] as const) {
      const line = `GET ${target(length)} HTTP/1.1\r\n`;
      t.equal(line.length - 'GET  HTTP/1.1\r\n'.length, length);
      const head = `${line}Host: gw\r\n\r\n`;
      const payload = split ? [head.slice(0, 700), head.slice(700, 1500), head.slice(1500)] : head;
      const result = await rawRequest(p.port, payload, { responses: 1, partDelayMs: 50, waitMs: 3000 });
      t.equal(result.responses[0]?.status, status, `${length} bytes${split ? ', in three segments' : ''}: ${status}`);
      if (status === 414) {
        t.same(result.responses[0]!.headers['content-type'], ['application/problem+json']);
        t.match(JSON.parse(result.responses[0]!.body.toString()), { status: 414, title: 'URI Too Long' });
      }
    }
  }
});

t.test('the default limit is 8192 bytes', async (t) => {
  const p = await plane();
  const ok = await rawRequest(p.port, `GET ${target(8192)} HTTP/1.1\r\nHost: gw\r\n\r\n`, { responses: 1, waitMs: 3000 });
  t.equal(ok.responses[0]?.status, 200);
  const long = await rawRequest(p.port, `GET ${target(8193)} HTTP/1.1\r\nHost: gw\r\n\r\n`, { responses: 1, waitMs: 3000 });
  t.equal(long.responses[0]?.status, 414);
  const huge = await rawRequest(p.port, `GET ${target(100_000)} HTTP/1.1\r\nHost: gw\r\n\r\n`, { responses: 1, waitMs: 3000 });
  t.equal(huge.responses[0]?.status, 414, 'a 100 KB target in one write is 414, not forwarded');
  // Split across segments, a head over uWS's 4 KiB buffer is closed by uWS itself, without an answer.
  const head = `GET ${target(8193)} HTTP/1.1\r\nHost: gw\r\n\r\n`;
  const split = await rawRequest(p.port, [head.slice(0, 3000), head.slice(3000)], { partDelayMs: 50, waitMs: 3000 });
  t.equal(split.responses.length, 0, 'uWS closes a split head over 4 KiB without an answer');
  t.ok(split.closedByServer, 'at once');
});

t.test('extension methods: uWS 20.30 closes the connection before the handler runs', async (t) => {
  const p = await plane();
  const before = upstream.requests.length;
  for (const method of ['PROPFIND', 'M-SEARCH', 'PURGE']) {
    const path = method === 'PROPFIND' ? '/dav' : method === 'M-SEARCH' ? '/ssdp' : '/t/x';
    const result = await rawRequest(p.port, `${method} ${path} HTTP/1.1\r\nHost: gw\r\n\r\n`, { waitMs: 3000 });
    t.equal(result.responses.length, 0, `${method}: no answer`);
    t.ok(result.closedByServer, `${method}: closed by the server`);
  }
  t.equal(upstream.requests.length, before, 'nothing forwarded');
  t.ok(RoutingTable.compile([entry('M-SEARCH', '/ssdp', upstream.url)]).problems.length === 0, 'the routing table accepts M-SEARCH');
});
