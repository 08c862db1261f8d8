/**
 * Real node:http upstreams on 127.0.0.1 for data plane tests. Every request is recorded (head, and
 * body up to 1 MiB) so tests can assert what reached the upstream, and what did not.
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface RecordedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  /** As received: [name, value, ...] with the client's casing. */
  rawHeaders: string[];
  body: Buffer;
  bodyBytes: number;
  /** The request body ended normally (false: aborted mid-way or still running). */
  bodyComplete: boolean;
  /** The connection closed before a response was completed. */
  aborted: boolean;
}

/**
 * Answers a request. The helper already consumes and records the body (the request is flowing):
 * use `afterBody` to act once it has all arrived, not req.on('end') after an await.
 */
export type UpstreamHandler = (req: http.IncomingMessage, res: http.ServerResponse, recorded: RecordedRequest) => void;

export interface Upstream {
  /** `http://127.0.0.1:<port>`: the upstream's serviceLocation. */
  readonly url: string;
  readonly port: number;
  readonly requests: RecordedRequest[];
  /** Changes how following requests are answered. */
  setHandler(handler: UpstreamHandler): void;
  /** Resolves when `count` requests have arrived in total. */
  waitForRequests(count: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

const MAX_RECORDED_BODY = 1024 * 1024;

/** Calls back once the whole request body has arrived (at once if it already has). */
export function afterBody(req: http.IncomingMessage, recorded: RecordedRequest, done: () => void): void {
  if (recorded.bodyComplete) setImmediate(done);
  else req.on('end', done);
}

/** Default: answers 200 with JSON describing the request it received. */
export const echoHandler: UpstreamHandler = (req, res, recorded) => {
  afterBody(req, recorded, () => {
    const body = JSON.stringify({
      method: recorded.method,
      url: recorded.url,
      headers: recorded.headers,
      bodyBytes: recorded.bodyBytes,
    });
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      'x-upstream-port': String(req.socket.localPort),
    });
    res.end(body);
  });
};

export async function startUpstream(handler: UpstreamHandler = echoHandler): Promise<Upstream> {
  let current = handler;
  const requests: RecordedRequest[] = [];
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  const sockets = new Set<Socket>();
  const server = http.createServer({ keepAliveTimeout: 5000, requestTimeout: 0 }, (req, res) => {
    const recorded: RecordedRequest = {
      method: req.method ?? '',
      url: req.url ?? '',
      headers: req.headers,
      rawHeaders: req.rawHeaders,
      body: Buffer.alloc(0),
      bodyBytes: 0,
      bodyComplete: false,
      aborted: false,
    };
    const bodyParts: Buffer[] = [];
    req.on('data', (chunk: Buffer) => {
      recorded.bodyBytes += chunk.length;
      if (recorded.bodyBytes <= MAX_RECORDED_BODY) bodyParts.push(chunk);
    });
    req.on('end', () => {
      recorded.bodyComplete = true;
      recorded.body = Buffer.concat(bodyParts);
    });
    res.on('close', () => {
      if (!res.writableFinished) recorded.aborted = true;
    });
    requests.push(recorded);
    for (const waiter of waiters.filter((w) => requests.length >= w.count)) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
    current(req, res, recorded);
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    setHandler(next) {
      current = next;
    },
    waitForRequests(count, timeoutMs = 5000) {
      if (requests.length >= count) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`upstream saw ${requests.length} requests, wanted ${count}`)), timeoutMs);
        waiters.push({
          count,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
      });
    },
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

// ---- gateway fixtures shared by the data plane tests ------------------------------------------

import type { GatewayConfig } from '../../src/config/types.js';
import type { RouteEntry } from '../../src/routing/types.js';
import { DEFAULT_BUCKETS_S } from '../../src/metrics/buckets.js';

export type ConfigOverrides = {
  [K in keyof GatewayConfig]?: GatewayConfig[K] extends object ? Partial<GatewayConfig[K]> : GatewayConfig[K];
};

/** A complete config with the schema defaults, listening on 127.0.0.1:0, and short timeouts where given. */
export function testConfig(overrides: ConfigOverrides = {}): GatewayConfig {
  const base: GatewayConfig = {
    port: 0,
    host: '127.0.0.1',
    workers: 1,
    name: 'specgate-test',
    logLevel: 'silent',
    trustedProxies: [],
    encodedSlashes: 'reject',
    paths: { healthcheck: '/healthcheck', metrics: '/metrics', spec: '/spec' },
    upstreams: [],
    upstreamWeighting: { stepCount: 100, stepDurationMs: 6000 },
    timeouts: { upstreamMs: 30000, connectMs: 5000, clientRequestMs: 30000, shutdownDrainMs: 0, shutdownGraceMs: 2000 },
    limits: { maxBodyBytes: 10 * 1024 * 1024, maxHeaderBytes: 16 * 1024 },
    circuitBreaker: { hostFailures: 50, endpointFailures: 25, resetMs: 10000 },
    discovery: { fetchTimeoutMs: 5000, retries: 0, backoffMs: 0, refreshIntervalMs: 0 },
    accessLog: { enabled: false, destination: 'stdout', omit: [] },
    requestId: { enabled: true, header: 'x-request-id' },
    kvStores: {},
    middleware: [],
    listeners: [],
    metrics: { enabled: true, histogramBucketsS: [...DEFAULT_BUCKETS_S] },
  };
  const merged = { ...base } as Record<string, unknown>;
  for (const [key, value] of Object.entries(overrides)) {
    const previous = merged[key];
    merged[key] =
      value !== null && typeof value === 'object' && !Array.isArray(value) && typeof previous === 'object'
        ? { ...(previous as object), ...value }
        : value;
  }
  return merged as unknown as GatewayConfig;
}

/** A route entry of `upstream` with nothing declared beyond method and template. */
export function entry(method: string, template: string, upstream: string, details: Partial<RouteEntry> = {}): RouteEntry {
  return {
    method,
    template,
    upstream,
    consumes: [],
    produces: [],
    disabledMiddleware: [],
    disabledListeners: [],
    ...details,
  };
}
