import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Verdict } from '../compose/verdict.js';
import { NotFound } from '../store/store.js';
import type { CollectionRow, CommentRow, ItemRow, LinkRow, WorkspaceRow } from '../store/tracker-reads.js';
import type { WriteResult } from '../store/tracker-writes.js';
import type { TrackerReads } from '../store/tracker-reads.js';
import { InvalidInput } from '../errors.js';
import type { Logger } from '../log.js';

/** What the routes need of a workspace. */
type Workspace = Pick<WorkspaceRow, 'id' | 'slug'>;
import * as S from './schemas.js';
import { decisionJson, itemJson, verdictRowJson } from '../compose/read-schemas.js';
import { tokenAuthor } from '../access/tokens.js';
import { registerProposalRoutes } from './proposal-routes.js';
import { patchItemFields } from '../compose/merge-patch.js';

/**
 * The `/v1` routes (DESIGN §16.2), registered twice by api-server.ts: under `/v1` (the token's
 * workspace; `withWorkspace` false) and under `/v1/workspaces/{workspace}` (true). Each calls one public-API method; writes owe
 * at live priority with the quiet period, as a tracker's own writes do (DESIGN §3).
 *
 * Roles: `read` for the reads, `write` for items, comments, links and verdicts, `admin` for
 * collections and the job queue. Items are addressed by ref (URL-encode it: `#12` is `%2312`);
 * comments and links by id, checked to belong to the item in the path.
 *
 * One envelope (DESIGN §16.3): one resource is `{<kind>: resource, ...what belongs with it}`, and
 * a write adds `write: {changed, normalised, owed}`; a list is `{<kinds>: [...]}`, paged lists add
 * `has_more` and `next_cursor` (and a `Link` header). Times are ISO 8601 (api-server.ts converts).
 */
