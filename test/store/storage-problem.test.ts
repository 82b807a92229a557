import { describe, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { PgStore, pgStorageProblem } from '../../src/store/postgres/pg-store.js';
import { storageProblemOf } from '../../src/store/sqlite/context.js';
import { judgeHealth } from '../../src/worker/metrics.js';

/**
 * DESIGN §10.1: what /healthz reports about the database. The SQLite side is exercised against a
 * real lock and a real full database in test/scale/sqlite-busy.test.ts and a real worker process
 * in test/worker/held-lock-process.test.ts; here the classification and the Postgres store.
 */

describe('storage problems', () => {
  it('classifies SQLite and Postgres errors; anything else is no storage problem', () => {
    expect(storageProblemOf({ code: 'SQLITE_BUSY' })).toBe('database locked');
    expect(storageProblemOf({ code: 'SQLITE_BUSY_SNAPSHOT' })).toBe('database locked');
    expect(storageProblemOf({ code: 'SQLITE_FULL' })).toBe('disk full');
    expect(storageProblemOf({ code: 'SQLITE_IOERR_WRITE' })).toBe('disk I/O error');
    expect(storageProblemOf({ code: 'SQLITE_CONSTRAINT_UNIQUE' })).toBeNull();
    expect(storageProblemOf(new Error('x'))).toBeNull();
    expect(pgStorageProblem({ code: 'ECONNREFUSED' })).toBe('database unreachable');
    expect(pgStorageProblem({ code: '57P01' })).toBe('database unreachable');
    expect(pgStorageProblem({ code: '53100' })).toBe('disk full');
    expect(pgStorageProblem(new Error('Connection terminated unexpectedly'))).toBe('database unreachable');
    expect(pgStorageProblem({ code: '23505' })).toBeNull();
  });

  it('a Postgres store that cannot connect says database unreachable', async () => {
    const store = PgStore.connect('postgres://verdict@127.0.0.1:1/verdict', { registry: new Registry([attentionSet]) });
    try {
      expect(store.storageProblem()).toBeNull();
      await expect(store.now()).rejects.toMatchObject({ code: 'database_unavailable' });
      expect(store.storageProblem()).toBe('database unreachable');
    } finally {
      await store.close().catch(() => undefined);
    }
  });

  it('/healthz: a storage problem is degraded (not ok), and explains a slot waiting on it instead of a stall', () => {
    const now = 1_000_000;
    expect(judgeHealth({ lastLoopAt: now - 10, providerProblem: null }, 1_000, now, 'database locked')).toEqual({
      healthy: false,
      status: 'degraded',
      reasons: ['database locked'],
      lastLoopAgeMs: 10,
    });
    expect(judgeHealth({ lastLoopAt: now - 5_000, providerProblem: null }, 1_000, now, 'disk full')).toMatchObject({
      status: 'degraded',
      reasons: ['disk full'],
    });
    expect(judgeHealth({ lastLoopAt: now - 5_000, providerProblem: null }, 1_000, now, null)).toMatchObject({
      status: 'unhealthy',
    });
    expect(
      judgeHealth(
        { lastLoopAt: now - 10, providerProblem: 'provider_misconfigured 401' },
        1_000,
        now,
        'database locked',
      ),
    ).toMatchObject({
      status: 'unhealthy',
      reasons: ['database locked', 'provider misconfigured: provider_misconfigured 401'],
    });
  });
});
