import SwaggerParser from '@apidevtools/swagger-parser';
import type { ServiceType } from '../config/types.js';

const MAX_REASON_CHARS = 2000;

/**
 * Checks that the doc is of the kind serviceType says, then validates it (and resolves its internal
 * `$ref`s) on a copy. External `$ref`s are not followed: a doc must not make the gateway read files or
 * reach other hosts. Returns the dereferenced copy.
 */
export async function validateDoc(doc: unknown, serviceType: Exclude<ServiceType, 'static'>, docUrl: string): Promise<Record<string, any>> {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
    throw new Error(`${docUrl}: the doc is not a JSON object`);
  }
  const found = describeVersion(doc as Record<string, unknown>);
  const expected = serviceType === 'swagger2' ? 'Swagger 2.0' : 'OpenAPI 3.x';
  const matches = serviceType === 'swagger2' ? found === 'Swagger 2.0' : found.startsWith('OpenAPI 3.');
  if (!matches) throw new Error(`${docUrl}: serviceType is "${serviceType}" (${expected}) but the doc is ${found}`);
  try {
    return (await SwaggerParser.validate(structuredClone(doc) as never, { resolve: { external: false } })) as Record<string, any>;
  } catch (error) {
    const reason = String((error as Error).message ?? error);
    const shortened = reason.length > MAX_REASON_CHARS ? `${reason.slice(0, MAX_REASON_CHARS)}...` : reason;
    throw new Error(`${docUrl}: invalid ${found} doc: ${shortened}`);
  }
}

function describeVersion(doc: Record<string, unknown>): string {
  if (doc.swagger !== undefined) return doc.swagger === '2.0' ? 'Swagger 2.0' : `Swagger ${JSON.stringify(doc.swagger)}`;
  if (typeof doc.openapi === 'string') return `OpenAPI ${doc.openapi}`;
  if (doc.openapi !== undefined) return `OpenAPI ${JSON.stringify(doc.openapi)}`;
  return 'neither Swagger nor OpenAPI (no "swagger" or "openapi" key; is specPath right?)';
}
