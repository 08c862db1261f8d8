/**
 * Runs the public HTTP cache test suite (https://github.com/http-tests/cache-tests) against the gateway:
 * the suite's own test server is the only upstream, the gateway in front of it runs one responseCache
 * with its defaults (the shared `local` store) on 2 workers, and the suite's CLI client sends its
 * requests to the gateway. Prints our counts beside the suite's published results for shared caches
 * (its results/ directory), counted over the same tests.
 *
 *   npm run conformance:cache
 *
 * The suite is fetched with git at run time into a temporary directory (never kept in this repository):
 *   CACHE_TESTS_REPO  git URL or path to clone (default https://github.com/http-tests/cache-tests.git)
 *   CACHE_TESTS_REF   commit or branch to check out (default: the clone's HEAD)
 *   CACHE_TESTS_DIR   an existing checkout to use instead of cloning
 *   CACHE_TESTS_ID    run one test id only (prints the suite's explanation of it)
 *   CACHE_TESTS_OUT   also write our raw results (the suite's JSON format) to this file
 *   GATEWAY_WORKERS   workers (default 2)
 *   GATEWAY_MAIN      the gateway's dist/src/cli/main.js to run (default: this build's; another build to compare)
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { findFreePort } from '../src/cluster/free-port.js';

const MAIN = process.env.GATEWAY_MAIN ?? fileURLToPath(new URL('../bundle/gateway.mjs', import.meta.url));
const REPO = process.env.CACHE_TESTS_REPO ?? 'https://github.com/http-tests/cache-tests.git';
const WORKERS = process.env.GATEWAY_WORKERS ?? '2';
const ONLY = process.env.CACHE_TESTS_ID ?? '';

type Result = true | [string, string?] | false;
interface SuiteTest {
  id: string;
  kind?: 'required' | 'optimal' | 'check';
  browser_only?: boolean;
  depends_on?: string[];
}
interface Suite {
  id: string;
  tests: SuiteTest[];
}
interface Published {
  file: string;
  name: string;
  type: string;
  version?: string;
}

const children: ChildProcess[] = [];
const temporary: string[] = [];

function cleanUp(): void {
  for (const child of children) {
    try {
      // Each child leads its own process group (the gateway's workers are in the gateway's).
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  for (const dir of temporary) rmSync(dir, { recursive: true, force: true });
}
process.on('exit', cleanUp);
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(130));

function checkout(): string {
  if (process.env.CACHE_TESTS_DIR !== undefined) return process.env.CACHE_TESTS_DIR;
  const dir = mkdtempSync(join(tmpdir(), 'cache-tests-'));
  temporary.push(dir);
  execFileSync('git', ['clone', '--quiet', ...(process.env.CACHE_TESTS_REF === undefined && REPO.includes('://') ? ['--depth', '1'] : []), REPO, dir], { stdio: 'inherit' });
  if (process.env.CACHE_TESTS_REF !== undefined) execFileSync('git', ['-C', dir, 'checkout', '--quiet', process.env.CACHE_TESTS_REF], { stdio: 'inherit' });
  return dir;
}

/**
 * The suite's client imports undici for its interim-response tests; rather than installing the suite's
 * dependencies, it borrows this repository's copy.
 */
function lendUndici(suite: string): void {
  const target = join(suite, 'node_modules', 'undici');
  if (existsSync(target)) return;
  const ours = fileURLToPath(new URL('../../node_modules/undici', import.meta.url));
  if (!existsSync(ours)) return;
  mkdirSync(join(suite, 'node_modules'), { recursive: true });
  symlinkSync(ours, target, 'dir');
}

function start(command: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv }, ready: RegExp, what: string): Promise<ChildProcess> {
  const child = spawn(command, args, { ...options, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`${what} did not start within 60 s:\n${output}`)), 60_000);
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      if (ready.test(output)) {
        clearTimeout(timer);
        resolve(child);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${what} exited (${code}):\n${output}`)));
  });
}

function gatewayConfig(port: number, serverPort: number): unknown {
  const methods = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'M-SEARCH'];
  const endpoints = [
    ...methods.flatMap((method) => [
      { method, path: '/test/{id}' },
      { method, path: '/test/{id}/{file}' },
    ]),
    // The suite's own bookkeeping: test configs in, server state out; never cached.
    { method: 'PUT', path: '/config/{id}', 'x-disabled-middleware': ['cache'] },
    { method: 'GET', path: '/state/{id}', 'x-disabled-middleware': ['cache'] },
  ];
  return {
    host: '127.0.0.1',
    port,
    upstreams: [{ serviceType: 'static', serviceLocation: `http://127.0.0.1:${serverPort}`, endpoints }],
    accessLog: { enabled: false },
    middleware: [{ id: 'cache', type: 'responseCache' }],
  };
}

