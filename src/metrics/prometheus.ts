import type { LatencySummaryMs, MetricsReport, SeriesReport } from './report.js';
import { DURATION_BOUNDS_S } from '../websocket/metrics.js';

/** Prometheus text exposition format 0.0.4 of a /metrics report. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

const QUANTILES: ReadonlyArray<[string, keyof LatencySummaryMs]> = [
  ['0.5', 'p50'],
  ['0.9', 'p90'],
  ['0.99', 'p99'],
  ['0.999', 'p999'],
];

type Labels = ReadonlyArray<readonly [string, string]>;

class Exposition {
  private readonly lines: string[] = [];

  family(name: string, type: 'counter' | 'gauge' | 'summary' | 'histogram', help: string): void {
    this.lines.push(`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} ${type}`);
  }

  sample(name: string, labels: Labels, value: number): void {
    const labelText = labels.length === 0 ? '' : `{${labels.map(([k, v]) => `${k}="${escapeLabelValue(v)}"`).join(',')}}`;
    this.lines.push(`${name}${labelText} ${formatValue(value)}`);
  }

  /** Lines rendered elsewhere (a series' cached lines). */
  append(lines: readonly string[]): void {
    for (let i = 0; i < lines.length; i++) this.lines.push(lines[i]!);
  }

  text(): string {
    return this.lines.join('\n') + '\n';
  }

  /** The lines so far (an Exposition used as a scratch pad for one series). */
  take(): string[] {
    return this.lines.splice(0);
  }
}

/**
 * The lines of one upstream or endpoint series, kept while its report object is unchanged: the
 * aggregator hands out the same SeriesReport until a delta changes that series, and a table of
 * thousands of endpoints is mostly quiet between two renders (5,000 series took 85-140 ms to
 * render in full, every 250 ms while requests flow).
 */
interface SeriesLines {
  /** The family and the label value the lines were rendered for (one report, one series). */
  family: string;
  key: string;
  counter: string[];
  summary: string[];
}
const seriesLines = new WeakMap<SeriesReport, SeriesLines>();

export function toPrometheus(report: MetricsReport): string {
  const out = new Exposition();
  out.family('gateway_uptime_seconds', 'gauge', 'Seconds since the gateway started.');
  out.sample('gateway_uptime_seconds', [], report.uptimeSeconds);
  out.family('gateway_workers', 'gauge', 'Worker processes serving requests.');
  out.sample('gateway_workers', [], report.workers);
  out.family('gateway_in_flight_requests', 'gauge', 'Requests being served now, all workers.');
  out.sample('gateway_in_flight_requests', [], report.requests.inFlight);

  out.family('gateway_requests_total', 'counter', 'Requests completed, by status code.');
  for (const [status, count] of Object.entries(report.requests.byStatus)) {
    out.sample('gateway_requests_total', [['status', status]], count);
  }
  out.family('gateway_request_duration_seconds', 'summary', 'Request latency, all requests.');
  summary(out, 'gateway_request_duration_seconds', [], report.latencyMs);

  perSeries(out, 'upstream', 'upstream', 'Requests completed per upstream host', report.upstreams);
  perSeries(out, 'endpoint', 'endpoint', 'Requests completed per endpoint (method and template)', report.endpoints);
  breakerStates(out, report.breakers);
  retries(out, report.retries);
  middlewareEvents(out, report.middleware);
  listenerEvents(out, report.listeners);
  storeStates(out, report.kvStores);
  upstreamFailures(out, report.upstreamFailures);
  reloadStatus(out, report.lastReload);
  webSockets(out, report.websocket);
  return out.text();
}

function perSeries(
  out: Exposition,
  prefix: string,
  label: string,
  help: string,
  series: Record<string, SeriesReport>,
): void {
  const entries = Object.entries(series);
  if (entries.length === 0) return;
  const counter = `gateway_${prefix}_requests_total`;
  const duration = `gateway_${prefix}_request_duration_seconds`;
  const lines = entries.map(([key, s]) => linesOf(counter, duration, label, key, s));
  out.family(counter, 'counter', `${help}, by status code.`);
  for (const l of lines) out.append(l.counter);
  out.family(duration, 'summary', `Request latency per ${label}.`);
  for (const l of lines) out.append(l.summary);
}

