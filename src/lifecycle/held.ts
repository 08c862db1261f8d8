/**
 * A request held past its handler while something decides for it (an asynchronous middleware, a
 * built-in whose answer comes later): counted in flight, its client watched. The client leaving makes
 * it a 499 and calls `aborted`; the caller settles it once with the returned function, which says
 * whether the request was still waiting (false: the client left first, nothing more to do).
 */
import type { ClientEvents } from '../exchange/client.js';
import type { RequestContext } from '../exchange/context.js';
import type { DataPlaneState } from './state.js';

export function holdRequest(ctx: RequestContext, state: DataPlaneState, aborted: () => void, data: ClientEvents['onClientData']): () => boolean {
  ctx.inFlight = true;
  state.inFlight++;
  let over = false;
  ctx.client!.watch({
    onClientAborted: () => {
      if (over) return;
      over = true;
      ctx.status = 499;
      aborted();
    },
    onClientData: data,
  });
  return () => {
    if (over) return false;
    over = true;
    return true;
  };
}
