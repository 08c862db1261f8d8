// The lint rule set; docs/contributing.md says why each setting below differs from the recommended sets.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      // `_name` marks a parameter or binding kept on purpose; `{ omitted, ...rest }` drops a field.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      // A `let` a closure reads before its one assignment cannot be a const.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // V8's linear-time engine (src/routing/segment-regex.ts) takes the `l` flag.
      'no-invalid-regexp': ['error', { allowConstructorFlags: ['l'] }],
      // The hot path hands native callbacks a module-level trampoline instead of a closure per call.
      '@typescript-eslint/no-this-alias': 'off',
    },
  },
  {
    // API documents and JSON reports from outside are walked as untyped JSON.
    files: ['src/discovery/**/*.ts', 'src/builtins/spec-types.ts', 'test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
