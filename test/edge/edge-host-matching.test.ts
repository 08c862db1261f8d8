// Routing by Host and /spec?host= agree, as a property over generated upstream hosts and Host values:
// a request with Host H routes among the upstreams of docs/edge.md#virtual-hosts (an exact name, or a
// `*.` wildcard standing for one or more DNS labels, plus the host-less upstreams), and /spec?host=H
// documents exactly those upstreams, is 404 when there are none, and is 400 only for a value that the
// accept phase refuses or that no virtual host serves (the request then gets the host-less upstreams).
// Values hold what RFC 3986 lets a Host carry besides DNS labels: empty labels, commas, semicolons,
// "*", escapes, over-long labels and names, ports, brackets.
import fc from 'fast-check';
import t from 'tap';
import { Builtins, type BuiltinResponse } from '../../src/builtins/index.js';
import { HostRoutes } from '../../src/edge/host-routes.js';
import { HostSets } from '../../src/edge/host-sets.js';
import { hostName } from '../../src/edge/server-names.js';
import { isValidHost } from '../../src/http/host-header.js';
import { RoutingTable } from '../../src/routing/table.js';
import { entry } from '../helpers/routes.js';

const PATTERNS = ['a.test', 'x.shop.test', '*.shop.test', '*.b.shop.test', '*.test', '10.0.0.1', 'A.Test'];
const UPSTREAMS = ['u1', 'u2', 'u3', 'u4'];

const LONG = 'l'.repeat(63);
const label = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('x', 'Ab', 'a-b', '_s', '0', LONG) },
  { weight: 2, arbitrary: fc.constantFrom('', '-x', 'x-', `${LONG}l`, 'evil.example,x', 'a,b', 'a;b', '*', '%41', '~', "a!b", "a'b") },
  // Refused by the accept phase.
  { weight: 1, arbitrary: fc.constantFrom('é', 'a b', 'a@b', 'a/b', 'a:b') },
);
const SUFFIXES = ['shop.test', 'b.shop.test', 'x.shop.test', 'test', 'a.test', '10.0.0.1', 'other'];
const port = fc.oneof({ weight: 4, arbitrary: fc.constantFrom('', ':80', ':8080', ':', ':99999') }, { weight: 1, arbitrary: fc.constantFrom(':x', ':1:2') });

const named = fc
  .record({
    labels: fc.array(label, { maxLength: 5 }),
    suffix: fc.constantFrom(...SUFFIXES),
    dots: fc.constantFrom('', '', '.', '..'),
    upper: fc.boolean(),
    port,
  })
  .map(({ labels, suffix, dots, upper, port }) => {
    const name = [...labels, suffix].join('.') + dots;
    return (upper ? name.toUpperCase() : name) + port;
  });
const literal = fc.constantFrom('', '[::1]', '[::1]:80', '[:::]', '[v1.x]', '[fe80::1%eth0]', '[::zz]', '[::1]x', 'shop.test', '.shop.test', 'x.shop.test.');
const hostValue = fc.oneof({ weight: 8, arbitrary: named }, { weight: 1, arbitrary: literal });

const LABEL = /^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$/;

/** The documented rule, written apart from the code: the sorted upstreams a Host routes among, or null. */
function reference(upstreams: ReadonlyArray<{ serviceLocation: string; hosts: string[] }>, host: string): string[] | null {
  const name = hostName(host);
  const serves = (pattern: string): boolean => {
    const lower = pattern.toLowerCase();
    if (!lower.startsWith('*.')) return lower === name;
    const suffix = lower.slice(1);
    if (name.length > 253 || name.length <= suffix.length || !name.endsWith(suffix)) return false;
    return name
      .slice(0, -suffix.length)
      .split('.')
      .every((label) => LABEL.test(label));
  };
  const serving = upstreams.filter((u) => u.hosts.length === 0 || u.hosts.some(serves)).map((u) => u.serviceLocation);
  return serving.length === 0 ? null : serving.sort();
}

/** The upstreams a table routes among (each upstream declares GET /<its name>). */
function upstreamsOf(table: RoutingTable): string[] {
  return table
    .routes()
    .flatMap((route) => route.targets.map((target) => target.upstream))
    .sort();
}

