import { createHash } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import { pipeline, type Readable, type Transform } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Agent, Dispatcher } from 'undici';
import type { UpstreamTlsConfig } from '../config/types.js';
import { parseDocText } from './parse-doc.js';
import type { DuplicateKeys } from './duplicate-keys.js';
import type { DiscoveryOptions } from './types.js';
import { timerDelay } from '../config/durations.js';
import { opensslReason } from '../proxy/upstream-tls-failures.js';

/** A doc larger than this is refused rather than buffered: no real API doc comes near it. */
export const MAX_DOC_BYTES = 32 * 1024 * 1024;

/** JSON first, but a service that only has YAML may answer with it. */
const ACCEPT = 'application/json, application/yaml;q=0.9, application/x-yaml;q=0.9, text/yaml;q=0.9, */*;q=0.5';

/** Docs run to megabytes of JSON (GitHub's: 11 MB) and compress about tenfold: asked for compressed, decoded here. */
const ACCEPT_ENCODING = 'gzip, deflate, br';

/** Which doc text a discovery read: the SHA-256 of its (decoded) body, and the ETag it came with. */
export interface DocVersion {
  sha256: string;
  etag?: string;
}

/**
 * The doc as parsed, and the keys a JSON doc holds twice. `unchanged` (value undefined, nothing
 * parsed): the upstream answered 304 to the `known` version's ETag, or the very same bytes.
 */
export interface FetchedDoc {
  value: unknown;
  duplicates?: DuplicateKeys;
  version?: DocVersion;
  unchanged?: true;
}

/** A failure worth retrying: the upstream may still be starting. */
class TransientFetchError extends Error {}

/**
 * GETs a doc and parses it as JSON or YAML (decided by the content: see parseDocText). Network errors,
 * timeouts and non-2xx answers are retried with exponential back-off; an answer that is neither JSON nor
 * YAML is not (it will not become a doc by asking again).
 */
export async function fetchDoc(url: string, options: DiscoveryOptions, tls?: UpstreamTlsConfig, known?: DocVersion): Promise<FetchedDoc> {
  const shown = shownUrl(url);
  const attempts = 1 + options.retries;
  let lastReason = '';
  // undici on the first fetch, not at start: loading it took 130 ms of the primary's start (CPU
  // profile of `gateway start`), spent for nothing by a config whose upstreams are all static.
  const client = await import('undici');
  // An upstream with TLS settings of its own (a private CA, a client certificate) is asked through them.
  const dispatcher = tls === undefined ? undefined : tlsAgent(client, tls);
  try {
    for (let attempt = 1; attempt <= attempts; attempt++) {
      try {
        if (attempt > 1) await sleep(timerDelay(options.backoffMs * 2 ** (attempt - 2)), undefined, { signal: options.signal });
        return await fetchOnce(client, url, shown, options, dispatcher, known);
      } catch (error) {
        if (options.signal?.aborted) throw new Error(`GET ${shown}: discovery was cancelled`, { cause: error });
        if (!(error instanceof TransientFetchError)) throw error;
        lastReason = error.message;
      }
    }
  } finally {
    void dispatcher?.close().catch(() => {});
  }
  const tries = attempts === 1 ? '1 attempt' : `${attempts} attempts`;
  throw new Error(`GET ${shown} failed (${tries}): ${lastReason}`);
}

/**
 * The doc's URL as errors show it, which reach the logs and the public health report: without
 * user and password, and with every query value replaced by "…" (a spec URL may carry a token:
 * `/spec?access_token=...`). The names stay, to tell the URLs apart.
 */
export function shownUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return '(invalid URL)';
  }
  url.username = '';
  url.password = '';
  let query = '';
  for (const name of new Set(url.searchParams.keys())) query += `${query === '' ? '?' : '&'}${encodeURIComponent(name)}=…`;
  return `${url.origin}${url.pathname}${query}`;
}

type Undici = typeof import('undici');

function tlsAgent(client: Undici, tls: UpstreamTlsConfig): Agent {
  return new client.Agent({
    connect: { ca: tls.ca, cert: tls.cert, key: tls.key, servername: tls.serverName, rejectUnauthorized: tls.rejectUnauthorized },
  });
}

