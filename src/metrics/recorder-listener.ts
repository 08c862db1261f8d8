import type { RequestListener } from '../exchange/listener.js';
import type { MetricsRecorder } from './recorder.js';

/**
 * Feeds /metrics from every finished request while `enabled()` (metrics.enabled, which a reload may
 * change); an endpoint cannot switch it off.
 */
export function recorderListener(recorder: MetricsRecorder, enabled: () => boolean, onRecorded: () => void): RequestListener {
  return {
    id: 'metrics',
    always: true,
    done(ctx) {
      if (!enabled()) return;
      const route = ctx.route;
      if (route === null) {
        recorder.requestFinished(null, ctx.upstream, ctx.status, ctx.latencyMs * 1000, ctx.upstreamMs * 1000);
      } else {
        // Keyed by route id: no "METHOD template" string built per request.
        recorder.routeFinished(route.id, ctx.method, route.template, ctx.upstream, ctx.status, ctx.latencyMs * 1000, ctx.upstreamMs * 1000);
      }
      onRecorded();
    },
  };
}
