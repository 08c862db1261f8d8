import t from 'tap';
import { RoutingTable } from '../../src/routing/table.js';
import { Rank, type ParsedTemplate, type Segment } from '../../src/routing/template.js';
import { TrieBuilder } from '../../src/routing/trie.js';
import { entry, winner } from '../helpers/routes.js';

const GOOD = 'http://127.0.0.1:9001';
const DEEP = 'http://127.0.0.1:9002';
/** The documented bound (docs/reference/routing.md#path-templates). */
const MAX_TEMPLATE_SEGMENTS = 256;

/** What a worker serves: the table rebuilt from the form the primary publishes. */
function asWorker(table: RoutingTable): RoutingTable {
  return RoutingTable.fromTransferable(table.toTransferable());
}

t.test('a template of 3000 segments is refused, naming its upstream; every other endpoint routes on a worker', async (t) => {
  const deep = '/many' + '/{p}'.repeat(3000);
  const { table, problems } = RoutingTable.compile([entry('GET', '/good/{id}', GOOD), entry('GET', deep, DEEP), entry('GET', '/other', DEEP)]);
  t.equal(problems.length, 1);
  t.equal(problems[0]!.upstream, DEEP);
  t.equal(problems[0]!.template, deep);
  t.match(problems[0]!.message, `upstream ${DEEP}: template "/many/{p}/{p}`);
  t.match(problems[0]!.reason, `3001 path segments; at most ${MAX_TEMPLATE_SEGMENTS} are routed`);
  const worker = asWorker(table);
  t.equal(winner(worker, '/good/1'), '/good/{id}');
  t.equal(winner(worker, '/other'), '/other', 'the refused template\'s upstream keeps its other endpoints');
});

t.test(`${MAX_TEMPLATE_SEGMENTS} segments route, one more is refused; so are more than ${MAX_TEMPLATE_SEGMENTS} variables in fewer segments`, async (t) => {
  const widest = '/{p}'.repeat(MAX_TEMPLATE_SEGMENTS);
  const { table, problems } = RoutingTable.compile([entry('GET', widest), entry('GET', `${widest}/x`), entry('GET', `/a/${'{p}'.repeat(MAX_TEMPLATE_SEGMENTS + 1)}`)]);
  t.same(
    problems.map((p) => p.reason),
    [`${MAX_TEMPLATE_SEGMENTS + 1} path segments; at most ${MAX_TEMPLATE_SEGMENTS} are routed`, `${MAX_TEMPLATE_SEGMENTS + 1} variable segments; at most ${MAX_TEMPLATE_SEGMENTS} are routed`],
  );
  const worker = asWorker(table);
  t.equal(winner(worker, '/v'.repeat(MAX_TEMPLATE_SEGMENTS)), widest);
  t.equal(Object.keys(worker.params()).length, 1, 'every segment captured under the one name p');
  t.equal(worker.params().p, 'v', 'the last capture of a repeated name wins');
});

t.test('a template whose shortest match is longer than limits.maxUrlBytes is refused: no request could reach it', async (t) => {
  const long = `/${'a'.repeat(9000)}/{id}`;
  const refused = RoutingTable.compile([entry('GET', long), entry('GET', '/short')]);
  t.equal(refused.problems.length, 1);
  t.match(refused.problems[0]!.reason, 'no request can match it: its shortest match is 9003 bytes, longer than limits.maxUrlBytes (8192)');
  t.equal(winner(refused.table, '/short'), '/short');
  const allowed = RoutingTable.compile([entry('GET', long)], { maxUrlBytes: 16_384 });
  t.same(allowed.problems, [], 'a larger limits.maxUrlBytes lets it in');
  t.equal(winner(asWorker(allowed.table), `/${'a'.repeat(9000)}/7`), long);
  // {+x}, {.x} and a regex may match nothing: only literal text, slashes and one character per {x} count.
  t.same(RoutingTable.compile([entry('GET', `/${'b'.repeat(8180)}/{+rest}{.ext}{r: .*}`)]).problems, []);
});

t.test('the trie builds a template far deeper than the parser lets through', async (t) => {
  // Straight to the builder: its numbering and finishing must not recurse once per level.
  const slash: Segment = { rank: Rank.Slash, text: '/', name: '', regex: null };
  const param: Segment = { rank: Rank.Param, text: '', name: 'p', regex: null };
  const segments: Segment[] = [];
  for (let i = 0; i < 20_000; i++) segments.push(...(i === 0 ? [] : [slash]), param);
  const template: ParsedTemplate = { raw: 'deep', segments, ranks: segments.map((s) => s.rank), canonical: 'deep', paramNames: segments.filter((s) => s === param).map(() => 'p') };
  const builder = new TrieBuilder();
  builder.insert(template, 0, 0);
  const trie = builder.build();
  t.equal(trie.nodes.length, 1 + 2 * 20_000 - 1);
  t.equal(trie.nodes[trie.nodes.length - 1]!.terminal, 0, 'the deepest node is numbered last and ends the template');
  t.equal(trie.root.minIndex, 0, 'the smallest index reached the root');
});

t.test('a path that would nest the lookup past the stack is 400, not a thrown request', async (t) => {
  // Every template is one segment and small; together they branch at every character of the path.
  const { table, problems } = RoutingTable.compile(Array.from({ length: 8000 }, (_, i) => entry('GET', `/${'a'.repeat(i + 1)}{x}`)));
  t.same(problems, []);
  const worker = asWorker(table);
  t.equal(worker.select('GET', `/${'a'.repeat(8100)}`, undefined, undefined, false).status, 400);
  t.equal(winner(worker, '/aaab'), '/aaa{x}', 'short paths route as usual');
  t.same(worker.params(), { x: 'b' });
});
