/** Writes a built-in endpoint's answer (BuiltinAnswer) on the public port and on the admin listener. */
import { appendHeaderLines, byteLengthUpperBound, endWithBody } from '../http/cork-budget.js';
import { statusLine } from '../http/status-line.js';
import type { UwsResponse } from '../native/uws-types.js';
import type { BuiltinAnswer } from '../exchange/answer.js';

/**
 * Status, headers and body; for `headersOnly` (HEAD) the body's Content-Length only. With
 * `closeConnection` the connection is closed after the answer (HEAD: the client is asked to close).
 * `extra`: more headers, flat [name, value, ...] (the request ID).
 * Returns the body bytes sent.
 */
export function writeBuiltinAnswer(
  res: UwsResponse,
  answer: BuiltinAnswer,
  headersOnly: boolean,
  closeConnection: boolean,
  extra: readonly string[] | null = null,
): number {
  // One writeStatus for the status line and every header (appendHeaderLines).
  let text = statusLine(answer.status);
  const headers = answer.headers;
  for (const name in headers) text += '\r\n' + name + ': ' + headers[name]!;
  if (extra !== null) text = appendHeaderLines(text, extra);
  res.writeStatus(text);
  const head = byteLengthUpperBound(text) + 2;
  const body = answer.body;
  const length = typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength;
  if (headersOnly) {
    res.writeHeader('content-length', String(length));
    if (closeConnection) res.writeHeader('connection', 'close');
    res.endWithoutBody();
    return 0;
  }
  endWithBody(res, body, closeConnection, head);
  return length;
}
