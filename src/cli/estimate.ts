import type { Command } from 'commander';
import { ConfigError, type Config } from '../config.js';
import type { QuestionSet, Registry } from '../decision/registry.js';
import type { Logger } from '../log.js';
import { DEFAULT_ANTHROPIC_MODEL } from '../providers/anthropic.js';
import { createProvider } from '../providers/create.js';
import { FakeProvider } from '../providers/fake.js';
import { batchCostOf, formatUsd, PRICES_CHECKED, pricingFor } from '../providers/pricing.js';
import { batchingActive } from '../worker/batches.js';
import { CoAskTally, type CoAskedEstimate } from '../backfill/co-ask-estimate.js';
import {
  estimateSet,
  estimateTarget,
  formatWork,
  sumWork,
  type EstimateTarget,
  type SetEstimate,
  type WorkEstimate,
} from '../backfill/estimate.js';
import {
  EXACT_SAMPLE_ITEMS,
  ExactCountUnavailable,
  exactEstimateSet,
  formatSample,
  isExactEstimate,
} from '../backfill/exact-estimate.js';
import type { Provider } from '../providers/provider.js';
import type { Store } from '../store/whole-store.js';
import { buildRegistry, configFrom, loggerFor, openStore, resolveWorkspace, UsageError } from './common.js';

/**
 * `verdict estimate [--set NAME] [--workspace SLUG] [--provider P --model X] [--exact]` (DESIGN §9
 * "Model changes", §1 principle 10): what asking a set, or switching the model, would cost before
 * anyone does it. It prices the configured provider and model; pass `--model` (and `--provider`)
 * to price a switch: answers stored under another model are not current for the new one, so every
 * key counts as unanswered. `--exact` corrects the heuristic's input tokens by the provider's own
 * count of every item up to 50, else of 50 items spread evenly (src/backfill/exact-estimate.ts); a
 * provider that cannot count (openai) is a usage error, never a silent fallback.
 */

/**
 * The provider and model to price, with the fingerprint context the real provider would use. The
 * provider is built when it can be (it opens no connection); without its key, the context comes
 * from the provider's constants, which is the same for the default settings. With no provider
 * configured, it prices Anthropic's default model.
 * @throws UsageError for `none` (decisions off) or an OpenAI-compatible provider without a model.
 */
export function estimateTargetFor(cfg: Config, logger: Logger): EstimateTarget {
  const name = cfg.provider ?? 'anthropic';
  if (name === 'none') throw new UsageError('provider is none: decisions are off, nothing would be asked');

  try {
    const p = createProvider({ ...cfg, provider: name }, logger);
    if (p) {
      void p.close?.();
      return estimateTarget(p.name, p.model, { model: p.model, promptVersion: p.promptVersion, effort: p.effort });
    }
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
  }
  const model =
    cfg.model ??
    (name === 'anthropic' ? DEFAULT_ANTHROPIC_MODEL : name === 'fake' ? new FakeProvider().model : undefined);
  if (!model) throw new UsageError(`--provider ${name} needs --model to estimate`);
  return estimateTarget(name, model);
}

/**
 * What `verdict estimate` prices: `estimateTargetFor`, except that the fake provider with a
 * `--model` other than its own names a real model, and the fake's $0 would say nothing about it:
 * that model is priced as Anthropic bills it (`anthropic:MODEL`, the one price table), or the
 * estimate is refused with the reason. (A backfill or a demo run on the fake stays free: it really
 * calls no model.)
 * @throws UsageError as estimateTargetFor, and for the fake provider with a `--model` no price is known for.
 */
function estimateCommandTarget(cfg: Config, logger: Logger): EstimateTarget {
  if (cfg.provider === 'fake' && cfg.model !== undefined && cfg.model !== new FakeProvider().model) {
    if (pricingFor('anthropic', cfg.model).kind === 'priced') return estimateTarget('anthropic', cfg.model);
    throw new UsageError(
      `--model ${cfg.model} with --provider fake: the fake provider calls no model and would price it at $0, and src/providers/pricing.ts has no price for ${cfg.model}; name the model's provider with --provider (anthropic or openai) to estimate it`,
    );
  }
  return estimateTargetFor(cfg, logger);
}