function linesOf(counter: string, duration: string, label: string, key: string, s: SeriesReport): SeriesLines {
  const cached = seriesLines.get(s);
  if (cached !== undefined && cached.family === counter && cached.key === key) return cached;
  const scratch = new Exposition();
  for (const [status, count] of Object.entries(s.byStatus)) scratch.sample(counter, [[label, key], ['status', status]], count);
  const counterLines = scratch.take();
  summary(scratch, duration, [[label, key]], s.latencyMs);
  const lines = { family: counter, key, counter: counterLines, summary: scratch.take() };
  seriesLines.set(s, lines);
  return lines;
}

function summary(out: Exposition, name: string, labels: Labels, latency: LatencySummaryMs): void {
  for (const [quantile, field] of QUANTILES) {
    // An empty summary has no quantiles; Prometheus client libraries expose NaN for them.
    out.sample(name, [...labels, ['quantile', quantile]], latency.count === 0 ? NaN : latency[field] / 1000);
  }
  out.sample(`${name}_sum`, labels, latency.sum / 1000);
  out.sample(`${name}_count`, labels, latency.count);
}

interface CircuitLike {
  state: string;
  failures: number;
}

/** Exposes the `breakers` extra (per host, with its open host+endpoint breakers; see breaker-hub.ts). */
function breakerStates(out: Exposition, breakers: unknown): void {
  if (typeof breakers !== 'object' || breakers === null) return;
  const rows: Array<[Labels, CircuitLike]> = [];
  for (const [upstream, host] of Object.entries(breakers as Record<string, unknown>)) {
    if (!isCircuitLike(host)) continue;
    rows.push([[['upstream', upstream], ['endpoint', '']], host]);
    const endpoints = (host as { endpoints?: unknown }).endpoints;
    if (typeof endpoints !== 'object' || endpoints === null) continue;
    for (const [endpoint, circuit] of Object.entries(endpoints as Record<string, unknown>)) {
      if (isCircuitLike(circuit)) rows.push([[['upstream', upstream], ['endpoint', endpoint]], circuit]);
    }
  }
  if (rows.length === 0) return;
  out.family('gateway_circuit_breaker_open', 'gauge', '1 when a breaker is open or half-open; endpoint "" is the host breaker.');
  for (const [labels, circuit] of rows) out.sample('gateway_circuit_breaker_open', labels, circuit.state === 'closed' ? 0 : 1);
  out.family('gateway_circuit_breaker_failures', 'gauge', 'Consecutive failures counted by a breaker, summed over workers.');
  for (const [labels, circuit] of rows) out.sample('gateway_circuit_breaker_failures', labels, circuit.failures);
}

function isCircuitLike(value: unknown): value is CircuitLike {
  return typeof value === 'object' && value !== null && typeof (value as CircuitLike).state === 'string' && typeof (value as CircuitLike).failures === 'number';
}

/** Requests sent to a second host of their endpoint after the first failed, by why. */
function retries(out: Exposition, counts: unknown): void {
  if (typeof counts !== 'object' || counts === null) return;
  const entries = Object.entries(counts as Record<string, unknown>).filter((e): e is [string, number] => typeof e[1] === 'number');
  if (entries.length === 0) return;
  out.family('gateway_upstream_retries_total', 'counter', 'Requests retried on another host of their endpoint, by reason.');
  for (const [reason, count] of entries) out.sample('gateway_upstream_retries_total', [['reason', reason]], count);
}

type Tree = Record<string, unknown>;

