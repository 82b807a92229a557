import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVerdict, defineQuestionSet, noul, type Verdict } from '../../src/index.js';
import { createApiServer } from '../../src/server/api-server.js';
import { FakeProvider } from '../../src/testing.js';

/**
 * People's verdicts through the public API and the HTTP API (DESIGN §8.1, §16.2): the library
 * records and lists them, `reader.flags` honours a value in force, and `POST …/verdicts` records
 * one with the token as its author (write role), refusing a read token and a bad value.
 */

const triage = defineQuestionSet({
  name: 'triage',
  questions: { blocked: noul('The work is blocked by something outside the team.') },
  threshold: 0.7,
  quietPeriodMs: 0,
});
let dir: string;
let v: Verdict;
let app: FastifyInstance;
let writer: { authorization: string };
let reader: { authorization: string };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'verdict-verdicts-'));
  v = await createVerdict({
    database: join(dir, 'v.db'),
    sets: [triage],
    provider: new FakeProvider({ handler: () => ({ blocked: { probability: 0.9 } }) }),
  });
  writer = {
    authorization: `Bearer ${(await v.tokens.create({ workspace: 'acme', role: 'write', name: 'triage-bot', createWorkspace: true })).token}`,
  };
  reader = {
    authorization: `Bearer ${(await v.tokens.create({ workspace: 'acme', role: 'read', createWorkspace: true })).token}`,
  };
  const ws = (await v.store.getWorkspaceBySlug('acme'))!;
  const col = await v.store.createCollection({ workspaceId: ws.id, slug: 'task' });
  for (const ref of ['T-1', 'T-2'])
    await v.store.createItem({ workspaceId: ws.id, collectionId: col.id, ref, title: `Item ${ref}` });
  await v.worker({ concurrency: 1 }).runUntilIdle();
  app = await createApiServer(v, {});
});
afterAll(async () => {
  await app?.close();
  await v?.close();
  rmSync(dir, { recursive: true, force: true });
});

const call = async (headers: Record<string, string>, method: 'GET' | 'POST', url: string, payload?: object) => {
  const r = await app.inject({ method, url, headers, ...(payload ? { payload } : {}) });
  return { status: r.statusCode, body: r.json() as Record<string, any> };
};

describe('verdicts in the library', () => {
  it('recordVerdict overrides the model for reads and flags; listVerdicts keeps every one', async () => {
    expect(Object.keys((await v.reader.flags('triage', { workspace: 'acme' }))!.flags)).toHaveLength(2);
    const out = await v.store.recordVerdict({
      workspace: 'acme',
      ref: 'T-1',
      key: 'blocked',
      verdict: 'disagree',
      author: 'ana',
      note: 'unblocked yesterday',
    });
    expect(out).toMatchObject({
      inForce: true,
      value: { type: 'noul', noul: 0 },
      row: { verdict: 'disagree', author: 'ana' },
    });
    const flags = (await v.reader.flags('triage', { workspace: 'acme' }))!.flags;
    expect(Object.values(flags).map((f) => f.ref)).toEqual(['T-2']);
    expect(Object.keys(flags)).toEqual(['T-2']); // keyed by the ref a host knows, not Verdict's internal id
    const item = (await v.reader.item('T-1', { workspace: 'acme' }))!;
    expect(item.decisions[0]).toMatchObject({
      source: 'human',
      answer: { noul: 0 },
      modelAnswer: { noul: 0.9 },
      verdict: { verdict: 'disagree', note: 'unblocked yesterday', staleReason: null },
    });
    expect((await v.store.listVerdicts({ workspace: 'acme' })).map((r) => r.itemId)).toEqual([item.item.id]);
    expect(await v.store.listVerdicts({ workspace: 'acme', ref: 'T-2' })).toEqual([]);
    expect(await v.store.listVerdicts({ workspace: 'nope' })).toEqual([]);
    expect(await v.reader.flapping('triage', { workspace: 'acme' })).toEqual([]);
    expect(await v.reader.flapping('triage', { workspace: 'nope' })).toBeNull();
    await expect(
      v.store.recordVerdict({
        workspace: 'acme',
        ref: 'T-1',
        key: 'blocked',
        verdict: 'value',
        value: 'maybe',
        author: 'ana',
      }),
    ).rejects.toMatchObject({ code: 'invalid_input' });
    await expect(
      v.store.recordVerdict({ workspace: 'nope', ref: 'T-1', key: 'blocked', verdict: 'agree', author: 'ana' }),
    ).rejects.toMatchObject({ code: 'not_found' });
  });
});

