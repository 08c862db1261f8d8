// docs/reference/upstreams.md#lenient-discovery, unit level: JSON/YAML detection, what counts as no doc at all, the objections swagger-parser
// finds and how they are said per endpoint, the Swagger 2.0 form of templates, /spec with such docs
// (collapsed path keys, the guard), and how the registry bounds and logs problems.
import t from 'tap';
import SwaggerParser from '@apidevtools/swagger-parser';
import type { UpstreamConfig } from '../../src/config/types.js';
import { discoverFromDoc, parseDocText, type DiscoveredUpstream, type EndpointProblem } from '../../src/discovery/index.js';
import { swaggerPath } from '../../src/discovery/swagger-path.js';
import { MAX_DOC_PATHS, validateDoc } from '../../src/discovery/validate-doc.js';
import { buildCombinedSpec, buildCombinedSpecWithNamespaces } from '../../src/builtins/spec.js';
import { guardSpec } from '../../src/builtins/spec-guard.js';
import { UpstreamRegistry, type DiscoverFn } from '../../src/cluster/discovered-upstreams.js';
import type { Logger } from '../../src/log.js';
import { RoutingTable } from '../../src/routing/table.js';
import { Rank } from '../../src/routing/template.js';
import { catalogDoc, filesDoc, usersDoc } from '../../examples/upstream-docs.js';
import { asYaml, formsDoc, htmlPage, openapi3RestYaml, sloppyDoc, sloppyProblems } from '../fixtures/lenient-docs.js';

type Json = Record<string, any>;

const upstream = (serviceType: UpstreamConfig['serviceType'], serviceLocation = 'http://svc:1'): UpstreamConfig => ({
  serviceType,
  serviceLocation,
  weight: 1,
  specPath: '/spec',
});

async function problemsOf(doc: unknown, serviceType: 'swagger2' | 'openapi3' = 'swagger2'): Promise<EndpointProblem[]> {
  const discovered = await discoverFromDoc(upstream(serviceType), doc, { docUrl: 'http://svc:1/spec', where: 'doc', serviceType });
  return discovered.problems ?? [];
}

const swagger2 = (paths: Json, extra: Json = {}): Json => ({ swagger: '2.0', info: { title: 't', version: '1' }, paths, ...extra });
const ok = { 200: { description: 'ok' } };

t.test('parseDocText: JSON or YAML by content, whatever the Content-Type', async (t) => {
  const doc = formsDoc('/x');
  t.match(parseDocText(JSON.stringify(doc)), { ok: true, format: 'JSON', value: doc });
  t.match(parseDocText(`\ufeff  \n${JSON.stringify(doc)}`), { ok: true, format: 'JSON', value: doc }, 'a BOM and leading blanks');
  t.match(parseDocText(asYaml(doc)), { ok: true, format: 'YAML', value: doc });
  t.match(parseDocText('{ swagger: "2.0", paths: {}, }'), { ok: true, format: 'YAML', value: { swagger: '2.0', paths: {} } }, 'JSON-looking but only YAML reads it');
  t.match(parseDocText('swagger: 2.0\npaths:\n  /a:\n    get: {}\n  /a:\n    put: {}\n'), { ok: true, value: { swagger: 2, paths: { '/a': { put: {} } } } }, 'a duplicate key keeps the last, as JSON.parse');
  t.match(parseDocText('base: &b {consumes: [a/b]}\nop:\n  <<: *b\n  x: 1\n'), { ok: true, value: { op: { consumes: ['a/b'], x: 1 } } }, 'merge keys');
});

