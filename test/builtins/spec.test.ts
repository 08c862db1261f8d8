import t from 'tap';
import SwaggerParser from '@apidevtools/swagger-parser';
import type { UpstreamConfig } from '../../src/config/types.js';
import type { DiscoveredUpstream } from '../../src/discovery/types.js';
import { buildCombinedSpec } from '../../src/builtins/spec.js';
import { openapi3WithUser, swagger2WithRefs } from '../fixtures/docs.js';

type Json = Record<string, any>;

const ready = (serviceType: UpstreamConfig['serviceType'], serviceLocation: string, doc: object | null, extra: Partial<UpstreamConfig> = {}): DiscoveredUpstream => ({
  upstream: { serviceType, serviceLocation, weight: 1, specPath: '/spec', ...extra },
  entries: [], // /spec reads the docs, not the entries
  doc,
});

const builtinPaths = { healthcheck: '/healthcheck', metrics: '/metrics', spec: '/spec' };

const swaggerUpstream = ready('swagger2', 'http://svc1:8081', swagger2WithRefs);
const openapiUpstream = ready('openapi3', 'http://svc2:8082', openapi3WithUser);
const staticUpstream = ready('static', 'http://10.0.0.7:8080', null, {
  endpoints: [
    { method: 'GET', path: '/health/{+rest}', produces: ['text/plain'] },
    { method: 'POST', path: 'legacy/submit', consumes: ['application/x-www-form-urlencoded'] },
    { method: 'GET', path: '/broken/{x' },
    { method: 'GET', path: '/spec' },
    { method: 'PROPFIND', path: '/dav' },
  ],
});

function combined(upstreams: DiscoveredUpstream[]): Json {
  return buildCombinedSpec({ upstreams, builtinPaths }) as Json;
}

const validate = (doc: Json) => SwaggerParser.validate(structuredClone(doc) as never);

t.test('Swagger 2.0 + OpenAPI 3 + static: valid Swagger 2.0, every path, Users kept apart', async (t) => {
  const doc = combined([swaggerUpstream, openapiUpstream, staticUpstream]);
  await t.resolves(validate(doc), 'validates as Swagger 2.0');
  t.equal(doc.swagger, '2.0');
  t.equal(doc.basePath, '/');

  t.same(Object.keys(doc.paths).sort(), [
    '/health/{rest}',
    '/healthcheck',
    '/legacy/submit',
    '/metrics',
    '/p/profiles/{id}',
    '/p/profiles/{id}/avatar',
    '/spec',
    '/v1/users',
    '/v1/users/{id}',
  ]);

  t.ok(doc.definitions['svc1_8081.User'], 'the Swagger 2.0 User');
  t.ok(doc.definitions['svc2_8082.User'], 'the OpenAPI 3 User');
  t.notOk(doc.definitions.User);
  t.same(doc.paths['/v1/users/{id}'].get.responses[200].schema, { $ref: '#/definitions/svc1_8081.User' });
  t.same(doc.definitions['svc1_8081.User'].properties.best, { $ref: '#/definitions/svc1_8081.User' }, 'refs inside definitions follow');
  t.same(doc.paths['/v1/users'].post.responses[201], { $ref: '#/responses/svc1_8081.Created' });
  t.same(doc.responses['svc1_8081.Created'].schema, { $ref: '#/definitions/svc1_8081.User' });
  t.same(doc.paths['/p/profiles/{id}'].get.responses[200].schema, { $ref: '#/definitions/svc2_8082.User' });
  t.same(doc.definitions['svc2_8082.Pet'].properties.owner, { $ref: '#/definitions/svc2_8082.User' });

  const dereferenced = (await validate(doc)) as Json;
  t.same(Object.keys(dereferenced.paths['/v1/users/{id}'].get.responses[200].schema.properties), ['id', 'best']);
  t.same(Object.keys(dereferenced.paths['/p/profiles/{id}'].get.responses[200].schema.properties), ['login', 'nickname', 'pet', 'age']);
});

t.test('built-in endpoints are described and win over upstream ones', async (t) => {
  const doc = combined([swaggerUpstream, openapiUpstream, staticUpstream]);
  t.same(Object.keys(doc.paths['/healthcheck'].get.responses), ['200', '503']);
  t.ok(doc.paths['/metrics'].get.responses[200]);
  t.notOk(doc.paths['/spec'].get['x-upstreams'], 'the static upstream\'s GET /spec is shadowed');
  t.equal(doc.paths['/spec'].get.operationId, 'specgateSpec');

  const moved = buildCombinedSpec({ upstreams: [], builtinPaths: { healthcheck: '/_/health', metrics: '/_/metrics', spec: '/_/spec' } }) as Json;
  t.same(Object.keys(moved.paths), ['/_/health', '/_/metrics', '/_/spec']);
  await t.resolves(validate(moved));
});

