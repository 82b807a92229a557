import type { Command } from 'commander';
import { assertBeadsFile, importBeads, type ImportReport } from '../importers/beads.js';
import { importConventions, InvalidConventionsFile, readConventionsFile } from '../importers/conventions.js';
import { buildRegistry, configFrom, loggerFor, openStore, UsageError } from './common.js';

/** A short human summary of an import report. */
export function formatImportReport(r: ImportReport): string {
  const skipped = Object.entries(r.skipped).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`).join(', ') || 'none';
  const dropped = Object.entries(r.links.dropped).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`).join(', ') || 'none';
  const lines = [
    `workspace ${r.workspaceSlug}: ${r.rowsRead} rows read`,
    `  items: ${r.imported.created} created, ${r.imported.updated} updated, ${r.imported.unchanged} unchanged (${r.imported.tombstones} tombstones)`,
    `  skipped: ${skipped}`,
    `  comments: ${r.comments.written} written, ${r.comments.unchanged} unchanged`,
    `  links: ${r.links.created} created, ${r.links.unchanged} unchanged; dropped: ${dropped}`,
    `  lines rejected: ${r.rejected.count}${r.rejected.lines.length ? ` (lines ${r.rejected.lines.map((l) => l.line).join(', ')})` : ''}`,
    `  jobs owed: ${r.jobRowsOwed} (item, question set) rows`,
  ];
  return lines.join('\n');
}

export function registerImportCommand(program: Command): void {
  program
    .command('import <format> <file>')
    .description('import a real tracker export (format beads), or a workspace\'s conventions (format conventions: JSON or YAML)')
    .option('--workspace <slug>', 'workspace to import into', 'beads')
    .option('--json', 'print the report as JSON')
    .action(async (format: string, file: string, opts: { workspace: string; json?: boolean }, cmd: Command) => {
      if (format !== 'beads' && format !== 'conventions') {
        throw new UsageError(`unknown format "${format}"; known: beads, conventions`);
      }
      const cfg = configFrom(cmd);
      if (format === 'conventions') {
        let doc;
        try {
          doc = readConventionsFile(file);
        } catch (err) {
          if (err instanceof InvalidConventionsFile) throw new UsageError(err.message);
          throw err;
        }
        const store = openStore(cfg, buildRegistry(cfg));
        try {
          const r = await importConventions(store, doc, opts.workspace);
          process.stdout.write(
            opts.json
              ? `${JSON.stringify(r, null, 2)}\n`
              : `workspace ${opts.workspace}: conventions ${r.created} created, ${r.updated} updated, ${r.unchanged} unchanged\n`,
          );
        } finally {
          await store.close();
        }
        return;
      }
      const logger = loggerFor(cfg);
      const registry = buildRegistry(cfg);
      // Before the database is opened (and so created): input with no beads row leaves nothing behind.
      await assertBeadsFile(file);
      const store = openStore(cfg, registry);
      try {
        const report = await importBeads(store, file, { workspaceSlug: opts.workspace, logger });
        process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : `${formatImportReport(report)}\n`);
      } finally {
        await store.close();
      }
    });
}
