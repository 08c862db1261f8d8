import t from 'tap';
import fc from 'fast-check';
import { ConfigError, parseConfig } from '../../src/config/load.js';

/** Whatever the file holds, parseConfig either returns a config or throws a ConfigError in the promised format. */
t.test('any JSON value: a config or a well-formed ConfigError', async (t) => {
  const keys = fc.constantFrom('port', 'workers', 'paths', 'upstreams', 'serviceType', 'serviceLocation', 'weight', 'endpoints', 'method', 'path', 'spec', 'timeouts', 'x', '__proto__', 'constructor');
  const value = fc.letrec((tie) => ({
    node: fc.oneof(
      { depthSize: 'small' },
      fc.jsonValue({ maxDepth: 1 }),
      fc.dictionary(keys, tie('node'), { maxKeys: 4 }),
      fc.array(tie('node'), { maxLength: 3 }),
    ),
  })).node;
  fc.assert(
    fc.property(value, (config) => {
      try {
        const loaded = parseConfig(JSON.stringify(config) ?? 'null', 'f.json');
        return typeof loaded.port === 'number' && Array.isArray(loaded.upstreams);
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        return error.message.split('\n').every((line) => line.startsWith('f.json')) && error.reason.length > 0;
      }
    }),
    { numRuns: 500 },
  );
  t.pass('no crash, no foreign error');
});

t.test('any text: a config or a ConfigError', async (t) => {
  fc.assert(
    fc.property(fc.string({ maxLength: 60 }), (text) => {
      try {
        parseConfig(text, 'f.json');
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
      }
    }),
    { numRuns: 500 },
  );
  t.pass('no crash');
});
