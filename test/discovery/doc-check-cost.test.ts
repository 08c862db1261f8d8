// The schema check of an upstream's doc (src/discovery/schema-objections.ts) takes time in proportion
// to the doc, not to its square, where ajv's own ways would: a doc whose every operation breaks the
// schema (ajv concatenates its error arrays) and an `enum` of many values (the draft-04 meta-schema
// asks for unique items, checked pair by pair). Each case is timed at n and 4n in the same run: a
// linear check takes about 4 times as long, a quadratic one 16 (the old code: 3.3 s at 1,000 bad
// operations, 39 s at 4,000). The objections of a doc checked in parts are those of its parts.
import t from 'tap';
import { validateDoc } from '../../src/discovery/validate-doc.js';

function badOperations(n: number): Record<string, unknown> {
  const paths: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) paths[`/p${i}`] = { get: { responses: { 200: { description: 'ok', schema: { type: 'objekt' } } } } };
  return { swagger: '2.0', info: { title: 't', version: '1' }, paths };
}

function bigEnum(n: number): Record<string, unknown> {
  const parameter = { name: 'q', in: 'query', type: 'string', enum: Array.from({ length: n }, (_, i) => `v${i}`) };
  return { swagger: '2.0', info: { title: 't', version: '1' }, paths: { '/a': { get: { parameters: [parameter], responses: { 200: { description: 'ok' } } } } } };
}

async function timed(doc: Record<string, unknown>): Promise<{ ms: number; objections: number }> {
  const started = performance.now();
  const { objections } = await validateDoc(doc, 'swagger2', 'test');
  return { ms: performance.now() - started, objections: objections.length };
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
