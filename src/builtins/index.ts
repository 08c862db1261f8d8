import type { HostSpec } from '../cluster/compile-task.js';
import type { GatewayConfig } from '../config/types.js';
import { HostSets, type HostedUpstream } from '../edge/host-sets.js';
import { hostValueProblem } from '../edge/host-value.js';
import { dropTrailingSlash } from '../http/normalize-path.js';
import { PROBLEM_CONTENT_TYPE, problemBody } from '../http/problem-json.js';
import { PROMETHEUS_CONTENT_TYPE } from '../metrics/prometheus.js';
import { metricsFormat, type MetricsFormat } from './metrics.js';

export interface BuiltinResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

export type BuiltinHeaders = Readonly<Record<string, string | undefined>>;

type Paths = GatewayConfig['paths'];

interface Rendered {
  status: number;
  contentType: string;
  body: Buffer;
  /** The request headers that chose this answer (`Vary`). */
  vary?: string;
}

interface SpecDocs {
  swagger2: Buffer;
  openapi3: Buffer;
}

const JSON_TYPE = 'application/json; charset=utf-8';

/** The current metrics report in one format, or null when it could not be had. */
export type MetricsSource = (format: MetricsFormat) => Promise<string | null>;

function metricsAnswer(format: MetricsFormat, body: Buffer, byAccept: boolean): Rendered {
  const rendered: Rendered = { status: 200, contentType: format === 'json' ? JSON_TYPE : PROMETHEUS_CONTENT_TYPE, body };
  if (byAccept) rendered.vary = 'Accept';
  return rendered;
}

function problem(status: number, detail: string): Rendered {
  return { status, contentType: PROBLEM_CONTENT_TYPE, body: Buffer.from(problemBody(status, detail)) };
}

/**
 * The worker's answers to /healthcheck, /metrics and /spec, all rendered by the primary so that every
 * worker gives the same answer. The health report and the spec are pushed here as they change, and a
 * request for them costs no IPC round trip; the metrics are asked for when a request comes
 * (setMetricsSource: one round trip to the primary, which renders them on demand), since they change
 * with every request and are large with many endpoints.
 */
export class Builtins {
  private paths: Paths;
  private metricsEnabled: boolean;
  /** An admin listener serves /metrics and /spec: the public hook answers them 404. */
  private adminListener: boolean;
  /** A placeholder until setHealth: a cluster worker binds its port only once it has been given a report. */
  private health: Rendered = { status: 503, contentType: JSON_TYPE, body: Buffer.from('{}') };
  /** Fixed reports (setMetrics), answered when there is no source to ask. */
  private metricsJson: Buffer = Buffer.from('{}');
  private metricsText: Buffer = Buffer.from('');
  /** Where the current report is asked for (the primary); null: the fixed reports. */
  private metricsSource: MetricsSource | null = null;
  private spec: Buffer = Buffer.from('{}');
  private specOpenApi3: Buffer = Buffer.from('{}');
  /** The documents of each set of upstreams a host can get; null when no upstream lists hosts. */
  private hostSpecs: HostSets<SpecDocs> | null = null;
  private readonly extraHeaders: Record<string, string>;

  constructor(config: Pick<GatewayConfig, 'paths' | 'admin'> & { metrics: Pick<GatewayConfig['metrics'], 'enabled'> }, options: { workerHeader?: string } = {}) {
    this.paths = this.normalizePaths(config.paths);
    this.metricsEnabled = config.metrics.enabled;
    this.adminListener = config.admin !== undefined;
    this.extraHeaders = options.workerHeader ? { 'x-gateway-worker': options.workerHeader } : {};
  }

  configure(config: Pick<GatewayConfig, 'paths' | 'admin'> & { metrics: Pick<GatewayConfig['metrics'], 'enabled'> }): void {
    this.paths = this.normalizePaths(config.paths);
    this.metricsEnabled = config.metrics.enabled;
    this.adminListener = config.admin !== undefined;
  }

  setHealth(status: number, body: string): void {
    this.health = { status, contentType: JSON_TYPE, body: Buffer.from(body) };
  }

  /** Fixed reports to answer with (a data plane outside the cluster). */
  setMetrics(json: string, prometheus: string): void {
    this.metricsJson = Buffer.from(json);
    this.metricsText = Buffer.from(prometheus);
  }

  /** Each /metrics request asks `source` for the report (a cluster worker: the primary). */
  setMetricsSource(source: MetricsSource): void {
    this.metricsSource = source;
  }

  setSpec(swagger2: string, openapi3: string, hosts?: { upstreams: readonly HostedUpstream[]; sets: readonly HostSpec[] }): void {
    this.spec = Buffer.from(swagger2);
    this.specOpenApi3 = Buffer.from(openapi3);
    this.hostSpecs = null;
    if (hosts !== undefined) {
      const byKey = new Map(hosts.sets.map((set) => [set.key, set]));
      this.hostSpecs = HostSets.build(hosts.upstreams, ({ key }) => {
        const set = byKey.get(key);
        return set === undefined ? null : { swagger2: Buffer.from(set.swagger2), openapi3: Buffer.from(set.openapi3) };
      });
    }
  }

