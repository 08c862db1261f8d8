/**
 * The strict HTTP/1.1 response parser: one per connection, reused for every answer on it.
 *
 * It is the gateway's defence against an upstream that is broken or compromised and tries to make
 * one answer look like two (response smuggling), so it accepts only what RFC 9112 allows and
 * rejects the ambiguous rest (see README.md for the list and the reasons). The head is parsed in
 * one pass over the bytes, straight from the read buffer when it arrived whole: where each kept
 * name and value lies is recorded (ResponseHead.spans; views are made only for whoever asks), every
 * header classified once (framing, hop-by-hop), for any number of headers in any order.
 * Bodies are handed out as views; chunked framing is decoded by a byte-level state machine, so any
 * TCP split works.
 */
import { Byte, HEX, QDTEXT, TOKEN as TOKEN_TABLE, VALUE as VALUE_TABLE, ValueByte } from './http-chars.js';

// Module-local copies of the byte tables the head loops read: about 8% faster than reading them
// through the import bindings (measured on a 330-byte head).
const TOKEN = TOKEN_TABLE.slice();
const VALUE = VALUE_TABLE.slice();

/** The final answer's status and headers, as the data plane needs them. */
export class ResponseHead {
  /** The views, once asked for (see `headers`). */
  private views: Buffer[] | null = null;

  constructor(
    readonly status: number,
    /**
     * The bytes the head was parsed from, and where its headers are in them: 4 numbers per header,
     * [nameStart, nameEnd, valueStart, valueEnd], in the upstream's order. The data plane copies the
     * headers to the client from here, without a view per name and value (see UwsClient.writeHead in src/lifecycle/uws/uws-client.ts).
     */
    readonly source: Buffer,
    readonly spans: readonly number[],
    /** Body bytes that follow: 0 for none (HEAD, 204, 304), -1 when unknown (chunked, or until close). */
    readonly contentLength: number,
    /** The Content-Length header's value, -1 without one (for a HEAD or 304 answer: the length a GET would have had). */
    readonly declaredLength: number,
    /**
     * Body bytes (Content-Length or until close) follow the head in the read that delivered it, so
     * onData comes before that read ends: a caller may hold the head back and send it with them.
     * False for chunked bodies (the read may hold only framing) and when the head ended the read.
     */
    readonly bodyFollows: boolean,
    /** A DataView of `source` (the parser's), for copying names and values 4 bytes at a time; null for a head made by fromHeaders. */
    readonly sourceWords: DataView | null = null,
  ) {}

  /**
   * A head not parsed from an answer (tests): `headers` as [name, value, ...], assumed valid, copied
   * into a source of their own.
   */
  static fromHeaders(status: number, headers: readonly Uint8Array[], contentLength: number, declaredLength: number, bodyFollows: boolean): ResponseHead {
    const source = Buffer.concat(headers);
    const spans: number[] = [];
    let at = 0;
    for (let i = 0; i < headers.length; i += 2) {
      const valueStart = at + headers[i]!.length;
      at = valueStart + headers[i + 1]!.length;
      spans.push(valueStart - headers[i]!.length, valueStart, valueStart, at);
    }
    return new ResponseHead(status, source, spans, contentLength, declaredLength, bodyFollows);
  }

  /**
   * End-to-end headers in the upstream's order, [name, value, name, value, ...], as views of the
   * bytes received (values trimmed of surrounding whitespace). Removed: Content-Length and
   * Transfer-Encoding (the framing, given above), the hop-by-hop headers (Connection, Keep-Alive,
   * Proxy-*, TE, Trailer, Upgrade) and every header a Connection header names. Made on first use:
   * the forwarding path reads `spans` instead.
   */
  get headers(): Buffer[] {
    if (this.views !== null) return this.views;
    const spans = this.spans;
    const source = this.source;
    const views: Buffer[] = new Array<Buffer>(spans.length >> 1);
    for (let i = 0; i < spans.length; i += 2) views[i >> 1] = view(source, spans[i]!, spans[i + 1]!);
    return (this.views = views);
  }
}

/** Where the parser delivers an answer. A false return stops the parser where it is (pause or abort). */
export interface ResponseSink {
  onResponseHead(head: ResponseHead): boolean;
  onResponseBody(chunk: Buffer): boolean;
  /** The answer is complete; called even when the last onResponseBody returned false. */
  onResponseEnd(): void;
}

/** Bytes of extensions one chunk may carry (what Node's HTTP parser allows too). */
export const MAX_CHUNK_EXTENSION_BYTES = 16 * 1024;

/** execute() could not go on: `error` says why. */
export const PARSE_FAILED = -1;
const INCOMPLETE = -2;

