import { DEFAULT_BUCKETS_S } from '../metrics/buckets.js';
/**
 * JSON Schema (draft-07) of the gateway config file. ajv fills the defaults; rules a schema cannot say
 * well (URL shape, duplicates) live in ./semantic-checks.ts. Every key has a `description`: the README's
 * config reference is generated from them.
 */

const KIB = 1024;
const MIB = 1024 * KIB;

import { middlewareSchema } from '../middleware/registry.js';
import { listenersSchema } from '../listeners/registry.js';
import { kvStoresSchema } from '../stores/config.js';
import { webSocketSchema } from '../websocket/settings.js';
import { SERVER_NAME_PATTERN, tlsSchema } from '../edge/schema.js';
import { MAX_HOST_NAME_LENGTH } from '../edge/host-value.js';
import { ACCESS_LOG_FIELDS } from '../listeners/access-log.js';
import { timerDuration } from './durations.js';

/** Media types and ids lists share this shape. */
const stringList = (description: string) => ({
  type: 'array',
  items: { type: 'string', minLength: 1 },
  description,
});

const nonNegativeInteger = (description: string, defaultValue: number) => ({
  type: 'integer',
  minimum: 0,
  default: defaultValue,
  description,
});

const positiveInteger = (description: string, defaultValue: number) => ({
  type: 'integer',
  minimum: 1,
  default: defaultValue,
  description,
});

/**
 * Largest upstream weight: a share, so a million steps is more than fine enough, and the balancer's sums
 * (weights times upstreams, accumulated per pick) stay exact in a double far beyond any table.
 */
export const MAX_WEIGHT = 1_000_000;

/** A built-in endpoint path: absolute, no query or fragment. */
export const BUILTIN_PATH_PATTERN = '^/[^?#\\s]*$';
/** An HTTP method token (RFC 9110 `token`). */
export const METHOD_PATTERN = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";
/** `Via: 1.1 <name>` needs a token. */
export const NAME_PATTERN = METHOD_PATTERN;
/** Where a doc is fetched: an absolute path, a query allowed (e.g. `/v2/api-docs?group=public`). */
export const SPEC_PATH_PATTERN = '^/[^#\\s]*$';

const builtinPath = (description: string, defaultValue: string) => ({
  type: 'string',
  pattern: BUILTIN_PATH_PATTERN,
  default: defaultValue,
  description,
});

const staticEndpointSchema = {
  type: 'object',
  description: 'One endpoint of a `static` upstream.',
  additionalProperties: false,
  required: ['method', 'path'],
  properties: {
    method: {
      type: 'string',
      pattern: METHOD_PATTERN,
      description: 'HTTP method, any case (upper-cased when loaded), e.g. "GET".',
    },
    path: {
      type: 'string',
      description:
        'Path template, e.g. "/user/{id}" (forms: literal, {name}, {.name}, {name: regex}, {+name}). ' +
        'Checked by the routing compiler, which names the upstream when a template is bad; one it routes but that ' +
        'never matches or routes another path than it says (a "?", a dot-segment, no leading "/" or a leading "//", ' +
        'a placeholder name used twice) is a warning naming the file and the endpoint\'s pointer.',
    },
    consumes: stringList('Media types the endpoint accepts as request bodies; absent or empty means anything.'),
    produces: stringList('Media types the endpoint can answer with; absent or empty means anything.'),
    'x-disabled-middleware': stringList('Ids of middleware not run for this endpoint.'),
    'x-disabled-listeners': stringList('Ids of listeners not run for this endpoint (e.g. "accessLog").'),
  },
} as const;

const pemFile = (description: string) => ({ type: 'string', minLength: 1, description });

const upstreamTlsSchema = {
  type: 'object',
  description:
    'For an "https" serviceLocation only: how its certificate is checked and which client certificate is presented ' +
    '(the data plane and doc fetching both use it). The files are read when the config is loaded, and again at every ' +
    'reload; a relative path is relative to the config file. A file that cannot be read or is not PEM refuses the config.',
  additionalProperties: false,
  properties: {
    caFile: pemFile("PEM file of the CA certificate(s) to trust for this upstream instead of Node's bundled roots (a private CA)."),
    certFile: pemFile('PEM file of a client certificate presented when the upstream asks for one (mutual TLS); needs keyFile.'),
    keyFile: pemFile("PEM file of that client certificate's private key (unencrypted); needs certFile."),
    serverName: {
      type: 'string',
      minLength: 1,
      description:
        "Name sent as SNI and that the upstream's certificate must carry; default: serviceLocation's host (no SNI for an IP address, " +
        'whose certificate must then name that address).',
    },
    rejectUnauthorized: {
      type: 'boolean',
      default: true,
      description: 'false accepts any certificate, however invalid: for tests only, never in production.',
    },
  },
} as const;

