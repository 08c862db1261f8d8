// alternateUpstream's comparison and log lines as units: JSON values against a plain deep-equal of
// key-sorted copies (fast-check), header rules, body decoding, the mismatch line's size bound, the
// sampler's rate, and the listeners schema with its defaults.
import { isDeepStrictEqual } from 'node:util';
import { brotliCompressSync, deflateRawSync, gzipSync } from 'node:zlib';
import { Ajv } from 'ajv';
import fc from 'fast-check';
import t from 'tap';
import { firstJsonDifference, jsonEqual, valueAt } from '../../src/listeners/json-difference.js';
import { MAX_LINE_BYTES, mismatchLine, type MismatchRecord } from '../../src/listeners/mismatch-line.js';
import { Sampler } from '../../src/listeners/sampler.js';
import { bodyDifference } from '../../src/listeners/shadow-body.js';
import { headerDifferences, headerMapFromFlat, headerMapFromParsed, shadowRequestHeaders } from '../../src/listeners/shadow-headers.js';
import { checkListeners, listenersSchema, type ListenerConfig } from '../../src/listeners/registry.js';

/** The reference: a copy with every object's keys sorted, compared by plain deep equality. */
function sortedCopy(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedCopy);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.keys(value).sort().map((key) => [key, sortedCopy((value as Record<string, unknown>)[key])]));
  }
  return value;
}
const referenceEqual = (a: unknown, b: unknown): boolean => isDeepStrictEqual(sortedCopy(a), sortedCopy(b));

/** A copy with keys in another order (a seeded shuffle at every level). */
function shuffledCopy(value: unknown, seed: number): unknown {
  let state = seed >>> 0 || 1;
  const next = (): number => (state = (Math.imul(state, 1103515245) + 12345) >>> 0);
  const walk = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(walk);
    if (v === null || typeof v !== 'object') return v;
    const keys = Object.keys(v);
    for (let i = keys.length - 1; i > 0; i--) {
      const j = next() % (i + 1);
      [keys[i], keys[j]] = [keys[j]!, keys[i]!];
    }
    return Object.fromEntries(keys.map((key) => [key, walk((v as Record<string, unknown>)[key])]));
  };
  return walk(value);
}

/** A copy with one node (picked by `seed`) replaced by `replacement`. */
function mutatedCopy(value: unknown, seed: number, replacement: unknown): unknown {
  let remaining = seed;
  const walk = (v: unknown): unknown => {
    if (remaining-- === 0) return replacement;
    if (Array.isArray(v)) return v.map(walk);
    if (v === null || typeof v !== 'object') return v;
    return Object.fromEntries(Object.keys(v).map((key) => [key, walk((v as Record<string, unknown>)[key])]));
  };
  return walk(value);
}

const jsonValue = fc.json({ maxDepth: 4 }).map((text) => JSON.parse(text) as unknown);
const pairs = fc.oneof(
  fc.tuple(jsonValue, jsonValue),
  fc.tuple(jsonValue, fc.nat()).map(([a, seed]) => [a, shuffledCopy(a, seed)] as const),
  fc.tuple(jsonValue, fc.nat({ max: 40 }), jsonValue, fc.nat()).map(([a, at, replacement, seed]) => [a, shuffledCopy(mutatedCopy(a, at, replacement), seed)] as const),
);

t.test('JSON values: equal exactly when key-sorted copies are deep-equal; the pointer names a real difference', async (t) => {
  let equal = 0;
  let unequal = 0;
  fc.assert(
    fc.property(pairs, ([a, b]) => {
      const expected = referenceEqual(a, b);
      const difference = firstJsonDifference(a, b);
      if ((difference === null) !== expected) return false;
      if (jsonEqual(b, a) !== expected) return false;
      if (difference === null) {
        equal++;
        return true;
      }
      unequal++;
      const left = valueAt(a, difference.pointer);
      const right = valueAt(b, difference.pointer);
      // The reported values are what the pointer finds on each side, and they differ.
      return isDeepStrictEqual(left, difference.client) && isDeepStrictEqual(right, difference.alternate) && !referenceEqual(left, right);
    }),
    { numRuns: 2000 },
  );
  t.ok(equal > 300 && unequal > 300, `both outcomes exercised (${equal} equal, ${unequal} unequal)`);
});

