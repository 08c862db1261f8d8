/**
 * apiKeyAuth (docs/reference/api-key-auth.md): a key from a header (or a query parameter), checked against SHA-256
 * digests from the config. An admitted request reaches the upstream with `X-Consumer: <consumer>` and,
 * with hideCredentials, without the key. On every routed request, where this runs or not, the
 * pipeline removes a client's X-Consumer and hidden keys (Pipeline.guarded), and the done phase keeps
 * query keys out of the access log and spans.
 *
 * Keys are compared by digest through a Map: the lookup's timing can only tell an attacker about
 * digests, which say nothing usable about keys. Keys that matched are remembered (at most one entry per
 * configured key, so no client can grow it), sparing a hash per request for the usual steady clients.
 */
import { createHash } from 'node:crypto';
import type { RequestContext } from '../exchange/context.js';
import type { EntryProblem } from '../config/typed-list-schema.js';
import { queryValue, withoutQueryParameters } from '../http/query-parameters.js';
import { CONSUMER_HEADER, problem, type Credentials, type Decision, type Middleware, type MiddlewareContext, type ProblemAnswer } from './types.js';

export interface ApiKeyAuthConfig {
  id: string;
  type: 'apiKeyAuth';
  slaMs: number;
  /** Request header carrying the key (lower-cased when loaded). */
  header: string;
  /** Query parameter carrying the key, or null. */
  query: string | null;
  keys: Array<{ consumer: string; sha256: string }>;
  hideCredentials: boolean;
}

export const apiKeyAuthSchema = {
  description: 'Admits requests that carry a known API key (docs/reference/api-key-auth.md).',
  required: ['keys'],
  properties: {
    header: {
      type: 'string',
      pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$",
      default: 'x-api-key',
      description: 'Request header that carries the key.',
    },
    query: {
      type: ['string', 'null'],
      minLength: 1,
      default: null,
      description: 'Query parameter that carries the key when the header is absent or empty; null: the header only.',
    },
    keys: {
      type: 'array',
      description: 'The accepted keys, as SHA-256 digests (`gateway hash-key` prints one); reloaded on SIGHUP.',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['consumer', 'sha256'],
        properties: {
          consumer: { type: 'string', minLength: 1, description: 'Who the key belongs to: sent upstream as X-Consumer.' },
          sha256: { type: 'string', pattern: '^[0-9a-fA-F]{64}$', description: 'Hex SHA-256 digest of the key.' },
        },
      },
    },
    hideCredentials: { type: 'boolean', default: true, description: 'Remove the key (header or query parameter) before forwarding.' },
  },
} as const;

/**
 * Why a consumer name cannot be sent as `X-Consumer: <consumer>`, or null. Visible ASCII and inner
 * spaces only: CR, LF and NUL would split the head (the upstream client refuses such a request:
 * every admitted request would fail), other controls and non-ASCII bytes are refused or read
 * differently by upstreams, and a quote or backslash needs escaping wherever the value is quoted.
 */
