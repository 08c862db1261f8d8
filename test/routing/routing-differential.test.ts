import fc from 'fast-check';
import t from 'tap';
import { RoutingTable } from '../../src/routing/table.js';
import { entry, oracleFor } from '../helpers/routes.js';
import { HostRoutes, hostSetLabel } from '../../src/edge/host-routes.js';
import { isPlainPath } from '../../src/http/normalize-path.js';
import { AcceptPhase } from '../../src/lifecycle/accept.js';
import { parseTemplate } from '../../src/routing/template.js';
import { testConfig } from '../helpers/upstream-server.js';

// Differential test: the trie must pick exactly what the oracle of docs/reference/routing.md#specificity picks (sorted templates,
// one anchored regex each, first match wins), on random template sets that use every form.

const LITERALS = ['a', 'ab', 'user', 'users', 'x', 'v1', 'a.b', ':cancel', '$count', 'foo'];
const NAMES = ['a', 'b', 'id'];
const REGEXES = ['[a-z]+', '[0-9]+', 'a|ab', '[a-z]+/[a-z]+', '.*', 'x(y)?', '[^/]+', 'a.*b', 'users?', '(a|b)/c'];
const METHODS = ['GET', 'POST', 'DELETE', 'HEAD', 'OPTIONS'];

type Piece = { kind: 'slash' } | { kind: 'lit'; text: string } | { kind: 'dot' | 'param' | 'plus'; name: string } | { kind: 're'; name: string; re: string };

const piece: fc.Arbitrary<Piece> = fc.oneof(
  { weight: 5, arbitrary: fc.constant<Piece>({ kind: 'slash' }) },
  { weight: 4, arbitrary: fc.constantFrom(...LITERALS).map((text): Piece => ({ kind: 'lit', text })) },
  { weight: 1, arbitrary: fc.constantFrom(...NAMES).map((name): Piece => ({ kind: 'dot', name })) },
  { weight: 3, arbitrary: fc.constantFrom(...NAMES).map((name): Piece => ({ kind: 'param', name })) },
  { weight: 1, arbitrary: fc.record({ name: fc.constantFrom(...NAMES), re: fc.constantFrom(...REGEXES) }).map((r): Piece => ({ kind: 're', ...r })) },
  { weight: 1, arbitrary: fc.constantFrom(...NAMES).map((name): Piece => ({ kind: 'plus', name })) },
);

function render(pieces: Piece[]): string {
  let out = '';
  let lastWasLiteral = false;
  pieces.forEach((p, i) => {
    // Two literals in a row would merge into one; keep them apart with a slash.
    if (p.kind === 'lit' && lastWasLiteral) out += '/';
    lastWasLiteral = p.kind === 'lit';
    switch (p.kind) {
      case 'slash': out += '/'; break;
      case 'lit': out += p.text; break;
      // Names are unique within a template (suffix) yet differ between equivalent templates.
      case 'dot': out += `{.${p.name}${i}}`; break;
      case 'param': out += `{${p.name}${i}}`; break;
      case 'plus': out += `{+${p.name}${i}}`; break;
      case 're': out += `{${p.name}${i}: ${p.re}}`; break;
    }
  });
  return '/' + out;
}

const SAMPLES: Record<string, string[]> = {
  dot: ['', '.json', '.', '.a.b'],
  param: ['a', 'ab', '1', 'x.y', 'users', 'a%2Fb', 'foo:cancel'],
  plus: ['', 'a', 'a/b', 'x/users', 'foo/'],
  re: ['a', 'ab', 'abc', '123', 'a/b', 'xy', 'users', 'a/c', 'axxb', ''],
};

const templatePieces = fc.array(piece, { minLength: 0, maxLength: 6 });

const scenario = fc.record({
  templates: fc.array(fc.record({ pieces: templatePieces, method: fc.constantFrom(...METHODS), upstream: fc.constantFrom('u1', 'u2') }), { minLength: 1, maxLength: 14 }),
  probes: fc.array(
    fc.record({
      from: fc.nat(),
      choices: fc.array(fc.nat(), { minLength: 8, maxLength: 8 }),
      mutation: fc.constantFrom('none', 'none', 'none', 'trailing-slash', 'drop-char', 'add-char', 'double-slash'),
      at: fc.nat(),
      // Mostly the method the path was built from, so that most probes exercise a real match.
      method: fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom(...METHODS, 'PUT') }),
    }),
    { minLength: 40, maxLength: 40 },
  ),
});

