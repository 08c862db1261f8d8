import type { UpstreamConfig } from '../config/types.js';
import { templateWarnings } from '../routing/template-warnings.js';
import { printable } from '../text/printable.js';
import { joinTemplate } from './base-path.js';
import { isObject, type Objection } from './objection.js';
import type { EndpointProblem } from './types.js';

/**
 * The templates of a doc's path keys (base path folded in) that route other than they say or never
 * match: an objection on the path item, said of each of its operations. A name two placeholders share
 * is left to the doc's validator, which objects to it already.
 */
export function docTemplateObjections(doc: Record<string, any>, basePath: string): Objection[] {
  const objections: Objection[] = [];
  for (const [pathKey, pathItem] of Object.entries<unknown>(isObject(doc.paths) ? doc.paths : {})) {
    if (!pathKey.startsWith('/') || !isObject(pathItem)) continue;
    for (const message of templateWarnings(joinTemplate(basePath, pathKey))) objections.push({ pointer: ['paths', pathKey], message });
  }
  return objections;
}

/**
 * The same of a `static` upstream's endpoints, and a name two placeholders share (no validator reads
 * the config's templates), each naming its place in the upstream's config (`endpoints/3/path`).
 */
export function staticEndpointProblems(upstream: UpstreamConfig): EndpointProblem[] {
  return (upstream.endpoints ?? []).flatMap((endpoint, index) =>
    templateWarnings(endpoint.path, { duplicateNames: true }).map((reason) => ({
      method: endpoint.method.toUpperCase(),
      path: printable(endpoint.path),
      reason: printable(reason),
      pointer: `endpoints/${index}/path`,
    })),
  );
}
