/**
 * upstreams[].tls and upstreamPool in the config: the PEM files are read when the config is loaded
 * (relative to the config file), and a file that cannot be used refuses the config with an error
 * naming the file and the key; upstreamPool takes its defaults and refuses bad values.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ConfigError, loadConfig } from '../../src/config/load.js';

const dir = mkdtempSync(path.join(tmpdir(), 'specgate-config-tls-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string): string => path.join(dir, name);
const openssl = (...args: string[]): void => void execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

openssl('req', '-x509', ...EC, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=test CA');
openssl('req', '-x509', ...EC, '-keyout', 'client.key', '-out', 'client.crt', '-days', '2', '-subj', '/CN=client');
openssl('req', '-x509', ...EC, '-keyout', 'other.key', '-out', 'other.crt', '-days', '2', '-subj', '/CN=other');
writeFileSync(file('not-pem.txt'), 'this is not a certificate\n');
writeFileSync(file('broken.crt'), '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n');

function load(tls: unknown, serviceLocation = 'https://10.0.0.7:8443', extra: Record<string, unknown> = {}) {
  const configFile = file('gateway.json');
  writeFileSync(configFile, JSON.stringify({ upstreams: [{ serviceType: 'static', serviceLocation, endpoints: [{ method: 'GET', path: '/a' }], tls }], ...extra }));
  return loadConfig(configFile, {});
}

function refusal(tls: unknown, serviceLocation?: string): ConfigError {
  try {
    load(tls, serviceLocation);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('the config was accepted');
}

t.test('files are read into the config, relative paths from the config file', async (t) => {
  const config = load({ caFile: 'ca.crt', certFile: file('client.crt'), keyFile: 'client.key', serverName: 'api.internal' });
  const tls = config.upstreams[0]!.tls!;
  t.equal(tls.ca, readFileSync(file('ca.crt'), 'utf8'));
  t.equal(tls.cert, readFileSync(file('client.crt'), 'utf8'));
  t.equal(tls.key, readFileSync(file('client.key'), 'utf8'));
  t.equal(tls.serverName, 'api.internal');
  t.equal(tls.rejectUnauthorized, true, 'certificates are checked by default');
});

t.test('a file that cannot be used: the error names the file and the key', async (t) => {
  const missing = refusal({ caFile: 'nowhere.pem' });
  t.equal(missing.pointer, '/upstreams/0/tls/caFile');
  t.match(missing.message, `${file('gateway.json')}: /upstreams/0/tls/caFile: cannot read "${file('nowhere.pem')}": no such file`);

  const notPem = refusal({ caFile: 'not-pem.txt' });
  t.equal(notPem.pointer, '/upstreams/0/tls/caFile');
  t.match(notPem.reason, /not-pem\.txt: holds no PEM certificate/);

  const broken = refusal({ caFile: 'broken.crt' });
  t.match(broken.reason, /broken\.crt: certificate 1 of 1 does not parse/);

  const mismatched = refusal({ certFile: 'client.crt', keyFile: 'other.key' });
  t.equal(mismatched.pointer, '/upstreams/0/tls/certFile');
  t.match(mismatched.reason, /client\.crt with other\.key: not a usable client certificate and key/);

  const keyIsNotPem = refusal({ certFile: 'client.crt', keyFile: 'not-pem.txt' });
  t.equal(keyIsNotPem.pointer, '/upstreams/0/tls/certFile');
});

t.test('rules a schema cannot say', async (t) => {
  const http = refusal({ caFile: 'ca.crt' }, 'http://10.0.0.7:8080');
  t.equal(http.pointer, '/upstreams/0/tls');
  t.match(http.reason, /need an "https" serviceLocation/);
  const half = refusal({ certFile: 'client.crt' });
  t.equal(half.pointer, '/upstreams/0/tls/certFile');
  t.match(half.reason, /needs both certFile and keyFile; keyFile is missing/);
  const unknown = refusal({ ca: 'inline PEM is not a key' });
  t.equal(unknown.pointer, '/upstreams/0/tls/ca', 'the loaded contents are not keys of the file');
});

t.test('upstreamPool: defaults, and bad values refused', async (t) => {
  const config = load(undefined, 'http://10.0.0.7:8080');
  t.same(config.upstreamPool, { connections: 1024, maxQueue: 1024, idleTimeoutMs: 4000, maxResponseHeaderBytes: 16384 });
  t.notOk('tls' in config.upstreams[0]!);
  const configFile = file('gateway.json');
  for (const [pool, pointer] of [
    [{ connections: 0 }, '/upstreamPool/connections'],
    [{ maxQueue: -1 }, '/upstreamPool/maxQueue'],
    [{ idleTimeoutMs: 1.5 }, '/upstreamPool/idleTimeoutMs'],
    [{ keepalive: 64 }, '/upstreamPool/keepalive'],
  ] as const) {
    writeFileSync(configFile, JSON.stringify({ upstreamPool: pool }));
    let refused: unknown = null;
    try {
      loadConfig(configFile, {});
    } catch (err) {
      refused = err;
    }
    t.ok(refused instanceof ConfigError && refused.pointer === pointer, `${JSON.stringify(pool)} refused at ${pointer}`);
  }
});