function instantiate(pieces: Piece[], choices: number[]): string {
  let out = '';
  let lastWasLiteral = false;
  pieces.forEach((p, i) => {
    if (p.kind === 'lit' && lastWasLiteral) out += '/';
    lastWasLiteral = p.kind === 'lit';
    const pick = (list: string[]) => list[choices[i % choices.length]! % list.length];
    switch (p.kind) {
      case 'slash': out += '/'; break;
      case 'lit': out += p.text; break;
      default: out += pick(SAMPLES[p.kind]!); break;
    }
  });
  return '/' + out;
}

function mutate(path: string, mutation: string, at: number): string {
  const i = path.length > 1 ? 1 + (at % (path.length - 1)) : 1;
  switch (mutation) {
    case 'trailing-slash': return path + '/';
    case 'drop-char': return path.length > 1 ? path.slice(0, i) + path.slice(i + 1) : path;
    case 'add-char': return path.slice(0, i) + 'ab/.x'[at % 5] + path.slice(i);
    case 'double-slash': return path.slice(0, i) + '/' + path.slice(i);
    default: return path;
  }
}

t.test('the trie picks what the oracle picks', async (t) => {
  let cases = 0;
  let matched = 0;
  const seed = Number(process.env.ROUTING_SEED ?? Date.now() % 2 ** 31);
  t.comment(`fast-check seed ${seed} (rerun with ROUTING_SEED=${seed})`);
  fc.assert(
    fc.property(scenario, ({ templates, probes }) => {
      const entries = templates.map((x) => entry(x.method, render(x.pieces), x.upstream));
      const { table } = RoutingTable.compile(entries);
      const oracle = oracleFor(entries);
      for (const probe of probes) {
        const source = templates[probe.from % templates.length]!;
        const path = mutate(instantiate(source.pieces, probe.choices), probe.mutation, probe.at);
        const method = probe.method ?? source.method;
        const got = table.select(method, path, undefined, undefined, false);
        const want = oracle.lookup(method, path);
        cases++;
        const context = `${method} ${path} over [${entries.map((e) => `${e.method} ${e.template}`).join(', ')}]`;
        if (got.status !== want.status) throw new Error(`status ${got.status} != oracle ${want.status}: ${context}`);
        if ((got.route?.canonical ?? null) !== (want.template?.canonical ?? null)) {
          throw new Error(`picked ${got.route?.template} != oracle ${want.template?.raw}: ${context}`);
        }
        if (got.allow !== want.allow) throw new Error(`Allow "${got.allow}" != oracle "${want.allow}": ${context}`);
        if (got.headAsGet !== want.headAsGet || got.autoOptions !== want.autoOptions) throw new Error(`HEAD/OPTIONS handling differs: ${context}`);
        if (want.template) {
          matched++;
          // Regexes backtrack in their own order, so only regex-free templates must agree on captures.
          if (!want.template.segments.some((s) => s.regex !== null)) {
            // Equivalent templates may name their params differently: compare the captured values.
            const params = JSON.stringify(Object.values(table.params()));
            const wanted = JSON.stringify(Object.values(want.params));
            if (params !== wanted) throw new Error(`params ${params} != oracle ${wanted}: ${context}`);
          }
        }
      }
    }),
    { numRuns: 520, seed },
  );
  t.ok(cases >= 20_000, `${cases} generated cases compared (at least 20,000)`);
  t.ok(matched > cases / 3, `${matched} of them matched a template (the generator exercises matches, not just misses)`);
});

