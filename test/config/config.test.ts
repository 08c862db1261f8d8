import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig, parseConfig } from '../../src/config/load.js';
import { configSchema } from '../../src/config/schema.js';

const FILE = 'config/prod.json';
const swagger2 = (serviceLocation: string, extra: object = {}) => ({ serviceType: 'swagger2', serviceLocation, ...extra });

/** The message parseConfig throws for this config (an object is written as JSON). */
function errorOf(config: object | string, env: NodeJS.ProcessEnv = {}): ConfigError {
  const text = typeof config === 'string' ? config : JSON.stringify(config, null, 2);
  try {
    parseConfig(text, FILE, env);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('expected a ConfigError');
}
const messageOf = (config: object | string, env: NodeJS.ProcessEnv = {}) => errorOf(config, env).message;

t.test('an empty object gets every default', async (t) => {
  t.same(parseConfig('{}', FILE), {
    port: 8080,
    host: '0.0.0.0',
    workers: 0,
    name: 'specgate',
    logLevel: 'info',
    trustedProxies: [],
    encodedSlashes: 'reject',
    paths: { healthcheck: '/healthcheck', metrics: '/metrics', spec: '/spec' },
    upstreams: [],
    upstreamWeighting: { stepCount: 100, stepDurationMs: 6000 },
    timeouts: { upstreamMs: 30000, connectMs: 5000, clientRequestMs: 30000, shutdownDrainMs: 0, shutdownGraceMs: 10000 },
    upstreamPool: { connections: 1024, maxQueue: 1024, idleTimeoutMs: 4000, maxResponseHeaderBytes: 16384 },
    limits: { maxBodyBytes: 10 * 1024 * 1024, maxHeaderBytes: 16 * 1024, maxUrlBytes: 8192, chunkedRequestBodies: true },
    circuitBreaker: { hostFailures: 50, endpointFailures: 25, resetMs: 10000 },
    discovery: { fetchTimeoutMs: 5000, retries: 5, backoffMs: 200, refreshIntervalMs: 30000 },
    accessLog: { enabled: true, destination: 'stdout', omit: [] },
    requestId: { enabled: true, header: 'x-request-id' },
    kvStores: {},
    middleware: [],
    listeners: [],
    metrics: { enabled: true, histogramBucketsS: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30] },
    websocket: { enabled: true, maxPayloadBytes: 16 * 1024 * 1024, idleTimeoutMs: 120_000, compression: false },
  });
});

t.test('upstream defaults and normalization', async (t) => {
  const config = parseConfig(
    JSON.stringify({
      upstreams: [
        swagger2('http://Svc1:8081/'),
        { serviceType: 'static', serviceLocation: 'https://api.example.com:443', endpoints: [{ method: 'get', path: '/a' }] },
      ],
      paths: { metrics: '/stats' },
    }),
    FILE,
  );
  t.same(config.upstreams[0], { serviceType: 'swagger2', serviceLocation: 'http://svc1:8081', weight: 1, specPath: '/spec' });
  t.equal(config.upstreams[1]!.serviceLocation, 'https://api.example.com', 'default port dropped');
  t.equal(config.upstreams[1]!.endpoints![0]!.method, 'GET', 'method upper-cased');
  t.same(config.paths, { healthcheck: '/healthcheck', metrics: '/stats', spec: '/spec' }, 'partial object keeps other defaults');
});

t.test('the input is not mutated and comments are allowed', async (t) => {
  const text = '{\n  // the public port\n  "port": 9000 /* not 80 */\n}';
  t.equal(parseConfig(text, FILE).port, 9000);
});

