// The TLS listener against real TLS clients (node:tls/https, curl): the certificate per SNI name, the
// default one, wildcards, TLS 1.1 refused, X-Forwarded-Proto, HSTS, the plain port's modes.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';

// Two gateways start in one test on a shared, slow machine.
t.setTimeout(180_000);
import { CertificateDir } from '../helpers/certs.js';
import { REPO_ROOT } from '../helpers/repo-files.js';
import { tlsSchema } from '../../src/edge/schema.js';
import { loadListenerCertificates } from '../../src/edge/certificates.js';
import { files, httpsGet, presented } from '../helpers/tls-client.js';
import { eventually, httpRequest, startGateway, startUpstream, testConfig, type Teardown } from '../helpers/gateway-process.js';

export async function tlsGateway(t: Teardown, certificates: unknown[], tls: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) {
  const app = await startUpstream(t, {
    name: 'app',
    handle: (req, res) => {
      // /items/hsts: an upstream that sends its own Strict-Transport-Security, in a cacheable answer.
      const own = req.url === '/items/hsts' ? { 'strict-transport-security': 'max-age=1; includeSubDomains', 'cache-control': 'max-age=60' } : {};
      res.writeHead(200, { 'content-type': 'application/json', ...own });
      res.end(JSON.stringify({ proto: req.headers['x-forwarded-proto'], host: req.headers.host }));
    },
  });
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: app.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }], {
      tls: { port: 0, certificates, ...tls },
      ...extra,
    }),
    waitFor: (line) => line.msg === 'gateway operational',
    workers: 1,
  });
  const listening = await gateway.waitForLog((line) => line.msg === 'gateway listening');
  return { app, gateway, tlsPort: Number(listening.tlsPort) };
}

function curl(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('curl', ['-sS', '--max-time', '10', ...args], (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });
}

t.test('the certificate is picked by SNI: exact, then the wildcard of the most labels, else the first', async (t) => {
  const certs = new CertificateDir(t);
  const first = certs.make('first', 'first.test');
  const exact = certs.make('exact', 'api.example.com');
  const wild = certs.make('wild', 'wild.example.com', { names: ['*.example.com'] });
  const deeper = certs.make('deeper', 'deeper.example.com', { names: ['*.eu.example.com'] });
  const { tlsPort } = await tlsGateway(t, [
    { ...files(first), serverNames: ['first.test'] },
    { ...files(exact), serverNames: ['api.example.com'] },
    { ...files(wild), serverNames: ['*.example.com'] },
    { ...files(deeper), serverNames: ['*.eu.example.com'] },
  ]);
  t.ok(tlsPort > 0);
  const cases: Array<[string | undefined, string]> = [
    [undefined, 'first.test'],
    ['first.test', 'first.test'],
    ['api.example.com', 'api.example.com'],
    ['www.example.com', 'wild.example.com'],
    // "*" stands for one label, as TLS clients check a wildcard certificate.
    ['a.b.example.com', 'first.test'],
    ['x.eu.example.com', 'deeper.example.com'],
    ['a.b.eu.example.com', 'first.test'],
    // Upper case is not matched by uWS: the first certificate (clients send lower case in practice).
    ['API.EXAMPLE.COM', 'first.test'],
    ['example.com', 'first.test'],
    ['unknown.test', 'first.test'],
  ];
  for (const [name, cn] of cases) {
    t.equal((await presented(tlsPort, name)).cn, cn, `SNI ${name ?? '(none)'} -> ${cn}`);
    t.equal((await presented(tlsPort, name)).cn, cn, `again: SNI ${name ?? '(none)'} -> ${cn}`);
  }
  const v13 = await presented(tlsPort, 'api.example.com', { minVersion: 'TLSv1.3' });
  t.equal(v13.protocol, 'TLSv1.3', 'TLS 1.3 is served');
  const v12 = await presented(tlsPort, 'api.example.com', { maxVersion: 'TLSv1.2' });
  t.equal(v12.protocol, 'TLSv1.2', 'TLS 1.2 is served');
  await t.rejects(presented(tlsPort, 'api.example.com', { minVersion: 'TLSv1.1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT@SECLEVEL=0' }), /protocol version|unsupported protocol|wrong version/i, 'TLS 1.1 is refused');
  // What the schema, config/README.md and the config error say of minVersion is what was just measured.
  const said = /accepts? TLS 1\.2 and 1\.3 and cannot be told to refuse 1\.2/;
  t.match(tlsSchema.properties.minVersion.description, said, 'the schema says both are served');
  t.match(readFileSync(join(REPO_ROOT, 'config', 'README.md'), 'utf8').split('\n').find((l) => l.startsWith('| `tls.minVersion`')), said, 'so does config/README.md');
  t.match(loadListenerCertificates({ port: 1, plainPort: 'serve', minVersion: 'TLSv1.3', hstsMaxAgeS: 0, certificates: [] }, 'gw.json', {})[0]?.reason, said, 'so does the config error');

  const r = await httpsGet(tlsPort, '/items/1', 'www.example.com');
  t.equal(r.status, 200);
  t.equal(JSON.parse(r.body).proto, 'https', 'X-Forwarded-Proto: https upstream');
  t.equal(r.cn, 'wild.example.com');
  t.equal(r.headers['strict-transport-security'], undefined, 'no HSTS unless configured');

  // curl with --resolve, as an operator would check it.
  const out = await curl(['-k', '-v', '--resolve', `api.example.com:${tlsPort}:127.0.0.1`, `https://api.example.com:${tlsPort}/items/2`]);
  t.equal(out.code, 0, 'curl succeeds');
  t.match(out.stderr, /subject: CN=api\.example\.com/, 'curl sees the exact certificate');
  t.equal(JSON.parse(out.stdout).proto, 'https');
  const old = await curl(['-k', '--tlsv1.1', '--tls-max', '1.1', '--ciphers', 'DEFAULT@SECLEVEL=0', '--resolve', `api.example.com:${tlsPort}:127.0.0.1`, `https://api.example.com:${tlsPort}/items/2`]);
  t.not(old.code, 0, `curl --tls-max 1.1 fails (${old.stderr.trim()})`);
});

