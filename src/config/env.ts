import { ENV_OVERRIDES, configSchema } from './schema.js';
import { configValidators, type OverriddenKey } from './schema-validator.js';
import { describeSchemaErrors } from './schema-errors.js';
import type { ConfigProblem } from './config-problem.js';

/**
 * Reads GATEWAY_PORT, GATEWAY_WORKERS and GATEWAY_LOG_LEVEL and checks each with its key's schema.
 * An empty variable counts as unset (as `FOO=` in a compose file usually means "no value").
 */
export function readEnvOverrides(env: NodeJS.ProcessEnv): { values: Partial<Record<OverriddenKey, unknown>>; problems: ConfigProblem[] } {
  const validators = configValidators();
  const values: Partial<Record<OverriddenKey, unknown>> = {};
  const problems: ConfigProblem[] = [];
  for (const [variable, key] of Object.entries(ENV_OVERRIDES) as Array<[string, OverriddenKey]>) {
    const raw = env[variable]?.trim();
    if (raw === undefined || raw === '') continue;
    const value = configSchema.properties[key].type === 'integer' && /^[+-]?\d+$/.test(raw) ? Number(raw) : raw;
    const validate = validators[key];
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
