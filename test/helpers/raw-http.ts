/**
 * A raw-socket HTTP/1.1 client for requests no well-behaved client would send, and for watching
 * exactly what the server writes and when it closes.
 */
import net from 'node:net';
import { Worker } from 'node:worker_threads';

export interface ParsedResponse {
  status: number;
  /** The status line's reason phrase. */
  reason: string;
  /** Lower-case names; repeated headers keep every value. */
  headers: Record<string, string[]>;
  body: Buffer;
  /** The body is complete per Content-Length or chunked framing. */
  complete: boolean;
  /** Bytes of the buffer this response used. */
  consumed: number;
}

export interface RawResult {
  /** Everything the server sent. */
  data: Buffer;
  /** The server closed (FIN or reset) before we gave up. */
  closedByServer: boolean;
  /** We gave up after waitMs. */
  timedOut: boolean;
  reset: boolean;
  elapsedMs: number;
  /** Responses parsed from `data`, in order. */
  responses: ParsedResponse[];
}

export interface RawOptions {
  /** Give up after this long. */
  waitMs?: number;
  /** Resolve once this many complete responses arrived (default: wait for close or waitMs). */
  responses?: number;
  /** Pause between the parts of an array payload. */
  partDelayMs?: number;
  /**
   * Send each part of an array payload only once the answers to the parts before it are complete
   * (keep-alive requests one after the other on one connection, not pipelined), instead of partDelayMs.
   */
  inTurn?: boolean;
  /** Parse bodies as HEAD responses (no body). */
  head?: boolean;
}

export function rawRequest(port: number, payload: string | Buffer | ReadonlyArray<string | Buffer>, options: RawOptions = {}): Promise<RawResult> {
  const { waitMs = 5000, responses: wanted, partDelayMs = 20, head = false, inTurn = false } = options;
  const parts = typeof payload === 'string' || Buffer.isBuffer(payload) ? [payload] : payload;
  return new Promise((resolve) => {
    const started = Date.now();
    const chunks: Buffer[] = [];
    let settled = false;
    let reset = false;
    const socket = net.connect(port, '127.0.0.1');
    socket.setNoDelay(true);
    const finish = (closedByServer: boolean, timedOut: boolean): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const data = Buffer.concat(chunks);
      resolve({ data, closedByServer, timedOut, reset, elapsedMs: Date.now() - started, responses: parseResponses(data, head) });
    };
    const timer = setTimeout(() => finish(false, true), waitMs);
    let sent = 0;
    socket.on('connect', async () => {
      if (inTurn) {
        socket.write(parts[sent++]!);
        return;
      }
      for (let i = 0; i < parts.length; i++) {
        if (i > 0) await new Promise((r) => setTimeout(r, partDelayMs));
        if (socket.destroyed) return;
        socket.write(parts[i]!);
      }
    });
    socket.on('data', (chunk) => {
      chunks.push(chunk);
      const complete = parseResponses(Buffer.concat(chunks), head).filter((r) => r.complete).length;
      if (wanted !== undefined && complete >= wanted) {
        finish(false, false);
        return;
      }
      if (inTurn && complete >= sent && sent < parts.length && !socket.destroyed) socket.write(parts[sent++]!);
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ECONNRESET' || err.code === 'EPIPE') reset = true;
    });
    socket.on('close', () => finish(true, false));
  });
}

export function parseResponses(data: Buffer, head = false): ParsedResponse[] {
  const out: ParsedResponse[] = [];
  let offset = 0;
  while (offset < data.length) {
    const parsed = parseResponse(data.subarray(offset), head);
    if (parsed === null) break;
    out.push(parsed);
    if (!parsed.complete) break;
    offset += parsed.consumed;
  }
  return out;
}

export function parseResponse(data: Buffer, head = false): ParsedResponse | null {
  const end = data.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const lines = data.subarray(0, end).toString('latin1').split('\r\n');
  const match = /^HTTP\/1\.[01] (\d{3}) ?(.*)/.exec(lines[0]!);
  if (match === null) return null;
  const status = Number(match[1]);
  const reason = match[2]!;
  const headers: Record<string, string[]> = Object.create(null) as Record<string, string[]>;
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    (headers[name] ??= []).push(line.slice(colon + 1).trim());
  }
  const bodyStart = end + 4;
  if (head || status === 204 || status === 304 || (status >= 100 && status < 200)) {
    return { status, reason, headers, body: Buffer.alloc(0), complete: true, consumed: bodyStart };
  }
  if (headers['transfer-encoding']?.some((v) => v.toLowerCase().includes('chunked'))) {
    const body: Buffer[] = [];
    let at = bodyStart;
    for (;;) {
      const lineEnd = data.indexOf('\r\n', at);
      if (lineEnd < 0) return { status, reason, headers, body: Buffer.concat(body), complete: false, consumed: data.length };
      const size = parseInt(data.subarray(at, lineEnd).toString('latin1'), 16);
      if (size === 0) {
        const trailerEnd = data.indexOf('\r\n', lineEnd + 2);
        const complete = trailerEnd >= 0;
        return { status, reason, headers, body: Buffer.concat(body), complete, consumed: complete ? trailerEnd + 2 : data.length };
      }
      if (lineEnd + 2 + size + 2 > data.length) {
        body.push(data.subarray(lineEnd + 2, Math.min(data.length, lineEnd + 2 + size)));
        return { status, reason, headers, body: Buffer.concat(body), complete: false, consumed: data.length };
      }
      body.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
    }
  }
  const length = headers['content-length'] ? Number(headers['content-length'][0]) : 0;
  const available = data.length - bodyStart;
  const complete = available >= length;
  return {
    status,
    reason,
    headers,
    body: data.subarray(bodyStart, bodyStart + Math.min(length, available)),
    complete,
    consumed: bodyStart + Math.min(length, available),
  };
}

/** A port nothing listens on (bound once, then released). */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Opens a connection to 127.0.0.1:port and closes it: 'connected', or the error code (ECONNREFUSED). */
export function tryConnect(port: number): Promise<'connected' | string> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

/**
 * A port on 127.0.0.1 to which a TCP connect hangs: a listener that never accepts (it lives in a worker
 * thread blocked right after listen()), with its accept queue filled, so the kernel drops further SYNs.
 * (A TEST-NET address is refused at once on some hosts, and 10.x may be routed somewhere.)
 */
export async function hungPort(t: { teardown(fn: () => unknown): void }): Promise<number> {
  const wake = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(
    `const net = require('node:net');
     const { parentPort, workerData } = require('node:worker_threads');
     const server = net.createServer().listen({ host: '127.0.0.1', port: 0, backlog: 1 }, () => {
       parentPort.postMessage(server.address().port);
       Atomics.wait(workerData, 0, 0, 120000);
       server.close();
     });`,
    { eval: true, workerData: wake },
  );
  const port = await new Promise<number>((resolve) => worker.once('message', resolve));
  const fillers: net.Socket[] = [];
  for (let i = 0; i < 4; i++) {
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => {});
    fillers.push(socket);
  }
  t.teardown(async () => {
    for (const socket of fillers) socket.destroy();
    Atomics.store(wake, 0, 1);
    Atomics.notify(wake, 0);
    await worker.terminate();
  });
  await new Promise((resolve) => setTimeout(resolve, 100));
  return port;
}
