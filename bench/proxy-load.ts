// Child of bench/proxy.ts: generates load in its own process, so the bench's event loop is never the
// bottleneck. argv[2] is a JSON LoadJob; "measuring" is printed on stdout when the warm-up is over,
// then one JSON LoadResult line.
//
// - "autocannon": closed loop, fixed connections, no pipelining (uWS 20.30 closes a connection that
//   pipelines while a response is pending; native-notes.md). Latency is recorded in microseconds from
//   autocannon's per-response timings (its own histogram keeps whole milliseconds only).
// - "paced": a fixed request rate spread evenly over time (a request is due every 1/rate s, sent on a
//   1 ms tick on any idle keep-alive connection). autocannon's overallRate is not used for this: it
//   lets each connection send its per-second quota back to back at the start of every second and then
//   idle, so "half the peak rate" would really be full-concurrency bursts half of each second.
import { createRequire } from 'node:module';
import { connect, type Socket } from 'node:net';
import * as hdr from 'hdr-histogram-js';

export interface LoadJob {
  mode: 'autocannon' | 'paced';
  url: string;
  connections: number;
  durationS: number;
  warmupS: number;
  /** Request headers (an API key). */
  headers?: Record<string, string>;
  /** paced: requests per second. */
  rate?: number;
}

export interface LoadResult {
  requests: number;
  durationS: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Non-2xx responses, socket errors, timeouts. */
  failures: number;
  /** paced: requests that had to wait for an idle connection past their due time. */
  late?: number;
}

const require = createRequire(import.meta.url);

function histogram(): hdr.Histogram {
  return hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3, useWebAssembly: false });
}

interface AutocannonResult {
  duration: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  '2xx': number;
}
interface AutocannonTracker {
  on(event: 'response', cb: (client: unknown, statusCode: number, bytes: number, ms: number) => void): void;
}
type Autocannon = (opts: Record<string, unknown>, cb: (err: Error | null, result: AutocannonResult) => void) => AutocannonTracker;

function runAutocannon(job: LoadJob, durationS: number, record: boolean): Promise<LoadResult> {
  const autocannon = require('autocannon') as Autocannon;
  const latencies = histogram();
  return new Promise((resolve, reject) => {
    const tracker = autocannon(
      { url: job.url, headers: job.headers ?? {}, connections: job.connections, pipelining: 1, duration: durationS, timeout: 10 },
      (err, result) => {
        if (err) return reject(err);
        const ok = result['2xx'];
        resolve({
          requests: ok,
          durationS: result.duration,
          rps: ok / result.duration,
          p50Ms: latencies.getValueAtPercentile(50) / 1000,
          p99Ms: latencies.getValueAtPercentile(99) / 1000,
          failures: result.non2xx + result.errors + result.timeouts,
        });
      },
    );
    if (record) {
      tracker.on('response', (_client, status, _bytes, ms) => {
        if (status >= 200 && status < 300) latencies.recordValue(Math.max(1, Math.round(ms * 1000)));
      });
    }
  });
}

/** One keep-alive connection that sends GETs and parses Content-Length framed answers. */
class PacedConnection {
  private readonly socket: Socket;
  private buffer: Buffer | null = null;
  private sentAt = 0;
  busy = false;
  open = false;

  constructor(
    host: string,
    port: number,
    private readonly request: Buffer,
    private readonly onAnswer: (conn: PacedConnection, ok: boolean, sentAt: number) => void,
    onFailure: () => void,
  ) {
    this.socket = connect({ host, port, noDelay: true });
    this.socket.on('connect', () => (this.open = true));
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.socket.on('error', () => {});
    this.socket.on('close', () => {
      this.open = false;
      if (this.busy) onFailure();
      this.busy = true; // never reused
    });
  }

  send(): void {
    this.busy = true;
    this.sentAt = performance.now();
    this.socket.write(this.request);
  }

  private onData(chunk: Buffer): void {
    const data = this.buffer === null ? chunk : Buffer.concat([this.buffer, chunk]);
    const headEnd = data.indexOf('\r\n\r\n');
    if (headEnd < 0) {
      this.buffer = data;
      return;
    }
    const head = data.toString('latin1', 0, headEnd);
    const match = /\r\ncontent-length:\s*(\d+)/i.exec(head);
    const length = match === null ? 0 : Number(match[1]);
    const total = headEnd + 4 + length;
    if (data.length < total) {
      this.buffer = data;
      return;
    }
    this.buffer = data.length > total ? data.subarray(total) : null;
    const ok = head.startsWith('HTTP/1.1 2');
    this.busy = false;
    this.onAnswer(this, ok, this.sentAt);
  }

  close(): void {
    this.socket.destroy();
  }
}

async function runPaced(job: LoadJob, durationS: number, record: boolean): Promise<LoadResult> {
  const url = new URL(job.url);
  const request = Buffer.from(`GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`, 'latin1');
  const rate = job.rate!;
  const latencies = histogram();
  const idle: PacedConnection[] = [];
  let answered = 0;
  let failures = 0;
  let late = 0;
  let backlog = 0;
  const onAnswer = (conn: PacedConnection, ok: boolean, sentAt: number): void => {
    if (ok) {
      answered++;
      if (record) latencies.recordValue(Math.max(1, Math.round((performance.now() - sentAt) * 1000)));
    } else {
      failures++;
    }
    if (backlog > 0) {
      backlog--;
      conn.send();
    } else {
      idle.push(conn);
    }
  };
  const connections = Array.from(
    { length: job.connections },
    () => new PacedConnection(url.hostname, Number(url.port), request, onAnswer, () => failures++),
  );
  const deadline = performance.now() + 5000;
  while (connections.some((c) => !c.open)) {
    if (performance.now() > deadline) throw new Error(`paced: could not open ${job.connections} connections to ${url.host}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  idle.push(...connections);
  const start = performance.now();
  const end = start + durationS * 1000;
  let due = 0;
  await new Promise<void>((resolve) => {
    const tick = (): void => {
      const now = performance.now();
      if (now >= end) {
        clearInterval(timer);
        resolve();
        return;
      }
      const target = Math.floor(((now - start) / 1000) * rate);
      for (; due < target; due++) {
        const conn = idle.pop();
        if (conn === undefined) {
          backlog++;
          late++;
        } else {
          conn.send();
        }
      }
    };
    const timer = setInterval(tick, 1);
  });
  const elapsedS = (performance.now() - start) / 1000;
  // Let the answers in flight arrive (they are counted), then stop.
  await new Promise((resolve) => setTimeout(resolve, 200));
  for (const conn of connections) conn.close();
  return {
    requests: answered,
    durationS: elapsedS,
    rps: answered / elapsedS,
    p50Ms: latencies.getValueAtPercentile(50) / 1000,
    p99Ms: latencies.getValueAtPercentile(99) / 1000,
    failures,
    late,
  };
}

async function main(): Promise<void> {
  const job = JSON.parse(process.argv[2]!) as LoadJob;
  const run = job.mode === 'paced' ? runPaced : runAutocannon;
  if (job.warmupS > 0) await run(job, job.warmupS, false);
  // The parent starts counting the contender's CPU time here.
  process.stdout.write('measuring\n');
  const result = await run(job, job.durationS, true);
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(1);
  },
);
