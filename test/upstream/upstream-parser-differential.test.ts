/**
 * Differential property test of the upstream client's response parser: generated answers, valid
 * and malformed, written by a raw socket server in pieces at random boundaries, read once by our
 * UpstreamPool and once by Node's own HTTP client (llhttp). Both must accept the same answers with
 * the same status, end-to-end headers and body, and both must reject the same malformed ones.
 * Where the issue asks us to be stricter than Node, the case says so (`expect: 'we-reject'`) and
 * only our rejection is asserted; the reason is given next to each such kind.
 *
 * UPSTREAM_SEED=<n> replays a run; UPSTREAM_RUNS=<n> changes the number of cases.
 */
import http from 'node:http';
import net from 'node:net';
import t from 'tap';
import fc from 'fast-check';
import { UpstreamPool } from '../../src/upstream/pool.js';
import type { UpstreamError } from '../../src/upstream/call-errors.js';

const SEED = process.env.UPSTREAM_SEED !== undefined ? Number(process.env.UPSTREAM_SEED) : Math.floor(Math.random() * 2 ** 31);
const RUNS = Number(process.env.UPSTREAM_RUNS ?? 300);
const MAX_HEAD = 16 * 1024;
const READ_TIMEOUT_MS = 3000;

type Expect =
  /** Our client and Node's agree. */
  | 'same'
  /** Node is lenient here and the issue asks us to refuse: only our rejection is asserted. */
  | 'we-reject'
  /** A 204/304 followed by bytes: we take the answer without a body (the rest is never read as a next answer). */
  | 'no-body-then-stray';

interface Case {
  label: string;
  method: 'GET' | 'HEAD';
  bytes: Buffer;
  expect: Expect;
  /** Piece boundaries in `bytes`. */
  splits: number[];
}

type Outcome = { ok: true; status: number; headers: string[]; body: Buffer } | { ok: false; reason: string };

// ---- the raw server ----------------------------------------------------------------------------

let current: Case | null = null;
const sockets = new Set<net.Socket>();
const server = net.createServer((socket) => {
  sockets.add(socket);
  socket.setNoDelay(true);
  socket.on('error', () => {});
  socket.on('close', () => sockets.delete(socket));
  let head = '';
  const onData = (chunk: Buffer): void => {
    head += chunk.toString('latin1');
    if (!head.includes('\r\n\r\n')) return;
    socket.off('data', onData);
    void writeAnswer(socket, current!);
  };
  socket.on('data', onData);
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const port = (server.address() as net.AddressInfo).port;
const origin = `http://127.0.0.1:${port}`;

t.teardown(() => {
  for (const socket of sockets) socket.destroy();
  server.close();
});

async function writeAnswer(socket: net.Socket, c: Case): Promise<void> {
  let from = 0;
  for (const at of [...c.splits, c.bytes.length]) {
    if (socket.destroyed) return;
    socket.write(c.bytes.subarray(from, at));
    from = at;
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  socket.end();
}

// ---- the two readers ---------------------------------------------------------------------------

async function readWithOurs(c: Case): Promise<Outcome> {
  const pool = new UpstreamPool({
    origin,
    connections: 1,
    headersTimeoutMs: READ_TIMEOUT_MS,
    bodyTimeoutMs: READ_TIMEOUT_MS,
    maxResponseHeaderBytes: MAX_HEAD,
  });
  try {
    return await new Promise<Outcome>((resolve) => {
      let status = 0;
      let headers: string[] = [];
      const chunks: Buffer[] = [];
      pool.request(c.method, '/', [], null, {
        onHead(s, head) {
          status = s;
          headers = head.headers.map((b) => b.toString('latin1'));
          return true;
        },
        onData(chunk) {
          chunks.push(Buffer.from(chunk));
          return true;
        },
        onEnd() {
          resolve({ ok: true, status, headers, body: Buffer.concat(chunks) });
        },
        onError(err: UpstreamError) {
          resolve({ ok: false, reason: `${err.code}: ${err.message}` });
        },
        onBodyDrain() {},
      });
    });
  } finally {
    pool.destroy();
  }
}

function readWithNode(c: Case): Promise<Outcome> {
  return new Promise<Outcome>((resolve) => {
    let settled = false;
    const settle = (outcome: Outcome): void => {
      if (settled) return;
      settled = true;
      resolve(outcome);
    };
    const req = http.request({ host: '127.0.0.1', port, method: c.method, path: '/', agent: false, maxHeaderSize: MAX_HEAD }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => settle({ ok: true, status: res.statusCode!, headers: endToEnd(res.rawHeaders), body: Buffer.concat(chunks) }));
      res.on('aborted', () => settle({ ok: false, reason: 'aborted' }));
      res.on('error', (err) => settle({ ok: false, reason: (err as NodeJS.ErrnoException).code ?? err.message }));
    });
    req.setTimeout(READ_TIMEOUT_MS, () => req.destroy(new Error('timeout')));
    req.on('error', (err) => settle({ ok: false, reason: (err as NodeJS.ErrnoException).code ?? err.message }));
    req.end();
  });
}

/** The reference rule (independent of the parser's): Node's raw headers minus framing, hop-by-hop and Connection-named ones. */
function endToEnd(raw: string[]): string[] {
  const named = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() !== 'connection') continue;
    for (const token of raw[i + 1]!.split(',')) named.add(token.trim().toLowerCase());
  }
  const hop = new Set(['connection', 'keep-alive', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'content-length']);
  const kept: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (hop.has(name) || name.startsWith('proxy-') || named.has(name)) continue;
    kept.push(raw[i]!, raw[i + 1]!);
  }
  return kept;
}

