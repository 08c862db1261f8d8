/**
 * The TLS listener's certificates, read and checked where the config is loaded (the primary, at start
 * and at every SIGHUP), so a worker never hands uWS a file that does not load (uWS 20.30 crashes the
 * process on one). A certificate that does not load refuses the config, naming the file and why.
 *
 * What the workers get is written anew from what node:crypto read: the certificate blocks alone, and
 * the key as PKCS#8 (encrypted with AES-256-CBC under the same passphrase when it was encrypted), a
 * form BoringSSL reads whatever form the file had (some encryptions, like scrypt or Camellia, it does not).
 * An empty passphrase writes it unencrypted: BoringSSL takes no empty passphrase. Last, uWS itself
 * loads what was written (./uws-loads-certificate.ts): OpenSSL reads some certificates BoringSSL refuses.
 */
import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { FileReadError, MAX_PEM_BYTES, readBoundedFile } from '../config/read-file.js';
import { dirname, resolve } from 'node:path';
import type { ConfigProblem } from '../config/config-problem.js';
import { unservableKey } from './key-types.js';
import { uwsRefusal } from './uws-loads-certificate.js';
import type { ListenerCertificateConfig, ListenerTlsConfig } from './types.js';

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g;

/** Reads and checks every certificate of `tls` in place; the problems found, none when all is well. */
export function loadListenerCertificates(tls: ListenerTlsConfig | undefined, configFile: string, env: NodeJS.ProcessEnv, now = Date.now()): ConfigProblem[] {
  if (tls === undefined) return [];
  const problems: ConfigProblem[] = [];
  if (tls.minVersion === 'TLSv1.3') {
    problems.push({
      pointer: '/tls/minVersion',
      reason: 'the uWebSockets.js build in use accepts TLS 1.2 and 1.3 and cannot be told to refuse 1.2; use "TLSv1.2"',
    });
  }
  const baseDir = dirname(resolve(configFile));
  const seen = new Map<string, number>();
  tls.certificates.forEach((certificate, index) => {
    const pointer = `/tls/certificates/${index}`;
    for (const name of certificate.serverNames) {
      const key = name.toLowerCase();
      const first = seen.get(key);
      if (first !== undefined) problems.push({ pointer: `${pointer}/serverNames`, reason: `"${name}" is already served by certificate ${first}` });
      else seen.set(key, index);
    }
    const reason = loadCertificate(certificate, baseDir, env, now);
    if (reason !== null) problems.push({ pointer: `${pointer}/${reason.key}`, reason: reason.why });
  });
  return problems;
}

/** How far in the future a certificate's notBefore may be: this host's clock may run behind the issuer's. */
const NOT_BEFORE_SLACK_MS = 5 * 60_000;

interface Refusal {
  key: 'certFile' | 'keyFile' | 'passphraseEnv';
  why: string;
}

function loadCertificate(certificate: ListenerCertificateConfig, baseDir: string, env: NodeJS.ProcessEnv, now: number): Refusal | null {
  const certPath = resolve(baseDir, certificate.certFile);
  const keyPath = resolve(baseDir, certificate.keyFile);
  const cert = readPem(certPath);
  if (typeof cert !== 'string') return { key: 'certFile', why: cert.why };
  const blocks = cert.match(PEM_CERTIFICATE);
  if (blocks === null) return { key: 'certFile', why: `${certPath}: not PEM: holds no "-----BEGIN CERTIFICATE-----" block` };
  let leaf: X509Certificate | null = null;
  for (let i = 0; i < blocks.length; i++) {
    try {
      const parsed = new X509Certificate(blocks[i]!);
      leaf ??= parsed;
    } catch (err) {
      return { key: 'certFile', why: `${certPath}: certificate ${i + 1} of ${blocks.length} does not parse (${(err as Error).message})` };
    }
  }
  const notAfter = Date.parse(leaf!.validTo);
  if (notAfter <= now) return { key: 'certFile', why: `${certPath}: expired on ${new Date(notAfter).toISOString()}` };
  // Clients refuse it as surely as an expired one (a clock a little behind the issuer's is allowed for).
  const notBefore = Date.parse(leaf!.validFrom);
  if (notBefore > now + NOT_BEFORE_SLACK_MS) return { key: 'certFile', why: `${certPath}: not valid before ${new Date(notBefore).toISOString()}` };
  const key = readPem(keyPath);
  if (typeof key !== 'string') return { key: 'keyFile', why: key.why };
  let passphrase: string | undefined;
  if (certificate.passphraseEnv !== undefined) {
    passphrase = env[certificate.passphraseEnv];
    if (passphrase === undefined) return { key: 'passphraseEnv', why: `environment variable ${certificate.passphraseEnv} (the passphrase of ${keyPath}) is not set` };
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(passphrase === undefined ? { key, format: 'pem' } : { key, format: 'pem', passphrase });
  } catch (err) {
    const message = (err as Error).message;
    const encrypted = /ENCRYPTED/.test(key) || /passphrase|decrypt|interrupted or cancelled/i.test(message);
    const why = encrypted
      ? passphrase === undefined
        ? 'the key is encrypted and no passphraseEnv is set'
        : `the passphrase in ${certificate.passphraseEnv} does not decrypt it`
      : `not a PEM private key (${message})`;
    return { key: 'keyFile', why: `${keyPath}: ${why}` };
  }
  if (!leaf!.checkPrivateKey(privateKey)) return { key: 'keyFile', why: `${keyPath}: the key does not match the certificate in ${certPath}` };
  const unservable = unservableKey(leaf!.publicKey);
  if (unservable !== null) {
    return unservable.about === 'key' ? { key: 'keyFile', why: `${keyPath}: ${unservable.why}` } : { key: 'certFile', why: `${certPath}: ${unservable.why}` };
  }
  const chain = `${blocks.join('\n')}\n`;
  // BoringSSL reads no key under an empty passphrase (and the workers hand it none: listeners.ts).
  const encryptUnder = passphrase === '' ? undefined : passphrase;
  const pkcs8 = (
    encryptUnder === undefined
      ? privateKey.export({ type: 'pkcs8', format: 'pem' })
      : privateKey.export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: encryptUnder })
  ) as string;
  const refusal = uwsRefusal(chain, pkcs8, encryptUnder);
  if (refusal !== null) {
    return {
      key: 'certFile',
      why: `${certPath}: the TLS library of the uWebSockets.js binary (BoringSSL) does not load it with its key (${refusal}), though node:crypto reads both: a certificate that breaks X.509's encoding rules (RFC 5280), such as a version 1 certificate with extensions?`,
    };
  }
  certificate.certFile = certPath;
  certificate.keyFile = keyPath;
  certificate.cert = chain;
  certificate.key = pkcs8;
  certificate.notAfter = new Date(notAfter).toISOString();
  certificate.fingerprint256 = leaf!.fingerprint256;
  return null;
}

function readPem(path: string): string | { why: string } {
  try {
    return readBoundedFile(path, MAX_PEM_BYTES).toString('utf8');
  } catch (err) {
    if (!(err instanceof FileReadError)) throw err;
    return { why: `cannot read ${path}: ${err.message}` };
  }
}
