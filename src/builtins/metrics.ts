import { preferredMediaType } from '../http/accept-media-types.js';

export type MetricsFormat = 'json' | 'prometheus';

export type MetricsChoice =
  /** `byAccept`: the Accept header chose, so the answer carries `Vary: Accept`. */
  | { kind: 'format'; format: MetricsFormat; byAccept: boolean }
  /** The client accepts neither format (406). */
  | { kind: 'not-acceptable' }
  /** `?format=` names something else, or is given twice (400). */
  | { kind: 'bad-format' };

// Prometheus scrapers ask for `text/plain;version=0.0.4`, which only matches an offer with that parameter.
const OFFERED = ['application/json', 'text/plain', 'text/plain;version=0.0.4'];

/** `?format=prometheus|json` wins; otherwise the Accept header decides (no Accept: JSON). */
export function metricsFormat(query: string, accept: string | undefined): MetricsChoice {
  const formats = query ? new URLSearchParams(query).getAll('format') : [];
  if (formats.length > 1) return { kind: 'bad-format' };
  if (formats.length === 1) {
    const format = formats[0];
    return format === 'json' || format === 'prometheus' ? { kind: 'format', format, byAccept: false } : { kind: 'bad-format' };
  }
  if (!accept) return { kind: 'format', format: 'json', byAccept: true };
  const chosen = preferredMediaType(accept, OFFERED);
  if (chosen === undefined) return { kind: 'not-acceptable' };
  return { kind: 'format', format: chosen === 'application/json' ? 'json' : 'prometheus', byAccept: true };
}
