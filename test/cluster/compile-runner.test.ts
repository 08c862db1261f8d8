// src/cluster/compile-runner.ts: small tables compile on the primary's thread, the rest (and every doc
// with objections) on the piscina thread. Both places must give the same table and /spec, and the
// in-thread compile must leave the discovered upstreams as it found them (the thread gets copies).
import t from 'tap';
import fc from 'fast-check';
import type { UpstreamConfig } from '../../src/config/types.js';
import { CompileRunner, INLINE_MAX_ENDPOINTS } from '../../src/cluster/compile-runner.js';
import type { CompileInput } from '../../src/cluster/compile-task.js';
import { discoverFromDoc, type DiscoveredUpstream } from '../../src/discovery/index.js';
import { sloppyDoc } from '../fixtures/lenient-docs.js';
import { swaggerDoc } from '../helpers/gateway-process.js';

async function discovered(location: string, paths: Record<string, string[]>, extra: Partial<UpstreamConfig> = {}): Promise<DiscoveredUpstream> {
  const doc = swaggerDoc(location, paths);
  const upstream: UpstreamConfig = { serviceType: 'swagger2', serviceLocation: location, weight: 1, specPath: '/spec', ...extra };
  return discoverFromDoc(upstream, doc, { docUrl: `${location}/spec`, where: 'doc', serviceType: 'swagger2' });
}

function input(upstreams: DiscoveredUpstream[]): CompileInput {
  return {
    upstreams,
    builtinPaths: { spec: '/spec', metrics: '/metrics', healthcheck: '/healthcheck' },
    maxUrlBytes: 8192,
    name: 'gw',
    version: '1.0.0',
    hosted: upstreams.map((u) => ({ serviceLocation: u.upstream.serviceLocation, ...(u.upstream.hosts ? { hosts: u.upstream.hosts } : {}) })),
  };
}

const runner = new CompileRunner();
const inline = new CompileRunner('inline');
const threaded = new CompileRunner('thread');
t.teardown(() => Promise.all([runner.close(), inline.close(), threaded.close()]));

t.test('where a compile runs: by the endpoint count, and docs with objections always on the thread', async (t) => {
  const paths = (n: number): Record<string, string[]> => Object.fromEntries(Array.from({ length: n }, (_, i) => [`/r${i}/{id}`, ['GET']]));
  const atLimit = input([await discovered('http://a:1', paths(INLINE_MAX_ENDPOINTS - 10)), await discovered('http://b:1', paths(10))]);
  t.equal(runner.placeOf(atLimit), 'inline', `${INLINE_MAX_ENDPOINTS} endpoints`);
  const over = input([await discovered('http://a:1', paths(INLINE_MAX_ENDPOINTS - 10)), await discovered('http://b:1', paths(11))]);
  t.equal(runner.placeOf(over), 'thread', `${INLINE_MAX_ENDPOINTS + 1} endpoints`);
  const sloppy = await discoverFromDoc({ serviceType: 'swagger2', serviceLocation: 'http://s:1', weight: 1, specPath: '/spec' }, sloppyDoc, {
    docUrl: 'http://s:1/spec',
    where: 'doc',
    serviceType: 'swagger2',
  });
  t.ok((sloppy.problems?.length ?? 0) > 0, 'the fixture has objections');
  t.equal(runner.placeOf(input([sloppy])), 'thread', 'a doc with objections, however small');
  t.equal(runner.placeOf(input([await discovered('http://a:1', { '/x': ['GET'] })])), 'inline', 'one endpoint');
});

const segment = fc.constantFrom('a', 'b', 'items', 'v1', '{id}', '{name}', '{+rest}', 'x.{ext}');
const template = fc.array(segment, { minLength: 1, maxLength: 4 }).map((parts) => `/${parts.join('/')}`);
const upstreamPaths = fc.dictionary(template, fc.subarray(['GET', 'PUT', 'POST', 'DELETE'], { minLength: 1 }), { minKeys: 1, maxKeys: 12 });

// Random templates: many docs get objections (undeclared or repeated placeholders, forms Swagger 2.0
// cannot say), so the /spec guard runs in both places too.
t.test('the same table and /spec in the primary as on the thread, the inputs untouched', async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.array(upstreamPaths, { minLength: 1, maxLength: 4 }), fc.boolean(), async (sets, withHosts) => {
      const upstreams = await Promise.all(
        sets.map((paths, i) => discovered(`http://u${i}:1`, paths, withHosts && i % 2 === 0 ? { hosts: [`h${i}.test`] } : {})),
      );
      const work = input(upstreams);
      const before = structuredClone(work);
      const here = await inline.run(work);
      t.same(work, before, 'the discovered upstreams are as they were');
      const there = await threaded.run(work);
      // The thread's output is a structured clone: compared as data.
      t.same(JSON.parse(JSON.stringify(here)), JSON.parse(JSON.stringify(there)), 'the same output on the thread');
      const again = await inline.run(work);
      t.same(again, here, 'a second compile of the same state gives the same output');
    }),
    { numRuns: 25 },
  );
});
