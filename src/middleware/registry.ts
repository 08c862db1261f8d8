/**
 * The middleware types the gateway knows. A type is one file exporting its config schema (the keys
 * beyond id, type and slaMs) and its factory; adding a type means adding that file and a line here.
 */
import { apiKeyAuthSchema, createApiKeyAuth, type ApiKeyAuthConfig } from './api-key-auth.js';
import { Pipeline } from './pipeline.js';
import { createRateLimit, rateLimitSchema, type RateLimitConfig } from './rate-limit.js';
import { createResponseCache, responseCacheSchema, type ResponseCacheConfig } from './response-cache.js';
import type { Middleware, MiddlewareContext } from './types.js';
import { typedListSchema, type TypeSchema } from '../config/typed-list-schema.js';
import { timerDuration } from '../config/durations.js';

/** One `middleware` entry of the config, after the schema filled its defaults. */
export type MiddlewareConfig = ApiKeyAuthConfig | RateLimitConfig | ResponseCacheConfig;

interface MiddlewareType {
  readonly schema: TypeSchema;
  create(config: MiddlewareConfig, context: MiddlewareContext): Middleware;
}

export const MIDDLEWARE_TYPES: Readonly<Record<MiddlewareConfig['type'], MiddlewareType>> = {
  apiKeyAuth: { schema: apiKeyAuthSchema, create: (config, context) => createApiKeyAuth(config as ApiKeyAuthConfig, context) },
  rateLimit: { schema: rateLimitSchema, create: (config, context) => createRateLimit(config as RateLimitConfig, context) },
  responseCache: { schema: responseCacheSchema, create: (config, context) => createResponseCache(config as ResponseCacheConfig, context) },
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

/** The pipeline of a config's middleware entries, each built by its type's factory. */
export function buildPipeline(entries: readonly MiddlewareConfig[], context: MiddlewareContext): Pipeline {
  return new Pipeline(
    entries.map((entry) => MIDDLEWARE_TYPES[entry.type].create(entry, context)),
    context.metrics,
  );
}
