// The gateway's own WebSocket client on the upstream leg (src/websocket/upstream-socket.ts), against
// upstreams that answer in the ways a `ws` server never does: a raw TCP server that writes the 101 or
// the refusal byte by byte (interim 1xx heads, a chunked refusal body, a wrong Sec-WebSocket-Accept,
// no subprotocol chosen) and then frames a broken peer would send (masked, bad UTF-8); a `wss://`
// upstream behind TLS with a test CA; and the connection's access line in the access log's file.
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readFile } from 'node:fs/promises';
import { createServer as createHttpsServer } from 'node:https';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { WebSocketServer } from 'ws';
import { CertificateDir } from '../helpers/certs.js';
import { eventually, httpRequest, startGateway, testConfig } from '../helpers/gateway-process.js';
import { closed, nextMessage, openClient, rawUpstream, rssBytes, startWsUpstream, wsUpstreamConfig, type RawPeer } from '../helpers/ws-upstream.js';
import { hungPort } from '../helpers/raw-http.js';
import { reloadWith } from '../helpers/reload.js';
import { acceptFor } from '../../src/websocket/upstream-socket.js';
import { within } from '../helpers/within.js';

type Teardown = Parameters<typeof startGateway>[0];

/** An unmasked server frame. */
function frame(opcode: number, payload: Buffer, masked = false): Buffer {
  const head = Buffer.from([0x80 | opcode, (masked ? 0x80 : 0) | payload.length]);
  if (!masked) return Buffer.concat([head, payload]);
  const key = Buffer.from([1, 2, 3, 4]);
  return Buffer.concat([head, key, Buffer.from(payload.map((b, i) => b ^ key[i % 4]!))]);
}

/** The whole frames the gateway sent (masked, as a client's, each under 126 bytes), unmasked. */
function framesSent(bytes: Buffer): { opcode: number; payload: Buffer }[] {
  const frames: { opcode: number; payload: Buffer }[] = [];
  let at = 0;
  while (at + 6 <= bytes.length) {
    const opcode = bytes[at]! & 0x0f;
    const length = bytes[at + 1]! & 0x7f;
    if (at + 6 + length > bytes.length) break;
    const key = bytes.subarray(at + 2, at + 6);
    frames.push({ opcode, payload: Buffer.from(bytes.subarray(at + 6, at + 6 + length).map((b, i) => b ^ key[i % 4]!)) });
    at += 6 + length;
  }
  return frames;
}

/** The close code in the first close frame the gateway sent. */
function closeCodeSent(bytes: Buffer): number | null {
  const close = framesSent(bytes).find((sent) => sent.opcode === 0x8);
  if (close === undefined) return null;
  return close.payload.length >= 2 ? close.payload.readUInt16BE(0) : 1005;
}

async function gatewayFor(t: Teardown, location: string, extra: Record<string, unknown> = {}): Promise<number> {
  const gateway = await startGateway(t, {
    config: testConfig([{ ...wsUpstreamConfig(location, ['/w']), ...extra }], { timeouts: { upstreamMs: 2000, connectMs: 1000, clientRequestMs: 10_000, shutdownGraceMs: 500 } }),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  return gateway.port;
}

/** A client's upgrade request offering `protocols`, one Sec-WebSocket-Protocol line each, written by hand; resolves with the answer's head. */
function rawUpgrade(port: number, ...protocols: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      const lines = protocols.map((protocol) => `Sec-WebSocket-Protocol: ${protocol}\r\n`).join('');
      socket.write(`GET /w HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${lines}\r\n`);
    });
    let got = '';
    socket.on('data', (chunk) => {
      got += chunk.toString('latin1');
      const end = got.indexOf('\r\n\r\n');
      if (end === -1) return;
      socket.destroy();
      resolve(got.slice(0, end));
    });
    socket.on('error', reject);
  });
}

const refusal = (err: unknown) => err as { status: number; headers: Record<string, string>; body: string };

