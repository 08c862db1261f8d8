export { discoverFromDoc, discoverUpstream, type DocSource } from './discover.js';
export { specUrl } from './spec-url.js';
export { entriesEqual, entriesFingerprint, docsEqual } from './fingerprint.js';
export { docBasePath, joinTemplate } from './base-path.js';
export { parseDocText } from './parse-doc.js';
export type { DiscoveredUpstream, DiscoveryOptions, EndpointProblem } from './types.js';
