import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadActionsConfig, type ActionMode, type ActionsConfig } from '../../src/actions/config.js';
import { ManualClock } from '../../src/clock.js';
import {
  actionsApi,
  webhookActionOptions,
  type ActionsApiDeps,
  type VerdictActions,
} from '../../src/compose/actions-api.js';
import { buildRegistry } from '../../src/compose/open.js';
import { runWorker, type RunSummary } from '../../src/compose/run-worker.js';
import { DEFAULTS } from '../../src/config.js';
import type { Registry } from '../../src/decision/registry.js';
import { applyGitHubWebhook, type GitHubDeliveryResult } from '../../src/integrations/github/webhooks.js';
import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { startFakeGitHub, type FakeGitHub } from './fake-github-server.js';
import { tempDir } from './store-fixture.js';

/**
 * Actions in GitHub end to end (DESIGN §17): a real SQLite file on a manual clock, the fake provider
 * answering one noul from the issue's text, the real `@octokit/rest` against the local fake GitHub,
 * webhook deliveries applied through the library's own options, and until-idle drains of the real
 * worker with its actions.
 */

export const REPO = 'acme/widgets';
export const TOKEN = 'ghp_test_token';
export const LABEL = 'verdict:blocked';

/** The config: one set, `triage`, asking `blocked` of every issue at once (no quiet period, no debounce). */
export function actionsConfigText(mode: ActionMode): string {
  return `sets:
  - name: triage
    threshold: 0.7
    quietPeriodMs: 0
    reaskDebounceMs: 0
    questions:
      blocked: { kind: noul, instructions: "The issue says its work is blocked by something outside it." }
actions:
  link: https://verdict.example.com/items/{ref}
  sets:
    triage:
      mode: ${mode}
      keys:
        blocked: { label: "${LABEL}", comment: true }
`;
}

/** p(blocked) of a state: high when the issue's text says BLOCKED. */
export const blockedProvider = (clock: ManualClock) =>
  new FakeProvider({
    now: () => clock.now(),
    handler: (req) =>
      Object.fromEntries(req.keys.map((k) => [k, { probability: req.state.includes('BLOCKED') ? 0.95 : 0.05 }])),
  });

export interface ActionsFixture {
  store: SqliteStore;
  clock: ManualClock;
  registry: Registry;
  config: ActionsConfig;
  /** The config file (a reload test rewrites it). */
  configFile: string;
  github: FakeGitHub;
  actions: VerdictActions;
  deps: ActionsApiDeps;
  /** Applies one webhook delivery as `/hooks/github` would, with the actions' options. */
  deliver(event: string, payload: Record<string, unknown>): Promise<GitHubDeliveryResult>;
  /** A new issue on the fake GitHub and its `issues.opened` delivery. */
  open(number: number, body: string): Promise<GitHubDeliveryResult>;
  /** An until-idle drain of the real worker with its actions; `token: false` plans without writing. */
  drain(o?: { token?: boolean; mode?: ActionMode }): Promise<RunSummary>;
  cleanup(): Promise<void>;
}

/**
 * @param o.configText the config file's text. @defaultValue `actionsConfigText(mode)`
 * @param o.provider `blocked` (p from the text, `blockedProvider`) or `hashed` (the fake's deterministic answers). @defaultValue 'blocked'
 */
export async function makeActionsFixture(
  o: { mode?: ActionMode; configText?: string; provider?: 'blocked' | 'hashed' } = {},
): Promise<ActionsFixture> {
  const t = tempDir('verdict-actions-');
  const configFile = join(t.dir, 'verdict.config.yaml');
  writeFileSync(configFile, o.configText ?? actionsConfigText(o.mode ?? 'apply'));
  const clock = new ManualClock(Date.UTC(2026, 0, 5));
  const registry = buildRegistry(configFile, []);
  const config = loadActionsConfig(configFile, registry);
  const store = new SqliteStore({ url: join(t.dir, 'verdict.db'), registry, clock });
  const github = await startFakeGitHub({ repo: REPO, token: TOKEN });
  const provider = o.provider === 'hashed' ? new FakeProvider({ now: () => clock.now() }) : blockedProvider(clock);
  const deps: ActionsApiDeps = { store, registry, config, readsAgainst: provider, logger: silentLogger, cap: 'apply' };
  const hookOptions = webhookActionOptions(deps);
  const iso = () => new Date(clock.now()).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const fx: ActionsFixture = {
    store,
    clock,
    registry,
    config,
    configFile,
    github,
    actions: actionsApi(deps),
    deps,
    deliver: (event, payload) =>
      applyGitHubWebhook(
        store,
        { event, deliveryId: randomUUID(), payload: { repository: { full_name: REPO }, ...payload } },
        hookOptions,
      ),
    async open(number, body) {
      const issue = {
        number,
        title: `Issue ${number}`,
        body,
        state: 'open',
        state_reason: null,
        labels: [],
        user: { login: 'alice' },
        milestone: null,
        created_at: iso(),
        updated_at: iso(),
        closed_at: null,
      };
      github.issues.push(issue);
      return fx.deliver('issues', {
        action: 'opened',
        issue: structuredClone(issue),
        sender: { login: 'alice', type: 'User' },
      });
    },
    drain: (d = {}) =>
      runWorker({
        cfg: {
          ...DEFAULTS,
          metricsPort: undefined,
          requestsPerMinute: undefined,
          inputTokensPerMinute: undefined,
          dailyTokenCap: undefined,
          concurrency: 1,
          actions: d.mode ?? 'apply',
          githubToken: d.token === false ? undefined : TOKEN,
          githubApiUrl: github.url,
        },
        store,
        registry,
        provider,
        logger: silentLogger,
        untilIdle: true,
        workerId: 'test-worker',
        actionsConfig: config,
      }),
    async cleanup() {
      await github.close();
      await store.close();
      t.cleanup();
    },
  };
  return fx;
}

/** The fake GitHub's copy of an issue. */
export function ghIssue(
  fx: ActionsFixture,
  number: number,
): Record<string, unknown> & { labels: Array<{ name: string }> } {
  return fx.github.issues.find((i) => i.number === number) as Record<string, unknown> & {
    labels: Array<{ name: string }>;
  };
}

/** The label names on the fake GitHub's issue. */
export function ghLabels(fx: ActionsFixture, number: number): string[] {
  return ghIssue(fx, number).labels.map((l) => l.name);
}
