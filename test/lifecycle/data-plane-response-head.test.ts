/**
 * The upstream's response head as the client receives it through the gateway, for generated heads:
 * up to 45 headers and 15 KiB (past the 4 KiB the head block starts with; one example of nearly 16 KiB,
 * more than one cork may carry beside the body), names in any case, repeated
 * names, Date and Via anywhere and repeated, hop-by-hop headers and headers a Connection header names,
 * values with inner spaces, tabs and obs-text, in one read or cut in two. The gateway copies the kept headers to uWS in one
 * writeStatus call (src/lifecycle/uws/uws-client.ts writeHeadBlock); a reference model says what must arrive:
 * every end-to-end header in order with its value as sent (outer whitespace trimmed), no upstream Date
 * (uWS writes one), one Via with the upstream's values then ours, no hop-by-hop header. Headers a
 * middleware adds follow them as it added them, in a spilled head too: copied into the head block when
 * all are ASCII, else (a value past ASCII, even after ASCII ones) written by uWS as UTF-8.
 */
import fc from 'fast-check';
import t from 'tap';
import { Counters } from '../../src/metrics/counters.js';
import { Pipeline } from '../../src/middleware/pipeline.js';
import { startDataPlane } from '../../src/proxy/data-plane.js';
import { RoutingTable } from '../../src/routing/table.js';
import { rawRequest } from '../helpers/raw-http.js';
import { startRawServer } from '../helpers/raw-upstream.js';
import { entry, testConfig } from '../helpers/upstream-server.js';

interface GeneratedHeader {
  name: string;
  value: string;
}

const HOP_BY_HOP = ['Connection', 'Keep-Alive', 'Proxy-Connection', 'TE', 'Trailer', 'Upgrade', 'Transfer-Encoding', 'Content-Length'];

let answer = '';
/** Where the answer is cut in two writes 5 ms apart (a head split over reads: the parser's copy path); -1 for one write. */
let splitAt = -1;
const upstream = await startRawServer((socket) => {
  const bytes = Buffer.from(answer, 'latin1');
  if (splitAt <= 0 || splitAt >= bytes.length) {
    socket.write(bytes);
    return;
  }
  socket.write(bytes.subarray(0, splitAt));
  setTimeout(() => socket.write(bytes.subarray(splitAt)), 5);
});
const config = testConfig({ upstreams: [{ serviceType: 'static', serviceLocation: upstream.url, weight: 1, specPath: '/spec' }] });
const plane = await startDataPlane({ config });
const { table } = RoutingTable.compile([entry('GET', '/h', upstream.url)]);
plane.setTable(table);
/** The headers the middleware adds to the next answer. */
let added: GeneratedHeader[] = [];
plane.setPipeline(
  new Pipeline(
    [
      {
        id: 'adds',
        type: 'test',
        slaMs: 1000,
        failClosed: false,
        decide: (ctx) => {
          for (const { name, value } of added) ctx.addResponseHeader(name, value);
          return undefined;
        },
        ready: () => Promise.resolve(),
        close: () => Promise.resolve(),
      },
    ],
    new Counters(),
  ),
);
t.teardown(async () => {
  await plane.close();
  await upstream.close();
});

const token = fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,24}$/);
const caseOf = (name: string) => fc.constantFrom(name, name.toUpperCase(), name.toLowerCase());
// Field content: visible ASCII, obs-text (0x80-0xff), inner SP/HTAB; outer whitespace is not part of the value.
const valueChar = fc.oneof(
  { weight: 20, arbitrary: fc.integer({ min: 0x21, max: 0x7e }) },
  { weight: 2, arbitrary: fc.constantFrom(0x20, 0x09) },
  { weight: 1, arbitrary: fc.integer({ min: 0x80, max: 0xff }) },
);
const value = fc
  .array(valueChar, { maxLength: 300, size: 'max' })
  .map((codes) => String.fromCharCode(...codes).replace(/^[ \t]+|[ \t]+$/g, ''));

