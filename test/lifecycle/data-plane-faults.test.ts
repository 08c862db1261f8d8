import { Worker } from 'node:worker_threads';
import t from 'tap';
import { Agent, request } from 'undici';
import { startDataPlane } from '../../src/proxy/data-plane.js';
import { RoutingTable } from '../../src/routing/table.js';
import { closedPort, rawRequest } from '../helpers/raw-http.js';
import { afterBody, echoHandler, entry, startUpstream, testConfig } from '../helpers/upstream-server.js';
import { within } from '../helpers/within.js';

const UPSTREAM_MS = 300;
const RESET_MS = 600;
const CLIENT_REQUEST_MS = 500;
/**
 * The upper bound on a timeout that must fire: far beyond the timeouts themselves, so a busy machine
 * cannot reach it, while a timer that does not fire (the request would wait on the silent upstream
 * or client for good) still fails the test. The lower bounds stay exact: a timer never fires early.
 */
const FIRED_WITHIN_MS = 10_000;

/** Polls `done` every 10 ms for up to 3 s: on a busy host a fixed wait may end before what it waits for. */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 300 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
}

const refusedUrl = `http://127.0.0.1:${await closedPort()}`;
const hanging = await startUpstream(() => {
  // Never answers.
});
const flaky = await startUpstream();
const refusedForBreaker = `http://127.0.0.1:${await closedPort()}`;
const abortable = await startUpstream(() => {});
const dying = await startUpstream();
const slowBody = await startUpstream();
const cutting = await startUpstream();
const upstreams = [hanging, flaky, abortable, dying, slowBody, cutting];

const config = testConfig({
  timeouts: { upstreamMs: UPSTREAM_MS, connectMs: 1000, clientRequestMs: CLIENT_REQUEST_MS, shutdownGraceMs: 500 },
  circuitBreaker: { hostFailures: 3, endpointFailures: 3, resetMs: RESET_MS },
});
const plane = await startDataPlane({ config });
const { table, problems } = RoutingTable.compile([
  entry('GET', '/refused', refusedUrl),
  entry('POST', '/refused', refusedUrl),
  entry('GET', '/hang', hanging.url),
  entry('GET', '/flaky', flaky.url),
  entry('GET', '/refused-breaker', refusedForBreaker),
  entry('GET', '/abort', abortable.url),
  entry('GET', '/dying/{how}', dying.url),
  entry('POST', '/slow-body', slowBody.url),
  entry('GET', '/cut', cutting.url),
]);
if (problems.length > 0) throw new Error(problems.map((p) => p.message).join('\n'));
plane.setTable(table);
const agent = new Agent({ keepAliveTimeout: 1000 });

t.teardown(async () => {
  await agent.close();
  await plane.close();
  await Promise.all(upstreams.map((u) => u.close()));
});

async function get(path: string) {
  const started = Date.now();
  const res = await request(`http://127.0.0.1:${plane.port}${path}`, { dispatcher: agent });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text, elapsed: Date.now() - started };
}

function problemOf(text: string): { type: string; title: string; status: number; detail: string } {
  return JSON.parse(text);
}

t.test('an upstream refusing connections: 502 problem', async (t) => {
  const res = await get('/refused');
  t.equal(res.status, 502);
  t.equal(res.headers['content-type'], 'application/problem+json');
  t.match(problemOf(res.text), { type: 'about:blank', title: 'Bad Gateway', status: 502, detail: /refused/ });
  t.equal(res.headers.via, '1.1 specgate-test');

  // With a request body still on its way, the gateway answers at once, reads and drops the rest of the
  // body, and closes the connection when it has ended (closing at once would reset the connection under
  // the client's writes, and lose the answer: lingering-close.test.ts).
  const withBody = await rawRequest(
    plane.port,
    ['POST /refused HTTP/1.1\r\nHost: gw\r\nContent-Length: 100000\r\n\r\n' + 'x'.repeat(10), 'x'.repeat(99_990)],
    { waitMs: 3000, partDelayMs: 300 },
  );
  t.equal(withBody.responses[0]?.status, 502);
  t.ok(withBody.closedByServer && !withBody.timedOut, 'connection closed once the body had ended');
});

