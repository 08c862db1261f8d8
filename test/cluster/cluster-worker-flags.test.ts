// Workers run with single-threaded scavenges unless the operator chose a scavenge setting
// (src/cluster/worker-flags.ts): the rule, and the flags real worker processes run with.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { nodeAcceptsScavengeFlag, probeScavengeFlag, SCAVENGE_FLAG, workerExecArgv } from '../../src/cluster/worker-flags.js';
import { startGateway, startUpstream, testConfig, type GatewayProcess } from '../helpers/gateway-process.js';

t.test('the rule', async (t) => {
  const accepted = (): boolean => true;
  t.same(workerExecArgv([], accepted), { execArgv: [SCAVENGE_FLAG], scavenging: 'single-threaded' });
  t.same(workerExecArgv(['--max-old-space-size=512'], accepted).execArgv, [SCAVENGE_FLAG, '--max-old-space-size=512'], "the primary's flags are kept");
  for (const chosen of ['--parallel-scavenge', '--no-parallel-scavenge', '--parallel_scavenge', '--single-threaded-gc', '--single_threaded_gc']) {
    let asked = false;
    const result = workerExecArgv(['--inspect=0', chosen], () => (asked = true));
    t.same(result, { execArgv: ['--inspect=0', chosen], scavenging: 'operator' }, `${chosen} is the operator's choice`);
    t.notOk(asked, 'no probe when the operator chose');
  }
  t.same(workerExecArgv(['--trace-gc'], () => false), { execArgv: ['--trace-gc'], scavenging: 'refused' }, 'a Node that refuses the flag starts workers without it');
  t.ok(probeScavengeFlag(), 'this Node accepts the flag (probed)');
  t.ok(nodeAcceptsScavengeFlag(), 'and is known to');
  t.equal(nodeAcceptsScavengeFlag('99.0.0'), true, 'a Node of an unknown major is probed (this one accepts)');
});

function argvOf(pid: number): string[] {
  return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter((arg) => arg !== '');
}

function workerPids(gateway: GatewayProcess): number[] {
  return gateway.lines.filter((line) => line.msg === 'worker started').map((line) => Number(line.workerPid));
}

const upstream = await startUpstream(t, { name: 'backend' });
const config = testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/a' }] }]);

t.test('worker processes scavenge single-threaded by default', async (t) => {
  const gateway = await startGateway(t, { config, waitFor: (line) => line.msg === 'gateway operational' });
  const pids = workerPids(gateway);
  t.equal(pids.length, 2);
  for (const pid of pids) t.ok(argvOf(pid).includes(SCAVENGE_FLAG), `worker ${pid} runs with ${SCAVENGE_FLAG}`);
  t.notOk(argvOf(gateway.child.pid!).includes(SCAVENGE_FLAG), 'the primary keeps V8 defaults');
});

t.test("an operator's scavenge flag wins", async (t) => {
  const gateway = await startGateway(t, { config, nodeFlags: ['--parallel-scavenge'], waitFor: (line) => line.msg === 'gateway operational' });
  const pids = workerPids(gateway);
  t.equal(pids.length, 2);
  for (const pid of pids) {
    const argv = argvOf(pid);
    t.ok(argv.includes('--parallel-scavenge'), `worker ${pid} runs with the operator's flag`);
    t.notOk(argv.includes(SCAVENGE_FLAG), `worker ${pid} gets no flag of ours`);
  }
});
