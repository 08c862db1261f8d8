import { FileReadError, readBoundedFile } from './read-file.js';
import { configValidators } from './schema-validator.js';
import { describeSchemaErrors } from './schema-errors.js';
import { parseConfigText, utf16Problem } from './parse-json.js';
import { readEnvOverrides } from './env.js';
import { substituteEnv } from './substitute.js';
import { SubstitutedValues } from './redact.js';
import { checkConfigRules, checkConfigRulesBeside } from './semantic-checks.js';
import { loadUpstreamTls } from './tls-files.js';
import { loadListenerCertificates } from '../edge/certificates.js';
import { normalizeServiceLocation } from './service-location.js';
import { printable } from '../text/printable.js';
import type { ConfigProblem } from './config-problem.js';
import type { GatewayConfig } from './types.js';

export type { ConfigProblem } from './config-problem.js';

/** Problems a message lists; the others are counted in one more line (`problems` holds them all). */
export const MAX_LISTED_PROBLEMS = 50;

/**
 * A config that cannot be used. `file`, `pointer` and `reason` describe the first problem; `problems`
 * lists all that were found. The message has a line for each of the first MAX_LISTED_PROBLEMS,
 * `<file>: <pointer>: <reason>`, then `<file>: and N more problems` when there are more.
 */
export class ConfigError extends Error {
  readonly file: string;
  readonly pointer: string;
  readonly reason: string;
  readonly line?: number;
  readonly column?: number;
  readonly problems: readonly ConfigProblem[];

  constructor(file: string, found: readonly ConfigProblem[]) {
    const problems = found.length > 0 ? found : [{ pointer: '', reason: 'is invalid' }];
    const lines = problems.slice(0, MAX_LISTED_PROBLEMS).map((problem) => formatProblem(file, problem));
    const more = problems.length - MAX_LISTED_PROBLEMS;
    if (more > 0) lines.push(`${file}: and ${more} more problem${more === 1 ? '' : 's'}`);
    super(lines.join('\n'));
    this.name = 'ConfigError';
    this.file = file;
    this.problems = problems;
    const first = problems[0]!; // never empty: see above
    this.pointer = first.pointer;
    this.reason = first.reason;
    this.line = first.line;
    this.column = first.column;
  }
}

/**
 * One line per problem, whatever the file name, keys or values hold: everything from the file is shown
 * through printable() here, so no reason needs to escape what it quotes.
 */
function formatProblem(file: string, problem: ConfigProblem): string {
  if (problem.pointer !== '') return printable(`${file}: ${problem.pointer}: ${problem.reason}`);
  if (problem.line !== undefined) return printable(`${file}:${problem.line}:${problem.column}: ${problem.reason}`);
  return printable(`${file}: ${problem.reason}`);
}

/**
 * Parses and checks a config file's text, applies the environment overrides and returns a fully
 * defaulted config. Throws ConfigError. `text` is JSON; `//` and `/* *\/` comments are allowed.
 * String values may refer to `env` as `${NAME}` or `${NAME:-default}` (see substitute.ts).
 */
export function parseConfig(text: string, file: string, env: NodeJS.ProcessEnv = {}): GatewayConfig {
  try {
    return readConfig(text, file, env);
  } catch (error) {
    // The parser, the substitution and the checks recurse with the file's nesting.
    if (error instanceof RangeError && /call stack/i.test(error.message)) {
      const reason = `the config nests too deeply to be read (objects or arrays inside one another, hundreds of levels; ${error.message})`;
      throw new ConfigError(file, [{ pointer: '', reason }]);
    }
    throw error;
  }
}

function readConfig(text: string, file: string, env: NodeJS.ProcessEnv): GatewayConfig {
  const parsed = parseConfigText(text);
  if ('problem' in parsed) throw new ConfigError(file, [parsed.problem]);

  const substituted = substituteEnv(parsed.value, env);
  if (substituted.problems.length > 0) throw new ConfigError(file, substituted.problems);
  const values = new SubstitutedValues(substituted.substitutions, parsed.value);
  const refuse = (problems: readonly ConfigProblem[]): ConfigError => new ConfigError(file, problems.map((problem) => values.redact(problem)));
  // Both built fresh values, so ajv filling in defaults mutates nothing of the caller's.
  const config = substituted.value;
  const explicitPathKeys = new Set(Object.keys(pathsInFile(config)));
  const validateSchema = configValidators().config;
  const overrides = readEnvOverrides(env);
  if (!validateSchema(config)) {
    const schemaProblems = describeSchemaErrors(validateSchema.errors ?? [], values);
    throw refuse([...schemaProblems, ...overrides.problems, ...checkConfigRulesBeside(config, explicitPathKeys, schemaProblems)]);
  }
  const valid = config as GatewayConfig;

  if (overrides.problems.length > 0) throw new ConfigError(file, overrides.problems);
  Object.assign(valid, overrides.values);

  const ruleProblems = checkConfigRules(valid, explicitPathKeys);
  if (ruleProblems.length > 0) throw refuse(ruleProblems);
  const tlsProblems = loadUpstreamTls(valid, file);
  if (tlsProblems.length > 0) throw refuse(tlsProblems);
  const certificateProblems = loadListenerCertificates(valid.tls, file, { ...process.env, ...env });
  if (certificateProblems.length > 0) throw refuse(certificateProblems);
  return normalize(valid);
}

/** The largest config file read: a config of thousands of upstreams and keys is well under 1 MiB. */
const MAX_CONFIG_BYTES = 16 * 1024 * 1024;

/** Reads and parses a config file (see parseConfig). */
export function loadConfig(file: string, env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  let bytes: Buffer;
  try {
    bytes = readBoundedFile(file, MAX_CONFIG_BYTES);
  } catch (error) {
    if (!(error instanceof FileReadError)) throw error;
    throw new ConfigError(file, [{ pointer: '', reason: `cannot read the config: ${error.message}` }]);
  }
  const utf16 = utf16Problem(bytes);
  if (utf16 !== null) throw new ConfigError(file, [{ pointer: '', reason: utf16 }]);
  return parseConfig(bytes.toString('utf8'), file, env);
}

function pathsInFile(config: unknown): object {
  const paths = (config as { paths?: unknown } | null)?.paths;
  return typeof paths === 'object' && paths !== null ? paths : {};
}

function normalize(config: GatewayConfig): GatewayConfig {
  for (const upstream of config.upstreams) {
    const checked = normalizeServiceLocation(upstream.serviceLocation);
    if ('origin' in checked) upstream.serviceLocation = checked.origin;
    for (const endpoint of upstream.endpoints ?? []) endpoint.method = endpoint.method.toUpperCase();
  }
  return config;
}