t.test('an upstream resetting the connection before answering: 502 problem', async (t) => {
  dying.setHandler((req) => req.socket.destroy());
  const result = await rawRequest(plane.port, 'GET /dying/reset HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 });
  t.equal(result.responses[0]?.status, 502);
  t.match(problemOf(result.responses[0]!.body.toString()), { status: 502, title: 'Bad Gateway' });
});

t.test('an upstream not answering within timeouts.upstreamMs: 504 problem', async (t) => {
  const before = hanging.requests.length;
  const res = await get('/hang');
  t.equal(res.status, 504);
  t.match(problemOf(res.text), { title: 'Gateway Timeout', status: 504 });
  t.ok(res.elapsed >= UPSTREAM_MS - 20, `answered after ${res.elapsed} ms (timeout ${UPSTREAM_MS})`);
  t.ok(res.elapsed < FIRED_WITHIN_MS, `the gateway's timer fired: answered well before ${FIRED_WITHIN_MS} ms`);
  t.equal(hanging.requests.length, before + 1, 'the request did reach the upstream');
});

t.test('repeated failures open the breaker; it closes again after resetMs', async (t) => {
  flaky.setHandler((req, res, recorded) =>
    afterBody(req, recorded, () => {
      res.statusCode = 500;
      res.end('broken');
    }),
  );
  for (let i = 0; i < 3; i++) {
    const res = await get('/flaky');
    t.equal(res.status, 500, `failure ${i + 1} passes through as the upstream's 500`);
  }
  const seen = flaky.requests.length;
  for (let i = 0; i < 3; i++) {
    const res = await get('/flaky');
    t.equal(res.status, 503, 'breaker open: 503');
    t.match(problemOf(res.text), { title: 'Service Unavailable', status: 503, detail: /circuit breakers open/ });
  }
  t.equal(flaky.requests.length, seen, 'the upstream was not contacted while open');

  flaky.setHandler((req, res, recorded) => afterBody(req, recorded, () => res.end('healthy again')));
  await new Promise((r) => setTimeout(r, RESET_MS + 100));
  const trial = await get('/flaky');
  t.equal(trial.status, 200, 'after resetMs a trial request goes through');
  t.equal(trial.text, 'healthy again');
  t.equal(flaky.requests.length, seen + 1);
  const after = await get('/flaky');
  t.equal(after.status, 200, 'the successful trial closed the breaker');
});

t.test('connection failures (502) and timeouts (504) count as breaker failures', async (t) => {
  for (let i = 0; i < 3; i++) t.equal((await get('/refused-breaker')).status, 502);
  const open = await get('/refused-breaker');
  t.equal(open.status, 503, 'three refused connections opened the breaker');

  for (let i = 0; i < 2; i++) t.equal((await get('/hang')).status, 504);
  // /hang already timed out once in an earlier subtest: that was the third failure.
  const before = hanging.requests.length;
  const res = await get('/hang');
  t.equal(res.status, 503, 'three timeouts opened the breaker');
  t.match(problemOf(res.text), { detail: /circuit breakers open/ }, 'answered at once: by the open breaker, without waiting on the upstream');
  t.equal(hanging.requests.length, before, 'not sent');
});

t.test('a client that goes away aborts the upstream request', async (t) => {
  const closed = new Promise<void>((resolve) => {
    abortable.setHandler((req, res) => {
      res.on('close', () => resolve());
    });
  });
  const client = rawRequest(plane.port, 'GET /abort HTTP/1.1\r\nHost: gw\r\n\r\n', { waitMs: 200 });
  await abortable.waitForRequests(1);
  const result = await client; // gives up after 200 ms and destroys its socket
  t.ok(result.timedOut, 'the client left before any answer');
  const gone = await within(closed.then(() => true), 5000, false);
  t.ok(gone, "the upstream saw its request's connection closed");
  t.ok(abortable.requests[0]!.aborted, 'recorded as aborted at the upstream');
  await until(() => plane.inFlight() === 0);
  t.equal(plane.inFlight(), 0, 'nothing left in flight');
});

t.test('an upstream dying mid-body: the client sees the connection close, not a complete response', async (t) => {
  dying.setHandler((req, res, recorded) =>
    afterBody(req, recorded, () => {
      if (req.url === '/dying/sized') res.writeHead(200, { 'content-length': '100000' });
      else res.writeHead(200, { 'content-type': 'text/plain' }); // chunked
      res.write('x'.repeat(1000));
      setTimeout(() => req.socket.destroy(), 50);
    }),
  );
  for (const how of ['sized', 'chunked']) {
    const result = await rawRequest(plane.port, `GET /dying/${how} HTTP/1.1\r\nHost: gw\r\n\r\n`, { waitMs: 3000 });
    t.ok(result.closedByServer, `${how}: the gateway closed the connection`);
    t.notOk(result.timedOut, `${how}: promptly`);
    const response = result.responses[0];
    t.equal(response?.status, 200, `${how}: the head had been sent`);
    t.equal(response?.complete, false, `${how}: the body is incomplete on the wire`);
    t.equal(response?.body.length, 1000, `${how}: the bytes sent before the upstream died arrived`);
  }
});

t.test('answers cut mid-body count as breaker failures: a 200 head does not reset the count', async (t) => {
  cutting.setHandler((req, res, recorded) =>
    afterBody(req, recorded, () => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('abc');
      setTimeout(() => req.socket.destroy(), 20);
    }),
  );
  for (let i = 0; i < 3; i++) {
    const result = await rawRequest(plane.port, 'GET /cut HTTP/1.1\r\nHost: gw\r\n\r\n', { waitMs: 3000 });
    t.equal(result.responses[0]?.complete, false, `cut ${i + 1}: an incomplete answer`);
  }
  const seen = cutting.requests.length;
  const open = await get('/cut');
  t.equal(open.status, 503, 'three cut answers opened the breaker');
  t.equal(cutting.requests.length, seen, 'not sent');
});

