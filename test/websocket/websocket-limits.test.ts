// WebSocket proxying at its limits, through the running cluster: rateLimit answers 429 at upgrade time,
// an upstream that never answers the handshake gives 504, a client that writes faster than its
// upstream reads is closed with 1013 once the bound is passed, and the chat example works as
// docs/websocket.md says (discovered from its Swagger doc, subprotocol chat.v1, X-Consumer as name).
import { createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import t from 'tap';
import { startChatUpstream } from '../../examples/websocket-chat.js';
import { eventually, startGateway, testConfig } from '../helpers/gateway-process.js';
import { closed, nextMessage, openClient, startWsUpstream, wsUpstreamConfig } from '../helpers/ws-upstream.js';
import { tcpBufferMax } from '../helpers/kernel-settings.js';

const refusal = (err: unknown) => err as { status: number; headers: Record<string, string>; body: string };

t.test('rateLimit decides at upgrade time (429 with Retry-After); a silent upstream is 504', async (t) => {
  const upstream = await startWsUpstream(t);
  const sockets = new Set<Socket>();
  const silent = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    silent.close();
  });
  const silentLocation = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(upstream.location, ['/limited']), wsUpstreamConfig(silentLocation, ['/silent'])], {
      timeouts: { upstreamMs: 1000, connectMs: 1000, clientRequestMs: 10_000, shutdownGraceMs: 1000 },
      // A generous slaMs: past the default (100 ms), which a stalled primary or worker can reach on a
      // busy host, onStoreError "allow" would upgrade the second connection.
      middleware: [{ id: 'limit', type: 'rateLimit', limit: 1, windowMs: 60_000, key: 'ip', scope: 'global', slaMs: 5000 }],
    }),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const first = await openClient(`ws://127.0.0.1:${gateway.port}/limited`);
  const second = refusal(await openClient(`ws://127.0.0.1:${gateway.port}/limited`).then(() => t.fail('upgraded'), (err) => err));
  t.equal(second.status, 429, 'over the limit: 429');
  t.ok(Number(second.headers['retry-after']) > 0, 'with Retry-After');
  t.match(second.headers['ratelimit-policy'], /"limit";q=1;w=60/);
  first.close();

  const gatewayWithoutLimit = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(silentLocation, ['/silent'])], {
      timeouts: { upstreamMs: 1000, connectMs: 1000, clientRequestMs: 10_000, shutdownGraceMs: 1000 },
    }),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const started = Date.now();
  const timedOut = refusal(await openClient(`ws://127.0.0.1:${gatewayWithoutLimit.port}/silent`).then(() => t.fail('upgraded'), (err) => err));
  t.equal(timedOut.status, 504, 'no answer to the handshake within timeouts.upstreamMs: 504');
  t.match(timedOut.headers['content-type'], /problem\+json/);
  t.ok(Date.now() - started >= 900, 'not before the timeout');
});

t.test('a client that writes faster than its upstream reads is closed with 1013 past the bound', async (t) => {
  const upstream = await startWsUpstream(t, {
    // Reads the handshake, then nothing more. ws's own pause(): a pause of its raw socket is undone
    // by ws whenever its frame parser drains.
    onConnection: (socket) => socket.pause(),
  });
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(upstream.location, ['/sink'])], { websocket: { maxPayloadBytes: 1024 * 1024 } }),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const client = await openClient(`ws://127.0.0.1:${gateway.port}/sink`);
  const done = closed(client);
  // Random bytes: the client leg may negotiate permessage-deflate, and 64 KiB of one byte value
  // compresses to a few hundred bytes, so the bytes sent would say nothing about what the gateway holds.
  const chunk = randomBytes(64 * 1024);
  let sent = 0;
  // The next send waits for the event loop (setImmediate), as a client that also reads does: chained
  // straight from the send callback (a nextTick whenever the kernel takes the write at once), a
  // client never reads the 1013 while the gateway discards what follows it, and goes on writing into
  // that discard (40-290 MiB in earlier runs, of which the gateway relayed 9).
  const pump = (): void => {
    if (client.readyState !== client.OPEN || sent >= 512 * 1024 * 1024) return;
    sent += chunk.length;
    client.send(chunk, () => setImmediate(pump));
  };
  pump();
  const end = await done;
  t.equal(end.code, 1013, `closed with 1013 after ${mib(sent)} MiB sent`);
  const line = await eventually(async () => gateway.accessLines().find((l) => l.msg === 'websocket'), 5000, 50, 'the connection\'s access log line');
  const relayed = Number(line.bytesIn);
  // What the gateway took from the client is what it holds (at most maxUnsent = 1 MiB + 4 MiB, plus
  // the message that crossed it) plus what the kernel holds between the gateway and the paused
  // upstream: at most the gateway's send buffer and the upstream's receive buffer, which autotuning
  // grows up to tcp_wmem's and tcp_rmem's maximum (read here: kernels differ, 4 MiB and 6 or 32 MiB are common). 1 MiB for
  // what ws read before its pause took hold.
  const kernel = tcpBufferMax('tcp_wmem') + tcpBufferMax('tcp_rmem');
  const bound = 5 * 1024 * 1024 + chunk.length + kernel + 1024 * 1024;
  t.ok(relayed <= bound, `the gateway relayed ${mib(relayed)} MiB before the 1013 (bound ${mib(bound)} MiB)`);
  // And the client got the 1013 before it could send more than that plus its own leg's kernel buffers.
  t.ok(sent <= relayed + kernel + 1024 * 1024, `the client sent ${mib(sent)} MiB in all`);
});

const mib = (bytes: number): string => (bytes / 1048576).toFixed(1);

t.test('the chat example, discovered from its doc, through the gateway', async (t) => {
  const chat = await startChatUpstream(0);
  t.teardown(() => chat.close());
  const key = 'chat-key';
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'swagger2', serviceLocation: chat.url }], {
      middleware: [{ id: 'auth', type: 'apiKeyAuth', header: 'x-api-key', keys: [{ consumer: 'ann', sha256: createHash('sha256').update(key).digest('hex') }] }],
    }),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const ann = await openClient(`ws://127.0.0.1:${gateway.port}/chat/lobby`, ['chat.v1'], { 'x-api-key': key });
  t.equal(ann.protocol, 'chat.v1');
  t.same(JSON.parse((await nextMessage(ann)).data.toString()), { from: 'room', text: 'ann joined' });
  ann.send('hello');
  t.same(JSON.parse((await nextMessage(ann)).data.toString()), { from: 'ann', text: 'hello' }, 'named by the X-Consumer the gateway added');
  ann.close(1000);
  await closed(ann);
});
