/**
 * What WebSocket proxying counts, as dotted counter names (src/metrics/counters.ts): the primary sums
 * them into /metrics under `websocket` and renders them for Prometheus (src/metrics/prometheus.ts).
 * `websocket.opened` minus `websocket.closed` of the live workers is the open-connections gauge.
 */
import type { Counters } from '../metrics/counters.js';

/** How an upgrade ended: the client's upgrade completed, or the HTTP answer it got instead. */
export type UpgradeOutcome =
  /** 101: the connection is relayed. */
  | 'accepted'
  /** A middleware answered (401, 429, 503, ...) or no host could take it (503). */
  | 'rejected'
  /** The upstream answered something other than 101 (passed on to the client). */
  | 'refused'
  /** The upstream could not be reached, broke off or did not answer in time (502, 504). */
  | 'failed'
  /** The client left before the upstream answered. */
  | 'aborted';

export const OPENED = 'websocket.opened';
export const CLOSED = 'websocket.closed';
export const MESSAGES_TO_UPSTREAM = 'websocket.messages.clientToUpstream';
export const MESSAGES_TO_CLIENT = 'websocket.messages.upstreamToClient';
export const BYTES_TO_UPSTREAM = 'websocket.bytes.clientToUpstream';
export const BYTES_TO_CLIENT = 'websocket.bytes.upstreamToClient';
export const DURATION_COUNT = 'websocket.durationSeconds.count';
export const DURATION_SUM = 'websocket.durationSeconds.sum';

/** Upper bounds (seconds) of the connection-duration histogram: whole seconds, so a bound is a key of its own in the dotted names. */
export const DURATION_BOUNDS_S: readonly number[] = [1, 5, 15, 60, 300, 900, 3600, 14400, 86400];
const BUCKET_NAMES = [...DURATION_BOUNDS_S.map((bound) => `websocket.durationSeconds.le.${bound}`), 'websocket.durationSeconds.le.+Inf'];
const OUTCOME_NAMES: Record<UpgradeOutcome, string> = {
  accepted: 'websocket.upgrades.accepted',
  rejected: 'websocket.upgrades.rejected',
  refused: 'websocket.upgrades.refused',
  failed: 'websocket.upgrades.failed',
  aborted: 'websocket.upgrades.aborted',
};

/** Counts of one worker; the data plane's Counters ship them with every metrics delta. */
export class WebSocketMetrics {
  constructor(private readonly counters: Counters | null) {}

  upgrade(outcome: UpgradeOutcome): void {
    this.counters?.add(OUTCOME_NAMES[outcome]);
    if (outcome === 'accepted') this.counters?.add(OPENED);
  }

  /** Messages and bytes relayed since the last call (a connection reports while it lives, and at its end). */
  flow(messagesToUpstream: number, bytesToUpstream: number, messagesToClient: number, bytesToClient: number): void {
    const counters = this.counters;
    if (counters === null) return;
    if (messagesToUpstream > 0) {
      counters.add(MESSAGES_TO_UPSTREAM, messagesToUpstream);
      counters.add(BYTES_TO_UPSTREAM, bytesToUpstream);
    }
    if (messagesToClient > 0) {
      counters.add(MESSAGES_TO_CLIENT, messagesToClient);
      counters.add(BYTES_TO_CLIENT, bytesToClient);
    }
  }

  /** A relayed connection ended after `seconds`. */
  closed(seconds: number): void {
    const counters = this.counters;
    if (counters === null) return;
    counters.add(CLOSED);
    counters.add(DURATION_COUNT);
    counters.add(DURATION_SUM, seconds);
    let bucket = 0;
    while (bucket < DURATION_BOUNDS_S.length && seconds > DURATION_BOUNDS_S[bucket]!) bucket++;
    counters.add(BUCKET_NAMES[bucket]!);
  }
}
