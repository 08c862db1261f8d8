/**
 * The client's upgrade request, checked beyond what uWS checks before it calls the upgrade handler
 * (RFC 6455 4.2.1): `Connection` must list `upgrade` and not `close`, `Sec-WebSocket-Key` and
 * `Sec-WebSocket-Version` must each come once (11.3.1, 11.3.5), and a `Sec-WebSocket-Protocol` must
 * list tokens (4.1). A request that fails is answered 400 and goes nowhere.
 *
 * Why `close` matters beyond the RFC: uWS 20.30 upgrades a request whose `Connection` is `close` and
 * then closes the client's socket right after the 101 without telling the WebSocket's handlers, and
 * the relay's later write to that WebSocket crashed the worker (SIGSEGV; native-notes.md, WebSockets).
 * uWS does not read the token: it takes the request for `close` when its *first* `Connection` line
 * is five characters long, whatever they are (`hello`, `TE,TE`), and a second line may still list
 * `upgrade`. Such a handshake is refused as well: no WebSocket handshake needs it.
 */
import type { UwsRequest } from '../native/uws-types.js';

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Why the upgrade request is not a WebSocket handshake the gateway takes, or null. */
export function handshakeRequestProblem(req: UwsRequest): string | null {
  let upgrade = false;
  let close = false;
  let keys = 0;
  let versions = 0;
  let protocols = true;
  let connectionLines = 0;
  let closeByLength = false;
  req.forEach((name, value) => {
    switch (name) {
      case 'connection':
        // What uWS reads as close: the first line's length (its getHeader('connection')), not its tokens.
        if (connectionLines++ === 0 && value.length === 5) closeByLength = true;
        for (const token of value.split(',')) {
          const option = token.trim().toLowerCase();
          if (option === 'upgrade') upgrade = true;
          else if (option === 'close') close = true;
        }
        break;
      case 'sec-websocket-key':
        keys++;
        break;
      case 'sec-websocket-version':
        versions++;
        break;
      case 'sec-websocket-protocol': {
        const listed = value.split(',').map((item) => item.trim()).filter((item) => item !== '');
        if (listed.length === 0 || !listed.every((item) => TOKEN.test(item))) protocols = false;
        break;
      }
    }
  });
  if (!upgrade) return 'the WebSocket handshake has no Connection header listing "upgrade"';
  if (close) return 'the WebSocket handshake asks to close the connection (Connection: close)';
  if (closeByLength) return 'the WebSocket handshake has a first Connection line of five characters, which the server library takes for "close"';
  if (keys > 1) return 'the WebSocket handshake has more than one Sec-WebSocket-Key';
  if (versions > 1) return 'the WebSocket handshake has more than one Sec-WebSocket-Version';
  if (!protocols) return 'the WebSocket handshake has a Sec-WebSocket-Protocol that is not a list of tokens';
  return null;
}
