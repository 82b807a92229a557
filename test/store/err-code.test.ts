import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { errCode, ownCode } from '../../src/errors.js';
import { openSqlite } from '../../src/store/sqlite/open.js';
import { toStoreError } from '../../src/store/store.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * errCode names the innermost code along the cause chain for every caller (src/errors.ts): the
 * driver's reason, not the wrapper Verdict put around it. Real driver errors from real SQLite files.
 */
const t = tempDir();
afterAll(() => t.cleanup());

describe('errCode', () => {
  it('names the driver code inside a wrapper that has a code of its own (StoreFailure, DatabaseUnavailable)', () => {
    const db = openSqlite(join(t.dir, 'a.db'), { migrate: false });
    let driverErr: unknown;
    try {
      db.$client.exec('SELECT * FROM no_such_table');
    } catch (err) {
      driverErr = err;
    }
    db.$client.close();
    const wrapped = toStoreError(driverErr);
    expect(wrapped.code).toBe('store_failure');
    expect(errCode(wrapped)).toBe('SQLITE_ERROR');

    const junk = join(t.dir, 'junk.db');
    writeFileSync(junk, 'not a database file, only text long enough to fill a header page '.repeat(10));
    let openErr: unknown;
    try {
      openSqlite(junk, { readOnly: true, migrate: false }).$client.pragma('user_version');
    } catch (err) {
      openErr = err;
    }
    expect(openErr).toMatchObject({ code: 'database_unavailable' });
    expect(errCode(openErr)).toBe('SQLITE_NOTADB');
  });

  it('falls back to the first class name that says more than Error, and bounds a cause loop', () => {
    class Wrapper extends Error {
      override name = 'Wrapper';
    }
    expect(errCode(new Wrapper('x', { cause: new Error('y') }))).toBe('Wrapper');
    const a: { cause?: unknown; code?: string } = {};
    a.cause = a;
    expect(errCode(a)).toBe('object');
    expect(errCode('text')).toBe('string');
  });
});

describe('ownCode', () => {
  it("reads the error's own non-empty string code and nothing along its cause", () => {
    const enoent = Object.assign(new Error('no file'), { code: 'ENOENT' });
    expect(ownCode(enoent)).toBe('ENOENT');
    expect(ownCode(new Error('wrapper', { cause: enoent }))).toBeUndefined();
    expect(ownCode({ code: '' })).toBeUndefined();
    expect(ownCode({ code: 5 })).toBeUndefined();
    expect(ownCode(null)).toBeUndefined();
    expect(ownCode('ENOENT')).toBeUndefined();
    expect(ownCode({ code: 'shutdown' })).toBe('shutdown');
  });
});
