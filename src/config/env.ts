import { Ajv, type ValidateFunction } from 'ajv';
import { ENV_OVERRIDES, configSchema } from './schema.js';
import { describeSchemaErrors } from './schema-errors.js';
import type { ConfigProblem } from './config-problem.js';

type OverriddenKey = (typeof ENV_OVERRIDES)[keyof typeof ENV_OVERRIDES];

let validators: Map<OverriddenKey, ValidateFunction> | undefined;

/**
 * Reads GATEWAY_PORT, GATEWAY_WORKERS and GATEWAY_LOG_LEVEL and checks each with its key's schema.
 * An empty variable counts as unset (as `FOO=` in a compose file usually means "no value").
 */
export function readEnvOverrides(env: NodeJS.ProcessEnv): { values: Partial<Record<OverriddenKey, unknown>>; problems: ConfigProblem[] } {
  validators ??= compileValidators();
  const values: Partial<Record<OverriddenKey, unknown>> = {};
  const problems: ConfigProblem[] = [];
  for (const [variable, key] of Object.entries(ENV_OVERRIDES) as Array<[string, OverriddenKey]>) {
    const raw = env[variable]?.trim();
    if (raw === undefined || raw === '') continue;
    const value = configSchema.properties[key].type === 'integer' && /^[+-]?\d+$/.test(raw) ? Number(raw) : raw;
    const validate = validators.get(key)!;
    if (validate(value)) {
      values[key] = value;
    } else {
      for (const problem of describeSchemaErrors(validate.errors ?? [])) {
        problems.push({ pointer: `env ${variable}`, reason: problem.reason });
      }
    }
  }
  return { values, problems };
}

function compileValidators(): Map<OverriddenKey, ValidateFunction> {
  const ajv = new Ajv({ allErrors: true, verbose: true });
  const compiled = new Map<OverriddenKey, ValidateFunction>();
  for (const key of Object.values(ENV_OVERRIDES)) {
    const { default: _ignored, ...schema } = configSchema.properties[key];
    compiled.set(key, ajv.compile(schema));
  }
  return compiled;
}