t.test('the Sec-WebSocket-Accept expected: the same from crypto.hash and from a Hash object (Node before 20.12)', async (t) => {
  // RFC 6455 4.2.2's own example, then random keys.
  t.equal(acceptFor('dGhlIHNhbXBsZSBub25jZQ=='), 's3pPLMBiTxaQ9kYGzzhZRbK+xOo=');
  t.equal(acceptFor('dGhlIHNhbXBsZSBub25jZQ==', undefined), 's3pPLMBiTxaQ9kYGzzhZRbK+xOo=');
  for (let i = 0; i < 20; i++) {
    const key = randomBytes(16).toString('base64');
    t.equal(acceptFor(key, undefined), acceptFor(key), key);
  }
});

t.test('the handshake: interim answers, a 101 cut into pieces, no subprotocol chosen, bad answers', async (t) => {
  let mode = '';
  const heads: string[] = [];
  const location = await rawUpstream(t, (peer) => {
    heads.push(peer.head);
    const { socket } = peer;
    switch (mode) {
      case 'interim':
        socket.write('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n');
        peer.accept('Set-Cookie: s=1\r\n');
        break;
      case 'bytewise': {
        // The 101 and a first message, one byte per write.
        const key = /sec-websocket-key: (.*)/i.exec(peer.head)![1]!.trim();
        const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
        const bytes = Buffer.concat([Buffer.from(`HTTP/1.1 101 Switching Protocols\r\nupgrade: WebSocket\r\nconnection: keep-alive, Upgrade\r\nsec-websocket-accept: ${accept}\r\n\r\n`), frame(0x1, Buffer.from('first'))]);
        let i = 0;
        const next = (): void => {
          if (i < bytes.length) socket.write(bytes.subarray(i, ++i), () => setImmediate(next));
        };
        next();
        break;
      }
      case 'eager': {
        // The 101 and three messages in one write (relayed from within the read that completes the
        // handshake), then a fourth later, read into the same worker buffer as the first three.
        const key = /sec-websocket-key: (.*)/i.exec(peer.head)![1]!.trim();
        const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
        const head = `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`;
        socket.write(Buffer.concat([Buffer.from(head), ...['one!', 'two!', 'tri!'].map((text) => frame(0x1, Buffer.from(text)))]));
        setTimeout(() => socket.write(Buffer.concat([Buffer.alloc(head.length, 0x2a), frame(0x1, Buffer.from('four'))]).subarray(head.length)), 100);
        break;
      }
      case 'bad-accept':
        socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n\r\n');
        break;
      case 'extension':
        peer.accept('Sec-WebSocket-Extensions: permessage-deflate\r\n');
        break;
      case 'other-protocol':
        peer.accept('Sec-WebSocket-Protocol: not-offered\r\n');
        break;
      case 'no-protocol':
        peer.accept();
        break;
      case 'second-line':
        peer.accept('Sec-WebSocket-Protocol: chat.v2\r\n');
        break;
      case 'garbage':
        socket.end('HTTP/1.1 abc\r\n\r\n');
        break;
      case 'half-head':
        socket.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: webs');
        break;
      case 'bare-lf':
        // Kept open: the answer must be judged by what came, not waited on until upstreamMs.
        socket.write('HTTP/1.1 101 Switching Protocols\nUpgrade: websocket\nConnection: Upgrade\nSec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n');
        break;
      case 'name-with-space':
        peer.accept('X Name: 1\r\n');
        break;
      case 'control-in-value':
        peer.accept('X-Name: a\x01b\r\n');
        break;
      case 'folded-line':
        peer.accept('X-Name: a\r\n b\r\n');
        break;
      case 'chunked':
        socket.write('HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nX-Why: policy\r\n\r\n5\r\nno, y\r\n');
        setTimeout(() => socket.end('3\r\nou.\r\n0\r\n\r\n'), 50);
        break;
      case 'until-close':
        socket.end('HTTP/1.0 401 Unauthorized\r\nWWW-Authenticate: Bearer\r\n\r\nlog in first');
        break;
    }
  });
  const port = await gatewayFor(t, location);
  const url = `ws://127.0.0.1:${port}/w`;

  mode = 'interim';
  const interim = await openClient(url);
  t.pass('100 and 103 before the 101 are skipped');
  t.match(heads.at(-1), /^GET \/w HTTP\/1\.1\r\n/, 'the request line');
  t.match(heads.at(-1), /\r\nupgrade: websocket\r\n/i);
  t.match(heads.at(-1), /\r\nsec-websocket-version: 13(\r\n|$)/i);
  interim.terminate();

  mode = 'bytewise';
  const bytewise = await openClient(url);
  t.same(await nextMessage(bytewise), { data: Buffer.from('first'), isBinary: false }, 'a 101 and a message written a byte at a time');
  bytewise.terminate();

  mode = 'eager';
  const eager = await openClient(url);
  const early: string[] = [];
  for (let i = 0; i < 4; i++) early.push((await nextMessage(eager)).data.toString());
  t.same(early, ['one!', 'two!', 'tri!', 'four'], 'messages in the 101\'s read arrive intact, and so does the next read');
  eager.terminate();

  // ws (the test's client) fails a connection whose offered subprotocols were all declined; a browser
  // goes on with none. That is the client's call: the gateway passes the upstream's answer on.
  mode = 'no-protocol';
  const answer = await rawUpgrade(port, 'chat.v1');
  t.match(answer, /^HTTP\/1\.1 101 /, 'an upstream that chooses no subprotocol: the upgrade completes');
  t.notMatch(answer, /sec-websocket-protocol/i, 'with no subprotocol (RFC 6455 4.1: the client decides)');

  // RFC 6455 11.3.4: the offers may come on several lines; all of them are offered upstream.
  mode = 'second-line';
  const secondLine = await rawUpgrade(port, 'chat.v1', 'chat.v2');
  t.match(heads.at(-1), /\r\nsec-websocket-protocol: chat\.v1, chat\.v2(\r\n|$)/i, 'offers on two lines reach the upstream as one list');
  t.match(secondLine, /^HTTP\/1\.1 101 /, 'the upstream may choose the offer of the second line');
  t.match(secondLine, /\r\nsec-websocket-protocol: chat\.v2(\r\n|$)/i);

  for (const [which, what] of [
    ['bad-accept', 'a Sec-WebSocket-Accept that does not match the key'],
    ['extension', 'an extension nobody offered'],
    ['other-protocol', 'a subprotocol nobody offered'],
    ['garbage', 'a status line that is not one'],
    ['bare-lf', 'a head whose lines end in a bare LF'],
    ['half-head', 'a connection closed in the middle of the head'],
    ['name-with-space', 'a header name that is not a token'],
    ['control-in-value', 'a control character in a header value'],
    ['folded-line', 'a folded header line'],
  ] as const) {
    mode = which;
    const err = refusal(await openClient(url, which === 'other-protocol' ? ['chat.v1'] : []).then(() => t.fail(which), (e: unknown) => e));
    t.equal(err.status, 502, `${what}: 502`);
    t.match(err.body, /not valid/);
  }

  mode = 'chunked';
  const chunked = refusal(await openClient(url).then(() => t.fail('chunked'), (e: unknown) => e));
  t.equal(chunked.status, 403, 'a chunked refusal keeps its status');
  t.equal(chunked.body, 'no, you.', 'and its whole body, dechunked');
  t.equal(chunked.headers['x-why'], 'policy', 'and its end-to-end headers');

  mode = 'until-close';
  const untilClose = refusal(await openClient(url).then(() => t.fail('until-close'), (e: unknown) => e));
  t.equal(untilClose.status, 401);
  t.equal(untilClose.body, 'log in first', 'a body delimited by the close');
  t.equal(untilClose.headers['www-authenticate'], 'Bearer');
});