async function main(): Promise<void> {
  const suite = checkout();
  const commit = execFileSync('git', ['-C', suite, 'rev-parse', 'HEAD']).toString().trim();
  lendUndici(suite);
  const serverPort = await findFreePort('127.0.0.1');
  const gatewayPort = await findFreePort('127.0.0.1');
  const work = mkdtempSync(join(tmpdir(), 'cache-conformance-'));
  temporary.push(work);
  const npmEnv = { ...process.env, npm_config_protocol: 'http', npm_config_port: String(serverPort), npm_config_pidfile: join(work, 'server.pid') };
  await start(process.execPath, ['test-engine/server/server.mjs'], { cwd: suite, env: npmEnv }, /Listening on/, 'the suite\'s test server');
  const configFile = join(work, 'gateway.json');
  writeFileSync(configFile, JSON.stringify(gatewayConfig(gatewayPort, serverPort), null, 2));
  await start(process.execPath, [MAIN, 'start', '--config', configFile, '--workers', WORKERS], { env: { ...process.env, GATEWAY_LOG_LEVEL: 'info' } }, /gateway operational/, 'the gateway');

  const base = `http://127.0.0.1:${gatewayPort}`;
  const cli = spawn(process.execPath, ['--no-warnings', 'test-engine/cli.mjs'], {
    cwd: suite,
    env: { ...process.env, npm_config_base: base, npm_config_id: ONLY, npm_package_config_id: '' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  cli.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => cli.once('exit', resolve));
  if (ONLY !== '') {
    process.stdout.write(output);
    return;
  }
  if (code !== 0) throw new Error(`the suite's client exited with ${code}:\n${output}`);
  const ours = JSON.parse(output) as Record<string, Result>;
  if (process.env.CACHE_TESTS_OUT !== undefined) writeFileSync(process.env.CACHE_TESTS_OUT, JSON.stringify(ours, null, 2));

  const { default: suites } = (await import(pathToFileURL(join(suite, 'tests/index.mjs')).href)) as { default: Suite[] };
  const { determineTestResult, resultTypes } = (await import(pathToFileURL(join(suite, 'test-engine/lib/results.mjs')).href)) as {
    determineTestResult(suites: Suite[], id: string, results: Record<string, Result>): string[];
    resultTypes: Record<string, string[]>;
  };
  const { default: index } = (await import(pathToFileURL(join(suite, 'results/index.mjs')).href)) as { default: Published[] };
  const tests = suites.flatMap((s) => s.tests).filter((test) => test.browser_only !== true);
  const kindOf = (test: SuiteTest): string => test.kind ?? 'required';

  const count = (results: Record<string, Result>): Record<string, number> => {
    const out: Record<string, number> = {};
    for (const test of tests) {
      const type = determineTestResult(suites, test.id, results);
      const name = Object.keys(resultTypes).find((key) => resultTypes[key] === type) ?? 'unknown';
      const bucket = name === 'pass' || name === 'yes' ? `${kindOf(test)}:pass` : name === 'fail' || name === 'optional_fail' || name === 'no' ? `${kindOf(test)}:fail` : name;
      out[bucket] = (out[bucket] ?? 0) + 1;
    }
    return out;
  };
  const rows: Array<{ name: string; counts: Record<string, number> }> = [{ name: 'specgate (this run)', counts: count(ours) }];
  for (const item of index) {
    if (item.type !== 'rev-proxy' && item.type !== 'cdn') continue;
    const file = join(suite, 'results', item.file);
    if (!existsSync(file)) continue;
    rows.push({ name: `${item.name} ${item.version ?? ''}`.trim(), counts: count(JSON.parse(readFileSync(file, 'utf8')) as Record<string, Result>) });
  }
  const totals = { required: 0, optimal: 0, check: 0 };
  for (const test of tests) totals[kindOf(test) as keyof typeof totals]++;
  console.log(`http-tests/cache-tests ${commit.slice(0, 12)}: ${tests.length} tests for shared caches (${totals.required} required, ${totals.optimal} optimal, ${totals.check} checks)`);
  console.log('| cache | required passed | optimal passed | checks yes | setup failed | dependency failed | harness failed | untested |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const { name, counts } of rows) {
    const n = (key: string): number => counts[key] ?? 0;
    console.log(`| ${name} | ${n('required:pass')} | ${n('optimal:pass')} | ${n('check:pass')} | ${n('setup_fail') + n('retry')} | ${n('dependency_fail')} | ${n('harness_fail')} | ${n('untested')} |`);
  }
  const failed = tests.filter((test) => kindOf(test) !== 'check' && determineTestResult(suites, test.id, ours)[0] !== resultTypes.pass![0]);
  console.log(`\nNot passed by specgate (required and optimal): ${failed.length}`);
  for (const test of failed) {
    const result = ours[test.id];
    console.log(`  ${test.id} [${kindOf(test)}]: ${Array.isArray(result) ? result.join(': ') : String(result)}`);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  },
);