const enum State {
  Head,
  Length,
  UntilClose,
  ChunkSizeStart,
  ChunkSize,
  ExtNameStart,
  ExtName,
  ExtValueStart,
  ExtValue,
  ExtQuoted,
  ExtQuotedEscape,
  ExtAfterQuoted,
  ChunkSizeLf,
  ChunkData,
  ChunkDataCr,
  ChunkDataLf,
  TrailerLineStart,
  TrailerName,
  TrailerValue,
  TrailerLf,
  TrailerEndLf,
  Done,
  Failed,
}

const enum Header {
  Pass,
  Drop,
  ContentLength,
  TransferEncoding,
  Connection,
  KeepAlive,
}

const HTTP_1_DOT = [0x48, 0x54, 0x54, 0x50, 0x2f, 0x31, 0x2e]; // "HTTP/1."
/** "HTTP" and "/1" as little-endian DataView reads. */
const HTTP = 0x50545448;
const SLASH_1 = 0x312f;
const CRLFCRLF = Buffer.from('\r\n\r\n', 'latin1');
const MAX_LENGTH = Number.MAX_SAFE_INTEGER;

// Why an answer was refused (UpstreamError messages; constants, so a failure allocates no text).
const BAD_STATUS_LINE = 'invalid status line';
const BAD_VERSION = 'HTTP version other than 1.0 or 1.1';
const BAD_STATUS = 'status code outside 100-599';
const UNEXPECTED_101 = '101 Switching Protocols to a request that asked for no upgrade';
const BARE_CR = 'CR not followed by LF';
const OBS_FOLD = 'obs-fold (a header line starting with whitespace)';
const BAD_NAME = 'invalid header name (empty, a character outside tchar, or whitespace before the colon)';
const BAD_VALUE = 'invalid character in a header value (NUL, CR, LF or another control)';
const HEAD_TOO_LARGE = 'response head larger than maxResponseHeaderBytes';
const TRAILERS_TOO_LARGE = 'trailers larger than maxResponseHeaderBytes';
const DUPLICATE_LENGTH = 'more than one Content-Length';
const BAD_LENGTH = 'invalid Content-Length';
const LENGTH_AND_CHUNKED = 'Content-Length together with Transfer-Encoding';
const BAD_TRANSFER_ENCODING = 'Transfer-Encoding other than a single "chunked"';
const BAD_CHUNK_SIZE = 'invalid chunk size';
const BAD_CHUNK_EXTENSION = 'invalid chunk extension';
const CHUNK_EXTENSION_TOO_LARGE = 'chunk extensions over 16 KiB';
const BAD_CHUNK_END = 'chunk data not followed by CRLF';
const BAD_TRAILER = 'invalid trailer line';

export class ResponseParser {
  /** Why parsing failed (after execute returned PARSE_FAILED). */
  error = '';
  /** After the final head: the connection may carry another request once this answer is complete. */
  keepAlive = false;
  /** After the final head: `Keep-Alive: timeout=N` in seconds, -1 without. */
  keepAliveTimeoutS = -1;
  /** Some byte of this answer (1xx included) arrived. */
  started = false;

  private state = State.Done;
  /** The request was HEAD: the answer has no body whatever its headers say. */
  private noBody = false;
  /** Body bytes left (Length), chunk bytes left (ChunkData), or the chunk size being read. */
  private remaining = 0;
  private extensionBytes = 0;
  private trailerBytes = 0;
  /** A head split over reads is collected here, then parsed from a copy of its own. */
  private partial: Buffer | null = null;
  private partialLength = 0;

  // The head being parsed.
  private status = 0;
  /** Where the head's headers are in `source` (see ResponseHead.spans). */
  private spans: number[] = [];
  private source: Buffer = EMPTY_SOURCE;
  private contentLength = -1;
  private chunked = false;
  private close = false;
  private keepAliveToken = false;
  private named: string[] | null = null;
  /** A DataView of the last buffer parsed from (the connection's read buffer, nearly always): see wordsOf. */
  private wordsData: Buffer = EMPTY_SOURCE;
  private words: DataView = new DataView(EMPTY_SOURCE.buffer, EMPTY_SOURCE.byteOffset, 0);
  /** That buffer's ArrayBuffer and offset, for the body views (Buffer#buffer is a C++ getter). */
  private wordsArrayBuffer: ArrayBuffer = EMPTY_SOURCE.buffer as ArrayBuffer;
  private wordsOffset = 0;

  constructor(
    private readonly sink: ResponseSink,
    private readonly maxHeadBytes: number,
  ) {}

  /** Expects a new answer, to a HEAD request when `noBody`. */
  start(noBody: boolean): void {
    this.state = State.Head;
    this.noBody = noBody;
    this.partialLength = 0;
    this.error = '';
    this.keepAlive = false;
    this.keepAliveTimeoutS = -1;
    this.started = false;
  }

