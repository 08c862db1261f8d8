export { discoverUpstream, specUrl } from './discover.js';
export { entriesEqual, entriesFingerprint, docsEqual } from './fingerprint.js';
export { docBasePath, joinTemplate } from './base-path.js';
export type { DiscoveredUpstream, DiscoveryOptions } from './types.js';
