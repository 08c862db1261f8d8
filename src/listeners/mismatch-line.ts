/**
 * One line of an alternateUpstream's mismatch log: the request, both statuses and what differed, as
 * JSON, never longer than MAX_LINE_BYTES (newline included). Long values are cut (ending in "...") and
 * the line says `"truncated": true`; when cutting values is not enough, detail is left out level by
 * level down to a line that always fits (time, listener, method, path, statuses, what differed).
 */
import type { BodyDifference } from './shadow-body.js';
import type { HeaderDifference } from './shadow-headers.js';

/**
 * PIPE_BUF on Linux: one write() of at most this many bytes to a pipe is never interleaved with
 * another writer's, and it is small enough that several workers appending to one regular file with
 * O_APPEND each land their lines whole.
 */
export const MAX_LINE_BYTES = 4096;

/** `tooLarge`: the alternate's body passed maxBodyBytes (alternateBytes: its Content-Length, when it sent one). */
export type BodyReport = BodyDifference | { kind: 'tooLarge'; alternateBytes: number | null; limit: number };

export interface MismatchRecord {
  /** Date.now() when the comparison finished. */
  time: number;
  listener: string;
  /** The alternate's serviceLocation. */
  alternate: string;
  /** As the client sent it. */
  method: string;
  /** The method the upstreams got when it differs (a HEAD served by GET). */
  sentMethod: string | null;
  path: string;
  query: string;
  /** "METHOD template" of the selected endpoint. */
  endpoint: string | null;
  /** The primary host that answered the client. */
  upstream: string | null;
  consumer: string | null;
  /** The request's ID and trace id (as in the access log); '' when unknown. */
  requestId?: string;
  traceId?: string;
  /** The few request headers worth having to reproduce the request (never credentials). */
  requestHeaders: ReadonlyArray<readonly [string, string]>;
  clientStatus: number;
  alternateStatus: number;
  headers: readonly HeaderDifference[];
  body: BodyReport | null;
}

interface Level {
  /** Characters kept of a header value or a body value / snippet. */
  value: number;
  path: number;
  headerDiffs: number;
  valuesPerHeader: number;
  /** Header differences with their values, or names only. */
  headerValues: boolean;
  requestHeaders: boolean;
}

const LEVELS: readonly Level[] = [
  { value: 256, path: 1024, headerDiffs: 16, valuesPerHeader: 4, headerValues: true, requestHeaders: true },
  { value: 96, path: 512, headerDiffs: 8, valuesPerHeader: 2, headerValues: true, requestHeaders: true },
  { value: 32, path: 256, headerDiffs: 8, valuesPerHeader: 0, headerValues: false, requestHeaders: false },
];
const SHORT = 64;

/** The line, newline included. */
export function mismatchLine(record: MismatchRecord): string {
  const values = bodyValueTexts(record.body);
  for (const level of LEVELS) {
    const line = JSON.stringify(detailed(record, values, level)) + '\n';
    if (Buffer.byteLength(line) <= MAX_LINE_BYTES) return line;
  }
  return JSON.stringify(minimal(record)) + '\n';
}

/** What differed, in the order the line details them. */
export function differenceNames(record: Pick<MismatchRecord, 'clientStatus' | 'alternateStatus' | 'headers' | 'body'>): string[] {
  const names: string[] = [];
  if (record.clientStatus !== record.alternateStatus) names.push('status');
  if (record.headers.length > 0) names.push('headers');
  if (record.body !== null) names.push('body');
  return names;
}

class Clipper {
  truncated = false;

  text(value: string, max: number): string {
    if (value.length <= max) return value;
    this.truncated = true;
    return value.slice(0, max) + '...';
  }

  list<T>(values: readonly T[], max: number): T[] {
    if (values.length <= max) return values.slice();
    this.truncated = true;
    return values.slice(0, max);
  }
}

/** A JSON body difference's two values as JSON text, written once (a value may be a whole document). */
interface ValueTexts {
  client: string | null;
  alternate: string | null;
}

/** More than any level keeps, so cutting still marks the line truncated. */
const VALUE_TEXT_LIMIT = 1024;

