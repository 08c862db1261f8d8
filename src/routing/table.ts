// API STUB — being implemented (routing engine). Signatures are the contract other parts code against.
import type { EndpointDetails, RouteEntry, TemplateProblem } from './types.js';

/** One endpoint inside an equivalence group: which upstream serves it and what it declared. */
export interface RouteTarget extends EndpointDetails {
  readonly upstream: string;
  /** The template as this upstream wrote it. */
  readonly template: string;
}

/** An equivalence group: every endpoint with the same method and canonical template. */
export interface Route {
  /** Dense index, stable for the life of one compiled table (use it to key per-route state). */
  readonly id: number;
  readonly method: string;
  /** The template as first declared (used in metrics/logs as the endpoint's name). */
  readonly template: string;
  readonly canonical: string;
  readonly targets: readonly RouteTarget[];
}

export interface Selection {
  /** 200 (route chosen, or automatic OPTIONS), 404, 405, 406, 415. */
  status: number;
  route: Route | null;
  /** Targets left after Content-Type / Accept negotiation (a subset of route.targets). */
  targets: readonly RouteTarget[];
  /** The Allow header value for 405 and automatic OPTIONS, e.g. "GET, HEAD, OPTIONS"; "" otherwise. */
  allow: string;
  /** True when OPTIONS was answered automatically (no declared OPTIONS endpoint): reply 200 + Allow. */
  autoOptions: boolean;
  /** True when HEAD is served by the GET endpoint: forward upstream as GET and drop the response body. */
  headAsGet: boolean;
}

export type TransferableTable = { readonly version: 1 } & Record<string, unknown>;

export class RoutingTable {
  static compile(_entries: readonly RouteEntry[]): { table: RoutingTable; problems: TemplateProblem[] } {
    throw new Error('not implemented yet');
  }
  static fromTransferable(_data: TransferableTable): RoutingTable {
    throw new Error('not implemented yet');
  }
  toTransferable(): TransferableTable {
    throw new Error('not implemented yet');
  }
  /** Number of endpoints (entries) in the table. */
  get size(): number {
    return 0;
  }
  /** Routes in specificity order. */
  routes(): readonly Route[] {
    return [];
  }
  /**
   * Select the endpoint group for a request. `path` must already be normalized (see src/http/normalize-path.ts).
   * `out` is filled and returned; pass a reused object on the hot path to avoid allocation.
   */
  select(
    _method: string,
    _path: string,
    _contentType: string | undefined,
    _accept: string | undefined,
    _hasBody: boolean,
    _out?: Selection,
  ): Selection {
    throw new Error('not implemented yet');
  }
  /** Parameter values of the last successful select() (materialized on demand). */
  params(): Record<string, string> {
    return {};
  }
}