  get complete(): boolean {
    return this.state === State.Done;
  }

  get failed(): boolean {
    return this.state === State.Failed;
  }

  /** The final head was delivered and its body is still being read. */
  get inBody(): boolean {
    return this.state !== State.Head && this.state !== State.Done && this.state !== State.Failed;
  }

  /** Body bytes still expected when the length is known (Content-Length), -1 otherwise. */
  get knownRemaining(): number {
    return this.state === State.Length ? this.remaining : -1;
  }

  /** The body runs until the connection closes. */
  get untilClose(): boolean {
    return this.state === State.UntilClose;
  }

  /**
   * Parses data[offset, end). Returns where it stopped: `end` when every byte was used; less when
   * the sink returned false (continue from there later) or the answer completed (bytes from there
   * on are not part of it); PARSE_FAILED on a violation.
   */
  execute(data: Buffer, offset: number, end: number): number {
    if (offset < end) this.started = true;
    let p = offset;
    while (p < end) {
      switch (this.state) {
        case State.Head: {
          const after = this.readHead(data, p, end);
          if (after === INCOMPLETE) return end;
          if (after < 0) return PARSE_FAILED;
          p = after;
          if (this.state === State.Head) continue; // an interim (1xx) answer
          const state = this.state;
          const head = new ResponseHead(
            this.status,
            this.source,
            this.spans,
            state === State.Done ? 0 : state === State.Length ? this.remaining : -1,
            this.contentLength,
            p < end && (state === State.Length || state === State.UntilClose),
            this.words,
          );
          this.spans = [];
          const go = this.sink.onResponseHead(head);
          if (this.state === State.Done) {
            this.sink.onResponseEnd();
            return p;
          }
          if (!go) return p;
          continue;
        }
        case State.Length: {
          const remaining = this.remaining;
          const available = end - p;
          if (available < remaining) {
            this.remaining = remaining - available;
            this.sink.onResponseBody(this.view(data, p, end));
            return end;
          }
          this.remaining = 0;
          this.state = State.Done;
          this.sink.onResponseBody(this.view(data, p, p + remaining));
          this.sink.onResponseEnd();
          return p + remaining;
        }
        case State.UntilClose:
          this.sink.onResponseBody(this.view(data, p, end));
          return end;
        case State.ChunkData: {
          const remaining = this.remaining;
          const take = end - p < remaining ? end - p : remaining;
          this.remaining = remaining - take;
          if (this.remaining === 0) this.state = State.ChunkDataCr;
          const go = this.sink.onResponseBody(this.view(data, p, p + take));
          p += take;
          if (!go) return p;
          continue;
        }
        case State.Done:
          return p;
        case State.Failed:
          return PARSE_FAILED;
        default: {
          p = this.chunkFraming(data, p, end);
          if (p < 0) return PARSE_FAILED;
          if (this.complete) {
            this.sink.onResponseEnd();
            return p;
          }
        }
      }
    }
    return p;
  }

  /**
   * The connection reached end of stream. True when that completes the answer (a body delimited
   * by the close); false when the answer was cut short.
   */
  endOfStream(): boolean {
    if (this.state !== State.UntilClose) return false;
    this.state = State.Done;
    this.sink.onResponseEnd();
    return true;
  }

  private fail(reason: string): number {
    this.error = reason;
    this.state = State.Failed;
    return PARSE_FAILED;
  }

  // ---- head -------------------------------------------------------------------------------------

  /** Position after the head, INCOMPLETE (every byte was kept), or PARSE_FAILED. */
  private readHead(data: Buffer, p: number, end: number): number {
    if (this.partialLength === 0) {
      const after = this.parseHead(data, p, end);
      if (after !== INCOMPLETE) {
        if (after > 0 && after - p > this.maxHeadBytes) return this.fail(HEAD_TOO_LARGE);
        return after;
      }
      const have = end - p;
      if (have >= this.maxHeadBytes) return this.fail(HEAD_TOO_LARGE);
      this.partial ??= Buffer.allocUnsafe(this.maxHeadBytes);
      data.copy(this.partial, 0, p, end);
      this.partialLength = have;
      return INCOMPLETE;
    }
    // Slow path, a head split over reads: search only the new bytes for its end, parse it once whole.
    const partial = this.partial!;
    const before = this.partialLength;
    const take = Math.min(this.maxHeadBytes - before, end - p);
    data.copy(partial, before, p, p + take);
    this.partialLength = before + take;
    const collected = partial.subarray(0, this.partialLength);
    const found = collected.indexOf(CRLFCRLF, before > 3 ? before - 3 : 0);
    if (found < 0) {
      if (this.partialLength >= this.maxHeadBytes) return this.fail(HEAD_TOO_LARGE);
      return INCOMPLETE;
    }
    const headEnd = found + 4;
    // A copy: the header views handed out must not share the buffer the next answer is collected in.
    const head = Buffer.from(collected.subarray(0, headEnd));
    this.partialLength = 0;
    const after = this.parseHead(head, 0, headEnd);
    if (after < 0) return after === INCOMPLETE ? this.fail(BAD_STATUS_LINE) : after;
    return p + (headEnd - before);
  }

