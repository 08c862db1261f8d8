// The observe keys of the config: defaults, and a bad access log destination, omit field or collector
// URL refused with the file, the field and why.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ConfigError, parseConfig } from '../../src/config/load.js';

const FILE = 'config/observe.json';

function messageOf(config: object): string {
  try {
    parseConfig(JSON.stringify(config), FILE, {});
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  return '';
}

t.test('defaults', async (t) => {
  const config = parseConfig('{}', FILE, {});
  t.same(config.requestId, { enabled: true, header: 'x-request-id' });
  t.same(config.accessLog, { enabled: true, destination: 'stdout', omit: [] });
  t.equal(config.tracing, undefined, 'no tracing key: nothing exported');
  const traced = parseConfig(JSON.stringify({ tracing: { otlpEndpoint: 'http://127.0.0.1:4318/v1/traces' } }), FILE, {});
  t.same(traced.tracing, { otlpEndpoint: 'http://127.0.0.1:4318/v1/traces', sampleRatio: 0.01, serviceName: 'specgate' });
});

t.test('refused, naming the file, the field and why', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'specgate-observe-config-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  t.match(messageOf({ accessLog: { destination: join(dir, 'missing', 'access.log') } }), /^config\/observe\.json: \/accessLog\/destination: the directory .*missing does not exist/);
  t.match(messageOf({ accessLog: { destination: dir } }), /\/accessLog\/destination: .* is a directory/);
  writeFileSync(join(dir, 'afile'), '');
  t.match(messageOf({ accessLog: { destination: join(dir, 'afile', 'access.log') } }), /\/accessLog\/destination: .*afile is not a directory$/, 'a file where the directory should be');
  t.equal(messageOf({ accessLog: { destination: join(dir, 'access.log') } }), '', 'a new file in an existing directory is fine');
  t.equal(messageOf({ accessLog: { enabled: false, destination: join(dir, 'missing', 'x.log') } }), '', 'not checked while the log is off');
  t.match(messageOf({ accessLog: { omit: ['query', 'password'] } }), /\/accessLog\/omit\/1: must be one of .*"query"/);
  t.match(messageOf({ requestId: { header: 'x request id' } }), /\/requestId\/header/);
  for (const header of ['content-length', 'Transfer-Encoding', 'connection', 'proxy-authorization', 'host', 'traceparent', 'tracestate', 'x-forwarded-for', 'forwarded', 'via', 'authorization', 'cookie', 'set-cookie', 'x-consumer', 'x-cache', 'date', 'sec-websocket-key']) {
    t.match(messageOf({ requestId: { header } }), new RegExp(`^config/observe\\.json: /requestId/header: "${header}" cannot carry the request ID: `), header);
  }
  t.equal(messageOf({ requestId: { enabled: false, header: 'host' } }), '', 'not checked while IDs are off');
  t.match(
    messageOf({ middleware: [{ id: 'k', type: 'apiKeyAuth', keys: [{ consumer: 'c', sha256: 'a'.repeat(64) }] }], requestId: { header: 'X-Api-Key' } }),
    /\/requestId\/header: "X-Api-Key" cannot carry the request ID: an apiKeyAuth middleware reads the API key from it/,
  );
  t.equal(messageOf({ requestId: { header: 'x-correlation-id' } }), '');
  t.match(messageOf({ tracing: { sampleRatio: 0.5 } }), /\/tracing.*otlpEndpoint/);
  t.match(messageOf({ tracing: { otlpEndpoint: 'ftp://collector/v1/traces' } }), /\/tracing\/otlpEndpoint/);
  t.match(messageOf({ tracing: { otlpEndpoint: 'http://127.0.0.1:4318', sampleRatio: 2 } }), /\/tracing\/sampleRatio: must be <= 1/);
});
