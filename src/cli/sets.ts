import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import type { Config } from '../config.js';
import {
  fingerprintContextText,
  questionFingerprint,
  type FingerprintContext,
  type Question,
} from '../decision/questions.js';
import { questionsOf, type QuestionMap, type QuestionSet } from '../decision/registry.js';
import { formatDuration } from '../duration.js';
import type { Logger } from '../log.js';
import { createProvider } from '../providers/create.js';
import { sqlitePathFromUrl } from '../store/sqlite/open.js';
import { buildRegistry, configFrom, EXIT_USAGE, loggerFor, openStore, resolveWorkspace } from './common.js';

/** The settings of a set as `sets list|show` print them. */
export function describeSet(set: QuestionSet) {
  return {
    name: set.name,
    source: set.source,
    questions: set.questions ? 'fixed' : 'resolved per workspace',
    keys: set.questions ? Object.keys(set.questions).sort() : null,
    collections: set.collections.length ? set.collections : 'every collection',
    eligible: set.eligible,
    withLinks: set.withLinks,
    noTrail: set.noTrail,
    perComment: set.perComment,
    maxPerCall: set.maxPerCall,
    threshold: set.threshold,
    hysteresis: set.hysteresis,
    unsurfaced: set.unsurfaced,
    quietPeriodMs: set.quietPeriodMs,
    reaskDebounceMs: set.reaskDebounceMs,
    maxDelayMs: set.maxDelayMs,
    explain: set.explain,
    /** DESIGN §5.2: answers older than this read `expired` and are re-asked; null: never. */
    maxAgeMs: set.maxAgeMs,
    /** `maxAgeMs` as the config file writes it (`7d`), or null. */
    maxAge: set.maxAgeMs === null ? null : formatDuration(set.maxAgeMs),
  };
}

/** One question with its fingerprint under `ctx` (null when no provider is configured). */
function describeQuestion(key: string, q: Question, ctx: FingerprintContext | null) {
  return {
    key,
    kind: q.kind,
    instructions: q.instructions,
    ...(q.kind === 'choice' ? { options: q.options } : {}),
    ...(q.kind === 'score' ? { levels: q.levels } : {}),
    ...(q.kind === 'noul' && q.trueDesc !== undefined ? { trueDesc: q.trueDesc, falseDesc: q.falseDesc } : {}),
    fingerprint: ctx ? questionFingerprint(q, ctx) : null,
  };
}

/** The configured provider's fingerprint context, or null when none is configured (or `none`). */
function fingerprintContext(cfg: Config, logger: Logger): FingerprintContext | null {
  if (cfg.provider === undefined || cfg.provider === 'none') return null;
  const p = createProvider(cfg, logger);
  return p ? { model: p.model, promptVersion: p.promptVersion, effort: p.effort } : null;
}

