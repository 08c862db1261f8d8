import t from 'tap';
import { RoutingTable } from '../../src/routing/table.js';
import { compile, entry, oracleFor, winner } from '../helpers/routes.js';

const U1 = 'http://127.0.0.1:9001';
const U2 = 'http://127.0.0.1:9002';

t.test('segment forms: literal beats {.x} beats {x} beats regex beats {+x}', async (t) => {
  const forms = ['/.a', '/{.x}', '/{x}', '/{x: .+}', '/{+x}'];
  for (let i = 0; i < forms.length; i++) {
    const table = compile(forms.slice(i).map((f) => entry('GET', f)));
    t.equal(winner(table, '/.a'), forms[i], `${forms[i]} wins over ${forms.slice(i + 1).join(', ') || 'nothing'}`);
  }
  // The same ranking deeper in a template, with the rest equal.
  const deep = compile(['/v1/{+rest}', '/v1/{id: [a-z0-9]+}', '/v1/{id}', '/v1/abc'].map((f) => entry('GET', f)));
  t.equal(winner(deep, '/v1/abc'), '/v1/abc');
  t.equal(winner(deep, '/v1/abd'), '/v1/{id}');
  t.equal(winner(deep, '/v1/a/b'), '/v1/{+rest}');
});

t.test('what each form matches', async (t) => {
  const table = compile([entry('GET', '/d/x{.ext}'), entry('GET', '/p/{id}'), entry('GET', '/r/{n: [0-9]+}'), entry('GET', '/s/{+rest}')]);
  t.equal(winner(table, '/d/x'), '/d/x{.ext}', '{.x} is optional');
  t.equal(winner(table, '/d/x.tar.gz'), '/d/x{.ext}', '{.x} takes a dot and the rest of the segment');
  t.same(table.params(), { ext: 'tar.gz' });
  t.equal(winner(table, '/d/xy'), null, '{.x} needs its dot');
  t.equal(winner(table, '/p/a%2Fb'), '/p/{id}', '{x} takes an encoded slash');
  t.equal(winner(table, '/p/a/b'), null, '{x} never spans a slash');
  t.equal(winner(table, '/r/123'), '/r/{n: [0-9]+}');
  t.equal(winner(table, '/r/12a'), null, 'a regex must match the whole segment');
  t.equal(winner(table, '/s'), null, '{+x} needs the slash before it');
  t.equal(winner(table, '/s/'), '/s/{+rest}', '{+x} may be empty');
  t.equal(winner(table, '/s/a/b/c'), '/s/{+rest}');
  t.same(table.params(), { rest: 'a/b/c' });
});

t.test('longer template wins when the overlapping ranks are equal', async (t) => {
  const table = compile([entry('GET', '/{x}'), entry('GET', '/{x}{.y}')]);
  t.equal(winner(table, '/foo'), '/{x}{.y}');
  const nested = compile([entry('GET', '/a'), entry('GET', '/a{.fmt}')]);
  t.equal(winner(nested, '/a'), '/a{.fmt}');
});

t.test('first differing rank decides before length', async (t) => {
  // [Param, Literal] vs [Regex]: rank 3 < 4 at the first position.
  const table = compile([entry('GET', '/{x: .+}'), entry('GET', '/{x}:run')]);
  t.equal(winner(table, '/job:run'), '/{x}:run');
  t.equal(winner(table, '/job:walk'), '/{x: .+}');
});

t.test('canonical string tie break, by UTF-16 code units ascending', async (t) => {
  const regexes = compile([entry('GET', '/{x: [a-z]+}'), entry('GET', '/{x: [a-c]+}')]);
  t.equal(winner(regexes, '/abc'), '/{x: [a-c]+}', '"{:[a-c]+}" < "{:[a-z]+}"');
  const literals = compile([entry('GET', '/x{p}'), entry('GET', '/xy{p}')]);
  t.equal(winner(literals, '/xyz'), '/xy{p}', '"xy{}" < "x{}" since "y" (0x79) < "{" (0x7b)');
  const upper = compile([entry('GET', '/{a: [a-z]+}'), entry('GET', '/{a: [A-z]+}')]);
  t.equal(winner(upper, '/abc'), '/{a: [A-z]+}', 'upper case sorts first');
});

t.test('identifiers never count: equivalent templates are one load-balanced route', async (t) => {
  const table = compile([entry('GET', '/users/{id}', U1), entry('GET', '/users/{userId}', U2), entry('GET', '/users/{x: [0-9]+}', U2)]);
  const sel = table.select('GET', '/users/abc', undefined, undefined, false);
  t.equal(sel.status, 200);
  t.same(sel.targets.map((x) => x.upstream), [U1, U2]);
  t.same(sel.targets.map((x) => x.template), ['/users/{id}', '/users/{userId}']);
  t.equal(table.routes().length, 2, 'the regex template is a different route');
});

