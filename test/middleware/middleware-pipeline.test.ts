// The request pipeline (docs/reference/middleware.md) against a real data plane: order, asynchronous decisions with the
// body held (and the socket paused) meanwhile, slaMs (skip and count; fail closed with 503), a client
// leaving while a decision is pending, response headers added by middleware on every answer.
import net from 'node:net';
import t from 'tap';
import { Counters } from '../../src/metrics/counters.js';
import { DECIDING, Pipeline } from '../../src/middleware/pipeline.js';
import { problem, type Decision, type Middleware } from '../../src/middleware/types.js';
import type { RequestContext } from '../../src/exchange/context.js';
import { eventually } from '../helpers/gateway-process.js';
import { rawRequest } from '../helpers/raw-http.js';
import { echoHandler, entry, startUpstream } from '../helpers/upstream-server.js';
import { planeInFrontOf } from '../helpers/data-plane.js';

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const plane = await planeInFrontOf(t, upstream.url, [entry('GET', '/items/{id}', upstream.url), entry('POST', '/items', upstream.url)]);

function middleware(id: string, decide: (ctx: RequestContext) => Decision | void | Promise<Decision>, options: { slaMs?: number; failClosed?: boolean } = {}): Middleware {
  return {
    id,
    type: 'test',
    slaMs: options.slaMs ?? 1000,
    failClosed: options.failClosed ?? false,
    decide: (ctx) => decide(ctx) ?? undefined,
    ready: () => Promise.resolve(),
    close: () => Promise.resolve(),
  };
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function use(...entries: Middleware[]): Counters {
  const counters = new Counters();
  plane.setPipeline(new Pipeline(entries, counters));
  return counters;
}

t.test('entries run in order; each sees what the previous one wrote; an answer stops the rest', async (t) => {
  const order: string[] = [];
  use(
    middleware('first', (ctx) => {
      order.push('first');
      ctx.headers.push('x-first', '1');
      ctx.addResponseHeader('x-added', 'by-first');
    }),
    middleware('second', async (ctx) => {
      await delay(5);
      order.push(`second saw ${ctx.requestHeader('x-first')}`);
      return ctx.path === '/items/stop' ? problem(403, 'stopped by second', ['x-why', 'test']) : undefined;
    }),
    middleware('third', () => {
      order.push('third');
    }),
  );
  const ok = await rawRequest(plane.port, 'GET /items/1 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 });
  t.equal(ok.responses[0]!.status, 200);
  t.same(ok.responses[0]!.headers['x-added'], ['by-first'], 'a response header added by middleware reaches the client');
  t.equal(upstream.requests[upstream.requests.length - 1]!.headers['x-first'], '1', 'a request header added by middleware reaches the upstream');
  t.same(order, ['first', 'second saw 1', 'third']);
  order.length = 0;
  const before = upstream.requests.length;
  const stopped = await rawRequest(plane.port, 'GET /items/stop HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 });
  t.equal(stopped.responses[0]!.status, 403);
  t.same(stopped.responses[0]!.headers['x-why'], ['test']);
  t.same(stopped.responses[0]!.headers['x-added'], ['by-first'], 'and on the middleware\'s own answers');
  t.same(order, ['first', 'second saw 1'], 'third did not run');
  t.equal(upstream.requests.length, before, 'nothing forwarded');
});

t.test('Pipeline.decide: synchronous decisions come back at once; the request is held only from the first asynchronous one', async (t) => {
  const ctx = {} as RequestContext;
  const ran: string[] = [];
  const sync = (id: string, answer?: Decision) =>
    middleware(id, () => {
      ran.push(id);
      return answer;
    });
  const counters = new Counters();
  let holds = 0;
  const goingAsync = (held: RequestContext) => {
    holds++;
    t.equal(held, ctx, 'the held request is the one deciding');
    return (answer: Decision | null) => void ran.push(`async outcome ${answer == null ? 'forward' : answer.status}`);
  };

  const admitting = [sync('a'), sync('b')];
  t.equal(new Pipeline(admitting, counters).decide(ctx, admitting, goingAsync), null, 'all admitted: forward');
  const refusing = [sync('c', problem(401, 'no')), sync('d')];
  const refused = new Pipeline(refusing, counters).decide(ctx, refusing, goingAsync);
  t.equal(refused !== DECIDING && refused !== null ? refused.status : 0, 401, 'the first answer, at once');
  t.same(ran, ['a', 'b', 'c'], 'd did not run');
  t.equal(holds, 0, 'nothing held while every decision was synchronous');

  ran.length = 0;
  const slow = middleware('slow', () => delay(5).then(() => void ran.push('slow')));
  const entries = [sync('e'), slow, sync('f')];
  const outcome = new Pipeline(entries, counters).decide(ctx, entries, goingAsync);
  t.equal(outcome, DECIDING);
  t.equal(holds, 1, 'held once, at the asynchronous decision');
  t.same(ran, ['e']);
  await eventually(async () => (ran.length >= 4 ? true : undefined), 3000, 10, 'the asynchronous decision');
  t.same(ran, ['e', 'slow', 'f', 'async outcome forward'], 'the rest ran after it; the outcome came once');
  t.equal(holds, 1);
});

t.test('a synchronous admit forwards a streamed body; a synchronous answer leaves the body unread and closes', async (t) => {
  use(middleware('admit', (ctx) => void ctx.addResponseHeader('x-admitted', 'yes')));
  const body = Buffer.alloc(256 * 1024, 'c');
  const res = await rawRequest(plane.port, [`POST /items HTTP/1.1\r\nHost: gw\r\nContent-Length: ${body.length}\r\n\r\n`, body.toString()], { responses: 1, waitMs: 5000 });
  t.equal(res.responses[0]?.status, 200);
  t.same(res.responses[0]?.headers['x-admitted'], ['yes']);
  t.ok(upstream.requests[upstream.requests.length - 1]!.body.equals(body), 'the body, byte for byte');
  use(middleware('refuse', () => problem(429, 'slow down')));
  const before = upstream.requests.length;
  const refused = await rawRequest(plane.port, [`POST /items HTTP/1.1\r\nHost: gw\r\nContent-Length: ${body.length}\r\n\r\n`, 'partial'], { responses: 1, waitMs: 3000 });
  t.equal(refused.responses[0]?.status, 429);
  t.same(refused.responses[0]?.headers.connection, ['close'], 'the unread body ends the connection');
  t.equal(upstream.requests.length, before, 'nothing forwarded');
});

t.test('a 1 MiB body arrives whole while an asynchronous decision is pending (held, the socket paused)', async (t) => {
  use(middleware('slow', () => delay(150).then(() => undefined)));
  const body = Buffer.alloc(1024 * 1024, 'b');
  const res = await rawRequest(plane.port, [`POST /items HTTP/1.1\r\nHost: gw\r\nContent-Length: ${body.length}\r\n\r\n`, body.toString()], { responses: 1, waitMs: 5000 });
  t.equal(res.responses[0]?.status, 200);
  const seen = upstream.requests[upstream.requests.length - 1]!;
  t.equal(seen.bodyBytes, body.length);
  t.ok(seen.body.equals(body), 'byte for byte');
  const chunked = await rawRequest(
    plane.port,
    ['POST /items HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n', '5\r\nhello\r\n', '6\r\n world\r\n0\r\n\r\n'],
    { responses: 1, waitMs: 5000, partDelayMs: 60 },
  );
  t.equal(chunked.responses[0]?.status, 200, 'a chunked body arriving in parts while held');
  t.equal(upstream.requests[upstream.requests.length - 1]!.body.toString(), 'hello world');
});

t.test('slaMs: a decision that takes longer is skipped and counted; one that fails closed is 503', async (t) => {
  const counters = use(
    middleware('hangs', () => new Promise<Decision>(() => {}), { slaMs: 50 }),
    middleware('after', (ctx) => {
      ctx.headers.push('x-after', 'ran');
    }),
  );
  const started = Date.now();
  const res = await rawRequest(plane.port, 'GET /items/1 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 });
  t.equal(res.responses[0]!.status, 200, 'skipped: the request went on');
  t.equal(upstream.requests[upstream.requests.length - 1]!.headers['x-after'], 'ran', 'the next middleware ran');
  t.ok(Date.now() - started >= 50, 'after the SLA');
  t.same(counters.take(), { 'middleware.hangs.slaMisses': 1, 'middleware.after.admitted': 1 });

  const closed = use(middleware('auth-like', () => new Promise<Decision>(() => {}), { slaMs: 50, failClosed: true }));
  const refused = await rawRequest(plane.port, 'GET /items/1 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 });
  t.equal(refused.responses[0]!.status, 503);
  t.match(JSON.parse(refused.responses[0]!.body.toString()), { detail: /auth-like did not decide within its SLA of 50 ms/ });
  t.same(closed.take(), { 'middleware.auth-like.slaMisses': 1, 'middleware.auth-like.rejected.503': 1 });
});

t.test('a middleware that throws is skipped (or 503 when it fails closed), and the worker goes on', async (t) => {
  const counters = use(middleware('buggy', () => {
    throw new Error('boom');
  }));
  t.equal((await rawRequest(plane.port, 'GET /items/1 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 })).responses[0]!.status, 200);
  use(middleware('buggy-closed', () => Promise.reject(new Error('boom')), { failClosed: true }));
  t.equal((await rawRequest(plane.port, 'GET /items/1 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 })).responses[0]!.status, 503);
  t.same(counters.take(), { 'middleware.buggy.errors': 1, 'middleware.buggy.admitted': 1 });
});

t.test('a middleware that throws or rejects is told, with the request and the error, and may label the answer', async (t) => {
  const told: string[] = [];
  const labelling = (id: string, decide: () => Decision | Promise<Decision>, hook: (ctx: RequestContext, err: unknown) => void): Middleware => ({
    ...middleware(id, decide),
    failed: hook,
  });
  const counters = use(
    labelling(
      'sync',
      () => {
        throw new Error('sync boom');
      },
      (ctx, err) => {
        told.push(`sync ${ctx.path}: ${(err as Error).message}`);
        ctx.addResponseHeader('x-failed', 'sync');
      },
    ),
    labelling(
      'async',
      () => Promise.reject(new Error('async boom')),
      (ctx, err) => {
        told.push(`async ${ctx.path}: ${(err as Error).message}`);
        ctx.addResponseHeader('x-failed', 'async');
      },
    ),
    labelling(
      'hook-throws',
      () => {
        throw new Error('third');
      },
      () => {
        throw new Error('the hook fails too');
      },
    ),
  );
  const res = (await rawRequest(plane.port, 'GET /items/7 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 })).responses[0]!;
  t.equal(res.status, 200, 'forwarded without them');
  t.same(res.headers['x-failed'], ['sync', 'async'], 'each labelled the answer');
  t.same(told, ['sync /items/7: sync boom', 'async /items/7: async boom']);
  t.same(counters.take(), {
    'middleware.sync.errors': 1,
    'middleware.sync.admitted': 1,
    'middleware.async.errors': 1,
    'middleware.async.admitted': 1,
    'middleware.hook-throws.errors': 1,
    'middleware.hook-throws.admitted': 1,
  });
});

t.test('the client leaves while a decision is pending: nothing is forwarded, the data plane drains', async (t) => {
  let release: () => void = () => {};
  use(middleware('waits', () => new Promise<Decision>((resolve) => (release = () => resolve(undefined)))));
  const before = upstream.requests.length;
  const socket = net.connect(plane.port, '127.0.0.1');
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  socket.write('GET /items/1 HTTP/1.1\r\nHost: gw\r\n\r\n');
  // The request, then the close, reach the data plane later on a busy host: polled.
  await eventually(async () => (plane.inFlight() === 1 ? true : undefined), 3000, 10, 'the request in flight');
  t.equal(plane.inFlight(), 1, 'held: in flight');
  socket.destroy();
  await eventually(async () => (plane.inFlight() === 0 ? true : undefined), 3000, 10, 'the request counted out');
  t.equal(plane.inFlight(), 0, 'counted out when the client left');
  release();
  await delay(50);
  t.equal(upstream.requests.length, before, 'the late admission forwards nothing');
});

t.test('no middleware: requests take the direct path', async (t) => {
  plane.setPipeline(new Pipeline([], new Counters()));
  t.equal((await rawRequest(plane.port, 'GET /items/1 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 })).responses[0]!.status, 200);
});

t.test('a middleware may answer with content, and watch the answer: head, body, end; or substitute a failure', async (t) => {
  const events: string[] = [];
  let offer = false;
  const content = { kind: 'content' as const, status: 200, headers: ['content-type', 'text/plain', 'x-from', 'cache'], body: Buffer.from('kept') };
  use(
    middleware('watcher', (ctx) => {
      if (ctx.path === '/items/cached') return content;
      ctx.observe({
        onHead: (status, headers) => events.push(`head ${status} ${headers.filter((_, i) => i % 2 === 0).includes('content-type')}`),
        onData: (chunk) => events.push(`data ${chunk.byteLength}`),
        onEnd: () => events.push('end'),
        onAbort: () => events.push('abort'),
        substitute: (status) => (offer ? { ...content, headers: [...content.headers, 'x-instead-of', String(status)] } : null),
      });
    }),
  );
  const cached = await rawRequest(plane.port, 'GET /items/cached HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 });
  t.equal(cached.responses[0]!.status, 200);
  t.equal(cached.responses[0]!.body.toString(), 'kept', 'content answer, body as given');
  t.same(cached.responses[0]!.headers['x-from'], ['cache']);
  t.same(cached.responses[0]!.headers['content-length'], ['4'], 'framed by the writer');
  const head = await rawRequest(plane.port, 'HEAD /items/cached HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1, head: true });
  t.same(head.responses[0]!.headers['content-length'], ['4'], 'HEAD: the length only');

  const watched = await rawRequest(plane.port, 'GET /items/9 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 });
  t.equal(watched.responses[0]!.status, 200);
  // The observer hears the end after the client got the answer.
  await eventually(async () => (events.at(-1) === 'end' ? true : undefined), 3000, 10, 'the end of the watched answer');
  t.same(events[0], 'head 200 true');
  t.match(events[1], /^data \d+$/);
  t.equal(events[events.length - 1], 'end', 'the answer completed');

  upstream.setHandler((_req, res) => {
    res.writeHead(503);
    res.end('down');
  });
  t.teardown(() => upstream.setHandler(echoHandler));
  events.length = 0;
  offer = true;
  const instead = await rawRequest(plane.port, 'GET /items/9 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 });
  t.equal(instead.responses[0]!.status, 200, 'a 503 from the upstream replaced by the offered content');
  t.same(instead.responses[0]!.headers['x-instead-of'], ['503']);
  await eventually(async () => (events.length > 0 ? true : undefined), 3000, 10, 'the observer told');
  t.same(events, ['abort'], 'the watched answer did not reach the client');
  offer = false;
  const passed = await rawRequest(plane.port, 'GET /items/9 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 });
  t.equal(passed.responses[0]!.status, 503, 'nothing offered: the upstream\'s answer');
});
