// HTTPS contenders: the gateway and nginx terminating TLS with the same certificate in front of the
// same origin, same worker count. wrk over https, keep-alive and `Connection: close` (one TLS handshake
// per request), interleaved rounds; prints req/s and the gateway/nginx ratio of each round.
// The origin is a node:http server in this process (one core's worth, shared by both contenders).
// BENCH_TLS_SECONDS (default 5), BENCH_TLS_ROUNDS (default 2), BENCH_TLS_WORKERS (default 2).
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findFreePort } from '../src/cluster/free-port.js';

const SECONDS = Number(process.env.BENCH_TLS_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_TLS_ROUNDS ?? 2);
const WORKERS = Number(process.env.BENCH_TLS_WORKERS ?? 2);
const MAIN = fileURLToPath(new URL('../bundle/gateway.mjs', import.meta.url));

const dir = mkdtempSync(join(tmpdir(), 'specgate-bench-tls-'));
const children: ChildProcess[] = [];
const cleanup = (): void => {
  for (const child of children) {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // gone
    }
  }
  rmSync(dir, { recursive: true, force: true });
};
process.on('exit', cleanup);

const cert = join(dir, 'cert.pem');
const key = join(dir, 'key.pem');
execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=bench.test', '-addext', 'subjectAltName=DNS:bench.test'], { stdio: 'ignore' });

const body = JSON.stringify({ id: 1, name: 'item', tags: ['a', 'b'] });
const origin = createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
});
origin.keepAliveTimeout = 60_000;
await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
const originUrl = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;

function start(command: string, args: string[], ready: (out: string) => boolean): Promise<void> {
  const child = spawn(command, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${command} did not start: ${out}`)), 120_000);
    const check = (chunk: Buffer): void => {
      out += chunk.toString();
      if (ready(out)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', check);
    child.stderr!.on('data', check);
    child.on('exit', (code) => reject(new Error(`${command} exited ${code}: ${out}`)));
  });
}

const gwPort = await findFreePort('127.0.0.1');
const gwTls = await findFreePort('127.0.0.1');
const gwConfig = join(dir, 'gateway.json');
writeFileSync(
  gwConfig,
  JSON.stringify({
    host: '127.0.0.1',
    port: gwPort,
    accessLog: { enabled: false },
    tls: { port: gwTls, certificates: [{ certFile: cert, keyFile: key, serverNames: ['bench.test'] }] },
    upstreams: [{ serviceType: 'static', serviceLocation: originUrl, endpoints: [{ method: 'GET', path: '/items/{id}' }] }],
  }),
);
await start(process.execPath, [MAIN, 'start', '--config', gwConfig, '--workers', String(WORKERS)], (out) => out.includes('gateway operational'));
await new Promise((r) => setTimeout(r, 1000));

const nginxTls = await findFreePort('127.0.0.1');
const nginxConf = join(dir, 'nginx.conf');
writeFileSync(
  nginxConf,
  `worker_processes ${WORKERS};
pid ${dir}/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  upstream origin { server ${originUrl.slice(7)}; keepalive 64; }
  server {
    listen 127.0.0.1:${nginxTls} ssl;
    ssl_certificate ${cert};
    ssl_certificate_key ${key};
    ssl_protocols TLSv1.2 TLSv1.3;
    keepalive_requests 100000000;
    location / { proxy_pass http://origin; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
`,
);
spawnNginx();
await new Promise((r) => setTimeout(r, 1500));

function spawnNginx(): void {
  const child = spawn('nginx', ['-p', dir, '-e', join(dir, 'error.log'), '-c', nginxConf, '-g', 'daemon off;'], { detached: true, stdio: 'ignore' });
  children.push(child);
}

/** Asynchronous: the origin runs in this process and must answer while wrk runs. */
async function wrk(port: number, close: boolean): Promise<number> {
  const args = ['-t2', close ? '-c16' : '-c32', `-d${SECONDS}s`, '--timeout', '5s'];
  if (close) args.push('-H', 'Connection: close');
  const out = await new Promise<string>((resolve, reject) =>
    execFile('wrk', [...args, `https://127.0.0.1:${port}/items/1`], { encoding: 'utf8' }, (err, stdout) => (err ? reject(err) : resolve(stdout))),
  );
  const errors = /Socket errors: (.*)/.exec(out)?.[1];
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1];
  if (non2xx !== undefined) console.log(`  (${non2xx} non-2xx answers on port ${port})`);
  if (errors !== undefined && close === false) console.log(`  (socket errors on port ${port}: ${errors})`);
  return Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? 0);
}

console.log(`HTTPS, ${WORKERS} workers each, ${SECONDS} s per run, ${ROUNDS} rounds (node ${process.version})`);
for (const close of [false, true]) {
  const label = close ? 'Connection: close (one handshake per request)' : 'keep-alive';
  for (let round = 1; round <= ROUNDS; round++) {
    const gateway = await wrk(gwTls, close);
    const nginx = await wrk(nginxTls, close);
    console.log(`${label}, round ${round}: gateway ${gateway.toFixed(0)} req/s, nginx ${nginx.toFixed(0)} req/s, ratio ${(gateway / nginx).toFixed(2)}x`);
  }
}
origin.close();
process.exit(0);
