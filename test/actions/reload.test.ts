import { writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import type { ActionsWorker } from '../../src/actions/actions-worker.js';
import { reloadActions } from '../../src/cli/reload.js';
import { runWorker } from '../../src/compose/run-worker.js';
import { DEFAULTS } from '../../src/config.js';
import { silentLogger } from '../../src/log.js';
import {
  blockedProvider,
  actionsConfigText,
  makeActionsFixture,
  TOKEN,
  type ActionsFixture,
} from '../harness/actions-fixture.js';
import { waitFor } from '../harness/cli-process.js';
import type { Worker } from '../../src/worker/worker.js';

/**
 * A SIGHUP reload of the actions config in a long-running worker (DESIGN §17): the CLI's reload
 * calls `reloadActions` after the worker's own reload, so a set's mode changes without a restart;
 * an invalid actions section is refused and the old one stays in force.
 */

const BLOCKED = 'BLOCKED by the vendor API outage; nothing to do until they fix it.';

describe('SIGHUP reload of the actions config', () => {
  let fx: ActionsFixture | undefined;
  afterEach(async () => fx?.cleanup());

  it('a set turned off clears its proposals and proposes nothing new; turned back on, it proposes for every item; an invalid section is refused', async () => {
    fx = await makeActionsFixture({ mode: 'propose' });
    const f = fx;
    const provider = blockedProvider(f.clock);
    const cfg = {
      ...DEFAULTS,
      metricsPort: undefined,
      requestsPerMinute: undefined,
      inputTokensPerMinute: undefined,
      dailyTokenCap: undefined,
      concurrency: 1,
      tickMs: 20,
      actions: 'apply' as const,
      githubToken: TOKEN,
      githubApiUrl: f.github.url,
      configFile: f.configFile,
    };
    let worker!: Worker;
    let acting: ActionsWorker | null = null;
    const running = runWorker({
      cfg,
      store: f.store,
      registry: f.registry,
      provider,
      logger: silentLogger,
      untilIdle: false,
      workerId: 'reload-worker',
      actionsConfig: f.config,
      onStarted: (w, a) => {
        worker = w;
        acting = a;
      },
    });
    const proposed = async () => ((await f.actions.proposals({ workspace: 'github' })) ?? []).map((p) => p.ref);
    const reload = (text: string) => {
      writeFileSync(f.configFile, text);
      return reloadActions({ actions: acting, runtime: { cfg, registry: f.registry }, logger: silentLogger });
    };
    try {
      await f.open(1, BLOCKED);
      await waitFor(async () => (await proposed()).length === 1);
      expect(acting).not.toBeNull();

      expect(reload(actionsConfigText('off'))).toEqual({ status: 'applied' });
      await waitFor(async () => (await proposed()).length === 0); // #1 planned again under `off`
      await f.open(2, BLOCKED);
      await waitFor(
        async () =>
          (
            await f.store.listDecisions(
              (await f.store.getItemByRef((await f.store.getWorkspaceBySlug('github'))!.id, '#2'))!.id,
            )
          ).length > 0,
      );

      expect(reload(actionsConfigText('propose'))).toEqual({ status: 'applied' });
      await waitFor(async () => (await proposed()).length === 2);
      expect(await proposed()).toEqual(['#1', '#2']);

      const refused = reload(actionsConfigText('propose').replace('label: "verdict:blocked"', 'label: "verdict:a,b"'));
      expect(refused).toMatchObject({ status: 'refused' });
      expect((refused as { reason: string }).reason).toMatch(/actions\.sets\.triage\.keys\.blocked\.label/);
      await f.open(3, BLOCKED); // the old section (propose) is still in force
      await waitFor(async () => (await proposed()).length === 3);
      expect(f.github.writes()).toEqual([]);
    } finally {
      worker?.stop('test');
      await running;
    }
  }, 60_000);
});
