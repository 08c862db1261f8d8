import t from 'tap';
import { Builtins, type BuiltinResponse } from '../../src/builtins/index.js';

/** An answer given at once (fixed reports: no source to ask). */
function now(answer: BuiltinResponse | Promise<BuiltinResponse> | null): BuiltinResponse {
  if (answer === null || answer instanceof Promise) throw new Error('expected an answer at once');
  return answer;
}

const builtins = new Builtins({ paths: { healthcheck: '/healthcheck', metrics: '/metrics', spec: '/spec' }, metrics: { enabled: true } });
builtins.setMetrics('{"requests":{}}', '# metrics\n');
const get = (query: string, accept?: string) => now(builtins.handle('GET', '/metrics', query, accept === undefined ? {} : { accept }));

t.test('an answer the Accept header chose says Vary: Accept', async (t) => {
  for (const accept of [undefined, 'application/json', 'text/plain', 'image/png']) {
    t.equal(get('', accept).headers.vary, 'Accept', `Accept: ${accept ?? '(none)'}`);
  }
  t.equal(get('', 'image/png').status, 406);
  t.equal(now(builtins.handle('HEAD', '/metrics', '', { accept: 'text/plain' })).headers.vary, 'Accept', 'HEAD too');
  t.equal(get('format=json', 'text/plain').headers.vary, undefined, '?format= decides alone');
});

t.test("the Accept headers of Prometheus 2 and 3's default scrapes get the text format", async (t) => {
  const prometheus2 = 'application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1';
  // Prometheus 3 adds escaping=allow-utf-8 to every format (its default name validation is UTF-8).
  const prometheus3 =
    'application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;escaping=allow-utf-8;q=0.5,' +
    'text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;escaping=allow-utf-8;q=0.3,*/*;q=0.2';
  for (const [which, accept] of [['Prometheus 2', prometheus2], ['Prometheus 3', prometheus3], ['underscores escaping', 'text/plain;version=0.0.4;escaping=underscores']] as const) {
    const res = get('', accept);
    t.equal(res.status, 200, which);
    t.match(res.headers['content-type'], /^text\/plain; version=0\.0\.4/, `${which}: the text format`);
  }
  t.match(get('', 'application/json, text/plain;version=0.0.4;escaping=allow-utf-8;q=0.5').headers['content-type'], /^application\/json/, 'JSON first: JSON');
});

t.test('?format= other than json or prometheus is a 400 problem naming both', async (t) => {
  for (const query of ['format=xml', 'format=', 'format=JSON', 'format=json&format=prometheus']) {
    const res = get(query);
    t.equal(res.status, 400, query);
    t.equal(res.headers['content-type'], 'application/problem+json');
    t.match(JSON.parse(res.body.toString()), { title: 'Bad Request', status: 400, detail: /json or prometheus/ });
  }
  t.match(get('format=prometheus').headers['content-type'], /^text\/plain/);
  t.match(get('format=json').headers['content-type'], /^application\/json/);
  t.match(get('other=1').headers['content-type'], /^application\/json/, 'other parameters are ignored');
});

t.test('/spec: ?format= other than swagger2 or openapi3 is a 400 problem naming both', async (t) => {
  builtins.setSpec('{"swagger":"2.0"}', '{"openapi":"3.0.3"}');
  const spec = (query: string) => now(builtins.handle('GET', '/spec', query, {}));
  for (const query of ['format=yaml', 'format=', 'format=OPENAPI3', 'format=openapi3&format=swagger2']) {
    const res = spec(query);
    t.equal(res.status, 400, query);
    t.match(JSON.parse(res.body.toString()), { status: 400, detail: /swagger2 .*openapi3/ });
  }
  t.equal(spec('format=openapi3').body.toString(), '{"openapi":"3.0.3"}');
  t.equal(spec('format=swagger2').body.toString(), '{"swagger":"2.0"}');
  t.equal(spec('').body.toString(), '{"swagger":"2.0"}');
});

t.test('with a source, /metrics asks it for the format chosen, and is a 503 problem when it has nothing', async (t) => {
  const asking = new Builtins({ paths: { healthcheck: '/healthcheck', metrics: '/metrics', spec: '/spec' }, metrics: { enabled: true } });
  const asked: string[] = [];
  let reply: string | null = '{"uptime":1}';
  asking.setMetricsSource((format) => {
    asked.push(format);
    return Promise.resolve(format === 'json' ? reply : reply && '# text\n');
  });
  const json = await asking.handle('GET', '/metrics', '', { accept: 'application/json' })!;
  t.same([json.status, json.headers['content-type'], json.headers.vary, json.body.toString()], [200, 'application/json; charset=utf-8', 'Accept', '{"uptime":1}']);
  const text = await asking.handle('GET', '/metrics', 'format=prometheus', {})!;
  t.same([text.status, text.body.toString()], [200, '# text\n']);
  t.equal(now(asking.handle('GET', '/metrics', 'format=xml', {})).status, 400, 'a bad format is answered at once, nothing asked');
  t.equal(now(asking.handle('GET', '/healthcheck', '', {})).status, 503, 'the health report is answered at once (the placeholder here)');
  t.same(asked, ['json', 'prometheus']);
  reply = null;
  const none = await asking.handle('GET', '/metrics', '', {})!;
  t.equal(none.status, 503);
  t.equal(none.headers['content-type'], 'application/problem+json');
  t.match(JSON.parse(none.body.toString()), { status: 503, detail: /primary/ });
});