t.test('waiting in the gateway\'s own queue past upstreamMs is 504 but no breaker failure', async (t) => {
  // One connection, answers that take 45% of upstreamMs: the fourth request of a burst waits past it.
  const slow = await startUpstream((req, res, recorded) => afterBody(req, recorded, () => setTimeout(() => res.end('ok'), UPSTREAM_MS * 0.45)));
  const small = await startDataPlane({
    config: testConfig({
      upstreamPool: { connections: 1, maxQueue: 100, idleTimeoutMs: 4000, maxResponseHeaderBytes: 16 * 1024 },
      timeouts: { upstreamMs: UPSTREAM_MS, connectMs: 1000, clientRequestMs: CLIENT_REQUEST_MS, shutdownGraceMs: 500 },
      circuitBreaker: { hostFailures: 2, endpointFailures: 2, resetMs: 60_000 },
    }),
  });
  small.setTable(RoutingTable.compile([entry('GET', '/slow', slow.url)]).table);
  t.teardown(async () => {
    await small.close();
    await slow.close();
  });
  const burst = await Promise.all(Array.from({ length: 6 }, () => request(`http://127.0.0.1:${small.port}/slow`).then(async (res) => {
    const text = await res.body.text();
    return { status: res.statusCode, text };
  })));
  // The request on the connection when upstreamMs (counted from the queueing) runs out is a timeout of
  // the host's (one breaker failure, under the threshold of 2); those still queued are the gateway's.
  const queued = burst.filter((r) => r.status === 504 && /no connection to the upstream became free in time/.test(r.text));
  t.ok(queued.length >= 2, `${queued.length} of 6 waited too long for the one connection`);
  const after = await request(`http://127.0.0.1:${small.port}/slow`);
  await after.body.text();
  t.equal(after.statusCode, 200, 'the host\'s breakers stayed closed: the next request is served');
});

