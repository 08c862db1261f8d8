/**
 * The client's side of one request, as the lifecycle's phases see it: a writer for the answer and a
 * source for the request body. Only the transport adapters know the server library behind them
 * (src/lifecycle/uws/uws-client.ts for uWebSockets.js); a second transport implements these two.
 */
import type { ResponseHead } from '../upstream/response-parser.js';
import type { LocalReply } from './answer.js';

/** Whoever streams an upstream answer through the writer: told when the client takes more, and when it is over. */
export interface ResponseStream {
  /** The client took what was pending: the upstream may be read again. */
  onClientWritable(): void;
  /** The answer is over for the client: `completed` when it got all of it. Called once. */
  onResponseEnded(completed: boolean): void;
}

export interface ResponseWriter {
  /** Nothing more may be written: the answer is complete, or the connection is closed or closing. */
  readonly ended: boolean;
  /** Some of a streamed answer (its head) is on the wire: a failure now can only cut the connection. */
  readonly headSent: boolean;
  /** A streamed answer has begun (its head is queued or sent). */
  readonly streaming: boolean;
  /**
   * Writes a whole answer of the gateway's own and ends the response (a queued, unsent upstream head
   * is dropped). `close` asks for the connection to close after it. Sets ctx.status and ctx.bytesOut.
   */
  reply(reply: LocalReply, close: boolean): void;
  /**
   * Begins a streamed upstream answer. Returns true when it is headers-only (HEAD, 204, 304) and
   * already complete; else body() and finish() follow.
   */
  startStream(stream: ResponseStream, status: number, head: ResponseHead): boolean;
  /** A body chunk of the streamed answer; false when the client is behind (stop reading until onClientWritable). */
  body(chunk: Buffer): boolean;
  /** The streamed answer is complete. */
  finish(): void;
  /** Closes the connection: the client must see a broken answer, not a complete one. */
  cut(): void;
}

/** What the transport tells about the client while a request is in flight. */
export interface ClientEvents {
  /** The connection closed (the client left, or it was cut). */
  onClientAborted(): void;
  /** A request body chunk; only valid during the call. */
  onClientData(chunk: ArrayBuffer, isLast: boolean): void;
}

export interface RequestBodySource {
  /** The request body has bytes still to come. */
  readonly receiving: boolean;
  /** From now on `events` hears of the client (once per request, before the handler returns). */
  watch(events: ClientEvents): void;
  /** Stop reading the body (TCP pushes back); resume() reads on. */
  pause(): void;
  resume(): void;
}

/** Both halves: what the lifecycle is handed per request. */
export type ClientSide = ResponseWriter & RequestBodySource;
