// Whatever shape a doc's parts take (null, a number, a string, an empty list, a $ref to nothing or to
// another file, in any place), discovery either routes the doc with its problems or fails it for not
// being an API doc, and /spec, guarded, still validates as Swagger 2.0 (docs/reference/upstreams.md#lenient-discovery, docs/reference/builtins.md#spec).
import t from 'tap';
import fc from 'fast-check';
import SwaggerParser from '@apidevtools/swagger-parser';
import { discoverFromDoc } from '../../src/discovery/index.js';
import { buildCombinedSpecWithNamespaces } from '../../src/builtins/spec.js';
import { guardSpec } from '../../src/builtins/spec-guard.js';
import { openapi3WithUser, swagger2WithRefs } from '../fixtures/docs.js';
import { formsDoc, sloppyDoc } from '../fixtures/lenient-docs.js';

type Json = Record<string, any>;

const BASES: readonly Json[] = [sloppyDoc, formsDoc('/f'), swagger2WithRefs, openapi3WithUser];
const LOCATION = 'http://fuzz:1';

/** Every place in a doc: the paths to all its values. */
function places(node: unknown, prefix: string[] = [], out: string[][] = []): string[][] {
  out.push(prefix);
  if (node !== null && typeof node === 'object') for (const key of Object.keys(node)) places((node as Json)[key], [...prefix, key], out);
  return out;
}

const junk = fc.oneof(
  fc.constant(null),
  fc.string({ maxLength: 8 }),
  fc.integer(),
  fc.boolean(),
  fc.constant([]),
  fc.constant({}),
  fc.array(fc.oneof(fc.constant(null), fc.string({ maxLength: 4 }), fc.integer()), { maxLength: 3 }),
  fc.constant({ $ref: '#/nowhere' }),
  fc.constant({ $ref: 'other.yaml#/X' }),
  fc.constant({ $ref: 7 }),
);

t.test('any part of a doc replaced by junk: routed or failed with a reason, and /spec validates', async (t) => {
  let routed = 0;
  await fc.assert(
    fc.asyncProperty(fc.nat(BASES.length - 1), fc.array(fc.tuple(fc.nat(), junk), { minLength: 1, maxLength: 4 }), async (which, edits) => {
      const doc = structuredClone(BASES[which]!);
      for (const [index, value] of edits) {
        // The version key and `paths` itself decide whether it is a doc at all: covered elsewhere.
        const candidates = places(doc).filter((p) => p.length > 1 || (p.length === 1 && !['swagger', 'openapi', 'paths'].includes(p[0]!)));
        const place = candidates[index % candidates.length]!;
        let parent: any = doc;
        for (const key of place.slice(0, -1)) parent = parent[key];
        if (parent !== null && typeof parent === 'object') parent[place[place.length - 1]!] = structuredClone(value);
      }
      const serviceType = doc.swagger ? 'swagger2' : 'openapi3';
      const upstream = { serviceType, serviceLocation: LOCATION, weight: 1, specPath: '/spec' } as const;
      let discovered;
      try {
        discovered = await discoverFromDoc(upstream, doc, { docUrl: `${LOCATION}/spec`, where: 'fuzz', serviceType });
      } catch (err) {
        if (/: the doc is |has no "paths" object/.test((err as Error).message)) return;
        throw err;
      }
      routed++;
      const { doc: spec, namespaces, fromEntries } = buildCombinedSpecWithNamespaces({
        upstreams: [discovered],
        builtinPaths: { healthcheck: '/healthcheck', metrics: '/metrics', spec: '/spec' },
      });
      if (fromEntries.length > 0) throw new Error(`a converter threw: ${JSON.stringify(fromEntries)}`);
      const { remaining } = await guardSpec(spec, { upstreams: new Set([LOCATION]), namespaces: new Set([namespaces.get(LOCATION)!]) });
      if (remaining.length > 0) throw new Error(`the guard left objections: ${JSON.stringify(remaining)}`);
      await SwaggerParser.validate(structuredClone(spec) as never);
    }),
    { numRuns: 30 },
  );
  t.ok(routed > 0, `${routed} of 30 mangled docs were routed`);
});
