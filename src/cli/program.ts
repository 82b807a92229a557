import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';

/** The package version, read from package.json beside src/ and dist/. */
const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
import { ConfigError } from '../config.js';
import { InvalidQuestion } from '../decision/questions.js';
import { InvalidQuestionSet } from '../decision/registry.js';
import { ProviderMisconfigured } from '../providers/errors.js';
import { LeaseTooShort } from '../worker/worker.js';
import { addConfigOptions, EXIT_FAILURE, EXIT_USAGE, UsageError } from './common.js';
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

/** Builds the `verdict` program: the CLI only wires things (CONVENTIONS.md). */
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
    const usage = err instanceof ConfigError || err instanceof UsageError || err instanceof InvalidQuestion || err instanceof InvalidQuestionSet || err instanceof LeaseTooShort;
    const misconfigured = err instanceof ProviderMisconfigured;
    process.stderr.write(`verdict: ${(err as Error).message}\n`);
    if (!usage && !misconfigured && process.env.VERDICT_DEBUG) process.stderr.write(`${(err as Error).stack}\n`);
    return usage || misconfigured ? EXIT_USAGE : EXIT_FAILURE;
  }
}
