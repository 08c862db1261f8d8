// Listeners that sample a request get a capture of it and of the client's answer after the answer is
// over (the hook alternateUpstream stands on); unsampled requests keep nothing.
import t from 'tap';
import type { Capture } from '../../src/exchange/capture.js';
import type { RequestListener } from '../../src/exchange/listener.js';
import type { RequestContext } from '../../src/exchange/context.js';
import { rawRequest } from '../helpers/raw-http.js';
import { entry, startUpstream } from '../helpers/upstream-server.js';
import { planeInFrontOf } from '../helpers/data-plane.js';
import { RoutingTable } from '../../src/routing/table.js';
import type { RouteEntry } from '../../src/routing/types.js';

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const plane = await planeInFrontOf(t, upstream.url, [entry('GET', '/items/{id}', upstream.url), entry('POST', '/items', upstream.url), entry('GET', '/quiet', upstream.url, { disabledListeners: ['spy'] })], { config: { limits: { maxBodyBytes: 1024 * 1024 } } });

const seen: Array<{ path: string; request: string; status: number; response: string; complete: boolean; sampled: boolean }> = [];
const spy: RequestListener = {
  id: 'spy',
  sample: (ctx: RequestContext) => ctx.path !== '/items/skip',
  done: (ctx: RequestContext, capture: Capture) =>
    seen.push({
      path: ctx.path,
      request: Buffer.concat(capture.requestBody).toString(),
      status: capture.status,
      response: Buffer.concat(capture.responseBody).toString(),
      complete: capture.complete,
      sampled: true,
    }),
};
plane.setListeners([spy]);

t.test('a sampled request: its body and the answer it got, after the answer', async (t) => {
  await rawRequest(plane.port, 'POST /items HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\n\r\nhello', { responses: 1 });
  await rawRequest(plane.port, 'GET /items/skip HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 });
  await rawRequest(plane.port, 'GET /quiet HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 });
  // The sampled one arrives after its answer; the two others would have arrived by then (same worker, in order).
  for (let i = 0; i < 300 && seen.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  t.equal(seen.length, 1, 'unsampled and x-disabled-listeners requests are not captured');
  t.equal(seen[0]!.path, '/items');
  t.equal(seen[0]!.request, 'hello');
  t.equal(seen[0]!.status, 200);
  t.match(JSON.parse(seen[0]!.response), { method: 'POST', url: '/items', bodyBytes: 5 });
  t.ok(seen[0]!.complete);
});

t.test('an endpoint served by two upstreams, one of which disables the listener: no request of the group is sampled, whichever the config lists first', async (t) => {
  const other = await startUpstream();
  t.teardown(() => other.close());
  const orders: Array<[RouteEntry, RouteEntry]> = [
    [entry('GET', '/group/{id}', upstream.url), entry('GET', '/group/{id}', other.url, { disabledListeners: ['spy'] })],
    [entry('GET', '/group/{id}', other.url, { disabledListeners: ['spy'] }), entry('GET', '/group/{id}', upstream.url)],
  ];
  for (const [first, second] of orders) {
    const { table, problems } = RoutingTable.compile([first, second]);
    t.same(problems, []);
    plane.setTable(table);
    seen.length = 0;
    const servedBefore = upstream.requests.length + other.requests.length;
    for (let i = 0; i < 6; i++) t.equal((await rawRequest(plane.port, `GET /group/${i} HTTP/1.1\r\nHost: gw\r\n\r\n`, { responses: 1 })).responses[0]!.status, 200);
    t.equal(upstream.requests.length + other.requests.length - servedBefore, 6, 'both upstreams serve the group');
    await new Promise((resolve) => setTimeout(resolve, 100));
    t.same(seen.map((s) => s.path), [], `${first.upstream === upstream.url ? 'enabling' : 'disabling'} upstream listed first: none sampled`);
  }
});
