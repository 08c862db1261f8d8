import t from 'tap';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { UpstreamConfig } from '../../src/config/types.js';
import { discoverUpstream, entriesEqual } from '../../src/discovery/index.js';
import type { RouteEntry } from '../../src/routing/types.js';
import { openapi3WithServer, swagger2WithRefs } from '../fixtures/docs.js';

const FAST = { fetchTimeoutMs: 1000, retries: 0, backoffMs: 10 };

/** A node:http upstream on 127.0.0.1 that lives as long as the test. */
async function upstreamServing(
  t: { teardown(fn: () => void): void },
  handler: (request: IncomingMessage, response: ServerResponse) => void,
): Promise<string> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const json = (body: unknown) => (_request: IncomingMessage, response: ServerResponse) => {
  response.writeHead(200, { 'content-type': 'application/json' });
  response.end(JSON.stringify(body));
};

const upstream = (serviceType: UpstreamConfig['serviceType'], serviceLocation: string, extra: Partial<UpstreamConfig> = {}): UpstreamConfig => ({
  serviceType,
  serviceLocation,
  weight: 1,
  specPath: '/spec',
  ...extra,
});

const summary = (entries: RouteEntry[]) =>
  entries.map((e) => ({ route: `${e.method} ${e.template}`, consumes: e.consumes, produces: e.produces, mw: e.disabledMiddleware, listeners: e.disabledListeners }));

t.test('Swagger 2.0: basePath, $refs, consumes/produces overrides, x-disabled-*', async (t) => {
  const location = await upstreamServing(t, json(swagger2WithRefs));
  const discovered = await discoverUpstream(upstream('swagger2', location), FAST);
  t.same(summary(discovered.entries), [
    { route: 'GET /v1/users', consumes: ['application/json'], produces: ['application/json'], mw: [], listeners: ['accessLog'] },
    { route: 'POST /v1/users', consumes: ['application/xml', 'application/json'], produces: ['application/json'], mw: ['auth'], listeners: [] },
    { route: 'GET /v1/users/{id}', consumes: ['application/json'], produces: ['application/hal+json'], mw: ['auth'], listeners: [] },
  ]);
  t.ok(discovered.entries.every((e) => e.upstream === location));
  t.same(discovered.doc, swagger2WithRefs, 'the original doc is kept, $refs and all');
  t.equal(discovered.upstream.serviceLocation, location);
});

t.test('OpenAPI 3: templated absolute server URL, requestBody and response content types', async (t) => {
  const location = await upstreamServing(t, json(openapi3WithServer));
  const discovered = await discoverUpstream(upstream('openapi3', location, { specPath: '/docs/openapi.json' }), FAST);
  t.same(summary(discovered.entries), [
    { route: 'GET /store/files/{+path}', consumes: [], produces: ['application/json', 'text/plain', 'application/problem+json'], mw: [], listeners: [] },
    { route: 'PUT /store/files/{+path}', consumes: ['application/octet-stream', 'text/plain'], produces: [], mw: [], listeners: [] },
  ]);
});

t.test('OpenAPI 3: a relative server URL is relative to where the doc was fetched', async (t) => {
  const doc = { ...openapi3WithServer, servers: [{ url: 'v2' }] };
  const location = await upstreamServing(t, json(doc));
  const discovered = await discoverUpstream(upstream('openapi3', location, { specPath: '/api/openapi.json' }), FAST);
  t.equal(discovered.entries[0]!.template, '/api/v2/files/{+path}');
  const noServers = { ...openapi3WithServer, servers: undefined };
  const bare = await upstreamServing(t, json(noServers));
  t.equal((await discoverUpstream(upstream('openapi3', bare), FAST)).entries[0]!.template, '/files/{+path}');
});

t.test('a doc a validator objects to is routed, its objections listed per endpoint', async (t) => {
  const invalid = { swagger: '2.0', info: { title: 'x', version: '1' }, paths: { '/a/{id}': { get: { responses: { 200: { description: 'ok' } } } } } };
  const location = await upstreamServing(t, json(invalid));
  const discovered = await discoverUpstream(upstream('swagger2', location), FAST);
  t.same(summary(discovered.entries).map((e) => e.route), ['GET /a/{id}']);
  t.same(discovered.problems, [{ method: 'GET', path: '/a/{id}', reason: 'path parameter {id} is not declared' }]);
  const schemaInvalid = { swagger: '2.0', info: { title: 'x' }, paths: {} };
  const other = await upstreamServing(t, json(schemaInvalid));
  const empty = await discoverUpstream(upstream('swagger2', other), FAST);
  t.same(empty.entries, []);
  t.same(empty.problems, [
    { method: null, path: null, reason: 'info: missing required field "version"' },
    { method: null, path: null, reason: 'the doc has no operation to route (no path item holds one), so no request reaches this upstream through the gateway' },
  ]);
});

t.test('a doc of the other kind than serviceType says is read as what it is, with an objection', async (t) => {
  const openapi = await upstreamServing(t, json(openapi3WithServer));
  const asSwagger = await discoverUpstream(upstream('swagger2', openapi), FAST);
  t.same(summary(asSwagger.entries).map((e) => e.route), ['GET /store/files/{+path}', 'PUT /store/files/{+path}']);
  t.same(asSwagger.problems, [{ method: null, path: null, reason: 'serviceType is "swagger2" but the doc is OpenAPI 3.0.3; it is read as OpenAPI 3.0.3' }]);
  const swagger = await upstreamServing(t, json(swagger2WithRefs));
  const asOpenapi = await discoverUpstream(upstream('openapi3', swagger), FAST);
  t.equal(asOpenapi.entries.length, 3);
  t.same(asOpenapi.problems, [{ method: null, path: null, reason: 'serviceType is "openapi3" but the doc is Swagger 2.0; it is read as Swagger 2.0' }]);
  const neither = await upstreamServing(t, json({ hello: 'world' }));
  await t.rejects(discoverUpstream(upstream('openapi3', neither), FAST), { message: /the doc is neither Swagger nor OpenAPI/ });
});

