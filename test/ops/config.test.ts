import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';
import { ConfigError, DEFAULTS, loadConfig, OPTIONS } from '../../src/config.js';
import { ROOT } from '../harness/cli-process.js';

/** DESIGN §12: every option is a flag and an environment variable, validated at start, listed in `.env.example`. */

describe('configuration', () => {
  const example = readFileSync(join(ROOT, '.env.example'), 'utf8').split('\n');
  const flags = buildProgram().options.map((o) => o.long);

  it.each(Object.entries(OPTIONS))('%s is a flag, an env var, and commented in .env.example', (_key, spec) => {
    expect(flags).toContain(spec.flag);
    const at = example.findIndex((l) => l.startsWith(`${spec.env}=`));
    expect(at, `${spec.env} in .env.example`).toBeGreaterThan(0);
    // The line above it, or the block above it, is a comment.
    expect(example[at - 1].startsWith('#') || example[at - 2]?.startsWith('#')).toBe(true);
  });

  it('rejects bad values naming the option, the value and what was expected', () => {
    expect(() => loadConfig({}, { VERDICT_METRICS_HOST: 'local host;rm' })).toThrow(ConfigError);
    expect(() => loadConfig({}, { VERDICT_METRICS_HOST: 'local host;rm' })).toThrow(
      /^VERDICT_METRICS_HOST: got "local host;rm", expected a host name or IP address/,
    );
    expect(() => loadConfig({ backfillChunk: '0' }, {})).toThrow(
      /^--backfill-chunk: got "0", expected an integer from 1 to 100000/,
    );
    expect(() => loadConfig({ metricsPort: '70000' }, {})).toThrow(/^--metrics-port: got "70000"/);
  });

  it('defaults: metrics on 127.0.0.1 when a port is given, backfill chunk from the pass limit', () => {
    const cfg = loadConfig({ metricsPort: '9464' }, {});
    expect(cfg).toMatchObject({
      metricsPort: 9464,
      metricsHost: DEFAULTS.metricsHost,
      backfillChunk: undefined,
      passLimit: 20,
    });
    expect(loadConfig({}, { VERDICT_BACKFILL_CHUNK: '50' }).backfillChunk).toBe(50);
  });
});
