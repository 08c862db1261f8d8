// WebSocket proxying through the running cluster, with real `ws` clients and upstreams on loopback:
// messages both ways, subprotocols, refused upgrades as HTTP answers, upstream down, close codes both
// ways, maxPayloadBytes, the access log line and exact metrics.
import t from 'tap';
import { WebSocket } from 'ws';
import { createHash } from 'node:crypto';
import { startGateway, httpRequest, eventually, testConfig } from '../helpers/gateway-process.js';
import { closed, nextMessage, openClient, startWsUpstream, wsUpstreamConfig } from '../helpers/ws-upstream.js';
import { parsePrometheus } from '../helpers/prometheus.js';
import { rawRequest } from '../helpers/raw-http.js';

const refusal = (err: unknown) => err as { status: number; headers: Record<string, string>; body: string };

t.test('messages both ways, subprotocol, handshake headers, access log and metrics', async (t) => {
  const upstream = await startWsUpstream(t, { handleProtocols: (offered) => (offered.has('chat.v2') ? 'chat.v2' : false) });
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(upstream.location, ['/echo/{room}'])], { name: 'gw' }),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const client = await openClient(`ws://127.0.0.1:${gateway.port}/echo/lobby?x=1&y=%20`, ['chat.v1', 'chat.v2'], { 'x-custom': 'kept', cookie: 'a=b' });
  t.equal(client.protocol, 'chat.v2', "the client gets the subprotocol the upstream chose");
  const handshake = upstream.handshakes[0]!;
  t.equal(handshake.url, '/echo/lobby?x=1&y=%20', 'same path and query upstream');
  t.same(handshake.headers['sec-websocket-protocol']?.split(',').map((p) => p.trim()), ['chat.v1', 'chat.v2'], 'the subprotocols as the client offered them, in order');
  t.equal(handshake.headers['x-custom'], 'kept', 'end-to-end headers are forwarded');
  t.equal(handshake.headers.cookie, 'a=b');
  t.equal(handshake.headers['x-forwarded-for'], '127.0.0.1');
  t.match(handshake.headers.via, /1\.1 gw/);

  client.send('hello');
  t.same(await nextMessage(client), { data: Buffer.from('hello'), isBinary: false }, 'text comes back as text');
  client.send(Buffer.from([0, 1, 2, 255]));
  t.same(await nextMessage(client), { data: Buffer.from([0, 1, 2, 255]), isBinary: true }, 'binary comes back as binary');
  client.send('a'.repeat(70_000), { fin: false });
  client.send('b'.repeat(10), { fin: true });
  t.equal((await nextMessage(client)).data.toString(), 'a'.repeat(70_000) + 'b'.repeat(10), 'a fragmented message arrives whole');

  // Pings are answered by the gateway's own stack on the client side.
  const pong = new Promise<Buffer>((resolve) => client.once('pong', resolve));
  client.ping('p1');
  t.equal((await pong).toString(), 'p1');

  const done = closed(client);
  client.close(4321, 'bye now');
  t.same(await done, { code: 4321, reason: 'bye now' }, 'the close handshake completes');
  await eventually(async () => (upstream.closes.length > 0 ? true : undefined), 5000, 50, 'upstream close');
  t.same(upstream.closes[0], { code: 4321, reason: 'bye now' }, 'the upstream gets the client close code and reason');

  const line = await gateway.waitForLog((l) => l.log === 'access' && l.msg === 'websocket', 5000, 'websocket access line');
  t.match(line, { method: 'GET', path: '/echo/lobby', endpoint: '/echo/{room}', upstream: upstream.location, status: 101, closeCode: 4321, closedBy: 'client', messagesIn: 3, messagesOut: 3 });
  t.equal(line.bytesIn, 5 + 4 + 70_010, 'bytes client to upstream');
  t.equal(line.bytesOut, 5 + 4 + 70_010, 'bytes upstream to client');
  t.ok((line.durationMs as number) > 0);

  const metrics = await eventually(
    async () => {
      const json = JSON.parse((await httpRequest(gateway.port, '/metrics')).body) as { websocket?: Record<string, any> };
      return json.websocket?.closed === 1 && json.websocket?.messages?.clientToUpstream === 3 ? json.websocket : undefined;
    },
    5000,
    100,
    'websocket metrics',
  );
  t.match(metrics, {
    connections: 0,
    opened: 1,
    closed: 1,
    upgrades: { accepted: 1 },
    messages: { clientToUpstream: 3, upstreamToClient: 3 },
    bytes: { clientToUpstream: 70_019, upstreamToClient: 70_019 },
    durationSeconds: { count: 1 },
  });
  const text = (await httpRequest(gateway.port, '/metrics', { headers: { accept: 'text/plain' } })).body;
  const families = parsePrometheus(text);
  t.equal(families.get('gateway_websocket_connections')?.samples[0]?.value, 0);
  t.same(
    families.get('gateway_websocket_messages_total')?.samples.map((s) => [s.labels.direction, s.value]),
    [
      ['client_to_upstream', 3],
      ['upstream_to_client', 3],
    ],
  );
  t.same(families.get('gateway_websocket_upgrades_total')?.samples.map((s) => [s.labels.outcome, s.value]), [['accepted', 1]]);
  const count = families.get('gateway_websocket_duration_seconds')?.samples.find((s) => s.name === 'gateway_websocket_duration_seconds_count');
  t.equal(count?.value, 1);
});

