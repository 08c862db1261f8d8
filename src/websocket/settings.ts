/**
 * The `websocket` config section: WebSocket upgrades proxied to the routed upstream (see
 * docs/websocket.md). The schema is part of the config schema (src/config/schema.ts); a config built in
 * code may leave the section out and gets these defaults.
 */

import { timerDuration } from '../config/durations.js';

const MIB = 1024 * 1024;

export interface WebSocketConfig {
  /** Upgrade requests are proxied; false: they are ordinary GETs (the upstream never sees Upgrade). */
  enabled: boolean;
  /** Largest message either side may send; a larger one closes both sides with 1009. */
  maxPayloadBytes: number;
  /** A connection with no message or ping either way for this long is closed with 1001 on both sides. */
  idleTimeoutMs: number;
  /** permessage-deflate with the client (the upstream leg is never compressed). */
  compression: boolean;
}

export const WEBSOCKET_DEFAULTS: Readonly<WebSocketConfig> = Object.freeze({
  enabled: true,
  maxPayloadBytes: 16 * MIB,
  idleTimeoutMs: 120_000,
  compression: false,
});

/** Largest maxPayloadBytes: the native server keeps a message of up to twice this in memory (see relay.ts). */
export const MAX_PAYLOAD_LIMIT = 512 * MIB;

export const webSocketSchema = {
  type: 'object',
  description: 'Proxying WebSocket upgrades (GET with Upgrade: websocket) to the routed upstream.',
  additionalProperties: false,
  default: {},
  properties: {
    enabled: {
      type: 'boolean',
      default: WEBSOCKET_DEFAULTS.enabled,
      description: 'Proxy WebSocket upgrades; false answers them as ordinary GET requests.',
    },
    maxPayloadBytes: {
      type: 'integer',
      minimum: 1,
      maximum: MAX_PAYLOAD_LIMIT,
      default: WEBSOCKET_DEFAULTS.maxPayloadBytes,
      description: 'Largest message either side may send; a larger one closes both sides with 1009.',
    },
    idleTimeoutMs: timerDuration(
      'A connection with no message or ping either way for this long is closed with 1001 on both sides.',
      WEBSOCKET_DEFAULTS.idleTimeoutMs,
      1000,
    ),
    compression: {
      type: 'boolean',
      default: WEBSOCKET_DEFAULTS.compression,
      description: 'Negotiate permessage-deflate with the client (the upstream leg is not compressed).',
    },
  },
} as const;

export function webSocketSettings(section: Partial<WebSocketConfig> | undefined): WebSocketConfig {
  return { ...WEBSOCKET_DEFAULTS, ...section };
}