t.test('JSON values: key order aside, array order kept, the first difference in document order', async (t) => {
  t.ok(jsonEqual({ a: 1, b: [1, 2] }, { b: [1, 2], a: 1 }));
  t.notOk(jsonEqual([1, 2], [2, 1]));
  t.notOk(jsonEqual({ a: null }, {}), 'a null value is not an absent key');
  t.notOk(jsonEqual(1, '1'));
  t.same(firstJsonDifference({ z: 1, a: { y: [1, 2, 3] } }, { a: { y: [1, 2] }, z: 2 }), { pointer: '/a/y/2', client: 3, alternate: undefined });
  t.same(firstJsonDifference({ 'a/b': { '~': 1 } }, { 'a/b': { '~': 2 } })?.pointer, '/a~1b/~0', 'RFC 6901 escapes');
  t.same(firstJsonDifference(JSON.parse('{"__proto__": 1}'), {})?.pointer, '/__proto__', '"__proto__" is a key like any other');
  const deep = (n: number, leaf: unknown): unknown => {
    let v = leaf;
    for (let i = 0; i < n; i++) v = [v];
    return v;
  };
  t.equal(firstJsonDifference(deep(200_000, 1), deep(200_000, 2))?.pointer.length, 200_000 * 2, 'no stack overflow on deep nesting');
});

t.test('headers: never-compared and ignored names, any case, repeated headers as lists', async (t) => {
  const ignore = new Set(['server']);
  const client = headerMapFromFlat(['content-type', 'application/json', 'vary', 'accept', 'vary', 'accept-encoding', 'set-cookie', 'a=1', 'set-cookie', 'b=2', 'server', 'x'], ignore);
  const alternate = headerMapFromParsed(
    {
      'content-type': 'application/json',
      vary: 'accept, accept-encoding',
      'set-cookie': ['a=1', 'b=2'],
      server: 'y',
      date: 'Mon, 01 Jan 2024 00:00:00 GMT',
      'content-length': '12',
      connection: 'keep-alive, x-hop',
      'x-hop': 'named by Connection',
      'keep-alive': 'timeout=5',
      'proxy-authenticate': 'Basic',
      via: '1.1 other',
    },
    ignore,
  );
  t.same(headerDifferences(client, alternate), []);
  const joinedCookies = headerMapFromParsed({ 'set-cookie': 'a=1, b=2' }, ignore);
  t.same(
    headerDifferences(headerMapFromFlat(['set-cookie', 'a=1', 'set-cookie', 'b=2'], ignore), joinedCookies),
    [{ name: 'set-cookie', client: ['a=1', 'b=2'], alternate: ['a=1, b=2'] }],
    'Set-Cookie values are compared one by one',
  );
  t.same(
    headerDifferences(headerMapFromFlat(['x-b', '1', 'x-a', '1'], ignore), headerMapFromParsed({ 'x-b': '2', 'x-c': '3' }, ignore)),
    [
      { name: 'x-a', client: ['1'], alternate: null },
      { name: 'x-b', client: ['1'], alternate: ['2'] },
      { name: 'x-c', client: null, alternate: ['3'] },
    ],
  );
  t.same(shadowRequestHeaders(['accept', '*/*', 'content-length', '5', 'x-forwarded-for', '10.0.0.1']), ['accept', '*/*', 'x-forwarded-for', '10.0.0.1']);
});

