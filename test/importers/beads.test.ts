import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { deriveId, parseRfc3339 } from '../../src/importers/beads-format.js';
import { bundledSamplePath, importBeads, type ImportReport } from '../../src/importers/beads.js';
import { createLogger } from '../../src/log.js';
import { PRIORITY_BACKFILL } from '../../src/store/queue-store.js';
import type { ItemRow } from '../../src/store/tracker-reads.js';
import { makeFixture, tempDir, type Fixture } from '../harness/store-fixture.js';

/**
 * The beads importer on a real SQLite file (DESIGN §15). The hand-made lines copy the real
 * export's shape (`sample/beads-issues.jsonl`): RFC 3339 times with offsets and
 * microseconds, dependencies with `issue_id`/`depends_on_id`/`type`, integer comment ids.
 */

let fx: Fixture;
beforeEach(async () => {
  fx = await makeFixture();
});
afterEach(async () => fx.cleanup());

const CREATED = '2025-11-02T21:58:07.295058-08:00';
const UPDATED = '2025-11-03T20:56:22.700641-08:00';

/** One line in the export's format; `extra` overrides or adds keys (undefined removes one). */
function line(id: string, extra: Record<string, unknown> = {}): string {
  const row: Record<string, unknown> = {
    id,
    title: `Title of ${id}`,
    description: `Description of ${id}`,
    status: 'open',
    priority: 2,
    issue_type: 'task',
    created_at: CREATED,
    updated_at: UPDATED,
    ...extra,
  };
  for (const k of Object.keys(row)) if (row[k] === undefined) delete row[k];
  return JSON.stringify(row);
}

function dep(issueId: string, dependsOn: string, type: string) {
  return {
    issue_id: issueId,
    depends_on_id: dependsOn,
    type,
    created_at: '2025-11-02T22:23:49.475356-08:00',
    created_by: 'stevey',
  };
}

async function run(lines: string[], slug?: string): Promise<ImportReport> {
  return importBeads(fx.store, lines, slug ? { workspaceSlug: slug } : {});
}

async function item(report: ImportReport, ref: string): Promise<ItemRow | null> {
  return fx.store.getItemByRef(report.workspaceId, ref);
}

function sqlAll<T>(query: string, ...params: unknown[]): T[] {
  return fx.store.ctx.db.$client.prepare(query).all(...params) as T[];
}

/** Links of a workspace as (source ref, target ref, type), sorted. */
function links(workspaceId: string): string[] {
  return sqlAll<{ s: string; t: string; type: string }>(
    `SELECT s.ref AS s, t.ref AS t, l.link_type AS type FROM item_links l
       JOIN items s ON s.id = l.source_id JOIN items t ON t.id = l.target_id
      WHERE l.workspace_id = ? ORDER BY 1, 2, 3`,
    workspaceId,
  ).map((r) => `${r.s} -${r.type}-> ${r.t}`);
}

async function allItems(workspaceId: string): Promise<ItemRow[]> {
  return fx.store.listItems({ workspaceId, includeDeleted: true });
}