// ---- generated answers -------------------------------------------------------------------------

const PASS_NAMES = ['Content-Type', 'x-request-id', 'Cache-Control', 'ETag', 'Set-Cookie', 'X-A', 'x-b', 'Vary', 'Date', 'Via', 'Server', "!#$%&'*+.^_`|~0z"];
const HOP_HEADERS: Array<[string, string]> = [
  ['Keep-Alive', 'timeout=5, max=100'],
  ['Proxy-Authenticate', 'Basic realm="x"'],
  ['proxy-connection', 'keep-alive'],
  ['TE', 'trailers'],
  ['Trailer', 'X-Checksum'],
  ['Upgrade', 'websocket'],
];
const VALUE_CHARS = fc.constantFrom(...'abcXYZ019 -_/;=,"()\t'.split(''), '\xe9', '\xff', '\x80');

type Gen = fc.GeneratorValue;

const BOTH_REJECT = [
  'cl+te',
  'cl-dup-same',
  'cl-dup-differ',
  'cl-invalid',
  'bad-chunk-size',
  'chunk-ext-bad',
  'chunk-ext-huge',
  'obs-fold',
  'bad-value-byte',
  'bad-name',
  'space-before-colon',
  'bad-status-line',
  'oversized-head',
  'bare-lf',
  'bad-chunk-end',
  'bad-trailer',
  'short-body',
  'truncated-chunked',
] as const;
const WE_REJECT = ['te-other', 'te-twice', 'status-range', 'version', 'reason-ctl', 'leading-crlf'] as const;
type Mutation = 'none' | (typeof BOTH_REJECT)[number] | (typeof WE_REJECT)[number] | 'stray-after-no-body';

/** Every kind, in the order the first runs take them (see the property). */
const ALL_KINDS: readonly Mutation[] = ['none', ...BOTH_REJECT, ...WE_REJECT, 'stray-after-no-body'];

