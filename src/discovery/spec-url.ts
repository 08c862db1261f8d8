import type { UpstreamConfig } from '../config/types.js';

/** Where an upstream's doc is fetched (its own module: the spec builder needs it, not the HTTP client). */
export function specUrl(upstream: UpstreamConfig): string {
  return upstream.serviceLocation.replace(/\/+$/, '') + (upstream.specPath ?? '/spec');
}
