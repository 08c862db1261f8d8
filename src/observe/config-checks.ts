/** Config rules of the observe features the schema cannot say: the request ID header, where the access log goes, the collector URL. */
import { resolve } from 'node:path';
import { appendPathProblem } from '../config/append-path.js';
import type { ConfigProblem } from '../config/config-problem.js';
import type { GatewayConfig } from '../config/types.js';

/**
 * Header names `requestId.header` may not take: each is one the gateway itself writes on answers or
 * requests, or reads to frame, route, authenticate, cache or trace a request. The request ID is
 * written on every answer and, for a client the gateway does not trust, replaces whatever the client
 * sent under that name before the request goes upstream; under any of these names that breaks
 * something (docs/observability-tracing.md#request-ids).
 */
const RESERVED: ReadonlyArray<readonly [names: readonly string[], why: string]> = [
  [['content-length', 'transfer-encoding'], 'it frames the message: every answer would carry a second framing header, which a proxy in front reads its own way (RFC 9112 forbids Transfer-Encoding with Content-Length)'],
  [['connection', 'keep-alive', 'te', 'trailer', 'upgrade', 'expect'], 'it is a hop-by-hop or connection-control header, never forwarded as it is and read by every HTTP hop'],
  [['host', 'via', 'forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-real-ip'], 'the gateway routes by it or writes it for the upstream (client address, host and protocol)'],
  [['traceparent', 'tracestate'], 'it carries the W3C trace context the gateway reads and writes'],
  [['authorization', 'cookie', 'set-cookie', 'www-authenticate', 'x-consumer'], 'it carries credentials or the admitted consumer: a client\'s value would be replaced by an ID'],
  [['date', 'age', 'x-cache', 'ratelimit', 'ratelimit-policy', 'retry-after', 'strict-transport-security', 'location', 'x-gateway-worker'], 'the gateway writes it on answers'],
  [['cache-control', 'pragma', 'expires', 'etag', 'last-modified', 'vary', 'range', 'content-range', 'content-type', 'content-encoding', 'content-location', 'accept', 'accept-encoding', 'if-match', 'if-none-match', 'if-modified-since', 'if-unmodified-since', 'if-range', 'user-agent'], 'the response cache, the built-ins or the access log read it'],
];

const RESERVED_REASON = new Map<string, string>(RESERVED.flatMap(([names, why]) => names.map((name) => [name, why] as const)));

/** Why `name` (any case) cannot carry the request ID, or null when it can; `apiKeyHeaders` are the apiKeyAuth middleware's. */
export function reservedHeaderReason(name: string, apiKeyHeaders: readonly string[]): string | null {
  const lower = name.toLowerCase();
  const why = RESERVED_REASON.get(lower);
  if (why !== undefined) return why;
  if (lower.startsWith('proxy-')) return 'it is a hop-by-hop or connection-control header, never forwarded as it is and read by every HTTP hop';
  if (lower.startsWith('sec-websocket-')) return 'it belongs to the WebSocket handshake the gateway reads and writes';
  if (apiKeyHeaders.includes(lower)) return 'an apiKeyAuth middleware reads the API key from it: the key would be replaced by an ID (and logged)';
  return null;
}

/** `requestId.header` must not be a name the gateway writes or reads itself (RESERVED). */
export function checkRequestIdHeader(config: GatewayConfig): ConfigProblem[] {
  if (!config.requestId.enabled) return [];
  const header = config.requestId.header;
  const middleware: unknown[] = Array.isArray(config.middleware) ? config.middleware : [];
  const apiKeyHeaders = middleware.flatMap((m) => {
    const entry = m as { type?: unknown; header?: unknown } | null;
    return entry?.type === 'apiKeyAuth' ? [typeof entry.header === 'string' ? entry.header.toLowerCase() : 'x-api-key'] : [];
  });
  const why = reservedHeaderReason(header, apiKeyHeaders);
  return why === null ? [] : [{ pointer: '/requestId/header', reason: `"${header}" cannot carry the request ID: ${why}; choose a name of its own, such as "x-request-id"` }];
}

export function checkObserveConfig(config: GatewayConfig): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const destination = config.accessLog.destination;
  if (config.accessLog.enabled && destination !== 'stdout') {
    const path = resolve(destination);
    const reason = appendPathProblem(path);
    if (reason !== null) problems.push({ pointer: '/accessLog/destination', reason });
  }
  const endpoint = config.tracing?.otlpEndpoint;
  if (endpoint !== undefined && !URL.canParse(endpoint)) {
    problems.push({ pointer: '/tracing/otlpEndpoint', reason: `"${endpoint}" is not a URL (e.g. "http://127.0.0.1:4318/v1/traces")` });
  }
  return problems;
}
