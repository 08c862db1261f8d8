// A value that came from ${VAR} is never shown in a message about the config (a variable often holds a
// secret, and the messages reach logs and terminals): `gateway check` describes it by the file's text
// and its length, and a rule that quotes it quotes the file's text.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { MAIN } from '../helpers/gateway-process.js';
import { untapped } from '../helpers/untapped.js';

const dir = mkdtempSync(join(tmpdir(), 'specgate-secrets-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function check(config: unknown, env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  const file = join(dir, 'gateway.json');
  writeFileSync(file, JSON.stringify(config));
  return new Promise((resolve) => {
    const childEnv = { PATH: process.env.PATH ?? '', ...env };
    execFile(...untapped(process.execPath, [MAIN, 'check', '--config', file], childEnv), { env: childEnv, timeout: 60_000 }, (err, _stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr: stderr.replaceAll(file, 'gw.json') });
    });
  });
}

const SECRET = 's3cr3t-t0ken value';
const static_ = (serviceLocation: string) => ({ serviceType: 'static', serviceLocation, endpoints: [{ method: 'GET', path: '/a' }] });

t.test('a schema problem with a substituted value: the reference and the length, not the value', async (t) => {
  const { code, stderr } = await check(
    { port: 0, requestId: { header: '${SECRET}' }, name: 'gw-${SECRET}', trustedProxies: { list: '${SECRET}' } },
    { SECRET },
  );
  t.equal(code, 1);
  t.notMatch(stderr, 's3cr3t', 'the value is nowhere');
  t.match(stderr, 'error: gw.json: /requestId/header: must be a header name: an HTTP token (letters, digits and !#$%&\'*+-.^_`|~; no spaces or colons) (got the value of ${SECRET}, 18 characters)\n');
  t.match(stderr, 'error: gw.json: /name: must be a single HTTP token (letters, digits, "-", "_", "."; no spaces), as it goes in the Via header (got "gw-${SECRET}" with the environment\'s values, 21 characters)\n');
  t.match(stderr, 'error: gw.json: /trustedProxies: must be an array (got {"list":"${SECRET}"})\n', 'a value holding one is shown as the file writes it');
});

t.test("a rule's problem quotes the file's text", async (t) => {
  const { code, stderr } = await check({ port: 0, upstreams: [static_('${UPSTREAM}'), static_('http://a:${PORT}/x')] }, { UPSTREAM: 'http://10.0.0.1:8080/s3cr3t-path', PORT: '8443' });
  t.equal(code, 1);
  t.notMatch(stderr, 's3cr3t');
  t.notMatch(stderr, '8443');
  t.match(stderr, 'error: gw.json: /upstreams/0/serviceLocation: "${UPSTREAM}" has a path; give only scheme://host:port\n');
  t.match(stderr, 'error: gw.json: /upstreams/1/serviceLocation: "http://a:${PORT}/x" has a path; give only scheme://host:port\n');
});

t.test('a default written in the file is shown as any value', async (t) => {
  const { stderr } = await check({ port: 0, requestId: { header: '${UNSET:-bad header}' } }, {});
  t.match(stderr, '/requestId/header: must be a header name: an HTTP token (letters, digits and !#$%&\'*+-.^_`|~; no spaces or colons) (got "bad header")');
});
