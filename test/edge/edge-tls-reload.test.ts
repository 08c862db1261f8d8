// Certificate reload on SIGHUP: new handshakes get the new certificates while requests keep flowing
// (wrk over https and fresh TLS connections, 0 failures); a certificate that does not load refuses the
// reload, naming the file and why, and the running ones keep serving. Health, /metrics, expiry warning.
import { execFile } from 'node:child_process';
import { copyFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Agent, request } from 'node:https';
import t from 'tap';
import { RETIRE_MS } from '../../src/edge/listeners.js';
import { CertificateDir } from '../helpers/certs.js';
import { httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { loadListenerCertificates } from '../../src/edge/certificates.js';
import type { ListenerTlsConfig } from '../../src/edge/types.js';
import { files, presented } from '../helpers/tls-client.js';
import { migratesQueuedConnections } from '../helpers/kernel-settings.js';

/** Requests on fresh connections (one handshake each) until `stop`; counts answers and failures. */
function churn(port: number, servername: string, stop: { done: boolean }): Promise<{ ok: number; failed: string[] }> {
  const result = { ok: 0, failed: [] as string[] };
  const one = (): Promise<void> =>
    new Promise((resolve) => {
      const req = request({ host: '127.0.0.1', port, path: '/items/1', servername, rejectUnauthorized: false, agent: false, headers: { connection: 'close' } }, (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode === 200) result.ok++;
          else result.failed.push(`status ${res.statusCode}`);
          resolve();
        });
      });
      req.on('error', (err) => {
        result.failed.push(err.message);
        resolve();
      });
      req.end();
    });
  return (async () => {
    while (!stop.done) await one();
    return result;
  })();
}

function wrk(url: string, seconds: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('wrk', ['-t1', '-c8', `-d${seconds}s`, '--timeout', '5s', url], (err, stdout) => (err ? reject(err) : resolve(stdout)));
  });
}