describe('importBeads: collections and skipped rows', () => {
  it('each work type becomes its own collection, status terminal at closed, tracking work', async () => {
    const types = ['task', 'bug', 'feature', 'epic', 'chore'];
    const r = await run(types.map((t, i) => line(`bd-${i}`, { issue_type: t })));
    const cols = await fx.store.listCollections(r.workspaceId);
    expect(cols.map((c) => c.slug).sort()).toEqual([...types].sort());
    expect([...r.collectionsCreated].sort()).toEqual([...types].sort());
    for (const c of cols) {
      const status = c.schema.fields.find((f) => f.key === 'status')!;
      expect(status).toMatchObject({ type: 'select', terminal_options: ['closed'] });
      expect(status.options).toContain('closed');
      expect(c.settings.tracks_work).toBe(true);
    }
    const slugOf = new Map(cols.map((c) => [c.id, c.slug]));
    for (const [i, t] of types.entries()) expect(slugOf.get((await item(r, `bd-${i}`))!.collectionId)).toBe(t);
    // a second import into the same workspace reuses them
    const again = await run([line('bd-9', { issue_type: 'bug' })]);
    expect(again.collectionsCreated).toEqual([]);
    expect(await fx.store.listCollections(r.workspaceId)).toHaveLength(5);
  });

  it('orchestration, ephemeral and unknown-type rows are skipped and counted; nothing of them is written', async () => {
    const orchestration = ['event', 'message', 'agent', 'molecule', 'gate', 'rig', 'role', 'merge-request'];
    const r = await run([
      ...orchestration.map((t) =>
        line(`bd-${t}`, {
          issue_type: t,
          comments: [{ id: 1, issue_id: `bd-${t}`, author: 'mayor', text: 'x', created_at: '2026-01-12T02:16:51Z' }],
        }),
      ),
      line('bd-wisp', { issue_type: 'task', ephemeral: true }),
      line('bd-wisp-event', { issue_type: 'event', ephemeral: true }),
      line('bd-molstone', {
        status: 'tombstone',
        issue_type: 'molecule',
        original_type: 'molecule',
        deleted_at: UPDATED,
      }),
      line('bd-odd', { issue_type: 'decision' }),
      line('bd-work'),
    ]);
    expect(r.rowsRead).toBe(13);
    expect(r.skipped).toEqual({ ephemeral: 2, orchestration: 9, unknown_type: 1 });
    expect(r.skippedTypes).toEqual({
      ...Object.fromEntries(orchestration.map((t) => [t, 1])),
      molecule: 2,
      decision: 1,
    });
    expect(r.imported).toMatchObject({ created: 1, updated: 0, unchanged: 0 });
    expect((await allItems(r.workspaceId)).map((i) => i.ref)).toEqual(['bd-work']);
    expect(sqlAll('SELECT id FROM comments')).toHaveLength(0);
    expect((await fx.store.listCollections(r.workspaceId)).map((c) => c.slug)).toEqual(['task']);
  });
});