t.test('bodies: decoded per side, JSON by content type or by look, bytes otherwise', async (t) => {
  const side = (bytes: Buffer | string, contentType?: string, contentEncoding?: string) => ({
    bytes: Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes),
    contentType,
    contentEncoding,
  });
  const doc = JSON.stringify({ a: 1, list: [1, 2, 3] });
  t.equal(await bodyDifference(side(gzipSync(doc), 'application/json', 'gzip'), side(brotliCompressSync(doc), 'application/json', 'br'), 1 << 20), null, 'gzip vs br');
  t.equal(await bodyDifference(side(deflateRawSync(doc), 'application/json', 'deflate'), side(doc, 'application/json'), 1 << 20), null, 'raw deflate vs identity');
  t.equal(await bodyDifference(side('{"b":2,"a":1}', 'application/problem+json'), side('{"a":1,"b":2}'), 1 << 20), null, '+json types');
  t.equal(await bodyDifference(side(' [1, 2]', 'text/plain'), side('[1,2]'), 1 << 20), null, 'sniffed from the first character');
  t.match(await bodyDifference(side('1.0', 'text/plain'), side('1'), 1 << 20), { kind: 'bytes', offset: 1, clientBytes: 3, alternateBytes: 1 });
  t.match(await bodyDifference(side('{"a":1}', 'application/json'), side('<html>oops</html>'), 1 << 20), {
    kind: 'bytes',
    offset: 0,
    note: "the client's body is JSON, the alternate's is not",
  });
  t.match(await bodyDifference(side('{"a":', 'application/json'), side('{"a":}'), 1 << 20), { kind: 'bytes', offset: 5 }, 'a client body that is not JSON: bytes');
  const big = Buffer.alloc(100_000, 'x');
  t.match(
    await bodyDifference(side(gzipSync(big), 'text/plain', 'gzip'), side(gzipSync(Buffer.alloc(100_000, 'y')), 'text/plain', 'gzip'), 1000),
    { kind: 'bytes', clientBytes: gzipSync(big).length },
    'past the decoded bound the raw bytes are compared',
  );
  const difference = await bodyDifference(side('a'.repeat(1000) + 'X' + 'b'.repeat(1000)), side('a'.repeat(1000) + 'Y' + 'b'.repeat(1000)), 1 << 20);
  t.match(difference, { kind: 'bytes', offset: 1000 });
  if (difference?.kind === 'bytes') t.ok(difference.client.length <= 128 && difference.client.includes('X'), 'a snippet around the difference');
});

const record = (overrides: Partial<MismatchRecord> = {}): MismatchRecord => ({
  time: Date.UTC(2026, 0, 2, 3, 4, 5),
  listener: 'shadow',
  alternate: 'http://10.0.0.9:8080',
  method: 'GET',
  sentMethod: null,
  path: '/items/1',
  query: 'a=1',
  endpoint: 'GET /items/{id}',
  upstream: 'http://10.0.0.7:8080',
  consumer: null,
  requestHeaders: [['accept', 'application/json']],
  clientStatus: 200,
  alternateStatus: 200,
  headers: [],
  body: { kind: 'json', pointer: '/a', client: 1, alternate: 2 },
  ...overrides,
});

t.test('a mismatch line: its fields, and never more than 4096 bytes whatever it holds', async (t) => {
  const line = mismatchLine(record());
  t.ok(line.endsWith('\n'));
  t.same(JSON.parse(line), {
    time: '2026-01-02T03:04:05.000Z',
    listener: 'shadow',
    alternate: 'http://10.0.0.9:8080',
    request: { method: 'GET', path: '/items/1', query: 'a=1', endpoint: 'GET /items/{id}', upstream: 'http://10.0.0.7:8080', consumer: null, headers: { accept: 'application/json' } },
    status: { client: 200, alternate: 200 },
    differences: ['body'],
    body: { kind: 'json', pointer: '/a', client: '1', alternate: '2' },
    truncated: false,
  });

  const text = fc.string({ unit: 'binary', maxLength: 3000 });
  fc.assert(
    fc.property(
      text,
      text,
      fc.array(fc.record({ name: fc.string({ maxLength: 200 }), client: fc.option(fc.array(text, { maxLength: 5 })), alternate: fc.option(fc.array(text, { maxLength: 5 })) }), { maxLength: 30 }),
      fc.oneof(
        fc.record({ kind: fc.constant('json' as const), pointer: text, client: fc.jsonValue(), alternate: fc.jsonValue() }),
        fc.tuple(text, text).map(([a, b]) => ({ kind: 'bytes' as const, offset: 3, clientBytes: a.length, alternateBytes: b.length, client: Buffer.from(a), alternate: Buffer.from(b) })),
        fc.constant(null),
      ),
      fc.array(fc.tuple(fc.string({ maxLength: 30 }), text), { maxLength: 6 }),
      (path, query, headers, body, requestHeaders) => {
        const out = mismatchLine(record({ path, query, headers, body, requestHeaders, listener: path.slice(0, 100), endpoint: query }));
        const parsed = JSON.parse(out);
        return Buffer.byteLength(out) <= MAX_LINE_BYTES && out.indexOf('\n') === out.length - 1 && typeof parsed.time === 'string' && parsed.status.client === 200;
      },
    ),
    { numRuns: 300 },
  );

  const huge = mismatchLine(
    record({
      path: '/' + 'p'.repeat(10_000),
      headers: Array.from({ length: 40 }, (_, i) => ({ name: `x-h${i}`, client: ['c'.repeat(1000)], alternate: ['a'.repeat(1000)] })),
      body: { kind: 'json', pointer: '/x', client: { big: 'v'.repeat(100_000) }, alternate: null },
    }),
  );
  const parsed = JSON.parse(huge);
  t.ok(Buffer.byteLength(huge) <= MAX_LINE_BYTES);
  t.equal(parsed.truncated, true);
  t.same(parsed.differences, ['headers', 'body']);
  t.equal(parsed.body.pointer, '/x');
  t.ok(parsed.headers.length > 0, 'header names are kept when values must go');
});