t.test('SIGHUP swaps every certificate under load: no kept-alive request fails, a fresh connection only as the kernel allows; a bad one is refused', async (t) => {
  const certs = new CertificateDir(t);
  const first = certs.make('first', 'first-v1');
  const api = certs.make('api', 'api-v1', { names: ['api.example.com'], days: 5 });
  const app = await startUpstream(t, { name: 'app' });
  const config = testConfig([{ serviceType: 'static', serviceLocation: app.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }], {
    tls: {
      port: 0,
      certificates: [
        { ...files(first), serverNames: ['first.test'] },
        { ...files(api), serverNames: ['api.example.com'] },
      ],
    },
  });
  const gateway = await startGateway(t, { config, waitFor: (line) => line.msg === 'gateway operational', workers: 2, startTimeoutMs: 60_000 });
  const tlsPort = Number((await gateway.waitForLog((line) => line.msg === 'gateway listening')).tlsPort);

  const warning = await gateway.waitForLog((line) => typeof line.msg === 'string' && line.msg.startsWith(`TLS certificate ${api.certFile} expires in`), 5000, 'expiry warning');
  t.match(warning.msg, /expires in 4 days|expires in 5 days/, 'the log warns about the certificate that expires within 14 days');
  t.equal(gateway.lines.filter((l) => typeof l.msg === 'string' && l.msg.includes(first.certFile)).length, 0, 'and not about the others');

  const health = JSON.parse((await httpRequest(gateway.port, '/healthcheck')).body) as { tls: { certificates: Array<{ certFile: string; serverNames: string[]; notAfter: string }> } };
  t.same(health.tls.certificates.map((c) => [c.certFile, c.serverNames]), [[first.certFile, ['first.test']], [api.certFile, ['api.example.com']]], 'the health report lists the certificates');
  t.ok(Date.parse(health.tls.certificates[1]!.notAfter) - Date.now() < 6 * 24 * 3600 * 1000, 'with notAfter');
  const prometheus = await httpRequest(gateway.port, '/metrics', { headers: { accept: 'text/plain' } });
  const apiExpiry = Math.floor(Date.parse(health.tls.certificates[1]!.notAfter) / 1000);
  t.match(prometheus.body, `gateway_tls_certificate_expiry_timestamp_seconds{server_name="api.example.com"} ${apiExpiry}`, 'the Prometheus gauge per server name');
  t.match(prometheus.body, 'gateway_tls_certificate_expiry_timestamp_seconds{server_name=""}', 'and for clients without SNI');
  const metrics = JSON.parse((await httpRequest(gateway.port, '/metrics')).body) as { tlsCertificates: unknown[] };
  t.equal(metrics.tlsCertificates.length, 2, '/metrics JSON lists them');

  t.equal((await presented(tlsPort, 'api.example.com')).cn, 'api-v1');
  t.equal((await presented(tlsPort, undefined)).cn, 'first-v1');

  // New certificates at the same paths, then SIGHUP while wrk (keep-alive) and fresh connections run.
  const first2 = certs.make('first2', 'first-v2');
  const api2 = certs.make('api2', 'api-v2', { names: ['api.example.com'], days: 60 });
  const load = wrk(`https://127.0.0.1:${tlsPort}/items/1`, 6);
  const stop = { done: false };
  const fresh = [churn(tlsPort, 'api.example.com', stop), churn(tlsPort, 'first.test', stop)];
  await new Promise((r) => setTimeout(r, 1500));
  copyFileSync(first2.certFile, first.certFile);
  copyFileSync(first2.keyFile, first.keyFile);
  copyFileSync(api2.certFile, api.certFile);
  copyFileSync(api2.keyFile, api.keyFile);
  const reloadsBefore = gateway.lines.filter((l) => l.msg === 'config reloaded').length;
  gateway.signal('SIGHUP');
  await gateway.waitForLog(() => gateway.lines.filter((l) => l.msg === 'config reloaded').length > reloadsBefore, 20_000, 'config reloaded');
  const report = await load;
  stop.done = true;
  const [a, b] = await Promise.all(fresh);
  const requests = Number(/(\d+) requests in/.exec(report)?.[1] ?? 0);
  t.ok(requests > 0, `wrk made ${requests} requests over https`);
  t.notMatch(report, /Socket errors|Non-2xx/, 'wrk saw no socket error and no non-2xx answer');
  const failed = [...a!.failed, ...b!.failed];
  const answered = a!.ok + b!.ok;
  if (migratesQueuedConnections()) {
    t.same(failed, [], `fresh TLS connections during the reload: ${answered} answered, none failed`);
  } else {
    // net.ipv4.tcp_migrate_req=0 (the kernel default): the new first certificate needs a new listening
    // socket, and Linux resets the connections still queued on the old one when it closes (docs/edge.md).
    // A client sees a reset before any byte of answer; never a wrong answer, and kept-alive
    // connections (wrk above) are not touched.
    const reset = /^(connect|read|write) (ECONNRESET|EPIPE)\b|^socket hang up$|^Client network socket disconnected/;
    t.same(failed.filter((f) => !reset.test(f)), [], `fresh TLS connections during the reload: ${answered} answered, only resets before an answer (${failed.length})`);
    // Two clients connect one at a time, and each of the 2 workers swaps its socket once.
    t.ok(failed.length <= 4, `at most the connections queued at the swaps were reset (${failed.length} of ${answered + failed.length})`);
  }
  t.equal((await presented(tlsPort, 'api.example.com')).cn, 'api-v2', 'new handshakes get the new certificate for the name');
  for (let i = 0; i < 4; i++) t.equal((await presented(tlsPort, undefined)).cn, 'first-v2', 'and the new first certificate without SNI');
  t.equal((await presented(tlsPort, 'first.test')).cn, 'first-v2');

  // A key that does not match its certificate: refused, naming the file; the running ones keep serving.
  const other = certs.make('other', 'other');
  copyFileSync(other.keyFile, api.keyFile);
  gateway.signal('SIGHUP');
  const refused = await gateway.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('config reload refused'), 20_000, 'reload refused');
  t.match(refused.msg, `${api.keyFile}: the key does not match the certificate in ${api.certFile}`);
  t.equal((await presented(tlsPort, 'api.example.com')).cn, 'api-v2', 'the running certificate keeps serving');
  t.equal((await presented(tlsPort, undefined)).cn, 'first-v2');
  const newHealth = JSON.parse((await httpRequest(gateway.port, '/healthcheck')).body) as { tls: { certificates: Array<{ notAfter: string }> } };
  t.ok(Date.parse(newHealth.tls.certificates[1]!.notAfter) - Date.now() > 50 * 24 * 3600 * 1000, 'the health report shows the reloaded notAfter');
});