t.test('Swagger 2.0 upstream: operations as the doc says them, doc-level media types folded in', async (t) => {
  const doc = combined([swaggerUpstream]);
  const post = doc.paths['/v1/users'].post;
  t.same(post.consumes, ['application/xml', 'application/json']);
  t.same(post.produces, ['application/json']);
  t.same(post['x-disabled-middleware'], ['auth']);
  t.same(post['x-upstreams'], ['http://svc1:8081']);
  t.same(doc.paths['/v1/users/{id}'].get.parameters, [{ name: 'id', in: 'path', required: true, type: 'string' }], 'path-item parameters folded into the operation');
});

t.test('OpenAPI 3 upstream: converted as far as Swagger 2.0 can say it', async (t) => {
  const doc = combined([openapiUpstream]);
  await t.resolves(validate(doc));
  const get = doc.paths['/p/profiles/{id}'].get;
  t.same(get.parameters, [
    { name: 'id', in: 'path', type: 'integer', required: true },
    { name: 'fields', in: 'query', type: 'array', items: { type: 'string' }, collectionFormat: 'csv', required: false },
    { name: 'X-Trace', in: 'header', type: 'string', required: false },
  ], 'cookie and object parameters left out');
  t.same(Object.keys(get.responses), ['200'], '"4XX" has no Swagger 2.0 form');
  t.same(get.produces, ['application/json']);

  const put = doc.paths['/p/profiles/{id}'].put;
  t.same(put.consumes, ['application/json', 'application/xml']);
  t.same(put.parameters.find((p: Json) => p.in === 'body'), { name: 'body', in: 'body', required: true, schema: {} }, 'two body schemas: neither is invented');
  t.same(put.responses[200].schema, { $ref: '#/definitions/svc2_8082.User' });

  const avatar = doc.paths['/p/profiles/{id}/avatar'].post;
  t.same(avatar.parameters, [
    { name: 'id', in: 'path', type: 'string', required: true },
    { name: 'file', in: 'formData', required: true, type: 'file' },
    { name: 'note', in: 'formData', required: false, type: 'string' },
  ]);
  t.same(avatar.consumes, ['multipart/form-data']);

  const user = doc.definitions['svc2_8082.User'];
  t.same(user.required, ['login'], 'a required property the schema never declares is dropped');
  t.same(user.properties.nickname, { type: 'string', 'x-nullable': true });
  t.same(user.properties.pet, {}, 'oneOf is left out');
  t.same(user.properties.age, { type: 'integer', minimum: 0, exclusiveMinimum: true });
});

t.test('static upstream: minimal operations; templates the router refuses and 2.0-less methods are left out', async (t) => {
  const doc = combined([staticUpstream]);
  await t.resolves(validate(doc));
  t.same(doc.paths['/health/{rest}'].get, {
    parameters: [{ name: 'rest', in: 'path', required: true, type: 'string' }],
    responses: { default: { description: 'Response of the upstream' } },
    produces: ['text/plain'],
    'x-template': '/health/{+rest}',
    'x-upstreams': ['http://10.0.0.7:8080'],
  });
  t.same(doc.paths['/legacy/submit'].post.consumes, ['application/x-www-form-urlencoded']);
  t.notOk(Object.keys(doc.paths).some((p) => p.startsWith('/broken') || p === '/dav'));
});