t.test('a request with Host H and /spec?host=H get the same upstreams, by the documented rule', async (t) => {
  let compared = 0;
  let refused = 0;
  let hosted = 0;
  const seed = Number(process.env.HOSTS_SEED ?? Date.now() % 2 ** 31);
  t.comment(`fast-check seed ${seed} (rerun with HOSTS_SEED=${seed})`);
  fc.assert(
    fc.property(fc.array(fc.subarray(PATTERNS, { maxLength: 3 }), { minLength: UPSTREAMS.length, maxLength: UPSTREAMS.length }), fc.array(hostValue, { minLength: 20, maxLength: 20 }), (hostLists, hosts) => {
      const upstreams = UPSTREAMS.map((u, i) => ({ serviceLocation: u, hosts: hostLists[i]! }));
      const { table } = RoutingTable.compile(UPSTREAMS.map((u) => entry('GET', `/${u}`, u)));
      const hostRoutes = HostRoutes.build(table, upstreams);
      const builtins = new Builtins({ paths: { healthcheck: '/healthcheck', metrics: '/metrics', spec: '/spec' }, metrics: { enabled: false } });
      const sets = HostSets.sets(upstreams).map((set) => ({ key: set.key, swagger2: JSON.stringify(set.upstreams), openapi3: '{}' }));
      builtins.setSpec(JSON.stringify(UPSTREAMS), '{}', { upstreams, sets });
      const fallback = hostRoutes === null ? upstreamsOf(table) : reference(upstreams, '');
      for (const host of hosts) {
        const spec = builtins.handle('GET', '/spec', `host=${encodeURIComponent(host)}`, {}) as BuiltinResponse;
        const context = `Host ${JSON.stringify(host)}, hosts ${JSON.stringify(hostLists)}`;
        if (!isValidHost(host)) {
          // The accept phase answers such a request 400 before routing.
          if (spec.status !== 400) throw new Error(`/spec?host= answered ${spec.status} for a Host the accept phase refuses: ${context}`);
          continue;
        }
        const routedTable = hostRoutes === null ? table : hostRoutes.tableFor(host);
        const routed = routedTable === null ? null : upstreamsOf(routedTable);
        const expected = hostRoutes === null ? upstreamsOf(table) : reference(upstreams, host);
        if (JSON.stringify(routed) !== JSON.stringify(expected)) throw new Error(`routed among ${JSON.stringify(routed)}, the rule says ${JSON.stringify(expected)}: ${context}`);
        compared++;
        if (routed !== null && JSON.stringify(routed) !== JSON.stringify(fallback)) hosted++;
        if (spec.status === 200) {
          const documented = JSON.parse(spec.body.toString()) as string[];
          if (JSON.stringify([...documented].sort()) !== JSON.stringify(routed)) throw new Error(`/spec?host= documents ${JSON.stringify(documented)}, routed among ${JSON.stringify(routed)}: ${context}`);
        } else if (spec.status === 404) {
          if (routed !== null) throw new Error(`/spec?host= is 404, routed among ${JSON.stringify(routed)}: ${context}`);
        } else if (spec.status === 400) {
          refused++;
          if (JSON.stringify(routed) !== JSON.stringify(fallback)) throw new Error(`/spec?host= refuses it, yet a virtual host serves it (${JSON.stringify(routed)}): ${context}`);
        } else {
          throw new Error(`/spec?host= answered ${spec.status}: ${context}`);
        }
      }
    }),
    { numRuns: 300, seed },
  );
  t.ok(compared >= 3000, `${compared} of 6000 Host values taken by the accept phase and compared`);
  t.ok(hosted >= 400, `${hosted} of them served by a virtual host`);
  t.ok(refused >= 300, `${refused} of them refused by /spec?host= and served by no virtual host`);
});

t.test('examples: a wildcard stands for DNS labels only', async (t) => {
  const upstreams = [
    { serviceLocation: 'shop', hosts: ['*.shop.test'] },
    { serviceLocation: 'common', hosts: [] },
  ];
  const { table } = RoutingTable.compile([entry('GET', '/shop', 'shop'), entry('GET', '/common', 'common')]);
  const hostRoutes = HostRoutes.build(table, upstreams)!;
  const served = (host: string): string[] => upstreamsOf(hostRoutes.tableFor(host)!);
  for (const host of ['x.shop.test', 'A.B.shop.test:8080', 'x_y.shop.test.', `${LONG}.shop.test`]) t.same(served(host), ['common', 'shop'], host);
  for (const host of ['..shop.test', '.shop.test', 'evil.example,x.shop.test', 'evil.example;x.shop.test', '*.shop.test', '-x.shop.test', `${LONG}l.shop.test`, '%41.shop.test']) {
    t.same(served(host), ['common'], `${host}: the host-less upstream only`);
  }
});
