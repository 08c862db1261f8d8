import { Readable } from 'node:stream';

/** Told when the upstream side wants more of the request body. */
export interface BodySource {
  onBodyWanted(): void;
}

/** Enough to keep undici's socket busy without holding much of a large upload. */
const HIGH_WATER_MARK = 256 * 1024;

/**
 * The request body on its way from uWS to undici. uWS pushes chunks in (and is paused when push
 * says the buffer is full); undici reading below the high-water mark resumes it through `_read`.
 */
export class RequestBodyStream extends Readable {
  constructor(private readonly source: BodySource) {
    super({ highWaterMark: HIGH_WATER_MARK });
  }

  override _read(): void {
    this.source.onBodyWanted();
  }
}