t.test('bad JSON names the file, line and column', async (t) => {
  t.equal(messageOf('{\n  "port": 8080\n  "host": "x"\n}'), `${FILE}:3:3: invalid JSON: comma expected, found "\\""`);
  const error = errorOf('{\n  "port": 8080,\n}');
  t.equal(error.message, `${FILE}:3:1: invalid JSON: trailing comma before "}"`);
  t.equal(error.line, 3);
  t.equal(error.column, 1);
  t.equal(error.file, FILE);
  t.equal(messageOf('{"port": 80'), `${FILE}:1:12: invalid JSON: close brace expected (the file ends too early)`);
  t.equal(messageOf('   \n'), `${FILE}: the file is empty; it must hold a JSON object`);
  t.equal(messageOf('{"port": 1, "port": 2}'), `${FILE}: /port: duplicate key "port" on line 1 (first on line 1); JSON would silently keep the last one`);
});

t.test('wrong types', async (t) => {
  t.equal(messageOf({ port: '8080' }), `${FILE}: /port: must be an integer (got "8080")`);
  t.equal(messageOf({ accessLog: { enabled: 'yes' } }), `${FILE}: /accessLog/enabled: must be true or false (got "yes")`);
  t.equal(messageOf({ upstreams: {} }), `${FILE}: /upstreams: must be an array (got {})`);
  t.equal(messageOf([]), `${FILE}: must be an object (got [])`);
  t.equal(messageOf({ port: 70000 }), `${FILE}: /port: must be <= 65535 (got 70000)`);
  t.equal(
    messageOf({ logLevel: 'warning' }),
    `${FILE}: /logLevel: must be one of "fatal", "error", "warn", "info", "debug", "trace", "silent" (got "warning") (did you mean "warn"?)`,
  );
  t.equal(
    messageOf({ name: 'spec gate' }),
    `${FILE}: /name: must be a single HTTP token (letters, digits, "-", "_", "."; no spaces), as it goes in the Via header (got "spec gate")`,
  );
});

t.test('keys named like Object.prototype members are unknown keys like any other', async (t) => {
  // Found by config-fuzz: {"__proto__": false} was answered with the prototype object as its reason.
  for (const key of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
    const error = errorOf(`{"${key}": false}`);
    t.equal(error.pointer, `/${key}`);
    t.match(error.reason, new RegExp(`^unknown key "${key}"`), key);
    t.match(messageOf(`{"timeouts": {"${key}": 1}}`), new RegExp(`^${FILE}: /timeouts/${key}: unknown key "${key}"`), `nested ${key}`);
  }
});

t.test('unknown keys are refused, with a suggestion', async (t) => {
  const error = errorOf({ portt: 8080 });
  t.equal(error.message, `${FILE}: /portt: unknown key "portt" (did you mean "port"?)`);
  t.equal(error.pointer, '/portt');
  t.equal(error.reason, 'unknown key "portt" (did you mean "port"?)');
  t.equal(messageOf({ timeouts: { upstreamMS: 1 } }), `${FILE}: /timeouts/upstreamMS: unknown key "upstreamMS" (did you mean "upstreamMs"?)`);
  t.equal(
    messageOf({ upstreams: [swagger2('http://a:1', { wieght: 2 })] }),
    `${FILE}: /upstreams/0/wieght: unknown key "wieght" (did you mean "weight"?)`,
  );
  t.equal(
    messageOf({ fetchTimeoutMs: 100 }),
    `${FILE}: /fetchTimeoutMs: unknown key "fetchTimeoutMs" (a key of that name belongs in "discovery")`,
  );
  t.equal(messageOf({ paths: { health: '/h' } }), `${FILE}: /paths/health: unknown key "health" (did you mean "healthcheck"?)`);
  t.equal(messageOf({ paths: { docs: '/d' } }), `${FILE}: /paths/docs: unknown key "docs"; known keys here: healthcheck, metrics, spec`);
});

t.test('every problem is listed, one line each; the first is in the fields', async (t) => {
  const error = errorOf({ portt: 1, workers: -1 });
  t.equal(error.problems.length, 2);
  t.equal(error.message.split('\n').length, 2);
  t.match(error.message, `${FILE}: /workers: must be >= 0 (got -1)`);
  t.equal(error.pointer, error.problems[0]!.pointer);
});

