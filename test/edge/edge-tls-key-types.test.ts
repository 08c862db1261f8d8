// Certificate keys that node:crypto reads but the TLS library inside the uWS binary (BoringSSL) does
// not: a worker handed one died inside addServerName (SIGSEGV) or could not build its SSLApp, in a
// crash loop. They are refused where the config is loaded (`gateway check`, start, SIGHUP), naming
// the file and why; the key types it serves do serve, as do keys in a form BoringSSL does not read
// (the loader writes them anew). The files uWS reads the key from do not outlive a crash.
import { execFileSync, spawn } from 'node:child_process';
import { createPublicKey, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { CertificateDir, type TestCertificate } from '../helpers/certs.js';
import { gateway as cli } from '../helpers/cli.js';
import { startGateway, testConfig, workerDeaths } from '../helpers/gateway-process.js';
import { files, presented } from '../helpers/tls-client.js';
import { reapOnExit } from '../helpers/reaper.js';
import { untapped } from '../helpers/untapped.js';
import { unservableKey } from '../../src/edge/key-types.js';

const SUPPORTED = 'use RSA (1024 to 16384 bits), ECDSA P-256/P-384/P-521 or Ed25519';

interface Unservable {
  cert: TestCertificate;
  field: 'certFile' | 'keyFile';
  why: string;
}

/** One certificate of each kind BoringSSL cannot serve, with what the config error says about it. */
function unservable(certs: CertificateDir): Unservable[] {
  const dsaParams = join(certs.dir, 'dsa-params.pem');
  execFileSync('openssl', ['genpkey', '-genparam', '-algorithm', 'DSA', '-pkeyopt', 'dsa_paramgen_bits:1024', '-out', dsaParams], { stdio: 'ignore' });
  const ec = (curve: string) => ['-algorithm', 'EC', '-pkeyopt', `ec_paramgen_curve:${curve}`];
  const kind = (file: string, genpkey: string[], field: Unservable['field'], why: string): Unservable => ({ cert: certs.makeWithKey(file, `${file}.test`, genpkey), field, why });
  return [
    kind('brainpool', ec('brainpoolP256r1'), 'keyFile', `key type ECDSA brainpoolP256r1 is not supported by the TLS library; ${SUPPORTED}`),
    kind('secp256k1', ec('secp256k1'), 'keyFile', `key type ECDSA secp256k1 is not supported by the TLS library; ${SUPPORTED}`),
    kind('p224', ec('P-224'), 'keyFile', `key type ECDSA secp224r1 is not supported by the TLS library; ${SUPPORTED}`),
    kind('ed448', ['-algorithm', 'ED448'], 'keyFile', `key type Ed448 is not supported by the TLS library; ${SUPPORTED}`),
    kind('rsa-pss', ['-algorithm', 'RSA-PSS', '-pkeyopt', 'rsa_keygen_bits:2048'], 'keyFile', `key type RSA-PSS is not supported by the TLS library; ${SUPPORTED}`),
    kind('dsa', ['-paramfile', dsaParams], 'keyFile', `key type DSA is not supported by the TLS library; ${SUPPORTED}`),
    kind('rsa512', ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:512'], 'keyFile', `an RSA key of 512 bits is too short for TLS 1.3 clients; ${SUPPORTED}`),
    kind(
      'explicit',
      [...ec('P-256'), '-pkeyopt', 'ec_param_enc:explicit'],
      'certFile',
      "its ECDSA P-256 key is written with explicit curve parameters, which the TLS library does not read; reissue it with the curve named (openssl's default)",
    ),
  ];
}

const problem = (file: string, index: number, bad: Unservable) =>
  `${file}: /tls/certificates/${index}/${bad.field}: ${bad.field === 'keyFile' ? bad.cert.keyFile : bad.cert.certFile}: ${bad.why}`;

t.test('gateway check: exit 1, each certificate BoringSSL cannot serve named with its file, field and why', async (t) => {
  const certs = new CertificateDir(t);
  const good = certs.make('good', 'good');
  const bad = unservable(certs);
  const config = testConfig([], { tls: { port: 8443, certificates: [files(good), ...bad.map((b) => ({ ...files(b.cert), serverNames: [b.cert.cn] }))] } });
  const file = join(certs.dir, 'gw.json');
  writeFileSync(file, JSON.stringify(config));
  const { code, stderr } = await cli('check', '--config', file);
  t.equal(code, 1, 'check fails');
  for (const [i, b] of bad.entries()) t.match(stderr, problem(file, i + 1, b), `names ${b.cert.cn}`);
});

t.test('an RSA key over 16384 bits is refused (BoringSSL crashed on 16400; generating one takes minutes, so the rule is checked on a public key)', async (t) => {
  const modulus = (bits: number) => Buffer.concat([Buffer.from([0x80]), randomBytes(bits / 8 - 2), Buffer.from([0x01])]).toString('base64url');
  const rsa = (bits: number) => createPublicKey({ key: { kty: 'RSA', n: modulus(bits), e: 'AQAB' }, format: 'jwk' });
  t.same(unservableKey(rsa(16400)), { about: 'key', why: `an RSA key of 16400 bits is longer than the TLS library reads; ${SUPPORTED}` });
  t.equal(unservableKey(rsa(16384)), null, '16384 bits is served');
});

t.test('the key types BoringSSL serves do serve, TLS 1.2 and 1.3, and keys in forms it cannot read are written anew', async (t) => {
  const certs = new CertificateDir(t);
  const first = certs.make('first', 'first');
  const ec = (curve: string) => ['-algorithm', 'EC', '-pkeyopt', `ec_paramgen_curve:${curve}`];
  const servable = [
    certs.makeWithKey('rsa1024', 'rsa1024.test', ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:1024']),
    certs.makeWithKey('p256', 'p256.test', ec('P-256')),
    certs.makeWithKey('p384', 'p384.test', ec('P-384')),
    certs.makeWithKey('p521', 'p521.test', ec('P-521')),
    certs.makeWithKey('ed25519', 'ed25519.test', ['-algorithm', 'ED25519']),
    certs.makeWithKey('p256-traditional', 'p256-traditional.test', ec('P-256'), ['-traditional']),
  ];
  // BoringSSL does not decrypt Camellia (uWS crashed on this key with the right passphrase).
  const camellia = certs.makeWithKey('camellia', 'camellia.test', ec('P-256'), ['-camellia256', '-passout', 'pass:sesame']);
  const tmp = mkdtempSync(join(tmpdir(), 'specgate-keytypes-tmp-'));
  t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
  const gateway = await startGateway(t, {
    config: testConfig([], {
      tls: {
        port: 0,
        certificates: [
          files(first),
          ...servable.map((c) => ({ ...files(c), serverNames: [c.cn] })),
          { ...files(camellia), serverNames: [camellia.cn], passphraseEnv: 'CAMELLIA_PASS' },
        ],
      },
    }),
    env: { CAMELLIA_PASS: 'sesame', TMPDIR: tmp },
    workers: 1,
    startTimeoutMs: 60_000,
  });
  const tlsPort = Number((await gateway.waitForLog((line) => line.msg === 'gateway listening')).tlsPort);
  for (const c of [...servable, camellia]) {
    for (const version of ['TLSv1.2', 'TLSv1.3']) {
      const got = await presented(tlsPort, c.cn, { minVersion: version, maxVersion: version });
      t.same([got.cn, got.protocol], [c.cn, version], `${c.cn} over ${version}`);
    }
  }
  t.same(workerDeaths(gateway), [], 'no worker died');
  t.same(readdirSync(tmp).filter((name) => name.startsWith('specgate-tls-')), [], 'no copy of a key is left in the temporary directory');
});

t.test('SIGHUP with a certificate BoringSSL cannot serve is refused; the running certificates keep serving and no worker restarts', async (t) => {
  const certs = new CertificateDir(t);
  const first = certs.make('first', 'first');
  const api = certs.make('api', 'api', { names: ['api.test'] });
  const [brainpool, , , ed448] = unservable(certs);
  const serving = [files(first), { ...files(api), serverNames: ['api.test'] }];
  const config = (certificates: unknown[]) => testConfig([], { tls: { port: 0, certificates } });
  const gateway = await startGateway(t, { config: config(serving), workers: 2, waitFor: (l) => l.msg === 'gateway operational', startTimeoutMs: 60_000 });
  const tlsPort = Number((await gateway.waitForLog((line) => line.msg === 'gateway listening')).tlsPort);
  const workersStarted = gateway.lines.filter((l) => l.msg === 'worker started').length;

  let refusals = 0;
  const reloadRefused = async (certificates: unknown[]) => {
    gateway.writeConfig(config(certificates));
    gateway.signal('SIGHUP');
    refusals++;
    await gateway.waitForLog(() => gateway.lines.filter((l) => String(l.msg).startsWith('config reload refused')).length === refusals, 20_000, 'reload refused');
    return gateway.lines.filter((l) => String(l.msg).startsWith('config reload refused'))[refusals - 1]!;
  };
  // A second certificate (the SIGSEGV in addServerName) and a new first one (the SSLApp that failed).
  const added = await reloadRefused([...serving, { ...files(ed448!.cert), serverNames: [ed448!.cert.cn] }]);
  t.match(added.msg, `/tls/certificates/2/keyFile: ${ed448!.cert.keyFile}: ${ed448!.why}`);
  const replaced = await reloadRefused([files(brainpool!.cert), serving[1]]);
  t.match(replaced.msg, `/tls/certificates/0/keyFile: ${brainpool!.cert.keyFile}: ${brainpool!.why}`);

  // The workers would have met the certificate within moments of the reload: give them those moments.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  for (let i = 0; i < 4; i++) {
    t.equal((await presented(tlsPort, 'api.test')).cn, 'api', 'the running certificate for the name keeps serving');
    t.equal((await presented(tlsPort, undefined)).cn, 'first', 'and the first one without SNI');
  }
  t.same(workerDeaths(gateway), [], 'no worker died');
  t.equal(gateway.lines.filter((l) => l.msg === 'worker started').length, workersStarted, 'no worker was started again');
});

t.test('the files uWS reads a key from are gone even when the process dies inside uWS', async (t) => {
  const certs = new CertificateDir(t);
  const good = certs.make('good', 'good');
  const ed448 = certs.makeWithKey('ed448', 'ed448.test', ['-algorithm', 'ED448']);
  const tmp = mkdtempSync(join(tmpdir(), 'specgate-crash-tmp-'));
  t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
  // What a worker did with an Ed448 certificate before the loader refused it: SIGSEGV in addServerName.
  const script = `
    import { readFileSync } from 'node:fs';
    import { loadUws } from ${JSON.stringify(fileURLToPath(new URL('../../src/native/uws.js', import.meta.url)))};
    import { withTextFiles } from ${JSON.stringify(fileURLToPath(new URL('../../src/edge/uws-files.js', import.meta.url)))};
    const { uws } = loadUws();
    const app = uws.SSLApp({ cert_file_name: ${JSON.stringify(good.certFile)}, key_file_name: ${JSON.stringify(good.keyFile)} });
    const texts = [readFileSync(${JSON.stringify(ed448.certFile)}, 'utf8'), readFileSync(${JSON.stringify(ed448.keyFile)}, 'utf8')];
    withTextFiles(texts, ([cert, key]) => app.addServerName('ed448.test', { cert_file_name: cert, key_file_name: key }));
    console.log('survived');`;
  const env = { ...process.env, TMPDIR: tmp };
  const child = spawn(...untapped(process.execPath, ['--input-type=module', '-e', script], env), { stdio: ['ignore', 'pipe', 'pipe'], env });
  reapOnExit(child, { group: false });
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const exit = await new Promise<NodeJS.Signals | number | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  t.equal(exit, 'SIGSEGV', `the process died inside uWS (${out.trim()})`);
  t.same(readdirSync(tmp), [], 'and left nothing in its temporary directory');
});
