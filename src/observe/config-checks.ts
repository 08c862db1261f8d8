/** Config rules of the observe features the schema cannot say: where the access log goes, the collector URL. */
import { resolve } from 'node:path';
import { appendPathProblem } from '../config/append-path.js';
import type { ConfigProblem } from '../config/config-problem.js';
import type { GatewayConfig } from '../config/types.js';

export function checkObserveConfig(config: GatewayConfig): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const destination = config.accessLog.destination;
  if (config.accessLog.enabled && destination !== 'stdout') {
    const path = resolve(destination);
    const reason = appendPathProblem(path);
    if (reason !== null) problems.push({ pointer: '/accessLog/destination', reason });
  }
  const endpoint = config.tracing?.otlpEndpoint;
  if (endpoint !== undefined && !URL.canParse(endpoint)) {
    problems.push({ pointer: '/tracing/otlpEndpoint', reason: `"${endpoint}" is not a URL (e.g. "http://127.0.0.1:4318/v1/traces")` });
  }
  return problems;
}