t.test('a 500 is retried with back-off until the doc comes', async (t) => {
  const seen: number[] = [];
  const location = await upstreamServing(t, (request, response) => {
    seen.push(Date.now());
    if (seen.length < 3) {
      response.writeHead(500).end('starting');
      return;
    }
    json(swagger2WithRefs)(request, response);
  });
  const discovered = await discoverUpstream(upstream('swagger2', location), { fetchTimeoutMs: 1000, retries: 3, backoffMs: 40 });
  t.equal(discovered.entries.length, 3);
  t.equal(seen.length, 3);
  t.ok(seen[1]! - seen[0]! >= 35, `first back-off ~40 ms (was ${seen[1]! - seen[0]!})`);
  t.ok(seen[2]! - seen[1]! >= 75, `second back-off doubles (was ${seen[2]! - seen[1]!})`);
});

t.test('retries run out: the last HTTP status is the reason', async (t) => {
  const location = await upstreamServing(t, (_request, response) => response.writeHead(503).end());
  await t.rejects(discoverUpstream(upstream('swagger2', location), { fetchTimeoutMs: 1000, retries: 2, backoffMs: 5 }), {
    message: `GET ${location}/spec failed (3 attempts): HTTP 503 Service Unavailable`,
  });
});

t.test('a hanging upstream times out within the bound', async (t) => {
  let requests = 0;
  const location = await upstreamServing(t, () => void requests++); // never answers
  const started = Date.now();
  await t.rejects(discoverUpstream(upstream('swagger2', location), { fetchTimeoutMs: 150, retries: 1, backoffMs: 50 }), {
    message: `GET ${location}/spec failed (2 attempts): timed out after 150 ms`,
  });
  const elapsed = Date.now() - started;
  t.equal(requests, 2);
  // The count above is the bounded work; the time: at least 2 x 150 ms + 50 ms back-off (a timer never
  // fires early), and, as a generous backstop a busy machine cannot reach, far below forever.
  t.ok(elapsed >= 340, `2 x 150 ms + 50 ms back-off (took ${elapsed} ms)`);
  t.ok(elapsed < 10_000, 'the fetch timeout fired');
});

t.test('a refused connection and an answer that is neither JSON nor YAML', async (t) => {
  await t.rejects(discoverUpstream(upstream('swagger2', 'http://127.0.0.1:1'), FAST), {
    message: /^GET http:\/\/127\.0\.0\.1:1\/spec failed \(1 attempt\): .*ECONNREFUSED/,
  });
  let requests = 0;
  const html = await upstreamServing(t, (_request, response) => {
    requests++;
    response.writeHead(200, { 'content-type': 'text/html' }).end('<html></html>');
  });
  await t.rejects(discoverUpstream(upstream('swagger2', html), { ...FAST, retries: 3 }), {
    message: new RegExp(`^GET ${html}/spec: the answer is neither JSON nor YAML \\(content-type text/html\\)`),
  });
  t.equal(requests, 1, 'not retried: it will not become a doc');
});

t.test('a redirect is not followed and says so', async (t) => {
  const location = await upstreamServing(t, (_request, response) => response.writeHead(301, { location: '/spec/' }).end());
  await t.rejects(discoverUpstream(upstream('swagger2', location), FAST), { message: /HTTP 301 Moved Permanently \(redirects are not followed/ });
});

t.test('discovery can be cancelled', async (t) => {
  const location = await upstreamServing(t, (_request, response) => response.writeHead(500).end());
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 50);
  await t.rejects(
    discoverUpstream(upstream('swagger2', location), { fetchTimeoutMs: 1000, retries: 10, backoffMs: 1000, signal: controller.signal }),
    { message: `GET ${location}/spec: discovery was cancelled` },
  );
});

t.test('static upstreams: entries from the config, no fetch', async (t) => {
  const discovered = await discoverUpstream(
    upstream('static', 'http://127.0.0.1:1', {
      endpoints: [
        { method: 'get', path: '/user/{id}', produces: ['application/json'], 'x-disabled-listeners': ['accessLog'] },
        { method: 'POST', path: '/user', consumes: ['application/json'] },
      ],
    }),
    FAST,
  );
  t.equal(discovered.doc, null);
  t.same(discovered.entries, [
    { method: 'GET', template: '/user/{id}', upstream: 'http://127.0.0.1:1', consumes: [], produces: ['application/json'], disabledMiddleware: [], disabledListeners: ['accessLog'] },
    { method: 'POST', template: '/user', upstream: 'http://127.0.0.1:1', consumes: ['application/json'], produces: [], disabledMiddleware: [], disabledListeners: [] },
  ]);
});

t.test('entriesEqual ignores order, sees any routing change', async (t) => {
  const a: RouteEntry = { method: 'GET', template: '/a', upstream: 'http://x:1', consumes: ['a/b', 'c/d'], produces: [], disabledMiddleware: [], disabledListeners: [] };
  const b: RouteEntry = { ...a, template: '/b' };
  t.ok(entriesEqual([a, b], [b, { ...a, consumes: ['c/d', 'a/b'] }]));
  t.notOk(entriesEqual([a, b], [a]));
  t.notOk(entriesEqual([a], [{ ...a, produces: ['text/plain'] }]));
  t.notOk(entriesEqual([a], [{ ...a, disabledListeners: ['accessLog'] }]));
  t.notOk(entriesEqual([a], [{ ...a, method: 'PUT' }]));
});
