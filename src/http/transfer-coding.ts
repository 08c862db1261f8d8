/**
 * What a request's Transfer-Encoding allows (RFC 9112 6.1, 6.3 and 7). The server library decodes
 * the body as chunked whenever the header is present, whatever it lists (native-notes.md), so any
 * other list must be refused here: forwarding that body would frame it differently from what the
 * client, or a proxy in front of the gateway, meant (a request-smuggling divergence).
 */

export const enum TransferCoding {
  /** Exactly one coding, `chunked` (any letter case): the body is framed the way it is read. */
  Chunked,
  /** `chunked` is not the last coding, is listed twice, or nothing is listed: 400, and close. */
  Ambiguous,
  /** Other codings before a final `chunked` (`gzip, chunked`): the gateway does not decode them, 501. */
  Unsupported,
}

/** `value`: every Transfer-Encoding field line of the request, joined with ", ". */
export function readTransferCoding(value: string): TransferCoding {
  if (value.length === 7 && value.toLowerCase() === 'chunked') return TransferCoding.Chunked;
  // A list (RFC 9110 5.6.1): elements separated by commas with optional whitespace; empty ones ignored.
  const codings = value
    .split(',')
    .map((element) => element.replace(/^[ \t]+|[ \t]+$/g, '').toLowerCase())
    .filter((element) => element !== '');
  if (codings.length === 0 || codings[codings.length - 1] !== 'chunked') return TransferCoding.Ambiguous;
  if (codings.indexOf('chunked') !== codings.length - 1) return TransferCoding.Ambiguous;
  return codings.length === 1 ? TransferCoding.Chunked : TransferCoding.Unsupported;
}
