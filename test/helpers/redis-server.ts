/**
 * A real `redis-server` of the test's own (Debian package `redis-server`; `.ci/run` installs it), on
 * a free 127.0.0.1 port, self-contained: no config file, no persistence (`--save "" --appendonly no`),
 * its working directory a fresh temp dir. It can be killed hard (SIGKILL) and restarted on the same
 * port for outage tests, and is always stopped when the test process exits.
 *
 * A test that needs Redis fails, with the reason, when `redis-server` cannot be found: it is never
 * skipped.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { findFreePort } from '../../src/cluster/free-port.js';
import { reapOnExit } from './reaper.js';

export interface RedisServer {
  readonly port: number;
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  /** SIGKILL, and wait for the process to be gone. */
  kill(): Promise<void>;
  /** Starts it again on the same port (after kill or stop); resolves once it answers PING. */
  restart(): Promise<void>;
  /** SIGTERM (SIGKILL after 2 s) and removes its directory. */
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

const SEARCH = [...(process.env.PATH ?? '').split(delimiter), '/usr/bin', '/usr/sbin', '/usr/local/bin'];

/** The redis-server executable, or an Error saying how to get one. */
export function findRedisServer(dirs: readonly string[] = SEARCH): string {
  for (const dir of dirs) {
    if (dir === '') continue;
    const candidate = join(dir, 'redis-server');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  throw new Error(
    `redis-server not found (looked in ${dirs.filter((d) => d !== '').join(', ')}): this test needs a real Redis. ` +
      'Install the Debian package: sudo apt-get install -y redis-server (.ci/run does it when missing).',
  );
}

/** Resolves once the server answers PING with PONG; rejects after `timeoutMs`. */
function waitForPong(port: number, timeoutMs: number, exited: () => string | null): Promise<void> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const why = exited();
      if (why !== null) return reject(new Error(why));
      const socket = connect({ host: '127.0.0.1', port });
      let answer = '';
      const retry = () => {
        socket.destroy();
        if (Date.now() - started > timeoutMs) reject(new Error(`redis-server on port ${port} did not answer PING within ${timeoutMs} ms`));
        else setTimeout(attempt, 20);
      };
      socket.setTimeout(500, retry);
      socket.on('error', retry);
      socket.on('connect', () => socket.write('PING\r\n'));
      socket.on('data', (chunk) => {
        answer += chunk.toString('latin1');
        if (answer.includes('\r\n')) {
          socket.destroy();
          if (answer.startsWith('+PONG')) resolve();
          else retry(); // e.g. "-LOADING"
        }
      });
    };
    attempt();
  });
}

export async function startRedisServer(): Promise<RedisServer> {
  const binary = findRedisServer();
  const port = await findFreePort('127.0.0.1');
  const dir = mkdtempSync(join(tmpdir(), 'specgate-redis-'));
  let child: ChildProcess | null = null;
  let exitReason: string | null = null;
  let output = '';

  const launch = async () => {
    exitReason = null;
    output = '';
    const proc = spawn(
      binary,
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no', '--logfile', '', '--databases', '16'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child = proc;
    live.add(proc);
    reapOnExit(proc, { group: false });
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-4000);
    };
    proc.stdout?.on('data', keep);
    proc.stderr?.on('data', keep);
    proc.on('exit', (code, signal) => {
      live.delete(proc);
      exitReason = `redis-server exited (code ${code}, signal ${signal}):\n${output}`;
    });
    proc.on('error', (error) => {
      exitReason = `redis-server could not start: ${error.message}`;
    });
    await waitForPong(port, 10_000, () => (child === proc ? exitReason : null));
  };

  const waitExit = (proc: ChildProcess, signal: NodeJS.Signals, graceMs: number) =>
    new Promise<void>((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
      const force = setTimeout(() => proc.kill('SIGKILL'), graceMs);
      proc.once('exit', () => {
        clearTimeout(force);
        resolve();
      });
      proc.kill(signal);
    });

  await launch();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    async kill() {
      if (child !== null) await waitExit(child, 'SIGKILL', 0);
    },
    async restart() {
      if (child !== null) await waitExit(child, 'SIGKILL', 0);
      await launch();
    },
    async stop() {
      if (child !== null) await waitExit(child, 'SIGTERM', 2000);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
