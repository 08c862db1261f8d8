/**
 * The operators' listener (`admin: { host, port }`): the health report, /metrics and /spec on a port of
 * their own, so they need not face the internet. Every worker binds it (SO_REUSEPORT, like the public
 * port); anything that is not a built-in path is 404. Its requests are not counted in /metrics.
 */
import { writeProblem } from '../http/problem-json.js';
import { writeBuiltinAnswer } from './write-answer.js';
import type { LoadedUws } from '../native/uws.js';
import type { UwsListenSocket, UwsRequest, UwsResponse } from '../native/uws-types.js';
import type { BuiltinsHook } from '../exchange/builtins.js';
import { emptyHeaderView } from '../http/client-request-head.js';

export interface AdminListener {
  readonly port: number;
  close(): void;
}

export function startAdminListener(uws: LoadedUws, host: string, port: number, builtins: BuiltinsHook, via: string): Promise<AdminListener> {
  const app = uws.uws.App();
  const headers = emptyHeaderView();
  app.any('/*', (res: UwsResponse, req: UwsRequest) => {
    const method = req.getCaseSensitiveMethod();
    const url = req.getUrl();
    headers.accept = req.getHeader('accept') || undefined;
    const answer = builtins(method, url, req.getQuery() ?? '', headers);
    if (answer === null) {
      writeProblem(res, 404, 'the admin listener serves only the health report, metrics and spec', { via, headersOnly: method === 'HEAD' });
      return;
    }
    writeBuiltinAnswer(res, answer, method === 'HEAD', false);
  });
  return new Promise((resolve, reject) => {
    app.listen(host, port, (socket: UwsListenSocket | false) => {
      if (socket === false) {
        reject(new Error(`admin listener: could not listen on ${host}:${port}`));
        return;
      }
      resolve({
        port: uws.uws.us_socket_local_port(socket),
        close: () => {
          uws.uws.us_listen_socket_close(socket);
          app.close?.();
        },
      });
    });
  });
}