  /**
   * A DataView of `data`, for reading 2 or 4 bytes in one load (the status line, the names classify
   * compares, field values 4 bytes at a time): made once per connection, as every head but a split
   * one is parsed from the connection's read buffer.
   */
  private wordsOf(data: Buffer): DataView {
    if (data !== this.wordsData) {
      this.wordsData = data;
      this.wordsArrayBuffer = data.buffer as ArrayBuffer;
      this.wordsOffset = data.byteOffset;
      this.words = new DataView(this.wordsArrayBuffer, this.wordsOffset, data.length);
    }
    return this.words;
  }

  /** A body view of data[start, end): see View below. Per parser, so per connection, for the read buffer it keeps. */
  private view(data: Buffer, start: number, end: number): Buffer {
    if (data !== this.wordsData) this.wordsOf(data);
    return new View(this.wordsArrayBuffer, this.wordsOffset + start, end - start) as unknown as Buffer;
  }

  /** Status line and header lines from data[start, end). */
  private parseHead(data: Buffer, start: number, end: number): number {
    let p = start;
    // Status line: HTTP/1.x SP 3DIGIT [SP reason-phrase] CRLF
    if (end - p < 13) {
      for (let i = 0; i < HTTP_1_DOT.length && p + i < end; i++) {
        if (data[p + i] !== HTTP_1_DOT[i]) return this.fail(BAD_STATUS_LINE);
      }
      return INCOMPLETE;
    }
    const words = this.wordsOf(data);
    if (words.getUint32(p, true) !== HTTP || words.getUint16(p + 4, true) !== SLASH_1 || data[p + 6] !== 0x2e) return this.fail(BAD_STATUS_LINE);
    const minor = data[p + 7];
    if (minor !== 0x30 && minor !== 0x31) return this.fail(BAD_VERSION);
    if (data[p + 8] !== Byte.SP) return this.fail(BAD_STATUS_LINE);
    const d0 = data[p + 9]! - 0x30;
    const d1 = data[p + 10]! - 0x30;
    const d2 = data[p + 11]! - 0x30;
    if (d0 < 0 || d0 > 9 || d1 < 0 || d1 > 9 || d2 < 0 || d2 > 9) return this.fail(BAD_STATUS_LINE);
    const status = d0 * 100 + d1 * 10 + d2;
    if (status < 100 || status > 599) return this.fail(BAD_STATUS);
    p += 12;
    if (data[p] === Byte.SP) {
      p++;
      p = valueBytesEnd(data, words, p, end);
      if (p >= end) return INCOMPLETE;
    }
    if (data[p] !== Byte.CR) return this.fail(BAD_STATUS_LINE);
    if (p + 1 >= end) return INCOMPLETE;
    if (data[p + 1] !== Byte.LF) return this.fail(BARE_CR);
    p += 2;

    this.status = status;
    this.contentLength = -1;
    this.chunked = false;
    this.close = false;
    this.keepAliveToken = false;
    this.named = null;
    this.keepAliveTimeoutS = -1;
    const spans = this.spans;
    // Empty but after an interim (1xx) answer; setting length is a runtime call.
    if (spans.length !== 0) spans.length = 0;
    this.source = data;
    let sawLength = false;
    let sawTransferEncoding = false;

    for (;;) {
      if (p >= end) return INCOMPLETE;
      const first = data[p];
      if (first === Byte.CR) {
        if (p + 1 >= end) return INCOMPLETE;
        if (data[p + 1] !== Byte.LF) return this.fail(BARE_CR);
        p += 2;
        break;
      }
      const nameStart = p;
      p = tokenBytesEnd(data, words, p, end);
      if (p >= end) return INCOMPLETE;
      if (data[p] !== Byte.COLON || p === nameStart) return this.fail(first === Byte.SP || first === Byte.HTAB ? OBS_FOLD : BAD_NAME);
      const nameEnd = p;
      p++;
      while (p < end && (data[p] === Byte.SP || data[p] === Byte.HTAB)) p++;
      const valueStart = p;
      p = valueBytesEnd(data, words, p, end);
      if (p >= end) return INCOMPLETE;
      let valueEnd = p;
      while (valueEnd > valueStart && (data[valueEnd - 1] === Byte.SP || data[valueEnd - 1] === Byte.HTAB)) valueEnd--;
      if (data[p] !== Byte.CR) return this.fail(BAD_VALUE);
      if (p + 1 >= end) return INCOMPLETE;
      if (data[p + 1] !== Byte.LF) return this.fail(BARE_CR);
      p += 2;

      const length = nameEnd - nameStart;
      switch (mayClassify(first!, length) ? classify(data, words, nameStart, length) : Header.Pass) {
        case Header.Pass:
          spans.push(nameStart, nameEnd, valueStart, valueEnd);
          break;
        case Header.ContentLength: {
          // Even a repeated identical value is refused, as llhttp (Node's parser) does.
          if (sawLength) return this.fail(DUPLICATE_LENGTH);
          sawLength = true;
          const length = parseLength(data, valueStart, valueEnd);
          if (length < 0) return this.fail(BAD_LENGTH);
          this.contentLength = length;
          break;
        }
        case Header.TransferEncoding:
          // A second header would be a second coding ("chunked, chunked" or chunked not last).
          if (sawTransferEncoding || valueEnd - valueStart !== 7 || !equalsLower(data, valueStart, 'chunked')) {
            return this.fail(BAD_TRANSFER_ENCODING);
          }
          sawTransferEncoding = true;
          this.chunked = true;
          break;
        case Header.Connection:
          this.readConnection(data, valueStart, valueEnd);
          break;
        case Header.KeepAlive:
          this.readKeepAlive(data, valueStart, valueEnd);
          break;
        default:
          break;
      }
    }

    if (status < 200) {
      if (status === 101) return this.fail(UNEXPECTED_101);
      // Interim answer: read the next head.
      return p;
    }
    if (sawLength && this.chunked) return this.fail(LENGTH_AND_CHUNKED);
    if (this.named !== null) this.dropConnectionNamed();
    // RFC 9112 6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing; it is read (as
    // chunked) and the connection closed after it, whatever Connection said.
    this.keepAlive = minor === 0x31 ? !this.close : this.keepAliveToken && !this.close && !this.chunked;
    if (this.noBody || status === 204 || status === 304) {
      // A 204/304 that announces a body: a broken upstream may send that body after all, in a later
      // read, after the socket went to the next request, whose answer it would then be taken for.
      // Nothing can prove that no such bytes are coming, so the socket is not reused.
      if ((status === 204 || status === 304) && (this.chunked || this.contentLength > 0)) this.keepAlive = false;
      this.state = State.Done;
    } else if (this.chunked) {
      this.state = State.ChunkSizeStart;
      this.extensionBytes = 0;
      this.trailerBytes = 0;
    } else if (sawLength) {
      this.remaining = this.contentLength;
      this.state = this.contentLength === 0 ? State.Done : State.Length;
    } else {
      this.state = State.UntilClose;
      this.keepAlive = false;
    }
    return p;
  }

