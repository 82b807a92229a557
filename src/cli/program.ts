import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';

/** The package version, read from package.json beside src/ and dist/. */
const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
import { VerdictError } from '../errors.js';
import { addConfigOptions, EXIT_FAILURE, EXIT_USAGE } from './common.js';
import { registerMigrateCommand } from './migrate.js';
import { registerBackfillCommand } from './backfill.js';
import { registerDemoCommand } from './demo.js';
import { registerDoctorCommand } from './doctor.js';
import { registerEstimateCommand } from './estimate.js';
import { registerFlagsCommand } from './flags.js';
import { registerImportCommand } from './import.js';
import { registerJobsCommand } from './jobs.js';
import { registerEditCommand } from './edit.js';
import { registerPruneCommand } from './prune.js';
import { registerReaskCommand } from './reask.js';
import { registerSetsCommand } from './sets.js';
import { registerShowCommand } from './show.js';
import { registerStatusCommand } from './status.js';
import { registerWorkerCommand } from './worker.js';

/**
 * Codes of the errors that are the caller's to fix (exit 2, DESIGN §12): ConfigError, UsageError,
 * InvalidQuestion, InvalidQuestionSet, LeaseTooShort. `provider_misconfigured` exits 2 as well.
 */
const USAGE_CODES: ReadonlySet<string> = new Set(['config_error', 'usage_error', 'invalid_question', 'invalid_question_set', 'lease_too_short']);

/** Builds the `verdict` program: the CLI only wires things; the work is in the layers below it. */
export function buildProgram(): Command {
  const program = addConfigOptions(new Command('verdict'))
    .description('keeps LLM-evaluated, typed decisions about tracker items current, cheap and trustworthy')
    .version(VERSION)
    .configureHelp({ showGlobalOptions: true })
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  registerDemoCommand(program);
  registerImportCommand(program);
  registerWorkerCommand(program);
  registerShowCommand(program);
  registerFlagsCommand(program);
  registerStatusCommand(program);
  registerDoctorCommand(program);
  registerBackfillCommand(program);
  registerJobsCommand(program);
  registerEstimateCommand(program);
  registerSetsCommand(program);
  registerReaskCommand(program);
  registerPruneCommand(program);
  registerEditCommand(program);
  registerMigrateCommand(program);
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
    const code = err instanceof VerdictError ? err.code : null;
    const usage = code !== null && USAGE_CODES.has(code);
    const misconfigured = code === 'provider_misconfigured';
    process.stderr.write(`verdict: ${(err as Error).message}\n`);
    if (!usage && !misconfigured && process.env.VERDICT_DEBUG) process.stderr.write(`${(err as Error).stack}\n`);
    return usage || misconfigured ? EXIT_USAGE : EXIT_FAILURE;
  }
}