describe('importBeads: the item', () => {
  it('body is description, then Design, Acceptance criteria and Notes, whatever the key order of the line', async () => {
    const reversed = JSON.stringify({
      notes: 'N text',
      acceptance_criteria: 'AC text',
      design: 'D text',
      description: 'Desc text',
      id: 'bd-all',
      title: 'All sections',
      status: 'open',
      priority: 2,
      issue_type: 'task',
      created_at: CREATED,
    });
    const r = await run([
      reversed,
      line('bd-notes', { description: undefined, notes: 'Only notes' }),
      line('bd-design', { design: 'Only design' }),
      line('bd-none', { description: undefined }),
    ]);
    expect((await item(r, 'bd-all'))!.content).toBe(
      'Desc text\n\n## Design\n\nD text\n\n## Acceptance criteria\n\nAC text\n\n## Notes\n\nN text',
    );
    expect((await item(r, 'bd-notes'))!.content).toBe('## Notes\n\nOnly notes');
    expect((await item(r, 'bd-design'))!.content).toBe('Description of bd-design\n\n## Design\n\nOnly design');
    expect((await item(r, 'bd-none'))!.content).toBe('');
  });

  it('fields are the listed keys that are present, in a fixed order; title, ref and created_at come from the row', async () => {
    const scrambled = JSON.stringify({
      external_ref: 'gh-1061',
      created_by: 'stevey',
      close_reason: 'PR #1019 merged',
      assignee: 'beads/crew/dave',
      labels: ['workflow', 'bug'],
      owner: 'owner@example.invalid',
      issue_type: 'bug',
      priority: 1,
      status: 'closed',
      closed_at: UPDATED,
      title: 'Everything',
      id: 'bd-full',
      created_at: CREATED,
    });
    const r = await run([scrambled, line('bd-min', { labels: [] })]);
    const full = (await item(r, 'bd-full'))!;
    expect(full.fields).toBe(
      '{"status":"closed","priority":1,"issue_type":"bug","labels":["workflow","bug"],"assignee":"beads/crew/dave","close_reason":"PR #1019 merged","created_by":"stevey","external_ref":"gh-1061"}',
    );
    expect(full.title).toBe('Everything');
    expect(full.ref).toBe('bd-full');
    expect(full.createdAt).toBe(Date.UTC(2025, 10, 3, 5, 58, 7, 295)); // 21:58:07.295058 at -08:00
    expect(full.deletedAt).toBeNull();
    expect((await item(r, 'bd-min'))!.fields).toBe('{"status":"open","priority":2,"issue_type":"task"}');
  });

  it('tombstones become soft-deleted items in their original_type collection, deleted at the source time', async () => {
    const deletedAt = '2025-12-25T01:21:01.952723-08:00';
    const r = await run([
      line('bd-stone', {
        status: 'tombstone',
        issue_type: 'bug',
        original_type: 'bug',
        deleted_at: deletedAt,
        deleted_by: 'stevey',
        delete_reason: 'dup',
      }),
      // original_type decides the collection, not issue_type
      line('bd-moved', { status: 'tombstone', issue_type: 'task', original_type: 'feature', deleted_at: deletedAt }),
      // deleted_at alone makes a tombstone (bd-6s61 in the real data is a closed epic with deleted_at)
      line('bd-closed-deleted', { status: 'closed', issue_type: 'epic', original_type: 'epic', deleted_at: deletedAt }),
      line('bd-live'),
    ]);
    expect(r.imported).toMatchObject({ created: 4, tombstones: 3 });
    const cols = new Map((await fx.store.listCollections(r.workspaceId)).map((c) => [c.id, c.slug]));
    const expected = { 'bd-stone': 'bug', 'bd-moved': 'feature', 'bd-closed-deleted': 'epic' };
    for (const [ref, slug] of Object.entries(expected)) {
      const it1 = (await item(r, ref))!;
      expect(it1.deletedAt).toBe(parseRfc3339(deletedAt));
      expect(it1.deletedAt).toBe(Date.UTC(2025, 11, 25, 9, 21, 1, 952));
      expect(cols.get(it1.collectionId)).toBe(slug);
    }
    expect((await fx.store.listItems({ workspaceId: r.workspaceId })).map((i) => i.ref)).toEqual(['bd-live']);
  });

  it('comments become comments with derived ids, their author, text and time', async () => {
    const r = await run([
      line('bd-c', {
        comments: [
          { id: 1, issue_id: 'bd-c', author: 'stevey', text: 'first', created_at: '2025-12-26T23:20:20Z' },
          { id: 2, issue_id: 'bd-c', author: 'beads/crew/dave', text: 'second', created_at: '2025-12-28T17:27:59Z' },
        ],
      }),
    ]);
    const it1 = (await item(r, 'bd-c'))!;
    const rows = sqlAll<{ id: string; author: string; body: string; created_at: number }>(
      'SELECT id, author, body, created_at FROM comments WHERE item_id = ? ORDER BY created_at',
      it1.id,
    );
    expect(rows).toEqual([
      {
        id: deriveId(r.workspaceId, 'comment', 'bd-c', '1'),
        author: 'stevey',
        body: 'first',
        created_at: Date.UTC(2025, 11, 26, 23, 20, 20),
      },
      {
        id: deriveId(r.workspaceId, 'comment', 'bd-c', '2'),
        author: 'beads/crew/dave',
        body: 'second',
        created_at: Date.UTC(2025, 11, 28, 17, 27, 59),
      },
    ]);
    expect(r.comments).toEqual({ written: 2, unchanged: 0 });
  });

  it('ids are derived from (workspace, beads id): the same on a fresh store, different in another workspace', async () => {
    const r = await run([line('bd-7h7')]);
    expect(r.workspaceId).toBe(deriveId('workspace', 'beads'));
    const a = (await item(r, 'bd-7h7'))!;
    expect(a.id).toBe(deriveId(r.workspaceId, 'item', 'bd-7h7'));
    expect(a.id).toMatch(/^[0-9a-f]{20}$/);
    const other = await run([line('bd-7h7')], 'elsewhere');
    expect((await item(other, 'bd-7h7'))!.id).not.toBe(a.id);
    const fx2 = await makeFixture();
    try {
      const r2 = await importBeads(fx2.store, [line('bd-7h7')]);
      expect((await fx2.store.getItemByRef(r2.workspaceId, 'bd-7h7'))!.id).toBe(a.id);
    } finally {
      await fx2.cleanup();
    }
  });
});