const header: fc.Arbitrary<GeneratedHeader> = fc.oneof(
  { weight: 12, arbitrary: fc.record({ name: token, value }) },
  { weight: 2, arbitrary: fc.record({ name: caseOf('Date'), value: fc.constant('Mon, 23 Nov 2026 10:00:00 GMT') }) },
  { weight: 2, arbitrary: fc.record({ name: caseOf('Via'), value: fc.constantFrom('1.1 edge', '1.0 cache-1, 1.1 cache-2', '') }) },
  { weight: 1, arbitrary: fc.record({ name: fc.constantFrom('Keep-Alive', 'Proxy-Authenticate', 'TE', 'Trailer', 'Upgrade'), value: fc.constant('x') }) },
  { weight: 1, arbitrary: fc.record({ name: fc.constant('X-Named-Hop'), value: fc.constant('dropped') }) },
);

// What a middleware adds: mostly plain ASCII, sometimes a character past ASCII.
const addedValue = fc.oneof(
  { weight: 4, arbitrary: value.filter((v) => /^[\x20-\x7e\t]*$/.test(v)) },
  { weight: 1, arbitrary: fc.constantFrom('café', 'r=5;t=60 €', 'naïve value') },
);
const addedHeader: fc.Arbitrary<GeneratedHeader> = fc.record({ name: token.map((name) => `x-mw-${name}`), value: addedValue });

const heads = fc.record({
  // At most 45 x ~330 bytes: under the 16 KiB an upstream head may have (maxResponseHeaderBytes).
  headers: fc.array(header, { maxLength: 45, size: 'max' }),
  // Connection: close would close the upstream socket; keep-alive plus a named header tests the named-drop path.
  connection: fc.constantFrom(null, 'keep-alive', 'keep-alive, X-Named-Hop'),
  split: fc.oneof(fc.constant(-1), fc.integer({ min: 1, max: 16_000 })),
  middleware: fc.array(addedHeader, { maxLength: 4 }),
});

/** What the client must see of the upstream's headers, in order, names lower-cased. */
function expected(headers: GeneratedHeader[], connection: string | null): { kept: Array<[string, string]>; via: string } {
  const named = connection?.toLowerCase().split(',').map((s) => s.trim()) ?? [];
  const kept: Array<[string, string]> = [];
  const vias: string[] = [];
  for (const { name, value } of headers) {
    const lower = name.toLowerCase();
    if (lower === 'date') continue;
    if (lower === 'via') {
      // An empty one adds no list element.
      if (value !== '') vias.push(value);
      continue;
    }
    if (HOP_BY_HOP.some((h) => h.toLowerCase() === lower) || lower.startsWith('proxy-') || named.includes(lower)) continue;
    kept.push([lower, value]);
  }
  return { kept, via: [...vias, '1.1 specgate-test'].join(', ') };
}

/** uWS's own headers and the framing, which the model above does not describe. */
const WRITTEN_BY_UWS = new Set(['date', 'uwebsockets', 'content-length', 'via']);

const SEED = Number(process.env.HEAD_SEED ?? Math.floor(Math.random() * 2 ** 31));

