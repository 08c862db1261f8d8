/**
 * The trace a request belongs to, kept on its RequestContext: ids decided when the request arrives,
 * and, for a sampled request only, the timestamps its spans are built from once it is over.
 */
export class RequestTrace {
  /** The gateway's span in the trace (the server span). */
  readonly spanId: string;
  /** The span of the call to the upstream: the parent id the upstream sees in its traceparent. */
  readonly upstreamSpanId: string;
  /** The caller's span when a valid traceparent came in; '' when the gateway started the trace. */
  readonly parentId: string;
  /** Spans are exported for this request (parent-based ratio sampling). */
  readonly sampled: boolean;
  /** performance.now() when the middleware began and finished deciding (0: none ran). Sampled requests only. */
  middlewareStartedAt = 0;
  /** The caller's tracestate as passed upstream ('' when none); the exported spans carry it. */
  traceState = '';
  middlewareEndedAt = 0;

  constructor(
    readonly traceId: string,
    spanId: string,
    upstreamSpanId: string,
    parentId: string,
    sampled: boolean,
  ) {
    this.spanId = spanId;
    this.upstreamSpanId = upstreamSpanId;
    this.parentId = parentId;
    this.sampled = sampled;
  }
}
