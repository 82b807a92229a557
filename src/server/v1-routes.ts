import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Verdict } from '../compose/verdict.js';
import { NotFound, type CollectionRow, type CommentRow, type ItemRow, type LinkRow, type WorkspaceRow, type WriteResult } from '../store/store.js';

/** What the routes need of a workspace. */
type Workspace = Pick<WorkspaceRow, 'id' | 'slug'>;
import * as S from './schemas.js';
import { itemJson, verdictRowJson } from '../compose/read-schemas.js';
import { tokenAuthor } from '../access/tokens.js';
import { registerProposalRoutes } from './proposal-routes.js';
import { patchItemFields } from '../compose/merge-patch.js';

/**
 * The `/v1` routes (DESIGN §16.22), registered twice by api-server.ts: under `/v1` (the token's
 * workspace; `withWorkspace` false) and under `/v1/workspaces/{workspace}` (true). Each calls one public-API method; writes owe
 * at live priority with the quiet period, as a tracker's own writes do (DESIGN §3).
 *
 * Roles: `read` for the reads, `write` for items, comments and links, `admin` for collections.
 * Items are addressed by ref (URL-encode it: `#12` is `%2312`); comments and links by id, checked
 * to belong to the item in the path.
 */
export function registerV1Routes(scope: FastifyInstance, v: Verdict, withWorkspace: boolean): void {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  const P = S.pathParams(withWorkspace);
  const err = { 400: S.errorBody, 401: S.errorBody, 403: S.errorBody, 404: S.errorBody, 409: S.errorBody, 429: S.errorBody };
  const read = { role: 'read' as const };
  const write = { role: 'write' as const };
  const admin = { role: 'admin' as const };

  /**
   * The request's workspace: the token's (the auth hook has refused any other). No read: the
   * token's lookup joined its workspace and refused a soft-deleted one.
   */
  const workspaceOf = (req: FastifyRequest): Workspace => ({ id: req.apiToken!.workspaceId, slug: req.apiToken!.workspaceSlug });
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
  app.get('/status', { config: read, schema: { tags: ['reads'], summary: 'Items and jobs of the workspace', params: P.workspace, response: { 200: S.statusView, ...err } } }, async (req) => {
    return (await v.reader.status({ workspace: req.apiToken!.workspaceSlug }))!;
  });
  app.get(
    '/flags/:set',
    { config: read, schema: { tags: ['reads'], summary: 'Surfaced nouls of one set: ref → {ref, key → p}', params: P.set, querystring: S.flagsQuery, response: { 200: S.flagsView, ...err } } },
    async (req) => {
      if (!v.registry.get(req.params.set)) throw new NotFound('question set', 'of that name');
      const out = await v.reader.flags(req.params.set, { workspace: req.apiToken!.workspaceSlug, threshold: req.query.threshold });
      if (!out) throw new NotFound('workspace', req.apiToken!.workspaceSlug);
      return out;
    },
  );

  // ------------------------------------------------------------------ collections (admin writes)
  app.get('/collections', { config: read, schema: { summary: 'The workspace\u2019s collections', tags: ['collections'], params: P.workspace, response: { 200: z.object({ collections: z.array(S.collectionView) }), ...err } } }, async (req) => ({
    collections: await v.store.listCollections(workspaceOf(req).id),
  }));
  app.post(
    '/collections',
    { config: admin, schema: { summary: 'Create a collection (admin)', tags: ['collections'], params: P.workspace, body: S.newCollectionBody, response: { 201: S.collectionView, ...err } } },
    async (req, reply) => {
      const ws = workspaceOf(req);
      const row = await v.store.createCollection({ workspaceId: ws.id, slug: req.body.slug, schema: req.body.schema as CollectionRow['schema'], settings: req.body.settings as CollectionRow['settings'] });
      return reply.code(201).send(row);
    },
  );
  app.patch(
    '/collections/:collection',
    { config: admin, schema: { summary: 'Change a collection\u2019s slug, schema or settings (admin)', tags: ['collections'], params: P.collection, body: S.collectionPatchBody, response: { 200: S.writeResult(S.collectionView), ...err } } },
    async (req) => {
      const c = await collectionOf(workspaceOf(req), req.params.collection);
      return written(await v.store.updateCollection(c.id, req.body as Parameters<Verdict['store']['updateCollection']>[1]));
    },
  );
  app.delete('/collections/:collection', { config: admin, schema: { summary: 'Soft delete a collection (admin)', tags: ['collections'], params: P.collection, response: { 200: S.writeResult(S.collectionView), ...err } } }, async (req) => {
    const c = await collectionOf(workspaceOf(req), req.params.collection);
    return written(await v.store.softDeleteCollection(c.id));
  });
  app.post('/collections/:collection/restore', { config: admin, schema: { summary: 'Restore a soft-deleted collection (admin)', tags: ['collections'], params: P.collection, response: { 200: S.writeResult(S.collectionView), ...err } } }, async (req) => {
    const c = await collectionOf(workspaceOf(req), req.params.collection);
    return written(await v.store.restoreCollection(c.id));
  });

  // ------------------------------------------------------------------ items
  app.get(
    '/items',
    {
      config: read,
      schema: {
        tags: ['items'],
        summary: 'Live items, sorted, filtered and paged by cursor',
        description: 'Sorted by `updated` (default, newest first), `created` or `ref`; filtered by collection, status, `updated_since`, title text (`q`) and surfacing in a set; a page at a time: `has_more`, `next_cursor` and a `Link: <...>; rel="next"` header. Items come without their full text unless `include=content`. A cursor this list did not make, or one made for another sort, is a 400 with `param: cursor`.',
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
      if (page.nextCursor) {
        const next = new URLSearchParams(Object.entries(q).filter(([k, val]) => k !== 'cursor' && val !== undefined).map(([k, val]): [string, string] => [k, String(val)]));
        next.set('cursor', page.nextCursor);
        reply.header('link', `<${req.url.split('?')[0]}?${next.toString()}>; rel="next"`);
      }
      return { items: page.items, has_more: page.hasMore, next_cursor: page.nextCursor };
    },
  );
  app.post('/items', { config: write, schema: { summary: 'Create an item', tags: ['items'], params: P.workspace, body: S.newItemBody, response: { 201: S.writeResult(S.itemView), ...err } } }, async (req, reply) => {
    const ws = workspaceOf(req);
    const c = await collectionOf(ws, req.body.collection);
    const r = await v.store.createItem({ workspaceId: ws.id, collectionId: c.id, ref: req.body.ref, title: req.body.title, content: req.body.content, fields: req.body.fields });
    return reply.code(201).send(written(r, await itemViews(ws)));
  });
  app.get(
    '/items/:ref',
    { config: read, schema: { tags: ['items'], summary: 'One item with every stored decision, current or with its stale reason, and where each set stands (applies or why not; its job and when it is due)', params: P.item, response: { 200: S.itemWithDecisions, ...err } } },
    async (req) => {
      const out = await v.reader.item(req.params.ref, { workspace: req.apiToken!.workspaceSlug });
      if (!out) throw new NotFound('item', 'of that ref');
      return { item: (await itemViews(workspaceOf(req)))(out.item), decisions: out.decisions, sets: out.sets };
    },
  );
  app.get(
    '/items/:ref/explain',
    {
      config: admin,
      schema: {
        tags: ['items'],
        summary: 'Why did it say that: the exact prompt per set for the item now, and the stored answers',
        description: 'For each set reading the item (or only `set`): the system prompt and user message Verdict would send for the item\u2019s current state, its state hash, and the stored answers, each saying whether it was asked about that state, with its rationale when the set asks for one. Item and question text: admin tokens only, never logged.',
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
    { config: read, schema: { tags: ['verdicts'], summary: 'People\u2019s verdicts on the item, oldest first (the latest of a key is in force)', params: P.item, response: { 200: z.object({ verdicts: z.array(S.verdictRowView) }), ...err } } },
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
        summary: 'Record a person\u2019s verdict (DESIGN §16.14): agree, disagree, a value that overrides the model, or withdrawn; the author is the token',
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
      const out = await v.store.recordVerdict({ workspace: ws.slug, ref: item.ref, key: req.body.key, set: req.body.set, verdict: req.body.verdict, value: req.body.value, note: req.body.note, author });
      return reply.code(201).send({ verdict: verdictRowJson(out.row), inForce: out.inForce });
    },
  );
  app.patch('/items/:ref', { config: write, schema: { summary: 'Change an item: title, content, and fields as a JSON Merge Patch (RFC 7396)', tags: ['items'], params: P.item, body: S.itemPatchBody, response: { 200: S.writeResult(S.itemView), ...err } } }, async (req) => {
    const { ws, item } = await itemOf(req, req.params.ref);
    const { fields: patch, ...rest } = req.body;
    const fields = patch === undefined ? undefined : patchItemFields(item.fields, patch);
    return written(await v.store.updateItem(item.id, fields === undefined ? rest : { ...rest, fields }), await itemViews(ws));
  });
  app.delete('/items/:ref', { config: write, schema: { tags: ['items'], summary: 'Soft delete: nothing of the item is sent to a provider after this', params: P.item, response: { 200: S.writeResult(S.itemView), ...err } } }, async (req) => {
    const { ws, item } = await itemOf(req, req.params.ref);
    return written(await v.store.softDeleteItem(item.id), await itemViews(ws));
  });
  app.post('/items/:ref/restore', { config: write, schema: { summary: 'Restore a soft-deleted item', tags: ['items'], params: P.item, response: { 200: S.writeResult(S.itemView), ...err } } }, async (req) => {
    const { ws, item } = await itemOf(req, req.params.ref);
    return written(await v.store.restoreItem(item.id), await itemViews(ws));
  });
  app.post('/items/:ref/move', { config: write, schema: { summary: 'Move an item to another collection', tags: ['items'], params: P.item, body: S.moveBody, response: { 200: S.writeResult(S.itemView), ...err } } }, async (req) => {
    const { ws, item } = await itemOf(req, req.params.ref);
    const c = await collectionOf(ws, req.body.collection);
    return written(await v.store.moveItem(item.id, c.id), await itemViews(ws));
  });

  // ------------------------------------------------------------------ comments
  const commentOf = async (req: FastifyRequest, ref: string, id: string): Promise<CommentRow> => {
    const { item } = await itemOf(req, ref);
    const cm = await v.store.getComment(id);
    if (!cm || cm.itemId !== item.id || cm.deletedAt !== null) throw new NotFound('comment', 'of that id on this item');
    return cm;
  };
  app.get('/items/:ref/comments', { config: read, schema: { tags: ['comments'], summary: 'The item\u2019s comments, oldest first (a deleted comment is gone; imported tombstones carry deletedAt)', params: P.item, response: { 200: z.object({ comments: z.array(S.commentView) }), ...err } } }, async (req) => {
    const { item } = await itemOf(req, req.params.ref);
    return { comments: await v.store.listComments(item.id) };
  });
  app.post('/items/:ref/comments', { config: write, schema: { summary: 'Add a comment to the item', tags: ['comments'], params: P.item, body: S.newCommentBody, response: { 201: S.writeResult(S.commentView), ...err } } }, async (req, reply) => {
    const { item } = await itemOf(req, req.params.ref);
    if (req.body.parentCommentId !== undefined) await commentOf(req, req.params.ref, req.body.parentCommentId);
    const r = await v.store.addComment({ itemId: item.id, author: req.body.author, body: req.body.body, parentCommentId: req.body.parentCommentId ?? null });
    return reply.code(201).send(written(r));
  });
  app.patch('/items/:ref/comments/:commentId', { config: write, schema: { summary: 'Edit a comment', tags: ['comments'], params: P.comment, body: S.commentPatchBody, response: { 200: S.writeResult(S.commentView), ...err } } }, async (req) => {
    const cm = await commentOf(req, req.params.ref, req.params.commentId);
    return written(await v.store.editComment(cm.id, req.body.body));
  });
  app.delete('/items/:ref/comments/:commentId', { config: write, schema: { summary: 'Delete a comment (a tombstone is kept)', tags: ['comments'], params: P.comment, response: { 200: S.writeResult(S.commentView.nullable()), ...err } } }, async (req) => {
    const cm = await commentOf(req, req.params.ref, req.params.commentId);
    return written(await v.store.deleteComment(cm.id));
  });

  // ------------------------------------------------------------------ links
  app.get('/items/:ref/links', { config: read, schema: { tags: ['links'], summary: 'Links with the item at either end, oldest first', params: P.item, response: { 200: z.object({ links: z.array(S.linkView) }), ...err } } }, async (req) => {
    const { item } = await itemOf(req, req.params.ref);
    return { links: (await v.store.listLinks(item.id)).map(linkView) };
  });
  app.post('/items/:ref/links', { config: write, schema: { tags: ['links'], summary: 'A link from this item to another, by ref', params: P.item, body: S.newLinkBody, response: { 201: S.writeResult(S.linkView), ...err } } }, async (req, reply) => {
    const { ws, item } = await itemOf(req, req.params.ref);
    const target = await v.store.getItemByRef(ws.id, req.body.target);
    if (!target) throw new NotFound('target item', 'of that ref');
    return reply.code(201).send(written(await v.store.addLink({ workspaceId: ws.id, sourceId: item.id, targetId: target.id, linkType: req.body.type }), linkView));
  });
  app.delete('/items/:ref/links/:linkId', { config: write, schema: { summary: 'Remove a link', tags: ['links'], params: P.link, response: { 200: S.writeResult(S.linkView.nullable()), ...err } } }, async (req) => {
    const { item } = await itemOf(req, req.params.ref);
    const link = await v.store.getLink(req.params.linkId);
    if (!link || (link.sourceId !== item.id && link.targetId !== item.id)) throw new NotFound('link', 'of that id on this item');
    return written(await v.store.removeLink(link.id), (l) => (l ? linkView(l) : null));
  });
}

/** A write's answer: `{row, changed, normalised, owed}`; `normalised` counts the text repairs the door made (DESIGN §16.25). */
function written<T, U = T>(r: WriteResult<T>, view?: (row: T) => U): { row: U; changed: boolean; normalised: WriteResult<T>['normalised']; owed: number } {
  return { row: view ? view(r.row) : (r.row as unknown as U), changed: r.changed, normalised: r.normalised, owed: r.owed };
}

function linkView(l: LinkRow): z.infer<typeof S.linkView> {
  return { id: l.id, sourceId: l.sourceId, targetId: l.targetId, linkType: l.linkType, createdAt: l.createdAt };
}
