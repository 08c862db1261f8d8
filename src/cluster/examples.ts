import { fork, type ChildProcess } from 'node:child_process';
import type { Logger } from '../log.js';

export interface ExampleUpstreams {
  stop(): Promise<void>;
}

/** Starts the bundled example upstreams in a child process and resolves once they listen. */
export function startExamplesChild(log: Logger, timeoutMs = 15_000): Promise<ExampleUpstreams> {
  const child: ChildProcess = fork(new URL('./examples-child.js', import.meta.url), [], { stdio: 'inherit' });
  let stopping = false;
  const stop = (): Promise<void> =>
    new Promise((resolve) => {
      stopping = true;
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });

  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      void stop();
      reject(new Error(`example upstreams did not start within ${timeoutMs} ms`));
    }, timeoutMs);
    let started = false;
    let failure: string | null = null;
    child.on('message', (message: { type?: unknown; servers?: unknown; reason?: unknown } | null) => {
      if (message?.type === 'examples-failed') failure = String(message.reason);
      if (message?.type !== 'examples-ready') return;
      started = true;
      clearTimeout(timer);
      log.info({ childPid: child.pid, servers: message.servers }, 'example upstreams started');
      resolve({ stop });
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (started) {
        if (!stopping) log.warn({ code, signal }, 'example upstreams exited');
      } else if (failure !== null) reject(new Error(`the example upstreams could not start: ${failure}`));
      else reject(new Error(`example upstreams exited (code ${code}, signal ${signal}) before they were ready`));
    });
  });
}