t.test(`generated upstream heads arrive at the client header for header (seed ${SEED}; HEAD_SEED=${SEED} replays)`, async (t) => {
  let runs = 0;
  let largest = 0;
  let splitHeads = 0;
  await fc.assert(
    fc.asyncProperty(heads, async ({ headers, connection, split, middleware }) => {
      added = middleware;
      const body = 'body';
      let head = 'HTTP/1.1 200 OK\r\n';
      for (const { name, value } of headers) head += `${name}: ${value}\r\n`;
      if (connection !== null) head += `Connection: ${connection}\r\n`;
      head += `Content-Length: ${body.length}\r\n\r\n`;
      largest = Math.max(largest, head.length);
      answer = head + body;
      splitAt = split;
      if (split > 0 && split < head.length) splitHeads++;
      const result = await rawRequest(plane.port, 'GET /h HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1, waitMs: 5000 });
      runs++;
      const response = result.responses[0];
      if (response === undefined) throw new Error(`no answer; the gateway sent ${JSON.stringify(result.data.toString('latin1').slice(0, 300))}`);
      if (response.status !== 200 || response.body.toString() !== body) throw new Error(`status ${response.status}, body ${JSON.stringify(response.body.toString())}`);
      // The raw wire, in order: every header line after the status line.
      const wire = result.data.toString('latin1');
      const lines = wire.slice(wire.indexOf('\r\n') + 2, wire.indexOf('\r\n\r\n')).split('\r\n');
      const got: Array<[string, string]> = [];
      const via: string[] = [];
      const dates: string[] = [];
      for (const line of lines) {
        const colon = line.indexOf(':');
        const name = line.slice(0, colon).toLowerCase();
        const v = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
        if (name === 'via') via.push(v);
        else if (name === 'date') dates.push(v);
        if (!WRITTEN_BY_UWS.has(name)) got.push([name, v]);
      }
      const want = expected(headers, connection);
      // The middleware's headers come last, their values UTF-8 on the wire (read here as latin1).
      const fromMiddleware = middleware.map(({ name, value }): [string, string] => [name.toLowerCase(), Buffer.from(value, 'utf8').toString('latin1').replace(/^[ \t]+|[ \t]+$/g, '')]);
      t.same(got, [...want.kept, ...fromMiddleware], 'end-to-end headers, in order, values as sent; then the middleware\'s');
      t.same(via, [want.via], 'one Via: the upstream values, then ours');
      t.equal(dates.length, 1, 'one Date (uWS writes it)');
      t.not(dates[0], 'Mon, 23 Nov 2026 10:00:00 GMT', "the upstream's Date is not passed on");
    }),
    {
      numRuns: 60,
      seed: SEED,
      endOnFailure: true,
      examples: [
        // Always one head of about 12 KiB, so the growth of the head block is reached whatever the seed.
        [
          {
            headers: Array.from({ length: 40 }, (_, i) => ({ name: `X-Long-${i}`, value: `${i} `.padEnd(290, 'v') })),
            connection: null,
            split: 5000,
            middleware: [{ name: 'RateLimit-Policy', value: '"limit";q=20;w=60' }, { name: 'x-mw-a', value: 'café' }],
          },
        ],
        // And one just under the 16 KiB an upstream head may have: too large to share a cork with the
        // body, it goes out in corks of its own (UwsClient.spillHead: writeStatus, then writeHeader).
        [
          {
            headers: Array.from({ length: 53 }, (_, i) => ({ name: `X-Long-${i}`, value: `${i} `.padEnd(289, 'v') })),
            connection: 'keep-alive',
            split: -1,
            middleware: [{ name: 'RateLimit', value: '"limit";r=19;t=3' }],
          },
        ],
        // An upstream Via without a value, between two with one.
        [{ headers: [{ name: 'Via', value: '1.1 a' }, { name: 'Via', value: '' }, { name: 'via', value: '1.1 b' }], connection: null, split: -1, middleware: [] }],
        // A small head with plain ASCII middleware headers, a tab inside and an empty value.
        [{ headers: [{ name: 'Content-Type', value: 'application/json' }], connection: null, split: -1, middleware: [{ name: 'x-mw-b', value: 'b\tc' }, { name: 'x-mw-c', value: '' }] }],
      ],
    },
  );
  t.ok(runs >= 60);
  // The head block starts at 4 KiB: at least one generated head must have made it grow.
  t.ok(largest > 16_000, `the largest generated head (${largest} bytes) outgrew the initial head block and one cork`);
  t.ok(splitHeads > 0, `${splitHeads} head(s) arrived in two reads`);
});