const upstreamSchema = {
  type: 'object',
  description: 'One upstream service and how it declares its endpoints.',
  additionalProperties: false,
  required: ['serviceType', 'serviceLocation'],
  properties: {
    serviceType: {
      type: 'string',
      enum: ['swagger2', 'openapi3', 'static'],
      description:
        '"swagger2": a Swagger 2.0 doc (JSON or YAML) is fetched from specPath; "openapi3": an OpenAPI 3.x doc (JSON or YAML) is ' +
        'fetched from specPath; "static": the endpoints are listed inline in `endpoints`.',
    },
    serviceLocation: {
      type: 'string',
      minLength: 1,
      description:
        'Where the upstream listens: "http://host:port" or "https://host:port" (port optional, defaults by ' +
        'scheme). No user info, path, query or fragment; a lone trailing "/" is accepted and dropped. ' +
        'Normalized to its origin (lower-case host, default port dropped). Also the upstream\'s key: no two ' +
        'upstreams may share one.',
    },
    weight: {
      type: 'integer',
      minimum: 0,
      maximum: MAX_WEIGHT,
      default: 1,
      description:
        'Share of the traffic among equivalent endpoints (smooth weighted round-robin). 0 means "only when no ' +
        'host of weight > 0 can serve". At most 1000000, so that sums of weights stay exact.',
    },
    specPath: {
      type: 'string',
      pattern: SPEC_PATH_PATTERN,
      default: '/spec',
      description: 'Path (and optional query) the doc is fetched from, relative to serviceLocation. Ignored by "static".',
    },
    endpoints: {
      type: 'array',
      minItems: 1,
      items: staticEndpointSchema,
      description: 'Required for "static" upstreams and refused for the others (their doc lists the endpoints).',
    },
    tls: upstreamTlsSchema,
    hosts: {
      type: 'array',
      items: { type: 'string', pattern: SERVER_NAME_PATTERN, maxLength: MAX_HOST_NAME_LENGTH },
      description:
        'Virtual hosts: the upstream serves only requests whose Host (port and case aside) is one of these names; "*.example.com" ' +
        'stands for one or more DNS labels. Absent or empty: every host. A Host that no upstream serves is 404.',
    },
  },
  if: { properties: { serviceType: { const: 'static' } }, required: ['serviceType'] },
  then: { required: ['endpoints'] },
  else: { properties: { endpoints: false } },
} as const;

