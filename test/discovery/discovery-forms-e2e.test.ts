// docs/reference/upstreams.md#lenient-discovery end to end: real upstreams serve their docs over HTTP (JSON, YAML with a right, a wrong and no
// Content-Type, OpenAPI 3 YAML, a sloppy doc, an HTML page, JSON that is no API doc), the real gateway
// (primary + 2 workers) discovers them, routes every template form to the right upstream, reports the
// sloppy doc's objections and the two failures in /healthcheck, and /spec validates.
import t, { type Test } from 'tap';
import SwaggerParser from '@apidevtools/swagger-parser';
import { httpRequest, startGateway, testConfig } from '../helpers/gateway-process.js';
import { echoHandler, startUpstream, type Upstream } from '../helpers/upstream-server.js';
import { asYaml, formRequests, formsDoc, htmlPage, notADoc, openapi3RestYaml, sloppyDoc, sloppyProblems } from '../fixtures/lenient-docs.js';

type Json = Record<string, any>;

/** An upstream that answers GET /spec with `doc` as given, and echoes every other request. */
async function serving(doc: string, contentType: string | null): Promise<Upstream> {
  const upstream = await startUpstream((req, res, recorded) => {
    if (req.method === 'GET' && req.url === '/spec') {
      res.writeHead(200, contentType === null ? {} : { 'content-type': contentType });
      res.end(doc);
      return;
    }
    echoHandler(req, res, recorded);
  });
  t.teardown(() => upstream.close());
  return upstream;
}

const formsUpstreams = {
  json: await serving(JSON.stringify(formsDoc('/json')), 'application/json'),
  yaml: await serving(asYaml(formsDoc('/yaml')), 'application/yaml'),
  yamlAsText: await serving(asYaml(formsDoc('/yaml-text')), 'text/plain; charset=utf-8'),
  yamlUntyped: await serving(asYaml(formsDoc('/yaml-untyped')), null),
};
const rest = await serving(openapi3RestYaml, 'text/yaml');
const sloppy = await serving(JSON.stringify(sloppyDoc), 'application/json');
const html = await serving(htmlPage, 'text/html');
const notSwagger = await serving(JSON.stringify(notADoc), 'application/json');

const REFRESH_MS = 300;
const gateway = await startGateway(t, {
  config: testConfig(
    [
      ...Object.values(formsUpstreams).map((u) => ({ serviceType: 'swagger2', serviceLocation: u.url })),
      { serviceType: 'openapi3', serviceLocation: rest.url },
      { serviceType: 'swagger2', serviceLocation: sloppy.url },
      { serviceType: 'swagger2', serviceLocation: html.url },
      { serviceType: 'openapi3', serviceLocation: notSwagger.url },
    ],
    { discovery: { fetchTimeoutMs: 5000, retries: 0, backoffMs: 50, refreshIntervalMs: REFRESH_MS } },
  ),
  waitFor: (line) => line.msg === 'gateway operational',
});

const all = [...Object.values(formsUpstreams), rest, sloppy, html, notSwagger];

/** Requests an upstream received, less the doc fetches of re-discovery. */
const routed = (u: Upstream) => u.requests.filter((r) => r.url !== '/spec');

/** Sends `path` through the gateway; asserts it reached `expected` (and no other upstream) at that very path. */
async function routedTo(tt: Test, method: string, path: string, expected: Upstream, what: string): Promise<void> {
  const before = all.map((u) => routed(u).length);
  const res = await httpRequest(gateway.port, path, { method });
  tt.equal(res.status, 200, `${what}: ${method} ${path} answers 200`);
  const arrived = all.map((u, i) => routed(u).slice(before[i]));
  const mine = arrived[all.indexOf(expected)]!;
  tt.same(
    mine.map((r) => `${r.method} ${r.url}`),
    [`${method} ${path}`],
    `${what}: the upstream received ${method} ${path}`,
  );
  tt.equal(arrived.flat().length, 1, `${what}: no other upstream saw it`);
}

t.test('each form of a Swagger 2.0 doc is routed to its upstream, whether the doc is JSON or YAML', async (t) => {
  const bases = { json: '/json', yaml: '/yaml', yamlAsText: '/yaml-text', yamlUntyped: '/yaml-untyped' } as const;
  for (const [name, upstream] of Object.entries(formsUpstreams) as Array<[keyof typeof bases, Upstream]>) {
    for (const { form, path } of formRequests(bases[name])) await routedTo(t, 'GET', path, upstream, `${name} ${form}`);
    await routedTo(t, 'DELETE', `${bases[name]}/user/7`, upstream, `${name} DELETE on a regex template`);
    t.equal((await httpRequest(gateway.port, `${bases[name]}/user/abc`)).status, 404, `${name}: the regex segment refuses "abc"`);
  }
});

t.test('OpenAPI 3 YAML: {+rest} under a relative server URL', async (t) => {
  await routedTo(t, 'GET', '/oas/rest/a/b/c', rest, 'openapi3 yaml {+rest}');
  await routedTo(t, 'GET', '/oas/rest/x.json', rest, 'openapi3 yaml {+rest}, one segment');
});

