// W3C Trace Context level 1: traceparent parsing against a reference written from the spec's rules,
// formatting round trips, tracestate passing, request IDs and random ids.
import fc from 'fast-check';
import t from 'tap';
import { formatTraceparent, parseTraceparent, passTracestate } from '../../src/observe/trace-context.js';
import { isAcceptableRequestId, nextRequestId } from '../../src/observe/request-id.js';
import { randomHex } from '../../src/observe/random-hex.js';

/** The spec's rules, read literally: a regular expression and the all-zero and version checks. */
function reference(value: string): { traceId: string; parentId: string; flags: number } | null {
  const match = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(.*)$/s.exec(value);
  if (match === null) return null;
  const [, version, traceId, parentId, flags, rest] = match as unknown as [string, string, string, string, string, string];
  if (version === 'ff') return null;
  // Version 00 has exactly these fields; a later version may add fields after a dash.
  if (version === '00' ? rest !== '' : rest !== '' && !rest.startsWith('-')) return null;
  if (/^0+$/.test(traceId) || /^0+$/.test(parentId)) return null;
  return { traceId, parentId, flags: parseInt(flags, 16) };
}

const hexChar = fc.constantFrom(...'0123456789abcdef');
const anyHexChar = fc.constantFrom(...'0123456789abcdefABCDEF');
const hex = (n: number, chars = hexChar) => fc.string({ unit: chars, minLength: n, maxLength: n });
const maybeZero = (n: number) => fc.oneof({ weight: 4, arbitrary: hex(n) }, { weight: 1, arbitrary: fc.constant('0'.repeat(n)) });
const version = fc.oneof({ weight: 6, arbitrary: fc.constant('00') }, fc.constant('ff'), fc.constant('01'), hex(2), hex(2, anyHexChar));
const suffix = fc.oneof({ weight: 6, arbitrary: fc.constant('') }, fc.constant('-'), fc.constant('-what-comes-next'), fc.string({ maxLength: 4 }));
/** Mostly well-formed values, with the mutations the spec rules out. */
const traceparent = fc
  .tuple(version, maybeZero(32), maybeZero(16), hex(2), suffix, fc.boolean(), fc.nat(60))
  .map(([v, traceId, parentId, flags, tail, upper, at]) => {
    let value = `${v}-${traceId}-${parentId}-${flags}${tail}`;
    if (upper) value = value.slice(0, at) + value.charAt(at).toUpperCase() + value.slice(at + 1);
    return value;
  });

t.test('parseTraceparent agrees with the spec on mostly valid, mutated values', async (t) => {
  fc.assert(
    fc.property(traceparent, (value) => {
      t.same(parseTraceparent(value), reference(value), value);
      return true;
    }),
    { numRuns: 3000 },
  );
  fc.assert(fc.property(fc.string({ maxLength: 80 }), (value) => JSON.stringify(parseTraceparent(value)) === JSON.stringify(reference(value))));
});