function isTree(value: unknown): value is Tree {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Counters kept as gauges (they go down too): the response cache's bytes. */
const GAUGE_EVENTS = new Set(['bytesStored']);

/**
 * `middleware.<id>.*` counters (src/middleware/pipeline.ts and each type): decisions by outcome and
 * status, and every other event by name; a cache's bytes as a gauge.
 */
function middlewareEvents(out: Exposition, middleware: unknown): void {
  if (!isTree(middleware)) return;
  const responses: Array<[Labels, number]> = [];
  const events: Array<[Labels, number]> = [];
  const gauges: Array<[Labels, number]> = [];
  for (const [id, counts] of Object.entries(middleware)) {
    if (!isTree(counts)) continue;
    for (const [name, value] of Object.entries(counts)) {
      if (typeof value === 'number') {
        (GAUGE_EVENTS.has(name) ? gauges : events).push([[['middleware', id], ['event', name]], value]);
      } else if (isTree(value)) {
        for (const [status, count] of Object.entries(value)) {
          if (typeof count === 'number') responses.push([[['middleware', id], ['outcome', name], ['status', status]], count]);
        }
      }
    }
  }
  if (responses.length > 0) {
    out.family('gateway_middleware_answers_total', 'counter', 'Requests a middleware answered itself, by outcome (rejected, answered from cache) and status.');
    for (const [labels, value] of responses) out.sample('gateway_middleware_answers_total', labels, value);
  }
  if (events.length > 0) {
    out.family('gateway_middleware_events_total', 'counter', 'Middleware events: admitted, slaMisses, errors, storeErrors, cache hits/misses/stale/bypass/evictions, ...');
    for (const [labels, value] of events) out.sample('gateway_middleware_events_total', labels, value);
  }
  if (gauges.length > 0) {
    out.family('gateway_middleware_cache_bytes', 'gauge', 'Bytes a response cache holds, summed over workers (its event label says which figure).');
    for (const [labels, value] of gauges) out.sample('gateway_middleware_cache_bytes', labels, value);
  }
}

/** `listeners.<id>.*` counters (alternateUpstream: sent, matched, mismatched, errors, dropped, ...). */
function listenerEvents(out: Exposition, listeners: unknown): void {
  if (!isTree(listeners)) return;
  const rows: Array<[Labels, number]> = [];
  for (const [id, counts] of Object.entries(listeners)) {
    if (!isTree(counts)) continue;
    for (const [name, value] of Object.entries(counts)) if (typeof value === 'number') rows.push([[['listener', id], ['event', name]], value]);
  }
  if (rows.length === 0) return;
  out.family('gateway_listener_events_total', 'counter', 'Listener events by name (shadow traffic: sent, matched, mismatched, errors, dropped, ...).');
  for (const [labels, value] of rows) out.sample('gateway_listener_events_total', labels, value);
}

/** The `kvStores` extra: each store's state (up when every worker has it ready) and its counters. */
function storeStates(out: Exposition, stores: unknown): void {
  if (!isTree(stores)) return;
  const entries = Object.entries(stores).filter((e): e is [string, Tree] => isTree(e[1]));
  if (entries.length === 0) return;
  out.family('gateway_store_up', 'gauge', '1 when the store is ready on every worker that reports it.');
  for (const [name, store] of entries) out.sample('gateway_store_up', [['store', name]], store.state === 'ready' ? 1 : 0);
  const counters = ['commands', 'errors', 'timeouts', 'failedFast', 'breakerOpens'];
  const rows = entries.flatMap(([name, store]) =>
    counters.filter((c) => typeof store[c] === 'number').map((c): [Labels, number] => [[['store', name], ['event', c]], store[c] as number]),
  );
  if (rows.length === 0) return;
  out.family('gateway_store_events_total', 'counter', 'Store commands and their failures, summed over workers.');
  for (const [labels, value] of rows) out.sample('gateway_store_events_total', labels, value);
}

/** Failed upstream calls by kind (the data plane's upstreamFailures.* counters): connect, TLS, timeouts, resets, invalid answers, full queue. */
function upstreamFailures(out: Exposition, counts: unknown): void {
  if (typeof counts !== 'object' || counts === null) return;
  const entries = Object.entries(counts as Record<string, unknown>).filter((e): e is [string, number] => typeof e[1] === 'number');
  if (entries.length === 0) return;
  out.family('gateway_upstream_failures_total', 'counter', 'Upstream calls that failed, by reason (badResponses: answers the strict parser refused).');
  for (const [reason, count] of entries) out.sample('gateway_upstream_failures_total', [['reason', reason]], count);
}

/**
 * Exposes a `lastReload` extra ({ version, at, ok, applied }), named the way Prometheus names its own
 * reload metrics, so the usual "last reload failed" alert rules carry over.
 */
function reloadStatus(out: Exposition, reload: unknown): void {
  if (typeof reload !== 'object' || reload === null) return;
  const { ok, applied, at, version } = reload as Record<string, unknown>;
  if (typeof ok !== 'boolean' || typeof at !== 'string') return;
  out.family('gateway_config_last_reload_successful', 'gauge', '1 when the last SIGHUP reload applied cleanly, 0 when it was refused or had problems.');
  out.sample('gateway_config_last_reload_successful', [], ok ? 1 : 0);
  out.family('gateway_config_last_reload_applied', 'gauge', '1 when the last reload put a new table in service (possibly with problems).');
  out.sample('gateway_config_last_reload_applied', [], applied === true ? 1 : 0);
  out.family('gateway_config_last_reload_timestamp_seconds', 'gauge', 'When the last reload finished, Unix time.');
  out.sample('gateway_config_last_reload_timestamp_seconds', [], Date.parse(at) / 1000);
  if (typeof version === 'number') {
    out.family('gateway_routing_table_version', 'gauge', 'Version of the routing table in service.');
    out.sample('gateway_routing_table_version', [], version);
  }
}

/** Direction label values of the `websocket.messages` and `websocket.bytes` counters. */
const WEBSOCKET_DIRECTIONS: ReadonlyArray<[string, string]> = [
  ['clientToUpstream', 'client_to_upstream'],
  ['upstreamToClient', 'upstream_to_client'],
];

/** The `websocket` counters (src/websocket/metrics.ts) and the open-connections gauge. */
function webSockets(out: Exposition, ws: unknown): void {
  if (!isTree(ws)) return;
  out.family('gateway_websocket_connections', 'gauge', 'WebSocket connections relayed now, all workers.');
  out.sample('gateway_websocket_connections', [], typeof ws.connections === 'number' ? ws.connections : 0);
  if (isTree(ws.upgrades)) {
    out.family('gateway_websocket_upgrades_total', 'counter', 'WebSocket upgrade requests by outcome: accepted (101), rejected (a middleware or the gateway answered), refused (the upstream answered non-101), failed (502/504), aborted (the client left).');
    for (const [outcome, count] of Object.entries(ws.upgrades)) if (typeof count === 'number') out.sample('gateway_websocket_upgrades_total', [['outcome', outcome]], count);
  }
  for (const [key, family, help] of [
    ['messages', 'gateway_websocket_messages_total', 'WebSocket messages relayed, by direction.'],
    ['bytes', 'gateway_websocket_bytes_total', 'WebSocket message payload bytes relayed, by direction.'],
  ] as const) {
    const counts = isTree(ws[key]) ? ws[key] : {};
    out.family(family, 'counter', help);
    for (const [field, label] of WEBSOCKET_DIRECTIONS) out.sample(family, [['direction', label]], typeof counts[field] === 'number' ? counts[field] : 0);
  }
  const duration = isTree(ws.durationSeconds) ? ws.durationSeconds : null;
  if (duration === null) return;
  const name = 'gateway_websocket_duration_seconds';
  out.family(name, 'histogram', 'How long relayed WebSocket connections lasted.');
  const buckets = isTree(duration.le) ? duration.le : {};
  let cumulative = 0;
  for (const bound of DURATION_BOUNDS_S) {
    const n = buckets[String(bound)];
    if (typeof n === 'number') cumulative += n;
    out.sample(`${name}_bucket`, [['le', String(bound)]], cumulative);
  }
  const count = typeof duration.count === 'number' ? duration.count : 0;
  out.sample(`${name}_bucket`, [['le', '+Inf']], count);
  out.sample(`${name}_sum`, [], typeof duration.sum === 'number' ? duration.sum : 0);
  out.sample(`${name}_count`, [], count);
}

function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}
