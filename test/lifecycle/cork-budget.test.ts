/*
 * The cork budget (src/http/cork-budget.ts): uWS 20.30 drops a write that does not fit what is left of
 * its 16 KiB cork buffer whenever the flush before it is taken only in part, so no cork may carry more
 * than that in writes that must not fail. That moment (a socket exactly full while uWS's own buffer is
 * empty) cannot be made on demand through a real socket, so the exchange and the whole-body writer are
 * driven here against a response that records what each cork carries; the 1 GiB streaming test runs
 * the same paths over real sockets.
 */
import t from 'tap';
import fc from 'fast-check';
import { CORK_BUFFER_BYTES, endWithBody } from '../../src/http/cork-budget.js';
import { HeadBlock } from '../../src/http/head-block.js';
import { writeContent } from '../../src/http/problem-json.js';
import type { UwsBytes, UwsResponse } from '../../src/native/uws-types.js';
import { RequestContext } from '../../src/exchange/context.js';
import { ProxiedResponse } from '../../src/lifecycle/proxied-response.js';
import { ResponseChain } from '../../src/lifecycle/respond.js';
import { RetryHandler, type RetryHost } from '../../src/lifecycle/retry-handler.js';
import { UwsClient } from '../../src/lifecycle/uws/uws-client.js';
import type { UpstreamHandler } from '../../src/upstream/call.js';
import type { UpstreamPool } from '../../src/upstream/pool.js';
import { ResponseHead } from '../../src/upstream/response-parser.js';

/** What uWS itself puts in a cork beside our writes: Date, its own header. */
const UWS_OWN_HEADERS = 64;
const CHUNK_FRAMING = 12;

const size = (v: UwsBytes): number => (typeof v === 'string' ? Buffer.byteLength(v) : v.byteLength);
const bytesOf = (v: UwsBytes): Buffer => (typeof v === 'string' ? Buffer.from(v) : Buffer.from(v as Uint8Array));

/** Takes everything at once (tryEnd is all-or-nothing here: `takeAtMost` limits one call). */
class RecordingResponse {
  corked = false;
  corkBytes = 0;
  maxCorkBytes = 0;
  outsideCork = 0;
  headWritten = false;
  sizedStarted = false;
  readonly body: Buffer[] = [];
  ended = false;
  offset = 0;
  takeAtMost = Infinity;
  writable: ((offset: number) => boolean) | null = null;
  /** Corks that carried anything. */
  corks = 0;
  /** The head as written: the status line, then "name: value" per header line. */
  readonly head: string[] = [];

  private add(n: number): void {
    if (!this.corked) this.outsideCork++;
    if (this.corkBytes === 0) this.corks++;
    if (!this.headWritten) {
      this.headWritten = true;
      n += UWS_OWN_HEADERS;
    }
    this.corkBytes += n;
    this.maxCorkBytes = Math.max(this.maxCorkBytes, this.corkBytes);
  }

