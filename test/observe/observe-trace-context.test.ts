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

t.test('tracestate is passed on unchanged unless empty, too long or not printable', async (t) => {
  t.equal(passTracestate('congo=t61rcWkgMzE,rojo=00f067aa0ba902b7'), 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7');
  t.equal(passTracestate(undefined), null);
  t.equal(passTracestate(''), null);
  t.equal(passTracestate('a=b\u0001'), null);
  t.equal(passTracestate('a=' + 'x'.repeat(9000)), null);
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
