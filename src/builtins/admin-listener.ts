/**
 * The operators' listener (`admin: { host, port }`): the health report, /metrics and /spec on a port of
 * their own, so they need not face the internet. Every worker binds it (SO_REUSEPORT, like the public
 * port); anything that is not a built-in path is 404. Its requests are not counted in /metrics,
 * logged or traced (they are the operators' own polling); every answer carries a request ID all the same.
 * The request target goes through the public port's checks and normalization first (`target`), so a
 * built-in is reached by the same paths on both listeners, and a target the public port refuses (400,
 * 414) is refused here with the same answer.
 */
import { writeProblem } from '../http/problem-json.js';
import { writeBuiltinAnswer } from './write-answer.js';
import type { LoadedUws } from '../native/uws.js';
import type { UwsListenSocket, UwsRequest, UwsResponse } from '../native/uws-types.js';
import type { BuiltinsHook } from '../exchange/builtins.js';
import { emptyHeaderView } from '../http/client-request-head.js';
import { remoteAddress } from '../http/remote-address.js';
import { TrustedProxies } from '../http/trusted-proxies.js';
import { isAcceptableRequestId, nextRequestId } from '../observe/request-id.js';
import type { Refusal } from '../lifecycle/accept.js';

/** A request target's normalized path, or the public port's refusal of it (AcceptPhase.checkTarget). */
export type AdminTarget = (url: string, query: string) => Refusal | string;

/** The request ID on the admin listener's answers, as on the public port's; null: request IDs are off. */
export interface AdminRequestIds {
  header: string;
  trustedProxies: readonly string[];
}

export interface AdminListener {
  readonly port: number;
  /**
   * Stops accepting connections, lets the requests in flight (a /metrics waits for the primary) be
   * answered, with `Connection: close`, until `graceMs` at most, then closes every connection left.
   */
  close(graceMs: number): Promise<void>;
}

export function startAdminListener(
  uws: LoadedUws,
  host: string,
  port: number,
  builtins: BuiltinsHook,
  via: string,
  target: AdminTarget,
  ids: AdminRequestIds | null = null,
): Promise<AdminListener> {
  const app = uws.uws.App();
  const headers = emptyHeaderView();
  const idHeader = ids?.header.toLowerCase() ?? '';
  const trust = new TrustedProxies(ids?.trustedProxies ?? []);
  /** An incoming ID from a trusted proxy is kept (one header, visible ASCII, at most 200), as on the public port. */
  const requestId = (res: UwsResponse, req: UwsRequest): readonly string[] | null => {
    if (ids === null) return null;
    let incoming = '';
    let count = 0;
    if (!trust.none) {
      req.forEach((name, value) => {
        if (name === idHeader && count++ === 0) incoming = value;
      });
    }
    const kept = count === 1 && isAcceptableRequestId(incoming) && trust.isTrusted(remoteAddress(res.getRemoteAddress()));
    return [idHeader, kept ? incoming : nextRequestId()];
  };
  let closing = false;
  let inFlight = 0;
  let onIdle: (() => void) | null = null;
  const finished = (): void => {
    if (--inFlight === 0 && onIdle !== null) onIdle();
  };
  app.any('/*', (res: UwsResponse, req: UwsRequest) => {
    const method = req.getCaseSensitiveMethod();
    const query = req.getQuery() ?? '';
    headers.accept = req.getHeader('accept') || undefined;
    const id = requestId(res, req);
    const path = target(req.getUrl(), query);
    if (typeof path !== 'string') {
      const { status, detail } = path.answer;
      writeProblem(res, status, detail, { via, headersOnly: method === 'HEAD', headers: id, closeConnection: path.close || closing });
      return;
    }
    const answer = builtins(method, path, query, headers);
    if (answer === null) {
      writeProblem(res, 404, 'the admin listener serves only the health report, metrics and spec', { via, headersOnly: method === 'HEAD', headers: id, closeConnection: closing });
      return;
    }
    const headersOnly = method === 'HEAD';
    if (!(answer instanceof Promise)) {
      writeBuiltinAnswer(res, answer, headersOnly, closing, id);
      return;
    }
    // The metrics: asked of the primary process, written when they come.
    let aborted = false;
    inFlight++;
    res.onAborted(() => {
      aborted = true;
      finished();
    });
    answer.then(
      (later) => {
        if (aborted) return;
        res.cork(() => writeBuiltinAnswer(res, later, headersOnly, closing, id));
        finished();
      },
      () => {
        if (aborted) return;
        res.cork(() => writeProblem(res, 500, 'the gateway failed to handle the request', { via, headersOnly, headers: id, closeConnection: closing }));
        finished();
      },
    );
  });
  return new Promise((resolve, reject) => {
    app.listen(host, port, (socket: UwsListenSocket | false) => {
      if (socket === false) {
        reject(new Error(`admin listener: could not listen on ${host}:${port}`));
        return;
      }
      resolve({
        port: uws.uws.us_socket_local_port(socket),
        close: async (graceMs) => {
          if (closing) return;
          closing = true;
          uws.uws.us_listen_socket_close(socket);
          if (inFlight > 0) {
            await new Promise<void>((done) => {
              const timer = setTimeout(done, graceMs);
              onIdle = () => {
                clearTimeout(timer);
                done();
              };
            });
          }
          app.close?.();
        },
      });
    });
  });
}