t.test('transferable round trip keeps every decision', async (t) => {
  const seed = Number(process.env.ROUTING_SEED ?? 7);
  fc.assert(
    fc.property(scenario, ({ templates, probes }) => {
      const entries = templates.map((x) => entry(x.method, render(x.pieces), x.upstream));
      const { table } = RoutingTable.compile(entries);
      const copy = RoutingTable.fromTransferable(structuredClone(JSON.parse(JSON.stringify(table.toTransferable()))));
      for (const probe of probes) {
        const path = instantiate(templates[probe.from % templates.length]!.pieces, probe.choices);
        const method = probe.method ?? 'GET';
        const a = table.select(method, path, undefined, undefined, false);
        const b = copy.select(method, path, undefined, undefined, false);
        if (a.status !== b.status || a.route?.id !== b.route?.id || a.allow !== b.allow) throw new Error(`${method} ${path} differs after round trip`);
        if (JSON.stringify(table.params()) !== JSON.stringify(copy.params())) throw new Error(`${path} params differ after round trip`);
      }
    }),
    { numRuns: 100, seed },
  );
  t.pass('100 random tables survive JSON + structured clone');
});

// Virtual hosts: each upstream may list hosts; per Host, the table must pick what the oracle picks over
// the endpoints of the upstreams serving that Host (a reference matcher decides which) and the
// host-less upstreams, with the full table's route ids, only those upstreams as targets, and the
// label of that set of upstreams (what the response cache and rate limits keep apart by).
const HOST_PATTERNS = ['a.test', 'b.test', '*.test', '*.b.test', 'A.Test'];
const PROBE_HOSTS = ['a.test', 'A.TEST:8080', 'b.test', 'x.b.test', 'y.x.b.test', 'c.test', 'other', '', 'b.test.'];
const UPSTREAMS = ['u1', 'u2', 'u3'];

function referenceServes(hosts: readonly string[], host: string): boolean {
  if (hosts.length === 0) return true;
  let name = host.toLowerCase().replace(/:\d+$/, '');
  if (name.endsWith('.')) name = name.slice(0, -1);
  return hosts.some((p) => {
    const pattern = p.toLowerCase();
    return pattern.startsWith('*.') ? name.length > pattern.length - 1 && name.endsWith(pattern.slice(1)) : pattern === name;
  });
}

t.test('with hosts, each Host routes among its upstreams exactly as the oracle does', async (t) => {
  let cases = 0;
  const seed = Number(process.env.ROUTING_SEED ?? Date.now() % 2 ** 31);
  t.comment(`fast-check seed ${seed} (rerun with ROUTING_SEED=${seed})`);
  fc.assert(
    fc.property(
      scenario,
      fc.array(fc.subarray(HOST_PATTERNS), { minLength: 3, maxLength: 3 }),
      fc.array(fc.record({ upstream: fc.constantFrom(...UPSTREAMS) }), { minLength: 14, maxLength: 14 }),
      ({ templates, probes }, hostLists, owners) => {
        const entries = templates.map((x, i) => entry(x.method, render(x.pieces), owners[i]!.upstream));
        const upstreams = UPSTREAMS.map((u, i) => ({ serviceLocation: u, hosts: hostLists[i]! }));
        const { table } = RoutingTable.compile(entries);
        const hostRoutes = HostRoutes.build(table, upstreams);
        for (const host of PROBE_HOSTS) {
          const serving = new Set(upstreams.filter((u) => referenceServes(u.hosts, host)).map((u) => u.serviceLocation));
          const hostTable = hostRoutes === null ? table : hostRoutes.tableFor(host);
          if (serving.size === 0) {
            if (hostTable !== null) throw new Error(`host ${host} is served by no upstream, yet got a table`);
            continue;
          }
          if (hostTable === null) throw new Error(`host ${host} is served by ${[...serving]}, yet got no table`);
          const oracle = oracleFor(entries.filter((e) => serving.has(e.upstream)));
          for (const probe of probes) {
            const source = templates[probe.from % templates.length]!;
            const path = mutate(instantiate(source.pieces, probe.choices), probe.mutation, probe.at);
            const method = probe.method ?? source.method;
            const got = hostTable.select(method, path, undefined, undefined, false);
            const want = oracle.lookup(method, path);
            cases++;
            const context = `Host ${host}: ${method} ${path} over [${entries.map((e) => `${e.upstream} ${e.method} ${e.template}`).join(', ')}] hosts ${JSON.stringify(hostLists)}`;
            if (got.status !== want.status) throw new Error(`status ${got.status} != oracle ${want.status}: ${context}`);
            if ((got.route?.canonical ?? null) !== (want.template?.canonical ?? null)) throw new Error(`picked ${got.route?.template} != oracle ${want.template?.raw}: ${context}`);
            if (got.allow !== want.allow) throw new Error(`Allow "${got.allow}" != oracle "${want.allow}": ${context}`);
            if (got.route !== null) {
              const full = table.routes()[got.route.id]!;
              if (full.method !== got.route.method || full.canonical !== got.route.canonical) throw new Error(`route id ${got.route.id} is not the full table's: ${context}`);
              const foreign = got.route.targets.filter((x) => !serving.has(x.upstream));
              if (foreign.length > 0) throw new Error(`targets of upstreams not serving the host: ${context}`);
              const hostSet = hostRoutes === null ? '' : hostSetLabel([...serving].sort().join('\n'));
              if (got.route.hostSet !== hostSet) throw new Error(`route labelled host set "${got.route.hostSet}", not "${hostSet}": ${context}`);
            }
          }
        }
      },
    ),
    { numRuns: 150, seed },
  );
  t.ok(cases >= 5_000, `${cases} generated cases compared`);
});

