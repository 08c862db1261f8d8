// Build step, run after `tsc`: writes the config schema's validators as ajv's standalone code (see
// schema-validator.ts for why they are not compiled at start).
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import standalone from 'ajv/dist/standalone/index.js';
import { CONFIG_AJV_OPTIONS, GENERATED_VALIDATORS, validatedSchemas } from './schema-validator.js';

const ajv = new Ajv({ ...CONFIG_AJV_OPTIONS, code: { source: true, esm: false } });
const { config, overrides } = validatedSchemas();
const exports: Record<string, string> = { config: 'config' };
ajv.addSchema(config, 'config');
for (const [key, schema] of Object.entries(overrides)) {
  ajv.addSchema(schema, `override:${key}`);
  exports[key] = `override:${key}`;
}
const code = standalone.default(ajv, exports);
writeFileSync(GENERATED_VALIDATORS, code);
console.log(`config validators: ${fileURLToPath(GENERATED_VALIDATORS)} (${code.length} bytes)`);
