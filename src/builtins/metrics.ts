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
/**
 * Prometheus 3 adds `escaping=<scheme>` to each format it accepts (how names outside the legacy
 * character set are to be escaped). Every name here is in that set, so the text is the same under any
 * scheme: the text format is offered with each one, or a default Prometheus 3 scrape would only match
 * its trailing `*\/*` and get JSON.
 */
const ESCAPINGS = ['allow-utf-8', 'underscores', 'dots', 'values'];
const OFFERED = ['application/json', 'text/plain', 'text/plain;version=0.0.4', ...ESCAPINGS.flatMap((e) => [`text/plain;version=0.0.4;escaping=${e}`, `text/plain;escaping=${e}`])];

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
