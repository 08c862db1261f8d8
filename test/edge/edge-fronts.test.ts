// The front recipes of docs/edge.md, tried against a real HAProxy and nginx on loopback: with the
// recipe the gateway is UP and serves; with the front's default (HTTP/1.0) it is not, because uWS 20.30
// drops HTTP/1.0 requests without an answer (native-notes.md). And the gateway's own early answers
// (404, 405, 413 before the body was read) reach the client through nginx, not as nginx's 502.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { findFreePort } from '../../src/cluster/free-port.js';
import { httpRequest, startGateway, startUpstream, testConfig, type Teardown } from '../helpers/gateway-process.js';
import { reapOnExit } from '../helpers/reaper.js';

const dir = mkdtempSync(join(tmpdir(), 'specgate-fronts-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function run(t: Teardown, command: string, args: string[]): void {
  const child = spawn(command, args, { stdio: 'ignore' });
  reapOnExit(child, { group: false });
  t.teardown(() => {
    child.kill('SIGKILL');
  });
}

async function untilAnswer(port: number, path: string, wanted: (status: number) => boolean, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let last = 0;
  while (Date.now() < deadline) {
    try {
      last = (await httpRequest(port, path, { timeoutMs: 5000 })).status;
      if (wanted(last)) return last;
    } catch {
      last = -1;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return last;
}

const app = await startUpstream(t, { name: 'app' });
const gateway = await startGateway(t, {
  config: testConfig([{ serviceType: 'static', serviceLocation: app.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }]),
  waitFor: (line) => line.msg === 'gateway operational',
  workers: 1,
  startTimeoutMs: 60_000,
});

function haproxyConfig(port: number, check: string): string {
  return `global
  log stderr format raw local0 emerg
defaults
  mode http
  timeout connect 2s
  timeout client 5s
  timeout server 5s
frontend fe
  bind 127.0.0.1:${port}
  default_backend gw
backend gw
  option httpchk
${check}
  server gw1 127.0.0.1:${gateway.port} check inter 200ms fall 1 rise 1
`;
}

t.test('HAProxy: http-check send ... ver HTTP/1.1 keeps the gateway UP; the default HTTP/1.0 check marks it DOWN', async (t) => {
  const good = await findFreePort('127.0.0.1');
  const goodFile = join(dir, 'good.cfg');
  writeFileSync(goodFile, haproxyConfig(good, '  http-check send meth GET uri /healthcheck ver HTTP/1.1 hdr Host gateway\n  http-check expect status 200'));
  run(t, 'haproxy', ['-db', '-f', goodFile]);
  await new Promise((r) => setTimeout(r, 2000));
  t.equal(await untilAnswer(good, '/items/1', (s) => s === 200, 10_000), 200, 'with the recipe, requests pass');

  const bad = await findFreePort('127.0.0.1');
  const badFile = join(dir, 'bad.cfg');
  writeFileSync(badFile, haproxyConfig(bad, ''));
  run(t, 'haproxy', ['-db', '-f', badFile]);
  await new Promise((r) => setTimeout(r, 2000));
  t.equal(await untilAnswer(bad, '/items/1', (s) => s === 503, 15_000), 503, 'with the default HTTP/1.0 check the server is DOWN: 503');
});

function nginxConfig(port: number, recipe: string): string {
  return `daemon off;
master_process off;
pid ${dir}/nginx-${port}.pid;
error_log ${dir}/nginx-${port}.log;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path ${dir}/body-${port};
  proxy_temp_path ${dir}/proxy-${port};
  fastcgi_temp_path ${dir}/fastcgi-${port};
  uwsgi_temp_path ${dir}/uwsgi-${port};
  scgi_temp_path ${dir}/scgi-${port};
  map $http_upgrade $connection_upgrade { default upgrade; "" ""; }
  upstream gateway { server 127.0.0.1:${gateway.port}; keepalive 16; keepalive_timeout 5s; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://gateway;
      proxy_read_timeout 2s;
${recipe}
    }
  }
}
`;
}

/** docs/edge.md's nginx recipe (its map and keepalive_timeout are in nginxConfig). */
const RECIPE = '      proxy_http_version 1.1;\n      proxy_set_header Connection $connection_upgrade;\n      proxy_set_header Upgrade $http_upgrade;\n      proxy_set_header Host $host;';

t.test('nginx: proxy_http_version 1.1 serves; the default HTTP/1.0 gets no answer from the gateway', async (t) => {
  const good = await findFreePort('127.0.0.1');
  const goodFile = join(dir, 'good.conf');
  writeFileSync(goodFile, nginxConfig(good, RECIPE));
  run(t, 'nginx', ['-c', goodFile, '-e', join(dir, `nginx-${good}.err`)]);
  t.equal(await untilAnswer(good, '/items/1', (s) => s === 200, 10_000), 200, 'with the recipe, requests pass');

  const bad = await findFreePort('127.0.0.1');
  const badFile = join(dir, 'bad.conf');
  writeFileSync(badFile, nginxConfig(bad, ''));
  run(t, 'nginx', ['-c', badFile, '-e', join(dir, `nginx-${bad}.err`)]);
  const status = await untilAnswer(bad, '/items/1', (s) => s >= 500, 10_000);
  t.equal(status, 504, 'without it nginx times out waiting for an answer (504)');
});

t.test('nginx: an answer the gateway gives before reading a large body reaches the client (not 502)', async (t) => {
  // nginx writes the whole body before it reads the answer. A gateway that closed right after answering
  // would reset the connection under nginx's writes: "Broken pipe while sending request", 502, and a
  // failure counted against the gateway (max_fails).
  const port = await findFreePort('127.0.0.1');
  const file = join(dir, 'bodies.conf');
  writeFileSync(file, nginxConfig(port, `${RECIPE}\n      client_max_body_size 64m;`));
  run(t, 'nginx', ['-c', file, '-e', join(dir, `nginx-${port}.err`)]);
  t.equal(await untilAnswer(port, '/items/1', (s) => s === 200, 10_000), 200, 'nginx is up');
  const body = 'b'.repeat(4 * 1024 * 1024);
  const statuses: number[] = [];
  for (let i = 0; i < 6; i++) {
    statuses.push((await httpRequest(port, '/nowhere', { method: 'POST', body, headers: { 'content-type': 'text/plain' } })).status);
    statuses.push((await httpRequest(port, '/items/1', { method: 'POST', body, headers: { 'content-type': 'text/plain' } })).status);
  }
  t.same(statuses, Array.from({ length: 6 }, () => [404, 405]).flat(), 'every answer is the gateway\'s own 404 or 405');
  t.equal(await untilAnswer(port, '/items/1', (s) => s === 200, 2000), 200, 'and the gateway still serves through nginx');
});
