/**
 * Route: the built-in endpoints first (/healthcheck, /metrics, /spec win over any upstream's), then the
 * routing table: the most specific endpoint whose template matches the path and that declares the
 * method, its hosts narrowed by content negotiation. Fills ctx.route, ctx.targets and ctx.headAsGet,
 * or returns the local reply (a built-in's answer, 404/405/406/415, 200 to OPTIONS, 503 before the
 * first table), or a built-in's answer still to come (LaterBuiltin).
 */
import { problem, type BuiltinAnswer, type LocalReply } from '../exchange/answer.js';
import type { BuiltinsHook } from '../exchange/builtins.js';
import type { RequestContext } from '../exchange/context.js';
import type { RequestHead } from '../http/client-request-head.js';
import { emptySelection } from '../routing/table.js';
import { notFoundDetail } from './not-found-detail.js';
import type { DataPlaneState } from './state.js';

/** A built-in whose answer comes later (the metrics, which the primary process renders when asked). */
export interface LaterBuiltin {
  readonly kind: 'later';
  readonly answer: Promise<BuiltinAnswer>;
}

export class RoutePhase {
  /** Reused by every select (the table fills it; read before the next request). */
  private readonly selection = emptySelection();

  constructor(
    private readonly state: DataPlaneState,
    private readonly builtins: BuiltinsHook | null,
  ) {}

  /** Null when routed to an endpoint; else the reply, or the built-in answer to wait for. */
  route(head: RequestHead, ctx: RequestContext): LocalReply | LaterBuiltin | null {
    const method = ctx.method;
    const path = ctx.path;
    const view = head.view;
    if (this.builtins !== null) {
      const answer = this.builtins(method, path, ctx.query, view);
      if (answer !== null) return answer instanceof Promise ? { kind: 'later', answer } : { kind: 'builtin', answer };
    }
    if (ctx.tlsRedirect !== null) return tlsRedirect(ctx, ctx.tlsRedirect);
    const table = this.state.table;
    if (table === null) return problem(503, 'the routing table is not loaded yet');
    const hostRoutes = this.state.hostRoutes;
    const hostTable = hostRoutes === null ? table : hostRoutes.tableFor(view.host);
    if (hostTable === null) return problem(404, 'no upstream serves this host');
    const selection = hostTable.select(method, path, view['content-type'], view.accept, ctx.hasBody, this.selection);
    if (selection.status !== 200) {
      return { kind: 'problem', status: selection.status, detail: rejectionDetail(selection.status, method, this.state.undiscovered), allow: selection.allow };
    }
    if (selection.autoOptions) return { kind: 'options', allow: selection.allow };
    ctx.route = selection.route!;
    ctx.targets = selection.targets;
    ctx.headAsGet = selection.headAsGet;
    return null;
  }
}

/** `plainPort: "redirect"` (src/edge/tls-redirect.ts): 308 to the same path and query over https. */
function tlsRedirect(ctx: RequestContext, authority: string): LocalReply {
  if (authority === '') return problem(400, 'a request to the plain port is redirected to https and needs a Host header');
  const location = `https://${authority}${ctx.path}${ctx.query === '' ? '' : `?${ctx.query}`}`;
  return { kind: 'content', status: 308, headers: ['location', location], body: EMPTY };
}

const EMPTY = new Uint8Array(0);

function rejectionDetail(status: number, method: string, undiscovered: number): string {
  switch (status) {
    case 404:
      return notFoundDetail(undiscovered);
    case 405:
      return `no endpoint matching this path accepts ${method}`;
    case 406:
      return 'no endpoint for this request can produce what Accept asks for';
    case 415:
      return 'no endpoint for this request consumes this Content-Type';
    default:
      return 'the request cannot be routed';
  }
}
