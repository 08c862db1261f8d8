/**
 * What a worker does when a signal reaches it rather than the primary, and when its primary goes away.
 * `systemctl kill -s SIG` signals every process of the unit, `pkill -SIG -f gateway` matches the
 * workers' command lines too, and a terminal's hangup or Ctrl-C signals the whole process group: the
 * primary usually gets the same signal and does its job (reload, reopen the logs, stop the gateway).
 * docs/reference/processes.md#signals lists the choices.
 */
import cluster from 'node:cluster';
import type { Logger } from '../log.js';
import { releaseSignals } from './held-signals.js';

/**
 * The Node flag that keeps SIGUSR1 from opening the inspector from the start of the process, when this
 * Node has it (22.14 and later; Node 20 has none). With it a JS SIGUSR1 listener is never called
 * either (seen with Node 22.23 and 24.21), which is why a worker does nothing on SIGUSR1 on any Node.
 */
export const NO_INSPECTOR_SIGNAL = '--disable-sigusr1';

/** [NO_INSPECTOR_SIGNAL] when this Node takes it, else none. */
export function noInspectorSignalFlags(allowed: ReadonlySet<string> = process.allowedNodeEnvironmentFlags): string[] {
  return allowed.has(NO_INSPECTOR_SIGNAL) ? [NO_INSPECTOR_SIGNAL] : [];
}

/**
 * `stop` drains the worker and exits (it runs once, whatever asks first). `signalled`: asked by a
 * signal, which the primary may have got too (timeouts.shutdownDrainMs applies); false when the primary
 * is gone.
 */
export function handleWorkerSignals(log: Logger, stop: (reason: string, signalled: boolean) => void): void {
  // With no listener, Node opens its inspector on 127.0.0.1:9229 at SIGUSR1: anyone on the host could
  // then run code in the worker. The primary's SIGUSR1 reopens every worker's log files.
  process.on('SIGUSR1', () => {});
  // Its default would kill the worker and cut its requests; reloading is the primary's job.
  process.on('SIGHUP', () => log.info('SIGHUP ignored: a worker does not reload, the primary does'));
  // Node's default would end the worker (nginx's binary upgrade signal, sent by habit).
  process.on('SIGUSR2', () => log.info('SIGUSR2 ignored: it has no meaning here'));
  process.on('SIGTERM', () => stop('SIGTERM', true));
  process.on('SIGINT', () => stop('SIGINT', true));
  // nginx's graceful stop; Node's default would end the worker at once and cut its requests.
  process.on('SIGQUIT', () => stop('SIGQUIT', true));
  // Node's cluster code listens for 'disconnect' before this module runs and calls process.exit() at
  // once, in-flight requests cut, unless cluster.worker.exitedAfterDisconnect (a public, writable
  // property) is true; Node sets it only when the worker or the primary called disconnect(), which
  // this gateway never does. Marked here, the exit is this worker's own, after a drain. Read in
  // lib/internal/cluster/child.js, the same in Node 20, 22 and 24, and tried on 20.20, 22.23 and 24.21
  // (a node:cluster HTTP server whose primary is killed; test/cluster/cluster-primary-killed.test.ts
  // runs the gateway on the Node at hand). A Node that stopped honouring the property would exit at
  // once again, as before: that test would fail, nothing else would change.
  if (cluster.worker) cluster.worker.exitedAfterDisconnect = true;
  process.on('disconnect', () => stop('primary disconnected', false));
  const early = releaseSignals();
  // After the caller's module body has run: `stop` may use what it declares after this call.
  setImmediate(() => {
    if (early.hangup) log.info('SIGHUP ignored (it came while the worker was starting): a worker does not reload, the primary does');
    if (early.stop !== null) stop(early.stop, true);
  });
}