  cork(cb: () => void): this {
    if (this.corked) {
      cb();
      return this;
    }
    this.corked = true;
    this.corkBytes = 0;
    try {
      cb();
    } finally {
      this.corked = false;
    }
    return this;
  }
  writeStatus(status: UwsBytes): this {
    this.add(size(status) + 11);
    this.head.push(...bytesOf(status).toString('latin1').split('\r\n'));
    return this;
  }
  writeHeader(name: UwsBytes, value: UwsBytes): this {
    this.add(size(name) + size(value) + 4);
    this.head.push(`${bytesOf(name).toString('latin1')}: ${bytesOf(value).toString('latin1')}`);
    return this;
  }
  write(chunk: UwsBytes): boolean {
    this.add(size(chunk) + CHUNK_FRAMING);
    this.body.push(bytesOf(chunk));
    return true;
  }
  end(body?: UwsBytes): this {
    const b = body === undefined ? Buffer.alloc(0) : bytesOf(body);
    this.add(b.length + 32);
    this.body.push(b);
    this.ended = true;
    return this;
  }
  endWithoutBody(): this {
    this.add(32);
    this.ended = true;
    return this;
  }
  tryEnd(chunk: UwsBytes, total: number): [boolean, boolean] {
    if (!this.sizedStarted) {
      this.sizedStarted = true;
      this.add(32);
    }
    // The body itself is an optional write: not in the budget.
    const b = bytesOf(chunk);
    const taken = Math.min(b.length, this.takeAtMost);
    this.body.push(b.subarray(0, taken));
    this.offset += taken;
    if (this.offset === total) this.ended = true;
    return [taken === b.length, this.offset === total];
  }
  onWritable(handler: (offset: number) => boolean): this {
    this.writable = handler;
    return this;
  }
  onAborted(): this {
    return this;
  }
  close(): this {
    this.ended = true;
    return this;
  }
  getWriteOffset(): number {
    return this.offset;
  }
  pause(): void {}
  resume(): void {}
  received(): Buffer {
    return Buffer.concat(this.body);
  }
}

const host: RetryHost = {
  retryTarget: () => null,
  poolFor: () => fakePool,
  upstreamFailed() {},
  upstreamResent() {},
  tlsHandshakeFailed() {},
  breakerSuccess() {},
  breakerFailure() {},
};

const fakeCall = { abort() {}, resume() {}, writeBody: () => true, endBody() {} };
let handler: UpstreamHandler | null = null;
const fakePool = {
  request: (_m: string, _p: string, _h: readonly string[], _b: unknown, h: UpstreamHandler) => {
    handler = h;
    return fakeCall;
  },
} as unknown as UpstreamPool;

/** An exchange as the forward phase makes one (client side, response, retry handler); returns the upstream call's handler. */
function exchange(res: RecordingResponse): UpstreamHandler {
  const ctx = new RequestContext({ method: 'GET', url: '/x', query: '', peer: '127.0.0.1', startedAt: 0, xForwardedFor: undefined, hasBody: false, secure: false, contentLength: -1, forward: [] });
  ctx.upstream = 'http://u';
  const client = new UwsClient(res as unknown as UwsResponse, ctx, { via: '1.1 gw', viaBytes: Buffer.from('1.1 gw'), closing: false });
  const response = new ProxiedResponse(ctx, client, new ResponseChain(() => {}));
  const retry = new RetryHandler(host, response, 'GET', '/x');
  response.leg = retry;
  client.watch(response);
  retry.send('http://u', null);
  return handler!;
}

interface Answer {
  headers: Array<[string, number]>;
  chunks: number[];
  sized: boolean;
}

/** Runs one answer through an exchange; returns the recording and the body the upstream sent. */
async function run(answer: Answer): Promise<{ res: RecordingResponse; sent: Buffer }> {
  const res = new RecordingResponse();
  const upstream = exchange(res);
  const raw: Buffer[] = [];
  for (const [name, valueBytes] of answer.headers) raw.push(Buffer.from(name), Buffer.alloc(valueBytes, 'v'));
  const parts = answer.chunks.map((n, i) => Buffer.alloc(n, 97 + (i % 26)));
  const sent = Buffer.concat(parts);
  const total = answer.sized ? sent.length : -1;
  upstream.onHead(200, ResponseHead.fromHeaders(200, raw, total, total, answer.sized && parts.length > 0));
  await Promise.resolve();
  for (const part of parts) {
    if (!upstream.onData(part)) {
      // The client is behind: let it take everything, as onWritable would be called.
      res.takeAtMost = Infinity;
      res.writable?.(res.offset);
    }
  }
  upstream.onEnd();
  await Promise.resolve();
  return { res, sent };
}

