// What /spec?host= accepts as a host: a Host header's value (name or IP, optional port).
import t from 'tap';
import { hostValueProblem } from '../../src/edge/host-value.js';

const label = (n: number, c = 'a') => c.repeat(n);
const longest = `${label(63)}.${label(63, 'b')}.${label(63, 'c')}.${label(61, 'd')}`;

t.test('host names, IPs and ports that a Host header may carry are accepted', async (t) => {
  t.equal(longest.length, 253);
  for (const host of ['a', 'a.b', 'A-b.c_d', 'x.test.', 'x.test:0', 'x:65535', '[::1]', '[::1]:80', '[2001:db8::7]', '1.2.3.4:8080', longest, `${longest}.`, `${label(63)}.test`]) {
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
    ['x:', /port/],
    ['x:65536', /port/],
    ['x:1:2', /port/],
    ['x:-1', /port/],
    ['[::1', /IPv6/],
    ['[zz]', /IPv6/],
    ['[::1]x', /after its IPv6/],
    ['[::1]:99999', /port/],
  ];
  for (const [host, reason] of cases) t.match(hostValueProblem(host), reason, JSON.stringify(host));
});
