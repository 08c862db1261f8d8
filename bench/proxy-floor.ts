// Child of bench/proxy.ts: the "floor" stand-in, what uWS + node:net cost by themselves on this
// machine, to read the gateway's figures against: a uWS server forwarding every request over
// keep-alive net.Sockets (one read buffer per socket, net's `onread`), the request head one string,
// the answer framed by Content-Length only (no chunked, no validation, no routing, metrics, log,
// timeouts or error handling beyond a 502). Not a proxy anyone should run: the least work a Node
// proxy of this shape can do per request. As many processes as the gateway has workers.
// argv: <upstream origin> <port> <processes>. Prints {"ready":true} once every process listens.
import net from 'node:net';
import { loadUws } from '../src/native/uws.js';
import type { UwsResponse } from '../src/native/uws-types.js';
import { runClusterContender } from './cluster-contender.js';

const [upstream, portText, processesText] = process.argv.slice(2);
if (upstream === undefined) throw new Error('usage: node dist/bench/proxy-floor.js <upstream origin> <port> [processes]');
const port = Number(portText);
const processes = Number(processesText ?? 2);
const origin = new URL(upstream);
const hostLine = ` HTTP/1.1\r\nhost: ${origin.host}\r\n`;
const CRLFCRLF = Buffer.from('\r\n\r\n');
/** uWS writes `Content-Length`; other servers may send it lower-case. */
const CONTENT_LENGTH = [Buffer.from('\r\nContent-Length:'), Buffer.from('\r\ncontent-length:')];

class FloorConnection {
  readonly socket: net.Socket;
  res: UwsResponse | null = null;
  aborted = false;
  private readonly buffer = Buffer.allocUnsafeSlow(32 * 1024);
  private head: Buffer | null = null;
  private bodyStart = 0;
  private length = -1;

  constructor(private readonly idle: FloorConnection[]) {
    this.socket = net.connect({ host: origin.hostname, port: Number(origin.port), noDelay: true, onread: { buffer: this.buffer, callback: this.onRead } } as net.NetConnectOpts);
    this.socket.on('error', () => this.fail());
  }

  send(res: UwsResponse, method: string, path: string, headers: string): void {
    this.res = res;
    this.aborted = false;
    this.length = -1;
    this.socket.write(method + ' ' + path + hostLine + headers + '\r\n');
  }

  private readonly onRead = (nread: number, buf: Buffer): boolean => {
    // Assumes the whole answer arrives in one read (true for the bench's small fixed body).
    const headEnd = buf.indexOf(CRLFCRLF, 0);
    if (headEnd < 0 || headEnd > nread) return this.fail();
    let at = buf.indexOf(CONTENT_LENGTH[0]!, 0);
    if (at < 0 || at > headEnd) at = buf.indexOf(CONTENT_LENGTH[1]!, 0);
    let length = 0;
    if (at >= 0 && at < headEnd) {
      for (let i = at + CONTENT_LENGTH[0]!.length; i < headEnd; i++) {
        const c = buf[i]!;
        if (c >= 48 && c <= 57) length = length * 10 + c - 48;
        else if (c === 13) break;
      }
    }
    this.head = buf;
    this.bodyStart = headEnd + 4;
    this.length = length;
    const res = this.res!;
    this.res = null;
    if (!this.aborted) res.cork(this.corked(res));
    this.idle.push(this);
    return true;
  };

  private corked(res: UwsResponse): () => void {
    return () => {
      const buf = this.head!;
      res.writeStatus(buf.toString('latin1', 9, 12));
      res.writeHeader('content-type', 'application/json');
      res.end(buf.subarray(this.bodyStart, this.bodyStart + this.length));
    };
  }

  private fail(): boolean {
    const res = this.res;
    this.res = null;
    if (res !== null && !this.aborted) res.cork(() => res.writeStatus('502').end());
    this.socket.destroy();
    return false;
  }
}

runClusterContender('floor', processes, () => {
  const idle: FloorConnection[] = [];
  const { uws } = loadUws();
  const app = uws.App();
  app.any('/*', (res, req) => {
    let headers = '';
    req.forEach((name, value) => {
      if (name !== 'host' && name !== 'connection') headers += name + ': ' + value + '\r\n';
    });
    const query = req.getQuery();
    const path = query ? `${req.getUrl()}?${query}` : req.getUrl();
    const connection = idle.pop() ?? new FloorConnection(idle);
    res.onAborted(() => {
      connection.aborted = true;
    });
    connection.send(res, req.getCaseSensitiveMethod(), path, headers);
  });
  app.listen('127.0.0.1', port, (socket) => {
    if (socket === false) {
      console.error('floor: could not listen');
      process.exit(1);
    }
    process.send?.('listening');
  });
});