/** `forced`: the kind of case to make, instead of a random one. */
function randomCase(g: Gen, forced: Mutation | null = null): Case {
  const drawn: Mutation = g(() =>
    fc.oneof(
      { weight: 6, arbitrary: fc.constant<Mutation>('none') },
      { weight: 4, arbitrary: fc.constantFrom<Mutation>(...BOTH_REJECT) },
      { weight: 2, arbitrary: fc.constantFrom<Mutation>(...WE_REJECT) },
      { weight: 1, arbitrary: fc.constant<Mutation>('stray-after-no-body') },
    ),
  );
  const mutation = forced ?? drawn;
  const touchesBody = mutation !== 'none' && mutation !== 'stray-after-no-body';
  let method: 'GET' | 'HEAD' = touchesBody ? 'GET' : g(() => fc.constantFrom<'GET' | 'HEAD'>('GET', 'GET', 'GET', 'HEAD'));
  let status = touchesBody ? 200 : g(() => fc.constantFrom(200, 200, 201, 203, 204, 206, 301, 304, 404, 418, 500, 503));
  if (mutation === 'stray-after-no-body') {
    method = 'GET';
    status = g(() => fc.constantFrom(204, 304));
  }
  const minor = touchesBody ? '1' : g(() => fc.constantFrom('1', '1', '1', '0'));
  let framing: string = g(() => fc.constantFrom('length', 'length', 'chunked', 'chunked', 'close'));
  const body = Buffer.from(g(() => fc.uint8Array({ minLength: touchesBody ? 2 : 0, maxLength: 2500 })));

  // Status line, interim answers.
  let reason: string = g(() => fc.constantFrom(' OK', '', ' ', ' Some Reason', ' a\tb', ' caf\xe9'));
  let statusText = String(status);
  let version = `HTTP/1.${minor}`;
  let prefix = '';
  const interim = g(() => fc.integer({ min: 0, max: 2 }));
  for (let i = 0; i < interim; i++) {
    prefix += `HTTP/1.1 ${g(() => fc.constantFrom(100, 102, 103))} Info\r\n`;
    if (g(() => fc.boolean())) prefix += 'Link: </style.css>; rel=preload\r\n';
    prefix += '\r\n';
  }

  // End-to-end and hop-by-hop headers; the framing header goes in at a random position.
  const count = g(() => fc.constantFrom(0, 1, 3, 6, 12, 36));
  const headers: Array<[string, string]> = [];
  for (let i = 0; i < count; i++) {
    if (g(() => fc.integer({ min: 0, max: 5 })) === 0) {
      headers.push(g(() => fc.constantFrom(...HOP_HEADERS)));
      continue;
    }
    const name = g(() => fc.constantFrom(...PASS_NAMES));
    const value = g(() => fc.array(VALUE_CHARS, { maxLength: 40 })).join('');
    const lead = g(() => fc.constantFrom('', ' ', '  ', '\t'));
    headers.push([randomCase_(g, name), `${lead}${value}`]);
  }
  const connectionTokens: string[] = [];
  const connectionKind = g(() => fc.constantFrom('none', 'none', 'close', 'keep-alive', 'named', 'two-headers'));
  if (connectionKind === 'close' || connectionKind === 'keep-alive') connectionTokens.push(connectionKind);
  if ((connectionKind === 'named' || connectionKind === 'two-headers') && headers.length > 0) {
    connectionTokens.push(randomCase_(g, headers[g(() => fc.integer({ min: 0, max: headers.length - 1 }))]![0]), 'keep-alive');
    connectionTokens.push(randomCase_(g, headers[g(() => fc.integer({ min: 0, max: headers.length - 1 }))]![0]));
  }
  if (connectionKind === 'two-headers' && connectionTokens.length > 1) {
    insertAt(g, headers, ['Connection', connectionTokens.slice(0, 1).join(', ')]);
    insertAt(g, headers, ['connection', ' ' + connectionTokens.slice(1).join(' , ')]);
  } else if (connectionTokens.length > 0) {
    insertAt(g, headers, ['Connection', connectionTokens.join(', ')]);
  }

  const noBody = method === 'HEAD' || status === 204 || status === 304;
  let chunks: Array<{ size: string; ext: string; data: Buffer }> = [];
  let trailers = '';
  if (framing === 'chunked') {
    let at = 0;
    while (at < body.length) {
      const size = Math.min(body.length - at, g(() => fc.integer({ min: 1, max: 900 })));
      const hex = g(() => fc.constantFrom('lower', 'upper', 'zeros'));
      const text = size.toString(16);
      const ext = g(() => fc.constantFrom('', '', '', ';a', ';a=b', ';name="quoted \\" value"', ';x=1;y', ';e=' + 'v'.repeat(3000)));
      chunks.push({ size: hex === 'upper' ? text.toUpperCase() : hex === 'zeros' ? `00${text}` : text, ext, data: body.subarray(at, at + size) });
      at += size;
    }
    if (g(() => fc.boolean())) trailers = 'X-Checksum: abc\r\nX-Other:\tv \r\n';
    insertAt(g, headers, [randomCase_(g, 'Transfer-Encoding'), 'chunked']);
  } else if (framing === 'length') {
    insertAt(g, headers, [randomCase_(g, 'Content-Length'), String(body.length)]);
  } else if (minor === '0' && connectionKind === 'keep-alive') {
    // HTTP/1.0 keep-alive without a length is still close-delimited; fine either way.
  }
  let lastChunk = '0';
  let bodyBytes: Buffer = noBody ? Buffer.alloc(0) : encodeBody(framing, body, chunks, lastChunk, trailers);
  let expect: Expect = 'same';
  const label: string[] = [mutation, method, String(status), framing];

  const mutateHeader = (fn: (h: [string, string]) => void): void => {
    const candidates = headers.filter(([n]) => PASS_NAMES.some((p) => p.toLowerCase() === n.toLowerCase()));
    if (candidates.length === 0) {
      const added: [string, string] = ['X-Mutated', 'value'];
      insertAt(g, headers, added);
      fn(added);
    } else {
      fn(candidates[g(() => fc.integer({ min: 0, max: candidates.length - 1 }))]!);
    }
  };
  const forceFraming = (wanted: string): void => {
    if (framing === wanted) return;
    for (let i = headers.length - 1; i >= 0; i--) {
      const n = headers[i]![0].toLowerCase();
      if (n === 'content-length' || n === 'transfer-encoding') headers.splice(i, 1);
    }
    framing = wanted;
    chunks = [{ size: body.length.toString(16), ext: '', data: body }];
    if (wanted === 'chunked') insertAt(g, headers, ['Transfer-Encoding', 'chunked']);
    if (wanted === 'length') insertAt(g, headers, ['Content-Length', String(body.length)]);
  };

  switch (mutation) {
    case 'none':
      break;
    case 'cl+te':
      forceFraming(g(() => fc.constantFrom('length', 'chunked')));
      insertAt(g, headers, framing === 'length' ? ['Transfer-Encoding', 'chunked'] : ['Content-Length', String(body.length)]);
      break;
    case 'cl-dup-same':
      // llhttp refuses any repeated Content-Length, even an identical one; so do we.
      forceFraming('length');
      insertAt(g, headers, ['content-length', String(body.length)]);
      break;
    case 'cl-dup-differ':
      forceFraming('length');
      insertAt(g, headers, ['Content-Length', String(body.length + 1)]);
      break;
    case 'cl-invalid':
      forceFraming('length');
      replaceHeader(headers, 'content-length', g(() => fc.constantFrom(`+${body.length}`, `${body.length}, ${body.length}`, `${body.length} 0`, '-1', '', `0x${body.length}`, 'abc', '99999999999999999999999')));
      break;
    case 'bad-chunk-size':
      forceFraming('chunked');
      chunks[0]!.size = g(() => fc.constantFrom('z', '-2', '0x2', ` ${chunks[0]!.size}`, `${chunks[0]!.size} `, `${chunks[0]!.size}\t`, ''));
      chunks[0]!.ext = '';
      break;
    case 'chunk-ext-bad':
      forceFraming('chunked');
      chunks[0]!.ext = g(() => fc.constantFrom(' ;a=b', '; a=b', ';a =b', ';a=b\x01', ';a=b/c', ';a(b', ';a="unterminated', ';a="b"c', ';a;'));
      break;
    case 'chunk-ext-huge':
      // Node's bound too (16 KiB of extensions per chunk); generated well past it.
      forceFraming('chunked');
      chunks[0]!.ext = ';e=' + 'x'.repeat(20000);
      break;
    case 'obs-fold':
      mutateHeader((h) => (h[1] = `${h[1]}\r\n ${g(() => fc.constantFrom('more', '', '\tfolded'))}`));
      break;
    case 'bad-value-byte':
      mutateHeader((h) => (h[1] = `a${g(() => fc.constantFrom('\rb', '\0', '\x01', '\x7f', '\nb', '\x1f'))}z`));
      break;
    case 'bad-name':
      mutateHeader((h) => (h[0] = g(() => fc.constantFrom('X(y', 'X y', 'X\0y', 'X\xe9', '', 'X\ry', 'X"', 'X\x7f', 'X/y'))));
      break;
    case 'space-before-colon':
      mutateHeader((h) => (h[0] = `${h[0]}${g(() => fc.constantFrom(' ', '\t'))}`));
      break;
    case 'bad-status-line':
      [version, statusText, reason] = g(() =>
        fc.constantFrom(
          ['HTTP/1.1', ' 200', ' OK'],
          ['http/1.1', '200', ' OK'],
          ['HTTP/1.2', '200', ' OK'],
          ['HTTP/1.1', '20', ' OK'],
          ['HTTP/1.1', '2000', ' OK'],
          ['HTTP/1.1', '200OK', ''],
          ['HTP/1.1', '200', ' OK'],
          ['HTTP/1.1', 'abc', ' OK'],
          ['HTTP/1.1', '200', ' O\rK'],
        ),
      );
      break;
    case 'oversized-head':
      // Both limits are MAX_HEAD; generated well past it.
      insertAt(g, headers, ['X-Big', 'b'.repeat(MAX_HEAD + 4000)]);
      break;
    case 'bare-lf':
      mutateHeader((h) => (h[1] = `${h[1]}\nX-After: 1`));
      break;
    case 'bad-chunk-end':
      forceFraming('chunked');
      chunks[0]!.data = Buffer.concat([chunks[0]!.data, Buffer.from('X')]);
      break;
    case 'bad-trailer':
      forceFraming('chunked');
      trailers = g(() => fc.constantFrom('X T: 1\r\n', 'X-T: 1\r\n folded\r\n', 'X-T: a\0b\r\n', ': v\r\n', 'X-T: 1\n'));
      break;
    case 'short-body':
      forceFraming('length');
      break;
    case 'truncated-chunked':
      forceFraming('chunked');
      lastChunk = '';
      break;
    case 'te-other':
      // Node reads any other Transfer-Encoding as close-delimited (or decodes "gzip, chunked" and passes
      // the still-gzipped bytes on). A proxy that drops the hop-by-hop header would hand the client a body
      // in a coding nobody declared: we refuse anything but one "chunked" (as nginx does).
      forceFraming('chunked');
      replaceHeader(headers, 'transfer-encoding', g(() => fc.constantFrom('gzip', 'chunked, gzip', 'gzip, chunked', 'identity', '', 'chunked, chunked', 'chunked ,')));
      expect = 'we-reject';
      break;
    case 'te-twice':
      // Node decodes once; chunked applied twice is invalid (RFC 9112 6.1) and ambiguous: refused.
      forceFraming('chunked');
      insertAt(g, headers, ['Transfer-Encoding', 'chunked']);
      expect = 'we-reject';
      break;
    case 'status-range':
      // Node takes any three digits; RFC 9110 15: values outside 100..599 are invalid.
      statusText = g(() => fc.constantFrom('099', '000', '600', '999'));
      expect = 'we-reject';
      break;
    case 'version':
      // Node takes HTTP/2.0 and HTTP/0.9 in an HTTP/1.x status line; we speak 1.0 and 1.1 only.
      version = g(() => fc.constantFrom('HTTP/2.0', 'HTTP/0.9', 'HTTP/1.9'));
      expect = version === 'HTTP/1.9' ? 'same' : 'we-reject';
      break;
    case 'reason-ctl':
      // Node takes any byte but CR/LF in the reason phrase; RFC 9112 4 allows HTAB, SP, VCHAR, obs-text.
      reason = g(() => fc.constantFrom(' O\x01K', ' O\0K', ' O\x7fK', ' O\x1bK'));
      expect = 'we-reject';
      break;
    case 'leading-crlf':
      // Node skips empty lines before the status line; on an upstream connection they can only be stray
      // bytes of something else, so we refuse them.
      prefix = '\r\n' + prefix;
      expect = 'we-reject';
      break;
    case 'stray-after-no-body':
      forceFraming('close');
      if (g(() => fc.boolean())) insertAt(g, headers, ['Content-Length', String(body.length)]);
      bodyBytes = Buffer.concat([body, Buffer.from('stray')]);
      expect = 'no-body-then-stray';
      break;
  }
  if (touchesBody) {
    bodyBytes = encodeBody(framing, body, chunks, lastChunk, trailers);
    if (mutation === 'short-body') bodyBytes = bodyBytes.subarray(0, bodyBytes.length - 1);
  }
  const head =
    prefix +
    `${version} ${statusText}${reason}\r\n` +
    headers.map(([n, v]) => `${n}:${v.startsWith(' ') || v.startsWith('\t') || v === '' ? '' : ' '}${v}\r\n`).join('') +
    '\r\n';
  const bytes = Buffer.concat([Buffer.from(head, 'latin1'), bodyBytes]);
  const pieces = g(() => fc.uniqueArray(fc.integer({ min: 1, max: Math.max(1, bytes.length - 1) }), { maxLength: 6 }));
  const splits = pieces.filter((at: number) => at < bytes.length).sort((a: number, b: number) => a - b);
  return { label: label.join(' '), method, bytes, expect, splits };
}

