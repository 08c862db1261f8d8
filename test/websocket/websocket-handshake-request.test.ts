// The client's upgrade request is checked beyond what uWS checks (src/websocket/handshake-request.ts,
// RFC 6455 4.2.1): Connection must list "upgrade" and not "close", Sec-WebSocket-Key and
// Sec-WebSocket-Version must come once, Sec-WebSocket-Protocol must list tokens. Each refused form is a
// 400 problem that never reaches the upstream, and no worker dies: an upgrade with `Connection: close`
// used to be completed, after which uWS closed the client's socket behind the relay's back and the
// relay's next write crashed the worker (SIGSEGV).
import t from 'tap';
import { startGateway, testConfig } from '../helpers/gateway-process.js';
import { rawRequest } from '../helpers/raw-http.js';
import { startWsUpstream, wsUpstreamConfig } from '../helpers/ws-upstream.js';

const KEY = 'dGhlIHNhbXBsZSBub25jZQ==';

t.test('malformed handshakes are 400 and go nowhere; a valid one with Connection: keep-alive, Upgrade is relayed', async (t) => {
  const upstream = await startWsUpstream(t);
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(upstream.location, ['/ws/{name}'])]),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const send = async (lines: string[]): Promise<{ status: number | undefined; body: string }> => {
    const head = `GET /ws/a HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n${lines.map((line) => `${line}\r\n`).join('')}\r\n`;
    const res = await rawRequest(gateway.port, head, { responses: 1, waitMs: 5000 });
    return { status: res.responses[0]?.status, body: res.responses[0]?.body.toString() ?? '' };
  };
  const key = `Sec-WebSocket-Key: ${KEY}`;
  const version = 'Sec-WebSocket-Version: 13';
  const refused: Array<[string, string[], RegExp]> = [
    ['no Connection', [key, version], /Connection/],
    ['Connection: keep-alive', ['Connection: keep-alive', key, version], /Connection/],
    ['Connection: close', ['Connection: close', key, version], /Connection/],
    ['Connection: CLOSE', ['Connection: CLOSE', key, version], /Connection/],
    ['Connection: Upgrade, close', ['Connection: Upgrade, close', key, version], /close/],
    // uWS takes any five-character first Connection line for "close" (found crashing a worker).
    ['Connection: hello, then Connection: Upgrade', ['Connection: hello', 'Connection: Upgrade', key, version], /five characters/],
    ['Connection: TE,TE, then Connection: Upgrade', ['Connection: TE,TE', 'Connection: Upgrade', key, version], /five characters/],
    ['two keys', ['Connection: Upgrade', key, `Sec-WebSocket-Key: ${KEY}`, version], /Sec-WebSocket-Key/],
    ['two versions, 13 first', ['Connection: Upgrade', key, version, 'Sec-WebSocket-Version: 8'], /Sec-WebSocket-Version/],
    ['an empty Sec-WebSocket-Protocol', ['Connection: Upgrade', key, version, 'Sec-WebSocket-Protocol: '], /Sec-WebSocket-Protocol/],
    ['a subprotocol that is not a token', ['Connection: Upgrade', key, version, 'Sec-WebSocket-Protocol: chat, a b'], /Sec-WebSocket-Protocol/],
  ];
  for (const [what, lines, detail] of refused) {
    const { status, body } = await send(lines);
    t.equal(status, 400, what);
    t.match(JSON.parse(body || '{}'), { status: 400, detail }, `${what}: the problem says why`);
  }
  t.equal(upstream.handshakes.length, 0, 'none reached the upstream');

  const ok = await rawRequest(gateway.port, `GET /ws/a HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n${key}\r\n${version}\r\n\r\n`, { waitMs: 1000 });
  t.match(ok.data.toString('latin1'), /^HTTP\/1\.1 101 /, 'Connection: keep-alive, Upgrade (as Firefox sends it) is upgraded');
  t.equal(upstream.handshakes.length, 1);
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.notOk(gateway.lines.some((line) => typeof line.msg === 'string' && /worker (killed|exited)/.test(line.msg)), 'no worker died');
});