t.test('parseDocText: what is neither, and why', async (t) => {
  t.match(parseDocText(htmlPage), { ok: false, reason: /^it looks like HTML or XML \(it starts with "<!DOCTYPE html> <html><head><title>Sign in/ });
  t.match(parseDocText('Not Found'), { ok: false, reason: 'it is a single string (it starts with "Not Found")' });
  t.match(parseDocText('   \n'), { ok: false, reason: 'it is empty' });
  t.match(parseDocText('{"a": 1'), { ok: false, reason: /^JSON: .*; YAML: / });
  t.match(parseDocText('a: b: c'), { ok: false, reason: /^YAML: / });
  t.match(parseDocText('a: &x\n  b: *x\n'), { ok: false, reason: /alias refers to its own anchor/ });
  t.match(parseDocText('null'), { ok: false, reason: /single null/ });
});

t.test('validateDoc: only what is no Swagger 2.0 / OpenAPI 3.x doc at all fails', async (t) => {
  await t.rejects(validateDoc([1, 2], 'swagger2', 'u'), { message: 'u: the doc is an array, not a Swagger 2.0 or OpenAPI 3.x object' });
  await t.rejects(validateDoc({ status: 'UP' }, 'swagger2', 'u'), { message: /^u: the doc is neither Swagger nor OpenAPI \(no "swagger" or "openapi" key/ });
  await t.rejects(validateDoc({ swagger: '1.2', apis: [] }, 'swagger2', 'u'), { message: 'u: the doc is Swagger "1.2": neither Swagger 2.0 nor OpenAPI 3.x' });
  await t.rejects(validateDoc({ openapi: '2.0', paths: {} }, 'openapi3', 'u'), { message: /the doc is OpenAPI "2.0"/ });
  const huge = Object.fromEntries(Array.from({ length: MAX_DOC_PATHS + 1 }, (_, i) => [`/p${i}`, { get: { responses: {} } }]));
  const started = performance.now();
  await t.rejects(validateDoc({ openapi: '3.0.0', info: { title: 'x', version: '1' }, paths: huge }, 'openapi3', 'u'), {
    message: `u: the OpenAPI 3.0.0 doc declares ${MAX_DOC_PATHS + 1} paths, more than the ${MAX_DOC_PATHS} the gateway reads from one doc`,
  });
  t.ok(performance.now() - started < 2000, 'refused before any validation');
  await t.rejects(validateDoc({ swagger: '2.0', info: {} }, 'swagger2', 'u'), { message: 'u: the Swagger 2.0 doc has no "paths" object, so nothing to route' });
  const parsed = parseDocText('swagger: 2.0\ninfo: {title: t, version: "1"}\npaths: {}\n');
  const yamlNumber = await validateDoc(parsed.ok ? parsed.value : null, 'swagger2', 'u');
  t.equal(yamlNumber.kind, 'swagger2', 'swagger: 2.0 written as a YAML number is still Swagger 2.0');
  t.match(yamlNumber.objections, [{ pointer: ['swagger'], message: /is not one of "2.0"/ }]);
});

t.test('every form, declared by identifier, as written, or not at all', async (t) => {
  t.same(await problemsOf(formsDoc('/')), [], 'by identifier: nothing to object to');
  const asWritten = swagger2({
    '/files/{+path}': { get: { parameters: [{ name: '+path', in: 'path', required: true, type: 'string' }], responses: ok } },
    '/user/{id: [0-9]+}': { get: { parameters: [{ name: 'id: [0-9]+', in: 'path', required: true, type: 'string' }], responses: ok } },
    '/img{.ext}': { get: { parameters: [{ name: '.ext', in: 'path', required: true, type: 'string' }], responses: ok } },
  });
  t.same(await problemsOf(asWritten), [], 'named as written between the braces: nothing either');
  const undeclared = swagger2({ '/files/{+path}': { get: { responses: ok } }, '/img/{name}{.ext}': { get: { responses: ok } } });
  t.same(await problemsOf(undeclared), [
    { method: 'GET', path: '/files/{+path}', reason: 'path parameter {path} is not declared' },
    { method: 'GET', path: '/img/{name}{.ext}', reason: 'path parameter {name}, {ext} are not declared' },
  ]);
  const yaml = parseDocText(openapi3RestYaml);
  t.same(yaml.ok && (await problemsOf(yaml.value, 'openapi3')), [], 'OpenAPI 3 {+rest} declared as rest');
  const restUndeclared = { openapi: '3.0.3', info: { title: 't', version: '1' }, paths: { '/r/{+rest}': { get: { responses: ok } } } };
  t.same(await problemsOf(restUndeclared, 'openapi3'), [{ method: 'GET', path: '/r/{+rest}', reason: 'path parameter {rest} is not declared' }]);
});

t.test('the bundled examples publish docs with nothing to object to', async (t) => {
  t.same(await problemsOf(usersDoc), [], 'users: {.format} and {id: [0-9]+} declared by identifier');
  t.same(await problemsOf(filesDoc, 'openapi3'), []);
  t.same(await problemsOf(catalogDoc), []);
});

t.test('objections are said of the endpoint they concern', async (t) => {
  t.same(await problemsOf(sloppyDoc), sloppyProblems, 'undeclared parameter, dangling $refs, unknown field');

  const doc = swagger2(
    {
      '/a/{id}': {
        parameters: [{ name: 'id', in: 'path', required: true, type: 'string', descripton: 'typo' }],
        get: { responses: ok },
        put: { parameters: [{ name: 'q', in: 'query', type: 'string', schema: {} }], responses: ok },
      },
      '/b': { $ref: '#/x-missing' },
      '/c': {
        get: { parameters: [{ name: 'c', in: 'cookie', type: 'string' }], responses: { 200: { $ref: 'common.yaml#/Ok' } }, 'x-disabled-middleware': 3 },
        post: { operationId: 'dup', responses: ok },
        put: { operationId: 'dup' },
      },
      '/d/{x': { get: { responses: ok } },
    },
    { definitions: { User: { type: 'object', propertiez: {} } } },
  );
  t.same(await problemsOf(doc), [
    { method: null, path: null, reason: 'definitions/User: unknown field "propertiez"' },
    { method: 'GET', path: '/a/{id}', reason: 'path-level parameters/0: unknown field "descripton"' },
    { method: 'PUT', path: '/a/{id}', reason: 'parameters/0: field "schema" is not allowed here' },
    { method: 'PUT', path: '/a/{id}', reason: 'path-level parameters/0: unknown field "descripton"' },
    { method: null, path: '/b', reason: '$ref "#/x-missing" does not resolve' },
    { method: 'GET', path: '/c', reason: 'responses/200: $ref "common.yaml#/Ok" points outside the doc; it is not followed' },
    { method: 'GET', path: '/c', reason: 'parameters/0/in: "cookie" is not one of "body", "header", "formData", "query", "path"' },
    { method: 'GET', path: '/c', reason: 'x-disabled-middleware must be a list of ids (got 3); ignored' },
    { method: 'PUT', path: '/c', reason: 'missing required field "responses"' },
    { method: 'POST', path: '/c', reason: 'operationId "dup" is already used by PUT /c' },
  ], 'a path-level objection is each operation\'s; a template the router refuses is its to report');
  const discovered = await discoverFromDoc(upstream('swagger2'), doc, { docUrl: 'http://svc:1/spec', where: 'doc', serviceType: 'swagger2' });
  t.same(discovered.entries.map((e) => `${e.method} ${e.template}`), ['GET /a/{id}', 'PUT /a/{id}', 'GET /c', 'PUT /c', 'POST /c', 'GET /d/{x'], 'every operation is an entry');
  t.same(discovered.entries.find((e) => e.template === '/c')!.disabledMiddleware, [], 'an unreadable id list is taken as none');
});

t.test('swaggerPath: the Swagger 2.0 form of every template form', async (t) => {
  t.same(swaggerPath('/files/{+path}'), { key: '/files/{path}', params: [{ name: 'path', rank: Rank.Plus }] });
  t.same(swaggerPath('user/{id: [0-9]+}/'), { key: '/user/{id}', params: [{ name: 'id', rank: Rank.Regex, pattern: '^(?:[0-9]+)$' }] });
  t.same(swaggerPath('/img/{name}{.ext}').key, '/img/{name}{ext}');
  t.same(swaggerPath('/q/{?x}').key, '/q/{x}');
  t.same(swaggerPath('/a/{}/b/{+}').key, '/a/{param1}/b/{param2}', 'a segment with no identifier gets one');
  t.same(swaggerPath('/t/{rest: .+}').params, [{ name: 'rest', rank: Rank.Regex }], 'a regex that may span "/" gets no pattern');
  t.same(swaggerPath('').key, '/');
  t.throws(() => swaggerPath('/broken/{x'), { name: 'TemplateSyntaxError' });
});

const ready = (serviceLocation: string, doc: Json, problems: EndpointProblem[] = []): DiscoveredUpstream => ({
  upstream: upstream('swagger2', serviceLocation),
  entries: [],
  doc,
  problems,
});
const builtinPaths = { healthcheck: '/healthcheck', metrics: '/metrics', spec: '/spec' };
const validate = (doc: Json) => SwaggerParser.validate(structuredClone(doc) as never);

t.test('/spec: two templates that come out as one path key keep apart, whatever the order', async (t) => {
  const regex = ready('http://regex:1', swagger2({ '/a/{id: [0-9]+}': { get: { operationId: 'byNumber', responses: ok } }, '/b/{+rest}': { get: { responses: ok } } }));
  const plain = ready('http://plain:1', swagger2({ '/a/{id}': { get: { operationId: 'byName', responses: ok }, put: { responses: ok } } }));
  for (const order of [[regex, plain], [plain, regex]]) {
    const doc = buildCombinedSpec({ upstreams: order, builtinPaths }) as Json;
    await t.resolves(validate(doc));
    const get = doc.paths['/a/{id}'].get;
    t.equal(get.operationId, 'byName', '{id} is more specific than {id: regex} (docs/reference/routing.md#specificity): it is described');
    t.same(get['x-collapsed-templates'], [{ template: '/a/{id: [0-9]+}', upstreams: ['http://regex:1'] }], 'the other is named');
    t.same(doc.paths['/a/{id}'].put['x-upstreams'], ['http://plain:1']);
    t.notOk('x-collapsed-templates' in doc.paths['/a/{id}'].put);
    t.same(doc.paths['/b/{rest}'].get.parameters, [{ name: 'rest', in: 'path', required: true, type: 'string' }], 'an undeclared parameter is declared');
  }
});

t.test('/spec: templates that differ only in their parameter names are one path key, whatever the order', async (t) => {
  const regex = ready('http://regex:1', swagger2({ '/u/{id: [0-9]+}': { get: { operationId: 'byNumber', responses: ok }, delete: { responses: ok } } }));
  const named = ready('http://named:1', swagger2({ '/u/{name}': { get: { operationId: 'byName', responses: ok }, put: { responses: ok } } }));
  for (const order of [[regex, named], [named, regex]]) {
    const doc = buildCombinedSpec({ upstreams: order, builtinPaths }) as Json;
    await t.resolves(validate(doc));
    const keys = Object.keys(doc.paths).filter((key) => key.startsWith('/u/'));
    t.equal(keys.length, 1, `one path key (${keys.join(', ')}): OpenAPI allows no two that differ only in names`);
    const item = doc.paths[keys[0]!];
    const name = keys[0]!.slice('/u/{'.length, -1);
    t.equal(item.get.operationId, 'byName', 'the template the router tries first is described');
    t.same(item.get['x-collapsed-templates'], [{ template: '/u/{id: [0-9]+}', upstreams: ['http://regex:1'] }]);
    for (const method of ['get', 'put', 'delete']) {
      t.same(item[method].parameters.filter((p: Json) => p.in === 'path').map((p: Json) => p.name), [name], `${method}: its path parameter carries the key's name`);
    }
  }
});

t.test('/spec guard: what Swagger 2.0 cannot carry is left out or replaced, and the doc validates', async (t) => {
  const messy = swagger2({
    '/m/{id}': {
      get: { operationId: 'typo', summery: 'x', parameters: [{ name: 'id', in: 'path', required: true, type: 'string' }], responses: ok },
      put: { operationId: 'badType', parameters: [{ name: 'q', in: 'query', type: 'strin' }], responses: ok, 'x-disabled-listeners': ['accessLog'] },
      post: { operationId: 'noResponses' },
    },
  }, { definitions: { Thing: { type: 'object', required: 'yes' } } });
  const { doc, namespaces } = buildCombinedSpecWithNamespaces({ upstreams: [ready('http://clean:1', formsDoc('/clean')), ready('http://messy:1', messy)], builtinPaths });
  await t.rejects(validate(doc), 'as combined, it does not validate');
  // Only what the upstream with problems contributes is checked (the clean doc's part is valid as built).
  const { repaired, remaining } = await guardSpec(doc, { upstreams: new Set(['http://messy:1']), namespaces: new Set([namespaces.get('http://messy:1')!]) });
  await t.resolves(validate(doc), 'guarded, it does');
  t.same(remaining, []);
  t.same(repaired.sort(), ['#/definitions/messy_1.Thing', '#/paths/~1m~1{id}/get/summery', '#/paths/~1m~1{id}/post', '#/paths/~1m~1{id}/put'].sort());
  t.equal(doc.paths['/m/{id}'].get.operationId, 'typo', 'an unknown field is only left out');
  t.notOk('summery' in doc.paths['/m/{id}'].get);
  t.match(doc.paths['/m/{id}'].put, {
    operationId: 'badType',
    parameters: [{ name: 'id', in: 'path', required: true, type: 'string' }],
    'x-upstreams': ['http://messy:1'],
    'x-disabled-listeners': ['accessLog'],
    'x-spec-note': /Swagger 2.0 cannot carry/,
  });
  t.equal(doc.paths['/clean/files/{path}'].get.operationId, 'readFile', 'the clean part is untouched');
  t.same((await guardSpec(doc)).repaired, [], 'a valid doc is left as it is');
});

function fakeLog(): Logger & { said: Array<{ msg: string; fields: Json }> } {
  const said: Array<{ msg: string; fields: Json }> = [];
  const record = (fields: unknown, msg?: unknown) => void said.push(typeof fields === 'string' ? { msg: fields, fields: {} } : { msg: String(msg), fields: fields as Json });
  return { said, info: record, warn: record, error: record, debug: record } as unknown as Logger & { said: Array<{ msg: string; fields: Json }> };
}

t.test('registry: problems in the health entry, bounded, left-out endpoints first; logged once per discovery', async (t) => {
  const config = upstream('swagger2', 'http://many:1');
  const registry = new UpstreamRegistry([config]);
  const many = (n: number, tag: string): EndpointProblem[] => Array.from({ length: n }, (_, i) => ({ method: 'GET', path: `/p${i}`, reason: tag }));
  let answer: DiscoveredUpstream = { upstream: config, entries: [], doc: { v: 1 }, problems: many(60, 'first') };
  const discover: DiscoverFn = async () => answer;
  const log = fakeLog();
  await registry.discoverAll(discover, { fetchTimeoutMs: 100, retries: 0, backoffMs: 0, refreshIntervalMs: 0 }, log, new AbortController().signal);
  registry.countEndpoints([{ upstream: 'http://many:1', method: 'GET', template: '/broken/{x', reason: 'unbalanced braces', message: 'm' }]);
  const [entry] = registry.health();
  t.equal(entry!.problems!.length, 50);
  t.equal(entry!.problemsOmitted, 11, '61 problems: 50 shown, 11 counted');
  t.same(entry!.problems![0], { method: 'GET', path: '/broken/{x', reason: 'left out: unbalanced braces' });
  t.same(entry!.problems![1], { method: 'GET', path: '/p0', reason: 'first' });

  const logged = () => log.said.filter((s) => /^upstream doc has/.test(s.msg));
  t.equal(logged().length, 1);
  t.equal(logged()[0]!.msg, 'upstream doc has 60 problems; its endpoints are routed all the same');
  t.equal(logged()[0]!.fields.problems.length, 50);
  t.equal(logged()[0]!.fields.problemsOmitted, 10);

  const record = registry.records[0]!;
  const options = { fetchTimeoutMs: 100, retries: 0, backoffMs: 0 };
  answer = { ...answer, problems: many(60, 'first') };
  await registry.refresh(record, discover, options, log);
  t.equal(logged().length, 1, 'the same problems again: not logged again');
  answer = { ...answer, doc: { v: 2 }, problems: many(2, 'second') };
  await registry.refresh(record, discover, options, log);
  t.equal(logged().length, 2, 'different ones: logged');
  answer = { ...answer, doc: { v: 3 }, problems: [] };
  await registry.refresh(record, discover, options, log);
  t.ok(log.said.some((s) => s.msg === 'upstream doc has no problems any more'));
  registry.countEndpoints([]);
  t.notOk('problems' in registry.health()[0]!, 'no problems, no field');
});

t.test('a doc nested too deeply to read fails with a reason naming it, not a bare stack overflow', async (t) => {
  const depth = 5000;
  const deep = JSON.parse(`${'{"type":"object","properties":{"x":'.repeat(depth)}{"type":"string"}${'}}'.repeat(depth)}`) as object;
  const doc = {
    swagger: '2.0',
    info: { title: 'deep', version: '1' },
    paths: { '/deep': { get: { responses: { 200: { description: 'ok', schema: { $ref: '#/definitions/D' } } } } } },
    definitions: { D: deep },
  };
  const error = await discoverFromDoc(upstream('swagger2'), doc, { docUrl: 'http://127.0.0.1:9/spec', where: 'http://127.0.0.1:9/spec', serviceType: 'swagger2' }).then(
    () => null,
    (err: Error) => err,
  );
  t.ok(error, 'it fails');
  t.match(error?.message, /^http:\/\/127\.0\.0\.1:9\/spec: the doc nests too deeply to be read/);
});

t.test('a base path no request can carry is made one it can, and the doc is objected to', async (t) => {
  const cases: Array<[Json, string, RegExp]> = [
    [swagger2({ '/x/{id}': { get: { responses: ok } } }, { basePath: '/api?v=1' }), '/api/x/{id}', /query or fragment.*taken as "\/api"/],
    [swagger2({ '/x/{id}': { get: { responses: ok } } }, { basePath: '/a/../b' }), '/b/x/{id}', /dot-segments.*taken as "\/b"/],
    [
      { openapi: '3.0.3', info: { title: 't', version: '1' }, servers: [{ url: '/v/{missing}' }], paths: { '/x/{id}': { get: { responses: ok } } } },
      '/v/x/{id}',
      /server variable \{missing\} has no default/,
    ],
  ];
  for (const [doc, template, problem] of cases) {
    const serviceType = 'swagger' in doc ? 'swagger2' : 'openapi3';
    const discovered = await discoverFromDoc(upstream(serviceType), doc, { docUrl: 'http://svc:1/spec', where: 'doc', serviceType });
    t.same(discovered.entries.map((entry) => entry.template), [template], `routed as ${template}`);
    t.match(discovered.problems, [{ method: null, path: null, reason: problem }]);
  }
});

t.test('a Swagger 2.0 basePath has no placeholders: its braces are matched literally, percent-encoded', async (t) => {
  const discover = (doc: Json) => discoverFromDoc(upstream('swagger2'), doc, { docUrl: 'http://svc:1/spec', where: 'doc', serviceType: 'swagger2' });
  const templated = await discover(swagger2({ '/ping/{id}': { get: { parameters: [{ name: 'id', in: 'path', required: true, type: 'string' }], responses: ok } } }, { basePath: '/{tenant}' }));
  t.same(templated.entries.map((entry) => entry.template), ['/%7Btenant%7D/ping/{id}'], 'the path key keeps its placeholder');
  t.match(templated.problems, [{ method: null, path: null, reason: /^basePath: "\/\{tenant\}" holds braces, .*taken as "\/%7Btenant%7D"$/ }]);
  const { table, problems } = RoutingTable.compile(templated.entries);
  t.same(problems, []);
  t.equal(table.select('GET', '/acme/ping/1', undefined, undefined, false).status, 404, 'the doc claims no tenant of any name');
  t.equal(table.select('GET', '/%7Btenant%7D/ping/1', undefined, undefined, false).status, 200, 'the path the doc names, as a client sends it');
  t.same(table.params(), { id: '1' });

  const unbalanced = await discover(swagger2({ '/ping': { get: { responses: ok } } }, { basePath: '/a}' }));
  t.same(unbalanced.entries.map((entry) => entry.template), ['/a%7D/ping']);
  t.same(RoutingTable.compile(unbalanced.entries).problems, [], 'a lone brace does not unbalance every template');

  const both = await discover(swagger2({ '/x': { get: { responses: ok } } }, { basePath: '/{t}/./v1' }));
  t.same(both.entries.map((entry) => entry.template), ['/%7Bt%7D/v1/x']);
  t.match(both.problems, [{ reason: /holds braces/ }, { reason: /dot-segments.*taken as "\/%7Bt%7D\/v1"/ }]);
});

t.test('OpenAPI 3.1: a path item may be a $ref, with fields beside it; what no Path Item allows is still objected to', async (t) => {
  const openapi31 = (paths: Json, extra: Json = {}): Json => ({
    openapi: '3.1.0',
    info: { title: 't', version: '1' },
    paths,
    components: { pathItems: { P: { get: { responses: ok } } } },
    ...extra,
  });
  const valid = openapi31(
    { '/b': { $ref: '#/components/pathItems/P' }, '/c': { $ref: '#/components/pathItems/P', summary: 'c', servers: [{ url: '/' }] } },
    { webhooks: { w: { $ref: '#/components/pathItems/P', parameters: [] } } },
  );
  await SwaggerParser.validate(structuredClone(valid) as never);
  t.same(await problemsOf(valid, 'openapi3'), [], 'swagger-parser\'s validate() takes it, and so does the schema check');
  const discovered = await discoverFromDoc(upstream('openapi3'), valid, { docUrl: 'http://svc:1/spec', where: 'doc', serviceType: 'openapi3' });
  t.same(discovered.entries.map((e) => `${e.method} ${e.template}`), ['GET /b', 'GET /c']);

  const invalid = openapi31(
    { '/d': { $ref: '#/components/pathItems/P', sumary: 'typo' }, '/e': { $ref: '#/components/pathItems/P', summary: 5 } },
    { webhooks: { w: { $ref: '#/components/pathItems/P', gett: {} } } },
  );
  t.same(await problemsOf(invalid, 'openapi3'), [
    { method: null, path: null, reason: 'webhooks/w: unknown field "gett"' },
    { method: 'GET', path: '/d', reason: 'unknown field "sumary"' },
    { method: 'GET', path: '/e', reason: 'path-level summary: must be string (got integer)' },
  ]);
});
