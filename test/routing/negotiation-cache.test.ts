// The negotiation cache's byte budget (docs/reference/routing.md#content-negotiation-415-406): short client values are cached within the
// table's budget, long ones never, and answers stay the same either way.
import t from 'tap';
import { MAX_CACHED_CHARS, NEGOTIATION_CACHE_BYTES, NegotiationCacheBudget, TargetNegotiation } from '../../src/routing/negotiate.js';
import type { RouteTarget } from '../../src/routing/table.js';

function target(upstream: string, consumes: string[], produces: string[]): RouteTarget {
  return { upstream, template: '/x', consumes, produces, disabledMiddleware: [], disabledListeners: [] };
}

const targets = [target('http://a', ['application/json'], ['application/json']), target('http://b', ['text/plain'], ['text/plain'])];

t.test('distinct short values stay within the budget, across routes', async (t) => {
  const budget = new NegotiationCacheBudget(256 * 1024);
  const routes = Array.from({ length: 50 }, () => new TargetNegotiation(targets, budget));
  let peak = 0;
  for (let i = 0; i < 20_000; i++) {
    const accept = `application/json;q=0.9, text/x-${i.toString(36).padEnd(300, 'y')}`;
    const left = routes[i % routes.length]!.filter('application/json', accept, true);
    if (left.length !== 1 || left[0]!.upstream !== 'http://a') t.fail(`request ${i}: ${left.map((l) => l.upstream)}`);
    peak = Math.max(peak, budget.usedBytes);
  }
  t.ok(peak <= budget.maxBytes, `peak ${peak} bytes within ${budget.maxBytes}`);
  const held = routes.reduce((n, r) => n + r.cachedEntries(), 0);
  t.ok(held > 0 && held * 600 <= budget.maxBytes, `${held} entries held`);
});

t.test('a steady header value is cached once and served from the cache', async (t) => {
  const budget = new NegotiationCacheBudget();
  const route = new TargetNegotiation(targets, budget);
  const first = route.filter('text/plain', 'text/plain', true);
  const used = budget.usedBytes;
  for (let i = 0; i < 100; i++) t.equal(route.filter('text/plain', 'text/plain', true), first, 'the same result object');
  t.equal(budget.usedBytes, used, 'charged once');
  t.equal(route.cachedEntries(), 1);
  t.equal(NEGOTIATION_CACHE_BYTES, 2 * 1024 * 1024, 'the documented default');
});

t.test('values longer than MAX_CACHED_CHARS are negotiated every time and never kept', async (t) => {
  const budget = new NegotiationCacheBudget();
  const route = new TargetNegotiation(targets, budget);
  const long = `text/plain;q=1, ${'z'.repeat(MAX_CACHED_CHARS)}/x`;
  for (let i = 0; i < 10; i++) t.same(route.filter('text/plain', long + i, true).map((x) => x.upstream), ['http://b']);
  t.equal(route.cachedEntries(), 0);
  t.equal(budget.usedBytes, 0);
  t.same(route.filter('application/xml', undefined, true), [], 'no target consumes it');
  t.equal(route.rejectionStatus('application/xml', true), 415);
});