t.test('an upstream that breaks the protocol: the client gets 1011, the upstream the code that says why', async (t) => {
  const peers: RawPeer[] = [];
  let send: Buffer = Buffer.alloc(0);
  const location = await rawUpstream(t, (peer) => {
    peers.push(peer);
    peer.accept();
    peer.socket.write(send);
  });
  const port = await gatewayFor(t, location);
  for (const [what, bytes, code] of [
    ['a masked frame', frame(0x1, Buffer.from('hi'), true), 1002],
    ['text that is not UTF-8', frame(0x1, Buffer.from([0xc3, 0x28])), 1007],
    ['an RSV bit set', Buffer.from([0xc1, 0x01, 0x61]), 1002],
  ] as const) {
    send = bytes;
    const client = await openClient(`ws://127.0.0.1:${port}/w`);
    const done = await closed(client);
    t.equal(done.code, 1011, `${what}: the client gets 1011`);
    const peer = peers.at(-1)!;
    for (let i = 0; i < 100 && closeCodeSent(peer.received()) === null; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    t.equal(closeCodeSent(peer.received()), code, `${what}: the upstream gets ${code}`);
  }

  // Random bytes after the 101: the client gets whatever messages they frame, then a close (or the
  // bytes end mid-frame); the worker goes on serving either way.
  const rng = (seed: number) => () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 16) & 0xff;
  for (let run = 0; run < 12; run++) {
    const next = rng(run + 1);
    send = Buffer.from(Array.from({ length: 1 + ((run * 37) % 200) }, next));
    const client = await openClient(`ws://127.0.0.1:${port}/w`);
    const ended = await within(closed(client), 300, null);
    if (ended !== null) t.ok([1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014].includes(ended.code) || ended.code >= 3000, `random bytes ${run}: closed with ${ended.code}`);
    client.terminate();
  }
  send = Buffer.alloc(0);
  const after = await openClient(`ws://127.0.0.1:${port}/w`);
  t.pass('the worker still upgrades after all of it');
  after.terminate();

  // A ping from the upstream is answered with a pong carrying its payload.
  send = frame(0x9, Buffer.from('are you there'));
  const client = await openClient(`ws://127.0.0.1:${port}/w`);
  const peer = peers.at(-1)!;
  for (let i = 0; i < 150 && peer.received().length < 6 + 13; i++) await new Promise((resolve) => setTimeout(resolve, 20));
  const pong = peer.received();
  t.equal(pong[0], 0x8a, 'a pong frame, final');
  t.equal(pong[1], 0x80 | 13, 'masked, with the ping payload length');
  t.equal(Buffer.from(pong.subarray(6, 19).map((b, i) => b ^ pong[2 + (i % 4)]!)).toString(), 'are you there');
  client.terminate();
});