export function consumerProblem(consumer: string): string | null {
  if (!/^[\x20-\x7e]*$/.test(consumer)) return 'holds a control character or a non-ASCII character';
  if (/["\\]/.test(consumer)) return 'holds a quote or a backslash';
  if (consumer !== consumer.trim()) return 'starts or ends with a space';
  return null;
}

/** Rules between the keys: each consumer can be a header value; one digest names one consumer (a key would otherwise log in as whichever came last). */
export function apiKeyAuthProblems(config: ApiKeyAuthConfig): EntryProblem[] {
  const problems: EntryProblem[] = [];
  const first = new Map<string, number>();
  config.keys.forEach(({ consumer, sha256 }, index) => {
    const reason = consumerProblem(consumer);
    if (reason !== null) problems.push({ key: `keys/${index}/consumer`, reason: `${JSON.stringify(consumer)} ${reason}: it is sent upstream as the X-Consumer header, which takes visible ASCII and inner spaces only` });
    const digest = sha256.toLowerCase();
    const seen = first.get(digest);
    if (seen === undefined) {
      first.set(digest, index);
      return;
    }
    const other = config.keys[seen]!.consumer;
    if (other === consumer) return;
    problems.push({
      key: `keys/${index}/sha256`,
      reason: `the same digest as keys/${seen} (case aside): one key cannot be both ${JSON.stringify(other)} (keys/${seen}) and ${JSON.stringify(consumer)} (keys/${index})`,
    });
  });
  return problems;
}

export function sha256Hex(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}


class ApiKeyAuth implements Middleware {
  readonly type = 'apiKeyAuth';
  readonly failClosed = true;
  readonly id: string;
  readonly slaMs: number;
  private readonly header: string;
  private readonly query: string | null;
  private readonly hide: boolean;
  private readonly queryNames: readonly string[] | null;
  readonly credentials: Credentials;
  private readonly consumerByDigest = new Map<string, string>();
  /** Key -> consumer for keys that matched (bounded by the number of configured keys). */
  private readonly known = new Map<string, string>();
  private readonly unauthorized: ProblemAnswer;
  private readonly missing: ProblemAnswer;

  constructor(config: ApiKeyAuthConfig) {
    this.id = config.id;
    this.slaMs = config.slaMs;
    this.header = config.header.toLowerCase();
    this.query = config.query;
    this.hide = config.hideCredentials;
    this.queryNames = this.query === null ? null : [this.query];
    this.credentials = { header: this.header, query: this.query, hide: this.hide };
    for (const { consumer, sha256 } of config.keys) this.consumerByDigest.set(sha256.toLowerCase(), consumer);
    // The query name is written percent-encoded, as it would appear in a URL (and so never needs
    // escaping in the quoted string, whatever the configured name holds).
    const scheme = this.query === null ? `ApiKey header="${this.header}"` : `ApiKey header="${this.header}", query="${encodeURIComponent(this.query)}"`;
    const challenge = ['www-authenticate', scheme];
    const where = this.query === null ? `the ${this.header} header` : `the ${this.header} header or the ${this.query} query parameter`;
    this.missing = problem(401, `an API key is required in ${where}`, challenge);
    this.unauthorized = problem(401, 'the API key is not valid', challenge);
  }

  decide(ctx: RequestContext): Decision {
    // Several field lines are one value ("a, b"), which is no key: refused, whatever their order.
    // As the client sent it: another apiKeyAuth before this one may have withheld the same header.
    let key: string | null | undefined = ctx.clientFieldValue(this.header);
    // An empty header is no header: the query parameter is read then (a proxy in front may send the
    // header empty rather than not at all).
    const inQuery = this.query === null ? undefined : queryValue(ctx.clientQuery, this.query);
    if ((key === undefined || key === '') && inQuery !== undefined) key = inQuery;
    // Hidden keys leave the query before any answer (every occurrence, readable or not). The pipeline
    // takes them out of every other routed request, and the access log leaves them out whatever the answer.
    if (this.hide && inQuery !== undefined) ctx.query = withoutQueryParameters(ctx.query, this.queryNames!);
    if (key === undefined || key === '') return this.missing;
    // A first occurrence that does not percent-decode is a key, and no known one.
    if (key === null) return this.unauthorized;
    let consumer = this.known.get(key);
    if (consumer === undefined) {
      consumer = this.consumerByDigest.get(sha256Hex(key));
      if (consumer === undefined) return this.unauthorized;
      if (this.known.size < this.consumerByDigest.size) this.known.set(key, consumer);
    }
    ctx.consumer = consumer;
    ctx.removeRequestHeader(CONSUMER_HEADER);
    ctx.headers.push(CONSUMER_HEADER, consumer);
    if (this.hide) ctx.withhold(this.header);
    return undefined;
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

export function createApiKeyAuth(config: ApiKeyAuthConfig, _context: MiddlewareContext): Middleware {
  return new ApiKeyAuth(config);
}
