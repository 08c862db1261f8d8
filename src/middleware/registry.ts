/**
 * The middleware types the gateway knows. A type is one file exporting its config schema (the keys
 * beyond id, type and slaMs) and its factory; adding a type means adding that file and a line here.
 */
import { apiKeyAuthProblems, apiKeyAuthSchema, createApiKeyAuth, type ApiKeyAuthConfig } from './api-key-auth.js';
import { Pipeline } from './pipeline.js';
import { createRateLimit, rateLimitProblems, rateLimitSchema, type RateLimitConfig } from './rate-limit.js';
import { createResponseCache, responseCacheProblems, responseCacheSchema, type ResponseCacheConfig } from './response-cache.js';
import type { Middleware, MiddlewareContext } from './types.js';
import { typedListProblems, typedListSchema, type EntryProblem, type TypeSchema } from '../config/typed-list-schema.js';
import { timerDuration } from '../config/durations.js';

/** One `middleware` entry of the config, after the schema filled its defaults. */
export type MiddlewareConfig = ApiKeyAuthConfig | RateLimitConfig | ResponseCacheConfig;

interface MiddlewareType {
  readonly schema: TypeSchema;
  /** Rules between the entry's keys that its schema cannot say (see typedListProblems). */
  problems?(config: MiddlewareConfig): readonly EntryProblem[];
  create(config: MiddlewareConfig, context: MiddlewareContext): Middleware;
}

export const MIDDLEWARE_TYPES: Readonly<Record<MiddlewareConfig['type'], MiddlewareType>> = {
  apiKeyAuth: {
    schema: apiKeyAuthSchema,
    problems: (config) => apiKeyAuthProblems(config as ApiKeyAuthConfig),
    create: (config, context) => createApiKeyAuth(config as ApiKeyAuthConfig, context),
  },
  rateLimit: {
    schema: rateLimitSchema,
    problems: (config) => rateLimitProblems(config as RateLimitConfig),
    create: (config, context) => createRateLimit(config as RateLimitConfig, context),
  },
  responseCache: {
    schema: responseCacheSchema,
    problems: (config) => responseCacheProblems(config as ResponseCacheConfig),
    create: (config, context) => createResponseCache(config as ResponseCacheConfig, context),
  },
};

export const DEFAULT_SLA_MS = 100;

/** JSON Schema of the `middleware` array: common keys, then each type's own keys (and no others). */
export function middlewareSchema(): Record<string, unknown> {
  const common = {
    id: {
      type: 'string',
      pattern: '^[A-Za-z0-9_.-]+$',
      description: 'Unique name of the entry: in x-disabled-middleware lists, the health report and /metrics.',
    },
    type: { type: 'string', enum: Object.keys(MIDDLEWARE_TYPES), description: 'Which middleware.' },
    slaMs: timerDuration(
      'Longest a decision may take; past it the middleware is skipped and the miss counted (apiKeyAuth answers 503 instead).',
      DEFAULT_SLA_MS,
    ),
  };
  return typedListSchema(
    'Run in this order for every routed request, before it is forwarded (the response passes back in reverse); ' +
      "an endpoint's x-disabled-middleware skips the ids it lists. Ids must be unique.",
    common,
    Object.fromEntries(Object.entries(MIDDLEWARE_TYPES).map(([type, { schema }]) => [type, schema])),
  );
}

/** What the middleware entries' types find wrong with them; pointers are under `/middleware`. */
export function middlewareProblems(entries: readonly MiddlewareConfig[]): Array<{ pointer: string; reason: string }> {
  return typedListProblems('middleware', entries, (entry) => (Object.hasOwn(MIDDLEWARE_TYPES, entry.type) ? MIDDLEWARE_TYPES[entry.type].problems?.(entry) : undefined));
}

/**
 * What is likely a mistake in the middleware order, though the gateway runs it as written (warnings:
 * `gateway check` prints them, start and reload log them): a responseCache before an apiKeyAuth answers
 * from the cache before any key is checked, and a rateLimit keyed by consumer with no apiKeyAuth
 * before it never sees a consumer.
 */
export function middlewareWarnings(entries: readonly MiddlewareConfig[]): Array<{ pointer: string; reason: string }> {
  const warnings: Array<{ pointer: string; reason: string }> = [];
  const firstAuth = entries.findIndex((entry) => entry.type === 'apiKeyAuth');
  entries.forEach((entry, index) => {
    if (entry.type === 'responseCache' && firstAuth > index) {
      warnings.push({
        pointer: `/middleware/${index}`,
        reason:
          `responseCache "${entry.id}" runs before apiKeyAuth "${entries[firstAuth]!.id}" (/middleware/${firstAuth}): a cached answer is served ` +
          'before any key is checked, to clients with no key too; put the cache after the auth',
      });
    }
    if (entry.type === 'rateLimit' && entry.key === 'consumer' && (firstAuth === -1 || firstAuth > index)) {
      warnings.push({
        pointer: `/middleware/${index}/key`,
        reason: `rateLimit "${entry.id}" is keyed by "consumer" but no apiKeyAuth runs before it: there is never a consumer, and every request is limited by its client address`,
      });
    }
  });
  return warnings;
}

/** The pipeline of a config's middleware entries, each built by its type's factory (throws on an entry middlewareProblems refuses). */
export function buildPipeline(entries: readonly MiddlewareConfig[], context: MiddlewareContext): Pipeline {
  const problems = middlewareProblems(entries);
  if (problems.length > 0) throw new Error(problems.map((p) => `${p.pointer}: ${p.reason}`).join('; '));
  return new Pipeline(
    entries.map((entry) => MIDDLEWARE_TYPES[entry.type].create(entry, context)),
    context.metrics,
  );
}
