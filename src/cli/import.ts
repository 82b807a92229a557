import type { Command } from 'commander';
import { assertBeadsFile, importBeads, type ImportReport } from '../importers/beads.js';
import { importConventions, InvalidConventionsFile, readConventionsFile } from '../importers/conventions.js';
import { loadActionsConfig } from '../actions/config.js';
import {
  assertGitHubFiles,
  importGitHubFiles,
  importGitHubRepo,
  type GitHubImportReport,
} from '../integrations/github/import.js';
import { REPO_NAME } from '../integrations/github/rest-shapes.js';
import { buildRegistry, configFrom, EXIT_FAILURE, loggerFor, openStore, UsageError } from './common.js';

/** Where `import github --repo` sends its REST calls unless VERDICT_GITHUB_API_URL says otherwise. */
const GITHUB_API_URL = 'https://api.github.com';

/** A short human summary of an import report. */
export function formatImportReport(r: ImportReport): string {
  const skipped =
    Object.entries(r.skipped)
      .filter(([, n]) => n > 0)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ') || 'none';
  const dropped =
    Object.entries(r.links.dropped)
      .filter(([, n]) => n > 0)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ') || 'none';
  const lines = [
    `workspace ${r.workspaceSlug}: ${r.rowsRead} rows read`,
    `  items: ${r.imported.created} created, ${r.imported.updated} updated, ${r.imported.unchanged} unchanged (${r.imported.tombstones} tombstones)`,
    `  skipped: ${skipped}`,
    `  comments: ${r.comments.written} written, ${r.comments.unchanged} unchanged`,
    `  links: ${r.links.created} created, ${r.links.unchanged} unchanged; dropped: ${dropped}`,
    `  lines rejected: ${r.rejected.count}${r.rejected.lines.length ? ` (lines ${r.rejected.lines.map((l) => l.line).join(', ')})` : ''}`,
    `  normalised: ${formatRepairs(r.repairedLines)}`,
    `  jobs owed: ${r.jobRowsOwed} (item, question set) rows`,
  ];
  return lines.join('\n');
}

/** `0 lines`, or `2 lines (invalid UTF-8 replaced 1, NUL removed 1; lines 3, 7)`. */
function formatRepairs(r: ImportReport['repairedLines']): string {
  if (r.count === 0) return '0 lines';
  const what = [
    r.invalidUtf8 ? `invalid UTF-8 replaced ${r.invalidUtf8}` : '',
    r.loneSurrogates ? `lone surrogates replaced ${r.loneSurrogates}` : '',
    r.nulsRemoved ? `NUL removed ${r.nulsRemoved}` : '',
  ].filter(Boolean);
  return `${r.count} line${r.count === 1 ? '' : 's'} (${what.join(', ')}; line${r.lines.length === 1 ? '' : 's'} ${r.lines.join(', ')})`;
}

/**
 * A run that rejected input exits 1 unless the caller said rejects are expected (DESIGN §3.1):
 * a script must not take a partial import for a whole one. The report is printed either way.
 */
function exitOnRejects(rejected: number, allowRejects: boolean | undefined): void {
  if (rejected === 0 || allowRejects) return;
  process.stderr.write(
    `${rejected} input ${rejected === 1 ? 'entry was' : 'entries were'} rejected (see the report); pass --allow-rejects to exit 0 anyway\n`,
  );
  process.exitCode = EXIT_FAILURE;
}

/** A short human summary of a GitHub import report. */
function formatGitHubImportReport(r: GitHubImportReport): string {
  const lines = [
    `workspace ${r.workspaceSlug}: ${r.repo}, ${r.issuesRead} issue rows read${r.source === 'api' ? ` (${r.requests} requests, ${r.notModified} not modified${r.rateLimitWaits ? `, ${r.rateLimitWaits} rate-limit waits` : ''})` : ''}`,
    `  items: ${r.items.created} created, ${r.items.updated} updated, ${r.items.unchanged} unchanged`,
    `  pull requests skipped: ${r.pullRequestsSkipped}`,
    `  comments: ${r.comments.written} written, ${r.comments.unchanged} unchanged, ${r.comments.skipped} skipped`,
    `  links: ${r.links.created} created, ${r.links.unchanged} unchanged, ${r.links.dropped} dropped`,
    `  rows rejected: ${r.rejected.count}${r.rejected.rows.length ? ` (${r.rejected.rows.map((x) => `${x.list} #${x.index}`).join(', ')})` : ''}`,
    `  jobs owed: ${r.jobRowsOwed} (item, question set) rows`,
  ];
  return lines.join('\n');
}

interface ImportOptions {
  workspace?: string;
  json?: boolean;
  repo?: string;
  file?: string;
  comments?: string;
  allowRejects?: boolean;
}

