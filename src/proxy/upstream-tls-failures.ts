/**
 * Why a TLS handshake with an upstream failed, from Node's error (the cause of an UpstreamError 'TLS'):
 * what the client's 502 says, and the warn line the operator gets, at most one per upstream every
 * 10 s with the count of those left out, so a broken upstream does not flood the log. Failure path only.
 */

import { LineThrottle } from '../log-throttle.js';

export type TlsFailureKind = 'certificate' | 'name' | 'notTls' | 'closed' | 'alert' | 'other';

/** Answers of a server that is not speaking TLS, as OpenSSL reads them (an HTTP answer to the hello, mostly). */
const NOT_TLS = new Set(['ERR_SSL_WRONG_VERSION_NUMBER', 'ERR_SSL_PACKET_LENGTH_TOO_LONG', 'ERR_SSL_HTTP_REQUEST', 'ERR_SSL_UNKNOWN_PROTOCOL']);
/** A system error code (ECONNRESET, EPIPE): the connection, not TLS, gave out. */
const ERRNO = /^E[A-Z]+$/;

interface NodeTlsError {
  code?: string;
  message?: string;
  /** OpenSSL's reason ("wrong version number"), on ERR_SSL_* errors. */
  reason?: string;
}

/**
 * OpenSSL's reason in one of its raw error strings ("<thread>:error:<hex>:SSL routines:<function>:
 * <reason>:<source file>:<line>", as Node's EPROTO messages and fetch's causes carry them); null when
 * `text` is not one.
 */
export function opensslReason(text: string): string | null {
  return /:SSL routines:[^:]*:([^:]+):/.exec(text)?.[1] ?? null;
}

export function tlsFailureKind(cause: unknown): TlsFailureKind {
  const code = (cause as NodeTlsError | undefined)?.code ?? '';
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') return 'name';
  if (NOT_TLS.has(code)) return 'notTls';
  // The same refusal seen by a write made before the handshake ended (the WebSocket leg writes its
  // upgrade request at once): EPROTO, with OpenSSL's reason only in the message.
  if (code === 'EPROTO' && /wrong version number/.test((cause as NodeTlsError).message ?? '')) return 'notTls';
  if (/^ERR_SSL_.*ALERT/.test(code)) return 'alert';
  if (code === 'ECONNRESET' || code === 'EPIPE') return 'closed';
  // Certificate verification errors carry OpenSSL's X509 names (DEPTH_ZERO_SELF_SIGNED_CERT, CERT_HAS_EXPIRED, ...).
  if (code !== '' && !code.startsWith('ERR_') && !ERRNO.test(code)) return 'certificate';
  return 'other';
}

/** One line: Node's message (OpenSSL's reason for its errors), with the code ("self-signed certificate (DEPTH_ZERO_SELF_SIGNED_CERT)"). */
export function tlsFailureReason(cause: unknown): string {
  const err = (cause ?? {}) as NodeTlsError;
  // OpenSSL's messages are "<hex>:error:<hex>:SSL routines:<function>:<reason>:<source file>:<line>".
  const openssl = err.code?.startsWith('ERR_SSL_') === true && err.reason !== undefined;
  let text = ((openssl ? err.reason : err.message) ?? 'unknown').split('\n')[0]!.trim();
  // "write EPROTO <thread>:error:...": the reason alone.
  if (err.code === 'EPROTO') text = opensslReason(text) ?? text;
  return err.code === undefined ? text : `${text} (${err.code})`;
}

export type Warn = (fields: Record<string, unknown>, message: string) => void;

export class TlsFailureLog {
  private readonly upstreams = new Map<string, LineThrottle>();

  constructor(
    private readonly warn: Warn,
    private readonly now: () => number = Date.now,
  ) {}

  /** A handshake with `upstream` (an origin) failed with `cause`. */
  report(upstream: string, cause: unknown): void {
    let throttle = this.upstreams.get(upstream);
    if (throttle === undefined) this.upstreams.set(upstream, (throttle = new LineThrottle()));
    const suppressed = throttle.take(this.now());
    if (suppressed === null) return;
    const code = (cause as NodeTlsError | undefined)?.code;
    const fields: Record<string, unknown> = { upstream, code };
    if (suppressed > 0) fields.suppressed = suppressed;
    this.warn(fields, `upstream TLS handshake failed: ${tlsFailureReason(cause)}${suppressed > 0 ? ` (${suppressed} more since the last line)` : ''}`);
  }
}
