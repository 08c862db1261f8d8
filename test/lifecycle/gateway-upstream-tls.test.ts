/**
 * HTTPS upstreams through the running gateway (docs/reference/forward.md#upstream-client): a private CA passed as upstreams[].tls.caFile
 * (made at test time with the openssl CLI), used both to fetch a doc and to forward; serverName for
 * SNI and the name check; a client certificate; a certificate for another name or from another CA is
 * a 502, counted as upstreamFailures.tlsFailures. A reload re-reads the files: a data plane given the
 * reloaded config trusts the new CA. A failed handshake is logged with its reason, once per upstream
 * per 10 s, and the 502 says what kind of failure it was.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import { createServer as createHttpServer } from 'node:http';
import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { TlsFailureLog, tlsFailureKind, tlsFailureReason } from '../../src/proxy/upstream-tls-failures.js';
import { Counters } from '../../src/metrics/counters.js';
import { startDataPlane } from '../../src/proxy/data-plane.js';
import { RoutingTable } from '../../src/routing/table.js';
import { eventually, httpRequest, startGateway, swaggerDoc, type Teardown } from '../helpers/gateway-process.js';
import { rawRequest } from '../helpers/raw-http.js';
import { entry } from '../helpers/upstream-server.js';

const dir = mkdtempSync(path.join(tmpdir(), 'specgate-gw-tls-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string): string => path.join(dir, name);

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}
const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

function makeCa(name: string): void {
  openssl('req', '-x509', ...EC, '-keyout', `${name}.key`, '-out', `${name}.crt`, '-days', '2', '-subj', `/CN=specgate ${name}`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
}

/** A key and a certificate signed by `ca`. */
function issue(ca: string, name: string, altNames: string | null, clientAuth = false): { key: string; cert: string } {
  openssl('req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
  const ext = [clientAuth ? 'extendedKeyUsage=clientAuth' : 'extendedKeyUsage=serverAuth'];
  if (altNames !== null) ext.push(`subjectAltName=${altNames}`);
  writeFileSync(file(`${name}.ext`), ext.join('\n') + '\n');
  openssl('x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.crt`, '-CAkey', `${ca}.key`, '-CAcreateserial', '-out', `${name}.crt`, '-days', '2', '-extfile', `${name}.ext`);
  return { key: readFileSync(file(`${name}.key`), 'utf8'), cert: readFileSync(file(`${name}.crt`), 'utf8') };
}

makeCa('ca1');
makeCa('ca2');
const ca1 = readFileSync(file('ca1.crt'), 'utf8');
const ca2 = readFileSync(file('ca2.crt'), 'utf8');
const byIp = issue('ca1', 'by-ip', 'IP:127.0.0.1');
const byName = issue('ca1', 'by-name', 'DNS:api.internal');
const misnamed = issue('ca1', 'misnamed', 'DNS:wrong.example');
const foreign = issue('ca2', 'foreign', 'IP:127.0.0.1');
issue('ca1', 'gateway-client', null, true);

interface HttpsUpstream {
  location: string;
  /** SNI names and client certificate CNs seen, per request. */
  seen: Array<{ servername: string | false | null | undefined; clientCN: string | null }>;
}

async function httpsUpstream(
  cert: { key: string; cert: string },
  options: { spec?: unknown; clientCa?: string } = {},
): Promise<HttpsUpstream> {
  const seen: HttpsUpstream['seen'] = [];
  const requireClient = options.clientCa !== undefined;
  const server = https.createServer({ ...cert, ca: options.clientCa, requestCert: requireClient, rejectUnauthorized: requireClient }, (req, res) => {
    const socket = req.socket as TLSSocket;
    if (req.url === '/spec' && options.spec !== undefined) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(options.spec));
      return;
    }
    const peer = requireClient ? socket.getPeerCertificate() : null;
    seen.push({ servername: socket.servername, clientCN: (peer?.subject?.CN as string | undefined) ?? null });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ secure: true, path: req.url }));
  });
  server.on('tlsClientError', () => {});
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { location: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

const documented = await httpsUpstream(byIp, { spec: swaggerDoc('secure', { '/secure/{id}': ['GET'] }) });
const named = await httpsUpstream(byName);
const wrongName = await httpsUpstream(misnamed);
const otherCa = await httpsUpstream(foreign);
const mutual = await httpsUpstream(byIp, { clientCa: ca1 });
// The same, reached without a client certificate: under TLS 1.3 (Node's default) its refusal comes as
// an alert after the client took the handshake for done.
const mutualNoCert = await httpsUpstream(byIp, { clientCa: ca1 });
openssl('req', '-x509', ...EC, '-keyout', 'self.key', '-out', 'self.crt', '-days', '2', '-subj', '/CN=self', '-addext', 'subjectAltName=IP:127.0.0.1');
const selfSigned = await httpsUpstream({ key: readFileSync(file('self.key'), 'utf8'), cert: readFileSync(file('self.crt'), 'utf8') });

/** A plain HTTP server: what an https:// serviceLocation pointing at the wrong port meets. */
async function plainHttpUpstream(): Promise<string> {
  const server = createHttpServer((_req, res) => res.end('plain'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
const plainHttp = await plainHttpUpstream();

/** A gateway of one worker in front of `upstreams`, quick to give up on discovery and connections. */
function gatewayWith(t: Teardown, upstreams: unknown[]): ReturnType<typeof startGateway> {
  return startGateway(t, {
    workers: 1,
    config: {
      host: '127.0.0.1',
      port: 0,
      discovery: { fetchTimeoutMs: 3000, retries: 0, backoffMs: 100, refreshIntervalMs: 0 },
      timeouts: { upstreamMs: 5000, connectMs: 2000, clientRequestMs: 10_000, shutdownGraceMs: 2000 },
      upstreams,
    },
    waitFor: (line) => line.msg === 'gateway operational',
  });
}

t.test('through the running gateway', async (t) => {
  const caFile = file('ca1.crt');
  const gateway = await gatewayWith(t, [
        { serviceType: 'swagger2', serviceLocation: documented.location, tls: { caFile } },
        { serviceType: 'static', serviceLocation: named.location, endpoints: [{ method: 'GET', path: '/named/{id}' }], tls: { caFile, serverName: 'api.internal' } },
        { serviceType: 'static', serviceLocation: wrongName.location, endpoints: [{ method: 'GET', path: '/wrong-name' }], tls: { caFile } },
        { serviceType: 'static', serviceLocation: otherCa.location, endpoints: [{ method: 'GET', path: '/other-ca' }], tls: { caFile } },
        {
          serviceType: 'static',
          serviceLocation: mutual.location,
          endpoints: [{ method: 'GET', path: '/mutual' }],
          tls: { caFile, certFile: file('gateway-client.crt'), keyFile: file('gateway-client.key') },
        },
        { serviceType: 'static', serviceLocation: mutualNoCert.location, endpoints: [{ method: 'GET', path: '/mutual-no-cert' }], tls: { caFile } },
  ]);

  const secure = await httpRequest(gateway.port, '/secure/7');
  t.equal(secure.status, 200, 'the doc was fetched over TLS with caFile, and the request forwarded over TLS');
  t.same(JSON.parse(secure.body), { secure: true, path: '/secure/7' });

  const byServerName = await httpRequest(gateway.port, '/named/1');
  t.equal(byServerName.status, 200, 'serverName: the certificate names api.internal, not the address');
  t.equal(named.seen[0]?.servername, 'api.internal', 'sent as SNI');

  const withClientCert = await httpRequest(gateway.port, '/mutual');
  t.equal(withClientCert.status, 200, 'an upstream that requires a client certificate gets one');
  t.equal(mutual.seen[0]?.clientCN, 'gateway-client');

  for (const [what, route] of [['a certificate for another name', '/wrong-name'], ['a certificate from another CA', '/other-ca']] as const) {
    const refused = await httpRequest(gateway.port, route);
    t.equal(refused.status, 502, `${what}: 502`);
    t.match(JSON.parse(refused.body), { status: 502, detail: /TLS handshake with the upstream failed/ }, `${what}: problem+json`);
  }
  t.equal(wrongName.seen.length + otherCa.seen.length, 0, 'nothing reached those upstreams');

  const noCert = await httpRequest(gateway.port, '/mutual-no-cert');
  t.equal(noCert.status, 502, 'an upstream that requires a client certificate, none configured: 502');
  t.match(JSON.parse(noCert.body), { detail: 'the TLS handshake with the upstream failed: the upstream refused it' }, 'a TLS failure naming the refusal, not a reset');
  t.equal(mutualNoCert.seen.length, 0);
  const refusedLine = await gateway.waitForLog((l) => String(l.msg).startsWith('upstream TLS handshake failed') && l.upstream === mutualNoCert.location, 5000, 'its warn line');
  t.equal(refusedLine.level, 40);

  const metrics = await eventually(
    async () => {
      const body = JSON.parse((await httpRequest(gateway.port, '/metrics')).body) as { upstreamFailures?: { tlsFailures?: number } };
      return (body.upstreamFailures?.tlsFailures ?? 0) >= 3 ? body : undefined;
    },
    5000,
  );
  t.equal(metrics.upstreamFailures!.tlsFailures, 3, 'counted as upstreamFailures.tlsFailures');
  const prometheus = (await httpRequest(gateway.port, '/metrics', { headers: { accept: 'text/plain' } })).body;
  t.match(prometheus, /gateway_upstream_failures_total\{reason="tls_failures"\} 3/);
});

t.test('a reload reads the files again: the data plane given the new config trusts the new CA', async (t) => {
  const trust = file('trust.pem');
  writeFileSync(trust, ca1);
  const configFile = file('reload.json');
  writeFileSync(
    configFile,
    JSON.stringify({
      host: '127.0.0.1',
      port: 0,
      logLevel: 'silent',
      upstreams: [{ serviceType: 'static', serviceLocation: otherCa.location, endpoints: [{ method: 'GET', path: '/other-ca' }], tls: { caFile: 'trust.pem' } }],
    }),
  );
  const first = loadConfig(configFile, {});
  t.equal(first.upstreams[0]!.tls?.ca, ca1, 'the relative caFile was read from beside the config file');
  const counters = new Counters();
  const plane = await startDataPlane({ config: first, counters });
  t.teardown(() => plane.close());
  plane.setTable(RoutingTable.compile([entry('GET', '/other-ca', otherCa.location)]).table);
  const get = async () => (await rawRequest(plane.port, 'GET /other-ca HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 })).responses[0]!;
  t.equal((await get()).status, 502, 'the upstream is signed by another CA: refused');

  writeFileSync(trust, ca2);
  const reloaded = loadConfig(configFile, {});
  t.equal(reloaded.upstreams[0]!.tls?.ca, ca2, 'the reload read the file again');
  plane.setUpstreams(reloaded.upstreams, reloaded);
  const after = await get();
  t.equal(after.status, 200, 'a new pool, with the new CA');
  t.same(JSON.parse(after.body.toString()), { secure: true, path: '/other-ca' });
  t.equal((counters.take() ?? {})['upstreamFailures.tlsFailures'], 1);
});

t.test('a failed handshake: the 502 says what kind, the log says why, once per upstream per 10 s', async (t) => {
  const gateway = await gatewayWith(t, [
        { serviceType: 'static', serviceLocation: selfSigned.location, endpoints: [{ method: 'GET', path: '/self-signed' }] },
        { serviceType: 'static', serviceLocation: wrongName.location, endpoints: [{ method: 'GET', path: '/wrong-name' }], tls: { caFile: file('ca1.crt') } },
        { serviceType: 'static', serviceLocation: plainHttp, endpoints: [{ method: 'GET', path: '/plain' }] },
  ]);
  const cases = [
    ['/self-signed', selfSigned.location, 'its certificate is not trusted', 'self-signed certificate (DEPTH_ZERO_SELF_SIGNED_CERT)'],
    ['/wrong-name', wrongName.location, 'its certificate is for another name', "Hostname/IP does not match certificate's altnames: IP: 127.0.0.1 is not in the cert's list: (ERR_TLS_CERT_ALTNAME_INVALID)"],
    ['/plain', plainHttp, 'the upstream does not speak TLS on that port', 'wrong version number (ERR_SSL_WRONG_VERSION_NUMBER)'],
  ] as const;
  for (const [route, upstream, detail, reason] of cases) {
    for (let i = 0; i < 5; i++) {
      const answer = await httpRequest(gateway.port, route);
      t.equal(answer.status, 502);
      t.equal((JSON.parse(answer.body) as { detail: string }).detail, `the TLS handshake with the upstream failed: ${detail}`, `${route}: the 502 says ${detail}`);
    }
    const line = await gateway.waitForLog((l) => l.upstream === upstream && String(l.msg).startsWith('upstream TLS handshake failed'), 5000, `the log line for ${route}`);
    t.equal(line.level, 40, 'at warn');
    t.equal(line.msg, `upstream TLS handshake failed: ${reason}`, `${route}: the log says why`);
  }
  await new Promise((resolve) => setTimeout(resolve, 300));
  const lines = gateway.lines.filter((l) => String(l.msg).startsWith('upstream TLS handshake failed'));
  t.equal(lines.length, 3, 'five failures of each upstream within 10 s: one line each');
});

t.test('the log line of an upstream that keeps failing: one per 10 s, with the count left out since', async (t) => {
  let now = 0;
  const logged: Array<[Record<string, unknown>, string]> = [];
  const log = new TlsFailureLog((fields, message) => logged.push([fields, message]), () => now);
  const selfSignedError = Object.assign(new Error('self-signed certificate'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
  for (let i = 0; i < 4; i++) {
    log.report('https://a:1', selfSignedError);
    now += 2000;
  }
  log.report('https://b:1', selfSignedError);
  t.same(logged.map(([fields]) => fields.upstream), ['https://a:1', 'https://b:1'], 'the first failure of each upstream is logged');
  now = 10_000;
  log.report('https://a:1', selfSignedError);
  t.same(logged[2], [
    { upstream: 'https://a:1', code: 'DEPTH_ZERO_SELF_SIGNED_CERT', suppressed: 3 },
    'upstream TLS handshake failed: self-signed certificate (DEPTH_ZERO_SELF_SIGNED_CERT) (3 more since the last line)',
  ]);
});

t.test('a plain HTTP server behind https://, seen by a write made before the handshake ended (EPROTO): the same kind and reason as seen by the handshake', async (t) => {
  const written = Object.assign(
    new Error('write EPROTO 40E7C1F6A37F0000:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:../deps/openssl/openssl/ssl/record/ssl3_record.c:354:\n'),
    { code: 'EPROTO' },
  );
  t.equal(tlsFailureKind(written), 'notTls');
  t.equal(tlsFailureReason(written), 'wrong version number (EPROTO)', "OpenSSL's reason alone, no thread, file or line");
  const handshake = Object.assign(new Error('ssl3_get_record:wrong version number'), { code: 'ERR_SSL_WRONG_VERSION_NUMBER', reason: 'wrong version number' });
  t.equal(tlsFailureKind(handshake), 'notTls');
  t.equal(tlsFailureReason(handshake), 'wrong version number (ERR_SSL_WRONG_VERSION_NUMBER)');
  t.equal(tlsFailureKind(Object.assign(new Error('write EPROTO something else'), { code: 'EPROTO' })), 'other', 'another EPROTO stays "other"');
});
