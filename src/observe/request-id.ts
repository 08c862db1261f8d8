/**
 * Request IDs: an incoming one from a trusted peer is kept when it is 1-200 visible ASCII characters;
 * otherwise the gateway makes one. Made ids are a per-process random prefix (64 bits) and a counter,
 * unique across workers and instances without coordination.
 *
 * Cost (bench/request-id.ts, Node 20 on the 2-core shared machine, 5M ids each):
 * nextRequestId() ~ REQUEST_ID_NS ns/id against crypto.randomUUID() ~ UUID_NS ns/id.
 */
import { randomBytes } from 'node:crypto';

export const DEFAULT_REQUEST_ID_HEADER = 'x-request-id';
export const MAX_REQUEST_ID_LENGTH = 200;

const prefix = randomBytes(8).toString('hex') + '-';
let counter = 0;

/** A new id: 16 hex characters, a dash, the process's counter in base 36. */
export function nextRequestId(): string {
  return prefix + (++counter).toString(36);
}

/** Whether an incoming id may be kept: 1-200 characters, each visible ASCII (0x21-0x7e). */
export function isAcceptableRequestId(value: string): boolean {
  const length = value.length;
  if (length === 0 || length > MAX_REQUEST_ID_LENGTH) return false;
  for (let i = 0; i < length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}
