// The config schema's validators that `npm run build` generates (ajv's standalone code) against the
// reference: ajv compiling the same schemas now, with the same options. Same verdict, same errors,
// same defaults filled in, on the shipped examples and on random changes to them.
import { readdirSync, readFileSync } from 'node:fs';
import t from 'tap';
import fc from 'fast-check';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { parseConfigText } from '../../src/config/parse-json.js';
import { substituteEnv } from '../../src/config/substitute.js';
import { CONFIG_AJV_OPTIONS, configValidators, validatedSchemas } from '../../src/config/schema-validator.js';
import { places, replaced } from '../helpers/json-places.js';

const examplesDir = new URL('../../../config/examples/', import.meta.url);
const examples: Array<[string, unknown]> = readdirSync(examplesDir)
  .filter((name) => name.endsWith('.jsonc'))
  .map((name) => {
    const parsed = parseConfigText(readFileSync(new URL(name, examplesDir), 'utf8'));
    if ('problem' in parsed) throw new Error(`${name}: ${parsed.problem.reason}`);
    return [name, substituteEnv(parsed.value, {}).value];
  });
const minimal = { upstreams: [{ serviceType: 'static', serviceLocation: 'http://127.0.0.1:9', endpoints: [{ method: 'GET', path: '/a/{id}' }] }] };
const bases: unknown[] = [minimal, ...examples.map(([, value]) => value)];

const schemas = validatedSchemas();
const reference = new Ajv(CONFIG_AJV_OPTIONS);
const referenceConfig = reference.compile(schemas.config);
const generated = configValidators();

/** What a user sees of a run: the verdict, each error's place, rule and message, and the value with its defaults. */
function outcome(validate: ValidateFunction, value: unknown): unknown {
  const copy: unknown = structuredClone(value);
  const valid = validate(copy);
  const errors = (validate.errors ?? []).map((e: ErrorObject) => ({ path: e.instancePath, at: e.schemaPath, keyword: e.keyword, params: e.params, message: e.message, data: e.data }));
  return { valid, errors, value: copy };
}

t.test('the examples: the same outcome as ajv compiling the schema', async (t) => {
  t.ok(examples.length >= 3, `${examples.length} examples`);
  for (const [name, value] of examples) {
    const got = outcome(generated.config, value) as { valid: boolean };
    t.ok(got.valid, `${name} is valid`);
    t.same(got, outcome(referenceConfig, value), name);
  }
});

t.test('random changes to a valid config: the same outcome as ajv compiling the schema', async (t) => {
  const change = fc
    .constantFrom(...bases)
    .chain((base) => fc.tuple(fc.constant(base), fc.constantFrom(...places(base)), fc.jsonValue({ maxDepth: 2 })));
  let invalid = 0;
  fc.assert(
    fc.property(change, ([base, at, by]) => {
      const value = replaced(base, at, by);
      const got = outcome(generated.config, value) as { valid: boolean };
      if (!got.valid) invalid++;
      t.same(got, outcome(referenceConfig, value), `at /${at.join('/')}`);
    }),
    { numRuns: 400 },
  );
  t.ok(invalid > 100, `${invalid} of 400 changes made the config invalid (the error paths were compared)`);
});

t.test('the environment overrides: the same outcome as ajv compiling each key\'s schema', async (t) => {
  for (const [key, schema] of Object.entries(schemas.overrides)) {
    const referenceKey = reference.compile(schema);
    const validate = generated[key as keyof typeof schemas.overrides];
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue({ maxDepth: 1 }), fc.integer({ min: -10, max: 70000 }), fc.constantFrom('info', 'debug', 'loud')), (value) => {
        t.same(outcome(validate, value), outcome(referenceKey, value), `${key} = ${JSON.stringify(value)}`);
      }),
      { numRuns: 100 },
    );
  }
});
