// The schema check of an upstream's doc (src/discovery/schema-objections.ts) takes time in proportion
// to the doc, not to its square, where ajv's own ways would: a doc whose every operation breaks the
// schema (ajv concatenates its error arrays) and an `enum` of many values (the draft-04 meta-schema
// asks for unique items, checked pair by pair). Each case is timed at n and 4n in the same run: a
// linear check takes about 4 times as long, a quadratic one 16 (the old code: 3.3 s at 1,000 bad
// operations, 39 s at 4,000). The objections of a doc checked in parts are those of its parts.
// Its `$ref`s are followed once per value they point to, not once per path through them: a doc whose
// definitions each point to the next one three times has 3^n such paths at n levels (the old code:
// 2.3 s at 12 levels, 8.8 s at 14, each level three times the one before).
import t from 'tap';
import { validateDoc } from '../../src/discovery/validate-doc.js';
import type { DocKind } from '../../src/discovery/objection.js';

function badOperations(n: number): Record<string, unknown> {
  const paths: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) paths[`/p${i}`] = { get: { responses: { 200: { description: 'ok', schema: { type: 'objekt' } } } } };
  return { swagger: '2.0', info: { title: 't', version: '1' }, paths };
}

function bigEnum(n: number): Record<string, unknown> {
  const parameter = { name: 'q', in: 'query', type: 'string', enum: Array.from({ length: n }, (_, i) => `v${i}`) };
  return { swagger: '2.0', info: { title: 't', version: '1' }, paths: { '/a': { get: { parameters: [parameter], responses: { 200: { description: 'ok' } } } } } };
}

/** `levels` schemas, each with three properties that are `$ref`s to the next, the last a string. */
function fanOut(kind: DocKind, levels: number): Record<string, unknown> {
  const at = kind === 'swagger2' ? '#/definitions/' : '#/components/schemas/';
  const schemas: Record<string, unknown> = {};
  for (let i = 0; i < levels; i++) {
    schemas[`S${i}`] = { type: 'object', properties: { a: { $ref: `${at}S${i + 1}` }, b: { $ref: `${at}S${i + 1}` }, c: { $ref: `${at}S${i + 1}` } } };
  }
  schemas[`S${levels}`] = { type: 'string' };
  const fine = { get: { responses: { 200: { description: 'ok' } } } };
  if (kind === 'swagger2') {
    const body = { name: 'b', in: 'body', schema: { $ref: `${at}S0` } };
    const post = { consumes: ['application/json'], parameters: [body], responses: { 200: { description: 'ok' } } };
    return { swagger: '2.0', info: { title: 't', version: '1' }, paths: { '/fan': { post }, '/fine': fine }, definitions: schemas };
  }
  const post = { requestBody: { content: { 'application/json': { schema: { $ref: `${at}S0` } } } }, responses: { 200: { description: 'ok' } } };
  return { openapi: '3.0.3', info: { title: 't', version: '1' }, paths: { '/fan': { post }, '/fine': fine }, components: { schemas } };
}

async function timed(doc: Record<string, unknown>, kind: DocKind = 'swagger2', runs = 1): Promise<{ ms: number; objections: number }> {
  let best = Infinity;
  let objections = 0;
  for (let run = 0; run < runs; run++) {
    const started = performance.now();
    objections = (await validateDoc(doc, kind, 'test')).objections.length;
    best = Math.min(best, performance.now() - started);
  }
  return { ms: best, objections };
}

t.test('bad operations: four times as many cost about four times as long, and each is objected to', async (t) => {
  await timed(badOperations(50)); // the schema compiled, the code warm
  const small = await timed(badOperations(400));
  const large = await timed(badOperations(1600));
  t.equal(large.objections, 4 * small.objections, 'the same objections per operation, checked whole or in parts');
  t.ok(small.objections >= 400, `${small.objections} objections for 400 bad operations`);
  t.ok(large.ms / small.ms < 9, `1,600 against 400 operations: ${(large.ms / small.ms).toFixed(1)}x the time (quadratic would be 16x)`);
});

t.test('a long enum: four times as many values cost well under sixteen times as long', async (t) => {
  await timed(bigEnum(100));
  const small = await timed(bigEnum(20_000));
  const large = await timed(bigEnum(80_000));
  t.equal(large.objections, 0, 'nothing to object to');
  t.ok(large.ms / small.ms < 9, `80,000 against 20,000 values: ${(large.ms / small.ms).toFixed(1)}x the time (quadratic would be 16x)`);
});

for (const kind of ['swagger2', 'openapi3'] as const) {
  t.test(`${kind}: $refs that fan out three ways per level cost about as much at 13 levels as at 10`, async (t) => {
    await timed(fanOut(kind, 4), kind); // the schema compiled, the code warm
    // The best of five: a garbage collection inside one run would count as growth. Such a doc is
    // checked in a few ms, where a busy host's noise alone reached 3x; following every path is 27x.
    const small = await timed(fanOut(kind, 10), kind, 5);
    const large = await timed(fanOut(kind, 13), kind, 5);
    t.equal(small.objections, 0, 'nothing to object to');
    t.equal(large.objections, 0, 'nothing to object to');
    t.ok(large.ms / small.ms < 9, `13 against 10 levels: ${(large.ms / small.ms).toFixed(1)}x the time (following every path would be 27x)`);
  });
}