/** One GET of the doc at `url`; `shown` is the URL as errors name it (shownUrl). */
async function fetchOnce(
  client: Undici,
  url: string,
  shown: string,
  options: DiscoveryOptions,
  dispatcher: Dispatcher | undefined,
  known: DocVersion | undefined,
): Promise<FetchedDoc> {
  // One controller per attempt, fed by the timer and the caller's signal; listeners are removed after,
  // so a long-lived caller signal (reused by every refresh) collects nothing.
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, options.fetchTimeoutMs);
  const forwardAbort = () => controller.abort();
  options.signal?.addEventListener('abort', forwardAbort, { once: true });
  if (options.signal?.aborted) controller.abort();
  let text: string;
  let contentType: string;
  let reading = '';
  let version: DocVersion;
  try {
    const headers: Record<string, string> = { accept: ACCEPT, 'accept-encoding': ACCEPT_ENCODING };
    if (known?.etag !== undefined) headers['if-none-match'] = known.etag;
    const response = await client.request(url, { method: 'GET', headers, signal: controller.signal, dispatcher });
    contentType = String(response.headers['content-type'] ?? 'none');
    if (response.statusCode === 304 && known?.etag !== undefined) {
      response.body.resume();
      return { value: undefined, version: known, unchanged: true };
    }
    if (response.statusCode < 200 || response.statusCode > 299) {
      response.body.resume();
      throw new TransientFetchError(`HTTP ${response.statusCode} ${STATUS_CODES[response.statusCode] ?? ''}`.trim() + redirectHint(response.statusCode));
    }
    const coding = response.headers['content-encoding'];
    if (coding !== undefined) reading = ` (reading a body with Content-Encoding ${String(coding)})`;
    const body = await readLimited(decoded(response.body, coding, shown), shown);
    const etag = response.headers.etag;
    version = { sha256: createHash('sha256').update(body).digest('hex'), ...(typeof etag === 'string' && etag !== '' ? { etag } : {}) };
    // The very bytes read last time: nothing to parse, validate or compile again.
    if (known !== undefined && version.sha256 === known.sha256) return { value: undefined, version, unchanged: true };
    text = body.toString('utf8');
  } catch (error) {
    if (error instanceof TransientFetchError || error instanceof DocTooLargeError || error instanceof DocCodingError) throw error;
    if (timedOut) throw new TransientFetchError(`timed out after ${options.fetchTimeoutMs} ms`);
    throw new TransientFetchError(describeNetworkError(error) + reading);
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', forwardAbort);
  }
  const parsed = parseDocText(text);
  if (!parsed.ok) throw new Error(`GET ${shown}: the answer is neither JSON nor YAML (content-type ${contentType}): ${parsed.reason}`);
  return { value: parsed.value, version, ...(parsed.duplicates ? { duplicates: parsed.duplicates } : {}) };
}

class DocTooLargeError extends Error {}
class DocCodingError extends Error {}

/**
 * The body with its Content-Encoding undone (the last coding applied is listed last). The size limit
 * applies to what comes out, so a small compressed doc cannot expand past it.
 */
function decoded(body: Readable, header: string | string[] | undefined, shown: string): Readable {
  const codings = (Array.isArray(header) ? header.join(',') : (header ?? ''))
    .split(',')
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== '' && coding !== 'identity');
  if (codings.length === 0) return body;
  const decoders: Transform[] = [];
  for (const coding of codings.reverse()) {
    const decoder = coding === 'gzip' || coding === 'x-gzip' ? createGunzip() : coding === 'deflate' ? createInflate() : coding === 'br' ? createBrotliDecompress() : null;
    if (decoder === null) {
      body.on('error', () => {}).destroy();
      throw new DocCodingError(`GET ${shown}: the doc comes with Content-Encoding "${coding}", which the gateway does not decode (it asks for ${ACCEPT_ENCODING})`);
    }
    decoders.push(decoder);
  }
  const last = decoders[decoders.length - 1]!;
  // Errors reach the reader through the last stream; destroying it (too large) destroys the others.
  pipeline([body, ...decoders], () => {});
  return last;
}

async function readLimited(body: Readable, shown: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_DOC_BYTES) {
      body.destroy();
      throw new DocTooLargeError(`GET ${shown}: the doc is larger than ${MAX_DOC_BYTES} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function redirectHint(status: number): string {
  return status >= 300 && status < 400 ? ' (redirects are not followed; point specPath at the final path)' : '';
}

function describeNetworkError(error: unknown): string {
  const { code, message } = error as { code?: string; message?: string };
  const cause = (error as { cause?: { code?: string; message?: string; reason?: string } }).cause;
  const detail = cause?.code ?? code;
  let text = (cause?.message ?? message ?? String(error)).split('\n')[0]!.trim();
  // OpenSSL's errors (in the public health report): its reason alone, as the forwarding log line says it.
  if (cause?.reason !== undefined && detail?.startsWith('ERR_SSL_') === true) text = cause.reason;
  else text = opensslReason(text) ?? text;
  return detail && !text.includes(detail) ? `${text} (${detail})` : text;
}
