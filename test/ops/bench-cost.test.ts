import { beforeAll, describe, expect, it } from 'vitest';
import {
  deriveReplayWrites,
  initialStatus,
  parseReplayLine,
  readReplayRows,
  type ReplayRow,
} from '../../scripts/bench-cost-writes.js';
import { parseRfc3339 } from '../../src/importers/beads-format.js';
import { bundledSamplePath, parseBeadsLine } from '../../src/importers/beads.js';

/**
 * The write stream of `npm run bench:cost` (scripts/bench-cost-writes.ts), on real rows of the
 * bundled sample: the order, what a comment, a close and a deletion become, and the clamp of
 * writes dated before their item's creation. Not the bench's figures (calls, tokens, prices).
 */

let sample: ReplayRow[];
const row = (id: string) => {
  const r = sample.find((x) => x.id === id);
  if (!r) throw new Error(`sample row ${id} missing`);
  return r;
};
const ms = (t: string | null | undefined) => parseRfc3339(t!)!;

beforeAll(async () => {
  sample = (await readReplayRows(bundledSamplePath())).rows;
});

describe('deriveReplayWrites', () => {
  it('orders writes by time across items; each item starts with its creation, ties by ref then step', () => {
    // bd-6df0 (closed task, 2 comments) and bd-0vu3q (open bug, 1 comment) are given newest first.
    const plan = deriveReplayWrites([row('bd-0vu3q'), row('bd-6df0')]);
    expect(plan.writes.map((w) => [w.ref, w.kind])).toEqual([
      ['bd-6df0', 'create'],
      ['bd-6df0', 'comment'],
      ['bd-6df0', 'comment'],
      ['bd-6df0', 'close'],
      ['bd-0vu3q', 'create'],
      ['bd-0vu3q', 'comment'],
    ]);
    for (let i = 1; i < plan.writes.length; i++)
      expect(plan.writes[i].at).toBeGreaterThanOrEqual(plan.writes[i - 1].at);
    expect(plan).toMatchObject({ items: 2, byKind: { create: 2, comment: 3, close: 1, delete: 0 } });
  });

  it('a comment is a write at its own time, carrying that comment', () => {
    const r = row('bd-6df0');
    const comments = deriveReplayWrites([r]).writes.filter((w) => w.kind === 'comment');
    expect(comments.map((w) => [w.at, w.comment?.id])).toEqual(r.comments!.map((c) => [ms(c.created_at), c.id]));
    // Written after the creation and before the close, as the export dates them.
    expect(comments[0].at).toBeGreaterThan(ms(r.created_at));
    expect(comments[1].at).toBeLessThan(ms(r.closed_at));
  });

  it('a close is an item update at closed_at; the item is created open, so the close changes its status', () => {
    const r = row('bd-6df0');
    expect(r.status).toBe('closed');
    const [create, , , close] = deriveReplayWrites([r]).writes;
    expect(create).toMatchObject({ kind: 'create', at: ms(r.created_at), step: 0 });
    expect(close).toMatchObject({ kind: 'close', at: ms(r.closed_at), sourceAt: ms(r.closed_at), row: r });
    expect(initialStatus(r)).toBe('open');
    expect(initialStatus(row('bd-0vu3q'))).toBe('open');
    expect(initialStatus({ status: 'hooked' })).toBe('hooked');
  });

  it('a write dated before its item was created moves to the creation (clamp), or is left out (drop)', () => {
    // bd-0447029c's closed_at is 28 minutes before its created_at in the export.
    const r = row('bd-0447029c');
    expect(ms(r.closed_at)).toBeLessThan(ms(r.created_at));
    const clamped = deriveReplayWrites([r]);
    expect(clamped.writes.map((w) => w.kind)).toEqual(['create', 'close']);
    expect(clamped.writes[1]).toMatchObject({ at: ms(r.created_at), sourceAt: ms(r.closed_at) });
    expect(clamped.clamped.close).toBe(1);
    const dropped = deriveReplayWrites([r], { earlyWrites: 'drop' });
    expect(dropped.writes.map((w) => w.kind)).toEqual(['create']);
    expect(dropped.dropped.close).toBe(1);
    // bd-0vu3q's comment is dated in whole seconds, 860 ms before the creation.
    const c = deriveReplayWrites([row('bd-0vu3q')]).writes[1];
    expect(c).toMatchObject({ kind: 'comment', at: ms(row('bd-0vu3q').created_at) });
    expect(c.sourceAt).toBeLessThan(c.at);
  });

  it('tombstones are left out by default; with `tombstones` they are created and soft-deleted at deleted_at', () => {
    const t = row('bd-iutu');
    expect(t.status).toBe('tombstone');
    const off = deriveReplayWrites([t]);
    expect(off).toMatchObject({ items: 0, writes: [], skipped: { tombstone: 1 } });
    const on = deriveReplayWrites([t], { tombstones: true });
    expect(on.writes.map((w) => w.kind)).toEqual(['create', 'comment', 'delete']);
    expect(on.writes[2].at).toBe(ms(t.deleted_at));
    // The closed epic deleted before its closed_at is not closed after its deletion.
    const e = row('bd-6s61');
    expect(ms(e.deleted_at)).toBeLessThan(ms(e.closed_at));
    expect(deriveReplayWrites([e]).writes.map((w) => w.kind)).toEqual(['create', 'close']);
    const eOn = deriveReplayWrites([e], { tombstones: true });
    expect(eOn.writes.map((w) => w.kind)).toEqual(['create', 'delete']);
    expect(eOn.closedAfterDelete).toBe(1);
  });

  it('the whole sample: 1,572 work items, 15 comments, 1,492 closings; the issue’s 3,039 writes without the 40 dated before creation', () => {
    const plan = deriveReplayWrites(sample);
    expect(plan).toMatchObject({
      items: 1_572,
      byKind: { create: 1_572, comment: 15, close: 1_492, delete: 0 },
      clamped: { close: 38, comment: 2 },
      skipped: { tombstone: 309, notWork: 0 },
    });
    expect(plan.writes).toHaveLength(3_079);
    expect(deriveReplayWrites(sample, { earlyWrites: 'drop' }).writes).toHaveLength(3_039);
  });
});

describe('parseReplayLine', () => {
  it('keeps closed_at, which the importer’s row schema drops', () => {
    const line = JSON.stringify({
      id: 'bd-x',
      title: 't',
      status: 'closed',
      issue_type: 'task',
      created_at: '2025-12-01T10:00:00Z',
      closed_at: '2025-12-02T10:00:00Z',
    });
    const imported = parseBeadsLine(line);
    expect(imported.ok && 'closed_at' in imported.row).toBe(false);
    expect(parseReplayLine(line)).toMatchObject({ id: 'bd-x', closed_at: '2025-12-02T10:00:00Z' });
    // Without it the close would fall back to updated_at, or to the creation itself.
    expect(deriveReplayWrites([parseReplayLine(line)!]).writes[1].at).toBe(Date.UTC(2025, 11, 2, 10));
  });

  it('a line the importer rejects is null; a closed_at that is not a time is left out', () => {
    expect(parseReplayLine('{"id":"bd-x"}')).toBeNull();
    const bad = parseReplayLine(
      JSON.stringify({
        id: 'bd-y',
        title: 't',
        status: 'closed',
        issue_type: 'task',
        created_at: '2025-12-01T10:00:00Z',
        closed_at: 'yesterday',
      }),
    );
    expect(bad).not.toBeNull();
    expect(bad!.closed_at).toBeUndefined();
  });
});