t.test('the root template: "/", "" and "//" are one template matching only "/"', async (t) => {
  const table = compile([entry('GET', '/', U1), entry('GET', '', U2), entry('POST', '//', U2), entry('GET', '/{x}', U1)]);
  const sel = table.select('GET', '/', undefined, undefined, false);
  t.equal(sel.route?.canonical, '');
  t.same(sel.targets.map((x) => x.upstream), [U1, U2]);
  t.equal(winner(table, '/a'), '/{x}');
  t.equal(table.select('POST', '/', undefined, undefined, false).status, 200);
  t.equal(table.select('POST', '/a', undefined, undefined, false).status, 405);
});

t.test('/{+}/foo beats /{+}/{} beats /{+}', async (t) => {
  const all = ['/{+}/foo', '/{+}/{}', '/{+}'];
  for (let i = 0; i < all.length; i++) {
    t.equal(winner(compile(all.slice(i).map((f) => entry('GET', f))), '/a/b/foo'), all[i]);
  }
});

t.test('leading and trailing slashes of a template are ignored; one trailing slash of a path is optional', async (t) => {
  const table = compile([entry('GET', 'users/{id}/')]);
  t.equal(winner(table, '/users/7'), 'users/{id}/');
  t.equal(winner(table, '/users/7/'), 'users/{id}/');
});

t.test('method selection: 404, 405 with Allow, automatic OPTIONS and HEAD', async (t) => {
  const table = compile([entry('GET', '/users/me'), entry('GET', '/users/{id}'), entry('DELETE', '/users/{id}'), entry('HEAD', '/files/{id}'), entry('GET', '/files/{id}'), entry('OPTIONS', '/opts')]);
  t.equal(winner(table, '/users/me', 'DELETE'), '/users/{id}', 'the most specific template that declares the method');
  const miss = table.select('GET', '/nope', undefined, undefined, false);
  t.equal(miss.status, 404);
  t.equal(miss.allow, '');
  const wrong = table.select('PUT', '/users/me', undefined, undefined, false);
  t.equal(wrong.status, 405);
  t.equal(wrong.allow, 'GET, HEAD, DELETE, OPTIONS', 'methods of every template matching the path');
  const options = table.select('OPTIONS', '/users/me', undefined, undefined, false);
  t.equal(options.status, 200);
  t.ok(options.autoOptions);
  t.equal(options.allow, 'GET, HEAD, DELETE, OPTIONS');
  const declaredOptions = table.select('OPTIONS', '/opts', undefined, undefined, false);
  t.equal(declaredOptions.route?.method, 'OPTIONS', 'a declared OPTIONS endpoint is forwarded');
  t.notOk(declaredOptions.autoOptions);
  const head = table.select('HEAD', '/users/5', undefined, undefined, false);
  t.equal(head.route?.method, 'GET');
  t.ok(head.headAsGet, 'HEAD without a HEAD endpoint is served by GET');
  const declaredHead = table.select('HEAD', '/files/5', undefined, undefined, false);
  t.equal(declaredHead.route?.method, 'HEAD');
  t.notOk(declaredHead.headAsGet);
});

t.test('Content-Type narrows equivalent endpoints (415 when none consumes it)', async (t) => {
  const table = compile([
    entry('POST', '/items', U1, { consumes: ['application/json'] }),
    entry('POST', '/items', U2, { consumes: ['application/xml; charset=utf-8'] }),
    entry('POST', '/any', U1),
  ]);
  const select = (ct: string | undefined, hasBody = true) => table.select('POST', '/items', ct, undefined, hasBody);
  t.same(select('application/json; charset=utf-8').targets.map((x) => x.upstream), [U1]);
  t.same(select('application/xml').targets.map((x) => x.upstream), [U2]);
  t.equal(select('text/plain').status, 415);
  t.equal(select(undefined).status, 415, 'a body without Content-Type is application/octet-stream');
  t.same(select(undefined, false).targets.map((x) => x.upstream), [U1, U2], 'a request without a body skips the check');
  t.equal(table.select('POST', '/any', 'text/plain', undefined, true).status, 200, 'no consumes means anything');
});

t.test('Accept narrows equivalent endpoints, honouring q-values (406 when none produces it)', async (t) => {
  const table = compile([
    entry('GET', '/report', U1, { produces: ['application/json'] }),
    entry('GET', '/report', U2, { produces: ['text/csv'] }),
  ]);
  const select = (accept: string | undefined) => table.select('GET', '/report', undefined, accept, false);
  t.same(select(undefined).targets.map((x) => x.upstream), [U1, U2], 'no Accept accepts anything');
  t.same(select('text/csv').targets.map((x) => x.upstream), [U2]);
  t.same(select('application/*').targets.map((x) => x.upstream), [U1]);
  t.same(select('application/json;q=0, */*;q=0.1').targets.map((x) => x.upstream), [U2], 'q=0 refuses a type');
  t.equal(select('image/png').status, 406);
  t.equal(select('text/csv;q=0').status, 406);
  const cached = select('text/csv').targets;
  t.equal(select('text/csv').targets, cached, 'the same header value reuses the cached answer');
});