describe('importBeads: links', () => {
  it('parent-child points from the child to its parent, blocks from the blocker to the blocked, other types keep theirs', async () => {
    const r = await run([
      line('bd-epic', { issue_type: 'epic' }),
      line('bd-epic.1', { dependencies: [dep('bd-epic.1', 'bd-epic', 'parent-child')] }),
      // bd-b depends on bd-a through `blocks`: bd-a blocks bd-b
      line('bd-b', { dependencies: [dep('bd-b', 'bd-a', 'blocks'), dep('bd-b', 'bd-epic', 'discovered-from')] }),
      line('bd-a'), // after its dependant: links wait for every row
    ]);
    expect(links(r.workspaceId)).toEqual([
      'bd-a -blocks-> bd-b',
      'bd-b -discovered-from-> bd-epic',
      'bd-epic.1 -parent-> bd-epic',
    ]);
    expect(r.links).toMatchObject({ created: 3, unchanged: 0 });
    const ids = sqlAll<{ id: string }>('SELECT id FROM item_links ORDER BY id').map((x) => x.id);
    expect(ids).toEqual(
      [
        deriveId(r.workspaceId, 'link', 'bd-epic.1', 'bd-epic', 'parent-child'),
        deriveId(r.workspaceId, 'link', 'bd-b', 'bd-a', 'blocks'),
        deriveId(r.workspaceId, 'link', 'bd-b', 'bd-epic', 'discovered-from'),
      ].sort(),
    );
  });

  it('a link to a tombstone is kept', async () => {
    const r = await run([
      line('bd-gone', { status: 'tombstone', original_type: 'task', deleted_at: UPDATED }),
      line('bd-kid', { dependencies: [dep('bd-kid', 'bd-gone', 'parent-child'), dep('bd-kid', 'bd-gone', 'blocks')] }),
    ]);
    expect(links(r.workspaceId)).toEqual(['bd-gone -blocks-> bd-kid', 'bd-kid -parent-> bd-gone']);
  });

  it('a dependency on a skipped, rejected or unknown row is dropped and counted by reason', async () => {
    const r = await run([
      line('bd-wisp', { issue_type: 'epic', ephemeral: true, dependencies: [dep('bd-wisp', 'bd-x', 'parent-child')] }),
      line('bd-gate', { issue_type: 'gate' }),
      line('bd-bad', { title: '' }), // rejected: empty title
      line('bd-x', {
        dependencies: [
          dep('bd-x', 'bd-wisp', 'parent-child'),
          dep('bd-x', 'bd-gate', 'blocks'),
          dep('bd-x', 'bd-bad', 'blocks'),
          dep('bd-x', 'bd-nowhere', 'related'),
          dep('bd-x', 'bd-x', 'related'),
          dep('bd-x', 'bd-y', 'blocks'),
        ],
      }),
      line('bd-y'),
    ]);
    expect(r.links.dropped).toEqual({
      target_skipped: 2,
      target_rejected: 1,
      target_not_found: 1,
      source_skipped: 1,
      self_link: 1,
    });
    expect(r.links.created).toBe(1);
    expect(links(r.workspaceId)).toEqual(['bd-y -blocks-> bd-x']);
  });
});

