/**
 * What the operators see of the TLS certificates: each one's file, names and notAfter in the health
 * report and /metrics, a Prometheus gauge of the expiry per server name, and a log warning from
 * 14 days before a certificate expires.
 */
import type { ListenerTlsConfig } from './types.js';

export interface CertificateHealth {
  certFile: string;
  serverNames: string[];
  notAfter: string;
}

/** Certificates expiring sooner than this are warned about. */
export const EXPIRY_WARNING_MS = 14 * 24 * 3600 * 1000;

export function certificateReport(tls: ListenerTlsConfig | undefined): CertificateHealth[] | undefined {
  if (tls === undefined) return undefined;
  return tls.certificates.map((c) => ({ certFile: c.certFile, serverNames: [...c.serverNames], notAfter: c.notAfter ?? '' }));
}

/** `gateway_tls_certificate_expiry_timestamp_seconds{server_name}`; the first certificate also as server_name="" (no SNI). */
export function certificateGauge(tls: ListenerTlsConfig | undefined): string {
  if (tls === undefined) return '';
  const lines = [
    '# HELP gateway_tls_certificate_expiry_timestamp_seconds notAfter of the certificate served for a server name ("" = clients without SNI), in Unix seconds.',
    '# TYPE gateway_tls_certificate_expiry_timestamp_seconds gauge',
  ];
  tls.certificates.forEach((c, index) => {
    if (c.notAfter === undefined) return;
    const seconds = Math.floor(Date.parse(c.notAfter) / 1000);
    const names = index === 0 ? ['', ...c.serverNames] : c.serverNames;
    for (const name of names) lines.push(`gateway_tls_certificate_expiry_timestamp_seconds{server_name="${name.replace(/["\\]/g, '\\$&')}"} ${seconds}`);
  });
  return lines.join('\n') + '\n';
}

/** One message per certificate that expires within EXPIRY_WARNING_MS of `now` (or has expired). */
export function expiryWarnings(tls: ListenerTlsConfig | undefined, now: number): Array<{ certFile: string; serverNames: string[]; notAfter: string; msg: string }> {
  if (tls === undefined) return [];
  const warnings = [];
  for (const c of tls.certificates) {
    if (c.notAfter === undefined) continue;
    const left = Date.parse(c.notAfter) - now;
    if (left >= EXPIRY_WARNING_MS) continue;
    const days = Math.max(0, Math.floor(left / (24 * 3600 * 1000)));
    const msg = left <= 0 ? `TLS certificate ${c.certFile} has expired` : `TLS certificate ${c.certFile} expires in ${days} day${days === 1 ? '' : 's'}`;
    warnings.push({ certFile: c.certFile, serverNames: [...c.serverNames], notAfter: c.notAfter, msg });
  }
  return warnings;
}
