/**
 * A copy of one request and of the answer its client got, kept for listeners that sampled it (the
 * alternateUpstream listener replays and compares). Only sampled requests are captured; each side is
 * kept up to `maxBytes` (past that it is marked truncated and no more is kept).
 */
import type { ContentAnswer } from './answer.js';
// Type-only circle with listener.ts and context.ts: these contracts describe one another (a capture is
// kept for the listeners that sampled a request; a listener is handed the context and its capture).
import type { RequestListener } from './listener.js';
import type { ResponseObserver } from './observer.js';

export class Capture implements ResponseObserver {
  readonly requestBody: Buffer[] = [];
  requestBytes = 0;
  requestTruncated = false;
  status = 0;
  /** The upstream answer's end-to-end headers (flat, names lower-case). */
  headers: readonly string[] = [];
  readonly responseBody: Buffer[] = [];
  responseBytes = 0;
  responseTruncated = false;
  /** The answer reached the client whole (and came from the upstream, not the gateway). */
  complete = false;

  /** Kept of each side at most: `maxBytes`, or less when no sampled listener needs that much. */
  readonly maxBytes: number;

  constructor(
    readonly listeners: readonly RequestListener[],
    maxBytes: number,
  ) {
    let needed = 0;
    for (const listener of listeners) needed = Math.max(needed, listener.maxCaptureBytes ?? maxBytes);
    this.maxBytes = Math.min(maxBytes, needed);
  }

  /** A request body chunk the data plane already owns (kept by reference). */
  addRequestChunk(chunk: Buffer): void {
    if (this.requestTruncated) return;
    if (this.requestBytes + chunk.length > this.maxBytes) {
      this.requestTruncated = true;
      return;
    }
    this.requestBody.push(chunk);
    this.requestBytes += chunk.length;
  }

  onHead(status: number, headers: readonly string[]): void {
    this.status = status;
    this.headers = headers;
  }

  onData(chunk: Uint8Array): void {
    if (this.responseTruncated) return;
    if (this.responseBytes + chunk.byteLength > this.maxBytes) {
      this.responseTruncated = true;
      return;
    }
    this.responseBody.push(Buffer.from(chunk));
    this.responseBytes += chunk.byteLength;
  }

  onEnd(): void {
    this.complete = true;
  }

  onAbort(): void {
    this.complete = false;
  }

  substitute(): ContentAnswer | null {
    return null;
  }
}
