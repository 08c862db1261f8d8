/**
 * An upstream head without some of its headers, for a client that must not get them (the response
 * cache withholds the targeted cache-control fields it obeys, RFC 9213). The source bytes are shared;
 * only the spans differ. The same head when none of the names is present (the usual case: no copy).
 */
import { ResponseHead } from './response-parser.js';

/** `names`: lower-case header names. */
export function withoutHeaders(head: ResponseHead, names: readonly string[]): ResponseHead {
  const { source, spans } = head;
  let kept: number[] | null = null;
  for (let i = 0; i < spans.length; i += 4) {
    if (named(source, spans[i]!, spans[i + 1]!, names)) {
      kept ??= spans.slice(0, i);
    } else if (kept !== null) {
      kept.push(spans[i]!, spans[i + 1]!, spans[i + 2]!, spans[i + 3]!);
    }
  }
  return kept === null ? head : new ResponseHead(head.status, source, kept, head.contentLength, head.declaredLength, head.bodyFollows, head.sourceWords);
}

function named(source: Buffer, start: number, end: number, names: readonly string[]): boolean {
  const length = end - start;
  for (const name of names) {
    if (name.length !== length) continue;
    let i = 0;
    while (i < length && lower(source[start + i]!) === name.charCodeAt(i)) i++;
    if (i === length) return true;
  }
  return false;
}

function lower(byte: number): number {
  return byte >= 0x41 && byte <= 0x5a ? byte | 0x20 : byte;
}
