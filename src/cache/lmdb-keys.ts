/**
 * The LMDB key a cache key (key.ts) is kept under in the shared store. LMDB refuses keys over 1,978
 * bytes (the `lmdb` package's limit with its default page size), and a cache key has no bound of its
 * own: a 4 KB URL (GraphQL GETs), a long Vary'd request header, a Vary listing hundreds of names. A key
 * of at most AS_IS_BYTES (UTF-8) is its own LMDB key; a longer one is kept under its first HEAD_BYTES
 * bytes, a separator and its SHA-256 digest, and its record carries the whole key, compared on read.
 *
 * The head keeps the order prefix deletion relies on: every key that starts with a URL prefix is kept
 * under an LMDB key that starts with rangeStart(prefix). A kept-as-is key is at most AS_IS_BYTES long
 * and a digest key at least HEAD_BYTES - 3 + 1 + 43: they never collide.
 *
 * An ordinary key (a few hundred characters) costs one length compare on the hit path: 633 UTF-16
 * units are at most 1,899 UTF-8 bytes.
 */
import { createHash } from 'node:crypto';

const AS_IS_BYTES = 1900;
const HEAD_BYTES = 1900;
const SURELY_AS_IS = Math.floor(AS_IS_BYTES / 3);
const SEPARATOR = '\n#';

/** The LMDB key of cache key `key`: `key` itself unless it is too long. Small enough to be inlined. */
export function lmdbKey(key: string): string {
  return key.length <= SURELY_AS_IS ? key : longKey(key);
}

function longKey(key: string): string {
  if (key.length <= AS_IS_BYTES && Buffer.byteLength(key, 'utf8') <= AS_IS_BYTES) return key;
  const bytes = Buffer.from(key, 'utf8');
  return `${head(bytes)}${SEPARATOR}${createHash('sha256').update(bytes).digest('base64url')}`;
}

/** Where the LMDB keys of every cache key starting with `prefix` begin: `prefix`, or its head when it is longer. */
export function rangeStart(prefix: string): string {
  if (prefix.length <= SURELY_AS_IS) return prefix;
  const bytes = Buffer.from(prefix, 'utf8');
  return bytes.length <= HEAD_BYTES ? prefix : head(bytes);
}

/** The first HEAD_BYTES bytes, cut back to the start of a UTF-8 character. */
function head(bytes: Buffer): string {
  let end = HEAD_BYTES;
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
  return bytes.toString('utf8', 0, end);
}