function bodyValueTexts(body: BodyReport | null): ValueTexts {
  if (body === null || body.kind !== 'json') return { client: null, alternate: null };
  return { client: jsonText(body.client), alternate: jsonText(body.alternate) };
}

function jsonText(value: unknown): string | null {
  if (value === undefined) return null;
  // A big array or object: its first part is enough (and what the line can hold).
  const text = JSON.stringify(value);
  return text.length > VALUE_TEXT_LIMIT + 3 ? text.slice(0, VALUE_TEXT_LIMIT + 3) : text;
}

function detailed(record: MismatchRecord, values: ValueTexts, level: Level): Record<string, unknown> {
  const clip = new Clipper();
  const request: Record<string, unknown> = {
    method: clip.text(record.method, SHORT),
    path: clip.text(record.path, level.path),
    query: clip.text(record.query, level.path),
  };
  if (record.sentMethod !== null) request.sentMethod = clip.text(record.sentMethod, SHORT);
  request.endpoint = record.endpoint === null ? null : clip.text(record.endpoint, level.path);
  request.upstream = record.upstream === null ? null : clip.text(record.upstream, level.path);
  request.consumer = record.consumer === null ? null : clip.text(record.consumer, SHORT);
  if (record.requestId) request.requestId = clip.text(record.requestId, SHORT * 4);
  if (record.traceId) request.traceId = record.traceId;
  if (level.requestHeaders) {
    // Entries, not assignments: a client may send a header named "__proto__".
    request.headers = Object.fromEntries(record.requestHeaders.map(([name, value]) => [name, clip.text(value, level.value)]));
  } else if (record.requestHeaders.length > 0) {
    clip.truncated = true;
  }
  const line: Record<string, unknown> = {
    time: new Date(record.time).toISOString(),
    listener: clip.text(record.listener, SHORT),
    alternate: clip.text(record.alternate, level.path),
    request,
    status: { client: record.clientStatus, alternate: record.alternateStatus },
    differences: differenceNames(record),
  };
  if (record.headers.length > 0) {
    line.headers = clip.list(record.headers, level.headerDiffs).map((difference) => {
      const name = clip.text(difference.name, SHORT);
      if (!level.headerValues) {
        clip.truncated = true;
        return { name };
      }
      const values = (list: string[] | null): string[] | null =>
        list === null ? null : clip.list(list, level.valuesPerHeader).map((value) => clip.text(value, level.value));
      return { name, client: values(difference.client), alternate: values(difference.alternate) };
    });
  }
  if (record.body !== null) line.body = bodyReport(record.body, values, level, clip);
  line.truncated = clip.truncated;
  return line;
}

function bodyReport(body: BodyReport, values: ValueTexts, level: Level, clip: Clipper): Record<string, unknown> {
  switch (body.kind) {
    case 'json':
      return {
        kind: 'json',
        pointer: clip.text(body.pointer, level.path),
        // JSON text of each side's value there; null: that side has nothing at this pointer.
        client: values.client === null ? null : clip.text(values.client, level.value),
        alternate: values.alternate === null ? null : clip.text(values.alternate, level.value),
      };
    case 'bytes': {
      const report: Record<string, unknown> = {
        kind: 'bytes',
        offset: body.offset,
        clientBytes: body.clientBytes,
        alternateBytes: body.alternateBytes,
        // Text from a little before the first differing byte (UTF-8, undecodable bytes replaced).
        client: clip.text(body.client.toString('utf8'), level.value),
        alternate: clip.text(body.alternate.toString('utf8'), level.value),
      };
      if (body.note !== undefined) report.note = body.note;
      return report;
    }
    case 'tooLarge':
      return { kind: 'tooLarge', alternateBytes: body.alternateBytes, limit: body.limit };
  }
}

function minimal(record: MismatchRecord): Record<string, unknown> {
  const clip = new Clipper();
  return {
    time: new Date(record.time).toISOString(),
    listener: clip.text(record.listener, SHORT),
    request: {
      method: clip.text(record.method, SHORT),
      path: clip.text(record.path, 128),
      ...(record.requestId ? { requestId: clip.text(record.requestId, SHORT * 4) } : {}),
    },
    status: { client: record.clientStatus, alternate: record.alternateStatus },
    differences: differenceNames(record),
    truncated: true,
  };
}