describe('verdicts over HTTP', () => {
  it('POST records with the token as author; GET lists; flags follow; a read token is refused; a bad value is a 400', async () => {
    const posted = await call(writer, 'POST', '/v1/items/T-2/verdicts', {
      key: 'blocked',
      verdict: 'value',
      value: false,
      note: 'a person checked',
      author: 'ana',
    });
    expect(posted.status).toBe(201);
    expect(posted.body).toMatchObject({
      inForce: true,
      verdict: {
        questionSet: 'triage',
        questionKey: 'blocked',
        verdict: 'value',
        value: { type: 'noul', noul: 0 },
        note: 'a person checked',
      },
    });
    expect(posted.body.verdict.author).toMatch(/^ana \(token:.+ \(triage-bot\)\)$/); // the person, and the token that answers for them
    const anon = await call(writer, 'POST', '/v1/items/T-1/verdicts', {
      key: 'blocked',
      verdict: 'value',
      value: false,
    });
    expect(anon.body.verdict.author).toMatch(/^token:.+ \(triage-bot\)$/);
    expect((await call(reader, 'GET', '/v1/items/T-2/verdicts')).body.verdicts).toHaveLength(1);
    expect((await call(reader, 'GET', '/v1/flags/triage')).body.flags).toEqual([]);
    const item = (await call(reader, 'GET', '/v1/items/T-2')).body;
    expect(item.decisions[0]).toMatchObject({
      source: 'human',
      answer: { noul: 0 },
      modelAnswer: { type: 'noul' },
      verdict: { inForce: true, staleReason: null },
      proposed: null,
      flips: 0,
    });
    // The item carries people's verdicts, as MCP's item_get does; a decision names each thing once.
    expect(item.verdicts).toMatchObject([{ questionKey: 'blocked', verdict: 'value', note: 'a person checked' }]);
    expect(Object.keys(item.decisions[0])).toEqual(expect.not.arrayContaining(['key', 'unsurfaced']));
    const modelOnly = (await call(reader, 'GET', '/v1/items/T-1')).body.decisions.find(
      (d: { source: string }) => d.source === 'model',
    );
    if (modelOnly) expect(modelOnly.modelAnswer).toBeNull();

    expect((await call(reader, 'POST', '/v1/items/T-2/verdicts', { key: 'blocked', verdict: 'agree' })).status).toBe(
      403,
    );
    const bad = await call(writer, 'POST', '/v1/items/T-2/verdicts', { key: 'blocked', verdict: 'value', value: 2 });
    expect(bad).toMatchObject({ status: 400, body: { error: 'invalid_input' } });
    expect(
      (await call(writer, 'POST', '/v1/items/T-2/verdicts', { key: 'blocked', verdict: 'agree', extra: 1 })).status,
    ).toBe(400); // strict body
    expect((await call(writer, 'POST', '/v1/items/T-9/verdicts', { key: 'blocked', verdict: 'agree' })).status).toBe(
      404,
    );
    // `withdraw`, the verb the CLI and MCP take (the stored kind is `withdrawn`): the model's 0.9 is in force again and T-2 is flagged.
    expect(
      (await call(writer, 'POST', '/v1/items/T-2/verdicts', { key: 'blocked', verdict: 'withdrawn' })).body,
    ).toMatchObject({ error: 'invalid_request', param: 'verdict' });
    const withdrawn = await call(writer, 'POST', '/v1/items/T-2/verdicts', { key: 'blocked', verdict: 'withdraw' });
    expect(withdrawn.body).toMatchObject({ inForce: false, verdict: { verdict: 'withdrawn' } });
    expect((await call(reader, 'GET', '/v1/flags/triage')).body.flags.map((f: { ref: string }) => f.ref)).toEqual([
      'T-2',
    ]);
    const doc = (await call(reader, 'GET', '/v1/openapi.json')).body;
    expect(Object.keys(doc.paths)).toContain('/v1/items/{ref}/verdicts');
  });
});
