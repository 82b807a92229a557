import type { Command } from 'commander';
import { buildRegistry, configFrom, loggerFor, openStore, resolveWorkspace, UsageError } from './common.js';
import { openReader } from '../compose/reader.js';
import { readsAgainst } from './reader.js';

export function registerFlagsCommand(program: Command): void {
  program
    .command('flags')
    .description("list a workspace's surfaced nouls of one set, highest first")
    .requiredOption('--set <name>', 'question set, for example attention')
    .option('--workspace <slug>', 'workspace slug (default: the only one)')
    .option('--threshold <p>', 'override the set threshold (0 to 1)')
    .option('--limit <n>', 'print at most this many items', '50')
    .option('--flapping', 'list the keys whose surfacing flipped 3 or more times in 30 days instead (DESIGN §8.2)')
    .option('--json', 'print JSON')
    .action(
      async (
        opts: {
          set: string;
          workspace?: string;
          threshold?: string;
          limit: string;
          flapping?: boolean;
          json?: boolean;
        },
        cmd: Command,
      ) => {
        const cfg = configFrom(cmd);
        const registry = buildRegistry(cfg);
        if (!registry.get(opts.set)) {
          throw new UsageError(
            `--set: no question set "${opts.set}"; known: ${registry
              .all()
              .map((s) => s.name)
              .join(', ')}`,
          );
        }
        const threshold =
          opts.threshold === undefined ? undefined : opts.threshold.trim() === '' ? NaN : Number(opts.threshold);
        if (threshold !== undefined && !(threshold >= 0 && threshold <= 1)) {
          throw new UsageError(`--threshold: got "${opts.threshold}"; expected a number from 0 to 1`);
        }
        const limit = Number(opts.limit);
        if (!Number.isInteger(limit) || limit < 1) {
          throw new UsageError(`--limit: got "${opts.limit}"; expected a whole number of at least 1`);
        }
        const store = openStore(cfg, registry, { access: 'read' });
        try {
          const ws = await resolveWorkspace(store, opts.workspace);
          if (opts.flapping) {
            const keys = await (
              await openReader(store, registry, readsAgainst(cfg, loggerFor(cfg)), loggerFor(cfg))
            ).flapping(ws.id, opts.set);
            if (opts.json) {
              process.stdout.write(
                `${JSON.stringify({ workspace: ws.slug, set: opts.set, flapping: keys }, null, 2)}\n`,
              );
              return;
            }
            const lines = [
              `${keys.length} ${keys.length === 1 ? 'key' : 'keys'} of ${opts.set} in ${ws.slug} flipped 3 or more times in 30 days${keys.length > limit ? `; showing ${limit} (--limit)` : ''}`,
            ];
            for (const k of keys.slice(0, limit)) {
              lines.push(
                `  ${k.ref.padEnd(12)} ${k.questionKey}  ${k.flips} flips, now ${k.surfaced ? 'surfaced' : 'cleared'} since ${new Date(k.lastFlipAt).toISOString()}`,
              );
            }
            process.stdout.write(`${lines.join('\n')}\n`);
            return;
          }
          const { flags, failing } = await (
            await openReader(store, registry, readsAgainst(cfg, loggerFor(cfg)), loggerFor(cfg))
          ).workspaceFlags(ws.id, opts.set, threshold);
          const ranked = Object.entries(flags)
            .map(([itemId, f]) => ({
              itemId,
              ref: f.ref,
              keys: f.keys,
              human: f.human ?? [],
              top: Math.max(...Object.values(f.keys)),
            }))
            .sort((a, b) => b.top - a.top || (a.ref < b.ref ? -1 : 1));
          if (opts.json) {
            process.stdout.write(
              `${JSON.stringify({ workspace: ws.slug, set: opts.set, failing, items: ranked }, null, 2)}\n`,
            );
            return;
          }
          const shown = ranked.length > limit ? `; showing ${limit} of ${ranked.length} (--limit)` : '';
          const lines = [
            `${ranked.length} items flagged by ${opts.set} in ${ws.slug}${shown}${failing ? ' (some jobs of this set are failing: see `verdict status`)' : ''}`,
          ];
          for (const r of ranked.slice(0, limit)) {
            const keys = Object.entries(r.keys)
              .map(([k, p]) => `${k}=${p.toFixed(2)}${r.human.includes(k) ? ' (person)' : ''}`)
              .join(' ');
            const item = await store.getItem(r.itemId);
            lines.push(`  ${r.ref.padEnd(12)} ${keys}  ${(item?.title ?? '').slice(0, 70)}`);
          }
          process.stdout.write(`${lines.join('\n')}\n`);
        } finally {
          await store.close();
        }
      },
    );
}
