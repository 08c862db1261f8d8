// Requests through the real gateway (primary + 2 workers) land on the upstream docs/reference/routing.md says.
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, swaggerDoc, testConfig } from '../helpers/gateway-process.js';

const users = await startUpstream(t, {
  name: 'users',
  spec: swaggerDoc('users', { '/users/{id}': ['GET'], '/files/{+path}': ['GET'] }),
});
const accounts = await startUpstream(t, { name: 'accounts' });

const gateway = await startGateway(t, {
  config: testConfig([
    { serviceType: 'swagger2', serviceLocation: users.location },
    {
      serviceType: 'static',
      serviceLocation: accounts.location,
      endpoints: [
        { method: 'GET', path: '/users/me' },
        { method: 'GET', path: '/users/{userId}' },
        { method: 'POST', path: '/orders' },
      ],
    },
  ]),
  waitFor: (line) => line.msg === 'gateway operational',
});

async function upstreamOf(method: string, path: string): Promise<string> {
  const res = await httpRequest(gateway.port, path, { method });
  t.equal(res.status, 200, `${method} ${path} is 200`);
  return (JSON.parse(res.body) as { upstream: string }).upstream;
}

t.test('a literal segment beats a placeholder', async (t) => {
  t.equal(await upstreamOf('GET', '/users/me'), 'accounts');
});

t.test('{+path} takes the rest of the path, slashes included, and forwards it as routed', async (t) => {
  const res = await httpRequest(gateway.port, '/files/a/b/c.txt?x=1');
  t.equal(res.status, 200);
  t.same(JSON.parse(res.body), { upstream: 'users', method: 'GET', path: '/files/a/b/c.txt?x=1' });
});

t.test('equivalent endpoints of two upstreams are load balanced', async (t) => {
  const answered = new Map<string, number>();
  for (let i = 0; i < 20; i++) {
    const upstream = await upstreamOf('GET', `/users/${i}`);
    answered.set(upstream, (answered.get(upstream) ?? 0) + 1);
  }
  t.same([...answered.keys()].sort(), ['accounts', 'users']);
  t.ok(answered.get('users')! >= 5 && answered.get('accounts')! >= 5, `both get a fair share: ${JSON.stringify([...answered])}`);
});

t.test('POST goes to the upstream that declares it; other methods are 405 with Allow', async (t) => {
  t.equal(await upstreamOf('POST', '/orders'), 'accounts');
  const res = await httpRequest(gateway.port, '/orders', { method: 'DELETE' });
  t.equal(res.status, 405);
  t.match(res.headers.allow, /POST/);
});

t.test('no matching template is 404 problem+json, and nothing is forwarded', async (t) => {
  const before = users.total() + accounts.total();
  const res = await httpRequest(gateway.port, '/nothing/here');
  t.equal(res.status, 404);
  t.match(res.headers['content-type'], /^application\/problem\+json/);
  t.equal(users.total() + accounts.total(), before);
});

t.test('both workers serve proxied requests (pids in the access log)', async (t) => {
  for (let i = 0; i < 40; i++) await upstreamOf('GET', '/users/me');
  const pids = await eventually(
    async () => {
      const seen = new Set(gateway.accessLines().filter((l) => l.path === '/users/me').map((l) => l.pid));
      return seen.size >= 2 ? seen : undefined;
    },
    10_000,
    100,
    'access log lines from two worker pids',
  );
  t.equal(pids.size, 2);
  const line = gateway.accessLines().find((l) => l.path === '/users/me')!;
  t.match(line, { method: 'GET', status: 200, endpoint: '/users/me', upstream: accounts.location, role: 'worker' });
  t.type(line.latencyMs, 'number');
  t.type(line.bytesOut, 'number');
  t.type(line.client, 'string');
});
