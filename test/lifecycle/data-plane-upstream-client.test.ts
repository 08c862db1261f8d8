/**
 * The data plane on the gateway's own upstream client (docs/reference/forward.md#upstream-client): an upstream that tries to smuggle
 * a second answer (ambiguous framing, an answer glued to the first, a body after a 204) gets a 502 or
 * nothing at all through, is counted in upstreamFailures.*, and never answers another request; a
 * handler callback that throws (a middleware's observer) ends only its own exchange; a full wait
 * queue is 503 and a queue wait past timeouts.upstreamMs is 504.
 */
import net from 'node:net';
import t from 'tap';
import { Counters } from '../../src/metrics/counters.js';
import { Pipeline } from '../../src/middleware/pipeline.js';
import type { Middleware } from '../../src/middleware/types.js';
import type { DataPlane } from '../../src/proxy/data-plane.js';
import type { ResponseObserver } from '../../src/exchange/context.js';
import { rawRequest, type ParsedResponse } from '../helpers/raw-http.js';
import { startRawServer } from '../helpers/raw-upstream.js';
import { entry } from '../helpers/upstream-server.js';
import { planeInFrontOf } from '../helpers/data-plane.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `done` every 10 ms for up to 3 s: on a busy host a fixed wait may end before what it waits for. */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 300 && !done(); i++) await sleep(10);
}

interface Scripted {
  url: string;
  /** Requests received (their request lines). */
  requests: string[];
  connections(): number;
  close(): Promise<void>;
}

/**
 * A raw upstream: `script(path, socket)` answers each request by writing to the socket itself.
 * A socket marked poisoned (by the script) answers nothing more.
 */
async function scripted(script: (path: string, socket: net.Socket, poison: () => void) => void): Promise<Scripted> {
  const requests: string[] = [];
  const poisoned = new WeakSet<net.Socket>();
  const server = await startRawServer((socket, head) => {
    const line = head.slice(0, head.indexOf('\r\n'));
    requests.push(line);
    if (!poisoned.has(socket)) script(line.split(' ')[1]!, socket, () => poisoned.add(socket));
  });
  return { url: server.url, requests, connections: () => server.connections, close: () => server.close() };
}

const HONEST = 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nhonest';
const SMUGGLED = 'HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled';

/** Answers that try to make one answer look like two; each must be refused whole. */
const AMBIGUOUS: Record<string, string> = {
  'cl-and-te': `HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${SMUGGLED}`,
  'two-lengths': `HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 45\r\n\r\nok${SMUGGLED}`,
  'te-not-chunked-last': `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n${SMUGGLED}`,
  'obs-fold': `HTTP/1.1 200 OK\r\nX-A: 1\r\n Content-Length: 45\r\nContent-Length: 2\r\n\r\nok${SMUGGLED}`,
  'bad-chunk-size': `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2x\r\nok\r\n0\r\n\r\n${SMUGGLED}`,
  'bare-cr': `HTTP/1.1 200 OK\r\nX-A: 1\rContent-Length: 0\r\nContent-Length: 2\r\n\r\nok${SMUGGLED}`,
};

let headSeen = Promise.resolve();
const upstream = await scripted((path, socket, poison) => {
  const name = path.slice(1);
  if (name in AMBIGUOUS) {
    socket.write(AMBIGUOUS[name]!);
    poison();
  } else if (name === 'glued') {
    // A valid answer with a second one right behind it in the same write.
    socket.write(`HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst${SMUGGLED}`);
    poison();
  } else if (name === 'no-content') {
    // A 204 announcing a body, which follows later, when the socket may carry the next request.
    socket.write('HTTP/1.1 204 No Content\r\nContent-Length: 45\r\n\r\n');
    setTimeout(() => socket.write(SMUGGLED), 40);
    poison();
  } else if (name === 'head-alone-sized' || name === 'head-alone-chunked') {
    // The head alone; the body only once the test says the client has seen the head.
    const sized = name === 'head-alone-sized';
    socket.write(sized ? 'HTTP/1.1 200 OK\r\nX-Stage: head\r\nContent-Length: 4\r\n\r\n' : 'HTTP/1.1 200 OK\r\nX-Stage: head\r\nTransfer-Encoding: chunked\r\n\r\n');
    // Sized: only once the client has the whole head. Chunked: uWS completes a chunked head with the
    // first chunk only, so the body follows after a pause, in a later read.
    if (sized) void headSeen.then(() => socket.write('body'));
    else setTimeout(() => socket.write('4\r\nbody\r\n0\r\n\r\n'), 30);
  } else if (name === 'chunked-slow') {
    socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n');
    setTimeout(() => socket.write('6\r\nsecond\r\n0\r\n\r\n'), 30);
  } else {
    socket.write(HONEST);
  }
});
t.teardown(() => upstream.close());

