// The bench scripts' children (upstreams, proxies under test): started in process groups of their own
// and stopped with this process, their first line of output, and an HTTP GET polled until it answers
// 200 (or a WebSocket upgrade polled until it succeeds). `tail` adds what the child printed on stderr to
// an error.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { request } from 'node:http';
import { WebSocket } from 'ws';

/**
 * Starts `node <args>` children, each the leader of its own process group (so a gateway's workers go
 * with it); when this process exits, every group still running gets SIGTERM and `dir` is removed.
 */
export function nodeChildren(dir: string): (args: string[]) => ChildProcess {
  const running = new Set<ChildProcess>();
  process.on('exit', () => {
    for (const child of running) {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGTERM');
      } catch {
        // already gone
      }
    }
    rmSync(dir, { recursive: true, force: true });
  });
  process.on('SIGINT', () => process.exit(130));
  return (args) => {
    const child = spawn(process.execPath, args, { detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
    running.add(child);
    child.once('exit', () => running.delete(child));
    return child;
  };
}

/** Whether `command` is on the PATH (nginx, wrk, valgrind: the benches skip what this machine lacks). */
export function onPath(command: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

type Tail = () => string;
const NO_TAIL: Tail = () => '';

/** The child's first line on stdout (a port, {"ready":true}, ...); fails when it exits first or is silent. */
export function firstLine(child: ChildProcess, what: string, timeoutMs = 20_000, tail: Tail = NO_TAIL): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffered = '';
    const timer = setTimeout(() => reject(new Error(`${what}: no output within ${timeoutMs} ms\n${tail()}`)), timeoutMs);
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      buffered += chunk;
      const newline = buffered.indexOf('\n');
      if (newline >= 0) {
        clearTimeout(timer);
        resolve(buffered.slice(0, newline));
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (${code ?? signal}) before it was ready\n${tail()}`));
    });
  });
}

/** One GET on a connection of its own. */
export function get(origin: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${origin}${path}`, { agent: false, timeout: 2000, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

/** Polls `origin + path` every `intervalMs` until it answers 200; fails when the child exits or the time is up. */
export async function waitFor200(origin: string, path: string, what: string, child: ChildProcess, timeoutMs = 30_000, tail: Tail = NO_TAIL, intervalMs = 100): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${what} exited\n${tail()}`);
    try {
      if ((await get(origin, path)).status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${what}: ${origin}${path} not 200 within ${timeoutMs} ms\n${tail()}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/**
 * Opens (and closes) a WebSocket to `url` every `intervalMs` until one upgrades; fails when the time is
 * up, or when `child` (if given) exits.
 */
export async function waitForUpgrade(url: string, what: string, timeoutMs: number, child: ChildProcess | null = null, tail: Tail = NO_TAIL, intervalMs = 200): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child !== null && (child.exitCode !== null || child.signalCode !== null)) throw new Error(`${what} exited\n${tail()}`);
    const upgraded = await new Promise<boolean>((resolve) => {
      const socket = new WebSocket(url);
      socket.once('open', () => {
        socket.close();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (upgraded) return;
    if (Date.now() > deadline) throw new Error(`${what}: ${url} does not upgrade within ${timeoutMs} ms\n${tail()}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
