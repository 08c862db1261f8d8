/**
 * The Host header's syntax (RFC 9110 7.2 with RFC 3986's host and port): named cases, and random
 * strings over the characters that matter compared with the ABNF written as a regular expression.
 */
import fc from 'fast-check';
import t from 'tap';
import { isValidHost } from '../../src/http/host-header.js';

// RFC 3986 3.2.2-3.2.3, transcribed: IP-literal (IPv6 characters, or IPvFuture) / reg-name, then an optional port.
const SUB_DELIMS = "!$&'()*+,;=";
const UNRESERVED = 'A-Za-z0-9\\-._~';
const ORACLE = new RegExp(
  `^(?:\\[(?:[0-9A-Fa-f:.]+|[vV][0-9A-Fa-f]+\\.[${UNRESERVED}${escape(SUB_DELIMS)}:]+)\\]|(?:[${UNRESERVED}${escape(SUB_DELIMS)}]|%[0-9A-Fa-f]{2})*)(?::[0-9]*)?$`,
);

function escape(chars: string): string {
  return chars.replace(/[\\\]^-]/g, '\\$&');
}

t.test('named cases', async (t) => {
  const valid = ['example.com', 'example.com:8080', 'EXAMPLE.com', '127.0.0.1', '127.0.0.1:80', '[::1]', '[::1]:8443', '[2001:db8::1]', '[v1.fe80::a+en1]', 'xn--bcher-kva.example', 'a_b~c', 'a%20b', 'host:', '', 'a,b;c=d'];
  const invalid = ['a@b', 'user:pass@example.com', 'a b', 'a/b', 'a?b', 'a#b', '::1', '[::1', '[]', '[::1]x', '[::1]:8x', 'a:b', 'a:80:90', '%zz', '%2', 'a"b', 'a<b>', 'a\\b', 'é.example', 'a\tb', '[v1.]', '[v.x]', '[::g]'];
  for (const value of valid) t.ok(isValidHost(value), `valid: ${JSON.stringify(value)}`);
  for (const value of invalid) t.notOk(isValidHost(value), `invalid: ${JSON.stringify(value)}`);
  // The last valid value is remembered: asking again, and asking for another after it, still checks.
  t.ok(isValidHost('example.com'));
  t.ok(isValidHost('example.com'));
  t.notOk(isValidHost('example.com@evil'));
  for (const value of [...valid, ...invalid]) t.equal(isValidHost(value), ORACLE.test(value), `the oracle agrees on ${JSON.stringify(value)}`);
});

t.test('random values: the same verdict as the ABNF', async (t) => {
  const alphabet = fc.constantFrom(...'aZ09.-_~!$&\'()*+,;=%:[]@/?# "\\<>vVfF\u00e9\t'.split(''));
  fc.assert(
    fc.property(fc.array(alphabet, { maxLength: 16 }), (chars) => {
      const value = chars.join('');
      return isValidHost(value) === ORACLE.test(value);
    }),
    { numRuns: 20_000 },
  );
  // Values shaped like hosts (so the bracketed and port branches are reached, not only refusals).
  const shaped = fc.tuple(
    fc.oneof(fc.constant(''), fc.constant('['), fc.constant('[v')),
    fc.array(alphabet, { maxLength: 10 }),
    fc.oneof(fc.constant(''), fc.constant(']'), fc.constant(']:'), fc.constant(':')),
    fc.array(fc.constantFrom(...'0189a'.split('')), { maxLength: 5 }),
  );
  fc.assert(
    fc.property(shaped, ([open, inside, close, port]) => {
      const value = open + inside.join('') + close + port.join('');
      return isValidHost(value) === ORACLE.test(value);
    }),
    { numRuns: 20_000 },
  );
  t.pass('20,000 + 20,000 values');
});