const counters = new Counters();
const plane = await planeInFrontOf(t, upstream.url, [entry('GET', '/{name}', upstream.url)], { config: { circuitBreaker: { hostFailures: 10_000, endpointFailures: 10_000 } }, counters });

async function get(target: DataPlane, path: string): Promise<ParsedResponse & { closed: boolean }> {
  const result = await rawRequest(target.port, `GET ${path} HTTP/1.1\r\nHost: gw\r\n\r\n`, { responses: 1, waitMs: 3000 });
  const response = result.responses[0] ?? { status: 0, reason: '', headers: {}, body: Buffer.alloc(0), complete: false, consumed: 0 };
  return { ...response, closed: result.closedByServer };
}

t.test('ambiguous framing from the upstream: 502 problem, counted, and the next request gets its own answer', async (t) => {
  counters.take();
  for (const name of Object.keys(AMBIGUOUS)) {
    const refused = await get(plane, `/${name}`);
    t.equal(refused.status, 502, `${name}: 502`);
    t.match(JSON.parse(refused.body.toString()), { status: 502, detail: 'the upstream sent an invalid response' }, `${name}: problem+json`);
    t.notMatch(refused.body.toString(), /smuggled/);
    const next = await get(plane, '/next');
    t.equal(next.body.toString(), 'honest', `${name}: the next request is answered by the upstream, not by the smuggled answer`);
  }
  const counted = counters.take() ?? {};
  t.equal(counted['upstreamFailures.badResponses'], Object.keys(AMBIGUOUS).length, 'each refusal counted as upstreamFailures.badResponses');
  t.notOk('retries.afterNoAnswer' in counted, 'an invalid answer is not retried');
});

t.test('an answer with a second one glued behind it: the first goes through, the second to nobody', async (t) => {
  const first = await get(plane, '/glued');
  t.equal(first.status, 200);
  t.equal(first.body.toString(), 'first');
  for (let i = 0; i < 3; i++) t.equal((await get(plane, '/next')).body.toString(), 'honest', `request ${i + 1} after it`);
});

t.test('a 204 whose announced body arrives later: the request right after it is not answered with it', async (t) => {
  for (let i = 0; i < 3; i++) {
    const noContent = await get(plane, '/no-content');
    t.equal(noContent.status, 204);
    t.equal(noContent.body.length, 0);
    t.equal((await get(plane, '/next')).body.toString(), 'honest', `round ${i + 1}: the next request got the upstream's answer`);
  }
});

t.test('a head that arrives alone, its body in a later read: sent intact (sized: at once, before the body)', async (t) => {
  for (const kind of ['sized', 'chunked']) {
    let seen!: () => void;
    headSeen = new Promise((resolve) => (seen = resolve));
    const client = net.connect(plane.port, '127.0.0.1');
    let received = '';
    const complete = new Promise<string>((resolve, reject) => {
      client.on('data', (chunk) => {
        received += chunk.toString('latin1');
        if (received.includes('\r\n\r\n')) seen();
        if (received.endsWith(kind === 'sized' ? 'body' : '0\r\n\r\n')) resolve(received);
      });
      client.on('error', reject);
      setTimeout(() => reject(new Error(`${kind}: no complete answer within 5 s; got ${JSON.stringify(received)}`)), 5000);
    });
    client.write(`GET /head-alone-${kind} HTTP/1.1\r\nHost: gw\r\n\r\n`);
    const answer = await complete;
    client.destroy();
    t.match(answer, /^HTTP\/1\.1 200 OK\r\n/, `${kind}: the head came first`);
    t.match(answer, /\r\nX-Stage: head\r\n/, `${kind}: its headers intact (written while their bytes were still valid)`);
    t.ok(answer.includes('body'), `${kind}: then the body`);
  }
});

