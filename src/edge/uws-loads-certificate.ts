/**
 * Whether the TLS library inside the uWebSockets.js binary (BoringSSL) loads a certificate and key
 * that node:crypto (OpenSSL) read. The two disagree on certificates that break X.509's encoding rules
 * (RFC 5280): a version 1 certificate with extensions, version 4, a UTCTime without seconds parse in
 * OpenSSL and not in BoringSSL. uWS 20.30's SSLApp throws on such a pair, but its addServerName (every
 * certificate after the first) dereferences the failed context: the worker dies (SIGSEGV), and so does
 * each one started to replace it. So the process that loads the config has uWS load every certificate
 * once, in an app made for that and closed at once, and a pair it refuses refuses the config.
 */
import { loadUws } from '../native/uws.js';
import type { UwsTlsOptions } from '../native/uws-types.js';
import { withTextFiles } from './uws-files.js';

/** Null when uWS loads `cert` (PEM chain) with `key` (PEM, under `passphrase` when given); else why not. */
export function uwsRefusal(cert: string, key: string, passphrase: string | undefined): string | null {
  const { uws } = loadUws();
  return withTextFiles([cert, key], ([certPath, keyPath]) => {
    const options: UwsTlsOptions = { cert_file_name: certPath!, key_file_name: keyPath! };
    if (passphrase !== undefined) options.passphrase = passphrase;
    try {
      uws.SSLApp(options).close?.();
      return null;
    } catch (err) {
      return (err as Error).message;
    }
  });
}
