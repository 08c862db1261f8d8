import { leLabel } from './buckets.js';
import type { MetricsReport, SeriesReport } from './report.js';
import { DURATION_BOUNDS_S } from '../websocket/metrics.js';

/** Prometheus text exposition format 0.0.4 of a /metrics report. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

type Labels = ReadonlyArray<readonly [string, string]>;

/** One labelled histogram, ready to render: cumulative counts at each bound, then the total (+Inf). */
export interface HistogramPart {
  count: number;
  sumSeconds: number;
  cumulative: number[];
}

/** The histograms of the exposition (see MetricsAggregator.histograms). */
export interface HistogramFamilies {
  /** The `le` bounds, whole microseconds, ascending (see buckets.ts). */
  edges: readonly number[];
  /** gateway_request_duration_seconds: method, route, status_class. */
  requests: Array<{ labels: Labels; part: HistogramPart }>;
  /** gateway_upstream_duration_seconds: upstream. */
  upstreams: Array<{ labels: Labels; part: HistogramPart }>;
}

/** `gateway_build_info`'s labels. */
export interface BuildLabels {
  version: string;
  node: string;
  uws: string;
}

class Exposition {
  private readonly lines: string[] = [];

  family(name: string, type: 'counter' | 'gauge' | 'histogram', help: string): void {
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
 * The lines of one series, kept while its report object is unchanged: the aggregator hands out the
 * same SeriesReport (and HistogramPart) until a delta changes that series, and a table of thousands
 * of endpoints is mostly quiet between two renders (5,000 series took 85-140 ms to render in full,
 * which was every 250 ms while requests flowed when the report was pushed on a timer).
 */
interface CachedLines {
  /** What the lines were rendered for: the family and labels (one report object, one series). */
  key: string;
  lines: string[];
}
const cachedLines = new WeakMap<object, CachedLines>();

function cached(source: object, key: string, render: (out: Exposition) => void): string[] {
  const hit = cachedLines.get(source);
  if (hit !== undefined && hit.key === key) return hit.lines;
  const scratch = new Exposition();
  render(scratch);
  const lines = scratch.take();
  cachedLines.set(source, { key, lines });
  return lines;
}

const NO_HISTOGRAMS: HistogramFamilies = { edges: [], requests: [], upstreams: [] };

export function toPrometheus(report: MetricsReport, histograms: HistogramFamilies = NO_HISTOGRAMS, build?: BuildLabels): string {
  const out = new Exposition();
  if (build !== undefined) {
    out.family('gateway_build_info', 'gauge', 'Always 1; the labels say which gateway, Node.js and uWebSockets.js build runs.');
    out.sample('gateway_build_info', [['version', build.version], ['node', build.node], ['uws', build.uws]], 1);
  }
  out.family('gateway_uptime_seconds', 'gauge', 'Seconds since the gateway started.');
  out.sample('gateway_uptime_seconds', [], report.uptimeSeconds);
  out.family('gateway_workers', 'gauge', 'Worker processes serving requests.');
  out.sample('gateway_workers', [], report.workers);
  out.family('gateway_in_flight_requests', 'gauge', 'Requests being served now, all workers.');
  out.sample('gateway_in_flight_requests', [], report.requests.inFlight);

  out.family('gateway_requests_total', 'counter', 'Requests completed (routed, built-in and refused alike), by status code.');
  for (const [status, count] of Object.entries(report.requests.byStatus)) {
    out.sample('gateway_requests_total', [['status', status]], count);
  }
  histogramFamily(out, 'gateway_request_duration_seconds', 'Latency of routed requests, arrival until the answer was handed to the socket, by endpoint and status class.', histograms.edges, histograms.requests);
  statusCounts(out, 'gateway_route_requests_total', 'Routed requests completed, by endpoint (method and route template) and status code.', report.endpoints, endpointLabels);
  statusCounts(out, 'gateway_upstream_requests_total', 'Requests forwarded, by the upstream host tried last and the status the client got (499: the client left; 502, 504: the gateway answered for a failed upstream).', report.upstreams, (key) => [['upstream', key]]);
  histogramFamily(out, 'gateway_upstream_duration_seconds', 'Upstream call time: request handed to the upstream client until the answer ended or the call failed (the access log\'s upstreamMs).', histograms.edges, histograms.upstreams);
  breakerStates(out, report.breakers);
  retries(out, report.retries);
  middlewareEvents(out, report.middleware);
  listenerEvents(out, report.listeners);
  accessLogDrops(out, report.accessLog);
  tracingSpans(out, report.tracing);
  storeStates(out, report.kvStores);
  upstreamFailures(out, report.upstreamFailures);
  reloadStatus(out, report.lastReload);
  tableVersion(out, report.tableVersion);
  workerRestarts(out, report.workerRestarts);
  webSockets(out, report.websocket);
  return out.text();
}

/** "GET /users/{id}" as method and route labels. */
function endpointLabels(key: string): Labels {
  const space = key.indexOf(' ');
  return space < 0 ? [['method', ''], ['route', key]] : [['method', key.slice(0, space)], ['route', key.slice(space + 1)]];
}

function statusCounts(out: Exposition, name: string, help: string, series: Record<string, SeriesReport>, labelsOf: (key: string) => Labels): void {
  const entries = Object.entries(series);
  if (entries.length === 0) return;
  out.family(name, 'counter', help);
  for (const [key, s] of entries) {
    out.append(
      cached(s, `${name} ${key}`, (scratch) => {
        const labels = labelsOf(key);
        for (const [status, count] of Object.entries(s.byStatus)) scratch.sample(name, [...labels, ['status', status]], count);
      }),
    );
  }
}

function histogramFamily(out: Exposition, name: string, help: string, edges: readonly number[], series: HistogramFamilies['requests']): void {
  if (series.length === 0) return;
  out.family(name, 'histogram', help);
  const les = edges.map(leLabel);
  for (const { labels, part } of series) {
    out.append(
      cached(part, `${name} ${les.join()} ${labels.map((l) => l[1]).join('\u0000')}`, (scratch) => {
        for (let i = 0; i < les.length; i++) scratch.sample(`${name}_bucket`, [...labels, ['le', les[i]!]], part.cumulative[i]!);
        scratch.sample(`${name}_bucket`, [...labels, ['le', '+Inf']], part.count);
        scratch.sample(`${name}_sum`, labels, part.sumSeconds);
        scratch.sample(`${name}_count`, labels, part.count);
      }),
    );
  }
}

/** camelCase (the JSON report's names) as snake_case (Prometheus names and label values). */
export function snakeCase(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`).replace(/[^a-zA-Z0-9_]/g, '_');
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
    rows.push([[['upstream', upstream], ['method', ''], ['route', '']], host]);
    const endpoints = (host as { endpoints?: unknown }).endpoints;
    if (typeof endpoints !== 'object' || endpoints === null) continue;
    for (const [endpoint, circuit] of Object.entries(endpoints as Record<string, unknown>)) {
      if (isCircuitLike(circuit)) rows.push([[['upstream', upstream], ...endpointLabels(endpoint)], circuit]);
    }
  }
  if (rows.length === 0) return;
  out.family('gateway_circuit_breaker_open', 'gauge', '1 when a breaker is open or half-open; method and route "" is the host breaker.');
  for (const [labels, circuit] of rows) out.sample('gateway_circuit_breaker_open', labels, circuit.state === 'closed' ? 0 : 1);
  out.family('gateway_circuit_breaker_failures', 'gauge', 'Consecutive failures counted by a breaker, summed over workers.');
  for (const [labels, circuit] of rows) out.sample('gateway_circuit_breaker_failures', labels, circuit.failures);
}

function isCircuitLike(value: unknown): value is CircuitLike {
  return typeof value === 'object' && value !== null && typeof (value as CircuitLike).state === 'string' && typeof (value as CircuitLike).failures === 'number';
}

function numberEntries(counts: unknown): Array<[string, number]> {
  if (typeof counts !== 'object' || counts === null) return [];
  return Object.entries(counts as Record<string, unknown>).filter((e): e is [string, number] => typeof e[1] === 'number');
}

/** Requests sent to a second host of their endpoint after the first failed, by why. */
function retries(out: Exposition, counts: unknown): void {
  const entries = numberEntries(counts);
  if (entries.length === 0) return;
  out.family(
    'gateway_upstream_retries_total',
    'counter',
    'Requests sent again, by reason: to another host of their endpoint (after_connect_failure, after_no_answer), or to the same host on a fresh connection after its kept-alive one closed before any answer (stale_connection).',
  );
  for (const [reason, count] of entries) out.sample('gateway_upstream_retries_total', [['reason', snakeCase(reason)]], count);
}

type Tree = Record<string, unknown>;

function isTree(value: unknown): value is Tree {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A response cache's lookups: one of these per request it sees, shown as one family by result. */
const CACHE_RESULTS: Readonly<Record<string, string>> = { hits: 'hit', misses: 'miss', stale: 'stale', bypass: 'bypass' };

/** What a middleware event counter means, for its family's HELP (any other event gets a generic one). */
const MIDDLEWARE_EVENTS: Readonly<Record<string, string>> = {
  admitted: 'Requests a middleware let through.',
  slaMisses: 'Middleware decisions that took longer than the middleware\'s slaMs (the request went on without it).',
  errors: 'Middleware decisions that failed with an error.',
  storeErrors: 'Failed calls of a middleware to its key-value store.',
  evictions: 'Responses a cache evicted to stay within its size.',
  waitTimeouts: 'Requests that waited for another request\'s cache fill longer than lockTimeoutMs (with a kvStores store, slaMs) and went upstream themselves.',
};

/**
 * `middleware.<id>.*` counters (src/middleware/pipeline.ts and each type): answers by outcome and
 * status; a cache's lookups by result and its stored bytes; every other event as its own family
 * (`gateway_middleware_<event>_total`), so no family mixes figures of different meaning.
 */
function middlewareEvents(out: Exposition, middleware: unknown): void {
  if (!isTree(middleware)) return;
  const responses: Array<[Labels, number]> = [];
  const lookups: Array<[Labels, number]> = [];
  const bytes: Array<[Labels, number]> = [];
  /** By event name: (middleware id, count) rows. */
  const events = new Map<string, Array<[string, number]>>();
  for (const [id, counts] of Object.entries(middleware)) {
    if (!isTree(counts)) continue;
    for (const [name, value] of Object.entries(counts)) {
      if (typeof value === 'number') {
        if (name === 'bytesStored') bytes.push([[['middleware', id]], value]);
        else if (name in CACHE_RESULTS) lookups.push([[['middleware', id], ['result', CACHE_RESULTS[name]!]], value]);
        else {
          if (!events.has(name)) events.set(name, []);
          events.get(name)!.push([id, value]);
        }
      } else if (isTree(value)) {
        for (const [status, count] of Object.entries(value)) {
          if (typeof count === 'number') responses.push([[['middleware', id], ['outcome', snakeCase(name)], ['status', status]], count]);
        }
      }
    }
  }
  if (responses.length > 0) {
    out.family('gateway_middleware_answers_total', 'counter', 'Requests a middleware answered itself, by outcome (rejected: a refusal such as a rate limit\'s 429; answered: from cache) and status.');
    for (const [labels, value] of responses) out.sample('gateway_middleware_answers_total', labels, value);
  }
  if (lookups.length > 0) {
    out.family('gateway_cache_lookups_total', 'counter', 'Requests a response cache looked up, by result (hit, miss, stale, bypass).');
    for (const [labels, value] of lookups) out.sample('gateway_cache_lookups_total', labels, value);
  }
  if (bytes.length > 0) {
    out.family('gateway_cache_stored_bytes', 'gauge', 'Bytes a response cache holds, summed over workers.');
    for (const [labels, value] of bytes) out.sample('gateway_cache_stored_bytes', labels, value);
  }
  for (const [event, rows] of events) {
    const family = `gateway_middleware_${snakeCase(event)}_total`;
    out.family(family, 'counter', MIDDLEWARE_EVENTS[event] ?? `Middleware events counted as ${event}.`);
    for (const [id, value] of rows) out.sample(family, [['middleware', id]], value);
  }
}

/** `listeners.<id>.*` counters (alternateUpstream: sent, matched, mismatched, errors, dropped, ...), a family each. */
function listenerEvents(out: Exposition, listeners: unknown): void {
  if (!isTree(listeners)) return;
  const families = new Map<string, Array<[Labels, number]>>();
  for (const [id, counts] of Object.entries(listeners)) {
    if (!isTree(counts)) continue;
    for (const [name, value] of Object.entries(counts)) {
      if (typeof value !== 'number') continue;
      const family = `gateway_listener_${snakeCase(name)}_total`;
      if (!families.has(family)) families.set(family, []);
      families.get(family)!.push([[['listener', id]], value]);
    }
  }
  for (const [family, rows] of families) {
    out.family(family, 'counter', `Listener events (${family.slice('gateway_listener_'.length, -'_total'.length)}), e.g. shadow traffic sent, matched, mismatched.`);
    for (const [labels, value] of rows) out.sample(family, labels, value);
  }
}

/** The `accessLog.droppedLines` counter: access-log lines that were not written. */
function accessLogDrops(out: Exposition, accessLog: unknown): void {
  if (!isTree(accessLog) || typeof accessLog.droppedLines !== 'number') return;
  out.family('gateway_access_log_dropped_lines_total', 'counter', 'Access-log lines not written: dropped while writing failed (a full disk) or too much was waiting, or lost with a failed write.');
  out.sample('gateway_access_log_dropped_lines_total', [], accessLog.droppedLines);
}

/** The `tracing.spansExported` and `tracing.spansDropped` counters of span export (0 from the start when it is configured). */
function tracingSpans(out: Exposition, tracing: unknown): void {
  if (!isTree(tracing)) return;
  if (typeof tracing.spansExported === 'number') {
    out.family('gateway_tracing_spans_exported_total', 'counter', 'Spans the collector accepted.');
    out.sample('gateway_tracing_spans_exported_total', [], tracing.spansExported);
  }
  if (typeof tracing.spansDropped === 'number') {
    out.family('gateway_tracing_spans_dropped_total', 'counter', 'Spans not exported: the export queue was full, or the export failed (collector down, refusing or too slow).');
    out.sample('gateway_tracing_spans_dropped_total', [], tracing.spansDropped);
  }
}

const STORE_COUNTERS: ReadonlyArray<[string, string]> = [
  ['commands', 'Commands sent to a key-value store, summed over workers.'],
  ['probes', 'Of those, the store\'s own probes while it was down or failing.'],
  ['errors', 'Store commands that failed.'],
  ['errorReplies', 'Store commands Redis answered with an error reply (READONLY, OOM, ...); counted in errors too.'],
  ['timeouts', 'Store commands that timed out.'],
  ['failedFast', 'Store commands refused at once because the store\'s breaker was open.'],
  ['breakerOpens', 'Times the store\'s breaker opened.'],
];

/** The `kvStores` extra: each store's state (up when every worker has it ready) and its counters, a family each. */
function storeStates(out: Exposition, stores: unknown): void {
  if (!isTree(stores)) return;
  const entries = Object.entries(stores).filter((e): e is [string, Tree] => isTree(e[1]));
  if (entries.length === 0) return;
  out.family('gateway_store_up', 'gauge', '1 when the store is ready on every worker that reports it (0 when down, failing or connecting).');
  for (const [name, store] of entries) out.sample('gateway_store_up', [['store', name]], store.state === 'ready' ? 1 : 0);
  for (const [counter, help] of STORE_COUNTERS) {
    const rows = entries.filter(([, store]) => typeof store[counter] === 'number');
    if (rows.length === 0) continue;
    const family = `gateway_store_${snakeCase(counter)}_total`;
    out.family(family, 'counter', help);
    for (const [name, store] of rows) out.sample(family, [['store', name]], store[counter] as number);
  }
}

/** Failed upstream calls by kind (the data plane's upstreamFailures.* counters): connect, TLS, timeouts, resets, invalid answers, full queue. */
function upstreamFailures(out: Exposition, counts: unknown): void {
  const entries = numberEntries(counts);
  if (entries.length === 0) return;
  out.family('gateway_upstream_failures_total', 'counter', 'Upstream calls that failed, by reason (connect_failures, tls_failures, timeouts, resets, bad_responses: answers the strict parser refused, queue_full).');
  for (const [reason, count] of entries) out.sample('gateway_upstream_failures_total', [['reason', snakeCase(reason)]], count);
}

/**
 * Exposes a `lastReload` extra ({ version, at, ok, applied }), named the way Prometheus names its own
 * reload metrics, so the usual "last reload failed" alert rules carry over.
 */
function reloadStatus(out: Exposition, reload: unknown): void {
  if (typeof reload !== 'object' || reload === null) return;
  const { ok, applied, at } = reload as Record<string, unknown>;
  if (typeof ok !== 'boolean' || typeof at !== 'string') return;
  out.family('gateway_config_last_reload_successful', 'gauge', '1 when the last SIGHUP reload applied cleanly, 0 when it was refused or had problems.');
  out.sample('gateway_config_last_reload_successful', [], ok ? 1 : 0);
  out.family('gateway_config_last_reload_applied', 'gauge', '1 when the last reload put a new table in service (possibly with problems).');
  out.sample('gateway_config_last_reload_applied', [], applied === true ? 1 : 0);
  out.family('gateway_config_last_reload_timestamp_seconds', 'gauge', 'When the last reload finished, Unix time.');
  out.sample('gateway_config_last_reload_timestamp_seconds', [], Date.parse(at) / 1000);
}

/** The `tableVersion` extra: the routing table in service, from the first publish on. */
function tableVersion(out: Exposition, version: unknown): void {
  if (typeof version !== 'number') return;
  out.family('gateway_routing_table_version', 'gauge', 'Version of the routing table in service.');
  out.sample('gateway_routing_table_version', [], version);
}

/** The `workerRestarts` extra: workers that exited while the gateway was not shutting down (0 from the start). */
function workerRestarts(out: Exposition, restarts: unknown): void {
  out.family('gateway_worker_restarts_total', 'counter', 'Workers that exited (crashed or were killed) while the gateway was not shutting down; each is replaced.');
  out.sample('gateway_worker_restarts_total', [], typeof restarts === 'number' ? restarts : 0);
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
