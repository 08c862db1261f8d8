/**
 * What the gateway can answer by itself, without an upstream: a local reply. Every one of them is
 * written by the response chain (src/lifecycle/respond.ts) through the client's ResponseWriter.
 */
import type { HeadBlock } from '../http/head-block.js';

/** A problem+json answer of the gateway's own (401, 404, 429, 503, ...), with headers of the middleware's. */
export interface ProblemAnswer {
  readonly kind: 'problem';
  readonly status: number;
  readonly detail: string;
  /** Extra response headers, flat [name, value, ...]. */
  readonly headers?: readonly string[];
  /** The `Allow` header of a 405. */
  readonly allow?: string;
}

/** An answer with content of the middleware's (a cached response): status, headers and body as given. */
export interface ContentAnswer {
  readonly kind: 'content';
  readonly status: number;
  /** Flat [name, value, ...]; framing headers (Content-Length, Transfer-Encoding) are the writer's. */
  readonly headers: readonly string[];
  readonly body: Uint8Array;
  /** On an answer written many times as it is (a cache entry's): where the writer keeps its head encoded. */
  readonly block?: HeadBlock;
}

/** What a middleware may answer instead of forwarding. */
export type Answer = ProblemAnswer | ContentAnswer;

/** A built-in endpoint's answer (written as is; HEAD gets its headers and Content-Length only). */
export interface BuiltinAnswer {
  status: number;
  headers: Readonly<Record<string, string>>;
  body: Uint8Array | string;
}

/** A built-in endpoint answered (/healthcheck, /metrics, /spec). */
export interface BuiltinReply {
  readonly kind: 'builtin';
  readonly answer: BuiltinAnswer;
}

/** 200 to an OPTIONS no endpoint declares, with the `Allow` of the path. */
export interface OptionsReply {
  readonly kind: 'options';
  readonly allow: string;
}

/** Every answer the gateway writes itself. */
export type LocalReply = Answer | BuiltinReply | OptionsReply;

export function problem(status: number, detail: string, headers?: readonly string[]): ProblemAnswer {
  return headers === undefined ? { kind: 'problem', status, detail } : { kind: 'problem', status, detail, headers };
}