export function registerV1Routes(scope: FastifyInstance, v: Verdict, withWorkspace: boolean, logger: Logger): void {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  const P = S.pathParams(withWorkspace);
  const err = { 400: S.errorBody, 401: S.errorBody, 403: S.errorBody, 404: S.errorBody, 429: S.errorBody };
  /** The routes that can clash with a stored ref or slug. */
  const errConflict = { ...err, 409: S.errorBody };
  const read = { role: 'read' as const };
  const write = { role: 'write' as const };
  const admin = { role: 'admin' as const };

  /**
   * The request's workspace: the token's (the auth hook has refused any other). No read: the
   * token's lookup joined its workspace and refused a soft-deleted one.
   */
  const workspaceOf = (req: FastifyRequest): Workspace => ({
    id: req.apiToken!.workspaceId,
    slug: req.apiToken!.workspaceSlug,
  });
  const itemOf = async (req: FastifyRequest, ref: string): Promise<{ ws: Workspace; item: ItemRow }> => {
    const ws = workspaceOf(req);
    const item = await v.store.getItemByRef(ws.id, ref);
    if (!item) throw new NotFound('item', 'of that ref');
    return { ws, item };
  };
  /** Items as the API shows them, with their collection's slug (one read of the workspace's collections). */
  const itemViews = async (ws: Workspace): Promise<(i: ItemRow) => z.infer<typeof S.itemView>> => {
    const slugs = new Map((await v.store.listCollections(ws.id)).map((c) => [c.id, c.slug]));
    return (i) => itemJson(i, slugs.get(i.collectionId) ?? '');
  };
  registerProposalRoutes(scope, v, withWorkspace); // DESIGN §17: /proposals, /actions
  const collectionOf = async (ws: Workspace, slug: string): Promise<CollectionRow> => {
    const c = (await v.store.listCollections(ws.id)).find((x) => x.slug === slug);
    if (!c) throw new NotFound('collection', 'of that slug');
    return c;
  };

  // ------------------------------------------------------------------ workspace and reads
  app.get(
    '/status',
    {
      config: read,
      schema: {
        tags: ['reads'],
        summary: 'Items and jobs of the workspace',
        description:
          'Live items, and per question set its jobs: due, waiting, in flight, parked, failing, the oldest owed and the last error.',
        params: P.workspace,
        response: { 200: S.statusView, ...err },
      },
    },
    async (req) => {
      return (await v.reader.status({ workspace: req.apiToken!.workspaceSlug }))!;
    },
  );
  app.get(
    '/flags/:set',
    {
      config: read,
      schema: {
        tags: ['reads'],
        summary: 'What needs a human: the surfaced keys of one set',
        description:
          'Each surfaced key with its item\u2019s ref, title and collection, the probability in force (a person\u2019s value when `source` is `human`), whether the answer is current (a surfaced key may be stale while its re-ask is owed) and who decided; highest probability first, then ref and key. Filtered by collection, key and currency; paged by an opaque cursor (`has_more`, `next_cursor`, `Link`). `failing`: a job of the set is parked or failing, so flags may be missing.',
        params: P.set,
        querystring: S.flagsQuery,
        response: { 200: S.flagsPage, ...err },
      },
    },
    async (req, reply) => {
      const q = req.query;
      const offset = q.cursor === undefined ? 0 : flagsCursorOffset(q.cursor, req.params.set);
      const page = await v.reader.surfaced(req.params.set, {
        workspace: req.apiToken!.workspaceSlug,
        collection: q.collection,
        key: q.key,
        currency: q.currency,
        threshold: q.threshold,
        offset,
        limit: q.limit,
      });
      if (!page)
        throw new NotFound(
          'question set',
          `of that name; sets: ${v.registry
            .all()
            .map((x) => x.name)
            .join(', ')}`,
        );
      const next =
        offset + page.rows.length < page.total ? flagsCursor(req.params.set, offset + page.rows.length) : null;
      if (next) linkNext(req, reply, q, next);
      return {
        flags: page.rows.map(({ itemId: _itemId, key: _key, ...row }) => row),
        has_more: next !== null,
        next_cursor: next,
        total: page.total,
        failing: page.failing,
      };
    },
  );
  app.get(
    '/sets',
    {
      config: read,
      schema: {
        tags: ['reads'],
        summary: 'The question sets this server knows',
        description:
          'Every registered set with its collections, keys (null when resolved per workspace), threshold, hysteresis and timing, sorted by name.',
        params: P.workspace,
        response: { 200: z.object({ sets: z.array(S.setView) }), ...err },
      },
    },
    async () => ({
      sets: v.registry
        .all()
        .map((x) => ({
          name: x.name,
          collections: x.collections.length ? [...x.collections] : null,
          keys: x.questions ? Object.keys(x.questions).sort() : null,
          unsurfaced: [...x.unsurfaced],
          perComment: x.perComment,
          threshold: x.threshold,
          hysteresis: x.hysteresis,
          quietPeriodMs: x.quietPeriodMs,
          maxAgeMs: x.maxAgeMs,
        }))
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
    }),
  );

  // ------------------------------------------------------------------ the job queue (admin)
  app.get(
    '/jobs',
    {
      config: admin,
      schema: {
        tags: ['jobs'],
        summary: 'The workspace\u2019s owed, parked and batched jobs',
        description:
          'Lowest priority and oldest first, at most `limit`; filtered by set, state and item ref (`v.jobs.list`, as `verdict jobs list`).',
        params: P.workspace,
        querystring: S.jobsQuery,
        response: { 200: z.object({ jobs: z.array(S.jobView) }), ...err },
      },
    },
    async (req) => {
      const { ref, ...q } = req.query;
      if (ref !== undefined) await itemOf(req, ref);
      const jobs = await v.jobs.list({ workspace: req.apiToken!.workspaceSlug, ...q, ref });
      return {
        jobs: jobs.map((j) => ({
          ref: j.ref ?? '',
          questionSet: j.questionSet,
          state: j.state,
          inFlight: j.inFlight,
          priority: j.priority,
          attempts: j.attempts,
          refusals: j.refusals,
          abandons: j.abandons,
          owedAt: j.owedAt,
          dueAt: j.notBefore,
          lastError: j.lastError,
          lastErrorAt: j.lastErrorAt,
        })),
      };
    },
  );
  app.get(
    '/jobs/throughput',
    {
      config: admin,
      schema: {
        tags: ['jobs'],
        summary: 'Jobs per minute by outcome',
        description:
          'What the workers recorded per minute over the last `minutes` (default 60, at most 1,440), counted in each outcome\u2019s own transaction: complete, drop, park, refuse, fail, defer, release. Kept for the whole server, not per workspace, as spend is (`v.reader.throughput`).',
        params: P.workspace,
        querystring: S.throughputQuery,
        response: { 200: S.throughputView, ...err },
      },
    },
    (req) => v.reader.throughput({ minutes: req.query.minutes }),
  );
  const jobAction = (
    path: string,
    summary: string,
    description: string,
    body: z.ZodType<S.JobsActionBody>,
    run: (q: Parameters<Verdict['jobs']['retry']>[0], body: S.JobsActionBody) => Promise<number>,
  ) =>
    app.post(
      path,
      {
        config: admin,
        schema: {
          tags: ['jobs'],
          summary,
          description,
          params: P.workspace,
          body,
          response: { 200: S.jobsChanged, ...err },
        },
      },
      async (req) => {
        const b = req.body as S.JobsActionBody;
        if (b.ref !== undefined) await itemOf(req, b.ref);
        return {
          count: await run({ workspace: req.apiToken!.workspaceSlug, set: b.set, ref: b.ref, state: b.state }, b),
        };
      },
    );
  jobAction(
    '/jobs/retry',
    'Retry jobs: owe them now with their counters reset',
    'Parked jobs unless `state` is given (`batched` takes jobs out of their provider batch). Attempts, refusals and abandons restart at 0 (`v.jobs.retry`, as `verdict jobs retry`).',
    S.jobsRetryBody,
    (q) => v.jobs.retry(q),
  );
  jobAction(
    '/jobs/due-now',
    'Make waiting jobs due now',
    'Owed jobs waiting for their quiet period, debounce or backoff become due at once, counters reset (`v.jobs.retry` with `state: owed`).',
    S.jobsDueNowBody,
    (q) => v.jobs.retry({ ...q, state: 'owed' }),
  );
  jobAction(
    '/jobs/drop',
    'Drop jobs that are not in flight',
    'Needs `set`, `state` or `ref`, and a `reason` (kept in the server\u2019s log line with the count). The next write owes the item again; a batch result that comes later for a dropped job is discarded (`v.jobs.drop`).',
    S.jobsDropBody,
    async (q, b) => {
      const n = await v.jobs.drop(q);
      // The operator's reason, beside the count: the queue keeps no history of drops.
      logger.info({ workspace: q.workspace, dropped: n, reason: b.reason }, 'jobs dropped');
      return n;
    },
  );

  // ------------------------------------------------------------------ collections (admin writes)
  app.get(
    '/collections',
    {
      config: read,
      schema: {
        summary: 'The workspace\u2019s collections',
        description: 'Live and soft-deleted, each with its schema (fields and their select options) and settings.',
        tags: ['collections'],
        params: P.workspace,
        response: { 200: z.object({ collections: z.array(S.collectionView) }), ...err },
      },
    },
    async (req) => ({
      collections: await v.store.listCollections(workspaceOf(req).id),
    }),
  );
  app.post(
    '/collections',
    {
      config: admin,
      schema: {
        summary: 'Create a collection (admin)',
        description:
          'A slug, and optionally a schema (`{fields: [{key, type, options?, terminal_options?}]}`: a field\u2019s `options` are the values its items may hold) and settings.',
        tags: ['collections'],
        params: P.workspace,
        body: S.newCollectionBody,
        response: { 201: S.written('collection', S.collectionView), ...errConflict },
      },
    },
    async (req, reply) => {
      const ws = workspaceOf(req);
      const row = await v.store.createCollection({
        workspaceId: ws.id,
        slug: req.body.slug,
        schema: req.body.schema as CollectionRow['schema'],
        settings: req.body.settings as CollectionRow['settings'],
      });
      return reply.code(201).send({
        collection: row,
        write: { changed: true, normalised: { loneSurrogates: 0, nulsRemoved: 0 }, owed: 0 },
      });
    },
  );
  app.patch(
    '/collections/:collection',
    {
      config: admin,
      schema: {
        summary: 'Change a collection\u2019s slug, schema or settings (admin)',
        description: 'Owes a re-ask of its items where the change reaches what a set reads (DESIGN §3.3).',
        tags: ['collections'],
        params: P.collection,
        body: S.collectionPatchBody,
        response: { 200: S.written('collection', S.collectionView), ...errConflict },
      },
    },
    async (req) => {
      const c = await collectionOf(workspaceOf(req), req.params.collection);
      return written(
        'collection',
        await v.store.updateCollection(c.id, req.body as Parameters<Verdict['store']['updateCollection']>[1]),
      );
    },
  );
  app.delete(
    '/collections/:collection',
    {
      config: admin,
      schema: {
        summary: 'Soft delete a collection (admin)',
        description: 'Its items are no longer asked about; restore brings it back.',
        tags: ['collections'],
        params: P.collection,
        response: { 200: S.written('collection', S.collectionView), ...err },
      },
    },
    async (req) => {
      const c = await collectionOf(workspaceOf(req), req.params.collection);
      return written('collection', await v.store.softDeleteCollection(c.id));
    },
  );
  app.post(
    '/collections/:collection/restore',
    {
      config: admin,
      schema: {
        summary: 'Restore a soft-deleted collection (admin)',
        description: 'Its items are owed again.',
        tags: ['collections'],
        params: P.collection,
        response: { 200: S.written('collection', S.collectionView), ...err },
      },
    },
    async (req) => {
      const c = await collectionOf(workspaceOf(req), req.params.collection);
      return written('collection', await v.store.restoreCollection(c.id));
    },
  );

  // ------------------------------------------------------------------ items
  app.get(
    '/items',
    {
      config: read,
      schema: {
        tags: ['items'],
        summary: 'Live items, sorted, filtered and paged by cursor',
        description:
          'Sorted by `updated` (default, newest first), `created` or `ref`; filtered by collection, status, `updated_since`, title text (`q`) and surfacing in a set; a page at a time: `has_more`, `next_cursor` and a `Link: <...>; rel="next"` header. Items come without their full text unless `include=content`. A cursor this list did not make, or one made for another sort, is a 400 with `param: cursor`.',
        params: P.workspace,
        querystring: S.listItemsQuery,
        response: { 200: S.itemListPage, ...err },
      },
    },
    async (req, reply) => {
      const q = req.query;
      const page = await v.reader.items({
        workspace: req.apiToken!.workspaceSlug,
        collection: q.collection,
        fields: q.status === undefined ? undefined : { status: q.status },
        updatedSince: q.updated_since === undefined ? undefined : Date.parse(q.updated_since),
        search: q.q,
        surfaced: q.surfaced,
        sort: q.sort,
        order: q.order,
        cursor: q.cursor,
        limit: q.limit,
        includeContent: q.include === 'content',
      });
      if (!page) throw new NotFound('workspace', req.apiToken!.workspaceSlug);
      if (page.nextCursor) linkNext(req, reply, q, page.nextCursor);
      return { items: page.items, has_more: page.hasMore, next_cursor: page.nextCursor };
    },
  );
  app.post(
    '/items',
    {
      config: write,
      schema: {
        summary: 'Create an item',
        description:
          'In a collection, by ref (unique in the workspace: a duplicate is 409 with `param: ref`). `fields` must hold values the collection\u2019s schema allows (400 naming the field and its options). Owes each set that reads the item, after the quiet period.',
        tags: ['items'],
        params: P.workspace,
        body: S.newItemBody,
        response: { 201: S.written('item', S.itemView), ...errConflict },
      },
    },
    async (req, reply) => {
      const ws = workspaceOf(req);
      const c = await collectionOf(ws, req.body.collection);
      const r = await v.store.createItem({
        workspaceId: ws.id,
        collectionId: c.id,
        ref: req.body.ref,
        title: req.body.title,
        content: req.body.content,
        fields: req.body.fields,
      });
      return reply.code(201).send(written('item', r, await itemViews(ws)));
    },
  );
  app.get(
    '/items/:ref',
    {
      config: read,
      schema: {
        tags: ['items'],
        summary: 'One item with its decisions and people\u2019s verdicts',
        description:
          'The item; every stored decision, current or with its stale reason; where each set stands (applies or why not; its job and when it is due); and people\u2019s verdicts, oldest first (the latest of a key is in force). The same as MCP\u2019s `item_get`.',
        params: P.item,
        response: { 200: S.itemWithDecisions, ...err },
      },
    },
    async (req) => {
      const out = await v.reader.item(req.params.ref, { workspace: req.apiToken!.workspaceSlug });
      if (!out) throw new NotFound('item', 'of that ref');
      return {
        item: itemJson(out.item, out.collection),
        decisions: out.decisions.map(decisionJson),
        sets: out.sets,
        verdicts: out.verdicts.map(verdictRowJson),
      };
    },
  );
  app.get(
    '/items/:ref/explain',
    {
      config: admin,
      schema: {
        tags: ['items'],
        summary: 'Why did it say that: the exact prompt per set for the item now, and the stored answers',
        description:
          'For each set reading the item (or only `set`): the system prompt and user message Verdict would send for the item\u2019s current state, its state hash, and the stored answers, each saying whether it was asked about that state, with its rationale when the set asks for one. Item and question text: admin tokens only, never logged.',
        params: P.item,
        querystring: S.explainQuery,
        response: { 200: S.explainView, ...err },
      },
    },
    async (req) => {
      const out = await v.explain(req.params.ref, { workspace: req.apiToken!.workspaceSlug, set: req.query.set });
      if (!out) throw new NotFound('item', 'of that ref');
      return out;
    },
  );
  app.get(
    '/items/:ref/verdicts',
    {
      config: read,
      schema: {
        tags: ['verdicts'],
        summary: 'People\u2019s verdicts on the item',
        description: 'Oldest first; the latest of a key is in force.',
        params: P.item,
        response: { 200: z.object({ verdicts: z.array(S.verdictRowView) }), ...err },
      },
    },
    async (req) => {
      const { ws, item } = await itemOf(req, req.params.ref);
      const rows = await v.store.listVerdicts({ workspace: ws.slug, ref: item.ref });
      return { verdicts: rows.map(verdictRowJson) };
    },
  );
  app.post(
    '/items/:ref/verdicts',
    {
      config: write,
      schema: {
        tags: ['verdicts'],
        summary: 'Record a person\u2019s verdict',
        description:
          'DESIGN §8.1: `agree`, `disagree`, a `value` that overrides the model, or `withdraw` the verdict in force (the model decides again). The author is the token, with the person named in `author` when one token serves many.',
        params: P.item,
        body: S.newVerdictBody,
        response: { 201: z.object({ verdict: S.verdictRowView, inForce: z.boolean() }), ...err },
      },
    },
    async (req, reply) => {
      const { ws, item } = await itemOf(req, req.params.ref);
      const t = req.apiToken!;
      // The token always answers for the verdict; a tracker serving many people names the person.
      const token = tokenAuthor(t);
      const author = req.body.author?.trim() ? `${req.body.author.trim()} (${token})` : token;
      const verdict = req.body.verdict === 'withdraw' ? 'withdrawn' : req.body.verdict;
      const out = await v.store.recordVerdict({
        workspace: ws.slug,
        ref: item.ref,
        key: req.body.key,
        set: req.body.set,
        verdict,
        value: req.body.value,
        note: req.body.note,
        author,
      });
      return reply.code(201).send({ verdict: verdictRowJson(out.row), inForce: out.inForce });
    },
  );
  app.patch(
    '/items/:ref',
    {
      config: write,
      schema: {
        summary: 'Change an item',
        description:
          'Title, content, and `fields` as a JSON Merge Patch (RFC 7396): a key set to null is removed, an object merges, anything else replaces, keys not named are kept. The result must still hold values the collection\u2019s schema allows. Owes a re-ask only when a stored value changed.',
        tags: ['items'],
        params: P.item,
        body: S.itemPatchBody,
        response: { 200: S.written('item', S.itemView), ...err },
      },
    },
    async (req) => {
      const { ws, item } = await itemOf(req, req.params.ref);
      const { fields: patch, ...rest } = req.body;
      const fields = patch === undefined ? undefined : patchItemFields(item.fields, patch);
      return written(
        'item',
        await v.store.updateItem(item.id, fields === undefined ? rest : { ...rest, fields }),
        await itemViews(ws),
      );
    },
  );
  app.delete(
    '/items/:ref',
    {
      config: write,
      schema: {
        tags: ['items'],
        summary: 'Soft delete an item',
        description: 'Nothing of the item is sent to a provider after this; restore brings it back.',
        params: P.item,
        response: { 200: S.written('item', S.itemView), ...err },
      },
    },
    async (req) => {
      const { ws, item } = await itemOf(req, req.params.ref);
      return written('item', await v.store.softDeleteItem(item.id), await itemViews(ws));
    },
  );
  app.post(
    '/items/:ref/restore',
    {
      config: write,
      schema: {
        summary: 'Restore a soft-deleted item',
        description: 'Owes each set that reads it again.',
        tags: ['items'],
        params: P.item,
        response: { 200: S.written('item', S.itemView), ...err },
      },
    },
    async (req) => {
      const { ws, item } = await itemOf(req, req.params.ref);
      return written('item', await v.store.restoreItem(item.id), await itemViews(ws));
    },
  );
  app.post(
    '/items/:ref/move',
    {
      config: write,
      schema: {
        summary: 'Move an item to another collection',
        description:
          'Its fields must hold values the new collection\u2019s schema allows. Owes the sets of the new collection.',
        tags: ['items'],
        params: P.item,
        body: S.moveBody,
        response: { 200: S.written('item', S.itemView), ...err },
      },
    },
    async (req) => {
      const { ws, item } = await itemOf(req, req.params.ref);
      const c = await collectionOf(ws, req.body.collection);
      return written('item', await v.store.moveItem(item.id, c.id), await itemViews(ws));
    },
  );

  // ------------------------------------------------------------------ comments
  const commentOf = async (req: FastifyRequest, ref: string, id: string): Promise<CommentRow> => {
    const { item } = await itemOf(req, ref);
    const cm = await v.store.getComment(id);
    if (!cm || cm.itemId !== item.id || cm.deletedAt !== null) throw new NotFound('comment', 'of that id on this item');
    return cm;
  };
  app.get(
    '/items/:ref/comments',
    {
      config: read,
      schema: {
        tags: ['comments'],
        summary: 'The item\u2019s comments',
        description:
          'Oldest first. A deleted comment is gone; a deleted comment with replies stays as a tombstone with its content blanked and `deletedAt` set.',
        params: P.item,
        response: { 200: z.object({ comments: z.array(S.commentView) }), ...err },
      },
    },
    async (req) => {
      const { item } = await itemOf(req, req.params.ref);
      return { comments: (await v.store.listComments(item.id)).map(commentJson) };
    },
  );
  app.post(
    '/items/:ref/comments',
    {
      config: write,
      schema: {
        summary: 'Add a comment to the item',
        description:
          'The author is the token unless `author` names the person (a tracker\u2019s own user name, as the tracker shows it). Owes the sets that read comments.',
        tags: ['comments'],
        params: P.item,
        body: S.newCommentBody,
        response: { 201: S.written('comment', S.commentView), ...err },
      },
    },
    async (req, reply) => {
      const { item } = await itemOf(req, req.params.ref);
      if (req.body.parentCommentId !== undefined) await commentOf(req, req.params.ref, req.body.parentCommentId);
      const author = req.body.author?.trim() ? req.body.author : tokenAuthor(req.apiToken!);
      const r = await v.store.addComment({
        itemId: item.id,
        author,
        body: req.body.content,
        parentCommentId: req.body.parentCommentId ?? null,
      });
      return reply.code(201).send(written('comment', r, commentJson));
    },
  );
  app.patch(
    '/items/:ref/comments/:commentId',
    {
      config: write,
      schema: {
        summary: 'Edit a comment',
        description: 'Owes a re-ask only when the content changed.',
        tags: ['comments'],
        params: P.comment,
        body: S.commentPatchBody,
        response: { 200: S.written('comment', S.commentView), ...err },
      },
    },
    async (req) => {
      const cm = await commentOf(req, req.params.ref, req.params.commentId);
      return written('comment', await v.store.editComment(cm.id, req.body.content), commentJson);
    },
  );
  app.delete(
    '/items/:ref/comments/:commentId',
    {
      config: write,
      schema: {
        summary: 'Delete a comment',
        description: '`comment` is null when it is removed, or the tombstone kept for its replies.',
        tags: ['comments'],
        params: P.comment,
        response: { 200: S.written('comment', S.commentView.nullable()), ...err },
      },
    },
    async (req) => {
      const cm = await commentOf(req, req.params.ref, req.params.commentId);
      return written('comment', await v.store.deleteComment(cm.id), (c) => (c ? commentJson(c) : null));
    },
  );

  // ------------------------------------------------------------------ links
  app.get(
    '/items/:ref/links',
    {
      config: read,
      schema: {
        tags: ['links'],
        summary: 'Links with the item at either end',
        description: 'Oldest first, each as written: `source` and `target` refs and its `type`.',
        params: P.item,
        response: { 200: z.object({ links: z.array(S.linkView) }), ...err },
      },
    },
    async (req) => {
      const { item } = await itemOf(req, req.params.ref);
      const links = await v.store.listLinks(item.id);
      const refs = await refsOf(v.store, links);
      return { links: links.map((l) => linkJson(l, refs)) };
    },
  );
  app.post(
    '/items/:ref/links',
    {
      config: write,
      schema: {
        tags: ['links'],
        summary: 'Link this item to another',
        description:
          'The target by ref; `type` is the tracker\u2019s link type (`blocks`, `parent-child`, ...). Owes the sets that read links.',
        params: P.item,
        body: S.newLinkBody,
        response: { 201: S.written('link', S.linkView), ...err },
      },
    },
    async (req, reply) => {
      const { ws, item } = await itemOf(req, req.params.ref);
      const target = await v.store.getItemByRef(ws.id, req.body.target);
      if (!target) throw new InvalidInput('target: no item of that ref in this workspace', { param: 'target' });
      const refs = new Map([
        [item.id, item.ref],
        [target.id, target.ref],
      ]);
      return reply.code(201).send(
        written(
          'link',
          await v.store.addLink({
            workspaceId: ws.id,
            sourceId: item.id,
            targetId: target.id,
            linkType: req.body.type,
          }),
          (l) => linkJson(l, refs),
        ),
      );
    },
  );
  app.delete(
    '/items/:ref/links/:linkId',
    {
      config: write,
      schema: {
        summary: 'Remove a link',
        description: '`link` is null once removed.',
        tags: ['links'],
        params: P.link,
        response: { 200: S.written('link', S.linkView.nullable()), ...err },
      },
    },
    async (req) => {
      const { item } = await itemOf(req, req.params.ref);
      const link = await v.store.getLink(req.params.linkId);
      if (!link || (link.sourceId !== item.id && link.targetId !== item.id))
        throw new NotFound('link', 'of that id on this item');
      const refs = await refsOf(v.store, [link]);
      return written('link', await v.store.removeLink(link.id), (l) => (l ? linkJson(l, refs) : null));
    },
  );
}

