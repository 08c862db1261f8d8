// Two small mechanisms behind invalidation and targeted cache control, each against a reference model
// with fast-check: the shared store's deletePrefix (one LMDB range) drops exactly the keys that start
// with the prefix, and withoutHeaders drops exactly the named headers (any letter case) from an
// upstream head, keeping the others in order.
import fc from 'fast-check';
import t from 'tap';
import { SharedCacheStore } from '../../src/cache/shared-store.js';
import { StoredResponse } from '../../src/cache/record.js';
import { judge } from '../../src/cache/rules.js';
import { withoutHeaders } from '../../src/upstream/hide-headers.js';
import { ResponseHead } from '../../src/upstream/response-parser.js';

t.test('deletePrefix removes exactly the keys with the prefix, and their bytes', async (t) => {
  let held = 0;
  const store = new SharedCacheStore(undefined, 'prefix', 1 << 26, { added: (n) => (held += n), removed: (n) => (held -= n) });
  t.teardown(() => store.close());
  const headers = ['cache-control', 'max-age=600'];
  const policy = judge('/k', [], 200, headers, 0).policy!;
  // Keys as the cache makes them: a path, maybe a query, a space, an endpoint, maybe variants.
  const key = fc
    .tuple(fc.stringMatching(/^\/[ab/]{0,3}$/), fc.option(fc.stringMatching(/^[ab=&]{0,2}$/)), fc.stringMatching(/^\/[ab{}]{0,2}$/), fc.option(fc.stringMatching(/^\n[ab]=[ab]?$/)))
    .map(([path, query, endpoint, variant]) => `${path}${query === null ? '' : `?${query}`} ${endpoint}${variant ?? ''}`);
  let round = 0;
  await fc.assert(
    fc.asyncProperty(fc.uniqueArray(key, { maxLength: 12 }), fc.stringMatching(/^\/[ab/]{0,3}(\?[ab=&]{0,2})? $/), async (keys, prefix) => {
      round++;
      const mine = keys.map((k) => `${round}${k}`);
      for (const k of mine) store.set(k, new StoredResponse(200, headers, Buffer.from('x'), policy, k, Date.now()), 60_000);
      const removed = store.deletePrefix(`${round}${prefix}`);
      const expected = mine.filter((k) => k.startsWith(`${round}${prefix}`));
      if (removed !== expected.length) return false;
      for (const k of mine) if ((store.get(k) === undefined) !== expected.includes(k)) return false;
      for (const k of mine) store.delete(k);
      return true;
    }),
    { numRuns: 200 },
  );
  t.equal(store.bytes, 0, 'every byte accounted for');
  t.equal(held, 0, 'and the events agree');
  t.equal(store.deletePrefix(''), 0, 'an empty prefix removes nothing');
});

t.test('withoutHeaders drops exactly the named headers, in any letter case, and keeps the rest in order', async (t) => {
  const name = fc.constantFrom('CDN-Cache-Control', 'cdn-cache-control', 'Cdn-Cache-Control', 'Cache-Control', 'X-A', 'gw-cc', 'GW-CC', 'Cdn-Cache-Controls');
  const value = fc.stringMatching(/^[a-z0-9=, ]{0,8}$/);
  fc.assert(
    fc.property(fc.array(fc.tuple(name, value), { maxLength: 8 }), fc.subarray(['cdn-cache-control', 'gw-cc', 'x-a']), (headers, hidden) => {
      const head = ResponseHead.fromHeaders(200, headers.flatMap(([n, v]) => [Buffer.from(n), Buffer.from(v)]), 0, -1, false);
      const result = withoutHeaders(head, hidden);
      const got = result.headers.map((b) => b.toString());
      const expected = headers.filter(([n]) => !hidden.includes(n.toLowerCase())).flat();
      if (got.length !== expected.length || got.some((text, i) => text !== expected[i])) return false;
      // Nothing to drop: the same head, no copy.
      return expected.length !== headers.length * 2 || result === head;
    }),
    { numRuns: 500 },
  );
  t.pass('500 random heads');
});
