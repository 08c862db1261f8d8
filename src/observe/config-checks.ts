/** Config rules of the observe features the schema cannot say: where the access log goes, the collector URL. */
import { statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { ConfigProblem } from '../config/config-problem.js';
import type { GatewayConfig } from '../config/types.js';

export function checkObserveConfig(config: GatewayConfig): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const destination = config.accessLog.destination;
  if (config.accessLog.enabled && destination !== 'stdout') {
    const path = resolve(destination);
    const reason = fileProblem(path);
    if (reason !== null) problems.push({ pointer: '/accessLog/destination', reason });
  }
  const endpoint = config.tracing?.otlpEndpoint;
  if (endpoint !== undefined && !URL.canParse(endpoint)) {
    problems.push({ pointer: '/tracing/otlpEndpoint', reason: `"${endpoint}" is not a URL (e.g. "http://127.0.0.1:4318/v1/traces")` });
  }
  return problems;
}

/** Why the access log could not be appended to at `path`, or null. */
function fileProblem(path: string): string | null {
  try {
    if (statSync(path).isDirectory()) return `${path} is a directory; name a file in it`;
    return null;
  } catch {
    // Not there yet: it is created, in a directory that must exist.
  }
  try {
    if (statSync(dirname(path)).isDirectory()) return null;
    return `${dirname(path)} is not a directory`;
  } catch {
    return `the directory ${dirname(path)} does not exist`;
  }
}
