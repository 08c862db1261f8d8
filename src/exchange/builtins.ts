import type { HeaderView } from '../http/client-request-head.js';
import type { BuiltinAnswer } from './answer.js';

export type { HeaderView } from '../http/client-request-head.js';

/**
 * Consulted first for every request that passed the accept phase, with the normalized path and the
 * raw query. `headers` is a reused object holding only accept, accept-encoding, content-type, host,
 * if-none-match, authorization and user-agent; valid during the call only. Null routes the request
 * normally; a Promise is an answer that comes later (the metrics, asked of the primary process).
 */
export type BuiltinsHook = (method: string, path: string, query: string, headers: HeaderView) => BuiltinAnswer | Promise<BuiltinAnswer> | null;
