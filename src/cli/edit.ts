import type { Command } from 'commander';
import { parseLossless } from '../decision/canonical-json.js';
import type { ItemPatch } from '../store/store.js';
import { buildRegistry, configFrom, openStore, resolveWorkspace, UsageError } from './common.js';

/**
 * Parses `key=value`; the value is JSON when it parses as JSON (numbers, true, null), else the
 * text itself. Numbers keep their literal (`3.0`, integers beyond 2^53) so they are stored as
 * typed (DESIGN §16.10).
 */
export function parseFieldAssignment(s: string): [string, unknown] {
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
    .option('--field <key=value>', 'set one field (repeatable); JSON values are parsed', (v: string, acc: string[]) => [...acc, v], [] as string[])
    .option('--comment <text>', 'add a comment')
    .option('--author <name>', 'author of --comment', 'verdict-cli')
    .action(
      async (
        ref: string,
        opts: { workspace?: string; title?: string; content?: string; append?: string; field: string[]; comment?: string; author: string },
        cmd: Command,
      ) => {
        if (opts.content !== undefined && opts.append !== undefined) throw new UsageError('give --content or --append, not both');
        const cfg = configFrom(cmd);
        const store = openStore(cfg, buildRegistry(cfg), { mustExist: true });
        try {
          const ws = await resolveWorkspace(store, opts.workspace);
          const item = await store.getItemByRef(ws.id, ref);
          if (!item) throw new UsageError(`no item ${ref} in workspace ${ws.slug}; check the ref (\`verdict flags --set SET\` lists items)`);
          const patch: ItemPatch = {};
          if (opts.title !== undefined) patch.title = opts.title;
          if (opts.content !== undefined) patch.content = opts.content;
          if (opts.append !== undefined) patch.content = `${item.content}${item.content ? '\n\n' : ''}${opts.append}`;
          if (opts.field.length) {
            // Only the named keys are sent: the store splices them into the stored text, so every
            // other byte survives and a value already held is no change (DESIGN §16.10).
            const setFields: Record<string, unknown> = {};
            for (const f of opts.field) {
              const [k, v] = parseFieldAssignment(f);
              setFields[k] = v;
            }
            patch.setFields = setFields;
          }
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
          process.stdout.write(`${ref}: ${changed ? 'changed' : 'unchanged (nothing to write)'}; ${owed} jobs owed\n`);
        } finally {
          await store.close();
        }
      },
    );
}
