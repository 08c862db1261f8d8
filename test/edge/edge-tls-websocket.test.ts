// WebSocket upgrades and GETs that carry a Sec-WebSocket-Key (uWS hands both to the WebSocket route)
// over the TLS listener are requests over TLS like any other: the upstream gets X-Forwarded-Proto:
// https, the answer Strict-Transport-Security; over the plain port neither changes.
import type { IncomingMessage } from 'node:http';
import t from 'tap';
import { WebSocket } from 'ws';
import { CertificateDir } from '../helpers/certs.js';
import { httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { files, httpsGet } from '../helpers/tls-client.js';
import { startWsUpstream, wsUpstreamConfig } from '../helpers/ws-upstream.js';

/** Opens `url` (TLS checks off); resolves with the 101's headers once open. */
function open(url: string): Promise<{ socket: WebSocket; head: IncomingMessage['headers'] }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { rejectUnauthorized: false });
    let head: IncomingMessage['headers'] = {};
    socket.once('upgrade', (res: IncomingMessage) => (head = res.headers));
    socket.once('open', () => resolve({ socket, head }));
    socket.once('error', reject);
  });
}

t.test('over TLS: the upgrade and a GET with a Sec-WebSocket-Key are forwarded as https and answered with HSTS', async (t) => {
  const certs = new CertificateDir(t);
  const cert = certs.make('ws', 'ws.test');
  const ws = await startWsUpstream(t);
  const app = await startUpstream(t, {
    name: 'app',
    handle: (req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ proto: req.headers['x-forwarded-proto'] }));
    },
  });
  const gateway = await startGateway(t, {
    config: testConfig(
      [wsUpstreamConfig(ws.location, ['/room']), { serviceType: 'static', serviceLocation: app.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }],
      { tls: { port: 0, hstsMaxAgeS: 600, certificates: [files(cert)] } },
    ),
    waitFor: (line) => line.msg === 'gateway operational',
    workers: 1,
    startTimeoutMs: 60_000,
  });
  const tlsPort = Number((await gateway.waitForLog((line) => line.msg === 'gateway listening')).tlsPort);

  const secure = await open(`wss://127.0.0.1:${tlsPort}/room`);
  t.teardown(() => secure.socket.terminate());
  t.equal(ws.handshakes[0]!.headers['x-forwarded-proto'], 'https', 'wss:// reaches the upstream as https');
  t.equal(secure.head['strict-transport-security'], 'max-age=600', "the 101 over TLS carries the gateway's HSTS");
  const plain = await open(`ws://127.0.0.1:${gateway.port}/room`);
  t.teardown(() => plain.socket.terminate());
  t.equal(ws.handshakes[1]!.headers['x-forwarded-proto'], 'http', 'ws:// on the plain port stays http');
  t.equal(plain.head['strict-transport-security'], undefined, 'and has no HSTS');

  // Not an upgrade (no Upgrade: websocket): uWS still routes it to the WebSocket route, which serves it as HTTP.
  const key = { 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' };
  const overTls = await httpsGet(tlsPort, '/items/1', 'ws.test', key);
  t.equal(overTls.status, 200);
  t.equal(JSON.parse(overTls.body).proto, 'https', 'a GET with a Sec-WebSocket-Key over TLS is forwarded as https');
  t.equal(overTls.headers['strict-transport-security'], 'max-age=600', 'and answered with HSTS');
  const overPlain = await httpRequest(gateway.port, '/items/1', { headers: key });
  t.equal(JSON.parse(overPlain.body).proto, 'http', 'on the plain port as http');
  t.equal(overPlain.headers['strict-transport-security'], undefined);
});