export function registerSetsCommand(program: Command): void {
  const sets = program
    .command('sets')
    .description('the question sets this process knows: built-in and from the config file');

  sets
    .command('list')
    .description('list every set with its settings')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }, cmd: Command) => {
      const cfg = configFrom(cmd);
      const all = buildRegistry(cfg).all().map(describeSet);
      if (opts.json) {
        process.stdout.write(`${JSON.stringify({ configFile: cfg.configFile ?? null, sets: all }, null, 2)}\n`);
        return;
      }
      const lines = [`${all.length} question sets${cfg.configFile ? ` (config file ${cfg.configFile})` : ''}:`];
      for (const s of all) {
        const asks = s.keys === null ? s.questions : `asks ${s.keys.join(', ')}`;
        const shape = [
          s.perComment ? 'per comment' : null,
          s.withLinks ? 'with links' : null,
          s.noTrail ? 'no trail' : null,
          s.maxAge ? `max age ${s.maxAge}` : null,
        ]
          .filter(Boolean)
          .join(', ');
        lines.push(
          `  ${s.name.padEnd(22)} ${asks}; threshold ${s.threshold}, maxPerCall ${s.maxPerCall}${shape ? `, ${shape}` : ''}; ${
            Array.isArray(s.collections) ? `collections ${s.collections.join(', ')}` : s.collections
          }; source ${s.source}`,
        );
      }
      process.stdout.write(`${lines.join('\n')}\n`);
    });

  sets
    .command('show <name>')
    .description('show one set: its settings, questions and their fingerprints under the configured provider')
    .option('--workspace <slug>', 'for a resolved set: the workspace whose questions to show (default: the only one)')
    .option('--json', 'print JSON')
    .action(async (name: string, opts: { workspace?: string; json?: boolean }, cmd: Command) => {
      const cfg = configFrom(cmd);
      const logger = loggerFor(cfg);
      const registry = buildRegistry(cfg);
      const set = registry.get(name);
      if (!set) {
        process.stderr.write(
          `unknown set "${name}"; known: ${registry
            .all()
            .map((s) => s.name)
            .join(', ')}\n`,
        );
        process.exitCode = EXIT_USAGE;
        return;
      }
      const ctx = fingerprintContext(cfg, logger);
      let questions: QuestionMap | null = set.questions ?? null;
      let workspace: string | null = null;
      let note: string | null = null;
      if (!questions) {
        const path = sqlitePathFromUrl(cfg.databaseUrl);
        if (!opts.workspace && !/^postgres/.test(cfg.databaseUrl) && path !== ':memory:' && !existsSync(path)) {
          note = `resolved per workspace; no database at ${cfg.databaseUrl} to resolve from`;
        } else {
          const store = openStore(cfg, registry, { access: 'read' });
          try {
            const ws = await resolveWorkspace(store, opts.workspace);
            workspace = ws.slug;
            questions = await questionsOf(set, { workspaceId: ws.id, store, logger });
          } finally {
            await store.close();
          }
        }
      }
      const described = questions
        ? Object.keys(questions)
            .sort()
            .map((k) => describeQuestion(k, questions![k], ctx))
        : [];
      const doc = {
        set: describeSet(set),
        workspace,
        fingerprintContext: ctx ? JSON.parse(fingerprintContextText(ctx)) : null,
        questions: described,
        note:
          note ??
          (ctx ? null : 'no provider configured: fingerprints need one (pass --provider, as the worker has it)'),
      };
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
        return;
      }
      const s = doc.set;
      const lines = [
        `${s.name}  (source ${s.source})`,
        `  collections: ${Array.isArray(s.collections) ? s.collections.join(', ') : s.collections}; eligible: ${JSON.stringify(s.eligible)}`,
        `  threshold ${s.threshold} (hysteresis ${s.hysteresis}), maxPerCall ${s.maxPerCall}, withLinks ${s.withLinks}, noTrail ${s.noTrail}, perComment ${s.perComment}, explain ${s.explain}`,
        `  unsurfaced: ${s.unsurfaced.length ? s.unsurfaced.join(', ') : 'none'}; quiet period ${s.quietPeriodMs} ms, re-ask debounce ${s.reaskDebounceMs} ms, max delay ${s.maxDelayMs} ms`,
      ];
      if (s.maxAge !== null)
        lines.push(
          `  max age ${s.maxAge} (${s.maxAgeMs} ms): older answers read stale: expired and are asked again; the state carries as_of (its UTC date)`,
        );
      if (ctx)
        lines.push(
          `  fingerprints under model ${ctx.model}, prompt ${ctx.promptVersion}, effort ${ctx.effort ?? 'none'}`,
        );
      if (workspace) lines.push(`  questions resolved for workspace ${workspace}:`);
      lines.push(described.length ? `questions (${described.length}):` : 'questions: none');
      for (const q of described) {
        lines.push(`  ${q.key}  [${q.kind}]  fingerprint ${q.fingerprint ?? 'n/a'}`);
        for (const l of q.instructions.split('\n')) lines.push(l ? `      ${l}` : '');
        if (q.options) for (const [o, d] of Object.entries(q.options)) lines.push(`      - ${o}: ${d}`);
        if (q.levels) lines.push(`      levels: ${q.levels.join(' < ')}`);
      }
      if (doc.note) lines.push(`note: ${doc.note}`);
      process.stdout.write(`${lines.join('\n')}\n`);
    });
}
