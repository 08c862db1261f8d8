import type { RequestListener } from '../exchange/listener.js';
import { ACCESS_LOG_LISTENER, type AccessLog } from './access-log.js';

/** The built-in access log as a listener: one line per finished request, and one per relayed WebSocket connection. */
export function accessLogListener(log: AccessLog): RequestListener {
  return {
    id: ACCESS_LOG_LISTENER,
    done: (ctx) => log.record(ctx),
    connectionDone: (ctx, connection) => log.recordConnection(ctx, connection),
  };
}
