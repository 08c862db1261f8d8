// Test support: runs the real `gateway start` (primary + workers) and plain node:http upstreams.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect } from 'node:net';
import { parseResponses, rawRequest, type ParsedResponse } from './raw-http.js';
import { reapOnExit } from './reaper.js';
import { untapped } from './untapped.js';

/** The gateway as shipped: the bundle `npm start` and the `gateway` bin run (src/cli/bundle-write.ts). */
export const MAIN = fileURLToPath(new URL('../../bundle/gateway.mjs', import.meta.url));
/** The same CLI run from the compiled modules (dist/src/). */
export const MODULE_MAIN = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));

/** Registers cleanup; `tap`'s Test satisfies it. */
export interface Teardown {
  teardown(fn: () => unknown): void;
}

export type LogLine = Record<string, unknown> & { msg?: string; pid?: number; role?: string };

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface GatewayProcess {
  child: ChildProcess;
  port: number;
  /** Replaces the config file (for SIGHUP reloads); a string is written as is. */
  writeConfig(config: Record<string, unknown> | string): void;
  /** Every JSON line the processes printed, in order. */
  lines: LogLine[];
  /** Whatever was printed that is not JSON (stderr included). */
  text: () => string;
  waitForLog(predicate: (line: LogLine) => boolean, timeoutMs?: number, description?: string): Promise<LogLine>;
  accessLines(): LogLine[];
  exited: Promise<Exit>;
  /** Sends a signal to the primary only. */
  signal(signal: NodeJS.Signals): void;
}

export interface StartOptions {
  config: Record<string, unknown>;
  workers?: number;
  env?: Record<string, string>;
  /** Node flags of the gateway's primary (before the script; workers inherit them). */
  nodeFlags?: string[];
  /** Resolve once this log line appears, after 'gateway listening'. */
  waitFor?: (line: LogLine) => boolean;
  /** Wait for 'gateway listening' before resolving (default true); `port` is then 0 if not given. */
  waitForListening?: boolean;
  /** Passed as --port (default 0: any free port); null: no --port, the config file's port serves (and reloads can change it). */
  port?: number | null;
  startTimeoutMs?: number;
  /** The CLI file to run (default MAIN). */
  main?: string;
  /** More arguments of `gateway start` (e.g. --with-examples). */
  args?: string[];
}