t.test('a config the schema refuses also gets the other rules, except where the schema already pointed', async (t) => {
  const config = {
    port: 'eighty',
    upstreams: [swagger2('ftp://a'), swagger2('http://b:1', { weight: 'heavy' })],
    middleware: [
      { id: 'limit', type: 'rateLimit', limit: 10, windowMs: 1000, key: 'ip' },
      { id: 'limit', type: 'rateLimit', limit: 20, windowMs: 1000, key: 'ip' },
    ],
    trustedProxies: ['10.0.0.0/99'],
  };
  const pointers = errorOf(config).problems.map((problem) => problem.pointer);
  t.same(
    pointers,
    ['/port', '/upstreams/1/weight', '/upstreams/0/serviceLocation', '/trustedProxies/0', '/middleware/1/id'],
    'the schema problems first, then every rule problem outside the places they name',
  );
  // A sibling of a refused value is still checked; a rule problem inside a refused place is not listed.
  const beside = errorOf({ upstreams: [swagger2('ftp://a', { weight: 'heavy' })] }).problems.map((problem) => problem.pointer);
  t.same(beside, ['/upstreams/0/weight', '/upstreams/0/serviceLocation']);
  // Out of order and holding a string: the schema names the string; the rule's word on the whole list is left out.
  const around = errorOf({ metrics: { histogramBucketsS: [0.5, 0.1, 'x'] } }).problems;
  t.same(around.map((problem) => problem.pointer), ['/metrics/histogramBucketsS/2']);
  t.same(errorOf({ metrics: { histogramBucketsS: [0.5, 0.1] } }).problems.map((problem) => problem.pointer), ['/metrics/histogramBucketsS'], 'the rule itself holds');
  // A rule that cannot read what the schema refused (an upstream that is a string) is skipped, not a crash.
  t.same(errorOf({ upstreams: ['ftp://a', swagger2('ftp://b')] }).problems.map((problem) => problem.pointer), ['/upstreams/0']);
  // A refused root (not an object) leaves nothing for the rules to say.
  t.same(errorOf('[]').problems.map((problem) => problem.pointer), ['']);
});

t.test('serviceLocation must be scheme://host:port', async (t) => {
  const at = (serviceLocation: string) => messageOf({ upstreams: [swagger2('http://ok:1'), swagger2(serviceLocation)] });
  t.equal(at('http://a:1/x'), `${FILE}: /upstreams/1/serviceLocation: "http://a:1/x" has a path; give only scheme://host:port`);
  t.equal(at('http://a:1?x=1'), `${FILE}: /upstreams/1/serviceLocation: "http://a:1?x=1" has a query; give only scheme://host:port`);
  t.equal(at('http://a:1#top'), `${FILE}: /upstreams/1/serviceLocation: "http://a:1#top" has a fragment; give only scheme://host:port`);
  t.equal(
    at('http://bob:hunter2@a:1'),
    `${FILE}: /upstreams/1/serviceLocation: "http://***@a:1" has user info; give only scheme://host:port (credentials do not belong in serviceLocation)`,
    'the password is not echoed',
  );
  t.equal(at('ftp://a:1'), `${FILE}: /upstreams/1/serviceLocation: "ftp://a:1" must use http:// or https://`);
  t.equal(
    at('a:8080'),
    `${FILE}: /upstreams/1/serviceLocation: "a:8080" must use http:// or https://`,
  );
  t.equal(
    at('10.0.0.7:8080'),
    `${FILE}: /upstreams/1/serviceLocation: "10.0.0.7:8080" is not a URL; give only scheme://host:port, e.g. "http://10.0.0.7:8080"`,
  );
  t.equal(at('http://a:99999'), `${FILE}: /upstreams/1/serviceLocation: "http://a:99999" is not a URL; give only scheme://host:port, e.g. "http://10.0.0.7:8080"`);
  t.equal(at('http://a:1//'), `${FILE}: /upstreams/1/serviceLocation: "http://a:1//" has a path; give only scheme://host:port`);
  t.equal(parseConfig(JSON.stringify({ upstreams: [swagger2('http://a:1/')] }), FILE).upstreams[0]!.serviceLocation, 'http://a:1', 'a lone "/" is accepted');
});