t.test('an upstream flooding a worker with tiny fragments or unread pings: the memory it holds stays bounded', async (t) => {
  // RFC 6455 allows any number of fragments, empty ones included, and pings at any rate; neither is
  // counted against maxPayloadBytes by the size of what it carries.
  let act: (peer: RawPeer) => void = () => {};
  const location = await rawUpstream(t, (peer) => act(peer));
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(location, ['/w'])], { websocket: { maxPayloadBytes: 2 * 1024 * 1024 } }),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const workerPid = gateway.lines.find((line) => line.msg === 'worker started')?.workerPid as number;
  const url = `ws://127.0.0.1:${gateway.port}/w`;
  const MiB = 1024 * 1024;

  // 4 million empty continuation frames (8 MB on the wire) between a message's first and last fragment.
  act = (peer) => {
    peer.accept();
    peer.socket.write(Buffer.from([0x01, 0x01, 0x61])); // text, not final: "a"
    const empties = Buffer.alloc(2 * 64 * 1024); // 0x00 0x00: a continuation, not final, empty
    for (let i = 0; i < 64; i++) peer.socket.write(empties);
    peer.socket.write(Buffer.from([0x80, 0x01, 0x62])); // the final continuation: "b"
  };
  let before = rssBytes(workerPid);
  const empty = await openClient(url);
  t.same(await nextMessage(empty), { data: Buffer.from('ab'), isBinary: false }, 'the message of 4 million empty fragments arrives whole');
  const afterEmpty = rssBytes(workerPid);
  t.comment(`empty fragments: worker RSS ${(before / MiB).toFixed(1)} -> ${(afterEmpty / MiB).toFixed(1)} MiB`);
  t.ok(afterEmpty - before < 64 * MiB, `the worker grew by ${((afterEmpty - before) / MiB).toFixed(1)} MiB for them (a Buffer per fragment: about 800)`);
  empty.terminate();

  // A message of 1.5 MiB sent one byte per fragment.
  const size = 1.5 * MiB;
  act = (peer) => {
    peer.accept();
    const frames = Buffer.alloc(3 * size);
    for (let i = 0; i < size; i++) {
      frames[3 * i] = i === 0 ? 0x02 : i === size - 1 ? 0x80 : 0x00;
      frames[3 * i + 1] = 1;
      frames[3 * i + 2] = i & 0xff;
    }
    peer.socket.write(frames);
  };
  before = rssBytes(workerPid);
  const bytewise = await openClient(url);
  const message = await nextMessage(bytewise);
  const afterBytewise = rssBytes(workerPid);
  t.equal(message.data.length, size, 'the message of one-byte fragments arrives whole');
  t.ok(message.data.every((byte, i) => byte === (i & 0xff)), 'in order');
  t.comment(`one-byte fragments: worker RSS ${(before / MiB).toFixed(1)} -> ${(afterBytewise / MiB).toFixed(1)} MiB`);
  t.ok(afterBytewise - before < 64 * MiB, `the worker grew by ${((afterBytewise - before) / MiB).toFixed(1)} MiB for them`);
  bytewise.terminate();

  // 100 MB of pings from an upstream that reads none of the pongs, then a message.
  let quiet: RawPeer | null = null;
  act = (peer) => {
    quiet = peer;
    peer.accept();
    peer.socket.pause();
    const ping = Buffer.concat([Buffer.from([0x89, 125]), Buffer.alloc(125, 0x70)]);
    const pings = Buffer.concat(Array.from({ length: 8192 }, () => ping));
    for (let i = 0; i < 100; i++) peer.socket.write(pings);
    peer.socket.write(frame(0x1, Buffer.from('after the pings')));
  };
  before = rssBytes(workerPid);
  const pinged = await openClient(url);
  t.same(await nextMessage(pinged), { data: Buffer.from('after the pings'), isBinary: false }, 'a message after 800,000 pings arrives');
  const afterPings = rssBytes(workerPid);
  t.comment(`unread pings: worker RSS ${(before / MiB).toFixed(1)} -> ${(afterPings / MiB).toFixed(1)} MiB`);
  t.ok(afterPings - before < 48 * MiB, `the worker grew by ${((afterPings - before) / MiB).toFixed(1)} MiB for them (a pong each: about 100)`);
  // Once the upstream reads again, the connection carries on: pongs, then the client's message.
  const peer: RawPeer = quiet!;
  peer.socket.resume();
  pinged.send('still here');
  const sent = await eventually(async () => {
    const frames = framesSent(peer.received());
    return frames.some((one) => one.opcode === 0x1) ? frames : undefined;
  }, 10_000, 50, "the client's message at the upstream");
  const pongs = sent.filter((one) => one.opcode === 0xa).length;
  t.ok(pongs > 0 && pongs < 800_000, `some pings were answered (${pongs}), not every one`);
  t.equal(sent.find((one) => one.opcode === 0x1)?.payload.toString(), 'still here', "the client's message follows");
  pinged.terminate();
});