t.test('each certificate that does not load is refused with the file and why', async (t) => {
  const certs = new CertificateDir(t);
  const good = certs.make('good', 'good');
  const other = certs.make('other', 'other');
  const expired = certs.make('expired', 'expired', { expired: true });
  const locked = certs.make('locked', 'locked', { passphrase: 'sesame' });
  const notPem = join(certs.dir, 'not.pem');
  writeFileSync(notPem, 'hello\n');
  const check = (certificate: Record<string, unknown>, env: NodeJS.ProcessEnv = {}) => {
    const tls = { port: 1, plainPort: 'serve', minVersion: 'TLSv1.2', hstsMaxAgeS: 0, certificates: [{ serverNames: [], ...certificate }] } as unknown as ListenerTlsConfig;
    return loadListenerCertificates(tls, join(certs.dir, 'gw.json'), env).map((p) => `${p.pointer}: ${p.reason}`);
  };
  t.same(check(files(good)), [], 'a good one loads');
  t.same(check({ certFile: join(certs.dir, 'missing.pem'), keyFile: good.keyFile }), [`/tls/certificates/0/certFile: cannot read ${join(certs.dir, 'missing.pem')}: no such file`]);
  t.same(check({ certFile: good.certFile, keyFile: join(certs.dir, 'missing.key') }), [`/tls/certificates/0/keyFile: cannot read ${join(certs.dir, 'missing.key')}: no such file`]);
  t.same(check({ certFile: good.certFile, keyFile: other.keyFile }), [`/tls/certificates/0/keyFile: ${other.keyFile}: the key does not match the certificate in ${good.certFile}`]);
  t.match(check(files(expired))[0], `/tls/certificates/0/certFile: ${expired.certFile}: expired on `);
  const future = certs.make('future', 'future', { notYetValid: true });
  t.match(check(files(future))[0], `/tls/certificates/0/certFile: ${future.certFile}: not valid before 2030-01-01T00:00:00.000Z`);
  t.same(check({ certFile: notPem, keyFile: good.keyFile }), [`/tls/certificates/0/certFile: ${notPem}: not PEM: holds no "-----BEGIN CERTIFICATE-----" block`]);
  t.match(check({ certFile: good.certFile, keyFile: notPem })[0], `/tls/certificates/0/keyFile: ${notPem}: not a PEM private key`);
  t.same(check(files(locked)), [`/tls/certificates/0/keyFile: ${locked.keyFile}: the key is encrypted and no passphraseEnv is set`]);
  t.same(check({ ...files(locked), passphraseEnv: 'KEY_PASS' }), ['/tls/certificates/0/passphraseEnv: environment variable KEY_PASS (the passphrase of ' + locked.keyFile + ') is not set']);
  t.same(check({ ...files(locked), passphraseEnv: 'KEY_PASS' }, { KEY_PASS: 'wrong' }), [`/tls/certificates/0/keyFile: ${locked.keyFile}: the passphrase in KEY_PASS does not decrypt it`]);
  t.same(check({ ...files(locked), passphraseEnv: 'KEY_PASS' }, { KEY_PASS: 'sesame' }), [], 'the right passphrase loads');
  const relative = loadListenerCertificates(
    { port: 1, plainPort: 'serve', minVersion: 'TLSv1.2', hstsMaxAgeS: 0, certificates: [{ certFile: 'good.pem', keyFile: 'good.key', serverNames: [] }] },
    join(certs.dir, 'gw.json'),
    {},
  );
  t.same(relative, [], 'relative paths are relative to the config file');
});

t.test('at start a certificate that does not load is a config error naming the file; an encrypted key serves with its passphrase', async (t) => {
  const certs = new CertificateDir(t);
  const good = certs.make('good', 'good');
  const other = certs.make('other', 'other');
  const locked = certs.make('locked', 'locked', { passphrase: 'sesame', names: ['locked.test'] });
  const bad = await startGateway(t, {
    config: testConfig([], { tls: { port: 0, certificates: [{ certFile: good.certFile, keyFile: other.keyFile }] } }),
    waitForListening: false,
  });
  const exit = await bad.exited;
  t.not(exit.code, 0, 'the gateway does not start');
  t.match(bad.lines.map((l) => l.msg).join('\n') + bad.text(), `/tls/certificates/0/keyFile: ${other.keyFile}: the key does not match the certificate in ${good.certFile}`);

  const gateway = await startGateway(t, {
    config: testConfig([], { tls: { port: 0, certificates: [files(good), { ...files(locked), serverNames: ['locked.test'], passphraseEnv: 'LOCKED_PASS' }] } }),
    env: { LOCKED_PASS: 'sesame' },
    workers: 1,
    startTimeoutMs: 60_000,
  });
  const tlsPort = Number((await gateway.waitForLog((line) => line.msg === 'gateway listening')).tlsPort);
  t.equal((await presented(tlsPort, 'locked.test')).cn, 'locked', 'the encrypted key serves');
});