/**
 * The provider that counts for `--exact`, built for real (it needs its key), and the target it
 * prices. @throws UsageError for `none` or a provider without `countTokens` (ExactCountUnavailable's
 * message); ConfigError without the provider's key or URL.
 */
export function exactCounterFor(cfg: Config, logger: Logger): { target: EstimateTarget; counter: Provider } {
  const name = cfg.provider ?? 'anthropic';
  if (name === 'none') throw new UsageError('provider is none: decisions are off, nothing would be asked');
  const p = createProvider({ ...cfg, provider: name }, logger);
  if (!p) throw new UsageError('provider is none: decisions are off, nothing would be asked');
  if (!p.countTokens) {
    void p.close?.();
    throw new UsageError(new ExactCountUnavailable(p.name).message);
  }
  return {
    target: estimateTarget(p.name, p.model, { model: p.model, promptVersion: p.promptVersion, effort: p.effort }),
    counter: p,
  };
}

/**
 * What the unanswered work of a backfill costs through Message Batches (DESIGN §7.3), when a
 * worker with this configuration would batch it (`--batch auto` and a paid provider with a batch
 * API); null otherwise, or when the provider cannot be built here (no key).
 */
export function batchedBackfillCost(
  cfg: Config,
  logger: Logger,
  target: EstimateTarget,
  e: { unanswered: WorkEstimate } | undefined,
): number | null {
  if (!e || target.pricing.kind !== 'priced') return null;
  let provider;
  try {
    provider = createProvider(cfg, logger);
  } catch (err) {
    if (err instanceof ConfigError) return null;
    throw err;
  }
  void provider?.close?.();
  if (!provider || !batchingActive(provider, cfg.batch)) return null;
  return batchCostOf(target.pricing, e.unanswered);
}

/**
 * Estimates each set, or every registered set; with `exact`, corrected by `exact.counter`'s count
 * (ExactSetEstimate). With `tally` (and without `exact`), every set's calls are also fed to it, so
 * the total can be counted co-asked (`CoAskTally`). @throws UsageError for an unknown set.
 */
export async function estimateSets(
  store: Pick<
    Store,
    | 'answeredKeys'
    | 'getWorkspace'
    | 'listCollections'
    | 'listDecisions'
    | 'listItems'
    | 'listWorkspaces'
    | 'loadItemForEvaluation'
    | 'now'
  >,
  registry: Registry,
  target: EstimateTarget,
  o: {
    setName?: string;
    workspaceId?: string;
    afterId?: string | null;
    exact?: { counter: Provider };
    tally?: CoAskTally;
  },
): Promise<SetEstimate[]> {
  let sets: readonly QuestionSet[];
  if (o.setName) {
    const s = registry.get(o.setName);
    if (!s)
      throw new UsageError(
        `--set: no question set "${o.setName}" (known: ${registry
          .all()
          .map((x) => x.name)
          .join(', ')})`,
      );
    sets = [s];
  } else sets = registry.all();
  const out: SetEstimate[] = [];
  const scope = { workspaceId: o.workspaceId, afterId: o.afterId };
  for (const s of sets) {
    if (o.exact) out.push(await exactEstimateSet(store, s, target, o.exact.counter, scope));
    else
      out.push(
        await estimateSet(store, s, target, o.tally ? { ...scope, onItemCalls: (c) => o.tally!.add(s, c) } : scope),
      );
  }
  return out;
}