t.test('refused upgrades arrive as HTTP answers: 401 from apiKeyAuth, 404 no route, 403 from the upstream, 502 upstream down', async (t) => {
  const upstream = await startWsUpstream(t, {
    refuse: (req) => (req.url?.startsWith('/private') ? [403, { 'content-type': 'text/plain', 'x-why': 'members only' }, 'forbidden here'] : null),
  });
  const down = await startWsUpstream(t);
  const downLocation = down.location;
  await down.close();
  const key = 'k-123';
  const gateway = await startGateway(t, {
    config: testConfig(
      [
        wsUpstreamConfig(upstream.location, ['/open', '/private', '/locked']),
        wsUpstreamConfig(downLocation, ['/down']),
      ],
      {
        middleware: [{ id: 'auth', type: 'apiKeyAuth', header: 'x-api-key', keys: [{ consumer: 'alice', sha256: createHash('sha256').update(key).digest('hex') }] }],
      },
    ),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const base = `ws://127.0.0.1:${gateway.port}`;

  const noKey = refusal(await openClient(`${base}/open`).then(() => t.fail('upgraded'), (err) => err));
  t.equal(noKey.status, 401, 'no key: 401');
  t.match(noKey.headers['www-authenticate'], /ApiKey/);
  t.match(noKey.headers['content-type'], /problem\+json/);

  const noRoute = refusal(await openClient(`${base}/nowhere`, [], { 'x-api-key': key }).then(() => t.fail('upgraded'), (err) => err));
  t.equal(noRoute.status, 404, 'no route: 404');
  t.match(noRoute.headers['content-type'], /problem\+json/);

  // A target the accept phase refuses is refused for an upgrade too, as for any GET.
  const encodedSlash = refusal(await openClient(`${base}/open%2Fx`, [], { 'x-api-key': key }).then(() => t.fail('upgraded'), (err) => err));
  t.equal(encodedSlash.status, 400, 'an encoded slash (encodedSlashes "reject"): 400');
  t.equal(upstream.handshakes.length, 0, 'and nothing reached the upstream');

  const forbidden = refusal(await openClient(`${base}/private`, [], { 'x-api-key': key }).then(() => t.fail('upgraded'), (err) => err));
  t.equal(forbidden.status, 403, "the upstream's 403 is passed on");
  t.equal(forbidden.body, 'forbidden here');
  t.equal(forbidden.headers['x-why'], 'members only');

  const unreachable = refusal(await openClient(`${base}/down`, [], { 'x-api-key': key }).then(() => t.fail('upgraded'), (err) => err));
  t.equal(unreachable.status, 502, 'upstream down: 502');
  t.match(unreachable.headers['content-type'], /problem\+json/);

  const client = await openClient(`${base}/open`, [], { 'x-api-key': key });
  t.equal(upstream.handshakes.at(-1)?.headers['x-consumer'], 'alice', 'the admitted consumer is named upstream');
  client.close(1000);
  await closed(client);

  const metrics = await eventually(
    async () => {
      const json = JSON.parse((await httpRequest(gateway.port, '/metrics')).body) as { websocket?: Record<string, any> };
      return json.websocket?.closed === 1 ? json.websocket : undefined;
    },
    5000,
    100,
    'websocket metrics',
  );
  // The 404 never reached the WebSocket route's middleware: the data plane answered it as a GET.
  t.match(metrics.upgrades, { accepted: 1, rejected: 1, refused: 1, failed: 1 });
});

t.test('close codes from the upstream reach the client; a lost upstream is 1011', async (t) => {
  const upstream = await startWsUpstream(t, {
    onConnection: (socket) => {
      socket.on('message', (data) => {
        const text = data.toString();
        if (text === 'lose') return socket.terminate();
        if (text === 'none') return socket.close();
        const [code, reason] = text.split(' ');
        socket.close(Number(code), reason);
      });
    },
  });
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(upstream.location, ['/c'])]),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  for (const [code, reason] of [
    [1000, 'normal'],
    [1001, 'away'],
    [4000, 'app-low'],
    [4999, 'app-high'],
  ] as const) {
    const client = await openClient(`ws://127.0.0.1:${gateway.port}/c`);
    const done = closed(client);
    client.send(`${code} ${reason}`);
    t.same(await done, { code, reason }, `upstream close ${code} reaches the client`);
  }
  // A close frame without a code goes on without one (ws reports that as 1005; 1005 itself may not be sent).
  const quiet = await openClient(`ws://127.0.0.1:${gateway.port}/c`);
  const quietDone = closed(quiet);
  quiet.send('none');
  t.same(await quietDone, { code: 1005, reason: '' }, 'an upstream close without a code reaches the client without one');
  const closesBefore = upstream.closes.length;
  const quietClient = await openClient(`ws://127.0.0.1:${gateway.port}/c`);
  quietClient.close();
  await eventually(async () => (upstream.closes.length > closesBefore ? true : undefined), 5000, 50, 'upstream close');
  t.same(upstream.closes.at(-1), { code: 1005, reason: '' }, 'a client close without a code reaches the upstream without one');

  const client = await openClient(`ws://127.0.0.1:${gateway.port}/c`);
  const done = closed(client);
  client.send('lose');
  t.equal((await done).code, 1011, 'an upstream lost without a close frame closes the client with 1011');

  // The client lost without a close frame: the upstream gets 1001.
  const before = upstream.closes.length;
  const lost = await openClient(`ws://127.0.0.1:${gateway.port}/c`);
  lost.terminate();
  await eventually(async () => (upstream.closes.length > before ? true : undefined), 5000, 50, 'upstream close');
  t.equal(upstream.closes.at(-1)?.code, 1001, 'a client lost abruptly closes the upstream with 1001');
});