t.test('a handler callback that throws ends its own exchange only; the worker and the pool go on', async (t) => {
  const warnings: string[] = [];
  const onWarning = (warning: Error): void => void warnings.push(warning.message);
  process.on('warning', onWarning);
  t.teardown(() => void process.off('warning', onWarning));
  let throwIn: 'onHead' | 'onData' | null = null;
  let chunks = 0;
  const thrower: ResponseObserver = {
    onHead: () => {
      chunks = 0;
      if (throwIn === 'onHead') throw new Error('observer bug in onHead');
    },
    onData: () => {
      // The second chunk: the head and the first chunk are on their way to the client.
      if (throwIn === 'onData' && ++chunks === 2) throw new Error('observer bug in onData');
    },
    onEnd: () => {},
    onAbort: () => {},
    substitute: () => null,
  };
  const watcher: Middleware = {
    id: 'watcher',
    type: 'test',
    slaMs: 1000,
    failClosed: false,
    decide: (ctx) => void ctx.observe(thrower),
    ready: () => Promise.resolve(),
    close: () => Promise.resolve(),
  };
  plane.setPipeline(new Pipeline([watcher], new Counters()));
  t.teardown(() => plane.setPipeline(new Pipeline([], new Counters())));

  throwIn = 'onHead';
  const inHead = await get(plane, '/next');
  t.equal(inHead.status, 502, 'a throw before anything reached the client: 502');
  t.match(JSON.parse(inHead.body.toString()), { detail: 'the gateway failed to handle the upstream answer' });

  throwIn = 'onData';
  const inBody = await get(plane, '/chunked-slow');
  t.equal(inBody.status, 200, 'a throw once the answer had started (head and first chunk sent)...');
  t.equal(inBody.complete, false, '...leaves it incomplete');
  t.ok(inBody.closed, '...and closes the connection');

  throwIn = null;
  await until(() => plane.inFlight() === 0);
  t.equal(plane.inFlight(), 0, 'nothing left in flight');
  t.equal((await get(plane, '/next')).body.toString(), 'honest', 'the data plane still serves');
  t.ok(warnings.includes('observer bug in onHead') && warnings.includes('observer bug in onData'), 'each throw reported as a warning');
});

t.test('upstreamPool: a full wait queue is 503 at once, a wait past timeouts.upstreamMs is 504', async (t) => {
  const hanging = await scripted(() => {
    // Never answers.
  });
  t.teardown(() => hanging.close());
  const queueCounters = new Counters();
  const small = await planeInFrontOf(t, hanging.url, [entry('GET', '/{name}', hanging.url)], { config: { timeouts: { upstreamMs: 400, connectMs: 1000, clientRequestMs: 5000, shutdownGraceMs: 500 }, upstreamPool: { connections: 1, maxQueue: 1, idleTimeoutMs: 4000, maxResponseHeaderBytes: 16384 } }, counters: queueCounters });
  const running = get(small, '/a');
  await until(() => hanging.requests.length === 1);
  const queued = get(small, '/b');
  // In flight and not sent (the one connection is /a's): /b waits in the queue.
  await until(() => small.inFlight() === 2);
  const started = Date.now();
  const refused = await get(small, '/c');
  t.equal(refused.status, 503, 'a third request finds the one connection busy and the queue full: 503');
  t.ok(Date.now() - started < 300, 'at once');
  t.match(JSON.parse(refused.body.toString()), { detail: /too many requests wait/ });
  t.equal((await running).status, 504, 'the running request times out: 504');
  t.equal((await queued).status, 504, 'the queued one too, its wait counted toward upstreamMs');
  t.notOk(hanging.requests.some((line) => line.includes('/c')), 'the refused one was never sent');
  const counted = queueCounters.take() ?? {};
  t.equal(counted['upstreamFailures.queueFull'], 1);
  t.equal(counted['upstreamFailures.timeouts'], 2);
});