describe('importBeads: malformed lines', () => {
  it('a malformed line is reported with its line number, and nothing of it is written', async () => {
    const lines = [
      /* 1 */ line('bd-1', { title: 'Original' }),
      /* 2 */ '{"id":"bd-trunc","title":"Cut off',
      /* 3 */ line('bd-notitle', { title: undefined }),
      /* 4 */ line('', {}).replace('"id":"",', ''),
      // 5: the item part is fine, a comment is not: the whole row is refused before any write
      /* 5 */ line('bd-badcomment', {
        comments: [
          { id: 1, issue_id: 'bd-badcomment', author: 'stevey', text: 'ok', created_at: '2025-12-26T23:20:20Z' },
          { id: 2, author: 'stevey' },
        ],
        dependencies: [dep('bd-badcomment', 'bd-1', 'blocks')],
      }),
      /* 6 */ '[1, 2]',
      /* 7 */ '   ',
      /* 8 */ line('bd-badtime', { created_at: '2025-11-02 sometime' }),
      /* 9 */ line('bd-1', { title: 'Duplicate' }),
      /* 10 */ line('bd-baddep', { dependencies: [dep('bd-other', 'bd-1', 'blocks')] }),
      /* 11 */ line('bd-2'),
    ];
    const r = await run(lines);
    expect(r.rowsRead).toBe(10); // the blank line is not a row
    expect(r.rejected.count).toBe(8);
    expect(r.rejected.lines.map((l) => [l.line, l.reason])).toEqual([
      [2, 'bad_json'],
      [3, 'invalid_row'],
      [4, 'invalid_row'],
      [5, 'invalid_row'],
      [6, 'not_an_object'],
      [8, 'invalid_row'],
      [9, 'duplicate_id'],
      [10, 'invalid_row'],
    ]);
    expect(r.rejected.lines.find((l) => l.line === 3)!.detail).toContain('title');
    expect(r.rejected.lines.find((l) => l.line === 5)!.detail).toContain('comments.1.text');
    expect(r.rejected.lines.find((l) => l.line === 9)!.detail).toBe('first on line 1');
    expect((await allItems(r.workspaceId)).map((i) => i.ref).sort()).toEqual(['bd-1', 'bd-2']);
    expect((await item(r, 'bd-1'))!.title).toBe('Original');
    expect(sqlAll('SELECT id FROM comments')).toHaveLength(0);
    expect(sqlAll('SELECT id FROM item_links')).toHaveLength(0);
    expect(r.links.created).toBe(0);
  });

  it('a row whose ref is held by an item not made from it is rejected, and that item is left alone', async () => {
    const first = await run([line('bd-0')]);
    const task = (await fx.store.listCollections(first.workspaceId)).find((c) => c.slug === 'task')!;
    const hand = (
      await fx.store.createItem({
        workspaceId: first.workspaceId,
        collectionId: task.id,
        ref: 'bd-1',
        title: 'Made by hand',
      })
    ).row;
    const r = await run([
      line('bd-1', { comments: [{ id: 1, author: 'a', text: 'x' }] }),
      line('bd-2', { dependencies: [dep('bd-2', 'bd-1', 'blocks')] }),
    ]);
    expect(r.rejected.lines).toEqual([{ line: 1, reason: 'ref_taken' }]);
    expect(await fx.store.getItem(hand.id)).toEqual(hand);
    expect(await fx.store.getItem(deriveId(r.workspaceId, 'item', 'bd-1'))).toBeNull();
    expect(sqlAll('SELECT id FROM comments')).toHaveLength(0);
    expect(r.links.dropped.target_rejected).toBe(1);
  });

  it('the rejected list is capped, the count is not', async () => {
    const r = await importBeads(fx.store, [...Array.from({ length: 7 }, () => 'nope'), line('bd-ok')], {
      maxRejectedListed: 3,
    });
    expect(r.rejected.count).toBe(7);
    expect(r.rejected.lines.map((l) => l.line)).toEqual([1, 2, 3]);
  });

  it('logs carry line numbers and counts, never item text', async () => {
    let out = '';
    const logger = createLogger('debug', { write: (s: string) => void (out += s) });
    await importBeads(
      fx.store,
      [
        line('bd-s1', {
          title: 'SECRET-title',
          description: 'SECRET-body',
          comments: [{ id: 1, author: 'a', text: 'SECRET-comment' }],
        }),
        '{"id":"bd-s2","title":"SECRET-truncated',
        line('bd-s3', { title: 'SECRET-title', labels: 'SECRET-not-an-array' }),
      ],
      { logger },
    );
    expect(out).toContain('"line":2');
    expect(out).toContain('"line":3');
    expect(out).toContain('beads import finished');
    expect(out).not.toContain('SECRET');
  });
});