t.test('a client sending its body too slowly is cut off after timeouts.clientRequestMs', async (t) => {
  const result = await rawRequest(plane.port, 'POST /slow-body HTTP/1.1\r\nHost: gw\r\nContent-Length: 10\r\n\r\nabc', {
    waitMs: FIRED_WITHIN_MS,
  });
  t.ok(result.closedByServer, 'closed by the gateway');
  t.equal(result.responses[0]?.status, 408);
  t.match(problemOf(result.responses[0]!.body.toString()), { status: 408, title: 'Request Timeout' });
  t.ok(result.elapsedMs >= CLIENT_REQUEST_MS - 20, `after ${result.elapsedMs} ms`);
  t.notOk(result.timedOut, `the gateway cut it off before the client gave up at ${FIRED_WITHIN_MS} ms`);
  await until(() => plane.inFlight() === 0);
  const seen = slowBody.requests[0];
  if (seen) t.notOk(seen.bodyComplete, 'the upstream never got a complete body');
  t.equal(plane.inFlight(), 0);
});

t.test('time an upload waits for the upstream to read is not the client\'s: no 408', async (t) => {
  // The upstream reads nothing for three client deadlines, then all of it; the client sends as fast as
  // the gateway lets it. Only the upstream's side is slow, and it stays within upstreamMs.
  const lazy = await startUpstream((req, res, recorded) => {
    req.pause();
    setTimeout(() => req.resume(), CLIENT_REQUEST_MS * 3);
    echoHandler(req, res, recorded);
  });
  const patient = await startDataPlane({ config: testConfig({ timeouts: { upstreamMs: 60_000, connectMs: 1000, clientRequestMs: CLIENT_REQUEST_MS, shutdownGraceMs: 500 } }) });
  patient.setTable(RoutingTable.compile([entry('POST', '/upload', lazy.url)]).table);
  t.teardown(async () => {
    await patient.close();
    await lazy.close();
  });
  // Larger than the loopback socket buffers between the three processes' sockets, so the gateway must pause the client.
  const size = 8 * 1024 * 1024;
  const result = await rawRequest(patient.port, [`POST /upload HTTP/1.1\r\nHost: gw\r\nContent-Length: ${size}\r\n\r\n`, Buffer.alloc(size, 'u')], {
    responses: 1,
    partDelayMs: 0,
    waitMs: FIRED_WITHIN_MS,
  });
  t.equal(result.responses[0]?.status, 200, 'answered by the upstream, not 408');
  t.match(result.responses[0]?.body.toString(), `"bodyBytes":${size}`, 'the upstream got the whole body');
  t.ok(result.elapsedMs >= CLIENT_REQUEST_MS * 3, `it took the upstream's pause (${result.elapsedMs} ms)`);
});

t.test('body bytes that arrived while the event loop was blocked past the deadline are read before the deadline is judged', async (t) => {
  // An upstream timeout far beyond the stall: the upstream lives in this thread and is blocked too.
  const patient = await startDataPlane({ config: testConfig({ timeouts: { upstreamMs: 60_000, connectMs: 1000, clientRequestMs: CLIENT_REQUEST_MS, shutdownGraceMs: 500 } }) });
  patient.setTable(RoutingTable.compile([entry('POST', '/slow-body', slowBody.url)]).table);
  t.teardown(() => patient.close());
  // The client lives in a worker thread, so it sends the rest of its body while this thread is blocked.
  const client = new Worker(
    `const net = require('node:net');
     const { parentPort, workerData } = require('node:worker_threads');
     const socket = net.connect(workerData.port, '127.0.0.1');
     let answer = '';
     socket.on('data', (chunk) => (answer += chunk));
     socket.on('error', (err) => parentPort.postMessage({ error: String(err) }));
     socket.on('connect', () => socket.write('POST /slow-body HTTP/1.1\\r\\nHost: gw\\r\\nContent-Length: 10\\r\\n\\r\\nabc'));
     parentPort.on('message', () => {
       setTimeout(() => socket.write('defghij'), 50);
       const done = () => parentPort.postMessage({ answer });
       const whole = () => {
         const end = answer.indexOf('\\r\\n\\r\\n');
         const length = /content-length: *(\\d+)/i.exec(answer);
         return end >= 0 && length !== null && answer.length - end - 4 >= Number(length[1]);
       };
       socket.on('data', () => { if (whole()) done(); });
       socket.on('close', done);
       setTimeout(done, 10000);
     });`,
    { eval: true, workerData: { port: patient.port } },
  );
  t.teardown(() => client.terminate());
  await until(() => patient.inFlight() === 1);
  t.equal(patient.inFlight(), 1, 'the request is in, its body not yet');
  const reply = new Promise<{ answer?: string; error?: string }>((resolve) => client.once('message', resolve));
  client.postMessage('send the rest');
  // Blocked past clientRequestMs (a long GC, a synchronous task) while the last bytes arrive; in the
  // check phase, as a stall in an I/O callback would be, so the loop's next turn runs timers first.
  await new Promise((resolve) => setImmediate(resolve));
  const blockedUntil = performance.now() + CLIENT_REQUEST_MS + 400;
  while (performance.now() < blockedUntil);
  const { answer, error } = await reply;
  t.equal(error, undefined);
  t.match(answer, /^HTTP\/1\.1 200 /, 'not a 408: the body was whole once its bytes were read');
  t.match(answer, /"bodyBytes":10/, 'the upstream got the whole body');
});