t.test('equivalent endpoints: one operation (the first upstream\'s), every upstream listed', async (t) => {
  const replica = ready('swagger2', 'http://svc1-b:8081', swagger2WithRefs);
  const renamed = structuredClone(swagger2WithRefs) as Json;
  renamed.paths['/users/{userId}'] = {
    get: { operationId: 'getUserAgain', parameters: [{ name: 'userId', in: 'path', required: true, type: 'string' }], responses: { 200: { description: 'ok' } } },
    delete: { operationId: 'deleteUser', parameters: [{ name: 'userId', in: 'path', required: true, type: 'string' }], responses: { 204: { description: 'gone' } } },
  };
  delete renamed.paths['/users/{id}'];
  const other = ready('swagger2', 'http://svc3:9000', renamed);

  const doc = combined([swaggerUpstream, replica, other]);
  await t.resolves(validate(doc));
  t.same(doc.paths['/v1/users/{id}'].get['x-upstreams'], ['http://svc1:8081', 'http://svc1-b:8081', 'http://svc3:9000']);
  t.equal(doc.paths['/v1/users/{id}'].get.operationId, 'getUser', 'the first upstream describes it');
  t.notOk(doc.paths['/v1/users/{userId}'], 'an equivalent template joins the first spelling');
  t.same(doc.paths['/v1/users/{id}'].delete.parameters, [{ name: 'id', in: 'path', required: true, type: 'string' }], 'its path parameter renamed to match');
  t.same(doc.paths['/v1/users/{id}'].delete['x-upstreams'], ['http://svc3:9000']);
  t.ok(doc.definitions['svc1-b_8081.User'.replace('-', '_')], 'each upstream keeps its own definitions');
});

t.test('operationIds are unique', async (t) => {
  const doc = combined([swaggerUpstream, openapiUpstream]);
  t.equal(doc.paths['/v1/users'].get.operationId, 'listUsers');
  t.equal(doc.paths['/p/profiles/{id}'].get.operationId, 'svc2_8082_listUsers');
});

t.test('an unresolvable $ref is left out, not followed', async (t) => {
  const external = structuredClone(swagger2WithRefs) as Json;
  external.definitions.User.properties.address = { $ref: 'common.json#/Address' };
  const doc = combined([ready('swagger2', 'http://svc1:8081', external)]);
  t.same(doc.definitions['svc1_8081.User'].properties.address, { 'x-unresolved-ref': 'common.json#/Address' });
  await t.resolves(validate(doc));
});

t.test('the input docs are not modified', async (t) => {
  const before = JSON.stringify([swagger2WithRefs, openapi3WithUser]);
  combined([swaggerUpstream, openapiUpstream, staticUpstream]);
  t.equal(JSON.stringify([swagger2WithRefs, openapi3WithUser]), before);
});

t.test('toOpenApi3: the same combination as a valid OpenAPI 3.0 document', async (t) => {
  const { toOpenApi3 } = await import('../../src/builtins/spec.js');
  const swagger = combined([swaggerUpstream, openapiUpstream, staticUpstream]);
  const before = JSON.stringify(swagger);
  const doc = toOpenApi3(swagger) as Json;
  t.equal(JSON.stringify(swagger), before, 'the Swagger 2.0 doc is not modified');
  await t.resolves(SwaggerParser.validate(structuredClone(doc) as never), 'validates as OpenAPI 3.0');
  t.equal(doc.openapi, '3.0.3');
  t.same(Object.keys(doc.paths).sort(), Object.keys(swagger.paths).sort());
  t.same(doc.paths['/v1/users/{id}'].get.responses[200].content['application/hal+json'].schema, { $ref: '#/components/schemas/svc1_8081.User' });
  t.same(doc.paths['/v1/users'].post.requestBody.content['application/xml'].schema, { $ref: '#/components/schemas/svc1_8081.User' });
  t.same(doc.components.schemas['svc2_8082.User'].properties.nickname, { type: 'string', nullable: true });
  t.same(doc.paths['/p/profiles/{id}/avatar'].post.requestBody.content['multipart/form-data'].schema, {
    type: 'object',
    properties: { file: { type: 'string', format: 'binary' }, note: { type: 'string' } },
    required: ['file'],
  });
  t.same(doc.paths['/p/profiles/{id}'].get.parameters[1], { name: 'fields', in: 'query', required: false, schema: { type: 'array', items: { type: 'string' } }, style: 'form', explode: false });
});