describe('importBeads: owed work and re-import', () => {
  const fileLines = () => [
    line('bd-epic', { issue_type: 'epic' }),
    line('bd-epic.1', {
      dependencies: [dep('bd-epic.1', 'bd-epic', 'parent-child'), dep('bd-epic.1', 'bd-blocker', 'blocks')],
      comments: [{ id: 7, issue_id: 'bd-epic.1', author: 'mayor', text: 'on it', created_at: '2025-12-26T07:30:49Z' }],
    }),
    line('bd-blocker', { issue_type: 'bug', notes: 'some notes', labels: ['x'] }),
    line('bd-stone', { status: 'tombstone', original_type: 'task', deleted_at: UPDATED }),
    line('bd-closed', {
      status: 'closed',
      close_reason: 'done',
      dependencies: [dep('bd-closed', 'bd-stone', 'related')],
    }),
    line('bd-event', { issue_type: 'event' }),
  ];

  it('every write owes at backfill priority, due at once (no quiet period)', async () => {
    const now = fx.clock.now();
    const r = await run(fileLines());
    const jobs = await fx.store.listJobs({ workspaceId: r.workspaceId });
    // the production sets (attention, conventions, conventions_comments, effort) cover every
    // collection: four jobs per item
    expect(jobs).toHaveLength(4 * 5);
    for (const j of jobs) {
      expect(j.priority).toBe(PRIORITY_BACKFILL);
      expect(j.notBefore).toBe(now);
      expect(j.enqueuedAt).toBe(now);
    }
    expect(r.jobsOwed).toBeGreaterThanOrEqual(jobs.length);
  });

  it('re-importing the same file changes nothing and owes nothing; a changed row is updated in place', async () => {
    const { dir, cleanup } = tempDir();
    try {
      const file = join(dir, 'issues.jsonl');
      writeFileSync(file, fileLines().join('\n') + '\n');
      const first = await importBeads(fx.store, file);
      expect(first.imported).toEqual({ created: 5, updated: 0, unchanged: 0, tombstones: 1 });
      expect(first.links.created).toBe(3);
      const jobsBefore = await fx.store.listJobs({});
      const itemsBefore = await allItems(first.workspaceId);
      const commentsBefore = sqlAll('SELECT * FROM comments ORDER BY id');
      const linksBefore = sqlAll('SELECT * FROM item_links ORDER BY id');

      fx.clock.advance(60_000);
      const second = await importBeads(fx.store, file);
      expect(second.imported).toEqual({ created: 0, updated: 0, unchanged: 5, tombstones: 1 });
      expect(second.comments).toEqual({ written: 0, unchanged: 1 });
      expect(second.links).toMatchObject({ created: 0, unchanged: 3 });
      expect(second.jobsOwed).toBe(0);
      expect(second.collectionsCreated).toEqual([]);
      expect(await fx.store.listJobs({})).toEqual(jobsBefore);
      expect(await allItems(first.workspaceId)).toEqual(itemsBefore);
      expect(sqlAll('SELECT * FROM comments ORDER BY id')).toEqual(commentsBefore);
      expect(sqlAll('SELECT * FROM item_links ORDER BY id')).toEqual(linksBefore);

      // control: the same file with one title changed updates that row, same id, and owes it
      const changed = fileLines().map((l) =>
        l.includes('"id":"bd-blocker"') ? l.replace('Title of bd-blocker', 'Renamed') : l,
      );
      writeFileSync(file, changed.join('\n') + '\n');
      const third = await importBeads(fx.store, file);
      expect(third.imported).toEqual({ created: 0, updated: 1, unchanged: 4, tombstones: 1 });
      expect(third.jobsOwed).toBeGreaterThan(0);
      const renamed = (await item(third, 'bd-blocker'))!;
      expect(renamed.title).toBe('Renamed');
      expect(renamed.id).toBe(itemsBefore.find((i) => i.ref === 'bd-blocker')!.id);
      expect(renamed.seq).toBeGreaterThan(itemsBefore.find((i) => i.ref === 'bd-blocker')!.seq);
    } finally {
      cleanup();
    }
  });

  it('a tombstone that comes back to life in a later export is restored', async () => {
    const r1 = await run([line('bd-z', { status: 'tombstone', original_type: 'task', deleted_at: UPDATED })]);
    expect((await item(r1, 'bd-z'))!.deletedAt).not.toBeNull();
    const r2 = await run([line('bd-z')]);
    expect(r2.imported.updated).toBe(1);
    expect((await item(r2, 'bd-z'))!.deletedAt).toBeNull();
  });

  it('a missing file fails before anything is written', async () => {
    await expect(importBeads(fx.store, join(fx.file, '..', 'no-such.jsonl'))).rejects.toMatchObject({
      code: 'input_not_found',
      message: expect.stringMatching(/^no file at .*no-such\.jsonl; check the path$/),
    });
    expect(await fx.store.getWorkspaceBySlug('beads')).toBeNull();
  });

  it('refuses a soft-deleted workspace', async () => {
    const r = await run([line('bd-1')]);
    await fx.store.softDeleteWorkspace(r.workspaceId);
    await expect(run([line('bd-2')])).rejects.toThrow(/deleted/);
    expect(await item(r, 'bd-2')).toBeNull();
  });
});

