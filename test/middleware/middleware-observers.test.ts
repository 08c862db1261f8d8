// Response observers of a request that is never forwarded (docs/reference/middleware.md#order; src/lifecycle/respond.ts):
// a later middleware answers, or the client leaves while a decision is pending: the observer still
// learns that the answer is over (onAbort), so what it holds for the request (a cache's in-flight
// miss) is released. With every host's breaker open, observers may answer in place of the 503. An
// answer with content (a cache hit) is counted as answered, not as a rejection.
import net from 'node:net';
import t from 'tap';
import { Counters } from '../../src/metrics/counters.js';
import { Pipeline } from '../../src/middleware/pipeline.js';
import { problem, type ContentAnswer, type Decision, type Middleware } from '../../src/middleware/types.js';
import type { RequestContext, ResponseObserver } from '../../src/exchange/context.js';
import { eventually } from '../helpers/gateway-process.js';
import { rawRequest } from '../helpers/raw-http.js';
import { entry, startUpstream } from '../helpers/upstream-server.js';
import { planeInFrontOf } from '../helpers/data-plane.js';

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const plane = await planeInFrontOf(t, upstream.url, [entry('GET', '/items/{id}', upstream.url)]);

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function middleware(id: string, decide: (ctx: RequestContext) => Decision | Promise<Decision>): Middleware {
  return { id, type: 'test', slaMs: 1000, failClosed: false, decide, ready: () => Promise.resolve(), close: () => Promise.resolve() };
}

/** A middleware that watches every request and records what its observer is told. */
function watcher(events: string[], offer: ContentAnswer | null = null): Middleware {
  return middleware('watcher', (ctx) => {
    const observer: ResponseObserver = {
      onHead: (status) => events.push(`head ${status}`),
      onData: () => {},
      onEnd: () => events.push('end'),
      onAbort: () => events.push('abort'),
      substitute: (status) => {
        events.push(`substitute ${status}`);
        return offer;
      },
    };
    ctx.observe(observer);
    return undefined;
  });
}

t.test('a later middleware answers: the observer is told the answer is over', async (t) => {
  const events: string[] = [];
  plane.setPipeline(new Pipeline([watcher(events), middleware('deny', () => problem(429, 'slow down'))], new Counters()));
  const res = await rawRequest(plane.port, 'GET /items/1 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 });
  t.equal(res.responses[0]!.status, 429);
  t.same(events, ['abort']);
});

t.test('the client leaves while a later decision is pending: the observer is told', async (t) => {
  const events: string[] = [];
  plane.setPipeline(new Pipeline([watcher(events), middleware('hangs', () => new Promise<Decision>(() => {}))], new Counters()));
  const socket = net.connect(plane.port, '127.0.0.1');
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  socket.write('GET /items/1 HTTP/1.1\r\nHost: gw\r\n\r\n');
  await delay(50);
  t.same(events, [], 'pending: nothing yet');
  socket.destroy();
  // The close reaches the data plane later on a busy host: polled.
  await eventually(async () => (events.length > 0 ? true : undefined), 3000, 10, 'the observer told of the close');
  t.same(events, ['abort']);
});

t.test('every host behind an open breaker: an observer may answer instead of the 503', async (t) => {
  const events: string[] = [];
  const offered: ContentAnswer = { kind: 'content', status: 200, headers: ['content-type', 'text/plain'], body: Buffer.from('kept') };
  plane.tripBreaker(upstream.url, null);
  plane.setPipeline(new Pipeline([watcher(events, offered)], new Counters()));
  const res = await rawRequest(plane.port, 'GET /items/1 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 });
  t.equal(res.responses[0]!.status, 200);
  t.equal(res.responses[0]!.body.toString(), 'kept');
  t.same(events, ['substitute 503', 'abort']);
  events.length = 0;
  plane.setPipeline(new Pipeline([watcher(events)], new Counters()));
  const refused = await rawRequest(plane.port, 'GET /items/1 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 });
  t.equal(refused.responses[0]!.status, 503, 'nothing offered: the 503 of the open breaker');
  t.same(events, ['substitute 503', 'abort']);
});

t.test('an answer with content is counted as answered.<status>, a problem as rejected.<status>', async (t) => {
  const counters = new Counters();
  const content: ContentAnswer = { kind: 'content', status: 200, headers: [], body: Buffer.from('hit') };
  plane.setPipeline(
    new Pipeline(
      [
        middleware('sync', (ctx) => (ctx.path === '/items/sync' ? content : undefined)),
        middleware('async', (ctx) => Promise.resolve(ctx.path === '/items/async' ? content : ctx.path === '/items/no' ? problem(403, 'no') : undefined)),
      ],
      counters,
    ),
  );
  for (const path of ['/items/sync', '/items/async', '/items/no']) await rawRequest(plane.port, `GET ${path} HTTP/1.1\r\nHost: gw\r\n\r\n`, { responses: 1 });
  t.same(counters.take(), {
    'middleware.sync.answered.200': 1,
    'middleware.sync.admitted': 2,
    'middleware.async.answered.200': 1,
    'middleware.async.rejected.403': 1,
  });
});
