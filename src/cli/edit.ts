import type { Command } from 'commander';
import { parseLossless } from '../decision/canonical-json.js';
import type { ItemPatch } from '../store/tracker-writes.js';
import { buildRegistry, configFrom, loggerFor, openStore, resolveItem, UsageError } from './common.js';
import { openReader } from '../compose/reader.js';
import { readsAgainst } from './reader.js';

/**
 * Parses `key=value`; the value is JSON when it parses as JSON (numbers, true, null), else the
 * text itself. Numbers keep their literal (`3.0`, integers beyond 2^53) so they are stored as
 * typed (DESIGN §3.2).
 */
function parseFieldAssignment(s: string): [string, unknown] {
  const eq = s.indexOf('=');
  if (eq <= 0) throw new UsageError(`--field: got "${s}", expected key=value`);
  const raw = s.slice(eq + 1);
  try {
    return [s.slice(0, eq), parseLossless(raw)];
  } catch {
    return [s.slice(0, eq), raw];
  }
}

/**
 * What an edit made stale, for a person: the answers about the item itself (its jobs, counted
 * above, re-ask them) and the answers about other items whose question the edit changed (a
 * convention edit: the drift sweep re-asks them). See DecisionReader.staleWatch.
 */
function staleLines(
  ref: string,
  s: { itemAnswers: number; questionAnswers: number; changedQuestions: string[] },
): string[] {
  const out: string[] = [];
  if (s.itemAnswers > 0)
    out.push(`  ${s.itemAnswers} answers about ${ref} went stale (its state changed); the jobs owed re-ask them`);
  if (s.questionAnswers > 0 || s.changedQuestions.length > 0) {
    const keys =
      s.changedQuestions.length > 5
        ? `${s.changedQuestions.slice(0, 5).join(', ')} and ${s.changedQuestions.length - 5} more`
        : s.changedQuestions.join(', ');
    out.push(
      `  ${s.questionAnswers} answers about other items went stale: their question changed (${keys}); the drift sweep re-asks them`,
    );
  }
  if (out.length === 0) out.push('  no stored answer went stale');
  return out;
}

/**
 * `verdict edit REF [--title T] [--content C | --append C] [--field k=v]... [--comment TEXT]`:
 * a tracker write through the store's doors, as a tracker would make it (live priority, with
 * the quiet period), so a demo or an operator can watch an answer go stale and be re-asked.
 */
export function registerEditCommand(program: Command): void {
  program
    .command('edit <ref>')
    .description('edit an item (or a convention) through the store, as a tracker write: owes its jobs')
    .option('--workspace <slug>', 'workspace slug (default: the only one)')
    .option('--title <text>', 'new title')
    .option('--content <text>', 'new body')
    .option('--append <text>', 'append a paragraph to the body')
    .option(
      '--field <key=value>',
      'set one field (repeatable); JSON values are parsed',
      (v: string, acc: string[]) => [...acc, v],
      [] as string[],
    )
    .option('--comment <text>', 'add a comment')
    .option('--author <name>', 'author of --comment', 'verdict-cli')
    .action(
      async (
        ref: string,
        opts: {
          workspace?: string;
          title?: string;
          content?: string;
          append?: string;
          field: string[];
          comment?: string;
          author: string;
        },
        cmd: Command,
      ) => {
        if (opts.content !== undefined && opts.append !== undefined)
          throw new UsageError('give --content or --append, not both');
        const cfg = configFrom(cmd);
        const registry = buildRegistry(cfg);
        const store = openStore(cfg, registry, { mustExist: true });
        try {
          const { ws, item } = await resolveItem(store, opts.workspace, ref);
          const patch: ItemPatch = {};
          if (opts.title !== undefined) patch.title = opts.title;
          if (opts.content !== undefined) patch.content = opts.content;
          if (opts.append !== undefined) patch.content = `${item.content}${item.content ? '\n\n' : ''}${opts.append}`;
          if (opts.field.length) {
            // Only the named keys are sent: the store splices them into the stored text, so every
            // other byte survives and a value already held is no change (DESIGN §3.2).
            const setFields: Record<string, unknown> = {};
            for (const f of opts.field) {
              const [k, v] = parseFieldAssignment(f);
              setFields[k] = v;
            }
            patch.setFields = setFields;
          }
          const watch = await (
            await openReader(store, registry, readsAgainst(cfg, loggerFor(cfg)), loggerFor(cfg))
          ).staleWatch(ws.id, item.id);
          let owed = 0;
          let changed = false;
          if (Object.keys(patch).length) {
            const r = await store.updateItem(item.id, patch);
            owed += r.owed;
            changed ||= r.changed;
          }
          if (opts.comment !== undefined) {
            const r = await store.addComment({ itemId: item.id, author: opts.author, body: opts.comment });
            owed += r.owed;
            changed = true;
          }
          const lines = [`${ref}: ${changed ? 'changed' : 'unchanged (nothing to write)'}; ${owed} jobs owed`];
          if (changed) lines.push(...staleLines(ref, await watch.madeStale()));
          process.stdout.write(`${lines.join('\n')}\n`);
        } finally {
          await store.close();
        }
      },
    );
}