t.test('security schemes are namespaced; ones 2.0 cannot say are left out with their requirements', async (t) => {
  const secured2 = structuredClone(swagger2WithRefs) as Json;
  secured2.securityDefinitions = { key: { type: 'apiKey', name: 'X-Key', in: 'header' } };
  secured2.security = [{ key: [] }];
  const secured3 = structuredClone(openapi3WithUser) as Json;
  secured3.components.securitySchemes = {
    basic: { type: 'http', scheme: 'basic' },
    jwt: { type: 'http', scheme: 'bearer' },
    oauth: { type: 'oauth2', flows: { clientCredentials: { tokenUrl: 'https://auth.example.com/token', scopes: { read: 'read it' } } } },
  };
  secured3.security = [{ jwt: [] }];
  secured3.paths['/profiles/{id}'].put.security = [{ jwt: [] }, { oauth: ['read'] }, { basic: [] }];
  const doc = combined([ready('swagger2', 'http://svc1:8081', secured2), ready('openapi3', 'http://svc2:8082', secured3)]);
  await t.resolves(validate(doc));
  t.same(Object.keys(doc.securityDefinitions), ['svc1_8081.key', 'svc2_8082.basic', 'svc2_8082.oauth']);
  t.same(doc.securityDefinitions['svc2_8082.oauth'], { type: 'oauth2', flow: 'application', tokenUrl: 'https://auth.example.com/token', scopes: { read: 'read it' } });
  t.same(doc.paths['/v1/users'].get.security, [{ 'svc1_8081.key': [] }], 'doc-level security applies to each operation');
  t.same(doc.paths['/p/profiles/{id}'].put.security, [{ 'svc2_8082.oauth': ['read'] }, { 'svc2_8082.basic': [] }]);
  t.notOk('security' in doc.paths['/p/profiles/{id}'].get, 'bearer only: nothing said, rather than "no auth"');
});

t.test('a template the router refuses for limits.maxUrlBytes is left out of the doc too', async (t) => {
  const long = `/${'a'.repeat(9000)}/{id}`;
  const upstream = ready('static', 'http://10.0.0.8:8080', null, { endpoints: [{ method: 'GET', path: long }, { method: 'GET', path: '/short' }] });
  const doc = buildCombinedSpec({ upstreams: [upstream], builtinPaths }) as Json;
  t.notOk(doc.paths[long], 'its shortest match (9003 bytes) is over the default 8192');
  t.ok(doc.paths['/short']);
  const larger = buildCombinedSpec({ upstreams: [upstream], builtinPaths, maxUrlBytes: 16_384 }) as Json;
  t.ok(larger.paths[long], 'a larger limits.maxUrlBytes lets it in, as the router does');
});

function sharedOperationIds(ids: string[]): Json {
  const paths: Json = {};
  ids.forEach((operationId, i) => (paths[`/p${i}`] = { get: { operationId, responses: { 200: { description: 'ok' } } } }));
  return { swagger: '2.0', info: { title: 't', version: '1' }, paths };
}

t.test('a shared operationId takes the next free suffix, around one that is taken literally', async (t) => {
  const doc = combined([ready('swagger2', 'http://svc1:8081', sharedOperationIds(['x', 'x', 'svc1_8081_x_3', 'x', 'x', 'x', 'svc1_8081_x_6', 'x']))]);
  const ids = Object.keys(doc.paths)
    .filter((key) => key.startsWith('/p'))
    .sort((a, b) => Number(a.slice(2)) - Number(b.slice(2)))
    .map((key) => doc.paths[key].get.operationId);
  t.same(ids, ['x', 'svc1_8081_x', 'svc1_8081_x_3', 'svc1_8081_x_2', 'svc1_8081_x_4', 'svc1_8081_x_5', 'svc1_8081_x_6', 'svc1_8081_x_7']);
});

// Timed at n and 4n in the same run: a linear de-duplication takes about 4 times as long, one that
// tries every suffix from _2 again for each duplicate 16 (the old code: 2.6 s of table compile for
// 4,000 operations sharing one operationId, 10.2 s for 8,000).
t.test('operations sharing one operationId: four times as many cost about four times as long', async (t) => {
  const docOf = (n: number) => ready('swagger2', 'http://svc1:8081', sharedOperationIds(Array.from({ length: n }, () => 'same')));
  // The best of two: a garbage collection inside one run would count as growth.
  const timed = (n: number) => {
    const upstream = docOf(n);
    let best = Infinity;
    let doc: Json = {};
    for (let run = 0; run < 2; run++) {
      const started = performance.now();
      doc = combined([upstream]);
      best = Math.min(best, performance.now() - started);
    }
    return { ms: best, doc };
  };
  timed(500); // the code warm
  const small = timed(2500);
  const large = timed(10_000);
  t.equal(large.doc.paths['/p9999'].get.operationId, 'svc1_8081_same_9999', 'the last one numbered after all the others');
  t.ok(large.ms / small.ms < 9, `10,000 against 2,500 shared operationIds: ${(large.ms / small.ms).toFixed(1)}x the time (quadratic would be 16x)`);
});