/** The estimates as text for humans. */
export function formatEstimates(target: EstimateTarget, estimates: SetEstimate[], coAsked?: CoAskedEstimate): string {
  const exact = estimates.some(isExactEstimate)
    ? 'input tokens corrected by an exact count, output tokens estimated; '
    : '';
  const lines = [
    `estimate for ${target.provider}:${target.fingerprint.model} (${target.pricing.kind === 'priced' ? `prices from Verdict's price table, checked ${PRICES_CHECKED}` : target.pricing.reason}); ${exact}tokens are estimates, not a bill`,
  ];
  for (const e of estimates) {
    lines.push(
      `${e.set}: ${e.eligibleItems.toLocaleString('en-US')} eligible items${e.truncatedStates ? ` (${e.truncatedStates} states clipped)` : ''}`,
    );
    if (isExactEstimate(e)) lines.push(`  ${formatSample(e.sample)}`);
    lines.push(`  ${formatWork('unanswered now (what a backfill or reask sends)', e.unanswered)}`);
    lines.push(`  ${formatWork('re-ask every item (a reworded question or another model)', e.all)}`);
  }
  if (estimates.length > 1 && coAsked) {
    // The worker asks an item's sets reading byte-identical state in one call (DESIGN §7.2).
    lines.push(`total, with sets reading the same state asked in one call as the worker asks them:`);
    lines.push(`  ${formatWork('unanswered now', coAsked.unanswered)}`);
    lines.push(`  ${formatWork('re-ask every item', coAsked.all)}`);
  } else if (estimates.length > 1) {
    lines.push(`total:`);
    lines.push(`  ${formatWork('unanswered now', sumWork(estimates.map((e) => e.unanswered)), 'jobs')}`);
    lines.push(`  ${formatWork('re-ask every item', sumWork(estimates.map((e) => e.all)), 'jobs')}`);
  }
  return lines.join('\n');
}

/** Help of `--exact`, shared by `estimate` and `backfill`. */
export const EXACT_OPTION_HELP = `correct the input tokens by the provider's own count (anthropic: the free, rate-limited count_tokens endpoint) of every item up to ${EXACT_SAMPLE_ITEMS}, else of ${EXACT_SAMPLE_ITEMS} items spread evenly; prints the sample and how far the heuristic was off (a provider that cannot count: exit 2)`;

export function registerEstimateCommand(program: Command): void {
  program
    .command('estimate')
    .description(
      'what asking a set (or every set), or switching the model with --model, would cost before anyone does it',
    )
    .option('--set <name>', 'one question set (default: every set)')
    .option('--workspace <slug>', 'one workspace (default: all)')
    .option('--exact', EXACT_OPTION_HELP)
    .option('--json', 'print JSON')
    .action(async (o: { set?: string; workspace?: string; json?: boolean; exact?: boolean }, cmd: Command) => {
      const cfg = configFrom(cmd);
      const logger = loggerFor(cfg);
      const registry = buildRegistry(cfg);
      const exact = o.exact ? exactCounterFor(cfg, logger) : undefined;
      const target = exact?.target ?? estimateCommandTarget(cfg, logger);
      const store = openStore(cfg, registry, { access: 'read' });
      try {
        const workspaceId = o.workspace ? (await resolveWorkspace(store, o.workspace)).id : undefined;
        const tally = exact ? undefined : new CoAskTally();
        const estimates = await estimateSets(store, registry, target, { setName: o.set, workspaceId, exact, tally });
        const total = tally?.total(target.pricing);
        process.stdout.write(
          o.json
            ? `${JSON.stringify({ provider: target.provider, model: target.fingerprint.model, pricing: target.pricing, estimates, ...(total ? { total } : {}) }, null, 2)}\n`
            : `${formatEstimates(target, estimates, total)}\n`,
        );
        // The unanswered work is what a backfill or reask owes, at backfill priority: a worker with
        // this configuration sends it as Message Batches (DESIGN §7.3).
        const batched = o.json
          ? null
          : batchedBackfillCost(cfg, logger, target, total && estimates.length > 1 ? total : estimates[0]);
        if (batched !== null)
          process.stdout.write(
            `  with --batch ${cfg.batch} (this worker's setting) a worker sends the unanswered work as Message Batches at the batch price: ${formatUsd(batched)}, results within 24 h\n`,
          );
      } finally {
        await store.close();
        await exact?.counter.close?.();
      }
    });
}