t.test('a wss:// upstream with a private CA', async (t) => {
  const certs = new CertificateDir(t);
  const cert = certs.make('upstream', 'upstream.test');
  const server = createHttpsServer({ cert: readFileSync(cert.certFile), key: readFileSync(cert.keyFile) });
  const wss = new WebSocketServer({ server });
  wss.on('connection', (socket) => socket.on('message', (data, isBinary) => socket.send(data as Buffer, { binary: isBinary })));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const socket of wss.clients) socket.terminate();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const location = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const port = await gatewayFor(t, location, { tls: { caFile: cert.certFile, serverName: 'upstream.test', rejectUnauthorized: true } });
  const client = await openClient(`ws://127.0.0.1:${port}/w`);
  client.send('over tls');
  t.same(await nextMessage(client), { data: Buffer.from('over tls'), isBinary: false }, 'echoed through a TLS upstream leg');
  const done = closed(client);
  client.close(1000);
  t.equal((await done).code, 1000);
});

t.test('a wss:// upstream whose certificate is not trusted: 502 naming why, one warn line, counted as a TLS failure', async (t) => {
  const certs = new CertificateDir(t);
  const cert = certs.make('untrusted', 'upstream.test');
  const server = createHttpsServer({ cert: readFileSync(cert.certFile), key: readFileSync(cert.keyFile) });
  const wss = new WebSocketServer({ server });
  let opened = 0;
  wss.on('connection', () => opened++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const location = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // No caFile: the upstream's certificate is signed by a CA the gateway does not know.
  const gateway = await startGateway(t, {
    config: testConfig([{ ...wsUpstreamConfig(location, ['/w']), tls: { serverName: 'upstream.test' } }]),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
  });
  for (let i = 0; i < 3; i++) {
    const refused = (await openClient(`ws://127.0.0.1:${gateway.port}/w`).then(
      () => t.fail('upgraded'),
      (err: unknown) => err,
    )) as { status?: number; body?: string };
    t.equal(refused.status, 502);
    t.equal((JSON.parse(refused.body ?? '{}') as { detail?: string }).detail, 'the TLS handshake with the upstream failed: its certificate is not trusted', 'the 502 says why, as for a request');
  }
  t.equal(opened, 0, 'no connection was opened upstream');
  const line = await gateway.waitForLog((l) => String(l.msg).startsWith('upstream TLS handshake failed'), 5000, 'the warn line');
  t.equal(line.level, 40, 'at warn');
  t.equal(line.upstream, location, 'naming the upstream');
  t.match(String(line.msg), /unable to verify|self-signed|local issuer/, "with OpenSSL's reason");
  const metrics = await eventually(
    async () => {
      const body = JSON.parse((await httpRequest(gateway.port, '/metrics')).body) as { upstreamFailures?: { tlsFailures?: number } };
      return (body.upstreamFailures?.tlsFailures ?? 0) >= 3 ? body : undefined;
    },
    5000,
    100,
    'the failures counted',
  );
  t.equal(metrics.upstreamFailures!.tlsFailures, 3, 'counted as upstreamFailures.tlsFailures');
  t.ok(gateway.lines.filter((l) => String(l.msg).startsWith('upstream TLS handshake failed')).length <= 2, 'not a line per failure (one per worker per 10 s)');

  // A reload that changes the upstream's TLS settings holds for both legs in every worker, without
  // replacing them (it read the config the workers started with before).
  server.on('request', (_req, res) => res.end('plain over TLS'));
  t.equal((await httpRequest(gateway.port, '/w')).status, 502, 'a plain request: refused the same');
  const status = await reloadWith(gateway, testConfig([{ ...wsUpstreamConfig(location, ['/w']), tls: { serverName: 'upstream.test', rejectUnauthorized: false } }]));
  t.match(status, { ok: true, applied: true });
  for (let i = 0; i < 4; i++) {
    t.equal((await httpRequest(gateway.port, '/w')).body, 'plain over TLS', `request ${i} after the reload: forwarded`);
    const client = await openClient(`ws://127.0.0.1:${gateway.port}/w`);
    client.close();
  }
  t.equal(opened, 4, 'and upgrades are relayed');
  t.notOk(gateway.lines.some((l) => l.msg === 'worker started' && Number(l.worker) > 2), 'no worker was replaced for it');
});

t.test('connecting is bounded by timeouts.connectMs: a hung host is given up after it and the upgrade tried once on another; alone, 504', async (t) => {
  const hung = `http://127.0.0.1:${await hungPort(t)}`;
  // Accepts, then says nothing: a wss:// upstream's TLS handshake never completes.
  const silent = net.createServer((socket) => socket.on('error', () => {}));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    silent.close();
  });
  const silentTls = `https://127.0.0.1:${(silent.address() as AddressInfo).port}`;
  const upstream = await startWsUpstream(t);
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(upstream.location, ['/both']), wsUpstreamConfig(hung, ['/both', '/hung']), wsUpstreamConfig(silentTls, ['/silent'])], {
      timeouts: { upstreamMs: 8000, connectMs: 500, clientRequestMs: 10_000, shutdownGraceMs: 1000 },
    }),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const started = Date.now();
  const alone = await openClient(`ws://127.0.0.1:${gateway.port}/hung`).then(
    () => null,
    (err: { status?: number; body?: string }) => err,
  );
  const waited = Date.now() - started;
  t.equal(alone?.status, 504, 'the only host does not accept the connection: 504');
  t.equal((JSON.parse(alone?.body ?? '{}') as { detail?: string }).detail, 'connecting to the upstream timed out', 'saying so, as for a request');
  t.ok(waited >= 450 && waited < 4000, `after connectMs (500), not upstreamMs (8000): ${waited} ms`);
  const tlsStarted = Date.now();
  const tlsHung = await openClient(`ws://127.0.0.1:${gateway.port}/silent`).then(
    () => null,
    (err: { status?: number; body?: string }) => err,
  );
  const tlsWaited = Date.now() - tlsStarted;
  t.equal(tlsHung?.status, 504, 'a TLS handshake that never completes is part of connecting: 504');
  t.ok(tlsWaited >= 450 && tlsWaited < 4000, `after connectMs: ${tlsWaited} ms`);

  // Round-robin: half the first attempts go to the hung host.
  for (let i = 0; i < 4; i++) {
    const at = Date.now();
    const client = await openClient(`ws://127.0.0.1:${gateway.port}/both`);
    t.ok(Date.now() - at < 4000, `upgrade ${i + 1} completed in ${Date.now() - at} ms`);
    client.close();
  }
  t.equal(upstream.handshakes.length, 4, 'every upgrade reached the host that accepts');
  const metrics = await eventually(
    async () => {
      const body = JSON.parse((await httpRequest(gateway.port, '/metrics')).body) as { retries?: { afterConnectFailure?: number }; upstreamFailures?: { connectFailures?: number } };
      return (body.retries?.afterConnectFailure ?? 0) >= 2 ? body : undefined;
    },
    5000,
    100,
    'the retries counted',
  );
  t.equal(metrics.retries!.afterConnectFailure, 2, 'retries.afterConnectFailure: the two first attempts on the hung host');
  t.equal(metrics.upstreamFailures!.connectFailures, 2, 'upstreamFailures.connectFailures: the two upgrades that could not be retried');
});