t.test('a client that goes away mid-download stops the upstream stream', async (t) => {
  let upstreamClosed!: () => void;
  const closed = new Promise<void>((resolve) => (upstreamClosed = resolve));
  const endless = await startUpstream((req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    const block = Buffer.alloc(64 * 1024, 'e');
    const pump = (): void => {
      while (!res.destroyed && res.write(block));
      if (!res.destroyed) res.once('drain', pump);
    };
    res.on('close', () => upstreamClosed());
    pump();
  });
  const streamingPlane = await startDataPlane({ config: testConfig({}) });
  t.teardown(async () => {
    await streamingPlane.close();
    await endless.close();
  });
  streamingPlane.setTable(RoutingTable.compile([entry('GET', '/endless', endless.url)]).table);
  const res = await request(`http://127.0.0.1:${streamingPlane.port}/endless`);
  let received = 0;
  for await (const chunk of res.body) {
    received += (chunk as Buffer).length;
    if (received > 4 * 1024 * 1024) break; // leaving the loop destroys the body and its connection
  }
  const stopped = await within(closed.then(() => true), 5000, false);
  t.ok(stopped, `the upstream's response was closed after the client left (${received} bytes read)`);
  await until(() => streamingPlane.inFlight() === 0);
  t.equal(streamingPlane.inFlight(), 0);
});

t.test('clientRequestMs bounds receiving the request, not waiting for the upstream', async (t) => {
  const patient = await startUpstream((req, res, recorded) =>
    afterBody(req, recorded, () => setTimeout(() => res.end(`got ${recorded.bodyBytes}`), 600)),
  );
  const slowUpstreamPlane = await startDataPlane({
    config: testConfig({ timeouts: { upstreamMs: 5000, connectMs: 1000, clientRequestMs: 200, shutdownGraceMs: 500 } }),
  });
  t.teardown(async () => {
    await slowUpstreamPlane.close();
    await patient.close();
  });
  slowUpstreamPlane.setTable(RoutingTable.compile([entry('POST', '/patient', patient.url)]).table);
  const result = await rawRequest(slowUpstreamPlane.port, 'POST /patient HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\n\r\nhello', {
    responses: 1,
    waitMs: 3000,
  });
  t.equal(result.responses[0]?.status, 200, 'answered by the upstream after 600 ms although clientRequestMs is 200');
  t.equal(result.responses[0]?.body.toString(), 'got 5');
});

t.test('the data plane still serves after all that', async (t) => {
  flaky.setHandler((req, res, recorded) => afterBody(req, recorded, () => res.end('fine')));
  const res = await get('/flaky');
  t.equal(res.status, 200);
  t.equal(res.text, 'fine');
});

