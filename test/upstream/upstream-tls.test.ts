/**
 * HTTPS upstreams: a private CA made at test time with the openssl CLI (present on Debian with
 * node), passed as `ca`; SNI; refusal of an untrusted or misnamed certificate; client certificates.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import t from 'tap';
import { UpstreamPool, type UpstreamTlsOptions } from '../../src/upstream/pool.js';
import type { UpstreamError } from '../../src/upstream/call-errors.js';

const dir = mkdtempSync(path.join(tmpdir(), 'specgate-tls-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}
const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** A key and a certificate signed by the test CA, for `subjectAltName`. */
function issue(name: string, cn: string, altNames: string | null, clientAuth = false): { key: string; cert: string } {
  openssl('req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`);
  const ext = [clientAuth ? 'extendedKeyUsage=clientAuth' : 'extendedKeyUsage=serverAuth'];
  if (altNames !== null) ext.push(`subjectAltName=${altNames}`);
  writeFileSync(path.join(dir, `${name}.ext`), ext.join('\n') + '\n');
  openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.crt`, '-days', '2', '-extfile', `${name}.ext`);
  return { key: readFileSync(path.join(dir, `${name}.key`), 'utf8'), cert: readFileSync(path.join(dir, `${name}.crt`), 'utf8') };
}

openssl('req', '-x509', ...EC, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=specgate test CA',
  '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
const ca = readFileSync(path.join(dir, 'ca.crt'), 'utf8');
const good = issue('server', 'localhost', 'DNS:localhost,DNS:api.internal,IP:127.0.0.1');
const misnamed = issue('wrong', 'wrong.example', 'DNS:wrong.example');
const client = issue('client', 'gateway-client', null, true);

interface Seen {
  servername: string | false | null | undefined;
  clientCN: string | string[] | null;
}

async function httpsUpstream(cert: { key: string; cert: string }, requireClientCert = false): Promise<{ port: number; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const server = https.createServer({ ...cert, ca, requestCert: requireClientCert, rejectUnauthorized: requireClientCert }, (req, res) => {
    const socket = req.socket as TLSSocket;
    const peer = requireClientCert ? socket.getPeerCertificate() : null;
    seen.push({ servername: socket.servername, clientCN: peer?.subject?.CN ?? null });
    res.end('secure hello');
  });
  server.on('tlsClientError', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function get(origin: string, tls: UpstreamTlsOptions | undefined): Promise<{ status: number; body: string; error: UpstreamError | null }> {
  const pool = new UpstreamPool({ origin, tls, connectTimeoutMs: 3000 });
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let status = 0;
    pool.request('GET', '/', [], null, {
      onHead: (s) => ((status = s), true),
      onData: (c) => (chunks.push(Buffer.from(c)), true),
      onEnd: () => {
        pool.destroy();
        resolve({ status, body: Buffer.concat(chunks).toString(), error: null });
      },
      onError: (error) => {
        pool.destroy();
        resolve({ status, body: '', error });
      },
      onBodyDrain: () => {},
    });
  });
}

t.test('trusted through `ca`: works, with SNI from the host name', async (t) => {
  const upstream = await httpsUpstream(good);
  t.teardown(() => upstream.close());
  const viaName = await get(`https://localhost:${upstream.port}`, { ca });
  t.equal(viaName.error, null);
  t.equal(viaName.body, 'secure hello');
  t.equal(upstream.seen[0]!.servername, 'localhost', 'SNI is the origin host');
  const viaIp = await get(`https://127.0.0.1:${upstream.port}`, { ca });
  t.equal(viaIp.body, 'secure hello', 'an IP origin is checked against the IP SAN');
  t.notOk(upstream.seen[1]!.servername, 'no SNI for an IP literal');
  const named = await get(`https://127.0.0.1:${upstream.port}`, { ca, servername: 'api.internal' });
  t.equal(named.body, 'secure hello');
  t.equal(upstream.seen[2]!.servername, 'api.internal', 'servername overrides');
  // An address as servername (RFC 6066 3: SNI is for host names): checked against the IP SAN, not sent.
  const byAddress = await get(`https://localhost:${upstream.port}`, { ca, servername: '127.0.0.1' });
  t.equal(byAddress.body, 'secure hello', 'an address as servername: the IP SAN matches');
  t.notOk(upstream.seen[3]!.servername, 'and no SNI is sent for it');
  const otherAddress = await get(`https://localhost:${upstream.port}`, { ca, servername: '10.9.9.9' });
  t.equal(otherAddress.error?.code, 'TLS', 'an address the certificate does not name: refused');
});

t.test('without the CA: refused with code TLS, nothing sent', async (t) => {
  const upstream = await httpsUpstream(good);
  t.teardown(() => upstream.close());
  const r = await get(`https://127.0.0.1:${upstream.port}`, undefined);
  t.equal(r.error?.code, 'TLS');
  t.equal(r.error?.requestSent, false);
  t.equal(upstream.seen.length, 0);
});

t.test('a certificate for another name: refused', async (t) => {
  const upstream = await httpsUpstream(misnamed);
  t.teardown(() => upstream.close());
  const r = await get(`https://localhost:${upstream.port}`, { ca });
  t.equal(r.error?.code, 'TLS');
  t.match(r.error?.message, /altname|does not match|Hostname/i);
  t.equal(upstream.seen.length, 0);
  const insecure = await get(`https://localhost:${upstream.port}`, { rejectUnauthorized: false });
  t.equal(insecure.body, 'secure hello', 'rejectUnauthorized: false accepts it (tests only)');
});

t.test('client certificate presented when configured', async (t) => {
  const upstream = await httpsUpstream(good, true);
  t.teardown(() => upstream.close());
  const r = await get(`https://localhost:${upstream.port}`, { ca, cert: client.cert, key: client.key });
  t.equal(r.error, null);
  t.equal(upstream.seen[0]!.clientCN, 'gateway-client');
  const without = await get(`https://localhost:${upstream.port}`, { ca });
  t.ok(without.error !== null, `without a client certificate the upstream refuses (${without.error?.code})`);
  t.equal(upstream.seen.length, 1);
});
