import { VERSION } from '../version.js';
import { Command, CommanderError } from 'commander';
import { closest, distance } from 'fastest-levenshtein';
import { InputNotFound, ownCode, VerdictError } from '../errors.js';
import { databaseError } from '../store/database-errors.js';
import { EXIT_FAILURE, EXIT_USAGE } from './common.js';
import { addGlobalOptions, pointAtGlobalOptions } from './options-help.js';
import { registerMigrateCommand } from './migrate.js';
import { registerBackfillCommand } from './backfill.js';
import { registerDemoCommand } from './demo.js';
import { registerDoctorCommand } from './doctor.js';
import { registerEstimateCommand } from './estimate.js';
import { registerEvalCommand } from './eval.js';
import { registerFlagsCommand } from './flags.js';
import { registerImportCommand } from './import.js';
import { registerJobsCommand } from './jobs.js';
import { registerEditCommand } from './edit.js';
import { registerPruneCommand } from './prune.js';
import { registerReaskCommand } from './reask.js';
import { registerReviewCommands } from './review.js';
import { registerSetsCommand } from './sets.js';
import { registerShowCommand } from './show.js';
import { registerExplainCommand } from './explain.js';
import { registerStatusCommand } from './status.js';
import { registerWorkerCommand } from './worker.js';
import { registerServeCommand } from './serve.js';
import { registerMcpCommand } from './mcp.js';
import { registerTokensCommand } from './tokens.js';
import { registerActionsCommand } from './actions.js';

/**
 * Codes of the errors that are the caller's to fix (exit 2, DESIGN §12): ConfigError, UsageError,
 * InvalidQuestion, InvalidQuestionSet, LeaseTooShort, and a missing input (a file to import, a
 * database not created). `provider_misconfigured` exits 2 as well. Everything else exits 1.
 */
const USAGE_CODES: ReadonlySet<string> = new Set([
  'config_error',
  'usage_error',
  'invalid_question',
  'invalid_question_set',
  'lease_too_short',
  'input_not_found',
  'database_not_found',
  'provider_misconfigured',
]);

/**
 * The one error format of the CLI: `verdict: <what>; <how to fix>` on one line. A driver or
 * system error that escaped the library (a missing file, a database that went away mid-command)
 * is named by its code with a fix, never printed raw.
 */
function cliError(err: unknown): VerdictError | Error {
  if (err instanceof VerdictError) return err;
  const code = ownCode(err);
  const path = (err as { path?: unknown } | null)?.path;
  if (code === 'ENOENT' && typeof path === 'string') return new InputNotFound(`no file at ${path}; check the path`);
  if (code !== undefined && /^(SQLITE_|E[A-Z]+$|[0-9A-Z]{5}$)/.test(code))
    return databaseError(err, 'the database (--database-url)');
  return err instanceof Error ? err : new Error(String(err));
}
/**
 * A commander parse error (`error: unknown option '--databse-url'`, then `(Did you mean X?)` when
 * commander found a near name) in the CLI's one form: `verdict: unknown option '--databse-url';
 * did you mean --database-url?`. Commander matches a command's own options only: the global ones
 * are hidden from each command's help (listed once by `verdict help options`), so an unknown
 * option with no near name of its command is matched here against `globalFlags` (`--database-url`
 * ...), nearest by edit distance, within 40 % of the flag's length (commander's own bound).
 * Without a near name, the fix says where the commands and options are listed.
 */
function formatParseError(text: string, globalFlags: readonly string[]): string {
  const lines = text
    .replace(/^error: /, '')
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const what = lines[0]?.replace(/[.;]$/, '') ?? 'the command line could not be read';
  let near = lines.map((l) => /^\(Did you mean (.+)\?\)$/.exec(l)?.[1]).find(Boolean);
  const unknownFlag = /^unknown option '(--[^'=]+)/.exec(what)?.[1];
  if (!near && unknownFlag && globalFlags.length > 0) {
    const best = closest(unknownFlag, [...globalFlags]);
    if (distance(unknownFlag, best) <= Math.floor(unknownFlag.length * 0.4)) near = best;
  }
  const fix = near
    ? `did you mean ${near}?`
    : unknownFlag
      ? "run with --help for the command's options, and `verdict help options` for the global ones"
      : /^unknown command/.test(what)
        ? '`verdict --help` lists the commands'
        : 'run with --help for usage';
  return `verdict: ${what}; ${fix}\n`;
}

/** Builds the `verdict` program: the CLI only wires things; the work is in the layers below it. */
export function buildProgram(): Command {
  const program = addGlobalOptions(new Command('verdict'))
    .description('keeps LLM-evaluated, typed decisions about tracker items current, cheap and trustworthy')
    .version(VERSION)
    .exitOverride();
  const globalFlags = program.options.map((o) => o.long).filter((f): f is string => !!f);
  // Set before the commands are added: each command copies it.
  program.configureOutput({ outputError: (text, write) => write(formatParseError(text, globalFlags)) });
  registerDemoCommand(program);
  registerImportCommand(program);
  registerWorkerCommand(program);
  registerServeCommand(program);
  registerMcpCommand(program);
  registerTokensCommand(program);
  registerShowCommand(program);
  registerExplainCommand(program);
  registerFlagsCommand(program);
  registerReviewCommands(program);
  registerStatusCommand(program);
  registerDoctorCommand(program);
  registerBackfillCommand(program);
  registerJobsCommand(program);
  registerEstimateCommand(program);
  registerEvalCommand(program);
  registerActionsCommand(program);
  registerSetsCommand(program);
  registerReaskCommand(program);
  registerPruneCommand(program);
  registerEditCommand(program);
  registerMigrateCommand(program);
  pointAtGlobalOptions(program);
  return program;
}

/** Runs the CLI; exit codes 0 ok, 1 failure, 2 usage error (DESIGN §12). */
export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : EXIT_USAGE;
    const e = cliError(err);
    const usage = e instanceof VerdictError && USAGE_CODES.has(e.code);
    process.stderr.write(`verdict: ${e.message.replace(/\s*\n\s*/g, ' ')}\n`);
    if (!usage && process.env.VERDICT_DEBUG) process.stderr.write(`${(err as Error).stack}\n`);
    return usage ? EXIT_USAGE : EXIT_FAILURE;
  }
}
