// npm run bench:ws — WebSocket echo through the gateway and through nginx (proxy_http_version 1.1,
// Upgrade/Connection headers), in one run on 127.0.0.1: messages/s of 64-byte messages over 100
// connections (each keeps BENCH_WS_WINDOW messages in flight), and upgrades completed per second (open,
// one echo, close, 20 at a time). The upstream is a uWS echo server in its own process; the load comes
// from one process of `ws` clients. Contenders run one after another (the idle one is stopped with
// SIGSTOP), in interleaved rounds; medians are reported, with the gateway's ratio to nginx. Beside the
// rates, the CPU each proxy spent (all threads of its process group) per echo and per upgrade: the load
// generator is one process on the same cores, so a proxy's own cost is the steadier figure.
//
// Environment (optional): BENCH_DURATION_S (5), BENCH_ROUNDS (2), BENCH_WS_CONNECTIONS (100),
// BENCH_WS_WINDOW (4), BENCH_WORKERS (2), BENCH_DEADLINE_S (240). BENCH_BASE_DIR=<another checkout,
// built> adds its gateway as "gateway-base" and prints this build's CPU per echo against it round by
// round (the two alternate, so both meet the host in the same state: whole runs of one build here
// differ by more than most changes); BENCH_ONLY=gateway,gateway-base,nginx,direct picks contenders.
// BENCH_GATEWAY_NODE_FLAGS: node flags for the gateways' processes (e.g. --perf-basic-prof for `perf record`).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { WebSocket } from 'ws';
import { findFreePort } from '../src/cluster/free-port.js';
import { waitForUpgrade } from './children.js';
import { groupCpuNs } from './group-cpu.js';
import { median } from './median.js';

const env = process.env;
const DURATION_S = Number(env.BENCH_DURATION_S ?? 5);
const ROUNDS = Number(env.BENCH_ROUNDS ?? 2);
const CONNECTIONS = Number(env.BENCH_WS_CONNECTIONS ?? 100);
const WINDOW = Number(env.BENCH_WS_WINDOW ?? 4);
const WORKERS = Number(env.BENCH_WORKERS ?? 2);
const DEADLINE_S = Number(env.BENCH_DEADLINE_S ?? 240);
const BASE_DIR = env.BENCH_BASE_DIR ?? '';
const GATEWAY_NODE_FLAGS = (env.BENCH_GATEWAY_NODE_FLAGS ?? '').split(' ').filter((flag) => flag !== '');
const ONLY = env.BENCH_ONLY ? new Set(env.BENCH_ONLY.split(',').map((id) => id.trim())) : null;
const wanted = (id: string): boolean => ONLY === null || ONLY.has(id);
const MESSAGE = Buffer.alloc(64, 0x61).toString();
const OPEN_CONCURRENCY = 20;

const HERE = fileURLToPath(new URL('.', import.meta.url));
const ROOT = join(HERE, '../..');
const GATEWAY_MAIN = join(ROOT, 'dist/bundle/gateway.mjs');
const ECHO_MAIN = join(HERE, 'websocket-echo.js');
const workDir = mkdtempSync(join(tmpdir(), 'bench-ws-'));
const children = new Map<string, ChildProcess>();