/** The most header bytes (name, ": ", value, CRLF) a head the upstream client admits can hold: 16 KiB less its status line and end. */
const MAX_HEADER_BYTES = 16 * 1024 - 'HTTP/1.1 200 OK\r\n'.length - 2;
const headerSets = fc
  .array(fc.tuple(fc.constantFrom('x-a', 'set-cookie', 'x-trace', 'content-type'), fc.integer({ min: 0, max: 3000 })), { maxLength: 20 })
  .filter((hs) => hs.reduce((n, [k, v]) => n + k.length + v + 4, 0) <= MAX_HEADER_BYTES);

/** The head lines the client must get: the status line, every header in order, then Via. */
function expectedHead(headers: Array<[string, number]>): string[] {
  return ['200 OK', ...headers.map(([name, v]) => `${name}: ${'v'.repeat(v)}`), 'via: 1.1 gw'];
}

t.test('no cork carries more than uWS buffers, and every body byte arrives in order', async () => {
  await fc.assert(
    fc.asyncProperty(
      headerSets,
      fc.array(fc.integer({ min: 1, max: 200 * 1024 }), { maxLength: 6 }),
      fc.boolean(),
      async (headers, chunks, sized) => {
        const { res, sent } = await run({ headers, chunks, sized });
        if (res.maxCorkBytes > CORK_BUFFER_BYTES) throw new Error(`a cork carried ${res.maxCorkBytes} bytes`);
        if (res.outsideCork !== 0) throw new Error(`${res.outsideCork} writes outside a cork`);
        if (!res.ended) throw new Error('the response was not ended');
        if (!res.received().equals(sent)) throw new Error('the body arrived changed');
        const want = expectedHead(headers);
        if (JSON.stringify(res.head) !== JSON.stringify(want)) throw new Error(`the head arrived changed: ${res.head.length} lines for ${want.length}`);
      },
    ),
    { numRuns: 300 },
  );
});

t.test('a head too large to share a cork goes out in corks of its own; a usual one shares the body\'s', async (t) => {
  // Nearly 16 KiB of headers (as much as the upstream client admits) and a small body.
  const big: Array<[string, number]> = Array.from({ length: 16 }, () => ['x-trace', 1000]);
  const spilled = await run({ headers: big, chunks: [2000], sized: true });
  t.ok(spilled.res.corks >= 3, `the head and body went out in ${spilled.res.corks} corks`);
  t.ok(spilled.res.maxCorkBytes <= CORK_BUFFER_BYTES, `the fullest cork carried ${spilled.res.maxCorkBytes} bytes`);
  t.same(spilled.res.head, expectedHead(big), 'every header line, in order, once');
  t.ok(spilled.res.received().equals(spilled.sent));
  // One header line as long as the head may be: a piece of its own.
  const oneLong: Array<[string, number]> = [['x-a', 10], ['set-cookie', MAX_HEADER_BYTES - 30], ['x-a', 1]];
  const long = await run({ headers: oneLong, chunks: [10], sized: false });
  t.ok(long.res.maxCorkBytes <= CORK_BUFFER_BYTES, `the fullest cork carried ${long.res.maxCorkBytes} bytes`);
  t.same(long.res.head, expectedHead(oneLong));
  // A head of a few KiB: head and body in one cork, as before.
  const usual = await run({ headers: [['x-a', 3000]], chunks: [100], sized: true });
  t.equal(usual.res.corks, 1, 'head and body in one cork');
  t.same(usual.res.head, expectedHead([['x-a', 3000]]));
});

t.test('the shortcuts and their other paths are both reached', async (t) => {
  // One small chunk: head and body in one end() (the fast path).
  const small = await run({ headers: [['x-a', 10]], chunks: [100], sized: true });
  t.equal(small.res.sizedStarted, false, 'a small whole body goes out by end()');
  // One large chunk: tryEnd, since end() would overflow the cork.
  const large = await run({ headers: [['x-a', 10]], chunks: [64 * 1024], sized: true });
  t.equal(large.res.sizedStarted, true, 'a large whole body goes out by tryEnd');
  t.ok(large.res.received().equals(large.sent));
  // Chunked: a small chunk in the head's cork, a large one in pieces.
  const chunked = await run({ headers: [['x-a', 8000]], chunks: [9000, 64 * 1024], sized: false });
  t.ok(chunked.res.body.length >= 1 + 5, 'the large chunk went out as several writes');
  t.ok(chunked.res.maxCorkBytes <= CORK_BUFFER_BYTES);
  t.ok(chunked.res.received().equals(chunked.sent));
});

