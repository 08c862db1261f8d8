import type { ErrorObject } from 'ajv';
import { BUILTIN_PATH_PATTERN, METHOD_PATTERN, SPEC_PATH_PATTERN, configSchema } from './schema.js';
import { closestMatch } from './suggest.js';
import { DURATION_LIMIT_REASONS } from './durations.js';
import type { SubstitutedValues } from './redact.js';
import { escapePointerToken, shown, shownKey, type ConfigProblem } from './config-problem.js';
import { STORE_NAME_PATTERN } from '../stores/config.js';

const PATTERN_REASONS: Record<string, string> = {
  [BUILTIN_PATH_PATTERN]: 'must start with "/" and hold no query, fragment or whitespace',
  [SPEC_PATH_PATTERN]: 'must start with "/" and hold no fragment or whitespace',
  [METHOD_PATTERN]: 'must be an HTTP token (letters, digits and !#$%&\'*+-.^_`|~; no spaces or colons)',
};

/** What a propertyNames pattern means (the names of a map's entries, e.g. kvStores). */
const PROPERTY_NAME_REASONS: Record<string, string> = {
  [STORE_NAME_PATTERN]: 'must be 1-64 letters, digits, "_" or "-"',
};

const HEADER_NAME = 'must be a header name: an HTTP token (letters, digits and !#$%&\'*+-.^_`|~; no spaces or colons)';
const METHOD = 'must be an HTTP method like "GET"';
const DNS_NAME = 'labels of letters, digits, "-" and "_" (at most 63 characters each) joined by dots';

/**
 * What a pattern means, by the key it is the pattern of (one pattern serves several keys: an HTTP token
 * is a method, a header name, or the gateway's name). PATTERN_REASONS words the keys not listed here.
 */
const KEY_PATTERN_REASONS: Record<string, string> = {
  method: METHOD,
  methods: METHOD,
  header: HEADER_NAME,
  targetedCacheControl: HEADER_NAME,
  ignoreHeaders: HEADER_NAME,
  name: 'must be a single HTTP token (letters, digits, "-", "_", "."; no spaces), as it goes in the Via header',
  id: 'must be letters, digits, "_", "." or "-"',
  key: 'must be "ip", "consumer" or "header:" and a header name (an HTTP token)',
  sha256: 'must be a hex SHA-256 digest: 64 hex digits (`gateway hash-key` prints one)',
  otlpEndpoint: 'must be an http:// or https:// URL, without spaces',
  url: 'must be a redis:// or rediss:// URL',
  hosts: `must be a host name, or "*." and a host name: ${DNS_NAME}`,
  serverNames: `must be a host name, or "*." and a host name: ${DNS_NAME}`,
};

/** The key a pattern error is about: `header` of ".../properties/header/pattern", `hosts` of ".../properties/hosts/items/pattern". */
function patternKey(schemaPath: string): string {
  const parts = schemaPath.split('/');
  parts.pop(); // "pattern"
  if (parts.at(-1) === 'items') parts.pop();
  return parts.at(-1) ?? '';
}

/**
 * Top-level keys of earlier versions, with what replaced them. A Map: the key looked up is the
 * config's own, and a plain object would answer "__proto__" or "constructor" with its prototype's.
 */
const REPLACED_KEYS: ReadonlyMap<string, string> = new Map([
  [
    'trustProxies',
    'is no longer supported: use "trustedProxies", a list of the proxies\' addresses and CIDR ranges ' +
    '(e.g. ["10.0.0.0/8"]); a count of trusted hops let any client choose its own address',
  ],
]);

const TYPE_NAMES: Record<string, string> = {
  integer: 'an integer',
  number: 'a number',
  string: 'a string',
  boolean: 'true or false',
  object: 'an object',
  array: 'an array',
};

/** Turns ajv's errors into `pointer: reason` problems an operator can act on. */
export function describeSchemaErrors(errors: readonly ErrorObject[], values?: SubstitutedValues): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const seen = new Set<string>();
  // A value of the wrong type fails its enum too: "must be one of …" says both, in one line.
  const enums = new Set(errors.flatMap((error) => (error.keyword === 'enum' ? [error.instancePath] : [])));
  // Which branch of an upstream's if/then/else applies follows its serviceType: when that is wrong or
  // missing, what the branch says of the endpoints is about a type the upstream does not have.
  const untyped = new Set(
    errors.flatMap((error) => {
      if (error.instancePath.endsWith('/serviceType')) return [error.instancePath.slice(0, -'/serviceType'.length)];
      if (missingProperty(error) === 'serviceType') return [error.instancePath];
      return [];
    }),
  );
  for (const error of errors) {
    if (error.keyword === 'type' && enums.has(error.instancePath)) continue;
    if (error.instancePath.endsWith('/endpoints') && untyped.has(error.instancePath.slice(0, -'/endpoints'.length))) continue;
    if (missingProperty(error) === 'endpoints' && untyped.has(error.instancePath)) continue;
    const problem = describe(error, values);
    if (!problem) continue;
    const key = `${problem.pointer}\n${problem.reason}`;
    if (seen.has(key)) continue;
    seen.add(key);
    problems.push(problem);
  }
  return problems;
}