function startChild(id: string, command: string, args: string[], ready: RegExp): Promise<void> {
  const child = spawn(command, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  children.set(id, child);
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`${id} did not start within 60 s:\n${output}`)), 60_000);
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      if (ready.test(output)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${id} exited (${code}):\n${output}`));
    });
  });
}

function stopAll(): void {
  for (const child of children.values()) {
    try {
      process.kill(-child.pid!, 'SIGCONT');
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // gone
    }
  }
  rmSync(workDir, { recursive: true, force: true });
}

function signalGroup(id: string, signal: NodeJS.Signals): void {
  const child = children.get(id);
  if (child) process.kill(-child.pid!, signal);
}

interface Measured {
  rate: number;
  /** The proxy's CPU per echo or upgrade (µs); NaN for the upstream alone. */
  cpuUs: number;
}

/** Messages echoed per second over CONNECTIONS connections, each with WINDOW messages in flight. */
async function echoRate(url: string, cpu: () => number): Promise<Measured> {
  const sockets = await Promise.all(
    Array.from({ length: CONNECTIONS }, () => new Promise<WebSocket>((resolve, reject) => {
      const socket = new WebSocket(url, { perMessageDeflate: false });
      socket.once('open', () => resolve(socket));
      socket.once('error', reject);
    })),
  );
  let counting = false;
  let echoed = 0;
  let running = true;
  for (const socket of sockets) {
    socket.on('message', () => {
      if (counting) echoed++;
      if (running) socket.send(MESSAGE);
    });
    for (let i = 0; i < WINDOW; i++) socket.send(MESSAGE);
  }
  await new Promise((resolve) => setTimeout(resolve, 1000));
  counting = true;
  const started = performance.now();
  const cpuBefore = cpu();
  await new Promise((resolve) => setTimeout(resolve, DURATION_S * 1000));
  const seconds = (performance.now() - started) / 1000;
  counting = false;
  const cpuUs = (cpu() - cpuBefore) / 1000 / echoed;
  running = false;
  const rate = echoed / seconds;
  await Promise.all(sockets.map((socket) => new Promise<void>((resolve) => {
    socket.once('close', () => resolve());
    socket.close();
    setTimeout(() => {
      socket.terminate();
      resolve();
    }, 2000);
  })));
  return { rate, cpuUs };
}

/** Upgrades per second: open, one echo, close; OPEN_CONCURRENCY at a time. */
async function openRate(url: string, cpu: () => number): Promise<Measured & { failures: number }> {
  let opened = 0;
  let failures = 0;
  const until = performance.now() + DURATION_S * 1000;
  const started = performance.now();
  const cpuBefore = cpu();
  const loop = async (): Promise<void> => {
    while (performance.now() < until) {
      const ok = await new Promise<boolean>((resolve) => {
        const socket = new WebSocket(url, { perMessageDeflate: false });
        socket.once('open', () => socket.send(MESSAGE));
        socket.once('message', () => {
          socket.close();
          resolve(true);
        });
        socket.once('error', () => resolve(false));
      });
      if (ok) opened++;
      else failures++;
    }
  };
  await Promise.all(Array.from({ length: OPEN_CONCURRENCY }, loop));
  return { rate: opened / ((performance.now() - started) / 1000), cpuUs: (cpu() - cpuBefore) / 1000 / opened, failures };
}

function nginxConfig(port: number, upstreamPort: number): string {
  return `# written by bench/websocket.ts
${process.getuid?.() === 0 ? 'user root;' : ''}
worker_processes ${WORKERS};
pid ${workDir}/nginx.pid;
error_log ${workDir}/error.log warn;
events { worker_connections 4096; }
http {
  client_body_temp_path ${workDir}/client_body;
  proxy_temp_path ${workDir}/proxy;
  fastcgi_temp_path ${workDir}/fastcgi;
  uwsgi_temp_path ${workDir}/uwsgi;
  scgi_temp_path ${workDir}/scgi;
  access_log ${workDir}/access.log combined buffer=64k flush=250ms;
  server {
    listen 127.0.0.1:${port} reuseport;
    location / {
      proxy_pass http://127.0.0.1:${upstreamPort};
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection "upgrade";
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_read_timeout 3600s;
    }
  }
}
`;
}

async function main(): Promise<void> {
  const deadline = setTimeout(() => {
    console.error(`bench:ws: deadline of ${DEADLINE_S} s reached`);
    stopAll();
    process.exit(1);
  }, DEADLINE_S * 1000);
  deadline.unref();

  const upstreamPort = await findFreePort('127.0.0.1');
  await startChild('upstream', process.execPath, [ECHO_MAIN, String(upstreamPort)], /listening/);
  const contenders: Array<{ id: string; url: string }> = [];

  const config = {
    host: '127.0.0.1',
    upstreams: [{ serviceType: 'static', serviceLocation: `http://127.0.0.1:${upstreamPort}`, endpoints: [{ method: 'GET', path: '/echo' }] }],
    discovery: { retries: 0, refreshIntervalMs: 0 },
  };
  writeFileSync(join(workDir, 'gateway.json'), JSON.stringify(config));
  const startGateway = async (id: string, main: string): Promise<void> => {
    const port = await findFreePort('127.0.0.1');
    await startChild(id, process.execPath, [...GATEWAY_NODE_FLAGS, main, 'start', '--config', join(workDir, 'gateway.json'), '--workers', String(WORKERS), '--port', String(port)], /gateway operational/);
    contenders.push({ id, url: `ws://127.0.0.1:${port}/echo` });
  };
  if (wanted('gateway')) await startGateway('gateway', GATEWAY_MAIN);
  if (BASE_DIR !== '' && wanted('gateway-base')) {
    const baseMain = join(BASE_DIR, 'dist/bundle/gateway.mjs');
    if (!existsSync(baseMain)) throw new Error(`BENCH_BASE_DIR: ${baseMain} does not exist (build that checkout first)`);
    await startGateway('gateway-base', baseMain);
  }

  const nginxInstalled = wanted('nginx') && spawnSync('nginx', ['-v']).status === 0;
  if (nginxInstalled) {
    const nginxPort = await findFreePort('127.0.0.1');
    writeFileSync(join(workDir, 'nginx.conf'), nginxConfig(nginxPort, upstreamPort));
    const ready = startChild('nginx', 'nginx', ['-p', workDir, '-e', join(workDir, 'error.log'), '-c', join(workDir, 'nginx.conf'), '-g', 'daemon off;'], /$^/).catch(() => {});
    void ready;
    await waitForUpgrade(`ws://127.0.0.1:${nginxPort}/echo`, 'nginx', 10_000);
    contenders.push({ id: 'nginx', url: `ws://127.0.0.1:${nginxPort}/echo` });
  } else if (wanted('nginx')) {
    console.log('nginx not installed: gateway only');
  }
  if (wanted('direct')) contenders.push({ id: 'direct', url: `ws://127.0.0.1:${upstreamPort}/echo` });
  if (contenders.length === 0) throw new Error('BENCH_ONLY left no contender');
  await waitForUpgrade(contenders[0]!.url, contenders[0]!.id, 10_000);

  const messages = new Map<string, number[]>();
  const opens = new Map<string, number[]>();
  const echoCpu = new Map<string, number[]>();
  const openCpu = new Map<string, number[]>();
  const push = (map: Map<string, number[]>, id: string, value: number): void => {
    (map.get(id) ?? map.set(id, []).get(id)!).push(value);
  };
  for (let round = 0; round < ROUNDS; round++) {
    // Every other round in the opposite order: no contender always follows the same one.
    for (const { id, url } of round % 2 === 0 ? contenders : [...contenders].reverse()) {
      for (const other of contenders) if (other.id !== id && other.id !== 'direct' && children.has(other.id)) signalGroup(other.id, 'SIGSTOP');
      if (id !== 'direct') signalGroup(id, 'SIGCONT');
      const pgid = id === 'direct' ? 0 : children.get(id)!.pid!;
      const cpu = (): number => (pgid === 0 ? Number.NaN : groupCpuNs(pgid));
      const echo = await echoRate(url, cpu);
      const open = await openRate(url, cpu);
      push(messages, id, echo.rate);
      push(opens, id, open.rate);
      push(echoCpu, id, echo.cpuUs);
      push(openCpu, id, open.cpuUs);
      const cpuText = pgid === 0 ? '' : ` (CPU ${echo.cpuUs.toFixed(1)} µs per echo, ${open.cpuUs.toFixed(0)} µs per upgrade)`;
      console.log(`round ${round + 1} ${id}: ${Math.round(echo.rate)} messages/s, ${Math.round(open.rate)} upgrades/s${open.failures ? ` (${open.failures} failed)` : ''}${cpuText}`);
    }
    for (const { id } of contenders) if (children.has(id)) signalGroup(id, 'SIGCONT');
  }
  console.log(`\n64-byte echo, ${CONNECTIONS} connections x ${WINDOW} in flight, ${DURATION_S} s per run, ${ROUNDS} rounds (medians); ${WORKERS} workers each:`);
  for (const { id } of contenders) {
    const cpuText = id === 'direct' ? '' : `; CPU ${median(echoCpu.get(id)!).toFixed(1)} µs per echo, ${median(openCpu.get(id)!).toFixed(0)} µs per upgrade`;
    console.log(`- ${id}: ${Math.round(median(messages.get(id)!))} messages/s, ${Math.round(median(opens.get(id)!))} upgrades/s${cpuText}`);
  }
  for (const other of ['nginx', 'gateway-base']) {
    if (!messages.has('gateway') || !messages.has(other)) continue;
    const ratio = (map: Map<string, number[]>): string => (median(map.get('gateway')!) / median(map.get(other)!)).toFixed(2);
    console.log(`gateway / ${other}: messages/s ${ratio(messages)}x, upgrades/s ${ratio(opens)}x; CPU per echo ${ratio(echoCpu)}x, per upgrade ${ratio(openCpu)}x`);
    const rounds = echoCpu.get('gateway')!.map((cpu, i) => cpu / echoCpu.get(other)![i]!);
    console.log(`  CPU per echo round by round: ${rounds.map((r) => r.toFixed(2)).join(', ')} (median ${median(rounds).toFixed(2)}x)`);
  }
}

process.on('SIGINT', () => {
  stopAll();
  process.exit(130);
});
main().then(
  () => {
    stopAll();
    process.exit(0);
  },
  (err: unknown) => {
    console.error(err);
    stopAll();
    process.exit(1);
  },
);