t.test('a handshake the gateway cannot complete as asked: another version is 426, a malformed key 400; the upstream sees neither', async (t) => {
  const upstream = await startWsUpstream(t);
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(upstream.location, ['/h'])]),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const handshake = (headers: string) =>
    rawRequest(gateway.port, `GET /h HTTP/1.1\r\nHost: gw\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n${headers}\r\n`, { responses: 1 });
  const goodKey = 'dGhlIHNhbXBsZSBub25jZQ==';
  const v8 = await handshake(`Sec-WebSocket-Key: ${goodKey}\r\nSec-WebSocket-Version: 8\r\n`);
  t.equal(v8.responses[0]?.status, 426, 'version 8: 426 Upgrade Required');
  t.same(v8.responses[0]?.headers['sec-websocket-version'], ['13'], 'naming the version spoken (RFC 6455 4.2.2)');
  const none = await handshake(`Sec-WebSocket-Key: ${goodKey}\r\n`);
  t.equal(none.responses[0]?.status, 400, 'no version: 400');
  // 24 characters but not base64 of 16 bytes: uWS hands these to the upgrade handler, which refuses them.
  for (const key of ['dGhlIHNhbXBsZSBub25jZQ=!', '!GhlIHNhbXBsZSBub25jZQ==', 'dGhlIHNhbXBsZSBub25jZQ=A']) {
    const bad = await handshake(`Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n`);
    t.equal(bad.responses[0]?.status, 400, `key ${JSON.stringify(key)}: 400`);
  }
  // Any other length, or none: uWS does not take it for a handshake and the request goes on as plain
  // HTTP (here the upstream's own answer to a GET without an upgrade).
  for (const key of ['', 'short', 'dGhlIHNhbXBsZSBub25jZSBsb25nZXI=']) {
    const plain = await handshake(`${key === '' ? '' : `Sec-WebSocket-Key: ${key}\r\n`}Sec-WebSocket-Version: 13\r\n`);
    t.not(plain.responses[0]?.status, 101, `key ${JSON.stringify(key)}: not upgraded`);
  }
  t.equal(upstream.handshakes.length, 0, 'nothing reached the upstream');
  const ok = await openClient(`ws://127.0.0.1:${gateway.port}/h`);
  ok.send('still');
  t.equal((await nextMessage(ok)).data.toString(), 'still', 'a valid handshake still goes through');
  ok.close();
});