/** The key a `required` error names; undefined for other errors. */
function missingProperty(error: ErrorObject): unknown {
  return error.keyword === 'required' ? (error.params as { missingProperty?: unknown }).missingProperty : undefined;
}

function describe(error: ErrorObject, values: SubstitutedValues | undefined): ConfigProblem | undefined {
  const params = error.params as Record<string, unknown>;
  // A key's name refused by propertyNames: the inner error carries the name; the outer one only restates it.
  if (error.keyword === 'propertyNames') return undefined;
  const name = (error as { propertyName?: string }).propertyName;
  if (name !== undefined) {
    const reason = error.keyword === 'pattern' ? (PROPERTY_NAME_REASONS[String(params.pattern)] ?? `must match ${String(params.pattern)}`) : (error.message ?? 'is invalid');
    return { pointer: `${error.instancePath}/${escapePointerToken(name)}`, reason: `the name ${reason} (got "${shownKey(name)}")` };
  }
  const pointer = error.instancePath;
  // Not for every error: the data of an unknown key's error is the whole object holding it.
  const got = (): string => `(got ${values ? values.shown(pointer, error.data) : shown(error.data)})`;
  switch (error.keyword) {
    case 'if':
      return undefined; // the failing branch reports its own error
    case 'additionalProperties': {
      const key = String(params.additionalProperty);
      const known = Object.keys((error.parentSchema as { properties?: object })?.properties ?? {});
      const replaced = pointer === '' ? REPLACED_KEYS.get(key) : undefined;
      if (replaced !== undefined) return { pointer: `/${escapePointerToken(key)}`, reason: replaced };
      return { pointer: `${pointer}/${escapePointerToken(key)}`, reason: `unknown key "${shownKey(key)}"${keyHint(key, known)}` };
    }
    case 'required': {
      const key = String(params.missingProperty);
      const reason = key === 'endpoints' ? 'is required when serviceType is "static"' : 'is required';
      return { pointer: `${pointer}/${escapePointerToken(key)}`, reason };
    }
    case 'false schema':
      if (pointer.endsWith('/endpoints')) {
        return { pointer, reason: 'only "static" upstreams take endpoints; the others list theirs in the doc at specPath' };
      }
      return { pointer, reason: 'is not allowed here' };
    case 'type':
      return { pointer, reason: `must be ${TYPE_NAMES[String(params.type)] ?? String(params.type)} ${got()}` };
    case 'maximum': {
      const limit = pointer.endsWith('Ms') ? DURATION_LIMIT_REASONS.get(params.limit as number) : undefined;
      if (limit !== undefined) return { pointer, reason: `${limit} ${got()}` };
      return { pointer, reason: `must be ${String(params.comparison)} ${String(params.limit)} ${got()}` };
    }
    case 'minimum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum':
      return { pointer, reason: `must be ${String(params.comparison)} ${String(params.limit)} ${got()}` };
    case 'enum': {
      const allowed = (params.allowedValues as unknown[]).map((v) => JSON.stringify(v));
      const guess = typeof error.data === 'string' ? closestMatch(error.data, params.allowedValues as string[]) : undefined;
      return {
        pointer,
        reason: `must be one of ${allowed.join(', ')} ${got()}${guess ? ` (did you mean "${guess}"?)` : ''}`,
      };
    }
    case 'pattern': {
      const key = patternKey(error.schemaPath);
      const reason = (Object.hasOwn(KEY_PATTERN_REASONS, key) ? KEY_PATTERN_REASONS[key] : undefined) ?? PATTERN_REASONS[String(params.pattern)] ?? `must match ${String(params.pattern)}`;
      return { pointer, reason: `${reason} ${got()}` };
    }
    case 'minLength':
      return { pointer, reason: 'must not be empty' };
    case 'minItems':
      return { pointer, reason: `must list at least ${String(params.limit)} item${params.limit === 1 ? '' : 's'}` };
    default:
      return { pointer, reason: `${error.message ?? 'is invalid'} ${got()}` };
  }
}

function keyHint(key: string, knownHere: readonly string[]): string {
  const typo = closestMatch(key, knownHere);
  if (typo) return ` (did you mean "${typo}"?)`;
  const elsewhere = KEY_LOCATIONS.get(key.toLowerCase());
  if (elsewhere) return ` (a key of that name belongs in ${elsewhere.map((where) => `"${where}"`).join(' or ')})`;
  return knownHere.length > 0 ? `; known keys here: ${knownHere.join(', ')}` : '';
}

/** key (lower-cased) -> where it belongs, e.g. "fetchtimeoutms" -> ["discovery"]. */
const KEY_LOCATIONS = collectKeyLocations(configSchema, '');

function collectKeyLocations(schema: unknown, where: string, into = new Map<string, string[]>()): Map<string, string[]> {
  const node = schema as { properties?: Record<string, unknown>; items?: unknown };
  for (const [key, child] of Object.entries(node.properties ?? {})) {
    const list = into.get(key.toLowerCase()) ?? [];
    list.push(where === '' ? '(top level)' : where);
    into.set(key.toLowerCase(), list);
    collectKeyLocations(child, where === '' ? key : `${where}.${key}`, into);
  }
  if (node.items) collectKeyLocations(node.items, `${where}[]`, into);
  return into;
}