/** A paged list's `Link: <…>; rel="next"` header: the same query with the next cursor (RFC 8288, as GitHub's REST API). */
function linkNext(req: FastifyRequest, reply: FastifyReply, q: Record<string, unknown>, cursor: string): void {
  const next = new URLSearchParams(
    Object.entries(q)
      .filter(([k, val]) => k !== 'cursor' && val !== undefined)
      .map(([k, val]): [string, string] => [k, String(val)]),
  );
  next.set('cursor', cursor);
  reply.header('link', `<${req.url.split('?')[0]}?${next.toString()}>; rel="next"`);
}

/**
 * The flags list's cursor: the set and the offset of the next row, base64url JSON, opaque to the
 * client. An offset, not a keyset: the surfaced rows are computed per read (currency and people's
 * values decide them), so a page boundary may shift when flags change between pages.
 */
function flagsCursor(set: string, offset: number): string {
  return Buffer.from(JSON.stringify({ s: set, o: offset })).toString('base64url');
}

/** @throws InvalidInput (`param: cursor`) for a cursor this list did not make, or one made for another set. */
function flagsCursorOffset(cursor: string, set: string): number {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    parsed = null;
  }
  const c = parsed as { s?: unknown; o?: unknown } | null;
  if (!c || c.s !== set || !Number.isInteger(c.o) || (c.o as number) < 0)
    throw new InvalidInput('cursor: not a cursor of this list (pass next_cursor unchanged)', { param: 'cursor' });
  return c.o as number;
}

