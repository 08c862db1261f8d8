/**
 * A cache record as ONE Buffer, for stores that keep bytes (Redis): what another instance needs to
 * serve it (status, headers, body, the http-cache-semantics policy, when it was stored).
 *
 *   "SGC" 0x01            magic and format version
 *   kind (1 byte)         1: a stored response, 2: a Vary index
 *   meta length (u32 BE)  then that many bytes of UTF-8 JSON:
 *                           response: { s: status, h: [name, value, ...], p: policy.toObject(), u: key, t: storedAt,
 *                                       c: targeted Cache-Control (optional) }
 *                           vary:     { v: [name, ...], t: storedAt }
 *   body                  the rest (responses only)
 *
 * decodeRecord refuses anything else with a CacheRecordError saying what is wrong (the store then
 * treats the key as absent): a store shared with an older or newer build, or bytes that are not ours.
 */
import CachePolicy from 'http-cache-semantics';
import { StoredResponse, VaryIndex, type CacheRecord } from './record.js';

const MAGIC = Buffer.from('SGC\u0001', 'latin1');
const HEADER_BYTES = MAGIC.length + 1 + 4;
const RESPONSE = 1;
const VARY = 2;

export class CacheRecordError extends Error {
  override readonly name = 'CacheRecordError';
}

export function encodeRecord(record: CacheRecord): Buffer {
  const meta =
    record.kind === 'response'
      ? { s: record.status, h: record.headers, p: record.policy.toObject(), u: record.url, t: record.storedAt, c: record.targetedCacheControl }
      : { v: record.names, t: record.storedAt };
  const json = Buffer.from(JSON.stringify(meta), 'utf8');
  const body = record.kind === 'response' ? record.body : EMPTY;
  const out = Buffer.allocUnsafe(HEADER_BYTES + json.length + body.length);
  MAGIC.copy(out, 0);
  out[MAGIC.length] = record.kind === 'response' ? RESPONSE : VARY;
  out.writeUInt32BE(json.length, MAGIC.length + 1);
  json.copy(out, HEADER_BYTES);
  body.copy(out, HEADER_BYTES + json.length);
  return out;
}

const EMPTY = Buffer.alloc(0);

/** The record `bytes` hold; the body is a view of `bytes` (no copy). */
export function decodeRecord(bytes: Buffer): CacheRecord {
  if (bytes.length < HEADER_BYTES || !bytes.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw new CacheRecordError('not a cache record of this format (magic "SGC", version 1)');
  }
  const kind = bytes[MAGIC.length];
  const metaLength = bytes.readUInt32BE(MAGIC.length + 1);
  if (HEADER_BYTES + metaLength > bytes.length) {
    throw new CacheRecordError(`cache record truncated: ${bytes.length} bytes, its metadata alone needs ${HEADER_BYTES + metaLength}`);
  }
  let meta: Record<string, unknown>;
  try {
    meta = JSON.parse(bytes.toString('utf8', HEADER_BYTES, HEADER_BYTES + metaLength)) as Record<string, unknown>;
  } catch {
    throw new CacheRecordError('cache record metadata is not valid JSON');
  }
  if (meta === null || typeof meta !== 'object') throw new CacheRecordError('cache record metadata is not an object');
  const storedAt = meta.t;
  if (typeof storedAt !== 'number') throw new CacheRecordError('cache record has no stored-at time');
  if (kind === VARY) {
    if (!isStringList(meta.v)) throw new CacheRecordError('Vary index without its list of header names');
    return new VaryIndex(meta.v, storedAt);
  }
  if (kind !== RESPONSE) throw new CacheRecordError(`unknown cache record kind ${kind}`);
  const { s: status, h: headers, p: policyObject, u: url, c: targeted } = meta;
  if (typeof status !== 'number' || !Number.isInteger(status) || status < 200 || status > 599) {
    throw new CacheRecordError(`stored response with an invalid status ${String(status)}`);
  }
  if (!isStringList(headers) || headers.length % 2 !== 0) throw new CacheRecordError('stored response headers are not a flat name/value list');
  if (typeof url !== 'string') throw new CacheRecordError('stored response without its key');
  let policy: CachePolicy;
  try {
    policy = CachePolicy.fromObject(policyObject as CachePolicy.CachePolicyObject);
  } catch (err) {
    throw new CacheRecordError(`stored response policy unreadable: ${(err as Error).message}`);
  }
  return new StoredResponse(status, headers, bytes.subarray(HEADER_BYTES + metaLength), policy, url, storedAt, typeof targeted === 'string' ? targeted : undefined);
}

function isStringList(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((item) => typeof item === 'string');
}