function encodeBody(framing: string, body: Buffer, chunks: Array<{ size: string; ext: string; data: Buffer }>, lastChunk: string, trailers: string): Buffer {
  if (framing !== 'chunked') return body;
  const parts: Buffer[] = [];
  for (const chunk of chunks) parts.push(Buffer.from(`${chunk.size}${chunk.ext}\r\n`, 'latin1'), chunk.data, Buffer.from('\r\n'));
  if (lastChunk !== '') parts.push(Buffer.from(`${lastChunk}\r\n${trailers}\r\n`, 'latin1'));
  return Buffer.concat(parts);
}

function insertAt(g: Gen, headers: Array<[string, string]>, header: [string, string]): void {
  headers.splice(g(() => fc.integer({ min: 0, max: headers.length })), 0, header);
}

function replaceHeader(headers: Array<[string, string]>, lowerName: string, value: string): void {
  for (const h of headers) if (h[0].toLowerCase() === lowerName) h[1] = value;
}

function randomCase_(g: Gen, name: string): string {
  const how = g(() => fc.constantFrom('as-is', 'lower', 'upper'));
  return how === 'lower' ? name.toLowerCase() : how === 'upper' ? name.toUpperCase() : name;
}

function describe(c: Case): string {
  return `${c.label}; splits ${JSON.stringify(c.splits)}; bytes ${JSON.stringify(c.bytes.subarray(0, 600).toString('latin1'))}`;
}