t.test('weight', async (t) => {
  const at = (weight: unknown) => messageOf({ upstreams: [swagger2('http://a:1'), swagger2('http://b:1'), swagger2('http://c:1', { weight })] });
  t.equal(at(-1), `${FILE}: /upstreams/2/weight: must be >= 0 (got -1)`);
  t.equal(at(1.5), `${FILE}: /upstreams/2/weight: must be an integer (got 1.5)`);
  t.equal(at('2'), `${FILE}: /upstreams/2/weight: must be an integer (got "2")`);
  t.equal(parseConfig(JSON.stringify({ upstreams: [swagger2('http://a:1', { weight: 0 })] }), FILE).upstreams[0]!.weight, 0);
});

t.test('a kvStores name the schema refuses is named, once', async (t) => {
  const store = { type: 'redis', url: 'redis://127.0.0.1:6379' };
  t.equal(messageOf({ kvStores: { 'a b': store } }), `${FILE}: /kvStores/a b: the name must be 1-64 letters, digits, "_" or "-" (got "a b")`);
  t.equal(messageOf({ kvStores: { 'a.b': store, ok: store } }), `${FILE}: /kvStores/a.b: the name must be 1-64 letters, digits, "_" or "-" (got "a.b")`);
});

t.test('serviceType, specPath and endpoints', async (t) => {
  t.equal(
    messageOf({ upstreams: [{ serviceType: 'swagger', serviceLocation: 'http://a:1' }] }),
    `${FILE}: /upstreams/0/serviceType: must be one of "swagger2", "openapi3", "static" (got "swagger") (did you mean "swagger2"?)`,
  );
  t.equal(messageOf({ upstreams: [{ serviceLocation: 'http://a:1' }] }), `${FILE}: /upstreams/0/serviceType: is required`);
  // The endpoints of an upstream whose serviceType is wrong or missing are not blamed for it.
  const endpoints = [{ method: 'GET', path: '/x' }];
  t.equal(
    messageOf({ upstreams: [{ serviceType: 'Static', serviceLocation: 'http://a:1', endpoints }] }),
    `${FILE}: /upstreams/0/serviceType: must be one of "swagger2", "openapi3", "static" (got "Static") (did you mean "static"?)`,
  );
  t.equal(messageOf({ upstreams: [{ serviceLocation: 'http://a:1', endpoints }] }), `${FILE}: /upstreams/0/serviceType: is required`);
  t.equal(
    messageOf({ upstreams: [{ serviceType: null, serviceLocation: 'http://a:1', endpoints }, swagger2('http://b:1', { endpoints })] }),
    [
      `${FILE}: /upstreams/0/serviceType: must be one of "swagger2", "openapi3", "static" (got null)`,
      `${FILE}: /upstreams/1/endpoints: only "static" upstreams take endpoints; the others list theirs in the doc at specPath`,
    ].join('\n'),
    'another upstream\'s endpoints are still checked',
  );
  t.equal(
    messageOf({ upstreams: [{ serviceType: 'static', serviceLocation: 'http://a:1' }] }),
    `${FILE}: /upstreams/0/endpoints: is required when serviceType is "static"`,
  );
  t.equal(
    messageOf({ upstreams: [swagger2('http://a:1', { endpoints: [{ method: 'GET', path: '/x' }] })] }),
    `${FILE}: /upstreams/0/endpoints: only "static" upstreams take endpoints; the others list theirs in the doc at specPath`,
  );
  t.equal(
    messageOf({ upstreams: [{ serviceType: 'static', serviceLocation: 'http://a:1', endpoints: [] }] }),
    `${FILE}: /upstreams/0/endpoints: must list at least 1 item`,
  );
  t.equal(
    messageOf({ upstreams: [{ serviceType: 'static', serviceLocation: 'http://a:1', endpoints: [{ method: 'GET' }] }] }),
    `${FILE}: /upstreams/0/endpoints/0/path: is required`,
  );
  t.equal(
    messageOf({ upstreams: [{ serviceType: 'static', serviceLocation: 'http://a:1', endpoints: [{ method: 'GET /x', path: '/x' }] }] }),
    `${FILE}: /upstreams/0/endpoints/0/method: must be an HTTP method like "GET" (got "GET /x")`,
  );
  t.equal(
    messageOf({ upstreams: [swagger2('http://a:1', { specPath: 'spec' })] }),
    `${FILE}: /upstreams/0/specPath: must start with "/" and hold no fragment or whitespace (got "spec")`,
  );
  const withQuery = parseConfig(JSON.stringify({ upstreams: [swagger2('http://a:1', { specPath: '/v2/api-docs?group=x' })] }), FILE);
  t.equal(withQuery.upstreams[0]!.specPath, '/v2/api-docs?group=x', 'a query in specPath is fine');
});