/** A write's answer: `{<kind>: row, write: {changed, normalised, owed}}`; `normalised` counts the text repairs the door made (DESIGN §3.1). */
function written<K extends string, T, U = T>(
  kind: K,
  r: WriteResult<T>,
  view?: (row: T) => U,
): Record<K, NoInfer<U>> & { write: WriteInfo } {
  const row = view ? view(r.row) : (r.row as unknown as U);
  return { [kind]: row, write: { changed: r.changed, normalised: r.normalised, owed: r.owed } } as Record<K, U> & {
    write: WriteInfo;
  };
}

type WriteInfo = z.infer<typeof S.writeInfo>;

/** A comment as the API shows it: its text is `content`, as an item's is. */
function commentJson(c: CommentRow): z.infer<typeof S.commentView> {
  return {
    id: c.id,
    itemId: c.itemId,
    parentCommentId: c.parentCommentId,
    author: c.author,
    content: c.body,
    createdAt: c.createdAt,
    updatedAt: c.updatedAt,
    deletedAt: c.deletedAt,
  };
}

/** The refs of the items at either end of `links` (one read per item not yet known). */
async function refsOf(store: Pick<TrackerReads, 'getItem'>, links: LinkRow[]): Promise<Map<string, string>> {
  const refs = new Map<string, string>();
  for (const id of new Set(links.flatMap((l) => [l.sourceId, l.targetId]))) {
    const item = await store.getItem(id);
    if (item) refs.set(id, item.ref);
  }
  return refs;
}

/** A link as it is written: `{source, target}` by ref, and its `type`. */
function linkJson(l: LinkRow, refs: Map<string, string>): z.infer<typeof S.linkView> {
  return {
    id: l.id,
    source: refs.get(l.sourceId) ?? '',
    target: refs.get(l.targetId) ?? '',
    type: l.linkType,
    createdAt: l.createdAt,
  };
}
