import type { MiddlewareConfig } from '../middleware/registry.js';
import type { ListenerConfig } from '../listeners/registry.js';
import type { KvStoresConfig } from '../stores/config.js';
import type { WebSocketConfig } from '../websocket/settings.js';
import type { ListenerTlsConfig } from '../edge/types.js';

/** The gateway's configuration after schema validation and defaults (see src/config/schema.ts). */
export interface GatewayConfig {
  /** Listening port (env GATEWAY_PORT). */
  port: number;
  /** Listening address. */
  host: string;
  /** Worker processes; 0 means one per CPU (env GATEWAY_WORKERS). */
  workers: number;
  /** Name used in `Via: 1.1 <name>` and in logs. */
  name: string;
  /** pino level (env GATEWAY_LOG_LEVEL). */
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Addresses and CIDR ranges of proxies that may speak for a client (docs/reference/accept.md#trusted-proxies). */
  trustedProxies: string[];
  /** What a path holding %2F or %5C gets: 400, or routed as one segment. */
  encodedSlashes: 'reject' | 'keep';
  /** The operators' listener for health, metrics and spec; absent: all on the public port. */
  admin?: { host: string; port: number };
  /** A TLS listener beside the plain one (src/edge/). */
  tls?: ListenerTlsConfig;
  paths: { healthcheck: string; metrics: string; spec: string };
  upstreams: UpstreamConfig[];
  upstreamWeighting: { stepCount: number; stepDurationMs: number };
  /** Keep-alive connections from each worker to each upstream; absent in a config built in code: the defaults. */
  upstreamPool?: UpstreamPoolConfig;
  timeouts: {
    /** Upstream must start answering (headers) within this; else 504. */
    upstreamMs: number;
    /** TCP connect to an upstream. */
    connectMs: number;
    /** Client must send the whole request head + body within this; uWS also closes idle sockets. */
    clientRequestMs: number;
    /** SIGTERM/SIGINT/SIGQUIT: how long /healthcheck answers 503 while the gateway still serves, before it stops accepting. */
    shutdownDrainMs: number;
    /** SIGTERM/SIGINT/SIGQUIT: how long in-flight requests may take before the process exits anyway. */
    shutdownGraceMs: number;
  };
  limits: {
    /** Request body bytes; larger is 413. */
    maxBodyBytes: number;
    /** Request header bytes (all names + values); larger is 431. */
    maxHeaderBytes: number;
    /** Request target bytes (path and query); longer is 414. Absent in a config built in code: 8192. */
    maxUrlBytes?: number;
    /** Accept chunked request bodies; false answers them 411. Absent in a config built in code: true. */
    chunkedRequestBodies?: boolean;
  };
  circuitBreaker: {
    /** Consecutive failures that open a host's breaker. */
    hostFailures: number;
    /** Consecutive failures that open a host+endpoint breaker. */
    endpointFailures: number;
    /** How long an open breaker stays open before one trial request is let through. */
    resetMs: number;
  };
  discovery: {
    /** Timeout of one doc fetch. */
    fetchTimeoutMs: number;
    /** Attempts after the first before an upstream is marked failed. */
    retries: number;
    /** First back-off delay; doubles per retry. */
    backoffMs: number;
    /** Re-fetch every upstream doc this often; 0 disables re-discovery. */
    refreshIntervalMs: number;
  };
  accessLog: {
    enabled: boolean;
    /** "stdout" or a file path. */
    destination: string;
    /** Fields left out of every line. */
    omit: string[];
  };
  requestId: { enabled: boolean; header: string };
  /** Span export; absent: none. */
  tracing?: { otlpEndpoint: string; sampleRatio: number; serviceName: string };
  /** Named stores middleware refer to (docs/reference/stores.md); "local" always exists besides. */
  kvStores: KvStoresConfig;
  /** Run in order for every routed request (docs/reference/middleware.md). */
  middleware: MiddlewareConfig[];
  /** Run after each routed request's answer (docs/reference/listeners.md); the access log is configured apart. */
  listeners: ListenerConfig[];
  /** histogramBucketsS: the Prometheus histograms' bounds, seconds, ascending. */
  metrics: { enabled: boolean; histogramBucketsS: number[] };
  /** WebSocket proxying; absent in a config built in code: the defaults (src/websocket/settings.ts). */
  websocket?: WebSocketConfig;
}

export type ServiceType = 'swagger2' | 'openapi3' | 'static';

export interface StaticEndpointConfig {
  method: string;
  path: string;
  consumes?: string[];
  produces?: string[];
  'x-disabled-middleware'?: string[];
  'x-disabled-listeners'?: string[];
}

export interface UpstreamConfig {
  serviceType: ServiceType;
  /** `http(s)://host:port`, no path, query, fragment or user info. Also the upstream's key. */
  serviceLocation: string;
  /** >= 0, default 1. */
  weight: number;
  /** Where the doc is fetched, default "/spec". */
  specPath: string;
  /** `static` upstreams only. */
  endpoints?: StaticEndpointConfig[];
  /** `https` upstreams only: certificate checks and a client certificate. */
  tls?: UpstreamTlsConfig;
  /** Virtual hosts this upstream serves (exact, or "*." for one or more DNS labels); absent: every host. */
  hosts?: string[];
}

/** upstreamPool (see src/proxy/host-pools.ts). */
export interface UpstreamPoolConfig {
  /** Most connections one worker keeps open to one upstream. */
  connections: number;
  /** Requests that may wait for a busy upstream's connection; more are 503. */
  maxQueue: number;
  /** Idle connections are closed after this long. */
  idleTimeoutMs: number;
  /** Largest answer head accepted from an upstream. */
  maxResponseHeaderBytes: number;
}

/**
 * upstreams[].tls. The `*File` keys are the config's; `ca`, `cert` and `key` are those files' contents
 * (PEM), filled in by the loader (src/config/tls-files.ts), which reads them at every load and reload.
 */
export interface UpstreamTlsConfig {
  caFile?: string;
  certFile?: string;
  keyFile?: string;
  serverName?: string;
  rejectUnauthorized: boolean;
  ca?: string;
  cert?: string;
  key?: string;
}