  /** Connection: close / keep-alive, and the names of other headers that are hop-by-hop for this answer. */
  private readConnection(data: Buffer, start: number, end: number): void {
    let p = start;
    while (p < end) {
      while (p < end && (data[p] === 0x2c || data[p] === Byte.SP || data[p] === Byte.HTAB)) p++;
      const tokenStart = p;
      let tokenEnd = p;
      while (p < end && data[p] !== 0x2c) {
        if (data[p] !== Byte.SP && data[p] !== Byte.HTAB) tokenEnd = p + 1;
        p++;
      }
      const length = tokenEnd - tokenStart;
      if (length === 0) continue;
      if (length === 5 && equalsLower(data, tokenStart, 'close')) this.close = true;
      else if (length === 10 && equalsLower(data, tokenStart, 'keep-alive')) this.keepAliveToken = true;
      else (this.named ??= []).push(data.toString('latin1', tokenStart, tokenEnd).toLowerCase());
    }
  }

  /** `timeout=N` of a Keep-Alive header. */
  private readKeepAlive(data: Buffer, start: number, end: number): void {
    let p = start;
    while (p < end) {
      while (p < end && (data[p] === 0x2c || data[p] === Byte.SP || data[p] === Byte.HTAB)) p++;
      if (end - p > 8 && equalsLower(data, p, 'timeout=')) {
        let q = p + 8;
        let seconds = 0;
        let digits = 0;
        while (q < end && data[q]! >= 0x30 && data[q]! <= 0x39 && digits < 9) {
          seconds = seconds * 10 + data[q]! - 0x30;
          digits++;
          q++;
        }
        if (digits > 0) this.keepAliveTimeoutS = seconds;
        p = q;
      }
      while (p < end && data[p] !== 0x2c) p++;
    }
  }