t.test('the sampler takes its share, from a cheap PRNG', async (t) => {
  const count = (rate: number, seed: number): number => {
    const sampler = new Sampler(rate, seed);
    let taken = 0;
    for (let i = 0; i < 100_000; i++) if (sampler.take()) taken++;
    return taken;
  };
  t.equal(count(0, 1), 0);
  t.equal(count(1, 1), 100_000);
  for (const seed of [1, 42, 0xdeadbeef]) {
    const taken = count(0.1, seed);
    t.ok(taken > 9_500 && taken < 10_500, `0.1 of 100,000 (seed ${seed}): ${taken}`);
  }
  t.ok(Math.abs(count(0.5, 0) - 50_000) < 1_000, 'seed 0 is not a fixed point');
});

t.test('the listeners schema: defaults filled, unknown keys and bad values refused', async (t) => {
  // As the config schema holds it: the value of the `listeners` key.
  const validateConfig = new Ajv({ allErrors: true, useDefaults: true }).compile({ type: 'object', properties: { listeners: listenersSchema() } });
  const validate = Object.assign((listeners: unknown) => validateConfig({ listeners }), { get errors() { return validateConfig.errors; } });
  const empty: { listeners?: unknown } = {};
  t.ok(validateConfig(empty));
  t.same(empty.listeners, [], 'no listeners by default');
  const config = [{ id: 'shadow', type: 'alternateUpstream', serviceLocation: 'http://10.0.0.9:8080' }];
  t.ok(validate(config), JSON.stringify(validate.errors));
  t.same(config[0], {
    id: 'shadow',
    type: 'alternateUpstream',
    serviceLocation: 'http://10.0.0.9:8080',
    sample: 0.1,
    methods: ['GET', 'HEAD'],
    maxBodyBytes: 1048576,
    timeoutMs: 5000,
    maxInFlight: 64,
    ignoreHeaders: ['date', 'server'],
    mismatchLog: 'shadow-mismatches.jsonl',
  });
  const refused = (entry: Record<string, unknown>): boolean => !validate([{ id: 's', type: 'alternateUpstream', serviceLocation: 'http://a:1', ...entry }]);
  t.ok(refused({ samples: 0.5 }), 'unknown key');
  t.ok(refused({ sample: 1.5 }));
  t.ok(refused({ methods: [] }));
  t.ok(refused({ methods: ['GET GET'] }));
  t.ok(refused({ maxInFlight: 0 }));
  t.ok(refused({ timeoutMs: 0 }));
  t.ok(refused({ mismatchLog: '' }));
  t.notOk(refused({ mismatchLog: null }));
  t.ok(!validate([{ id: 's', type: 'other' }]), 'unknown type');
  t.ok(!validate([{ id: 's', type: 'alternateUpstream' }]), 'serviceLocation is required');

  const base = { type: 'alternateUpstream', sample: 1, methods: ['GET'], maxBodyBytes: 1, timeoutMs: 1, maxInFlight: 1, ignoreHeaders: [], mismatchLog: null } as const;
  const entries = [
    { ...base, id: 'a', serviceLocation: 'http://a:1' },
    { ...base, id: 'a', serviceLocation: 'http://user:pw@a:1' },
    { ...base, id: 'accessLog', serviceLocation: 'http://a:1' },
  ] as unknown as ListenerConfig[];
  t.same(
    checkListeners(entries).map((p) => p.pointer),
    ['/listeners/1/id', '/listeners/1/serviceLocation', '/listeners/2/id'],
  );
  t.notMatch(JSON.stringify(checkListeners(entries)), /pw/, 'a password is never echoed');
});