function summary(o: Outcome): string {
  return o.ok ? `accepted ${o.status} ${JSON.stringify(o.headers)} body ${o.body.length} bytes` : `rejected (${o.reason})`;
}

// ---- the property ------------------------------------------------------------------------------

t.test(`our client and Node's agree on generated answers (seed ${SEED}, ${RUNS} runs; UPSTREAM_SEED=${SEED} replays)`, async (t) => {
  t.comment(`UPSTREAM_SEED=${SEED}`);
  const tally = new Map<string, number>();
  // The first runs take every kind once, so each is reached whatever the seed (at random, with 300
  // runs, one of the 25 kinds was left out about one seed in ten); the rest are drawn.
  let run = 0;
  await fc.assert(
    fc.asyncProperty(fc.gen(), async (g) => {
      const c = randomCase(g, run < ALL_KINDS.length ? ALL_KINDS[run] : null);
      run++;
      current = c;
      const ours = await readWithOurs(c);
      const kind = c.label.split(' ')[0]!;
      tally.set(kind, (tally.get(kind) ?? 0) + 1);
      if (c.expect === 'we-reject') {
        if (ours.ok) throw new Error(`we accepted what we must refuse: ${summary(ours)}\n${describe(c)}`);
        return;
      }
      if (c.expect === 'no-body-then-stray') {
        if (!ours.ok || ours.body.length !== 0) throw new Error(`a ${c.label} answer must be taken without a body: ${summary(ours)}\n${describe(c)}`);
        return;
      }
      const theirs = await readWithNode(c);
      if (ours.ok !== theirs.ok) {
        throw new Error(`disagreement: ours ${summary(ours)}, Node ${summary(theirs)}\n${describe(c)}`);
      }
      if (ours.ok && theirs.ok) {
        if (ours.status !== theirs.status) throw new Error(`status: ours ${ours.status}, Node ${theirs.status}\n${describe(c)}`);
        if (JSON.stringify(ours.headers) !== JSON.stringify(theirs.headers)) {
          throw new Error(`headers: ours ${JSON.stringify(ours.headers)}, Node ${JSON.stringify(theirs.headers)}\n${describe(c)}`);
        }
        if (!ours.body.equals(theirs.body)) throw new Error(`body: ours ${ours.body.length} bytes, Node ${theirs.body.length}\n${describe(c)}`);
      }
    }),
    { seed: SEED, numRuns: RUNS, endOnFailure: true },
  );
  t.comment(`cases by kind: ${JSON.stringify(Object.fromEntries([...tally].sort()))}`);
  // Every kind of case ran at least once (a generator bug cannot silently leave one out).
  if (RUNS >= 200) {
    for (const kind of ALL_KINDS) t.ok(tally.has(kind), `${kind} cases ran`);
  }
});
