// docs/reference/forward.md#retries: a request that could not reach one host goes to another host of its endpoint, once:
// for any method when nothing was sent (connect failed; a streamed body too, none of it having left),
// only for idempotent methods without a streamed body when bytes may have reached the upstream, never
// after a timeout.
import net from 'node:net';
import t from 'tap';
import { Agent, request } from 'undici';
import { Counters } from '../../src/metrics/counters.js';
import { startDataPlane, type DataPlane } from '../../src/proxy/data-plane.js';
import { RoutingTable } from '../../src/routing/table.js';
import type { Teardown } from '../helpers/gateway-process.js';
import { eventually, httpRequest, startGateway, startUpstream as startNamedUpstream, testConfig as gatewayConfig } from '../helpers/gateway-process.js';
import { rawRequest } from '../helpers/raw-http.js';
import { entry, startUpstream, testConfig } from '../helpers/upstream-server.js';

/** A port nothing listens on (connections are refused). */
async function deadPort(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

/** Accepts, reads the request, and closes without a byte of answer. */
async function hangUpUpstream(t: Teardown): Promise<{ url: string; seen: () => number }> {
  let seen = 0;
  const server = net.createServer((socket) => {
    socket.on('error', () => {});
    socket.once('data', () => {
      seen++;
      socket.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, seen: () => seen };
}

async function planeWith(t: Teardown, hosts: string[], counters: Counters, upstreamMs = 30_000): Promise<DataPlane> {
  const plane = await startDataPlane({
    config: testConfig({
      upstreams: hosts.map((serviceLocation) => ({ serviceType: 'static' as const, serviceLocation, weight: 1, specPath: '/spec' })),
      timeouts: { upstreamMs },
      // No breaker trips during these tests: every retry is the retry rule's doing.
      circuitBreaker: { hostFailures: 10_000, endpointFailures: 10_000 },
    }),
    counters,
  });
  plane.setTable(RoutingTable.compile(hosts.flatMap((host) => [entry('GET', '/items/{id}', host), entry('POST', '/items', host), entry('PUT', '/items/{id}', host)])).table);
  t.teardown(() => plane.close());
  return plane;
}

const live = await startUpstream();
t.teardown(() => live.close());
const agent = new Agent({ connections: 4 });
t.teardown(() => agent.close());

async function send(plane: DataPlane, method: string, path: string, body?: string) {
  const res = await request(`http://127.0.0.1:${plane.port}${path}`, { method: method as 'GET', body, dispatcher: agent });
  return { status: res.statusCode, text: await res.body.text() };
}

t.test('one dead host of two: 40 of 40 GETs succeed', async (t) => {
  const counters = new Counters();
  const plane = await planeWith(t, [await deadPort(), live.url], counters);
  const before = live.requests.length;
  const statuses: number[] = [];
  for (let i = 0; i < 40; i++) statuses.push((await send(plane, 'GET', `/items/${i}`)).status);
  t.same([...new Set(statuses)], [200], '40/40 answered 200');
  t.equal(live.requests.length - before, 40, 'all served by the live host');
  const counted = counters.take() ?? {};
  t.equal(counted['retries.afterConnectFailure'], 20, 'every other first attempt went to the dead host and was retried (smooth round-robin, weights 1:1)');
});

t.test('a refused connection is retried for any method, the body going to the other host whole', async (t) => {
  const counters = new Counters();
  const plane = await planeWith(t, [await deadPort(), live.url], counters);
  for (let i = 0; i < 6; i++) {
    const res = await send(plane, 'POST', '/items', `{"n":${i}}`);
    t.equal(res.status, 200, `POST ${i}`);
    t.equal(live.requests[live.requests.length - 1]!.body.toString(), `{"n":${i}}`);
  }
});

t.test('a refused connection is retried with a streamed body too: none of it had left', async (t) => {
  const counters = new Counters();
  const plane = await planeWith(t, [await deadPort(), live.url], counters);
  // The body comes 30 ms after the head, so the gateway streams it (it did not arrive whole with the head).
  const bodies: Array<{ method: string; head: (body: string) => string; wire: (body: string) => string[] }> = [
    { method: 'POST', head: (b) => `POST /items HTTP/1.1\r\nHost: a\r\nContent-Length: ${b.length}\r\n\r\n`, wire: (b) => [b.slice(0, 3), b.slice(3)] },
    { method: 'PUT', head: () => 'PUT /items/7 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n', wire: (b) => [`${b.length.toString(16)}\r\n${b}\r\n`, '0\r\n\r\n'] },
  ];
  for (const { method, head, wire } of bodies) {
    for (let i = 0; i < 6; i++) {
      const body = `{"${method}":${i},"pad":"${'x'.repeat(i * 5000)}"}`;
      const result = await rawRequest(plane.port, [head(body), ...wire(body)], { responses: 1, partDelayMs: 30 });
      t.equal(result.responses[0]?.status, 200, `${method} ${i}: answered by the live host`);
      const seen = live.requests[live.requests.length - 1]!;
      t.equal(seen.method, method);
      t.equal(seen.body.toString(), body, `${method} ${i}: the live host got the whole body`);
    }
  }
  t.equal((counters.take() ?? {})['retries.afterConnectFailure'], 6, 'every other request met the dead host first and was retried');
});

t.test('a streamed body that began to leave is not sent again, even for PUT', async (t) => {
  const counters = new Counters();
  const hangUp = await hangUpUpstream(t);
  const plane = await planeWith(t, [hangUp.url, live.url], counters);
  const before = live.requests.length;
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) {
    const result = await rawRequest(plane.port, ['PUT /items/1 HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\n', 'once'], { responses: 1, partDelayMs: 30 });
    statuses.push(result.responses[0]?.status ?? 0);
  }
  t.same([...statuses].sort(), [200, 200, 502, 502], 'the hanging-up host\'s turns are 502, the live host\'s 200');
  t.equal(live.requests.length - before, 2, 'nothing was sent twice');
  t.ok(hangUp.seen() > 0);
});

t.test('no answer after the request was sent: idempotent methods retried, POST is not', async (t) => {
  const counters = new Counters();
  const hangUp = await hangUpUpstream(t);
  const plane = await planeWith(t, [hangUp.url, live.url], counters);
  const gets = await Promise.all(Array.from({ length: 8 }, (_, i) => send(plane, 'GET', `/items/${i}`)));
  t.same([...new Set(gets.map((r) => r.status))], [200], 'GETs: every one answered by the live host');
  const puts = await Promise.all(Array.from({ length: 4 }, (_, i) => send(plane, 'PUT', `/items/${i}`, 'x')));
  t.same([...new Set(puts.map((r) => r.status))], [200], 'PUT (idempotent) too');
  t.ok(hangUp.seen() > 0, 'the hanging-up host was tried');
  const livePostsBefore = live.requests.filter((r) => r.method === 'POST').length;
  const posts = await Promise.all(Array.from({ length: 8 }, () => send(plane, 'POST', '/items', 'once')));
  const failed = posts.filter((r) => r.status === 502).length;
  t.ok(failed > 0, `POSTs that reached the hanging-up host failed with 502 (${failed} of 8)`);
  t.equal(live.requests.filter((r) => r.method === 'POST').length - livePostsBefore, 8 - failed, 'and were not sent again');
  t.ok((counters.take() ?? {})['retries.afterNoAnswer']! > 0, 'counted as afterNoAnswer');
});

t.test('only one host: no retry; a timeout is never retried', async (t) => {
  const counters = new Counters();
  const alone = await planeWith(t, [await deadPort()], counters);
  t.equal((await send(alone, 'GET', '/items/1')).status, 502);
  const hanging = await startUpstream();
  t.teardown(() => hanging.close());
  hanging.setHandler(() => {});
  const plane = await planeWith(t, [hanging.url, live.url], counters, 300);
  const before = live.requests.length;
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) statuses.push((await send(plane, 'GET', `/items/${i}`)).status);
  t.same([...statuses].sort(), [200, 200, 504, 504], 'the hanging host\'s turns are 504, the live host\'s 200');
  t.equal(live.requests.length - before, 2, 'the timed-out requests were not sent to the live host');
  t.notOk('retries.afterNoAnswer' in (counters.take() ?? {}), 'no retry after a timeout');
});

t.test('/metrics counts retries (JSON and Prometheus), through the running gateway', async (t) => {
  const app = await startNamedUpstream(t, { name: 'app' });
  const dead = await deadPort();
  const endpoints = [{ method: 'GET', path: '/items/{id}' }];
  const gateway = await startGateway(t, {
    config: gatewayConfig([
      { serviceType: 'static', serviceLocation: dead, endpoints },
      { serviceType: 'static', serviceLocation: app.location, endpoints },
    ]),
    waitFor: (line) => line.msg === 'gateway operational',
  });
  for (let i = 0; i < 20; i++) t.equal((await httpRequest(gateway.port, `/items/${i}`)).status, 200);
  const metrics = await eventually(
    async () => {
      const body = JSON.parse((await httpRequest(gateway.port, '/metrics')).body) as { retries?: { afterConnectFailure?: number } };
      return (body.retries?.afterConnectFailure ?? 0) > 0 ? body : undefined;
    },
    5000,
  );
  t.ok(metrics.retries!.afterConnectFailure! >= 1, `retries.afterConnectFailure = ${metrics.retries!.afterConnectFailure}`);
  // Each worker serves the primary's latest report, pushed every 250 ms: the other worker may not have this one yet.
  const text = await eventually(
    async () => {
      const body = (await httpRequest(gateway.port, '/metrics', { headers: { accept: 'text/plain' } })).body;
      return /gateway_upstream_retries_total\{reason="after_connect_failure"\} \d+/.test(body) ? body : undefined;
    },
    5000,
  );
  t.match(text, /gateway_upstream_retries_total\{reason="after_connect_failure"\} \d+/);
});

t.test('a kept-alive upstream connection closed before any answer: the GET goes once more to the same host, counted as retries.staleConnection', async (t) => {
  // The first request on a socket is answered; the next one on it is read and the socket closed.
  let received = 0;
  const server = net.createServer((socket) => {
    let index = 0;
    socket.on('error', () => {});
    socket.on('data', () => {
      received++;
      if (index++ === 0) socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
      else socket.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const host = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  const counters = new Counters();
  const plane = await planeWith(t, [host], counters);
  t.equal((await send(plane, 'GET', '/items/1')).status, 200);
  t.equal((await send(plane, 'GET', '/items/2')).status, 200, 'answered on a fresh connection');
  t.equal(received, 3, 'the host got the second request twice');
  const counted = counters.take() ?? {};
  t.equal(counted['retries.staleConnection'], 1, 'the second sending is counted');
});
