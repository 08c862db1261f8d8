// SIGHUP with a broken config (bad JSON, unknown key, invalid template): the old routes keep answering
// on every worker, the error is logged and shown in /metrics (lastReload) and in the health report.
import t, { type Test } from 'tap';
import type { ReloadStatus } from '../../src/builtins/healthcheck.js';
import { askWorker, eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { lastReload, reloadWith } from '../helpers/reload.js';

const upstream = await startUpstream(t, { name: 'keep' });
const good = testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/old/{id}' }] }]);
const gateway = await startGateway(t, { config: good, waitFor: (line) => line.msg === 'gateway operational' });

/** `path` answers 200 from the `keep` upstream on both workers. */
async function answersOnBothWorkers(t: Test, path: string): Promise<void> {
  const pids = new Set<string>();
  await eventually(
    async () => {
      const answer = await askWorker(gateway.port, path);
      t.equal(answer.status, 200, `${path} answers on worker ${answer.workerPid}`);
      pids.add(answer.workerPid);
      return pids.size >= 2 ? true : undefined;
    },
    5000,
    10,
    `${path} answered by both workers`,
  );
}

let version: number | null = null;

t.test('before any reload, neither /metrics nor the health report has a reload status', async (t) => {
  t.equal(await lastReload(gateway), undefined);
  const health = JSON.parse((await httpRequest(gateway.port, '/healthcheck')).body) as Record<string, unknown>;
  t.notOk('reload' in health);
});

t.test('bad JSON is refused', async (t) => {
  const status = await reloadWith(gateway, '{ "upstreams": [ }');
  t.match(status, { ok: false, applied: false, error: /gateway\.json:1:\d+: invalid JSON/ });
  t.match(status.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  t.type(status.version, 'number');
  version = status.version;
  const logged = await gateway.waitForLog((l) => /config reload refused/.test(String(l.msg)) && /invalid JSON/.test(String(l.msg)));
  t.equal(logged.level, 50, 'logged as an error');
  await answersOnBothWorkers(t, '/old/1');
  const health = JSON.parse((await httpRequest(gateway.port, '/healthcheck')).body) as { reload: ReloadStatus };
  t.same(health.reload, status, 'the health report carries the same status');
});

t.test('an unknown key is refused, naming it', async (t) => {
  const status = await reloadWith(gateway, { ...good, portt: 8080 });
  t.match(status, { ok: false, applied: false, error: /\/portt: unknown key "portt" \(did you mean "port"\?\)/ });
  t.equal(status.version, version, 'the table serving did not change');
  await gateway.waitForLog((l) => /config reload refused/.test(String(l.msg)) && /portt/.test(String(l.msg)));
  await answersOnBothWorkers(t, '/old/2');
});

t.test('an invalid template: the good endpoints apply, the reload records the bad one', async (t) => {
  const withBadTemplate = testConfig([
    {
      serviceType: 'static',
      serviceLocation: upstream.location,
      endpoints: [
        { method: 'GET', path: '/old/{id}' },
        { method: 'GET', path: '/new/{id}' },
        { method: 'GET', path: '/broken/{id' },
      ],
    },
  ]);
  const status = await reloadWith(gateway, withBadTemplate);
  t.match(status, { ok: false, applied: true, error: /1 endpoint left out \(the others serve\): .*"\/broken\/\{id" \(GET\): unbalanced braces/ });
  t.ok(status.version! > version!, 'a new table was published');
  const warned = await gateway.waitForLog((l) => /config reloaded with problems/.test(String(l.msg)));
  t.match(warned.msg, /\/broken\/\{id/);
  await answersOnBothWorkers(t, '/old/3');
  await answersOnBothWorkers(t, '/new/3');
  t.equal((await httpRequest(gateway.port, '/broken/3')).status, 404);
  const health = JSON.parse((await httpRequest(gateway.port, '/healthcheck')).body) as { upstreams: Array<{ endpoints: number }> };
  t.equal(health.upstreams[0]!.endpoints, 2, 'the upstream counts the endpoints that made it into the table');
  version = status.version;
});

t.test('a reload that brings no new problem is ok again; the old bad template is not held against it', async (t) => {
  const sameProblem = testConfig(
    [
      {
        serviceType: 'static',
        serviceLocation: upstream.location,
        weight: 2,
        endpoints: [
          { method: 'GET', path: '/old/{id}' },
          { method: 'GET', path: '/new/{id}' },
          { method: 'GET', path: '/broken/{id' },
        ],
      },
    ],
    // A setting read at start only (the port is --port's here, which the file does not override).
    { host: '127.0.0.2' },
  );
  const discoveries = () => gateway.lines.filter((l) => l.msg === 'config reload: discovering new and changed upstreams');
  const before = discoveries().length;
  const status = await reloadWith(gateway, sameProblem);
  t.match(status, { ok: true, applied: true });
  t.notOk('error' in status);
  t.same(status.warnings, ['"host" changes on restart only; the running value stays']);
  // /metrics can show the outcome before the primary's log line has come through its stdout pipe.
  await gateway.waitForLog(() => discoveries().length > before, 10_000, 'this reload\'s discovery line');
  const discovering = discoveries()[before];
  t.equal(discovering?.fetching, 0, 'a weight change alone re-discovers nothing');
  t.ok(status.version! > version!);
  await answersOnBothWorkers(t, '/new/4');
});