  /** Slow path: a Connection header named other headers; they are hop-by-hop too. */
  private dropConnectionNamed(): void {
    const named = this.named!;
    const spans = this.spans;
    const data = this.source;
    let kept = 0;
    for (let i = 0; i < spans.length; i += 4) {
      const nameStart = spans[i]!;
      const nameEnd = spans[i + 1]!;
      if (named.includes(data.toString('latin1', nameStart, nameEnd).toLowerCase())) continue;
      spans[kept] = nameStart;
      spans[kept + 1] = nameEnd;
      spans[kept + 2] = spans[i + 2]!;
      spans[kept + 3] = spans[i + 3]!;
      kept += 4;
    }
    spans.length = kept;
  }

  // ---- chunked framing -------------------------------------------------------------------------

  /** Runs the framing states over data[p, end) until chunk data, the end of the answer, or the end of the bytes. */
  private chunkFraming(data: Buffer, p: number, end: number): number {
    let state = this.state;
    for (; p < end; p++) {
      const c = data[p]!;
      switch (state) {
        case State.ChunkSizeStart: {
          const digit = HEX[c]!;
          if (digit < 0) return this.fail(BAD_CHUNK_SIZE);
          this.remaining = digit;
          state = State.ChunkSize;
          break;
        }
        case State.ChunkSize: {
          const digit = HEX[c]!;
          if (digit >= 0) {
            const size = this.remaining * 16 + digit;
            if (size > MAX_LENGTH) return this.fail(BAD_CHUNK_SIZE);
            this.remaining = size;
          } else if (c === Byte.CR) {
            state = State.ChunkSizeLf;
          } else if (c === 0x3b) {
            this.extensionBytes = 1;
            state = State.ExtNameStart;
          } else {
            return this.fail(BAD_CHUNK_SIZE);
          }
          break;
        }
        case State.ChunkSizeLf:
          if (c !== Byte.LF) return this.fail(BARE_CR);
          if (this.remaining === 0) {
            state = State.TrailerLineStart;
          } else {
            this.state = State.ChunkData;
            return p + 1;
          }
          break;
        case State.ExtNameStart:
        case State.ExtName:
        case State.ExtValueStart:
        case State.ExtValue:
        case State.ExtQuoted:
        case State.ExtQuotedEscape:
        case State.ExtAfterQuoted:
          if (++this.extensionBytes > MAX_CHUNK_EXTENSION_BYTES) return this.fail(CHUNK_EXTENSION_TOO_LARGE);
          state = extensionStep(state, c);
          if (state === State.Failed) return this.fail(BAD_CHUNK_EXTENSION);
          break;
        case State.ChunkDataCr:
          if (c !== Byte.CR) return this.fail(BAD_CHUNK_END);
          state = State.ChunkDataLf;
          break;
        case State.ChunkDataLf:
          if (c !== Byte.LF) return this.fail(BAD_CHUNK_END);
          state = State.ChunkSizeStart;
          break;
        case State.TrailerLineStart:
          if (++this.trailerBytes > this.maxHeadBytes) return this.fail(TRAILERS_TOO_LARGE);
          if (c === Byte.CR) state = State.TrailerEndLf;
          else if (c === Byte.SP || c === Byte.HTAB) return this.fail(OBS_FOLD);
          else if (TOKEN[c] === 1) state = State.TrailerName;
          else return this.fail(BAD_TRAILER);
          break;
        case State.TrailerName:
          if (++this.trailerBytes > this.maxHeadBytes) return this.fail(TRAILERS_TOO_LARGE);
          if (c === Byte.COLON) state = State.TrailerValue;
          else if (TOKEN[c] !== 1) return this.fail(BAD_TRAILER);
          break;
        case State.TrailerValue:
          if (++this.trailerBytes > this.maxHeadBytes) return this.fail(TRAILERS_TOO_LARGE);
          if (c === Byte.CR) state = State.TrailerLf;
          else if (VALUE[c] === ValueByte.Invalid) return this.fail(BAD_VALUE);
          break;
        case State.TrailerLf:
          if (c !== Byte.LF) return this.fail(BARE_CR);
          state = State.TrailerLineStart;
          break;
        case State.TrailerEndLf:
          if (c !== Byte.LF) return this.fail(BARE_CR);
          this.state = State.Done;
          return p + 1;
        default:
          return this.fail(BAD_CHUNK_SIZE);
      }
    }
    this.state = state;
    return p;
  }
}

/**
 * chunk-ext = *( ";" token [ "=" ( token / quoted-string ) ] ), no whitespace (as llhttp requires);
 * the ";" that opens the first extension was read by the ChunkSize state.
 */
