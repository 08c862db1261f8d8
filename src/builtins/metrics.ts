import { preferredMediaType } from '../http/accept-media-types.js';

export type MetricsFormat = 'json' | 'prometheus';

// Prometheus scrapers ask for `text/plain;version=0.0.4`, which only matches an offer with that parameter.
const OFFERED = ['application/json', 'text/plain', 'text/plain;version=0.0.4'];

/**
 * `?format=prometheus|json` wins; otherwise the Accept header decides (no Accept: JSON). Null when
 * the client accepts neither.
 */
export function metricsFormat(query: string, accept: string | undefined): MetricsFormat | null {
  const format = query ? new URLSearchParams(query).get('format') : null;
  if (format === 'prometheus') return 'prometheus';
  if (format === 'json') return 'json';
  if (!accept) return 'json';
  const chosen = preferredMediaType(accept, OFFERED);
  if (chosen === undefined) return null;
  return chosen === 'application/json' ? 'json' : 'prometheus';
}
