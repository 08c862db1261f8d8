import type { UpstreamConfig } from '../config/types.js';
import { SWAGGER2_METHODS, UPSTREAM_RESPONSE, emptyPart, type Json, type SpecPart } from './spec-types.js';

/** A static upstream's endpoints, as minimal operations: only what the config says about them. */
export function partFromStatic(upstream: UpstreamConfig): SpecPart {
  const part = emptyPart();
  for (const endpoint of upstream.endpoints ?? []) {
    const method = endpoint.method.toLowerCase() as (typeof SWAGGER2_METHODS)[number];
    if (!SWAGGER2_METHODS.includes(method)) continue; // 2.0 names only these methods
    const operation: Json = { parameters: [], responses: { ...UPSTREAM_RESPONSE } };
    if (endpoint.consumes?.length) operation.consumes = [...endpoint.consumes];
    if (endpoint.produces?.length) operation.produces = [...endpoint.produces];
    if (endpoint['x-disabled-middleware']) operation['x-disabled-middleware'] = [...endpoint['x-disabled-middleware']];
    if (endpoint['x-disabled-listeners']) operation['x-disabled-listeners'] = [...endpoint['x-disabled-listeners']];
    const path = endpoint.path.startsWith('/') ? endpoint.path : `/${endpoint.path}`;
    part.operations.push({ path, method, operation });
  }
  return part;
}