function extensionStep(state: State, c: number): State {
  switch (state) {
    case State.ExtNameStart:
      return TOKEN[c] === 1 ? State.ExtName : State.Failed;
    case State.ExtName:
      if (TOKEN[c] === 1) return State.ExtName;
      if (c === 0x3d) return State.ExtValueStart;
      return afterExtension(c);
    case State.ExtValueStart:
      if (c === 0x22) return State.ExtQuoted;
      return TOKEN[c] === 1 ? State.ExtValue : State.Failed;
    case State.ExtValue:
      return TOKEN[c] === 1 ? State.ExtValue : afterExtension(c);
    case State.ExtQuoted:
      if (c === 0x22) return State.ExtAfterQuoted;
      if (c === 0x5c) return State.ExtQuotedEscape;
      return QDTEXT[c] === 1 ? State.ExtQuoted : State.Failed;
    case State.ExtQuotedEscape:
      return VALUE[c] !== ValueByte.Invalid ? State.ExtQuoted : State.Failed;
    default:
      return afterExtension(c);
  }
}

function afterExtension(c: number): State {
  if (c === 0x3b) return State.ExtNameStart;
  if (c === Byte.CR) return State.ChunkSizeLf;
  return State.Failed;
}

/**
 * A Buffer for data[start, end), sharing its memory. Buffer.subarray and Buffer.from(arrayBuffer, ...)
 * cost about twice a plain typed-array construction, and a head makes two per header; this class is
 * a Uint8Array whose prototype chain holds Buffer.prototype, so its instances are Buffers (instanceof,
 * Buffer.isBuffer, toString, ...) made at typed-array cost.
 */
class View extends Uint8Array {}
Object.setPrototypeOf(View.prototype, Buffer.prototype);

/** The parser's source before its first head. */
const EMPTY_SOURCE = Buffer.alloc(0);

// For ResponseHead.headers (observers; the parser's body views use ResponseParser.view). Buffer#buffer
// is a C++ builtin, slower than the view it feeds: the source's ArrayBuffer and offset are kept.
let lastData: Buffer | null = null;
let lastArrayBuffer: ArrayBuffer | null = null;
let lastByteOffset = 0;

function view(data: Buffer, start: number, end: number): Buffer {
  if (data !== lastData) {
    lastData = data;
    lastArrayBuffer = data.buffer as ArrayBuffer;
    lastByteOffset = data.byteOffset;
  }
  return new View(lastArrayBuffer!, lastByteOffset + start, end - start) as unknown as Buffer;
}

/**
 * Where the header name starting at p ends: the first byte that is not a tchar, or end. Four bytes
 * at a time while all of them are letters or '-' (nearly every name), then byte by byte through the
 * word that has another byte: letters and '-' by compares, the rest by the TOKEN table.
 */
function tokenBytesEnd(data: Buffer, words: DataView, p: number, end: number): number {
  for (;;) {
    while (end - p >= 4) {
      const w = words.getUint32(p, true);
      // Exact mask (0x80 per byte) of the bytes that are '-': the zero bytes of w ^ "----".
      const d = w ^ 0x2d2d2d2d;
      const dash = ~((((d & 0x7f7f7f7f) + 0x7f7f7f7f) | 0) | d | 0x7f7f7f7f);
      // Lower-cased, '-' turned into 'm' (+0x40): then every byte must be in 'a'..'z'. (All int32.)
      const y = ((w | 0x20202020) + ((dash >>> 1) & 0x40404040)) | 0;
      if ((y & 0x80808080) !== 0 || (((y + 0x1f1f1f1f) | 0) & ~((y + 0x05050505) | 0) & 0x80808080) !== (0x80808080 | 0)) break;
      p += 4;
    }
    // Byte by byte through the word that stopped the loop (or the last 1-3 bytes), then words again.
    const stop = end - p > 4 ? p + 4 : end;
    for (; p < stop; p++) {
      const c = data[p]!;
      if (((c | 0x20) - 0x61) >>> 0 >= 26 && c !== 0x2d && TOKEN[c] !== 1) return p;
    }
    if (p >= end) return p;
  }
}

/**
 * Where the field value (or reason phrase) starting at p ends: the first byte that is not VCHAR,
 * obs-text, SP or HTAB (VALUE in http-chars.ts), or end. Four bytes at a time while none of them is
 * below 0x20 or DEL (the "has less than" / "has zero" bit tricks on a little-endian word), then
 * byte by byte through the word that has one (an HTAB: words again after it): callgrind, 20 -> about
 * 6 instructions a byte.
 */
function valueBytesEnd(data: Buffer, words: DataView, p: number, end: number): number {
  for (;;) {
    while (end - p >= 4) {
      const w = words.getUint32(p, true);
      const del = w ^ 0x7f7f7f7f;
      if ((((w - 0x20202020) & ~w) | ((del - 0x01010101) & ~del)) & 0x80808080) break;
      p += 4;
    }
    const stop = end - p > 4 ? p + 4 : end;
    for (; p < stop; p++) {
      const c = data[p]!;
      if (c < 0x20 ? c !== Byte.HTAB : c === 0x7f) return p;
    }
    if (p >= end) return p;
  }
}

