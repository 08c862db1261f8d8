/**
 * Compares the body the client got with the alternate's (docs/reference/listeners.md#alternateupstream).
 *
 * Each side is first decoded by its own Content-Encoding (gzip, deflate, br; identity as is), so two
 * compressors writing the same content differently do not count as a difference (the header
 * comparison still reports a differing Content-Encoding). When either side cannot be decoded, the raw
 * bytes are compared. JSON bodies (a JSON content type on the client's answer, or a client body that
 * starts with "{" or "[") are compared as values, key order aside; anything else byte for byte.
 */
import { promisify } from 'node:util';
import { brotliDecompress, gunzip, inflate, inflateRaw } from 'node:zlib';
import { firstJsonDifference } from './json-difference.js';

export interface BodySide {
  bytes: Buffer;
  contentType: string | undefined;
  contentEncoding: string | undefined;
}

export type BodyDifference =
  | {
      kind: 'json';
      pointer: string;
      /** The value at `pointer`; undefined when that side has nothing there. */
      client: unknown;
      alternate: unknown;
    }
  | {
      kind: 'bytes';
      /** First differing byte (of the decoded bodies when both could be decoded). */
      offset: number;
      clientBytes: number;
      alternateBytes: number;
      /** Bytes around `offset` on each side. */
      client: Buffer;
      alternate: Buffer;
      /** Why the bodies were compared as bytes when one of them looked like JSON. */
      note?: string;
    };

/** Bytes kept before and after the first differing one, for the log. */
const CONTEXT_BEFORE = 32;
const CONTEXT_AFTER = 96;

const gunzipAsync = promisify(gunzip);
const inflateAsync = promisify(inflate);
const inflateRawAsync = promisify(inflateRaw);
const brotliAsync = promisify(brotliDecompress);

/**
 * The first difference between the two bodies, or null when they are equal. `maxDecodedBytes` bounds
 * what a decompressed body may grow to (past it, the raw bytes are compared).
 */
export async function bodyDifference(client: BodySide, alternate: BodySide, maxDecodedBytes: number): Promise<BodyDifference | null> {
  let left = client.bytes;
  let right = alternate.bytes;
  if (left.equals(right)) return null;
  const [decodedLeft, decodedRight] = await Promise.all([
    decodeContent(left, client.contentEncoding, maxDecodedBytes),
    decodeContent(right, alternate.contentEncoding, maxDecodedBytes),
  ]);
  if (decodedLeft !== null && decodedRight !== null) {
    left = decodedLeft;
    right = decodedRight;
    if (left.equals(right)) return null;
  }
  if (!looksLikeJson(client.contentType, left)) return bytesDifference(left, right);
  const parsedLeft = parseJson(left);
  if (parsedLeft === NOT_JSON) return bytesDifference(left, right);
  const parsedRight = parseJson(right);
  if (parsedRight === NOT_JSON) return bytesDifference(left, right, "the client's body is JSON, the alternate's is not");
  const difference = firstJsonDifference(parsedLeft, parsedRight);
  return difference === null ? null : { kind: 'json', ...difference };
}

/** null when the encoding is not one we decode, or the bytes do not decode within the bound. */
export async function decodeContent(bytes: Buffer, encoding: string | undefined, maxBytes: number): Promise<Buffer | null> {
  const name = encoding === undefined ? 'identity' : encoding.trim().toLowerCase();
  const options = { maxOutputLength: Math.max(1, maxBytes) };
  try {
    switch (name) {
      case '':
      case 'identity':
        return bytes;
      case 'gzip':
      case 'x-gzip':
        return await gunzipAsync(bytes, options);
      case 'deflate':
        // RFC 9110 says zlib-wrapped; some servers send raw deflate.
        try {
          return await inflateAsync(bytes, options);
        } catch {
          return await inflateRawAsync(bytes, options);
        }
      case 'br':
        return await brotliAsync(bytes, options);
      default:
        return null;
    }
  } catch {
    return null;
  }
}

const JSON_TYPE = /^[a-z0-9!#$&^_.+-]+\/(?:[a-z0-9!#$&^_.+-]*\+)?json\s*(?:;|$)/i;

export function isJsonContentType(contentType: string | undefined): boolean {
  return contentType !== undefined && JSON_TYPE.test(contentType.trim());
}

function looksLikeJson(contentType: string | undefined, body: Buffer): boolean {
  if (isJsonContentType(contentType)) return true;
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) continue;
    // A UTF-8 byte order mark before the document.
    if (i === 0 && c === 0xef && body[1] === 0xbb && body[2] === 0xbf) {
      i += 2;
      continue;
    }
    return c === 0x7b || c === 0x5b;
  }
  return false;
}

const NOT_JSON = Symbol('not JSON');

function parseJson(body: Buffer): unknown {
  try {
    const text = body.toString('utf8');
    return JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch {
    return NOT_JSON;
  }
}

function bytesDifference(left: Buffer, right: Buffer, note?: string): BodyDifference | null {
  const common = Math.min(left.length, right.length);
  let offset = 0;
  while (offset < common && left[offset] === right[offset]) offset++;
  if (offset === common && left.length === right.length) return null;
  const from = Math.max(0, offset - CONTEXT_BEFORE);
  const difference: BodyDifference = {
    kind: 'bytes',
    offset,
    clientBytes: left.length,
    alternateBytes: right.length,
    client: left.subarray(from, offset + CONTEXT_AFTER),
    alternate: right.subarray(from, offset + CONTEXT_AFTER),
  };
  if (note !== undefined) difference.note = note;
  return difference;
}