t.test('maxPayloadBytes closes both sides with 1009', async (t) => {
  const upstream = await startWsUpstream(t, {
    onConnection: (socket) => socket.on('message', (data) => (data.toString() === 'big' ? socket.send(Buffer.alloc(2000)) : undefined)),
  });
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(upstream.location, ['/p'])], { websocket: { maxPayloadBytes: 1000 } }),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const client = await openClient(`ws://127.0.0.1:${gateway.port}/p`);
  const done = closed(client);
  client.send(Buffer.alloc(1001));
  t.equal((await done).code, 1009, 'client to upstream: the client gets 1009');
  await eventually(async () => (upstream.closes.length > 0 ? true : undefined), 5000, 50, 'upstream close');
  t.equal(upstream.closes[0]?.code, 1009, 'and so does the upstream');

  const second = await openClient(`ws://127.0.0.1:${gateway.port}/p`);
  const secondDone = closed(second);
  second.send('big');
  t.equal((await secondDone).code, 1009, 'upstream to client: the client gets 1009');
  await eventually(async () => (upstream.closes.length > 1 ? true : undefined), 5000, 50, 'upstream close');
  t.equal(upstream.closes[1]?.code, 1009, 'and so does the upstream');

  const fits = await openClient(`ws://127.0.0.1:${gateway.port}/p`);
  fits.send(Buffer.alloc(1000));
  fits.send('big-enough?');
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.equal(fits.readyState, WebSocket.OPEN, 'a message of exactly maxPayloadBytes passes');
  fits.close();

  // The limit is the gateway's: it closed them, and what it did not relay is not counted as relayed.
  const lines = await eventually(async () => {
    const found = gateway.accessLines().filter((line) => line.msg === 'websocket');
    return found.length >= 2 ? found : undefined;
  }, 5000, 50, 'two connection lines');
  t.match(lines[0], { closeCode: 1009, closedBy: 'gateway', messagesIn: 0, bytesIn: 0 }, 'client to upstream: closed by the gateway, the message not counted');
  t.match(lines[1], { closeCode: 1009, closedBy: 'gateway', messagesIn: 1, bytesIn: 3 }, 'upstream to client: closed by the gateway');
});

t.test('idle connections are closed with 1001', async (t) => {
  const upstream = await startWsUpstream(t);
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(upstream.location, ['/i'])], { websocket: { idleTimeoutMs: 1000 } }),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const client = await openClient(`ws://127.0.0.1:${gateway.port}/i`);
  const started = Date.now();
  const done = closed(client);
  t.equal((await done).code, 1001);
  t.ok(Date.now() - started >= 900, 'not before the idle timeout');
  await eventually(async () => (upstream.closes.length > 0 ? true : undefined), 5000, 50, 'upstream close');
  t.equal(upstream.closes[0]?.code, 1001);
});

t.test('pings are activity: a heartbeat of pings from either side, or of pongs from the upstream, keeps a connection open', async (t) => {
  const upstream = await startWsUpstream(t, {
    onConnection: (socket, req) => {
      const beat = req.url === '/hb/upstream-pings' ? () => socket.ping() : req.url === '/hb/upstream-pongs' ? () => socket.pong() : null;
      if (beat === null) return;
      const timer = setInterval(beat, 200);
      socket.on('close', () => clearInterval(timer));
    },
  });
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(upstream.location, ['/hb/{who}'])], { websocket: { idleTimeoutMs: 1000 } }),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const who = ['client-pings', 'upstream-pings', 'upstream-pongs'];
  const clients = await Promise.all(who.map((name) => openClient(`ws://127.0.0.1:${gateway.port}/hb/${name}`)));
  let lastPing = 0;
  const timer = setInterval(() => {
    clients[0]!.ping();
    lastPing = Date.now();
  }, 200);
  t.teardown(() => clearInterval(timer));
  const codes = clients.map((client) => closed(client).then((c) => c.code));
  await new Promise((resolve) => setTimeout(resolve, 3000));
  for (const [i, client] of clients.entries()) t.equal(client.readyState, WebSocket.OPEN, `${who[i]}: still open after 3 idleTimeoutMs without a message`);
  clearInterval(timer);
  t.equal(await codes[0], 1001, 'once the client stops pinging, its connection is idle: 1001');
  t.ok(Date.now() - lastPing >= 900, `not before the idle timeout after the last ping (${Date.now() - lastPing} ms)`);
  for (const client of clients) client.close();
});