t.test("a connection's access line goes where the access log goes, with its omitted fields left out", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'specgate-ws-log-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const logFile = join(dir, 'access.log');
  const location = await rawUpstream(t, (peer) => {
    peer.accept();
    // Echo one text frame back (unmask what the gateway sent).
    peer.socket.on('data', () => {
      const bytes = peer.received();
      if (bytes.length < 6 + 5) return;
      const key = bytes.subarray(2, 6);
      const text = Buffer.from(bytes.subarray(6, 11).map((b, i) => b ^ key[i % 4]!));
      peer.socket.end(Buffer.concat([frame(0x1, text), frame(0x8, Buffer.from([0x03, 0xe8]))]));
    });
  });
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(location, ['/w'])], { accessLog: { enabled: true, destination: logFile, omit: ['client'] } }),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const client = await openClient(`ws://127.0.0.1:${gateway.port}/w`);
  client.send('hello');
  t.same(await nextMessage(client), { data: Buffer.from('hello'), isBinary: false });
  t.equal((await closed(client)).code, 1000, "the upstream's close reaches the client");
  const line = await eventually(
    async () => {
      const text = await readFile(logFile, 'utf8').catch(() => '');
      const found = text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'websocket');
      return found;
    },
    5000,
    50,
    'the websocket line in the access log file',
  );
  t.match(line, { level: 30, log: 'access', method: 'GET', path: '/w', endpoint: '/w', upstream: location, status: 101, bytesIn: 5, bytesOut: 5, messagesIn: 1, messagesOut: 1, closeCode: 1000, closedBy: 'upstream' });
  t.type(line.durationMs, 'number');
  t.notOk('client' in line, 'omit applies to the connection line too');
  t.equal(gateway.lines.filter((l) => l.msg === 'websocket').length, 0, 'nothing about it on stdout');
});

