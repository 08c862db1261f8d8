// What /spec?host= accepts as a host: a Host header's value (name or IP, optional port). And isHostName,
// the DNS name rule routing's wildcards share (a loop over the characters), against a regex of it.
import fc from 'fast-check';
import t from 'tap';
import { hostValueProblem, isHostName } from '../../src/edge/host-value.js';

const label = (n: number, c = 'a') => c.repeat(n);
const longest = `${label(63)}.${label(63, 'b')}.${label(63, 'c')}.${label(61, 'd')}`;

t.test('host names, IPs and ports that a Host header may carry are accepted', async (t) => {
  t.equal(longest.length, 253);
  // The port is any run of digits, as a Host header's (RFC 3986 3.2.3): matching does not look at it.
  for (const host of ['a', 'a.b', 'A-b.c_d', 'x.test.', 'x.test:0', 'x:65535', 'x:', 'x:65536', '[::1]', '[::1]:80', '[::1]:99999', '[2001:db8::7]', '1.2.3.4:8080', longest, `${longest}.`, `${label(63)}.test`]) {
    t.equal(hostValueProblem(host), null, JSON.stringify(host));
  }
});

t.test('anything else is refused, with the reason', async (t) => {
  const cases: Array<[string, RegExp]> = [
    ['', /empty/],
    [':80', /not a host name/],
    ['a..b', /not a host name/],
    ['a.-b', /not a host name/],
    ['-a', /not a host name/],
    ['a-', /not a host name/],
    ['a b', /not a host name/],
    ['*.a', /not a host name/],
    ['é.test', /not a host name/],
    ['a/b', /not a host name/],
    [`${label(64)}.test`, /not a host name/],
    [`${longest}x`, /longer than 253/],
    ['x:1:2', /port/],
    ['x:-1', /port/],
    ['[::1', /IPv6/],
    ['[zz]', /IPv6/],
    ['[fe80::1%eth0]', /IPv6/],
    ['[::1]x', /after its IPv6/],
  ];
  for (const [host, reason] of cases) t.match(hostValueProblem(host), reason, JSON.stringify(host));
});

t.test('isHostName is the rule written as a regex: labels of letters, digits, "-" inside and "_", 63 at most, 253 in all', async (t) => {
  const LABEL = /^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/;
  const byRegex = (value: string): boolean => {
    const name = value.endsWith('.') ? value.slice(0, -1) : value;
    return name !== '' && name.length <= 253 && name.split('.').every((l) => LABEL.test(l));
  };
  const piece = fc.oneof(
    fc.constantFrom('a', 'Z', '0', '-', '_', '.', ',', ';', '*', '%', 'é', ' ', '\u0000'),
    fc.constantFrom(label(62), label(63), label(64), `${label(60)}.${label(60)}.${label(60)}.${label(60)}`),
  );
  fc.assert(
    fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
      const value = pieces.join('');
      if (isHostName(value) !== byRegex(value)) throw new Error(`${JSON.stringify(value)}: ${isHostName(value)}`);
    }),
    { numRuns: 5000 },
  );
  t.pass('5000 generated values');
});
