import { choice, noul, score, type Question } from '../../src/decision/questions.js';
import { questionAliases } from '../../src/providers/prompt.js';
import type { ProviderLogger, RetryRuntime } from '../../src/providers/retry.js';

/** Shared fixtures of the provider tests. */

/** A state with the characters that break naive handling: <, &, an emoji, a combining mark, U+2028 (escaped). */
export const STATE =
  '{"title":"Fix <login> & caf\u0065\u0301 \u{1F389}","collection":"bugs","fields":{"estimate":3.0},"body":"line one\\u2028line two","recent_trail":[]}';

/** One question of each kind. */
export function questions(): Map<string, Question> {
  return new Map<string, Question>([
    [
      'blocked',
      noul('Is the item blocked by another item?', {
        trueDesc: 'It waits on other work',
        falseDesc: 'Nothing blocks it',
      }),
    ],
    [
      'area',
      choice('Which area does the item touch?', { frontend: 'UI code', backend: 'Server code', docs: 'Documentation' }),
    ],
    ['effort', score('How much effort is the item?', ['small', 'medium', 'large'])],
  ]);
}

/** Valid raw answers to `questions()`. */
export function goodAnswers(): Record<string, unknown> {
  return {
    blocked: { probability: 0.8 },
    area: { probabilities: { frontend: 0.1, backend: 0.7, docs: 0.2 } },
    effort: { probabilities: { '0': 0.2, '1': 0.3, '2': 0.5 } },
  };
}

/**
 * Raw answers keyed by question key, renamed to the schema's property aliases (`q1`…`qN` in key
 * order, DESIGN §9.2) as a model would send them; members that name no question pass unchanged.
 */
export function aliased(
  raw: Record<string, unknown>,
  qs: ReadonlyMap<string, Question> = questions(),
): Record<string, unknown> {
  const aliasOf = new Map(questionAliases(qs).map(([alias, key]) => [key, alias]));
  return Object.fromEntries(Object.entries(raw).map(([k, v]) => [aliasOf.get(k) ?? k, v]));
}

/** The question keys a system prompt renders, in order: the `key` member of each fenced definition. */
export function promptKeys(system: string): string[] {
  const lines = system.split('\n');
  return lines.flatMap((l, i) => (lines[i - 1] === '```json' ? [(JSON.parse(l) as { key: string }).key] : []));
}

/** A logger that keeps every line as JSON text. */
export function captureLogger(): { lines: string[]; logger: ProviderLogger } {
  const lines: string[] = [];
  const at = (level: string) => (obj: object, msg?: string) => {
    lines.push(JSON.stringify({ level, ...obj, msg }));
  };
  return { lines, logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') } };
}

/**
 * A runtime whose sleep records the wait and returns at once (still rejecting on abort), with
 * no jitter: tests see the exact waits and never sleep on a backoff.
 */
export function recordingRuntime(): { waits: number[]; runtime: Partial<RetryRuntime> } {
  const waits: number[] = [];
  return {
    waits,
    runtime: {
      random: () => 0,
      sleep: async (ms: number, signal: AbortSignal) => {
        signal.throwIfAborted();
        waits.push(ms);
      },
    },
  };
}

/** Options of one ask with a fresh signal and a no-op beforeSend. */
export function askOpts(
  over: { signal?: AbortSignal; beforeSend?: () => void | Promise<void>; explain?: boolean } = {},
) {
  return {
    signal: over.signal ?? new AbortController().signal,
    beforeSend: over.beforeSend ?? (() => {}),
    explain: over.explain,
  };
}

/** Collects every key of every object in a JSON value, at any depth. */
export function allKeys(value: unknown, out = new Set<string>()): Set<string> {
  if (Array.isArray(value)) value.forEach((v) => allKeys(v, out));
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      out.add(k);
      allKeys(v, out);
    }
  }
  return out;
}

/** Every object schema inside a JSON schema (the root included). */
export function objectSchemas(schema: any, out: any[] = []): any[] {
  if (schema && typeof schema === 'object') {
    if (schema.type === 'object') out.push(schema);
    for (const v of Object.values(schema.properties ?? {})) objectSchemas(v, out);
  }
  return out;
}

/** Polls `cond` every 5 ms until it holds (at most `ms`). */
export async function until(cond: () => boolean, ms = 1_000): Promise<void> {
  const end = performance.now() + ms;
  while (!cond()) {
    if (performance.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