t.test('examples from the spec', async (t) => {
  t.same(parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'), {
    traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    parentId: '00f067aa0ba902b7',
    flags: 1,
  });
  t.equal(parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00')?.flags, 0);
  t.equal(parseTraceparent('00-00000000000000000000000000000000-00f067aa0ba902b7-01'), null, 'all-zero trace id');
  t.equal(parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01'), null, 'all-zero parent id');
  t.equal(parseTraceparent('00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01'), null, 'upper-case hex');
  t.equal(parseTraceparent('ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'), null, 'version ff');
  t.equal(parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x'), null, 'version 00 with more');
  t.ok(parseTraceparent('cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds'), 'a later version with more fields');
  t.equal(parseTraceparent('cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x'), null, 'a later version without the dash');
});

t.test('formatTraceparent writes version 00 that parses back, only the sampled flag set', async () => {
  fc.assert(
    fc.property(hex(32), hex(16), fc.boolean(), (traceId, spanId, sampled) => {
      fc.pre(!/^0+$/.test(traceId) && !/^0+$/.test(spanId));
      const value = formatTraceparent(traceId, spanId, sampled);
      return value.length === 55 && JSON.stringify(parseTraceparent(value)) === JSON.stringify({ traceId, parentId: spanId, flags: sampled ? 1 : 0 });
    }),
  );
});

/** The tracestate rules of level 1, read literally: the ABNF of a key and a value as regular expressions. */
const KEY = /^(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})$/;
const VALUE = /^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;
function tracestateReference(value: string | undefined): string | null {
  if (value === undefined || value.length > 8192) return null;
  const keys: string[] = [];
  for (const part of value.split(',')) {
    const member = part.replace(/^[ \t]+|[ \t]+$/g, '');
    if (member === '') continue;
    const match = /^([^=]*)=(.*)$/s.exec(member);
    if (match === null || !KEY.test(match[1]!) || !VALUE.test(match[2]!) || keys.includes(match[1]!)) return null;
    keys.push(match[1]!);
  }
  return keys.length === 0 || keys.length > 32 ? null : value;
}

const lcalpha = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz');
const keyChar = fc.constantFrom(...'abcz09_-*/');
const keyLength = fc.oneof(fc.integer({ min: 0, max: 3 }), fc.constantFrom(13, 14, 240, 241, 255, 256));
const simpleKey = fc.tuple(lcalpha, keyLength).chain(([first, n]) => fc.string({ unit: keyChar, minLength: n, maxLength: n }).map((rest) => first + rest));
const tenantKey = fc
  .tuple(fc.constantFrom('a', '7'), fc.constantFrom(0, 1, 239, 240, 241), lcalpha, fc.constantFrom(0, 1, 12, 13, 14))
  .map(([first, tenant, systemFirst, system]) => `${first}${'t'.repeat(tenant)}@${systemFirst}${'s'.repeat(system)}`);
const shortKey = fc.tuple(lcalpha, fc.string({ unit: keyChar, maxLength: 6 })).map(([first, rest]) => first + rest);
const badKey = fc.constantFrom('', 'FOO', 'foo.bar', 'foo@', '@foo', 'foo@bar@baz', '1foo', 'fo o', 'foo\t', 'caf\u00e9', 'a@1b', 'z'.repeat(257));
const key = fc.oneof({ weight: 6, arbitrary: simpleKey }, { weight: 3, arbitrary: tenantKey }, { weight: 1, arbitrary: badKey }, { weight: 3, arbitrary: fc.constantFrom('foo', 'bar', 'a@b') });
const value = fc.oneof(
  { weight: 10, arbitrary: fc.string({ unit: fc.constantFrom(...'aZ09 +-/!~'), minLength: 1, maxLength: 8 }) },
  fc.constantFrom('', ' ', 'bar=baz', ' lead', 'trail ', 'in\tside', '\u007f', 'x'.repeat(256), 'x'.repeat(257), 'x'.repeat(255) + ' '),
);
const ows = fc.constantFrom('', '', ' ', '\t', ' \t ');
const member = fc.oneof({ weight: 12, arbitrary: fc.tuple(key, value).map(([k, v]) => `${k}=${v}`) }, { weight: 1, arbitrary: fc.constantFrom('', 'noequals') });
const memberWithOws = fc.tuple(ows, member, ows);
// Mostly short lists, some about the 32-member limit.
const tracestate = fc
  .oneof(
    { weight: 4, arbitrary: fc.array(memberWithOws, { maxLength: 6 }) },
    fc.array(memberWithOws, { minLength: 30, maxLength: 34 }),
    fc.uniqueArray(shortKey, { minLength: 30, maxLength: 34 }).map((keys) => keys.map((k, i): [string, string, string] => ['', `${k}=${i}`, i % 3 === 0 ? ' ' : ''])),
  )
  .map((members) => members.map(([before, m, after]) => before + m + after).join(','));

t.test('passTracestate agrees with the level 1 grammar on mostly valid, mutated lists', async (t) => {
  fc.assert(
    fc.property(tracestate, (state) => {
      t.equal(passTracestate(state), tracestateReference(state), JSON.stringify(state));
      return true;
    }),
    { numRuns: 3000 },
  );
  fc.assert(fc.property(fc.string({ maxLength: 40 }), (state) => passTracestate(state) === tracestateReference(state)));
});

t.test('tracestate the W3C test suite expects dropped is dropped; valid lists pass on unchanged', async (t) => {
  const members = (n: number) => Array.from({ length: n }, (_, i) => `bar${String(i + 1).padStart(2, '0')}=${i}`).join(',');
  for (const state of [
    'foo=1,foo=2',
    'foo=1, foo=2',
    'FOO=1',
    'foo.bar=1',
    'foo@=1,bar=2',
    '@foo=1,bar=2',
    'foo@@bar=1,bar=2',
    members(33),
    'foo=1,' + 'z'.repeat(257) + '=1',
    't'.repeat(242) + '@v=1',
    't@' + 'v'.repeat(15) + '=1',
    'foo=bar=baz',
    'foo=,bar=3',
    'foo=1 =2',
    'a=b\u0001',
    'a=' + 'x'.repeat(9000),
    '',
    ' , ',
  ]) {
    t.equal(passTracestate(state), null, JSON.stringify(state.length > 60 ? state.slice(0, 60) + '...' : state));
  }
  t.equal(passTracestate(undefined), null);
  for (const state of [
    'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7',
    members(32),
    'foo=1,' + 'z'.repeat(256) + '=1',
    't'.repeat(241) + '@' + 'v'.repeat(14) + '=1',
    '1tenant@vendor=x',
    'foo=1 \t , \t bar=2, \t baz=3',
    'foo=1,',
    ',foo=1',
    'foo= leading space kept',
    'foo=1,,bar=2',
  ]) {
    t.equal(passTracestate(state), state, JSON.stringify(state.length > 60 ? state.slice(0, 60) + '...' : state));
  }
});

t.test('request IDs: acceptable incoming ones, and made ones unique', async (t) => {
  t.ok(isAcceptableRequestId('abc-123'));
  t.ok(isAcceptableRequestId('x'.repeat(200)));
  t.notOk(isAcceptableRequestId(''));
  t.notOk(isAcceptableRequestId('x'.repeat(201)));
  t.notOk(isAcceptableRequestId('has space'));
  t.notOk(isAcceptableRequestId('caf\u00e9'));
  fc.assert(fc.property(fc.string({ maxLength: 220 }), (value) => isAcceptableRequestId(value) === /^[\x21-\x7e]{1,200}$/.test(value)));
  const ids = new Set<string>();
  for (let i = 0; i < 100_000; i++) ids.add(nextRequestId());
  t.equal(ids.size, 100_000, 'no repeat');
  t.ok([...ids].every(isAcceptableRequestId), 'every made id is one the gateway would keep');
});

t.test('random ids are lower-case hex, never all zero', async (t) => {
  for (let i = 0; i < 5000; i++) {
    const id = randomHex(8);
    if (!/^[0-9a-f]{16}$/.test(id) || id === '0000000000000000') t.fail(id);
  }
  t.match(randomHex(16), /^[0-9a-f]{32}$/);
});
