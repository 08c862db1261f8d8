// Test certificates, generated with openssl into a temporary directory (never committed).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Teardown } from './gateway-process.js';

export interface TestCertificate {
  certFile: string;
  keyFile: string;
  /** The certificate's subject CN, which the tests read back from the peer certificate. */
  cn: string;
}

export interface CertificateOptions {
  /** subjectAltName DNS names; default [cn]. */
  names?: string[];
  /** Validity in days. */
  days?: number;
  /** Encrypts the key with this passphrase. */
  passphrase?: string;
  /** A validity window in the past (expired). */
  expired?: boolean;
  /** A validity window that starts in 2030 (not valid yet), signed by a throwaway CA. */
  notYetValid?: boolean;
}

export class CertificateDir {
  readonly dir: string;
  constructor(t: Teardown) {
    this.dir = mkdtempSync(join(tmpdir(), 'specgate-certs-'));
    t.teardown(() => rmSync(this.dir, { recursive: true, force: true }));
  }

  /** A self-signed RSA certificate named `file` (.pem and .key). */
  make(file: string, cn: string, options: CertificateOptions = {}): TestCertificate {
    const certFile = join(this.dir, `${file}.pem`);
    const keyFile = join(this.dir, `${file}.key`);
    const san = (options.names ?? [cn]).map((n) => `DNS:${n}`).join(',');
    const keyArgs = options.passphrase === undefined ? ['-nodes'] : ['-passout', `pass:${options.passphrase}`];
    if (options.notYetValid) {
      // OpenSSL 3.0's x509 cannot set notBefore; its ca command can (-startdate).
      const ca = join(this.dir, `${file}-ca`);
      mkdirSync(ca);
      writeFileSync(join(ca, 'index.txt'), '');
      writeFileSync(join(ca, 'serial'), '01\n');
      writeFileSync(
        join(ca, 'ca.cnf'),
        `[ca]\ndefault_ca = d\n[d]\ndatabase = ${ca}/index.txt\nnew_certs_dir = ${ca}\nserial = ${ca}/serial\ndefault_md = sha256\npolicy = p\n[p]\ncommonName = supplied\n`,
      );
      execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${ca}/ca.key`, '-out', `${ca}/ca.pem`, '-days', '3650', '-subj', '/CN=test-ca'], { stdio: 'ignore' });
      execFileSync('openssl', ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', `${certFile}.csr`, '-subj', `/CN=${cn}`], { stdio: 'ignore' });
      execFileSync(
        'openssl',
        ['ca', '-batch', '-config', `${ca}/ca.cnf`, '-in', `${certFile}.csr`, '-out', certFile, '-cert', `${ca}/ca.pem`, '-keyfile', `${ca}/ca.key`, '-startdate', '20300101000000Z', '-enddate', '20310101000000Z', '-notext'],
        { stdio: 'ignore' },
      );
      return { certFile, keyFile, cn };
    }
    if (options.expired) {
      // OpenSSL 3.0 has no -not_after; a negative -days dates notAfter a day before notBefore (now).
      execFileSync('openssl', ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', `${certFile}.csr`, '-subj', `/CN=${cn}`], { stdio: 'ignore' });
      execFileSync('openssl', ['x509', '-req', '-in', `${certFile}.csr`, '-key', keyFile, '-out', certFile, '-days', '-1'], { stdio: 'ignore' });
      return { certFile, keyFile, cn };
    }
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'rsa:2048', ...keyArgs, '-keyout', keyFile, '-out', certFile, '-days', String(options.days ?? 30), '-subj', `/CN=${cn}`, '-addext', `subjectAltName=${san}`],
      { stdio: 'ignore' },
    );
    return { certFile, keyFile, cn };
  }

  /**
   * A self-signed certificate for a key made by `openssl genpkey <genpkey>` (e.g. `-algorithm ED448`,
   * or `-paramfile dsa.pem`); `pkey` re-writes the key with `openssl pkey <pkey>` (an encryption, say).
   */
  makeWithKey(file: string, cn: string, genpkey: string[], pkey: string[] = []): TestCertificate {
    const certFile = join(this.dir, `${file}.pem`);
    const keyFile = join(this.dir, `${file}.key`);
    execFileSync('openssl', ['genpkey', ...genpkey, '-out', keyFile], { stdio: 'ignore' });
    execFileSync('openssl', ['req', '-x509', '-key', keyFile, '-out', certFile, '-days', '30', '-subj', `/CN=${cn}`, '-addext', `subjectAltName=DNS:${cn}`], { stdio: 'ignore' });
    if (pkey.length > 0) {
      execFileSync('openssl', ['pkey', '-in', keyFile, '-out', `${keyFile}.new`, ...pkey], { stdio: 'ignore' });
      renameSync(`${keyFile}.new`, keyFile);
    }
    return { certFile, keyFile, cn };
  }
}
