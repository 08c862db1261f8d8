/** The `tls` key after validation; the loader (./certificates.ts) fills in each certificate's contents and facts. */
export interface ListenerTlsConfig {
  port: number;
  plainPort: 'serve' | 'redirect' | 'off';
  minVersion: 'TLSv1.2' | 'TLSv1.3';
  hstsMaxAgeS: number;
  certificates: ListenerCertificateConfig[];
}

export interface ListenerCertificateConfig {
  certFile: string;
  keyFile: string;
  passphraseEnv?: string;
  serverNames: string[];
  /** Filled by the loader: the certificate blocks and the key as read and checked, written anew as PEM (certificates.ts). */
  cert?: string;
  key?: string;
  /** Filled by the loader: the leaf certificate's facts. */
  notAfter?: string;
  fingerprint256?: string;
}