  /**
   * The data plane's hook: a response for a built-in path (a Promise of one for the metrics asked of a
   * source), or null to route normally. With an admin listener, /metrics and /spec are 404 here (the
   * health check stays, for load balancers).
   */
  readonly handle = (method: string, path: string, query: string, headers: BuiltinHeaders): BuiltinResponse | Promise<BuiltinResponse> | null => {
    const builtin = this.builtinFor(path);
    if (builtin === null) return null;
    if (this.adminListener && builtin !== 'healthcheck') {
      const rendered = problem(404, 'served on the admin listener only');
      return { status: 404, headers: { 'cache-control': 'no-store', 'content-type': rendered.contentType, ...this.extraHeaders }, body: rendered.body };
    }
    return this.answer(builtin, method, path, query, headers);
  };

  /** The admin listener's hook (`path` normalized, as the public port's): every built-in; null (404) for anything else. */
  readonly handleAdmin = (method: string, path: string, query: string, headers: BuiltinHeaders): BuiltinResponse | Promise<BuiltinResponse> | null => {
    const builtin = this.builtinAt(dropTrailingSlash(path));
    return builtin === null ? null : this.answer(builtin, method, path, query, headers);
  };

  private answer(builtin: 'healthcheck' | 'metrics' | 'spec', method: string, path: string, query: string, headers: BuiltinHeaders): BuiltinResponse | Promise<BuiltinResponse> {
    let rendered: Rendered | Promise<Rendered>;
    if (method === 'GET' || method === 'HEAD') rendered = this.render(builtin, query, headers);
    else if (method === 'OPTIONS') rendered = { status: 200, contentType: '', body: Buffer.alloc(0) };
    else rendered = problem(405, `${method} is not allowed on ${path}; use GET`);
    return rendered instanceof Promise ? rendered.then((later) => this.respond(later, method)) : this.respond(rendered, method);
  }

  private respond(rendered: Rendered, method: string): BuiltinResponse {
    const responseHeaders: Record<string, string> = { 'cache-control': 'no-store', ...this.extraHeaders };
    if (rendered.contentType) responseHeaders['content-type'] = rendered.contentType;
    if (rendered.vary !== undefined) responseHeaders.vary = rendered.vary;
    if (rendered.status === 405 || method === 'OPTIONS') responseHeaders.allow = 'GET, HEAD, OPTIONS';
    return { status: rendered.status, headers: responseHeaders, body: rendered.body };
  };

  /** The built-in a normalized path reaches, whatever the method (the public hook answers it, if only 404), or null. */
  builtinFor(path: string): 'healthcheck' | 'metrics' | 'spec' | null {
    return this.builtinAt(dropTrailingSlash(path));
  }

  private builtinAt(path: string): 'healthcheck' | 'metrics' | 'spec' | null {
    if (path === this.paths.healthcheck) return 'healthcheck';
    if (path === this.paths.spec) return 'spec';
    if (path === this.paths.metrics && this.metricsEnabled) return 'metrics';
    return null;
  }

  private render(builtin: 'healthcheck' | 'metrics' | 'spec', query: string, headers: BuiltinHeaders): Rendered | Promise<Rendered> {
    if (builtin === 'healthcheck') return this.health;
    if (builtin === 'spec') return query === '' ? { status: 200, contentType: JSON_TYPE, body: this.spec } : this.renderSpec(new URLSearchParams(query));
    return this.renderMetrics(query, headers);
  }

  /** `?format=openapi3`; `?host=` narrows the document to the upstreams a request with that Host routes among. */
  private renderSpec(params: URLSearchParams): Rendered {
    const formats = params.getAll('format');
    if (formats.length > 1 || (formats.length === 1 && formats[0] !== 'openapi3' && formats[0] !== 'swagger2')) {
      return problem(400, 'format must be given once, as swagger2 (the default) or openapi3');
    }
    const openapi3 = formats[0] === 'openapi3';
    const hosts = params.getAll('host');
    if (hosts.length === 0) return { status: 200, contentType: JSON_TYPE, body: openapi3 ? this.specOpenApi3 : this.spec };
    if (hosts.length > 1) return problem(400, 'give one host');
    const host = hosts[0]!;
    const why = hostValueProblem(host);
    if (why !== null) return problem(400, why);
    // No upstream lists hosts: every host routes among every upstream.
    if (this.hostSpecs === null) return { status: 200, contentType: JSON_TYPE, body: openapi3 ? this.specOpenApi3 : this.spec };
    const docs = this.hostSpecs.match(host);
    if (docs === null) return problem(404, 'no upstream serves this host');
    return { status: 200, contentType: JSON_TYPE, body: openapi3 ? docs.openapi3 : docs.swagger2 };
  }

  private renderMetrics(query: string, headers: BuiltinHeaders): Rendered | Promise<Rendered> {
    const choice = metricsFormat(query, headers.accept);
    switch (choice.kind) {
      case 'bad-format':
        return problem(400, 'format must be given once, as json or prometheus');
      case 'not-acceptable':
        return { ...problem(406, 'metrics are available as application/json or text/plain'), vary: 'Accept' };
      case 'format': {
        const { format, byAccept } = choice;
        const source = this.metricsSource;
        if (source === null) return metricsAnswer(format, format === 'json' ? this.metricsJson : this.metricsText, byAccept);
        return source(format).then((body) =>
          body === null ? problem(503, 'the metrics report did not come from the primary process in time') : metricsAnswer(format, Buffer.from(body), byAccept),
        );
      }
    }
  }

  private normalizePaths(paths: Paths): Paths {
    return {
      healthcheck: dropTrailingSlash(paths.healthcheck),
      metrics: dropTrailingSlash(paths.metrics),
      spec: dropTrailingSlash(paths.spec),
    };
  }
}
