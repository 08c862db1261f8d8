import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { Options, ValidateFunction } from 'ajv';
import { ENV_OVERRIDES, configSchema } from './schema.js';

/**
 * How the config schema is checked: ajv with every error, the schema's defaults filled in, and the
 * failing value and schema on each error (schema-errors.ts words its messages from them).
 */
export const CONFIG_AJV_OPTIONS: Options = { allErrors: true, useDefaults: true, verbose: true };

export type OverriddenKey = (typeof ENV_OVERRIDES)[keyof typeof ENV_OVERRIDES];

/** The schemas a validator is generated for: the whole config, and each key an environment variable overrides (without its default). */
export function validatedSchemas(): { config: object; overrides: Record<OverriddenKey, object> } {
  const overrides = {} as Record<OverriddenKey, object>;
  for (const key of Object.values(ENV_OVERRIDES)) {
    const { default: _ignored, ...schema } = configSchema.properties[key];
    overrides[key] = schema;
  }
  return { config: configSchema, overrides };
}

/** Where `npm run build` writes the validators (schema-validator-write.ts). */
export const GENERATED_VALIDATORS = new URL('./schema-validator.generated.cjs', import.meta.url);

export type ConfigValidators = { config: ValidateFunction } & Record<OverriddenKey, ValidateFunction>;

let validators: ConfigValidators | undefined;

/**
 * The config schema's validators: ajv's code for them, generated at build time. Compiling the schema
 * with ajv at every start cost the primary about 0.35 s of CPU (loading ajv, then compiling; CPU
 * profile of `gateway start`), and each `gateway check`/`routes` as much; loading the generated
 * module costs about 11 ms. test/config/schema-validator.test.ts holds it to what ajv compiles now.
 */
export function configValidators(): ConfigValidators {
  if (validators !== undefined) return validators;
  const file = fileURLToPath(GENERATED_VALIDATORS);
  try {
    validators = createRequire(import.meta.url)(file) as ConfigValidators;
  } catch (err) {
    throw new Error(`the config schema's validators are missing (${file}); \`npm run build\` writes them: ${(err as Error).message}`, { cause: err });
  }
  return validators;
}
