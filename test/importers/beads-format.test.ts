import { describe, expect, it } from 'vitest';
import { beadsFields, beadsLink, classifyBeadsRow, deriveId, parseRfc3339 } from '../../src/importers/beads-format.js';

/** The pure rules of the beads format (DESIGN §15), without a store. */

describe('parseRfc3339', () => {
  it('reads the offsets and 3 to 9 fractional digits of the real export, truncating to milliseconds', () => {
    const base = Date.UTC(2025, 10, 3, 5, 58, 7);
    expect(parseRfc3339('2025-11-02T21:58:07.295-08:00')).toBe(base + 295);
    expect(parseRfc3339('2025-11-02T21:58:07.2959-08:00')).toBe(base + 295);
    expect(parseRfc3339('2025-11-02T21:58:07.295999999-08:00')).toBe(base + 295);
    expect(parseRfc3339('2025-11-03T05:58:07.29Z')).toBe(base + 290);
    expect(parseRfc3339('2025-11-03T06:58:07+01:00')).toBe(base);
    expect(parseRfc3339('2026-01-12T02:16:51Z')).toBe(Date.UTC(2026, 0, 12, 2, 16, 51));
  });

  it('refuses what is not an RFC 3339 time with an offset', () => {
    for (const bad of [
      '',
      '2025-11-02',
      '2025-11-02T21:58:07',
      '2025-11-02T21:58:07.5-0800',
      '2025-02-30T00:00:00Z',
      '2025-13-01T00:00:00Z',
      'yesterday',
    ]) {
      expect(parseRfc3339(bad), bad).toBeNull();
    }
  });
});

describe('classifyBeadsRow', () => {
  const row = { status: 'open', issue_type: 'task' };
  it('ephemeral first, then the type; a tombstone counts as its original_type', () => {
    expect(classifyBeadsRow(row)).toEqual({ kind: 'work', collection: 'task', tombstone: false });
    expect(classifyBeadsRow({ ...row, ephemeral: true })).toEqual({ kind: 'skip', reason: 'ephemeral', type: 'task' });
    expect(classifyBeadsRow({ ...row, issue_type: 'merge-request' })).toEqual({
      kind: 'skip',
      reason: 'orchestration',
      type: 'merge-request',
    });
    expect(classifyBeadsRow({ status: 'tombstone', issue_type: 'task', original_type: 'agent' })).toMatchObject({
      kind: 'skip',
      reason: 'orchestration',
    });
    expect(classifyBeadsRow({ status: 'tombstone', issue_type: 'task', original_type: 'bug' })).toEqual({
      kind: 'work',
      collection: 'bug',
      tombstone: true,
    });
    expect(classifyBeadsRow({ status: 'closed', issue_type: 'epic', deleted_at: '2025-12-25T01:21:01Z' })).toEqual({
      kind: 'work',
      collection: 'epic',
      tombstone: true,
    });
    expect(classifyBeadsRow({ ...row, issue_type: 'decision' })).toMatchObject({
      kind: 'skip',
      reason: 'unknown_type',
    });
  });
});

describe('beadsLink', () => {
  it('parent-child: item to parent; blocks: blocker to item; others: item to target, type kept', () => {
    expect(beadsLink({ issue_id: 'c', depends_on_id: 'p', type: 'parent-child' })).toEqual({
      source: 'c',
      target: 'p',
      linkType: 'parent',
    });
    expect(beadsLink({ issue_id: 'b', depends_on_id: 'a', type: 'blocks' })).toEqual({
      source: 'a',
      target: 'b',
      linkType: 'blocks',
    });
    expect(beadsLink({ issue_id: 'x', depends_on_id: 'y', type: 'discovered-from' })).toEqual({
      source: 'x',
      target: 'y',
      linkType: 'discovered-from',
    });
  });
});

describe('beadsFields and deriveId', () => {
  it('fields keep the fixed key order whatever the source order', () => {
    const f = beadsFields({
      external_ref: 'gh-1',
      status: 'open',
      labels: ['a'],
      priority: 0,
      issue_type: 'bug',
      assignee: '',
      close_reason: null,
    });
    expect(JSON.stringify(f)).toBe(
      '{"status":"open","priority":0,"issue_type":"bug","labels":["a"],"external_ref":"gh-1"}',
    );
  });

  it('ids are short lower-case hex, stable, and unambiguous across parts', () => {
    expect(deriveId('w', 'item', 'bd-1')).toMatch(/^[0-9a-f]{20}$/);
    expect(deriveId('w', 'item', 'bd-1')).toBe(deriveId('w', 'item', 'bd-1'));
    expect(deriveId('w', 'item', 'bd-1')).not.toBe(deriveId('w', 'comment', 'bd-1'));
    expect(deriveId('a', 'bc')).not.toBe(deriveId('ab', 'c'));
  });
});
