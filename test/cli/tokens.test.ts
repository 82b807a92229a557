import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVerdict } from '../../src/index.js';
import { runCli } from '../harness/cli-in-process.js';
import { tempDir } from '../harness/store-fixture.js';

/** `verdict tokens create|list|revoke` (DESIGN §16.2), the CLI (in process) on a real SQLite file. */

let t: { dir: string; cleanup: () => void };
let db: string;
beforeAll(() => {
  t = tempDir();
  db = join(t.dir, 'v.db');
});
afterAll(() => t?.cleanup());

const cli = (args: string[]) => runCli([...args, '--database-url', db]);

describe('verdict tokens', () => {
  it('create refuses a workspace that does not exist (a typo must not make an empty one) unless --create-workspace', async () => {
    const r = await cli(['tokens', 'create', '--workspace', 'acme', '--role', 'write']).catch(
      (e: { code: number; stdout: string; stderr: string }) => e,
    );
    expect(r).toMatchObject({ code: 2, stdout: '' });
    expect((r as { stderr: string }).stderr).toContain(
      '--workspace: no workspace "acme"; add --create-workspace to create it',
    );
    const v = await createVerdict({ database: db, provider: 'none' });
    try {
      expect(await v.store.getWorkspaceBySlug('acme')).toBeNull();
      expect(await v.tokens.list({})).toEqual([]);
    } finally {
      await v.close();
    }
  }, 60_000);

  it('create prints the token once; the database keeps only its SHA-256; list never shows it; revoke ends it', async () => {
    const made = await cli([
      'tokens',
      'create',
      '--workspace',
      'acme',
      '--create-workspace',
      '--role',
      'write',
      '--name',
      'tracker sync',
    ]);
    const token = made.stdout.trim();
    expect(token).toMatch(/^vdt_[A-Za-z0-9_-]{43}$/);
    expect(made.stderr).toMatch(/write on workspace acme \(workspace created\)\. It is shown this once/);

    const conn = new Database(db, { readonly: true });
    const rows = conn.prepare('SELECT * FROM api_tokens').all() as Array<Record<string, unknown>>;
    conn.close();
    expect(rows).toHaveLength(1);
    expect(rows[0].token_hash).toBe(createHash('sha256').update(token).digest('hex'));
    expect(JSON.stringify(rows)).not.toContain(token);
    // The database and its write-ahead log (a fresh write sits in -wal until a checkpoint): the hash is there, the token is not.
    const files = [db, `${db}-wal`].filter((f) => existsSync(f)).map((f) => readFileSync(f));
    expect(files.some((b) => b.includes(Buffer.from(String(rows[0].token_hash))))).toBe(true);
    expect(files.some((b) => b.includes(Buffer.from(token)))).toBe(false);

    const listed = await cli(['tokens', 'list', '--json']);
    const list = JSON.parse(listed.stdout) as Array<Record<string, unknown>>;
    expect(list).toEqual([
      expect.objectContaining({
        id: rows[0].id,
        workspaceSlug: 'acme',
        role: 'write',
        name: 'tracker sync',
        revokedAt: null,
      }),
    ]);
    expect(listed.stdout).not.toContain(token);
    expect(listed.stdout).not.toContain(String(rows[0].token_hash));

    const v = await createVerdict({ database: db, provider: 'none' });
    try {
      expect((await v.tokens.authenticate(token))?.role).toBe('write');
      expect((await cli(['tokens', 'revoke', String(rows[0].id)])).stdout).toContain('revoked');
      expect(await v.tokens.authenticate(token)).toBeNull();
    } finally {
      await v.close();
    }
    const again = await cli(['tokens', 'revoke', String(rows[0].id)]).catch((e: { code: number; stderr: string }) => e);
    expect(again).toMatchObject({ code: 2 });
    expect((again as { stderr: string }).stderr).toContain('no live token with id');
    // Once it exists, the workspace needs no flag, and the refusal names the workspaces there are.
    expect((await cli(['tokens', 'create', '--workspace', 'acme', '--role', 'read'])).stderr).not.toContain(
      'workspace created',
    );
    const typo = await cli(['tokens', 'create', '--workspace', 'acmee', '--role', 'read']).catch(
      (e: { code: number; stderr: string }) => e,
    );
    expect((typo as { stderr: string }).stderr).toContain('(workspaces: acme)');
  }, 60_000);

  it('an unknown role is a usage error (exit 2) and creates nothing', async () => {
    const r = await cli(['tokens', 'create', '--workspace', 'globex', '--role', 'owner']).catch(
      (e: { code: number; stderr: string }) => e,
    );
    expect(r).toMatchObject({ code: 2 });
    expect((r as { stderr: string }).stderr).toContain('--role: role must be one of read, write, admin');
    const v = await createVerdict({ database: db, provider: 'none' });
    try {
      expect(await v.store.getWorkspaceBySlug('globex')).toBeNull();
    } finally {
      await v.close();
    }
  }, 60_000);

  it('the library door refuses an unknown workspace naming the field, unless createWorkspace: true (the CLI is the same call)', async () => {
    const v = await createVerdict({ database: db, provider: 'none' });
    try {
      const before = (await v.tokens.list({})).length;
      await expect(v.tokens.create({ workspace: 'initech', role: 'read' })).rejects.toMatchObject({
        code: 'invalid_input',
        param: 'workspace',
        message: expect.stringContaining('no workspace "initech" (workspaces: acme)'),
      });
      expect(await v.store.getWorkspaceBySlug('initech')).toBeNull();
      expect(await v.tokens.list({})).toHaveLength(before);
      const made = await v.tokens.create({ workspace: 'initech', role: 'read', createWorkspace: true });
      expect(made).toMatchObject({ workspaceCreated: true, row: { workspaceSlug: 'initech', role: 'read' } });
      expect(await v.tokens.create({ workspace: 'initech', role: 'read' })).toMatchObject({ workspaceCreated: false });
    } finally {
      await v.close();
    }
  }, 60_000);
});