t.test('duplicate serviceLocations are refused, also when spelled differently', async (t) => {
  t.equal(
    messageOf({ upstreams: [swagger2('http://svc:8081'), swagger2('http://x:1'), swagger2('http://SVC:8081/')] }),
    `${FILE}: /upstreams/2/serviceLocation: "http://SVC:8081/" is the same upstream as /upstreams/0 ("http://svc:8081"); each serviceLocation may appear once`,
  );
  t.equal(
    messageOf({ upstreams: [swagger2('http://a'), swagger2('http://a:80')] }),
    `${FILE}: /upstreams/1/serviceLocation: "http://a:80" is the same upstream as /upstreams/0 ("http://a"); each serviceLocation may appear once`,
  );
});

t.test('built-in paths', async (t) => {
  t.equal(
    messageOf({ paths: { healthcheck: 'health' } }),
    `${FILE}: /paths/healthcheck: must start with "/" and hold no query, fragment or whitespace (got "health")`,
  );
  t.equal(
    messageOf({ paths: { metrics: '/spec' } }),
    `${FILE}: /paths/metrics: "/spec" is also paths.spec (by default); each built-in endpoint needs its own path`,
  );
  t.equal(
    messageOf({ paths: { healthcheck: '/x', spec: '/x/' } }),
    `${FILE}: /paths/spec: "/x/" is also paths.healthcheck; each built-in endpoint needs its own path`,
    'one trailing slash does not make a path different',
  );
  t.equal(messageOf({ paths: { spec: '/spec?x' } }), `${FILE}: /paths/spec: must start with "/" and hold no query, fragment or whitespace (got "/spec?x")`);
});

t.test('a built-in path longer than limits.maxUrlBytes is refused: every request for it would be a 414', async (t) => {
  const problems = (config: Record<string, unknown>): string => messageOf(config).split('\n').sort().join('\n');
  t.equal(
    problems({ limits: { maxUrlBytes: 10 } }),
    `${FILE}: /limits/maxUrlBytes: paths.healthcheck (by default) "/healthcheck" is 12 bytes, longer than limits.maxUrlBytes (10): every request for it is a 414, so it would never answer`,
    'a default path: the limit is blamed',
  );
  t.equal(
    messageOf({ limits: { maxUrlBytes: 64 }, paths: { metrics: `/${'m'.repeat(64)}` } }),
    `${FILE}: /paths/metrics: paths.metrics "/${'m'.repeat(64)}" is 65 bytes, longer than limits.maxUrlBytes (64): every request for it is a 414, so it would never answer`,
    'a path the file sets: the path is blamed',
  );
  t.doesNotThrow(() => parseConfig(JSON.stringify({ limits: { maxUrlBytes: 12 } }), FILE), 'a path exactly as long as the limit answers');
});