t.test('a sized body the socket takes in part is finished from onWritable', async (t) => {
  const res = new RecordingResponse();
  res.takeAtMost = 1000;
  const upstream = exchange(res);
  const body = Buffer.alloc(100_000, 'q');
  upstream.onHead(200, ResponseHead.fromHeaders(200, [], body.length, body.length, true));
  t.equal(upstream.onData(body), false, 'the upstream is paused');
  t.notOk(res.ended);
  res.takeAtMost = Infinity;
  res.writable!(res.offset);
  upstream.onEnd();
  t.ok(res.ended);
  t.ok(res.received().equals(body));
});

t.test('whole answers of the gateway own: end() when they fit, tryEnd and onWritable when not', async (t) => {
  for (const length of [100, 15_000, 16_500, 300_000]) {
    const res = new RecordingResponse();
    res.takeAtMost = 40_000;
    const body = Buffer.alloc(length, 's');
    res.cork(() => {
      writeContent(res as unknown as UwsResponse, 200, ['content-type', 'application/json'], body, { via: '1.1 gw', headersOnly: false, closeConnection: false });
    });
    while (!res.ended) {
      t.ok(res.writable, `${length}: waits for onWritable`);
      res.cork(() => res.writable!(res.offset));
    }
    t.ok(res.maxCorkBytes <= CORK_BUFFER_BYTES, `${length}: the cork carried ${res.maxCorkBytes} bytes`);
    t.ok(res.received().equals(body), `${length}: every byte`);
  }
  // A string body counted at its bytes, not its UTF-16 units.
  const res = new RecordingResponse();
  const text = 'é'.repeat(9000);
  res.cork(() => endWithBody(res as unknown as UwsResponse, text, false, 0));
  t.ok(res.maxCorkBytes <= CORK_BUFFER_BYTES);
  t.equal(res.received().toString(), text);
});

t.test('an answer written many times as it is keeps its head encoded: the bytes of the head built each time', async (t) => {
  // A cached answer's headers (a value read from an upstream's bytes as latin1), and the request's own.
  const headers = ['content-type', 'application/json', 'x-name', 'caf\u00e9', 'age', '3', 'x-cache', 'HIT'];
  const own = ['x-request-id', 'r-1'];
  const write = (block: HeadBlock | undefined, via: string, headersOnly: boolean, extra: readonly string[] | null): RecordingResponse => {
    const res = new RecordingResponse();
    res.cork(() => {
      writeContent(res as unknown as UwsResponse, 200, headers, Buffer.from('{}'), { via, headersOnly, closeConnection: false, headers: extra, block });
    });
    return res;
  };
  for (const headersOnly of [false, true]) {
    for (const extra of [own, null]) {
      const block = new HeadBlock();
      for (const via of ['1.1 gw', '1.1 gw', '1.1 other']) {
        const built = write(undefined, via, headersOnly, extra);
        const kept = write(block, via, headersOnly, extra);
        const what = `${via}, ${headersOnly ? 'HEAD' : 'GET'}, ${extra === null ? 'no' : 'with'} headers of its own`;
        t.same(kept.head, built.head, `${what}: the same head`);
        t.ok(kept.received().equals(built.received()), `${what}: the same body`);
        t.equal(kept.maxCorkBytes, built.maxCorkBytes, `${what}: the same cork`);
        t.equal(block.via, via, 'made again for another Via');
      }
    }
  }
});
