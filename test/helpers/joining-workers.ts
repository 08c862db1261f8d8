/**
 * Probing the workers that join a running gateway (a killed worker's replacement, a reload's
 * successors) from their first answers: fresh connections, one every few ms, each answer tagged with
 * the pid of the worker that gave it.
 */
import { eventually, type GatewayProcess } from './gateway-process.js';

/** Pids of the workers the primary started at or after `since` (ms since the epoch). */
export function workersStartedSince(gateway: GatewayProcess, since: number): string[] {
  return gateway.lines.filter((l) => l.msg === 'worker started' && (l.time as number) >= since).map((l) => String(l.workerPid));
}

/**
 * Calls `ask` (one fresh connection; null when it gave no answer, e.g. one a killed worker had
 * accepted) until `pids()` names `count` workers that each answered `perWorker` times.
 */
export async function probeUntilAnswered<A extends { pid: string }>(
  ask: () => Promise<A | null>,
  pids: () => string[],
  count: number,
  perWorker: number,
  description: string,
): Promise<A[]> {
  const answers: A[] = [];
  const enough = (): boolean => {
    const expected = pids();
    return expected.length >= count && expected.every((pid) => answers.filter((a) => a.pid === pid).length >= perWorker);
  };
  await eventually(
    async () => {
      const answer = await ask();
      if (answer !== null) answers.push(answer);
      return enough() ? true : undefined;
    },
    20_000,
    5,
    description,
  );
  return answers;
}

/** SIGKILLs the first worker the gateway started; returns its pid and the time just before. */
export function killFirstWorker(gateway: GatewayProcess): { victim: string; since: number } {
  const victim = workersStartedSince(gateway, 0)[0]!;
  const since = Date.now();
  process.kill(Number(victim), 'SIGKILL');
  return { victim, since };
}

/**
 * Writes `config` (a new `name`, which is read at worker start) and sends SIGHUP: the reload replaces
 * each worker with a successor. Returns the time just before.
 */
export function reloadReplacingWorkers(gateway: GatewayProcess, config: Record<string, unknown>): number {
  const since = Date.now();
  gateway.writeConfig(config);
  gateway.signal('SIGHUP');
  return since;
}

/** How many of `answers` worker `pid` gave. */
export function answeredBy(answers: ReadonlyArray<{ pid: string }>, pid: string | undefined): number {
  return answers.filter((a) => a.pid === pid).length;
}

/** Kills the first worker and probes until its replacement answered `perWorker` times. */
export async function probeReplacement<A extends { pid: string }>(
  gateway: GatewayProcess,
  ask: () => Promise<A | null>,
  perWorker: number,
): Promise<{ victim: string; replacement: string | undefined; answers: A[] }> {
  const { victim, since } = killFirstWorker(gateway);
  const answers = await probeUntilAnswered(ask, () => workersStartedSince(gateway, since), 1, perWorker, 'the replacement answering');
  const [replacement] = workersStartedSince(gateway, since);
  return { victim, replacement, answers };
}

/**
 * Reloads with `config` (each worker replaced) and probes until both successors answered `perWorker`
 * times; `since` is the time just before the reload.
 */
export async function probeSuccessors<A extends { pid: string }>(
  gateway: GatewayProcess,
  config: Record<string, unknown>,
  ask: () => Promise<A | null>,
  perWorker: number,
): Promise<{ since: number; successors: string[]; answers: A[] }> {
  const since = reloadReplacingWorkers(gateway, config);
  const answers = await probeUntilAnswered(ask, () => workersStartedSince(gateway, since), 2, perWorker, 'both successors answering');
  return { since, successors: workersStartedSince(gateway, since), answers };
}