export const configSchema = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  $id: 'https://specgate.dev/schemas/config.json',
  title: 'specgate configuration',
  type: 'object',
  additionalProperties: false,
  properties: {
    port: {
      type: 'integer',
      minimum: 0,
      maximum: 65535,
      default: 8080,
      description: 'Listening port; 0 picks a free one (env GATEWAY_PORT).',
    },
    host: {
      type: 'string',
      minLength: 1,
      default: '0.0.0.0',
      description: 'Listening address: an IPv4 or IPv6 address (no brackets), or a host name, resolved at start.',
    },
    workers: {
      type: 'integer',
      minimum: 0,
      maximum: 1024,
      default: 0,
      description: 'Worker processes; 0 means one per CPU (env GATEWAY_WORKERS).',
    },
    name: {
      type: 'string',
      pattern: NAME_PATTERN,
      default: 'specgate',
      description: 'Name used in `Via: 1.1 <name>` and in logs; a single HTTP token (no spaces).',
    },
    logLevel: {
      type: 'string',
      enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
      default: 'info',
      description: 'Log level (env GATEWAY_LOG_LEVEL).',
    },
    trustedProxies: {
      type: 'array',
      items: { type: 'string', minLength: 1 },
      default: [],
      description:
        'Peers that may speak for a client: addresses and CIDR ranges, e.g. ["10.0.0.0/8", "::1"] (like nginx\'s ' +
        'set_real_ip_from). From other peers the client\'s own X-Forwarded-*, Forwarded and X-Real-IP headers are ' +
        'dropped; from these they are kept and extended, and the client address (logs, metrics, rate limits) is ' +
        'the rightmost X-Forwarded-For hop that is not a trusted proxy.',
    },
    encodedSlashes: {
      type: 'string',
      enum: ['reject', 'keep'],
      default: 'reject',
      description:
        '"reject": a path holding %2F or %5C (an encoded slash or backslash) or a raw backslash is a 400, since an upstream may read it as a ' +
        'segment boundary the gateway did not route on; "keep": routed as one segment and forwarded as it came.',
    },
    admin: {
      type: 'object',
      description:
        'A second listener for operators that serves the health report, /metrics and /spec (at `paths`). When set, ' +
        'the public port answers /metrics and /spec with 404 (the health check stays public, for load balancers). ' +
        'Absent: everything is on the public port.',
      additionalProperties: false,
      required: ['port'],
      properties: {
        host: { type: 'string', minLength: 1, default: '127.0.0.1', description: 'Listening address of the admin listener (an address or a host name, as `host`).' },
        port: { type: 'integer', minimum: 0, maximum: 65535, description: 'Its port; 0 picks a free one (logged at start).' },
      },
    },
    tls: tlsSchema,
    paths: {
      type: 'object',
      description: 'Paths of the built-in endpoints; they win over any upstream endpoint with the same path. Must be pairwise distinct.',
      additionalProperties: false,
      default: {},
      properties: {
        healthcheck: builtinPath('Health report: 503 while starting, then 200.', '/healthcheck'),
        metrics: builtinPath('Metrics report (JSON, merged across workers).', '/metrics'),
        spec: builtinPath('Combined Swagger 2.0 doc of every ready upstream.', '/spec'),
      },
    },
    upstreams: {
      type: 'array',
      default: [],
      items: upstreamSchema,
      description: 'The upstream services. Two with the same serviceLocation are refused.',
    },
    upstreamWeighting: {
      type: 'object',
      description: 'How a weight change is phased in.',
      additionalProperties: false,
      default: {},
      properties: {
        stepCount: positiveInteger('A weight moves from its current to its new value in this many steps.', 100),
        stepDurationMs: timerDuration('Time between two weight steps, in ms.', 6000, 0),
      },
    },
    timeouts: {
      type: 'object',
      description: 'Time limits, in ms.',
      additionalProperties: false,
      default: {},
      properties: {
        upstreamMs: timerDuration('Upstream must start answering (headers) within this; else 504.', 30000),
        connectMs: timerDuration('TCP connect to an upstream.', 5000),
        clientRequestMs: timerDuration('Client must send the whole request head and body within this.', 30000),
        shutdownDrainMs: timerDuration(
          'SIGTERM/SIGINT/SIGQUIT: how long /healthcheck answers 503 while the gateway still accepts and serves as before, so a load ' +
            'balancer takes it out first; then it stops accepting and shutdownGraceMs begins. 0: no such phase. A second signal ends it.',
          0,
          0,
        ),
        shutdownGraceMs: timerDuration('SIGTERM/SIGINT/SIGQUIT: how long in-flight requests may take before the process exits anyway.', 10000, 0),
      },
    },
    upstreamPool: {
      type: 'object',
      description:
        "Keep-alive connections from each worker to each upstream (the gateway's own HTTP/1.1 client, src/upstream/). " +
        'Connecting is bounded by timeouts.connectMs; the answer\'s head, and every silence in its body, by timeouts.upstreamMs.',
      additionalProperties: false,
      default: {},
      properties: {
        connections: positiveInteger('Most connections one worker keeps open to one upstream.', 1024),
        maxQueue: nonNegativeInteger(
          'Requests that may wait for a connection to one upstream when all are busy (per worker); more are answered 503 at ' +
            'once. The wait counts toward timeouts.upstreamMs (504 when it runs out).',
          1024,
        ),
        idleTimeoutMs: timerDuration(
          "An idle connection is closed after this long, sooner when the upstream announces a shorter Keep-Alive timeout. Keep it under the upstream's own idle timeout.",
          4000,
        ),
        maxResponseHeaderBytes: positiveInteger(
          "Largest answer head (status line and headers, and trailers) accepted from an upstream; a larger one is 502.",
          16 * KIB,
        ),
      },
    },
    limits: {
      type: 'object',
      description: 'Request size limits, in bytes.',
      additionalProperties: false,
      default: {},
      properties: {
        maxBodyBytes: nonNegativeInteger('Request body bytes; larger is 413.', 10 * MIB),
        maxHeaderBytes: positiveInteger('Request header bytes (all names and values); larger is 431.', 16 * KIB),
        maxUrlBytes: positiveInteger(
          'Request target bytes (path and query); longer is 414. A head over 4 KiB that arrives in several TCP segments is closed by uWS 20.30 before this check (native-notes.md).',
          8 * KIB,
        ),
        chunkedRequestBodies: {
          type: 'boolean',
          default: true,
          description:
            'Accept request bodies sent with Transfer-Encoding: chunked. false: such a request is 411 (send a Content-Length), for a gateway behind a proxy that reuses its connections for several clients and passes chunk extensions or trailers on as they came: uWS 20.30 misreads those (native-notes.md).',
        },
      },
    },
    circuitBreaker: {
      type: 'object',
      description: 'Stops sending to a failing host or host+endpoint for a while. A 5xx or a timeout is a failure.',
      additionalProperties: false,
      default: {},
      properties: {
        hostFailures: positiveInteger("Consecutive failures that open a host's breaker.", 50),
        endpointFailures: positiveInteger('Consecutive failures that open a host+endpoint breaker.', 25),
        resetMs: timerDuration('How long an open breaker stays open before one trial request is let through.', 10000),
      },
    },
    discovery: {
      type: 'object',
      description: 'Fetching the upstream docs.',
      additionalProperties: false,
      default: {},
      properties: {
        fetchTimeoutMs: timerDuration('Timeout of one doc fetch (connect, headers and body).', 5000),
        retries: nonNegativeInteger('Attempts after the first before an upstream is marked failed.', 5),
        backoffMs: timerDuration('First back-off delay before a retry; doubles per retry (up to 24.8 days).', 200, 0),
        refreshIntervalMs: timerDuration('Re-fetch every upstream doc this often; 0 disables re-discovery.', 30000, 0),
      },
    },
    accessLog: {
      type: 'object',
      description: 'The access log listener.',
      additionalProperties: false,
      default: {},
      properties: {
        enabled: { type: 'boolean', default: true, description: 'Log one line per proxied request.' },
        destination: {
          type: 'string',
          minLength: 1,
          default: 'stdout',
          description:
            '"stdout", or a file path (relative to the working directory) every worker appends to; SIGUSR1 to the primary reopens it (log rotation).',
        },
        omit: {
          type: 'array',
          items: { type: 'string', enum: [...ACCESS_LOG_FIELDS] },
          uniqueItems: true,
          default: [],
          description: 'Fields left out of every line (privacy: e.g. "query", "client", "userAgent").',
        },
      },
    },
    requestId: {
      type: 'object',
      description: 'Request IDs: kept from a trusted proxy, made otherwise; forwarded upstream, returned on every answer, logged.',
      additionalProperties: false,
      default: {},
      properties: {
        enabled: { type: 'boolean', default: true, description: 'Give every request an ID.' },
        header: {
          type: 'string',
          pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$",
          default: 'x-request-id',
          description: 'The header that carries it, in requests and answers.',
        },
      },
    },
    tracing: {
      type: 'object',
      description:
        'Export spans over OTLP/HTTP. Without it nothing is exported; W3C traceparent/tracestate are propagated either way.',
      additionalProperties: false,
      required: ['otlpEndpoint'],
      properties: {
        otlpEndpoint: {
          type: 'string',
          pattern: '^https?://[^\\s]+$',
          description: 'The collector\'s OTLP/HTTP traces URL, e.g. "http://127.0.0.1:4318/v1/traces".',
        },
        sampleRatio: {
          type: 'number',
          minimum: 0,
          maximum: 1,
          default: 0.01,
          description: 'Share of the traces the gateway starts that are exported; a caller\'s traceparent decides for its own.',
        },
        serviceName: { type: 'string', minLength: 1, default: 'specgate', description: 'service.name of the exported spans.' },
      },
    },
    kvStores: kvStoresSchema,
    middleware: middlewareSchema(),
    listeners: listenersSchema(),
    metrics: {
      type: 'object',
      description: 'Request metrics.',
      additionalProperties: false,
      default: {},
      properties: {
        enabled: { type: 'boolean', default: true, description: 'Collect metrics and serve them at paths.metrics.' },
        histogramBucketsS: {
          type: 'array',
          items: { type: 'number' },
          minItems: 1,
          maxItems: 40,
          default: [...DEFAULT_BUCKETS_S],
          description:
            'Upper bounds (seconds, ascending, at most 60) of the Prometheus latency histograms (gateway_request_duration_seconds, ' +
            'gateway_upstream_duration_seconds). Each is rounded up to whole microseconds, then moved up to the top of the latency ' +
            'histogram bucket that holds it (by under 1 %), which makes every `le` count exact; the `le` label shows the moved bound.',
        },
      },
    },
    websocket: webSocketSchema,
  },
} as const;

/** Environment variables that override a top-level key; validated by that key's schema. */
export const ENV_OVERRIDES = {
  GATEWAY_PORT: 'port',
  GATEWAY_WORKERS: 'workers',
  GATEWAY_LOG_LEVEL: 'logLevel',
} as const;
