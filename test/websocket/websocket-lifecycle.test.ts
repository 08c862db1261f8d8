// WebSocket connections across the gateway's own lifecycle: a SIGHUP reload leaves open connections
// untouched; SIGTERM refuses new connections and closes open ones with 1001 on both sides after
// timeouts.shutdownGraceMs, then the gateway exits 0; a client's own close during that drain is
// answered with its close frame. Also: permessage-deflate with the client when
// `websocket.compression`, and a config error that names the field.
import t from 'tap';
import { parseConfig } from '../../src/config/load.js';
import { eventually, startGateway, testConfig } from '../helpers/gateway-process.js';
import { closed, nextMessage, openClient, startWsUpstream, wsUpstreamConfig } from '../helpers/ws-upstream.js';

t.test('SIGHUP keeps open connections; SIGTERM closes them with 1001 after the grace and exits 0', async (t) => {
  const upstream = await startWsUpstream(t);
  const config = testConfig([wsUpstreamConfig(upstream.location, ['/keep'])], {
    timeouts: { upstreamMs: 5000, connectMs: 1000, clientRequestMs: 10_000, shutdownGraceMs: 1500 },
  });
  const gateway = await startGateway(t, { config, waitFor: (line) => line.msg === 'gateway operational', startTimeoutMs: 60_000, workers: 2 });
  const clients = await Promise.all([0, 1, 2, 3].map(() => openClient(`ws://127.0.0.1:${gateway.port}/keep`)));
  const gone = clients.map((client) => closed(client));

  gateway.writeConfig({ ...config, upstreams: [wsUpstreamConfig(upstream.location, ['/keep', '/more'])] });
  gateway.signal('SIGHUP');
  await gateway.waitForLog((line) => line.msg === 'config reloaded', 60_000, "'config reloaded'");
  for (const [i, client] of clients.entries()) {
    client.send(`still here ${i}`);
    t.equal((await nextMessage(client)).data.toString(), `still here ${i}`, `connection ${i} still relays after the reload`);
  }
  const added = await openClient(`ws://127.0.0.1:${gateway.port}/more`);
  added.close();

  const signalled = Date.now();
  gateway.signal('SIGTERM');
  const codes = await Promise.all(gone);
  const waited = Date.now() - signalled;
  t.same(
    codes.map((c) => c.code),
    [1001, 1001, 1001, 1001],
    'every open connection is closed with 1001',
  );
  t.ok(waited >= 1400, `not before the grace (${waited} ms)`);
  const refused = await openClient(`ws://127.0.0.1:${gateway.port}/keep`).then(
    () => 'upgraded',
    (err: Error & { code?: string; status?: number }) => err.code ?? String(err.status),
  );
  t.not(refused, 'upgraded', `a new upgrade is refused (${refused})`);
  t.same(await gateway.exited, { code: 0, signal: null }, 'the gateway exits 0');
  // The upstream (this process) may hear the last close after the gateway's exit is reported.
  const goingAway = (): number => upstream.closes.filter((c) => c.code === 1001).length;
  await eventually(async () => (goingAway() >= 4 ? true : undefined), 5000, 20, 'the upstream side of each closed').catch(() => {});
  t.equal(goingAway(), 4, 'the upstream side of each is closed with 1001 too');
});

t.test("an upgrade waiting for the upstream's 101 gets the grace, as a request in flight: on SIGTERM and on a reload that replaces the workers", async (t) => {
  const upstream = await startWsUpstream(t, { answerDelayMs: 1500 });
  const config = testConfig([wsUpstreamConfig(upstream.location, ['/slow'])], {
    timeouts: { upstreamMs: 5000, connectMs: 1000, clientRequestMs: 10_000, shutdownGraceMs: 3000 },
  });
  const arrived = (): Promise<void> => new Promise((resolve) => upstream.server.once('upgrade', () => resolve()));

  for (const how of ['SIGTERM', 'SIGHUP'] as const) {
    const gateway = await startGateway(t, { config, waitFor: (line) => line.msg === 'gateway operational', startTimeoutMs: 60_000, workers: 1 });
    const reaching = arrived();
    const opening = openClient(`ws://127.0.0.1:${gateway.port}/slow`);
    await reaching;
    const signalled = Date.now();
    if (how === 'SIGHUP') {
      // A changed websocket section is a worker setting: the worker is replaced.
      gateway.writeConfig({ ...config, websocket: { idleTimeoutMs: 60_000 } });
    }
    gateway.signal(how);
    const client = await opening.catch((err: Error) => err);
    if (client instanceof Error) {
      t.fail(`${how}: the upgrade was cut (${client.message})`);
      continue;
    }
    t.pass(`${how}: the upgrade completes after the signal (${Date.now() - signalled} ms)`);
    const gone = closed(client);
    client.send('made it');
    t.equal((await nextMessage(client)).data.toString(), 'made it', `${how}: and relays`);
    t.equal((await gone).code, 1001, `${how}: closed with 1001 after the grace`);
    t.ok(Date.now() - signalled >= 2900, `${how}: not before the grace (${Date.now() - signalled} ms)`);
    if (how === 'SIGTERM') t.same(await gateway.exited, { code: 0, signal: null }, 'the gateway exits 0');
  }
});

