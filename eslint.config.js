// ESLint (flat config) with typescript-eslint: `npm run lint`, run in CI before the tests.
// typescript-eslint's `recommended` set, without type information: the type-checked set builds the
// whole program and took 14 min 46 s on this 2-core machine under load (1,175 findings, 78% of them
// no-unsafe-* on values read from JSON and drivers), too slow for every CI run.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: ['dist/**', 'node_modules/**', 'artifacts/**', 'drizzle/**', 'drizzle-pg/**', 'sample/**', 'coverage/**'],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      // A leading underscore marks a parameter or binding kept for its position (a callback's shape).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
    },
  },
  {
    // Plain Node scripts and preloads (not type-checked): Node's globals.
    files: ['**/*.mjs'],
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        setInterval: 'readonly',
        setTimeout: 'readonly',
        clearInterval: 'readonly',
        URL: 'readonly',
      },
    },
  },
  {
    // The fake provider servers and the tests read and build arbitrary JSON request and response
    // bodies (the SDKs' wire shapes, deliberately malformed ones included): `any` there is the shape.
    files: ['test/**', 'src/testing/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