export function registerImportCommand(program: Command): void {
  program
    .command('import <format> [file]')
    .description(
      "import a real tracker export (format beads), a workspace's conventions (format conventions: JSON or YAML), " +
        'or GitHub issues (format github: --repo OWNER/NAME with GITHUB_TOKEN, or --file issues.json [--comments comments.json] saved with gh api --paginate)',
    )
    .option('--workspace <slug>', 'workspace to import into (default: beads; github: github)')
    .option(
      '--repo <owner/name>',
      'github: the repository to read through the REST API (token from GITHUB_TOKEN; API URL from VERDICT_GITHUB_API_URL)',
    )
    .option('--file <issues.json>', 'github: issues saved with gh api --paginate repos/OWNER/NAME/issues?state=all')
    .option(
      '--comments <comments.json>',
      'github: comments saved with gh api --paginate repos/OWNER/NAME/issues/comments (with --file)',
    )
    .option('--json', 'print the report as JSON')
    .option('--allow-rejects', 'exit 0 even when lines (beads) or rows (github) were rejected; they are still reported')
    .action(async (format: string, file: string | undefined, opts: ImportOptions, cmd: Command) => {
      if (format !== 'beads' && format !== 'conventions' && format !== 'github') {
        throw new UsageError(`unknown format "${format}"; known: beads, conventions, github`);
      }
      if (format === 'github') return importGitHub(cmd, file, opts);
      if (opts.repo !== undefined || opts.file !== undefined || opts.comments !== undefined) {
        throw new UsageError(`--repo, --file and --comments are for import github; import ${format} takes FILE`);
      }
      if (file === undefined) throw new UsageError(`import ${format} needs FILE`);
      const workspace = opts.workspace ?? 'beads';
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
          const r = await importConventions(store, doc, workspace);
          process.stdout.write(
            opts.json
              ? `${JSON.stringify(r, null, 2)}\n`
              : `workspace ${workspace}: conventions ${r.created} created, ${r.updated} updated, ${r.unchanged} unchanged\n`,
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
        const report = await importBeads(store, file, { workspaceSlug: workspace, logger });
        process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : `${formatImportReport(report)}\n`);
        exitOnRejects(report.rejected.count, opts.allowRejects);
      } finally {
        await store.close();
      }
    });
}

/**
 * `import github`: `--repo OWNER/NAME` (REST, token from GITHUB_TOKEN, base URL from
 * VERDICT_GITHUB_API_URL) or `--file issues.json [--comments comments.json]` (or the file as the
 * positional argument). Inputs are checked before the database is opened, so a typo creates none.
 * @throws UsageError for a missing or conflicting source, a bad repository name, or no token.
 */
async function importGitHub(cmd: Command, positional: string | undefined, opts: ImportOptions): Promise<void> {
  const issuesFile = opts.file ?? positional;
  if (opts.file !== undefined && positional !== undefined)
    throw new UsageError('pass the issues file once: --file issues.json or FILE, not both');
  if (issuesFile === undefined && opts.repo === undefined) {
    throw new UsageError(
      'import github needs --repo OWNER/NAME (with GITHUB_TOKEN) or --file issues.json [--comments comments.json]',
    );
  }
  if (opts.repo !== undefined && !REPO_NAME.test(opts.repo))
    throw new UsageError(`--repo must be OWNER/NAME, got "${opts.repo}"`);
  if (opts.comments !== undefined && issuesFile === undefined)
    throw new UsageError('--comments goes with --file issues.json (the REST import reads comments itself)');
  const cfg = configFrom(cmd);
  const logger = loggerFor(cfg);
  const out = (r: GitHubImportReport) => {
    process.stdout.write(opts.json ? `${JSON.stringify(r, null, 2)}\n` : `${formatGitHubImportReport(r)}\n`);
    exitOnRejects(r.rejected.count, opts.allowRejects);
  };

  if (issuesFile !== undefined) {
    await assertGitHubFiles(issuesFile, opts.comments);
    const registry = buildRegistry(cfg);
    const labelRule = loadActionsConfig(cfg.configFile, registry).labels;
    const store = openStore(cfg, registry);
    try {
      out(
        await importGitHubFiles(store, {
          issuesFile,
          commentsFile: opts.comments,
          repo: opts.repo,
          workspaceSlug: opts.workspace,
          logger,
          labelRule,
        }),
      );
    } finally {
      await store.close();
    }
    return;
  }
  const token = process.env.GITHUB_TOKEN?.trim();
  if (!token)
    throw new UsageError("import github --repo needs a token in GITHUB_TOKEN (read access to the repository's issues)");
  const baseUrl = process.env.VERDICT_GITHUB_API_URL?.trim() || GITHUB_API_URL;
  if (!/^https?:\/\//.test(baseUrl))
    throw new UsageError(`VERDICT_GITHUB_API_URL must be an http(s) URL, got "${baseUrl}"`);
  const registry = buildRegistry(cfg);
  const labelRule = loadActionsConfig(cfg.configFile, registry).labels;
  const store = openStore(cfg, registry);
  try {
    out(
      await importGitHubRepo(store, {
        repo: opts.repo!,
        workspaceSlug: opts.workspace,
        token,
        baseUrl,
        logger,
        labelRule,
      }),
    );
  } finally {
    await store.close();
  }
}
