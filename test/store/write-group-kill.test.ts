import Database from 'better-sqlite3';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runCli } from '../harness/cli-in-process.js';
import { spawnCli, waitFor } from '../harness/cli-process.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * The write doors' group commit (DESIGN §10.6) and a crash: the real built server, its group
 * commit held by a test seam (write-hold-preload.mjs) once armed, so the POSTs sent after that are
 * handed in and wait; SIGKILLed there. Every POST answered 201 before is on disk with its owed
 * job; none of the held ones was answered, and none of them is there.
 */

const ANSWERED = 10;
const HELD = 10;
const preload = new URL('../harness/write-hold-preload.mjs', import.meta.url).pathname;

let dir: { dir: string; cleanup: () => void };
beforeEach(() => {
  dir = tempDir();
});
afterEach(() => dir.cleanup());

describe('write-door group commit and a crash', () => {
  it('killed between POSTs handing in their writes and the commit: every 201 is on disk, nothing unanswered is', async () => {
    const file = join(dir.dir, 'v.db');
    const arm = join(dir.dir, 'arm');
    const held = join(dir.dir, 'held.json');
    const env = { VERDICT_DATABASE_URL: file, VERDICT_PROVIDER: 'fake', VERDICT_HTTP_PORT: '0' };
    const token = (
      await runCli(['tokens', 'create', '--workspace', 'acme', '--create-workspace', '--role', 'admin'], env)
    ).stdout.trim();
    const serve = spawnCli(
      ['serve'],
      { ...env, WRITE_HOLD_ARM: arm, WRITE_HOLD_FILE: held, WRITE_HOLD_WRITES: String(HELD) },
      [preload],
    );
    try {
      const base = (await waitFor(() => /listening on (http:\/\/\S+)/.exec(serve.stdout())?.[1], 60_000))!;
      const post = (path: string, body: unknown) =>
        fetch(base + path, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      const item = (ref: string) => ({ collection: 'task', ref, title: `item ${ref}`, content: 'waiting on legal' });
      expect((await post('/v1/collections', { slug: 'task' })).status).toBe(201);
      const answered = await Promise.all(
        Array.from({ length: ANSWERED }, (_, i) => post('/v1/items', item(`A-${i + 1}`))),
      );
      expect(answered.map((r) => r.status)).toEqual(Array(ANSWERED).fill(201));

      writeFileSync(arm, '');
      const statuses: Array<number | 'no answer'> = Array(HELD).fill('no answer');
      const sent = Array.from({ length: HELD }, (_, i) =>
        post('/v1/items', item(`B-${i + 1}`)).then(
          (r) => (statuses[i] = r.status),
          () => undefined, // the connection dies with the process
        ),
      );
      await waitFor(() => existsSync(held), 60_000);
      serve.child.kill('SIGKILL');
      expect((await serve.exited).signal).toBe('SIGKILL');
      await Promise.all(sent);
      expect((JSON.parse(readFileSync(held, 'utf8')) as { writes: number }).writes).toBeGreaterThanOrEqual(HELD);
      // Nothing was answered before its commit.
      expect(statuses).toEqual(Array(HELD).fill('no answer'));
    } finally {
      if (serve.child.exitCode === null && serve.child.signalCode === null) serve.child.kill('SIGKILL');
    }

    const db = new Database(file, { readonly: true, fileMustExist: true });
    try {
      const refs = (db.prepare('SELECT ref FROM items ORDER BY ref').all() as Array<{ ref: string }>).map((r) => r.ref);
      // Every acknowledged item is there, none of the held ones.
      expect(refs).toEqual(Array.from({ length: ANSWERED }, (_, i) => `A-${i + 1}`).sort());
      // Each with the job its write owed, committed with it.
      const owed = db.prepare('SELECT count(DISTINCT item_id) AS n FROM decision_jobs').get() as { n: number };
      expect(owed.n).toBe(ANSWERED);
    } finally {
      db.close();
    }
  }, 180_000);
});