t.test('a name a reload drops: connections open under it keep being answered; new handshakes get what an unknown name gets', async (t) => {
  const certs = new CertificateDir(t);
  const first = certs.make('first', 'first');
  const ec = certs.make('ec', 'ec', { names: ['ec.test'] });
  const wild = certs.make('wild', 'wild', { names: ['*.wild.test'] });
  const a = certs.make('a', 'a-exact', { names: ['a.wild.test'] });
  const app = await startUpstream(t, { name: 'app' });
  const withCerts = (certificates: unknown[]): Record<string, unknown> =>
    testConfig([{ serviceType: 'static', serviceLocation: app.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }], { tls: { port: 0, certificates } });
  const gateway = await startGateway(t, {
    config: withCerts([
      { ...files(first), serverNames: ['first.test'] },
      { ...files(ec), serverNames: ['ec.test'] },
      { ...files(wild), serverNames: ['*.wild.test'] },
      { ...files(a), serverNames: ['a.wild.test'] },
    ]),
    waitFor: (line) => line.msg === 'gateway operational',
    workers: 1,
    startTimeoutMs: 60_000,
  });
  const tlsPort = Number((await gateway.waitForLog((line) => line.msg === 'gateway listening')).tlsPort);
  // One kept-alive connection under each name that the reload drops.
  const agents = ['ec.test', 'a.wild.test'].map((name) => ({ name, agent: new Agent({ keepAlive: true, maxSockets: 1 }) }));
  t.teardown(() => agents.forEach(({ agent }) => agent.destroy()));
  const get = (name: string, agent: Agent): Promise<{ status: number; reused: boolean }> =>
    new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: tlsPort, path: '/items/1', servername: name, headers: { host: name }, rejectUnauthorized: false, agent }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, reused: req.reusedSocket }));
      });
      req.on('error', reject);
      req.end();
    });
  for (const { name, agent } of agents) t.equal((await get(name, agent)).status, 200, `${name}: answered before`);

  gateway.writeConfig(withCerts([{ ...files(first), serverNames: ['first.test'] }, { ...files(wild), serverNames: ['*.wild.test'] }]));
  const reloads = gateway.lines.filter((l) => l.msg === 'config reloaded').length;
  gateway.signal('SIGHUP');
  await gateway.waitForLog(() => gateway.lines.filter((l) => l.msg === 'config reloaded').length > reloads, 20_000, 'config reloaded');

  for (const { name, agent } of agents) {
    for (let i = 0; i < 3; i++) {
      const answer = await get(name, agent);
      t.equal(answer.status, 200, `${name}: request ${i + 1} on the connection opened before the reload is answered`);
      t.ok(answer.reused, `${name}: on the same connection`);
    }
  }
  t.notOk(gateway.lines.some((l) => typeof l.msg === 'string' && l.msg.startsWith('worker killed')), 'no worker died (uWS crashed on a request under a removed name)');
  // The replaced app's socket accepts what queued on it for RETIRE_MS after the swap.
  await new Promise((resolve) => setTimeout(resolve, RETIRE_MS + 100));
  t.equal((await presented(tlsPort, 'ec.test')).cn, 'first', 'a new handshake for the dropped ec.test gets the first certificate, as an unknown name does');
  t.equal((await presented(tlsPort, 'a.wild.test')).cn, 'wild', 'one for the dropped a.wild.test gets the wildcard that covers it');
  t.equal((await presented(tlsPort, 'b.wild.test')).cn, 'wild');
});

t.test('a reload that changes tls.hstsMaxAgeS: answers over TLS carry the new Strict-Transport-Security at once', async (t) => {
  const certs = new CertificateDir(t);
  const first = certs.make('first', 'first');
  const app = await startUpstream(t, { name: 'app' });
  const withHsts = (hstsMaxAgeS: number): Record<string, unknown> =>
    testConfig([{ serviceType: 'static', serviceLocation: app.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }], {
      tls: { port: 0, hstsMaxAgeS, certificates: [{ ...files(first), serverNames: ['first.test'] }] },
    });
  const gateway = await startGateway(t, { config: withHsts(600), waitFor: (line) => line.msg === 'gateway operational', workers: 1, startTimeoutMs: 60_000 });
  const tlsPort = Number((await gateway.waitForLog((line) => line.msg === 'gateway listening')).tlsPort);
  const hsts = (): Promise<string | undefined> =>
    new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: tlsPort, path: '/items/1', servername: 'first.test', rejectUnauthorized: false, agent: false }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.headers['strict-transport-security'] as string | undefined));
      });
      req.on('error', reject);
      req.end();
    });
  t.equal(await hsts(), 'max-age=600', 'before the reload');
  const reload = async (hstsMaxAgeS: number): Promise<void> => {
    gateway.writeConfig(withHsts(hstsMaxAgeS));
    const reloads = gateway.lines.filter((l) => l.msg === 'config reloaded').length;
    gateway.signal('SIGHUP');
    await gateway.waitForLog(() => gateway.lines.filter((l) => l.msg === 'config reloaded').length > reloads, 20_000, 'config reloaded');
  };
  await reload(60);
  t.equal(await hsts(), 'max-age=60', 'a new max-age after the reload');
  await reload(0);
  t.equal(await hsts(), undefined, 'none once it is set to 0');
  t.notOk(gateway.lines.some((l) => l.msg === 'replacing workers to apply settings read at worker start'), 'applied on the running worker');
});
