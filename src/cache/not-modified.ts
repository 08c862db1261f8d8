/**
 * What a 304 to the cache's own conditional request does to the stored response it revalidated
 * (RFC 9111 4.3.4): whether the 304 selects it, and its headers once freshened.
 */
import { fieldValue } from '../http/header-list.js';
import { parseHttpDate } from './http-date.js';
import type { StoredResponse } from './record.js';
import { targetedValue } from './rules.js';

/**
 * Whether a 304 (its end-to-end `headers`) selects `entry` for update, by the first of RFC 9111
 * 4.3.4's rules that applies:
 * - an ETag in the 304 selects the entry with the same entity-tag, and no other: a 304 naming "v2"
 *   must not freshen "v1". The W/ prefix is not compared (as http-cache-semantics does): a server may
 *   weaken the tag of a compressed 200 and not of its 304.
 * - else a Last-Modified in the 304 selects the entry with the same date.
 * - a 304 with no validator at all selects the entry. The RFC reserves that for an entry without one
 *   either, but the request carried this entry's validators and no other's, so the 304 can only be
 *   about it, and RFC 9110 15.4.5 lets a server leave Last-Modified out of a 304.
 */
export function selects(entry: StoredResponse, headers: readonly string[]): boolean {
  const tag = fieldValue(headers, 'etag');
  if (tag !== undefined) {
    const stored = entry.etag;
    return stored !== undefined && opaqueTag(stored) === opaqueTag(tag);
  }
  const modified = fieldValue(headers, 'last-modified');
  if (modified !== undefined) {
    const stored = entry.lastModified;
    if (stored === undefined) return false;
    const now = Date.now();
    const at = parseHttpDate(modified.trim(), now);
    return at !== null ? at === parseHttpDate(stored.trim(), now) : modified.trim() === stored.trim();
  }
  return true;
}

function opaqueTag(tag: string): string {
  const trimmed = tag.trim();
  return trimmed.startsWith('W/') ? trimmed.slice(2) : trimmed;
}

/**
 * Fields of the stored answer a 304 does not replace: the framing, and those that say what the stored
 * bytes are. RFC 9111 3.2 lets a cache keep such fields to keep the stored response intact, and RFC
 * 9110 15.4.5 says a 304 should not send them; a 304 naming `text/html` or `gzip` for a stored
 * `text/plain` body would have every later hit serve the same bytes as something else.
 */
const DESCRIBE_THE_BODY = new Set(['content-length', 'transfer-encoding', 'x-cache', 'content-type', 'content-encoding', 'content-range']);

/**
 * The entry's headers as the upstream sent them with those of the 304 in their place (RFC 9111 3.2,
 * 4.3.4; framing and the body's description kept: DESCRIBE_THE_BODY). Its targeted field (kept aside,
 * not among the served headers) is put back unless the 304 brings one of its own, which replaces it.
 */
export function freshenedHeaders(entry: StoredResponse, update: readonly string[], targeted: readonly string[]): string[] {
  const value = entry.targetedCacheControl;
  const stored = value === undefined || targeted.length === 0 || targetedValue(update, targeted) !== undefined ? entry.headers : [targeted[0]!, value, ...entry.headers];
  const replaced = new Set<string>();
  for (let i = 0; i < update.length; i += 2) {
    const name = update[i]!;
    if (!DESCRIBE_THE_BODY.has(name)) replaced.add(name);
  }
  const merged: string[] = [];
  for (let i = 0; i < stored.length; i += 2) if (!replaced.has(stored[i]!)) merged.push(stored[i]!, stored[i + 1]!);
  for (let i = 0; i < update.length; i += 2) if (replaced.has(update[i]!)) merged.push(update[i]!, update[i + 1]!);
  return merged;
}
