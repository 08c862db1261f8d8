// Certificates and keys node:crypto reads but the TLS library inside the uWS binary (BoringSSL) does
// not load: a worker handed one died inside addServerName (SIGSEGV), and so did every worker started
// to replace it, while `gateway check` said ok and a SIGHUP reported the reload done. Whatever the
// reason, the loader now has uWS load each certificate once and refuses the config when it cannot;
// and a passphraseEnv that is set but empty (a key without one, or one encrypted under "") serves.
import { createPrivateKey } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { CertificateDir, type TestCertificate } from '../helpers/certs.js';
import { gateway as cli } from '../helpers/cli.js';
import { startGateway, testConfig, workerDeaths } from '../helpers/gateway-process.js';
import { files, presented } from '../helpers/tls-client.js';
import { within } from '../helpers/within.js';

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/;

/**
 * `pem` with its first certificate's version number set to `version` (0 is X.509 v1, 3 a "v4" no
 * standard defines), in place: TBSCertificate's `[0] EXPLICIT INTEGER 2` is the first thing in it.
 * The signature no longer matches; a server never checks its own, and neither library looks.
 */
function withVersion(pem: string, version: number): string {
  const block = PEM_CERTIFICATE.exec(pem)![0];
  const der = Buffer.from(block.split('\n').slice(1, -1).join(''), 'base64');
  const at = der.subarray(0, 16).indexOf(Buffer.from([0xa0, 0x03, 0x02, 0x01, 0x02]));
  if (at < 0) throw new Error('not a v3 certificate');
  der[at + 4] = version;
  const base64 = der.toString('base64').replace(/.{64}/g, '$&\n').trimEnd();
  return pem.replace(block, `-----BEGIN CERTIFICATE-----\n${base64}\n-----END CERTIFICATE-----`);
}

interface Broken {
  cert: TestCertificate;
  what: string;
}

function broken(certs: CertificateDir): Broken[] {
  const rewrite = (file: string, what: string, change: (pem: string) => string): Broken => {
    const cert = certs.make(file, `${file}.test`);
    writeFileSync(cert.certFile, change(readFileSync(cert.certFile, 'utf8')));
    return { cert, what };
  };
  // A chain's second certificate, as BoringSSL reads the intermediates after the leaf.
  const other = certs.make('other', 'other.test');
  const v1Intermediate = readFileSync(other.certFile, 'utf8');
  return [
    rewrite('v4', 'a leaf of version 4', (pem) => withVersion(pem, 3)),
    rewrite('v1ext', 'a version 1 leaf with extensions', (pem) => withVersion(pem, 0)),
    rewrite('chain', 'a version 1 intermediate with extensions', (pem) => `${pem.trimEnd()}\n${withVersion(v1Intermediate, 0)}`),
  ];
}

const REFUSED = 'the TLS library of the uWebSockets.js binary (BoringSSL) does not load it with its key';

t.test('gateway check and start: exit 1, each such certificate named with its file and why', async (t) => {
  const certs = new CertificateDir(t);
  const good = certs.make('good', 'good');
  const bad = broken(certs);
  const config = testConfig([], { tls: { port: 0, certificates: [files(good), ...bad.map((b) => ({ ...files(b.cert), serverNames: [b.cert.cn] }))] } });
  const file = join(certs.dir, 'gw.json');
  writeFileSync(file, JSON.stringify(config));
  const { code, stderr } = await cli('check', '--config', file);
  t.equal(code, 1, 'check fails');
  for (const [i, b] of bad.entries()) t.match(stderr, `${file}: /tls/certificates/${i + 1}/certFile: ${b.cert.certFile}: ${REFUSED}`, b.what);

  // As the first certificate too (the SSLApp every worker builds).
  const firstBad = testConfig([], { tls: { port: 0, certificates: [files(bad[0]!.cert)] } });
  const gateway = await startGateway(t, { config: firstBad, workers: 1, waitForListening: false });
  // Before, every worker failed and was replaced while the primary ran on: bounded, not a hang.
  const exit = await within(gateway.exited, 30_000, null);
  t.equal(exit?.code, 1, 'start refuses it');
  t.match(gateway.text() + gateway.lines.map((l) => JSON.stringify(l)).join('\n'), `/tls/certificates/0/certFile: ${bad[0]!.cert.certFile}: ${REFUSED}`);
});

t.test('SIGHUP adding one is refused; the running certificates keep serving and no worker dies', async (t) => {
  const certs = new CertificateDir(t);
  const first = certs.make('first', 'first');
  const api = certs.make('api', 'api', { names: ['api.test'] });
  const [v4, , chain] = broken(certs);
  const serving = [files(first), { ...files(api), serverNames: ['api.test'] }];
  const config = (certificates: unknown[]) => testConfig([], { tls: { port: 0, certificates } });
  const gateway = await startGateway(t, { config: config(serving), workers: 2, waitFor: (l) => l.msg === 'gateway operational', startTimeoutMs: 60_000 });
  const tlsPort = Number((await gateway.waitForLog((line) => line.msg === 'gateway listening')).tlsPort);

  let refusals = 0;
  for (const bad of [v4!, chain!]) {
    gateway.writeConfig(config([...serving, { ...files(bad.cert), serverNames: [bad.cert.cn] }]));
    gateway.signal('SIGHUP');
    refusals++;
    await gateway.waitForLog(() => gateway.lines.filter((l) => String(l.msg).startsWith('config reload refused')).length === refusals, 20_000, 'reload refused');
    const refused = gateway.lines.filter((l) => String(l.msg).startsWith('config reload refused'))[refusals - 1]!;
    t.match(refused.msg, `/tls/certificates/2/certFile: ${bad.cert.certFile}: ${REFUSED}`, bad.what);
  }
  // The workers would have met the certificate within moments of the reload: give them those moments.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  for (let i = 0; i < 4; i++) {
    t.equal((await presented(tlsPort, 'api.test')).cn, 'api', 'the running certificate for the name keeps serving');
    t.equal((await presented(tlsPort, undefined)).cn, 'first', 'and the first one without SNI');
  }
  t.same(workerDeaths(gateway), [], 'no worker died');
});

t.test('a passphraseEnv set to "": a key without a passphrase, and one encrypted under "", serve', async (t) => {
  const certs = new CertificateDir(t);
  const plain = certs.make('plain', 'plain');
  const underEmpty = certs.make('under-empty', 'under-empty', { names: ['empty.test'] });
  const key = createPrivateKey(readFileSync(underEmpty.keyFile));
  writeFileSync(underEmpty.keyFile, key.export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: '' }) as string);
  const config = testConfig([], {
    tls: {
      port: 0,
      certificates: [
        { ...files(plain), passphraseEnv: 'EMPTY_PASS' },
        { ...files(underEmpty), serverNames: ['empty.test'], passphraseEnv: 'EMPTY_PASS' },
      ],
    },
  });
  const file = join(certs.dir, 'gw.json');
  writeFileSync(file, JSON.stringify(config));
  const gateway = await startGateway(t, { config, workers: 1, env: { EMPTY_PASS: '' }, startTimeoutMs: 60_000 });
  const tlsPort = Number((await gateway.waitForLog((line) => line.msg === 'gateway listening')).tlsPort);
  for (let i = 0; i < 3; i++) {
    t.equal((await presented(tlsPort, undefined)).cn, 'plain', 'the first certificate');
    t.equal((await presented(tlsPort, 'empty.test')).cn, 'under-empty', 'the one whose key is encrypted under ""');
  }
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.same(workerDeaths(gateway), [], 'no worker died');
});