/** An upgrade request written by hand; resolves with everything the gateway sent until it closed (or `waitMs` passed), as latin1, and whether it closed. `after`: bytes written once the answer's head arrived. */
function rawUpgradeUntilClose(port: number, after: string, waitMs: number): Promise<{ got: string; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.write('GET /w HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n');
    });
    let got = '';
    let wrote = false;
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ got, closed: false });
    }, waitMs);
    socket.on('data', (chunk) => {
      got += chunk.toString('latin1');
      if (!wrote && got.includes('\r\n\r\n') && after !== '') {
        wrote = true;
        socket.write(after);
      }
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ got, closed: true });
    });
    // A reset closes too (the gateway closing with the next request unread).
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ECONNRESET') return;
      clearTimeout(timer);
      reject(err);
    });
  });
}

t.test("an upstream's header values reach the client as the bytes they were, on the 101 and on a refusal", async (t) => {
  // UTF-8 é (C3 A9) and latin-1 é (E9), written as raw bytes.
  const lines = Buffer.from('X-Utf8: caf\u00c3\u00a9\r\nX-Latin: caf\u00e9\r\n', 'latin1');
  let refuse = false;
  const location = await rawUpstream(t, (peer) => {
    if (!refuse) {
      const key = /sec-websocket-key: (.*)/i.exec(peer.head)?.[1]?.trim() ?? '';
      const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
      const head = `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n`;
      peer.socket.write(Buffer.concat([Buffer.from(head, 'latin1'), lines, Buffer.from('\r\n', 'latin1')]));
      return;
    }
    peer.socket.end(Buffer.concat([Buffer.from('HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n', 'latin1'), lines, Buffer.from('\r\nno', 'latin1')]));
  });
  const port = await gatewayFor(t, location);
  for (const which of ['101', '403']) {
    refuse = which === '403';
    const { got } = await rawUpgradeUntilClose(port, '', 1500);
    t.match(got, new RegExp(`^HTTP/1\\.1 ${which} `), which);
    t.match(got, /\r\nx-utf8: caf\u00c3\u00a9\r\n/i, `${which}: UTF-8 bytes unchanged`);
    t.match(got, /\r\nx-latin: caf\u00e9\r\n/i, `${which}: latin-1 bytes unchanged`);
  }
});

t.test('a refusal without a body (204, 304) closes the connection, as its Connection: close says: the next request is not answered', async (t) => {
  let status = 204;
  const location = await rawUpstream(t, (peer) => {
    peer.socket.end(`HTTP/1.1 ${status} X\r\nX-Why: no\r\n\r\n`);
  });
  const port = await gatewayFor(t, location);
  for (const code of [204, 304, 403]) {
    status = code;
    const started = Date.now();
    const { got, closed } = await rawUpgradeUntilClose(port, 'GET /w HTTP/1.1\r\nHost: x\r\n\r\n', 5000);
    t.match(got, new RegExp(`^HTTP/1\\.1 ${code} `), `${code} relayed`);
    t.match(got, /\r\nconnection: close\r\n/i, `${code}: Connection: close`);
    t.equal(got.split('HTTP/1.1 ').length - 1, 1, `${code}: the request after it is not answered`);
    t.ok(closed && Date.now() - started < 2000, `${code}: the gateway closes the connection at once`);
  }
});