/** Starts the gateway in its own process group; teardown kills the whole group. */
export async function startGateway(t: Teardown, options: StartOptions): Promise<GatewayProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'specgate-test-'));
  const configFile = join(dir, 'gateway.json');
  writeFileSync(configFile, JSON.stringify(options.config, null, 2));
  const env = { ...process.env, GATEWAY_WORKER_HEADER: '1', GATEWAY_LOG_LEVEL: 'info', ...options.env };
  const child = spawn(
    ...untapped(
      process.execPath,
      [...(options.nodeFlags ?? []), options.main ?? MAIN, 'start', '--config', configFile, '--workers', String(options.workers ?? 2), ...(options.port === null ? [] : ['--port', String(options.port ?? 0)]), ...(options.args ?? [])],
      env,
    ),
    { detached: true, stdio: ['ignore', 'pipe', 'pipe'], env },
  );
  const unreap = reapOnExit(child, { group: true });
  const lines: LogLine[] = [];
  const waiters = new Set<{ predicate: (line: LogLine) => boolean; resolve: (line: LogLine) => void }>();
  let text = '';
  const onLine = (raw: string): void => {
    if (!raw.startsWith('{')) {
      text += raw + '\n';
      return;
    }
    let line: LogLine;
    try {
      line = JSON.parse(raw) as LogLine;
    } catch {
      text += raw + '\n';
      return;
    }
    lines.push(line);
    for (const waiter of waiters) {
      if (waiter.predicate(line)) {
        waiters.delete(waiter);
        waiter.resolve(line);
      }
    }
  };
  for (const stream of [child.stdout!, child.stderr!]) {
    let pending = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      pending += chunk;
      let newline: number;
      while ((newline = pending.indexOf('\n')) >= 0) {
        onLine(pending.slice(0, newline));
        pending = pending.slice(newline + 1);
      }
    });
  }
  const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  let gone = false;
  void exited.then(() => (gone = true));
  t.teardown(async () => {
    if (!gone) {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
      await exited;
    }
    // Workers are in the same group: make sure none outlives the primary.
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // none left
    }
    unreap();
    rmSync(dir, { recursive: true, force: true });
  });

  const waitForLog = (predicate: (line: LogLine) => boolean, timeoutMs = 15_000, description = 'log line'): Promise<LogLine> => {
    const seen = lines.find(predicate);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const waiter = {
        predicate,
        resolve: (line: LogLine) => {
          clearTimeout(timer);
          resolve(line);
        },
      };
      const timer = setTimeout(() => {
        waiters.delete(waiter);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${description}; output:\n${text}${lines.map((l) => JSON.stringify(l)).join('\n')}`));
      }, timeoutMs);
      waiters.add(waiter);
      void exited.then((exit) => {
        if (!waiters.has(waiter)) return;
        waiters.delete(waiter);
        clearTimeout(timer);
        reject(new Error(`gateway exited (${JSON.stringify(exit)}) while waiting for ${description}; output:\n${text}${lines.map((l) => JSON.stringify(l)).join('\n')}`));
      });
    });
  };

  const listening =
    options.waitForListening === false
      ? null
      : await waitForLog((line) => line.msg === 'gateway listening', options.startTimeoutMs ?? 20_000, "'gateway listening'");
  if (options.waitFor) await waitForLog(options.waitFor, options.startTimeoutMs ?? 20_000);
  return {
    child,
    port: (listening?.port as number | undefined) ?? options.port ?? 0,
    writeConfig: (config) => writeFileSync(configFile, typeof config === 'string' ? config : JSON.stringify(config, null, 2)),
    lines,
    text: () => text,
    waitForLog,
    accessLines: () => lines.filter((line) => line.log === 'access'),
    exited,
    signal: (signal) => child.kill(signal),
  };
}

export interface HttpResult {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** One request on a fresh connection (so SO_REUSEPORT can hand it to any worker). */
export function httpRequest(
  port: number,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string; timeoutMs?: number } = {},
): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, method: options.method ?? 'GET', headers: options.headers, agent: false, timeout: options.timeoutMs ?? 10_000 },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`request ${path} timed out`)));
    req.on('error', reject);
    req.end(options.body);
  });
}

export interface TestUpstream {
  name: string;
  port: number;
  location: string;
  server: Server;
  /** Requests served, by "METHOD path". */
  seen: Map<string, number>;
  total(): number;
  close(): Promise<void>;
}

export interface UpstreamOptions {
  name: string;
  /** Served at GET /spec (unless `holdSpec` holds it back); null serves no doc (404). */
  spec?: unknown;
  /** While this promise is pending, GET /spec waits. */
  holdSpec?: Promise<void>;
  /** Answers a routed request; default: 200 JSON naming the upstream. */
  handle?: (req: IncomingMessage, res: ServerResponse) => void;
}

/** A node:http upstream that serves a doc at /spec and answers every other request with its name. */
export async function startUpstream(t: Teardown, options: UpstreamOptions): Promise<TestUpstream> {
  const seen = new Map<string, number>();
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    if (req.method === 'GET' && path === '/spec' && options.spec !== undefined) {
      const answer = (): void => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(options.spec));
      };
      if (options.holdSpec) void options.holdSpec.then(answer);
      else answer();
      return;
    }
    const key = `${req.method} ${path}`;
    seen.set(key, (seen.get(key) ?? 0) + 1);
    req.resume();
    req.on('end', () => {
      if (options.handle) return options.handle(req, res);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ upstream: options.name, method: req.method, path: req.url }));
    });
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  t.teardown(close);
  return {
    name: options.name,
    port,
    location: `http://127.0.0.1:${port}`,
    server,
    seen,
    total: () => [...seen.values()].reduce((a, b) => a + b, 0),
    close,
  };
}

/** A Swagger 2.0 doc declaring `paths` (template → methods). */
export function swaggerDoc(title: string, paths: Record<string, string[]>, basePath = '/'): Record<string, unknown> {
  return {
    swagger: '2.0',
    info: { title, version: '1.0.0' },
    basePath,
    paths: Object.fromEntries(
      Object.entries(paths).map(([template, methods]) => [
        template,
        Object.fromEntries(
          methods.map((m) => [
            m.toLowerCase(),
            {
              operationId: `${m.toLowerCase()}${template.replace(/\W+/g, '_')}`,
              // Swagger 2.0 wants every placeholder declared, under the name as written.
              parameters: [...template.matchAll(/\{([^}]+)\}/g)].map(([, name]) => ({ name, in: 'path', required: true, type: 'string' })),
              responses: { '200': { description: 'ok' } },
            },
          ]),
        ),
      ]),
    ),
  };
}

/**
 * Resolves once `workers` different workers (2 by default) answered `path` with `status` (200 by
 * default), each asked on a fresh connection (askWorker, its health check at `healthPath`).
 */