t.test('a sloppy doc is routed; its objections are in the health report', async (t) => {
  await routedTo(t, 'GET', '/sloppy/orders/7', sloppy, 'undeclared parameter');
  await routedTo(t, 'GET', '/sloppy/customers', sloppy, 'unknown field');
  await routedTo(t, 'POST', '/sloppy/customers', sloppy, 'dangling $ref');
  // A table that takes in a doc with objections is compiled off the primary's event loop (the /spec
  // guard dereferences and validates: src/cluster/compile-runner.ts).
  // The workers can route before the primary's line about the table has come through its stdout pipe.
  const settled = await gateway.waitForLog((l) => l.msg === 'routing table compiled' && l.complete === true, 10_000, 'the table of all settled upstreams');
  t.equal(settled.compiledOn, 'thread', 'the table with the sloppy doc was compiled on the compile thread');
});

t.test('/healthcheck: the good docs ready and clean, the sloppy one ready with problems, HTML and non-docs failed', async (t) => {
  const res = await httpRequest(gateway.port, '/healthcheck');
  t.equal(res.status, 200);
  const upstreams = (JSON.parse(res.body) as { upstreams: Json[] }).upstreams;
  const entry = (u: Upstream) => upstreams.find((e) => e.serviceLocation === u.url)!;
  for (const upstream of Object.values(formsUpstreams)) {
    t.match(entry(upstream), { state: 'ready', endpoints: 6 }, `${upstream.url} ready`);
    t.notOk('problems' in entry(upstream), 'nothing to object to: every form declared by identifier');
  }
  t.match(entry(rest), { state: 'ready', endpoints: 1 });
  t.notOk('problems' in entry(rest));
  t.match(entry(sloppy), { state: 'ready', endpoints: 3 });
  t.same(entry(sloppy).problems, sloppyProblems);
  t.notOk('problemsOmitted' in entry(sloppy));
  t.match(entry(html), { state: 'failed', endpoints: 0 });
  t.match(entry(html).lastError, `GET ${html.url}/spec: the answer is neither JSON nor YAML (content-type text/html): it looks like HTML`);
  t.match(entry(notSwagger), { state: 'failed', endpoints: 0 });
  t.match(entry(notSwagger).lastError, `${notSwagger.url}/spec: the doc is neither Swagger nor OpenAPI (no "swagger" or "openapi" key`);
});

t.test('/spec validates as Swagger 2.0 with all of them in it, and as OpenAPI 3.0', async (t) => {
  const res = await httpRequest(gateway.port, '/spec');
  t.equal(res.status, 200);
  const spec = JSON.parse(res.body) as Json;
  await t.resolves(SwaggerParser.validate(structuredClone(spec) as never), 'valid Swagger 2.0');

  const files = spec.paths['/json/files/{path}'].get;
  t.equal(files['x-template'], '/json/files/{+path}');
  t.same(files.parameters, [{ name: 'path', in: 'path', required: true, type: 'string' }]);
  const user = spec.paths['/json/user/{id}'];
  t.equal(user.get['x-template'], '/json/user/{id: [0-9]+}');
  t.same(user.get.parameters, [{ name: 'id', in: 'path', required: true, type: 'string', description: 'digits only', pattern: '^(?:[0-9]+)$' }]);
  t.equal(spec.paths['/json/img/{name}{ext}'].get['x-template'], '/json/img/{name}{.ext}');
  t.equal(spec.paths['/json/doc{ext}'].get['x-template'], '/json/doc{.ext}');
  t.notOk('x-template' in spec.paths['/json/items/{name}'].get, 'a plain template needs no x-template');
  t.equal(spec.paths['/oas/rest/{rest}'].get['x-template'], '/oas/rest/{+rest}');

  const order = spec.paths['/sloppy/orders/{orderId}'].get;
  t.same(order.parameters, [{ name: 'orderId', in: 'path', required: true, type: 'string' }], 'the undeclared parameter is declared');
  t.same(order.responses[200].schema, { 'x-unresolved-ref': '#/definitions/Order' });
  t.notOk('summery' in spec.paths['/sloppy/customers'].get, 'the unknown field is left out');
  t.equal(spec.paths['/sloppy/customers'].get.operationId, 'listCustomers', 'the rest of the operation stays');

  const openapi = await httpRequest(gateway.port, '/spec?format=openapi3');
  t.equal(openapi.status, 200);
  await t.resolves(SwaggerParser.validate(JSON.parse(openapi.body) as never), 'valid OpenAPI 3.0');
});

t.test('the sloppy doc\'s problems are logged once, not at every re-discovery sweep', async (t) => {
  // Every sweep fetches every doc again (the failed ones too): wait for three more.
  const seen = html.requests.length;
  const deadline = Date.now() + 10 * REFRESH_MS + 5000;
  while (html.requests.length < seen + 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  t.ok(html.requests.length >= seen + 3, `three sweeps ran (${html.requests.length - seen})`);
  const logged = gateway.lines.filter((l) => /^upstream doc has \d+ problems/.test(String(l.msg)));
  t.same(logged.map((l) => l.upstream), [sloppy.url], 'one line, for the sloppy upstream');
  t.same(logged[0]!.problems, sloppyProblems);
});