// Characters a request target may hold raw but an RFC 3986 path only percent-encoded
// (docs/reference/accept.md#path-normalization): a raw one and its escape, in a request or a template
// literal, are the same path. Requests go through the accept phase (the one-pass plain check, then
// normalization), the oracle gets the path normalized by a reference written here, and every spelling
// of one path must route as the others.
const MUST_ESCAPE = ['"', '<', '>', '^', '`', '{', '|', '}', '[', ']'];
const hex = (c: string) => c.charCodeAt(0).toString(16).toUpperCase();

/** The reference rule: escapes upper-cased (none here is of an unreserved character), the characters above escaped. */
function referenceNormalize(path: string): string {
  return path.replace(/%[0-9a-f]{2}/gi, (e) => e.toUpperCase()).replace(/["<>^`{|}[\]]/g, (c) => `%${hex(c)}`);
}

type Atom = { text: string } | { special: string };
type Spelling = 'raw' | 'upper' | 'lower';
const atom: fc.Arbitrary<Atom> = fc.oneof(
  { weight: 2, arbitrary: fc.constantFrom('a', 'b', 'q', '-', '.x', ':', '%20').map((text): Atom => ({ text })) },
  { weight: 3, arbitrary: fc.constantFrom(...MUST_ESCAPE).map((special): Atom => ({ special })) },
);
const word = fc.array(atom, { minLength: 1, maxLength: 4 });

function spell(atoms: Atom[], spellings: Spelling[], inTemplate: boolean, offset: number): string {
  return atoms
    .map((a, i) => {
      if ('text' in a) return a.text;
      let how = spellings[(i + offset) % spellings.length]!;
      // A raw brace in a template is its syntax, not a literal.
      if (inTemplate && how === 'raw' && (a.special === '{' || a.special === '}')) how = 'upper';
      return how === 'raw' ? a.special : how === 'upper' ? `%${hex(a.special)}` : `%${hex(a.special).toLowerCase()}`;
    })
    .join('');
}

type EscPiece = { kind: 'lit'; word: Atom[] } | { kind: 'param' };
const escScenario = fc.record({
  templates: fc.array(
    fc.record({
      pieces: fc.array(fc.oneof({ weight: 3, arbitrary: word.map((w): EscPiece => ({ kind: 'lit', word: w })) }, { weight: 1, arbitrary: fc.constant<EscPiece>({ kind: 'param' }) }), { minLength: 1, maxLength: 4 }),
      spellings: fc.array(fc.constantFrom<Spelling>('raw', 'upper', 'lower'), { minLength: 1, maxLength: 4 }),
      method: fc.constantFrom('GET', 'POST'),
    }),
    { minLength: 1, maxLength: 8 },
  ),
  probes: fc.array(fc.record({ from: fc.nat(), values: fc.array(word, { minLength: 4, maxLength: 4 }), spellings: fc.array(fc.constantFrom<Spelling>('raw', 'upper', 'lower'), { minLength: 1, maxLength: 4 }), offset: fc.nat(3), extra: fc.oneof({ weight: 2, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: word }) }), { minLength: 10, maxLength: 10 }),
});

function templateOf(pieces: EscPiece[], spellings: Spelling[]): string {
  return '/' + pieces.map((p, i) => (p.kind === 'param' ? `{p${i}}` : spell(p.word, spellings, true, i))).join('/');
}

t.test('a character RFC 3986 allows in a path only escaped routes alike raw and escaped, in requests and templates (property)', async (t) => {
  const accept = new AcceptPhase(testConfig({ encodedSlashes: 'reject' }), '1.1 test');
  let cases = 0;
  let matched = 0;
  let slow = 0;
  const seed = Number(process.env.ROUTING_SEED ?? Date.now() % 2 ** 31);
  t.comment(`fast-check seed ${seed} (rerun with ROUTING_SEED=${seed})`);
  fc.assert(
    fc.property(escScenario, ({ templates, probes }) => {
      const entries = templates.map((x) => entry(x.method, templateOf(x.pieces, x.spellings), 'u1'));
      for (const x of templates) {
        // The same template written with every special raw (braces escaped) and every one escaped is one template.
        const a = parseTemplate(templateOf(x.pieces, ['raw'])).canonical;
        const b = parseTemplate(templateOf(x.pieces, ['lower'])).canonical;
        if (a !== b) throw new Error(`${templateOf(x.pieces, ['raw'])} and ${templateOf(x.pieces, ['lower'])} differ: ${a} != ${b}`);
      }
      const { table } = RoutingTable.compile(entries);
      const oracle = oracleFor(entries);
      for (const probe of probes) {
        const source = templates[probe.from % templates.length]!;
        const spellingsOf = (spellings: Spelling[]) =>
          '/' + source.pieces.map((p, i) => spell(p.kind === 'param' ? probe.values[i % 4]! : p.word, spellings, false, i + probe.offset)).join('/') +
          // Another segment: mostly a path no template serves, so that misses are compared too.
          (probe.extra === null ? '' : `/${spell(probe.extra, spellings, false, probe.offset)}`);
        const forms = [spellingsOf(probe.spellings), spellingsOf(['raw']), spellingsOf(['upper']), spellingsOf(['lower'])];
        let first: string | null = null;
        for (const raw of forms) {
          const path = accept.routedPath(raw, '');
          if (typeof path !== 'string') throw new Error(`${raw} refused ${path.answer.status}`);
          if (!isPlainPath(raw)) slow++;
          if (/["<>^`{|}[\]]/.test(path)) throw new Error(`${raw} normalized to ${path}, which holds a character a URI path may not`);
          const reference = referenceNormalize(raw);
          if (path !== reference) throw new Error(`${raw} normalized to ${path}, the reference says ${reference}`);
          const got = table.select(source.method, path, undefined, undefined, false);
          const want = oracle.lookup(source.method, reference);
          cases++;
          const context = `${source.method} ${raw} (${path}) over [${entries.map((e) => `${e.method} ${e.template}`).join(', ')}]`;
          if (got.status !== want.status || (got.route?.canonical ?? null) !== (want.template?.canonical ?? null)) {
            throw new Error(`${got.status} ${got.route?.template} != oracle ${want.status} ${want.template?.raw}: ${context}`);
          }
          const outcome = `${got.status} ${got.route?.canonical ?? ''} ${JSON.stringify(Object.values(got.route === null ? {} : table.params()))}`;
          if (first === null) first = outcome;
          else if (outcome !== first) throw new Error(`${outcome} != ${first} for another spelling: ${context}`);
          if (got.status === 200) matched++;
        }
      }
    }),
    { numRuns: 300, seed },
  );
  t.ok(matched > cases / 4 && matched < cases, `${matched} of ${cases} requests matched: matches and misses both compared`);
  t.ok(slow > cases / 2, `${slow} of them were no plain path: they took normalization's slow path`);
});