t.test('built-in paths not in normalized form are refused, naming the form to write', async (t) => {
  const notNormalized = (key: string, written: string, write: string) =>
    `${FILE}: /paths/${key}: ${JSON.stringify(written)} is not in normalized form (requests are matched after path normalization: escapes of unreserved characters decoded, other escapes in upper-case hex, no "." or ".." segments, characters outside visible ASCII percent-encoded), so no request can reach it; write ${JSON.stringify(write)}`;
  t.equal(messageOf({ paths: { healthcheck: '/%7Estatus' } }), notNormalized('healthcheck', '/%7Estatus', '/~status'));
  t.equal(messageOf({ paths: { spec: '/api/./spec' } }), notNormalized('spec', '/api/./spec', '/api/spec'));
  t.equal(messageOf({ paths: { metrics: '/h%c3%a9alth' } }), notNormalized('metrics', '/h%c3%a9alth', '/h%C3%A9alth'));
  t.equal(messageOf({ paths: { metrics: '/a/../m' } }), notNormalized('metrics', '/a/../m', '/m'));
  t.equal(messageOf({ paths: { metrics: '/hé' } }), notNormalized('metrics', '/hé', '/h%C3%A9'));
  t.equal(messageOf({ paths: { metrics: '/m/.' } }), notNormalized('metrics', '/m/.', '/m'));
  t.equal(
    messageOf({ paths: { metrics: '/m%zz' } }),
    `${FILE}: /paths/metrics: no request can reach "/m%zz": it holds a malformed percent-escape or a ".." above the root, and a request with it is a 400`,
  );
  t.equal(
    messageOf({ paths: { metrics: '/../m' } }),
    `${FILE}: /paths/metrics: no request can reach "/../m": it holds a malformed percent-escape or a ".." above the root, and a request with it is a 400`,
  );
  t.equal(
    messageOf({ paths: { metrics: '/a%2Fb' } }),
    `${FILE}: /paths/metrics: no request can reach "/a%2Fb": it holds a "\\" or an encoded "/" or "\\" (%2F, %5C), and encodedSlashes is "reject"`,
  );
  t.equal(parseConfig(JSON.stringify({ encodedSlashes: 'keep', paths: { metrics: '/a%2Fb' } }), FILE).paths.metrics, '/a%2Fb', 'kept with encodedSlashes: "keep"');
  const error = errorOf({ paths: { healthcheck: '/%7Estatus', spec: '/api/./spec' } });
  t.match(error.message, /\/paths\/healthcheck: .*write "\/~status"/, 'every such path is named');
  t.match(error.message, /\/paths\/spec: .*write "\/api\/spec"/);
  const fine = parseConfig(JSON.stringify({ paths: { healthcheck: '/~status/', metrics: '/h%C3%A9alth', spec: '/api/spec' } }), FILE);
  t.same(fine.paths, { healthcheck: '/~status/', metrics: '/h%C3%A9alth', spec: '/api/spec' }, 'normalized forms (a trailing slash aside) load');
  t.equal(
    messageOf({ paths: { healthcheck: '/x', spec: '/%78' } }),
    notNormalized('spec', '/%78', '/x'),
    'a path that is not in normalized form is refused as such, not compared as written',
  );
});

