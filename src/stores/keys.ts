import { createHash } from 'node:crypto';

/*
 * Rate-limit keys are client-controlled (client addresses, `header:<name>` values), so both their
 * length and their number are bounded.
 */

/** Keys longer than this (UTF-16 code units) are replaced by a digest. */
export const MAX_KEY_LENGTH = 256;
const DIGEST_PREFIX = '~sha256:';

/**
 * The key itself when short, else `~sha256:<hex of the UTF-8 key>` (72 characters). Two long keys
 * share a bucket only on a SHA-256 collision; a short key that spells a digest form would need a preimage.
 */
export function boundKey(key: string): string {
  if (key.length <= MAX_KEY_LENGTH) return key;
  return DIGEST_PREFIX + createHash('sha256').update(key).digest('hex');
}

/** An entry of a map bounded by second-chance (CLOCK) eviction. */
export interface ClockEntry {
  /** Set on every use; eviction clears it once before evicting (a cheap approximation of LRU). */
  referenced: boolean;
}

/**
 * Evicts one entry of `map`: the oldest insertion that was not used since the last pass (entries used
 * since get a second chance: their bit is cleared and they move to the back) and that `mustKeep` does
 * not protect. Returns whether one went. Amortized O(1): a second chance clears a bit that only a use
 * sets again; protected entries (in-flight work) are few.
 */
export function evictOne<V extends ClockEntry>(
  map: Map<string, V>,
  mustKeep: (entry: V) => boolean,
  onEvict: (key: string, entry: V) => void,
): boolean {
  let budget = 2 * map.size + 1;
  while (budget-- > 0) {
    const head = map.entries().next();
    if (head.done === true) return false;
    const [key, entry] = head.value;
    if (entry.referenced || mustKeep(entry)) {
      entry.referenced = false;
      map.delete(key);
      map.set(key, entry);
      continue;
    }
    map.delete(key);
    onEvict(key, entry);
    return true;
  }
  return false;
}
