// One gateway per port. The workers listen with SO_REUSEPORT, so without a check a second gateway on
// a port would share it silently and take half its connections. A start on a port anything holds
// exits 1 with one line naming the port and the holder; a reload that moves to such a port is refused.
// The same for tls.port, which must also differ from the public and the admin port.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { findFreePort } from '../../src/cluster/free-port.js';
import { httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { reapOnExit } from '../helpers/reaper.js';
import { reloadWith } from '../helpers/reload.js';
import { untapped } from '../helpers/untapped.js';
import { CertificateDir } from '../helpers/certs.js';
import { gateway as cli } from '../helpers/cli.js';
import { files, presented } from '../helpers/tls-client.js';
import { within } from '../helpers/within.js';

const upstream = await startUpstream(t, { name: 'backend' });
const config = (overrides: Record<string, unknown> = {}) =>
  testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/ok' }] }], overrides);

/** Another program (a plain node:net server in its own process) listening on a port; resolves with its pid and port. */
async function foreignHolder(t: Test): Promise<{ pid: number; port: number }> {
  const child = spawn(
    ...untapped(process.execPath, ['-e', "const s = require('node:net').createServer(); s.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => console.log(s.address().port))"]),
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  reapOnExit(child, { group: false });
  t.teardown(() => void child.kill('SIGKILL'));
  const port = await new Promise<number>((resolve) => child.stdout!.once('data', (chunk: Buffer) => resolve(Number(chunk.toString().trim()))));
  return { pid: child.pid!, port };
}

/** The lines of a start that failed: it must exit 1 without starting any worker. */
function stderrLines(text: string): string[] {
  return text.split('\n').filter((line) => line !== '');
}

t.test('a port another program holds: exit 1, one line naming the port and the program, no worker started', async (t) => {
  const holder = await foreignHolder(t);
  const gateway = await startGateway(t, { config: config(), port: holder.port, waitForListening: false });
  const exit = await within(gateway.exited, 60_000, 'still running');
  t.same(exit, { code: 1, signal: null }, 'exits 1 (no crash loop)');
  const lines = stderrLines(gateway.text());
  t.equal(lines.length, 1, `one line on stderr: ${gateway.text()}`);
  t.match(lines[0], `gateway start: port ${holder.port} on 127.0.0.1 is already in use by pid ${holder.pid} (`);
  t.match(lines[0], /node -e/, 'names the holding program');
  t.notOk(gateway.lines.some((l) => l.msg === 'worker started'), 'no worker was started');
  t.ok(gateway.lines.some((l) => l.level === 50 && /already in use/.test(String(l.msg))), 'the JSON log line is kept');
});

t.test('a second gateway on a running gateway\'s port: exit 1 naming the first; the first keeps every request', async (t) => {
  const first = await startGateway(t, { config: config(), port: await findFreePort('127.0.0.1'), startTimeoutMs: 60_000 });
  const second = await startGateway(t, { config: config(), port: first.port, waitForListening: false });
  const exit = await within(second.exited, 60_000, 'still running');
  t.same(exit, { code: 1, signal: null });
  const lines = stderrLines(second.text());
  t.equal(lines.length, 1, `one line on stderr: ${second.text()}`);
  t.match(lines[0], `port ${first.port} on 127.0.0.1 is already in use by another gateway (pid ${first.child.pid}: `);
  t.notOk(second.lines.some((l) => l.msg === 'worker started'), 'the second started no worker');
  for (let i = 0; i < 12; i++) {
    const answer = await httpRequest(first.port, '/ok');
    t.equal(answer.status, 200, `request ${i + 1} answered by the first gateway`);
  }
});

t.test('a reload that moves to a held port is refused the same way; the gateway keeps serving on its port', async (t) => {
  const holder = await foreignHolder(t);
  const gateway = await startGateway(t, { config: config({ port: await findFreePort('127.0.0.1') }), port: null, startTimeoutMs: 60_000 });
  // The command line's --port overrides the file, so this gateway runs without one to see the file's port.
  const status = await reloadWith(gateway, config({ port: holder.port }));
  t.match(status, { ok: false, applied: false, error: `port ${holder.port} on 127.0.0.1 is already in use by pid ${holder.pid} (` });
  t.ok(gateway.lines.some((l) => /^config reload refused, the current config keeps serving: port \d+ on 127\.0\.0\.1 is already in use/.test(String(l.msg))));
  t.equal((await httpRequest(gateway.port, '/ok')).status, 200);
});

t.test('tls.port: held by another program, a start exits 1 naming it (no worker crash loop)', async (t) => {
  const certs = new CertificateDir(t);
  const cert = certs.make('gw', 'gw');
  const holder = await foreignHolder(t);
  const gateway = await startGateway(t, { config: config({ tls: { port: holder.port, certificates: [files(cert)] } }), waitForListening: false });
  const exit = await within(gateway.exited, 60_000, 'still running');
  t.same(exit, { code: 1, signal: null }, 'exits 1');
  const lines = stderrLines(gateway.text());
  t.equal(lines.length, 1, `one line on stderr: ${gateway.text()}`);
  t.match(lines[0], `gateway start: TLS port ${holder.port} on 127.0.0.1 is already in use by pid ${holder.pid} (`);
  t.notOk(gateway.lines.some((l) => l.msg === 'worker started'), 'no worker was started');
});

t.test("tls.port: a second gateway on a running gateway's TLS port exits 1 naming the first; the first keeps every handshake", async (t) => {
  const certs = new CertificateDir(t);
  const one = certs.make('one', 'one');
  const two = certs.make('two', 'two');
  const tlsPort = await findFreePort('127.0.0.1');
  const first = await startGateway(t, { config: config({ tls: { port: tlsPort, certificates: [files(one)] } }), startTimeoutMs: 60_000 });
  const second = await startGateway(t, { config: config({ tls: { port: tlsPort, certificates: [files(two)] } }), waitForListening: false });
  const exit = await within(second.exited, 60_000, 'still running');
  t.same(exit, { code: 1, signal: null });
  const lines = stderrLines(second.text());
  t.equal(lines.length, 1, `one line on stderr: ${second.text()}`);
  t.match(lines[0], `TLS port ${tlsPort} on 127.0.0.1 is already in use by another gateway (pid ${first.child.pid}: `);
  t.notOk(second.lines.some((l) => l.msg === 'worker started'), 'the second started no worker');
  for (let i = 0; i < 8; i++) t.equal((await presented(tlsPort, undefined)).cn, 'one', `handshake ${i + 1} with the first gateway's certificate`);
});

t.test('tls.port equal to the public or the admin port: check and start refuse it naming /tls/port', async (t) => {
  const certs = new CertificateDir(t);
  const cert = certs.make('gw', 'gw');
  const port = await findFreePort('127.0.0.1');
  const dir = mkdtempSync(join(tmpdir(), 'specgate-tls-port-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const write = (name: string, overrides: Record<string, unknown>) => {
    const file = join(dir, name);
    writeFileSync(file, JSON.stringify(config(overrides)));
    return file;
  };
  const samePublic = write('public.json', { port, tls: { port, certificates: [files(cert)] } });
  const sameAdmin = write('admin.json', { admin: { port }, tls: { port, certificates: [files(cert)] } });
  const checked = await cli('check', '--config', samePublic);
  t.equal(checked.code, 1);
  t.match(checked.stderr, `${samePublic}: /tls/port: ${port} is also the public port; the TLS listener needs a port of its own`);
  const checkedAdmin = await cli('check', '--config', sameAdmin);
  t.equal(checkedAdmin.code, 1);
  t.match(checkedAdmin.stderr, `${sameAdmin}: /tls/port: ${port} is also the admin port; the TLS listener needs a port of its own`);
  const off = write('off.json', { port, tls: { port, plainPort: 'off', certificates: [files(cert)] } });
  t.equal((await cli('check', '--config', off)).code, 0, 'with plainPort "off" the public port is not opened: no clash');

  // --port on the command line meets the file's tls.port.
  const gateway = await startGateway(t, { config: config({ tls: { port, certificates: [files(cert)] } }), port, waitForListening: false });
  const exit = await within(gateway.exited, 60_000, 'still running');
  t.same(exit, { code: 1, signal: null }, 'start exits 1');
  t.match(gateway.text(), `/tls/port: ${port} is also the public port; the TLS listener needs a port of its own`);
  t.notOk(gateway.lines.some((l) => l.msg === 'worker started'), 'no worker was started');
});

t.test('a reload that moves tls.port to a held port is refused; TLS keeps serving on its port', async (t) => {
  const certs = new CertificateDir(t);
  const cert = certs.make('gw', 'gw');
  const holder = await foreignHolder(t);
  const tlsPort = await findFreePort('127.0.0.1');
  const gateway = await startGateway(t, { config: config({ tls: { port: tlsPort, certificates: [files(cert)] } }), startTimeoutMs: 60_000 });
  const status = await reloadWith(gateway, config({ tls: { port: holder.port, certificates: [files(cert)] } }));
  t.match(status, { ok: false, applied: false, error: `TLS port ${holder.port} on 127.0.0.1 is already in use by pid ${holder.pid} (` });
  t.equal((await presented(tlsPort, undefined)).cn, 'gw');
});

/** The settings a reload of these files only warns about, as lastReload reports them. */
const RESTART_WARNING = (setting: string) => `"${setting}" changes on restart only; the running value stays`;

t.test('a reload that swaps port and admin.port (ports this gateway holds) is not refused: they are warned about, the rest applies', async (t) => {
  const second = await startUpstream(t, { name: 'second' });
  const publicPort = await findFreePort('127.0.0.1');
  const adminPort = await findFreePort('127.0.0.1');
  const gateway = await startGateway(t, { config: config({ port: publicPort, admin: { port: adminPort } }), port: null, startTimeoutMs: 60_000 });
  t.equal(gateway.port, publicPort);
  const upstreams = [
    { serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/ok' }] },
    { serviceType: 'static', serviceLocation: second.location, endpoints: [{ method: 'GET', path: '/new' }] },
  ];
  const status = await reloadWith(gateway, { ...config({ port: adminPort, admin: { port: publicPort } }), upstreams }, { metricsPort: adminPort });
  t.match(status, { ok: true, applied: true }, `applied: ${JSON.stringify(status)}`);
  t.same([...(status.warnings ?? [])].sort(), [RESTART_WARNING('admin'), RESTART_WARNING('port')], 'the restart-only settings are warned about');
  t.notOk(gateway.lines.some((l) => /already in use/.test(String(l.msg))), 'no port is said to be held by another process');
  t.equal((await httpRequest(publicPort, '/new')).status, 200, 'the new upstream is routed on the running public port');
  t.equal((await httpRequest(publicPort, '/ok')).status, 200);
  // /spec: the health report may be 503 for a moment after a reload (the access log listener re-prepared).
  t.equal((await httpRequest(adminPort, '/spec')).status, 200, 'the admin listener stays on its port');
  t.equal((await httpRequest(publicPort, '/metrics')).status, 404, 'and the public port is still not the admin listener');
});

t.test('a reload that swaps tls.port and admin.port is not refused either', async (t) => {
  const certs = new CertificateDir(t);
  const cert = certs.make('gw', 'gw');
  const tlsPort = await findFreePort('127.0.0.1');
  const adminPort = await findFreePort('127.0.0.1');
  const port = await findFreePort('127.0.0.1');
  const gateway = await startGateway(t, { config: config({ port, admin: { port: adminPort }, tls: { port: tlsPort, certificates: [files(cert)] } }), port: null, startTimeoutMs: 60_000 });
  const status = await reloadWith(gateway, config({ port, admin: { port: tlsPort }, tls: { port: adminPort, certificates: [files(cert)] } }), { metricsPort: adminPort });
  t.match(status, { ok: true, applied: true }, `applied: ${JSON.stringify(status)}`);
  t.same([...(status.warnings ?? [])].sort(), [RESTART_WARNING('admin'), RESTART_WARNING('tls.port')]);
  t.equal((await presented(tlsPort, undefined)).cn, 'gw', 'TLS stays on its port');
  // /spec: the health report may be 503 for a moment after a reload (the access log listener re-prepared).
  t.equal((await httpRequest(adminPort, '/spec')).status, 200, 'the admin listener stays on its port');
});