t.test('bad templates are reported with upstream and template, and the rest still loads', async (t) => {
  const { table, problems } = RoutingTable.compile([
    entry('GET', '/ok/{id}', U1),
    entry('GET', '/bad/{id', U1),
    entry('GET', '/bad}/x', U1),
    entry('GET', '/re/{x: [a-z}', U1),
    entry('GET', '/re/{x: (a)\\1}', U2),
    entry('GET', '/re/{x: a(?=b)}', U2),
    entry('GET', '/re/{x: ^abc$}', U2),
    entry('GET', '/re/{x: \\bword}', U2),
    entry('GET', '/re/{x:}', U2),
    entry('GET', '/re/{+x: abc}', U2),
    entry('G E T', '/ok/{id}', U2),
    entry('GET', '/ok/{other}', U1),
  ]);
  t.equal(winner(table, '/ok/1'), '/ok/{id}');
  t.equal(table.size, 1);
  const messages = problems.map((p) => p.message);
  t.equal(messages.length, 11);
  t.match(messages[0], `upstream ${U1}: template "/bad/{id" (GET): unbalanced braces`);
  t.match(messages[1], /unbalanced braces: "}" at offset 3 closes nothing/);
  t.match(messages[2], /regex does not compile/);
  t.match(messages[3], /backreference/);
  t.match(messages[4], /lookaround/);
  t.match(messages[5], /anchor/);
  t.match(messages[6], /word boundary/);
  t.match(messages[7], /empty regex/);
  t.match(messages[8], /cannot follow the "\+" operator/);
  t.match(messages[9], /"G E T" is not an HTTP method/);
  t.match(messages[10], /equivalent to "\/ok\/\{id\}"/);
  for (const p of problems) t.ok(p.message.includes(p.upstream) && p.message.includes(p.template), 'names upstream and template');
});

t.test('regexes that span slashes and are followed by more segments', async (t) => {
  const entries = [entry('GET', '/a/{x: [a-z]+/[a-z]+}/b'), entry('GET', '/{+path}/foo'), entry('GET', '/a/{y}/{z}/c')];
  const table = compile(entries);
  const oracle = oracleFor(entries);
  for (const path of ['/a/x/y/b', '/a/x/y/c', '/q/r/s/foo', '/a/b/c/foo', '/foo', '//foo', '/a/x/y/b/foo']) {
    const s = table.select('GET', path, undefined, undefined, false);
    const o = oracle.lookup('GET', path);
    t.equal(s.route?.canonical ?? null, o.template?.canonical ?? null, `${path} picks what the oracle picks`);
    if (o.template) t.same(table.params(), o.params, `${path} params`);
  }
  t.equal(winner(table, '/a/x/y/b'), '/a/{x: [a-z]+/[a-z]+}/b');
  t.same(table.params(), { x: 'x/y' });
});

t.test('routes() lists equivalence groups in specificity order', async (t) => {
  const table = compile([entry('GET', '/{+a}'), entry('GET', '/users'), entry('GET', '/users/{id}'), entry('POST', '/users'), entry('GET', '/{x}')]);
  t.same(
    table.routes().map((r) => `${r.method} ${r.template}`),
    ['GET /users/{id}', 'GET /users', 'POST /users', 'GET /{x}', 'GET /{+a}'],
  );
});

t.test('a literal a request cannot carry raw (non-ASCII, a space, "#") is matched in its percent-encoded form', async (t) => {
  const table = compile([entry('GET', '/u/é/{id}'), entry('GET', '/a b'), entry('GET', '/x#y'), entry('GET', '/e/😀'), entry('GET', '/p/%c3%a9s')]);
  t.equal(winner(table, '/u/%C3%A9/5'), '/u/é/{id}', 'what clients send for "é"');
  t.equal(winner(table, '/a%20b'), '/a b');
  t.equal(winner(table, '/x%23y'), '/x#y');
  t.equal(winner(table, '/e/%F0%9F%98%80'), '/e/😀', 'a character outside the BMP: its four UTF-8 bytes');
  t.equal(winner(table, '/p/%C3%A9s'), '/p/%c3%a9s', 'written encoded in the doc: as before');
  t.equal(winner(table, '/u/é/5'), null, 'the raw form never reaches routing (a 400 at accept), and matches nothing here');
});

t.test('a literal an RFC 3986 path holds only escaped (", <, >, [, ], ^, `, {, |, }) is matched in its escaped form', async (t) => {
  const table = compile([entry('GET', '/q"uote/{id}'), entry('GET', '/a<b>/[c]'), entry('GET', '/p^`|/%7Bx%7d'), entry('GET', '/e/%3c')]);
  // Routing reads the normalized path, where the raw and the escaped forms are one (test/http/plain-path.test.ts).
  t.equal(winner(table, '/q%22uote/5'), '/q"uote/{id}', 'what WHATWG URL clients send for "');
  t.equal(winner(table, '/a%3Cb%3E/%5Bc%5D'), '/a<b>/[c]');
  t.equal(winner(table, '/p%5E%60%7C/%7Bx%7D'), '/p^`|/%7Bx%7d', 'braces written escaped in the doc (raw ones are a variable)');
  t.equal(winner(table, '/e/%3C'), '/e/%3c');
  t.equal(winner(table, '/q"uote/5'), null, 'the raw form never reaches routing: normalization escapes it');
});