describe('importBeads: the bundled sample', () => {
  // Measured from sample/beads-issues.jsonl (scripts/make-sample.ts prints the same figures).
  const SAMPLE = { rows: 1881, tombstones: 310, comments: 16, links: 898 };
  const BY_TYPE = { task: 1191, bug: 353, feature: 186, epic: 113, chore: 38 };

  it('imports every row of the sample, with its tombstones, comments and links', async () => {
    const r = await importBeads(fx.store, bundledSamplePath());
    expect(r.rowsRead).toBe(SAMPLE.rows);
    expect(r.imported).toEqual({ created: SAMPLE.rows, updated: 0, unchanged: 0, tombstones: SAMPLE.tombstones });
    expect(r.skipped).toEqual({ ephemeral: 0, orchestration: 0, unknown_type: 0 });
    expect(r.rejected.count).toBe(0);
    expect(r.comments.written).toBe(SAMPLE.comments);
    expect(r.links.created).toBe(SAMPLE.links);
    expect(Object.values(r.links.dropped).every((n) => n === 0)).toBe(true);

    const all = await allItems(r.workspaceId);
    expect(all).toHaveLength(SAMPLE.rows);
    expect(all.filter((i) => i.deletedAt !== null)).toHaveLength(SAMPLE.tombstones);
    expect(await fx.store.countItems(r.workspaceId)).toBe(SAMPLE.rows - SAMPLE.tombstones);
    const cols = new Map((await fx.store.listCollections(r.workspaceId)).map((c) => [c.id, c.slug]));
    const byType: Record<string, number> = {};
    for (const i of all) byType[cols.get(i.collectionId)!] = (byType[cols.get(i.collectionId)!] ?? 0) + 1;
    expect(byType).toEqual(BY_TYPE);
    expect(
      sqlAll('SELECT c.id FROM comments c JOIN items i ON i.id = c.item_id WHERE i.workspace_id = ?', r.workspaceId),
    ).toHaveLength(SAMPLE.comments);
    expect(sqlAll('SELECT id FROM item_links WHERE workspace_id = ?', r.workspaceId)).toHaveLength(SAMPLE.links);
    // a real row: bd-0088 is a child of bd-44d0
    expect(links(r.workspaceId)).toContain('bd-0088 -parent-> bd-44d0');
  });
});

describe('importBeads: input that is not beads JSONL (issue 11)', () => {
  it('no well-formed row: one InvalidInput naming the count and the first error, and nothing written (no workspace)', async () => {
    const readme = ['# Verdict', '', 'Keeps decisions current.', '{"number": 12, "title": "a GitHub issue"}'];
    const before = sqlAll('SELECT id FROM workspaces').length;
    await expect(importBeads(fx.store, readme)).rejects.toMatchObject({
      code: 'invalid_input',
      message: expect.stringMatching(/^not beads JSONL: 0 of 3 lines parsed; first error at line 1: not JSON; /),
    });
    expect(await fx.store.getWorkspaceBySlug('beads')).toBeNull();
    expect(sqlAll('SELECT id FROM workspaces')).toHaveLength(before);
  });

  it("raw GitHub JSON (one array) reads as 'a JSON array', and creates nothing", async () => {
    await expect(importBeads(fx.store, ['[{"number": 1, "title": "x"}]'])).rejects.toThrow(
      /^not beads JSONL: 0 of 1 lines parsed; first error at line 1: a JSON array, not one object per line; /,
    );
    expect(await fx.store.getWorkspaceBySlug('beads')).toBeNull();
  });

  it('a rejected line names the field and its rule, never a zod code', async () => {
    const r = await run([
      line('bd-1', { priority: 9 }),
      line('bd-2', { priority: 'high' }),
      line('bd-3', { title: undefined }),
      line('bd-4', { labels: 'x' }),
      line('bd-5'),
    ]);
    expect(r.rejected.lines.map((l) => l.detail)).toEqual([
      'priority: expected an integer 0–4',
      'priority: expected an integer 0–4',
      'title: missing',
      'labels: expected a list of strings',
    ]);
    for (const l of r.rejected.lines) expect(l.detail).not.toMatch(/invalid_type|too_big|too_small/);
  });

  it('jobRowsOwed counts the distinct job rows owed, not the upserts', async () => {
    const r = await run([
      line('bd-1', {
        comments: [
          { id: 1, author: 'a', text: 'one' },
          { id: 2, author: 'b', text: 'two' },
        ],
      }),
      line('bd-2', { dependencies: [dep('bd-2', 'bd-1', 'blocks')] }),
    ]);
    const rows = sqlAll<{ n: number }>('SELECT count(*) AS n FROM decision_jobs')[0].n;
    expect(r.jobsOwed).toBeGreaterThan(rows); // comments and the link owe rows already owed
    expect(r.jobRowsOwed).toBe(rows);
  });
});