export async function untilWorkersAnswer(
  port: number,
  path: string,
  options: { status?: number; workers?: number; timeoutMs?: number; healthPath?: string; description?: string } = {},
): Promise<void> {
  const { status = 200, workers = 2, timeoutMs = 5000, healthPath, description = `${path} answering ${status} on ${workers} workers` } = options;
  const pids = new Set<string>();
  await eventually(
    async () => {
      const answer = await askWorker(port, path, { healthPath });
      if (answer.status === status) pids.add(answer.workerPid);
      return pids.size >= workers ? true : undefined;
    },
    timeoutMs,
    10,
    description,
  );
}

/** Polls `check` until it returns a value (not undefined) or the time runs out. */
export async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs: number, intervalMs = 50, description = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) throw new Error(`${description} not reached within ${timeoutMs} ms${lastError ? `: ${String(lastError)}` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** A config with test-friendly timeouts; `overrides` are merged on top (shallowly). */
export function testConfig(upstreams: unknown[], overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    host: '127.0.0.1',
    port: 0,
    upstreams,
    discovery: { fetchTimeoutMs: 5000, retries: 0, backoffMs: 100, refreshIntervalMs: 0 },
    timeouts: { upstreamMs: 5000, connectMs: 1000, clientRequestMs: 10_000, shutdownGraceMs: 5000 },
    ...overrides,
  };
}

export interface WorkerAnswer extends HttpResult {
  /** Pid of the worker that served `path` (from its x-gateway-worker header on the health check). */
  workerPid: string;
}

/**
 * One fresh connection: the health check names the worker that accepted it (x-gateway-worker, set
 * with GATEWAY_WORKER_HEADER=1), then `path` is asked on the same connection (pipelined), so it is
 * that worker's answer. Proxied responses carry no worker header of their own.
 */
export async function askWorker(port: number, path: string, options: { healthPath?: string; timeoutMs?: number } = {}): Promise<WorkerAnswer> {
  const head = (p: string): string => `GET ${p} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`;
  const result = await rawRequest(port, head(options.healthPath ?? '/healthcheck') + head(path), {
    responses: 2,
    waitMs: options.timeoutMs ?? 5000,
  });
  const [health, answer] = result.responses;
  if (!health?.complete || !answer?.complete) {
    throw new Error(`askWorker ${path}: ${result.responses.length} responses (timedOut ${result.timedOut}, reset ${result.reset})`);
  }
  const workerPid = health.headers['x-gateway-worker']?.[0];
  if (workerPid === undefined) throw new Error(`no x-gateway-worker header on the health check (status ${health.status})`);
  const headers: IncomingHttpHeaders = {};
  for (const [name, values] of Object.entries(answer.headers)) headers[name] = values.join(', ');
  return { status: answer.status, headers, body: answer.body.toString('utf8'), workerPid };
}

export interface WorkerConnection {
  /** Pid of the worker that accepted this connection. */
  workerPid: string;
  /** GET `path` on this connection; resolves with the response, rejects if the connection ends first. */
  get(path: string): Promise<ParsedResponse>;
  close(): void;
}

/** A keep-alive connection whose worker is known (asked with a health check on it first). */
export async function openWorkerConnection(t: Teardown, port: number, healthPath = '/healthcheck'): Promise<WorkerConnection> {
  const socket = connect({ host: '127.0.0.1', port });
  t.teardown(() => socket.destroy());
  let data = Buffer.alloc(0);
  let waiting: { resolve: (r: ParsedResponse) => void; reject: (e: Error) => void } | null = null;
  const settle = (): void => {
    const [response] = parseResponses(data);
    if (!waiting || !response?.complete) return;
    data = data.subarray(response.consumed);
    const { resolve } = waiting;
    waiting = null;
    resolve(response);
  };
  const fail = (err: Error): void => {
    const pending = waiting;
    waiting = null;
    pending?.reject(err);
  };
  socket.on('data', (chunk: Buffer) => {
    data = Buffer.concat([data, chunk]);
    settle();
  });
  socket.on('error', fail);
  socket.on('close', () => fail(new Error('the connection closed before the response')));
  const get = (path: string): Promise<ParsedResponse> =>
    new Promise((resolve, reject) => {
      waiting = { resolve, reject };
      socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
    });
  const health = await get(healthPath);
  const workerPid = health.headers['x-gateway-worker']?.[0];
  if (workerPid === undefined) throw new Error(`no x-gateway-worker header on the health check (status ${health.status})`);
  return { workerPid, get, close: () => socket.destroy() };
}

/** The gateway's log lines saying a worker died or was replaced (none while every worker lives). */
export function workerDeaths(gateway: GatewayProcess): string[] {
  return gateway.lines.filter((l) => /^worker (killed|exited)|replacing it/.test(String(l.msg))).map((l) => String(l.msg));
}