/** Digits only, at most 2^53 - 1; -1 otherwise. */
function parseLength(data: Buffer, start: number, end: number): number {
  if (start === end) return -1;
  let n = 0;
  for (let i = start; i < end; i++) {
    const digit = data[i]! - 0x30;
    if (digit < 0 || digit > 9) return -1;
    n = n * 10 + digit;
    if (n > MAX_LENGTH) return -1;
  }
  return n;
}

/**
 * Whether a name with this first byte and length can be one classify() tells apart from Pass: the
 * first letters and lengths of its cases, kept in step with them. Small enough to be inlined, so most
 * names (content-type, date, ...) take no call at all.
 */
function mayClassify(first: number, length: number): boolean {
  switch (first | 0x20) {
    case 0x63: // c: connection, content-length
      return length === 10 || length === 14;
    case 0x6b: // k: keep-alive
      return length === 10;
    case 0x70: // p: proxy-*
      return length > 6;
    case 0x74: // t: te, trailer, transfer-encoding
      return length === 2 || length === 7 || length === 17;
    case 0x75: // u: upgrade
      return length === 7;
    default:
      return false;
  }
}

/**
 * What to do with a header, from its name (a valid token) at data[start, start + length): by its
 * first letter and length, so that most names (content-type, date, ...) are decided without a
 * comparison, then by comparing 4 bytes at a time, lower-cased (a token's bytes | 0x20 are lower-case
 * only for letters; '-' has that bit already), the last word overlapping the one before.
 */
function classify(data: Buffer, words: DataView, start: number, length: number): Header {
  switch (data[start]! | 0x20) {
    case 0x63: // c
      if (length === 10) {
        return lower4(words, start) === CONN && lower4(words, start + 4) === ECTI && lower4(words, start + 6) === TION ? Header.Connection : Header.Pass;
      }
      if (length !== 14) return Header.Pass;
      return lower4(words, start) === CONT && lower4(words, start + 4) === ENT_ && lower4(words, start + 8) === LENG && lower4(words, start + 10) === NGTH
        ? Header.ContentLength
        : Header.Pass;
    case 0x6b: // k
      return length === 10 && lower4(words, start) === KEEP && lower4(words, start + 4) === _ALI && lower4(words, start + 6) === LIVE ? Header.KeepAlive : Header.Pass;
    case 0x70: // p: Proxy-Connection, Proxy-Authenticate, ...: hop-by-hop
      return length > 6 && lower4(words, start) === PROX && lower4(words, start + 2) === OXY_ ? Header.Drop : Header.Pass;
    case 0x74: // t
      if (length === 2) return (data[start + 1]! | 0x20) === 0x65 ? Header.Drop : Header.Pass;
      if (length === 7) return lower4(words, start) === TRAI && lower4(words, start + 3) === ILER ? Header.Drop : Header.Pass;
      return length === 17 &&
        lower4(words, start) === TRAN &&
        lower4(words, start + 4) === SFER &&
        lower4(words, start + 8) === _ENC &&
        lower4(words, start + 12) === ODIN &&
        lower4(words, start + 13) === DING
        ? Header.TransferEncoding
        : Header.Pass;
    case 0x75: // u
      return length === 7 && lower4(words, start) === UPGR && lower4(words, start + 3) === RADE ? Header.Drop : Header.Pass;
    default:
      return Header.Pass;
  }
}

/** 4 bytes of a token at `at`, lower-cased, as a little-endian int32 (see classify). */
function lower4(words: DataView, at: number): number {
  return words.getUint32(at, true) | 0x20202020;
}

/** Four lower-case characters as lower4 reads them. */
function word(text: string): number {
  return (text.charCodeAt(0) | (text.charCodeAt(1) << 8) | (text.charCodeAt(2) << 16) | (text.charCodeAt(3) << 24)) | 0x20202020;
}
const CONN = word('conn');
const ECTI = word('ecti');
const TION = word('tion');
const CONT = word('cont');
const ENT_ = word('ent-');
const LENG = word('leng');
const NGTH = word('ngth');
const KEEP = word('keep');
const _ALI = word('-ali');
const LIVE = word('live');
const PROX = word('prox');
const OXY_ = word('oxy-');
const TRAI = word('trai');
const ILER = word('iler');
const TRAN = word('tran');
const SFER = word('sfer');
const _ENC = word('-enc');
const ODIN = word('odin');
const DING = word('ding');
const UPGR = word('upgr');
const RADE = word('rade');

/** Lower-case ASCII `name` equals data[start, start + name.length) case-insensitively ('-' compares as itself). */
function equalsLower(data: Buffer, start: number, name: string): boolean {
  for (let i = 0; i < name.length; i++) {
    if ((data[start + i]! | 0x20) !== name.charCodeAt(i)) return false;
  }
  return true;
}