t.test("a client's own close during a drain gets the close frame back, the last one too", async (t) => {
  const upstream = await startWsUpstream(t);
  const config = testConfig([wsUpstreamConfig(upstream.location, ['/keep'])], {
    timeouts: { upstreamMs: 5000, connectMs: 1000, clientRequestMs: 10_000, shutdownGraceMs: 20_000 },
  });
  const gateway = await startGateway(t, { config, waitFor: (line) => line.msg === 'gateway operational', startTimeoutMs: 60_000, workers: 1 });
  const clients = await Promise.all([0, 1].map(() => openClient(`ws://127.0.0.1:${gateway.port}/keep`)));
  const gone = clients.map((client) => closed(client));
  gateway.signal('SIGTERM');
  await gateway.waitForLog((line) => line.msg === 'worker stopping: no new connections, finishing in-flight requests');
  for (const client of clients) client.close(1000, 'bye');
  // 1006 is what the client reports when the connection ended without a close frame.
  t.same(
    (await Promise.all(gone)).map((c) => c.code),
    [1000, 1000],
    'each client gets its close answered',
  );
  t.same(await gateway.exited, { code: 0, signal: null }, 'the gateway exits 0, long before the grace');
});

t.test('permessage-deflate with the client when websocket.compression', async (t) => {
  const upstream = await startWsUpstream(t);
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(upstream.location, ['/z'])], { websocket: { compression: true, maxPayloadBytes: 64 * 1024 } }),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const { WebSocket } = await import('ws');
  const client = new WebSocket(`ws://127.0.0.1:${gateway.port}/z`, { perMessageDeflate: true });
  await new Promise((resolve, reject) => {
    client.once('open', resolve);
    client.once('error', reject);
  });
  t.match(client.extensions, /permessage-deflate/, 'the client negotiated permessage-deflate with the gateway');
  t.equal(upstream.handshakes[0]!.headers['sec-websocket-extensions'], undefined, 'the upstream leg is not compressed');
  const text = 'compress me '.repeat(1000);
  client.send(text);
  t.equal((await nextMessage(client)).data.toString(), text, 'a compressed message is relayed and comes back');
  client.close();

  // 1 MiB of zeros compresses to about a kilobyte: uWS refuses it only once inflated, past twice the
  // limit, and says so in other words than for an uncompressed message.
  const bomb = new WebSocket(`ws://127.0.0.1:${gateway.port}/z`, { perMessageDeflate: true });
  await new Promise((resolve, reject) => {
    bomb.once('open', resolve);
    bomb.once('error', reject);
  });
  bomb.on('error', () => {});
  bomb.send(Buffer.alloc(1024 * 1024));
  await eventually(async () => (upstream.closes.length === 2 ? true : undefined), 10_000, 50, 'the second upstream close');
  t.equal(upstream.closes[1]!.code, 1009, 'a compressed message that inflates past twice the limit: the upstream gets 1009');
});

t.test('the websocket section is validated like the rest of the config', async (t) => {
  const base = { upstreams: [] };
  t.throws(() => parseConfig(JSON.stringify({ ...base, websocket: { maxPayloadBytes: 0 } }), 'gw.json'), /gw\.json: \/websocket\/maxPayloadBytes: .*>= 1/);
  t.throws(() => parseConfig(JSON.stringify({ ...base, websocket: { compresion: true } }), 'gw.json'), /gw\.json: \/websocket.*compresion/);
  t.throws(() => parseConfig(JSON.stringify({ ...base, websocket: { idleTimeoutMs: 'long' } }), 'gw.json'), /\/websocket\/idleTimeoutMs/);
  const config = parseConfig(JSON.stringify(base), 'gw.json');
  t.same(config.websocket, { enabled: true, maxPayloadBytes: 16 * 1024 * 1024, idleTimeoutMs: 120_000, compression: false }, 'defaults');
});