t.test('plainPort redirect answers 308 to https, built-ins are still served; HSTS over TLS', async (t) => {
  const certs = new CertificateDir(t);
  const first = certs.make('first', 'first.test');
  const { gateway, tlsPort } = await tlsGateway(
    t,
    [{ ...files(first), serverNames: ['first.test'] }],
    { plainPort: 'redirect', hstsMaxAgeS: 600 },
    { middleware: [{ id: 'cache', type: 'responseCache' }] },
  );
  const redirected = await httpRequest(gateway.port, '/items/7?x=1', { headers: { host: `first.test:${gateway.port}` } });
  t.equal(redirected.status, 308);
  t.equal(redirected.headers.location, `https://first.test:${tlsPort}/items/7?x=1`);
  t.equal((await httpRequest(gateway.port, '/healthcheck')).status, 200, 'the health check is served on the plain port');
  // Built-ins are matched after path normalization, as on any port.
  for (const path of ['/healthcheck/', '/./healthcheck', '/x/../healthcheck', '/%68ealthcheck']) {
    t.equal((await httpRequest(gateway.port, path)).status, 200, `${path} is the health check too`);
  }
  // A redirect is an answer like any: a request ID, counted in /metrics, in the access log.
  t.match(redirected.headers['x-request-id'], /\S/, 'the 308 carries a request ID');
  const counted = async (): Promise<true | undefined> => {
    const metrics = JSON.parse((await httpRequest(gateway.port, '/metrics')).body) as { requests: { byStatus: Record<string, number> } };
    return (metrics.requests.byStatus['308'] ?? 0) >= 1 ? true : undefined;
  };
  t.ok(await eventually(counted, 5000, 100, 'the 308 in /metrics'), 'counted in /metrics');
  t.ok(await eventually(async () => (gateway.accessLines().some((line) => line.status === 308 && line.path === '/items/7') ? true : undefined), 5000, 100, 'the access line'), 'written to the access log');
  t.equal((await httpRequest(gateway.port, '/items/./7/')).headers.location, `https://127.0.0.1:${tlsPort}/items/7`, 'to the normalized path');
  const ipv6 = await httpRequest(gateway.port, '/items/7', { headers: { host: '[::1]:8080' } });
  t.same([ipv6.status, ipv6.headers.location], [308, `https://[::1]:${tlsPort}/items/7`], 'an IPv6 literal keeps its brackets');
  // The Host becomes the Location's authority: one that is not a host and optional port is refused, as nginx does.
  for (const host of ['evil.com/x', 'a@evil.com', 'evil.com:x', 'evil.com?x', 'evil.com#x', '[::1']) {
    const refused = await httpRequest(gateway.port, '/p', { headers: { host } });
    t.equal(refused.status, 400, `Host ${host}: 400`);
    t.equal(refused.headers.location, undefined, 'no Location');
    t.equal(refused.headers['content-type'], 'application/problem+json');
    t.match(refused.body, 'the Host header is not a host and optional port');
  }
  const r = await httpsGet(tlsPort, '/items/1', 'first.test');
  t.equal(r.status, 200);
  t.equal(r.headers['strict-transport-security'], 'max-age=600');
  const missing = await httpsGet(tlsPort, '/nothing', 'first.test');
  t.equal(missing.status, 404);
  t.equal(missing.headers['strict-transport-security'], 'max-age=600', 'on the gateway\'s own answers too');
  const plain = await httpRequest(gateway.port, '/healthcheck');
  t.equal(plain.headers['strict-transport-security'], undefined, 'never over plain HTTP');
  // An upstream's own header would come first, and a browser reads only the first (RFC 6797 8.1).
  for (const label of ['MISS', 'HIT']) {
    const own = await httpsGet(tlsPort, '/items/hsts', 'first.test');
    t.equal(own.headers['x-cache'], label);
    t.equal(own.headers['strict-transport-security'], 'max-age=600', `${label}: only the gateway's Strict-Transport-Security`);
  }
});

t.test('plainPort off: only TLS is served; serve: both', async (t) => {
  const certs = new CertificateDir(t);
  const first = certs.make('first', 'first.test');
  const off = await tlsGateway(t, [{ ...files(first), serverNames: [] }], { plainPort: 'off' });
  t.equal(off.gateway.port, off.tlsPort, 'the gateway reports the TLS port');
  t.equal((await httpsGet(off.tlsPort, '/items/1', 'first.test')).status, 200);
  const serve = await tlsGateway(t, [{ ...files(first), serverNames: [] }]);
  const plain = await httpRequest(serve.gateway.port, '/items/1');
  t.equal(plain.status, 200);
  t.equal(JSON.parse(plain.body).proto, 'http', 'plain requests say http');
  // RFC 6797 7.2: an HSTS host never sends Strict-Transport-Security over plain HTTP, the upstream's included.
  t.equal((await httpRequest(serve.gateway.port, '/items/hsts')).headers['strict-transport-security'], undefined, "the upstream's HSTS is withheld on the plain port");
  t.equal((await httpsGet(serve.tlsPort, '/items/hsts', 'first.test')).headers['strict-transport-security'], 'max-age=1; includeSubDomains', 'and passed on over TLS (no hstsMaxAgeS of its own)');
});