t.test('environment overrides', async (t) => {
  const config = parseConfig('{"port": 1}', FILE, { GATEWAY_PORT: '9090', GATEWAY_WORKERS: ' 3 ', GATEWAY_LOG_LEVEL: 'debug' });
  t.equal(config.port, 9090);
  t.equal(config.workers, 3);
  t.equal(config.logLevel, 'debug');
  t.equal(parseConfig('{"port": 1}', FILE, { GATEWAY_PORT: '' }).port, 1, 'an empty variable counts as unset');
  t.equal(messageOf({}, { GATEWAY_PORT: '80a' }), `${FILE}: env GATEWAY_PORT: must be an integer (got "80a")`);
  t.equal(messageOf({}, { GATEWAY_PORT: '99999' }), `${FILE}: env GATEWAY_PORT: must be <= 65535 (got 99999)`);
  t.equal(messageOf({}, { GATEWAY_WORKERS: '-2' }), `${FILE}: env GATEWAY_WORKERS: must be >= 0 (got -2)`);
  t.equal(
    messageOf({}, { GATEWAY_LOG_LEVEL: 'verbose' }),
    `${FILE}: env GATEWAY_LOG_LEVEL: must be one of "fatal", "error", "warn", "info", "debug", "trace", "silent" (got "verbose")`,
  );
  t.equal(errorOf({}, { GATEWAY_WORKERS: 'x' }).pointer, 'env GATEWAY_WORKERS');
});

t.test('loadConfig reads the file; a missing file is a ConfigError', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'specgate-config-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'gateway.json');
  writeFileSync(file, '{"port": 1234}');
  t.equal(loadConfig(file, {}).port, 1234);
  t.equal(loadConfig(file, { GATEWAY_PORT: '4321' }).port, 4321);
  t.throws(() => loadConfig(join(dir, 'nope.json'), {}), { message: `${join(dir, 'nope.json')}: cannot read the config: no such file` });
  t.throws(() => loadConfig(dir, {}), ConfigError);
});

t.test('the shipped default config loads', async (t) => {
  const config = loadConfig('config/default.json', {});
  t.equal(config.port, 8080);
  t.same(
    config.upstreams.map((u) => u.serviceLocation),
    ['http://127.0.0.1:9101', 'http://127.0.0.1:9102', 'http://127.0.0.1:9103', 'http://127.0.0.1:9104', 'http://localhost:9104'],
  );
});

t.test('every key of the schema has a description (the README reference is built from them)', async (t) => {
  const missing: string[] = [];
  const walk = (schema: any, where: string) => {
    for (const [key, child] of Object.entries<any>(schema.properties ?? {})) {
      if (typeof child.description !== 'string' || child.description === '') missing.push(`${where}${key}`);
      walk(child, `${where}${key}.`);
    }
    if (schema.items) walk(schema.items, `${where.replace(/\.$/, '')}[].`);
    for (const branch of schema.allOf ?? []) if (branch.then) walk(branch.then, `${where}[${branch.if?.properties?.type?.const}].`);
    if (typeof schema.additionalProperties === 'object') walk(schema.additionalProperties, `${where}<name>.`);
  };
  walk(configSchema, '');
  t.same(missing, []);
});

t.test('the commented examples load and explain every key', async (t) => {
  const full = loadConfig('config/examples/full.jsonc', {});
  t.equal(full.upstreams.length, 3);
  t.equal(loadConfig('config/examples/minimal.jsonc', {}).upstreams[0]!.specPath, '/spec');
  t.same(loadConfig('config/examples/edge.jsonc', {}).middleware.map((m) => m.type), ['apiKeyAuth', 'rateLimit', 'rateLimit'], 'edge.jsonc loads');
  const text = (await import('node:fs')).readFileSync('config/examples/full.jsonc', 'utf8');
  const keys = new Set<string>();
  const walk = (schema: any) => {
    for (const [key, child] of Object.entries<any>(schema.properties ?? {})) {
      keys.add(key);
      walk(child);
    }
    if (schema.items) walk(schema.items);
    for (const branch of schema.allOf ?? []) if (branch.then) walk(branch.then);
    if (typeof schema.additionalProperties === 'object') walk(schema.additionalProperties);
  };
  walk(configSchema);
  t.same([...keys].filter((key) => !text.includes(`"${key}"`)), [], 'every schema key appears in full.jsonc');
});
