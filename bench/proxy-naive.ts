// Child of bench/proxy.ts: the "naive uWS + undici" stand-in the issue asks for, to see what the
// gateway's own client is worth: a minimal uWS server (no routing, no metrics, no log) forwarding
// every request with undici's Pool.dispatch (one keep-alive pool per process), answer buffered and
// sent in one corked write. As many processes as the gateway has workers (node:cluster, SO_REUSEPORT).
// argv: <upstream origin> <port> <processes>. Prints {"ready":true} once every process listens.
import { Pool, type Dispatcher } from 'undici';
import { loadUws } from '../src/native/uws.js';
import type { UwsResponse } from '../src/native/uws-types.js';
import { runClusterContender } from './cluster-contender.js';

const [upstream, portText, processesText] = process.argv.slice(2);
if (upstream === undefined) throw new Error('usage: node dist/bench/proxy-naive.js <upstream origin> <port> [processes]');
const port = Number(portText);
const processes = Number(processesText ?? 2);

/** Response headers a proxy must not pass on (uWS writes its own Date and framing). */
const DROPPED = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'date', 'te', 'trailer', 'upgrade', 'proxy-connection']);

runClusterContender('naive', processes, () => {
  const pool = new Pool(upstream, { connections: 256, pipelining: 1 });
  const { uws } = loadUws();
  const app = uws.App();
  app.any('/*', (res, req) => {
    const headers: string[] = [];
    req.forEach((name, value) => {
      if (name !== 'host' && name !== 'connection' && name !== 'keep-alive') headers.push(name, value);
    });
    const query = req.getQuery();
    const path = query ? `${req.getUrl()}?${query}` : req.getUrl();
    pool.dispatch({ method: req.getMethod().toUpperCase() as Dispatcher.HttpMethod, path, headers }, new Forward(res));
  });
  app.listen('127.0.0.1', port, (socket) => {
    if (socket === false) {
      console.error('naive: could not listen');
      process.exit(1);
    }
    process.send?.('listening');
  });
});

class Forward implements Dispatcher.DispatchHandler {
  private aborted = false;
  private status = 0;
  private headers: Buffer[] = [];
  private readonly chunks: Buffer[] = [];

  constructor(private readonly res: UwsResponse) {
    res.onAborted(() => {
      this.aborted = true;
    });
  }

  onConnect(): void {}

  onHeaders(statusCode: number, headers: Buffer[]): boolean {
    this.status = statusCode;
    this.headers = headers;
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.chunks.push(chunk);
    return true;
  }

  onComplete(): void {
    if (this.aborted) return;
    this.res.cork(() => {
      this.res.writeStatus(String(this.status));
      const raw = this.headers;
      for (let i = 0; i < raw.length; i += 2) {
        if (!DROPPED.has(raw[i]!.toString('latin1').toLowerCase())) this.res.writeHeader(raw[i]!, raw[i + 1]!);
      }
      this.res.end(this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks));
    });
  }

  onError(): void {
    if (this.aborted) return;
    this.res.cork(() => {
      this.res.writeStatus('502');
      this.res.end();
    });
  }
}
