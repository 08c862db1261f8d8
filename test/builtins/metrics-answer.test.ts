import t from 'tap';
import { Builtins } from '../../src/builtins/index.js';

const builtins = new Builtins({ paths: { healthcheck: '/healthcheck', metrics: '/metrics', spec: '/spec' }, metrics: { enabled: true } });
builtins.setMetrics('{"requests":{}}', '# metrics\n');
const get = (query: string, accept?: string) => builtins.handle('GET', '/metrics', query, accept === undefined ? {} : { accept })!;

t.test('an answer the Accept header chose says Vary: Accept', async (t) => {
  for (const accept of [undefined, 'application/json', 'text/plain', 'image/png']) {
    t.equal(get('', accept).headers.vary, 'Accept', `Accept: ${accept ?? '(none)'}`);
  }
  t.equal(get('', 'image/png').status, 406);
  t.equal(builtins.handle('HEAD', '/metrics', '', { accept: 'text/plain' })!.headers.vary, 'Accept', 'HEAD too');
  t.equal(get('format=json', 'text/plain').headers.vary, undefined, '?format= decides alone');
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
  const spec = (query: string) => builtins.handle('GET', '/spec', query, {})!;
  for (const query of ['format=yaml', 'format=', 'format=OPENAPI3', 'format=openapi3&format=swagger2']) {
    const res = spec(query);
    t.equal(res.status, 400, query);
    t.match(JSON.parse(res.body.toString()), { status: 400, detail: /swagger2 .*openapi3/ });
  }
  t.equal(spec('format=openapi3').body.toString(), '{"openapi":"3.0.3"}');
  t.equal(spec('format=swagger2').body.toString(), '{"swagger":"2.0"}');
  t.equal(spec('').body.toString(), '{"swagger":"2.0"}');
});
