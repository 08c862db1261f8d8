/**
 * upstreams[].tls: the rules a schema cannot say, and the PEM files read into the config (`ca`,
 * `cert`, `key`), so the workers get their contents with the config and a reload reads them again.
 * Each file is checked by building a TLS context from it: a file that is not PEM, or a key that does
 * not match its certificate, refuses the config with the file and the key named.
 */
import { X509Certificate } from 'node:crypto';
import { FileReadError, MAX_PEM_BYTES, readBoundedFile } from './read-file.js';
import { dirname, resolve } from 'node:path';
import tls from 'node:tls';
import type { ConfigProblem } from './config-problem.js';
import type { GatewayConfig } from './types.js';

/** Reads every upstream's TLS files (relative paths from `baseDir`); the problems found, none when all is well. */
export function loadUpstreamTls(config: GatewayConfig, configFile: string): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const baseDir = dirname(resolve(configFile));
  config.upstreams.forEach((upstream, index) => {
    const settings = upstream.tls;
    if (settings === undefined) return;
    const pointer = `/upstreams/${index}/tls`;
    if (!upstream.serviceLocation.toLowerCase().startsWith('https:')) {
      problems.push({ pointer, reason: `TLS settings need an "https" serviceLocation (this one is ${JSON.stringify(upstream.serviceLocation)})` });
      return;
    }
    if ((settings.certFile === undefined) !== (settings.keyFile === undefined)) {
      const [given, missing] = settings.certFile === undefined ? ['keyFile', 'certFile'] : ['certFile', 'keyFile'];
      problems.push({ pointer: `${pointer}/${given}`, reason: `a client certificate needs both certFile and keyFile; ${missing} is missing` });
      return;
    }
    const read = (key: 'caFile' | 'certFile' | 'keyFile'): string | undefined => {
      const file = settings[key];
      if (file === undefined) return undefined;
      const path = resolve(baseDir, file);
      try {
        return readBoundedFile(path, MAX_PEM_BYTES).toString('utf8');
      } catch (err) {
        if (!(err instanceof FileReadError)) throw err;
        problems.push({ pointer: `${pointer}/${key}`, reason: `cannot read ${JSON.stringify(path)}: ${err.message}` });
        return undefined;
      }
    };
    const ca = read('caFile');
    const cert = read('certFile');
    const key = read('keyFile');
    if (ca !== undefined) {
      const reason = certificatesProblem(ca);
      if (reason !== null) problems.push({ pointer: `${pointer}/caFile`, reason: `${settings.caFile}: ${reason}` });
      else settings.ca = ca;
    }
    if (cert !== undefined && key !== undefined) {
      const reason = certificatesProblem(cert) ?? contextProblem({ cert, key });
      if (reason !== null) {
        problems.push({ pointer: `${pointer}/certFile`, reason: `${settings.certFile} with ${settings.keyFile}: not a usable client certificate and key (${reason})` });
      } else {
        settings.cert = cert;
        settings.key = key;
      }
    }
  });
  return problems;
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g;

/** Every PEM certificate block parses (OpenSSL skips broken CA blocks silently); at least one is there. */
function certificatesProblem(pem: string): string | null {
  const blocks = pem.match(PEM_CERTIFICATE);
  if (blocks === null) return 'holds no PEM certificate ("-----BEGIN CERTIFICATE-----")';
  for (let i = 0; i < blocks.length; i++) {
    try {
      new X509Certificate(blocks[i]!);
    } catch (err) {
      return `certificate ${i + 1} of ${blocks.length} does not parse (${(err as Error).message})`;
    }
  }
  return null;
}

function contextProblem(options: tls.SecureContextOptions): string | null {
  try {
    tls.createSecureContext(options);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}
