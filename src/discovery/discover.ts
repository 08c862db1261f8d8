import type { UpstreamConfig } from '../config/types.js';
import { docBasePath } from './base-path.js';
import { entriesFromDoc, entriesFromStatic } from './extract-entries.js';
import { fetchJsonDoc } from './fetch-doc.js';
import { validateDoc } from './validate-doc.js';
import type { DiscoveredUpstream, DiscoveryOptions } from './types.js';

/**
 * Learns an upstream's endpoints: inline for `static`, else from its doc at serviceLocation + specPath.
 * Rejects with an Error saying why (HTTP status, timeout, invalid doc, wrong version). Templates are
 * not checked here: the routing compiler reports bad ones, naming the upstream.
 */
export async function discoverUpstream(upstream: UpstreamConfig, options: DiscoveryOptions): Promise<DiscoveredUpstream> {
  if (upstream.serviceType === 'static') {
    return { upstream, entries: entriesFromStatic(upstream), doc: null };
  }
  const docUrl = specUrl(upstream);
  const doc = await fetchJsonDoc(docUrl, options, upstream.tls);
  const dereferenced = await validateDoc(doc, upstream.serviceType, docUrl);
  let entries;
  try {
    entries = entriesFromDoc(dereferenced, upstream.serviceLocation, docBasePath(dereferenced, docUrl));
  } catch (error) {
    throw new Error(`${docUrl}: ${(error as Error).message}`);
  }
  return { upstream, entries, doc: doc as object };
}

/** Where an upstream's doc is fetched. */
export function specUrl(upstream: UpstreamConfig): string {
  return upstream.serviceLocation.replace(/\/+$/, '') + (upstream.specPath ?? '/spec');
}
