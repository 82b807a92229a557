import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { isoTimesBySchema } from '../../src/compose/iso-times.js';

/** The doors' `…At` conversion (src/compose/iso-times.ts), guided by the reply schema. */
describe('isoTimesBySchema', () => {
  const at = Date.UTC(2026, 11, 2, 14, 5);
  const iso = '2026-12-02T14:05:00.000Z';
  const schema = z.object({
    createdAt: z.number(),
    deletedAt: z.number().nullable(),
    dueMs: z.number(),
    fields: z.record(z.string(), z.unknown()),
    job: z.object({ dueAt: z.number(), lastErrorAt: z.number().nullable().optional() }).nullable(),
    decisions: z.array(z.object({ evaluatedAt: z.number(), answer: z.unknown() })),
  });

  it('converts the declared numeric …At members at any depth and nothing else', () => {
    const value = {
      createdAt: at,
      deletedAt: null,
      dueMs: at,
      fields: { closedAt: at },
      job: { dueAt: at },
      decisions: [
        { evaluatedAt: at, answer: { seenAt: at } },
        { evaluatedAt: at, answer: null },
      ],
      extraAt: at,
    };
    const before = structuredClone(value);
    // Twice: the second run goes through the converters the first one made.
    for (let i = 0; i < 2; i++)
      expect(isoTimesBySchema(schema, value)).toEqual({
        createdAt: iso,
        deletedAt: null,
        dueMs: at,
        fields: { closedAt: at },
        job: { dueAt: iso },
        decisions: [
          { evaluatedAt: iso, answer: { seenAt: at } },
          { evaluatedAt: iso, answer: null },
        ],
        extraAt: at,
      });
    expect(value).toEqual(before);
    expect(isoTimesBySchema(schema, { createdAt: 'not a number', job: null })).toEqual({
      createdAt: 'not a number',
      job: null,
    });
  });

  it('follows a recursive schema as deep as the value goes', () => {
    interface Node {
      seenAt: number;
      children: Node[];
    }
    const node: z.ZodType<Node> = z.object({
      seenAt: z.number(),
      get children() {
        return z.array(node);
      },
    });
    expect(isoTimesBySchema(node, { seenAt: at, children: [{ seenAt: at, children: [] }] })).toEqual({
      seenAt: iso,
      children: [{ seenAt: iso, children: [] }],
    });
  });
});
