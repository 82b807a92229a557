import { z } from 'zod';
import { ConfigError } from '../config.js';
import { InvalidConfigFile, parseConfigDocument, readConfigText } from '../decision/config-file.js';
import type { Registry } from '../decision/registry.js';
import { VerdictError } from '../errors.js';
import { DEFAULT_LABEL_RULE, isManagedLabel, type LabelRule } from '../integrations/github/managed-labels.js';

export { isManagedLabel, type LabelRule };

/**
 * The actions section of the question-set config file (DESIGN §17): which question keys act in
 * GitHub, with which labels, behind which gate. Validated against the registry at start, like the
 * sets themselves; a config that fails is refused with the file, the path of the member and the rule.
 *
 * ```yaml
 * actions:
 *   labels: { prefix: "verdict:", allow: [] }   # the only labels Verdict may ever write
 *   identity: verdict-bot                        # Verdict's own GitHub login (else learnt from the token)
 *   gate: { minPrecision: 0.9, minLabels: 30 }   # a key acts on its own only past this
 *   comment: "Verdict ({set}/{key}): {decision}. {link}"   # the template of the optional comment
 *   link: https://verdict.example.com/items/{ref}          # what {link} becomes
 *   sets:
 *     attention:
 *       mode: apply                              # off | propose | apply (default propose)
 *       keys:
 *         blocked: { label: "verdict:blocked", comment: true }
 *     effort:
 *       keys:
 *         effort: { labels: { trivial: "verdict:effort-xs", epic: "verdict:effort-xl" } }
 * ```
 */

/** Off: nothing is planned. Propose: every change is a proposal. Apply: changes past the gate are written. */
export type ActionMode = 'off' | 'propose' | 'apply';
const ACTION_MODES: readonly ActionMode[] = ['off', 'propose', 'apply'];

/** The stricter of two modes (off < propose < apply): a worker's `--actions` caps every set's mode. */
export function stricterMode(a: ActionMode, b: ActionMode): ActionMode {
  return ACTION_MODES[Math.min(ACTION_MODES.indexOf(a), ACTION_MODES.indexOf(b))];
}

/** The calibration gate (DESIGN §17): measured precision at least `minPrecision` over at least `minLabels` labelled items. */
export interface GateRule {
  /** In [0, 1]. @defaultValue 0.9 */
  minPrecision: number;
  /** A whole number ≥ 1. @defaultValue 30 */
  minLabels: number;
}

/** DESIGN §17's defaults: 0.9 and 30 (the issue's; 30 labels put a 0.9 precision's 95 % interval at about ±0.11). */
const DEFAULT_GATE: Readonly<GateRule> = Object.freeze({ minPrecision: 0.9, minLabels: 30 });

/** One key that acts: its labels, its gate and whether it comments. */
export interface KeyAction {
  set: string;
  key: string;
  kind: 'noul' | 'choice' | 'score';
  /**
   * noul: `{ true: label }`; choice: option → label; score: level name → label. Options or levels
   * not listed put no label of the group on the issue.
   */
  labels: Readonly<Record<string, string>>;
  /** Every label of the key's group, sorted: at most one of them is on an issue at a time. */
  group: readonly string[];
  gate: GateRule;
  /** Post the one-line comment when the key's label is first added to an issue. @defaultValue false */
  comment: boolean;
}

/** The validated actions config. */
export interface ActionsConfig {
  labels: LabelRule;
  /** Verdict's own GitHub login, when configured; otherwise learnt from the token (GET /user) and kept in `verdict_meta`. */
  identity: string | null;
  /** Set name → its mode (sets not listed: no actions). */
  modes: Readonly<Record<string, ActionMode>>;
  /** Every key that acts, sorted by (set, key). */
  keys: readonly KeyAction[];
  /** The comment template: `{set}`, `{key}`, `{decision}`, `{link}`, `{ref}`. */
  commentTemplate: string;
  /** The item link `{link}` stands for, with `{ref}` and `{workspace}`; null leaves `{link}` empty. */
  link: string | null;
}

/** The template of the one-line comment. Ids and the decision only: never the item's text. */
const DEFAULT_COMMENT_TEMPLATE = 'Verdict ({set}/{key}): {decision}. {link}';

/** No actions: the config of a file without an `actions` section. */
const NO_ACTIONS: ActionsConfig = Object.freeze({
  labels: DEFAULT_LABEL_RULE,
  identity: null,
  modes: Object.freeze({}),
  keys: Object.freeze([]) as readonly KeyAction[],
  commentTemplate: DEFAULT_COMMENT_TEMPLATE,
  link: null,
});

/** Thrown for an actions section that cannot be used. The message names the member and the rule. */
export class InvalidActionsConfig extends VerdictError {
  readonly code = 'invalid_actions_config';
}

/** GitHub's label-name limit (50 characters, its REST API's validation). */
const GITHUB_LABEL_MAX = 50;

const labelName = z
  .string()
  .refine((s) => s.trim() !== '' && s === s.trim(), 'a label name is non-blank, without leading or trailing spaces')
  .refine(
    (s) => [...s].length <= GITHUB_LABEL_MAX,
    `a label name is at most ${GITHUB_LABEL_MAX} characters (GitHub's limit)`,
  )
  .refine((s) => !s.includes(','), 'a label name has no comma (GitHub splits on it)');

const gateSchema = z
  .object({
    minPrecision: z.number().min(0).max(1).optional(),
    minLabels: z.number().int().min(1).max(1_000_000).optional(),
  })
  .strict();

const keySchema = z
  .object({
    label: labelName.optional(),
    labels: z.record(z.string(), labelName).optional(),
    comment: z.boolean().optional(),
    gate: gateSchema.optional(),
  })
  .strict();

const setSchema = z
  .object({ mode: z.enum(['off', 'propose', 'apply']).optional(), keys: z.record(z.string(), keySchema) })
  .strict();

/** zod schema of the `actions` section. */
const actionsSectionSchema = z
  .object({
    labels: z
      .object({ prefix: z.string().optional(), allow: z.array(labelName).optional() })
      .strict()
      .optional(),
    identity: z
      .string()
      .regex(/^[A-Za-z0-9-]+(\[bot\])?$/, 'a GitHub login (letters, digits, hyphens; an App ends in [bot])')
      .optional(),
    gate: gateSchema.optional(),
    comment: z.string().min(1).max(500).optional(),
    link: z.url({ protocol: /^https?$/ }).optional(),
    sets: z.record(z.string(), setSchema),
  })
  .strict();

function describe(err: z.ZodError): string {
  const i = err.issues[0];
  return `${i.path.length ? `${i.path.join('.')}: ` : ''}${i.message}`;
}

/**
 * Parses the `actions` section (see the file comment) against the registry: every set and key must
 * exist and be asked at item level (per-comment keys have no issue label of their own); a noul names
 * `label`, a choice or score `labels` keyed by its options or levels; every label passes the label
 * rule; no label belongs to two keys (a person's change to it must name one key).
 * @param section the parsed YAML/JSON value, or undefined for a file without one.
 * @throws InvalidActionsConfig naming `actions.<path>` and the rule.
 */
export function parseActionsConfig(section: unknown, registry: Registry): ActionsConfig {
  if (section === undefined || section === null) return NO_ACTIONS;
  const parsed = actionsSectionSchema.safeParse(section);
  if (!parsed.success) throw new InvalidActionsConfig(`actions.${describe(parsed.error)}`);
  const a = parsed.data;
  const labels: LabelRule = { prefix: a.labels?.prefix ?? DEFAULT_LABEL_RULE.prefix, allow: a.labels?.allow ?? [] };
  if (labels.prefix === '' && labels.allow.length === 0)
    throw new InvalidActionsConfig(
      'actions.labels: give a prefix or an allowlist: Verdict writes only labels one of them names',
    );
  const baseGate: GateRule = {
    minPrecision: a.gate?.minPrecision ?? DEFAULT_GATE.minPrecision,
    minLabels: a.gate?.minLabels ?? DEFAULT_GATE.minLabels,
  };
  const modes: Record<string, ActionMode> = {};
  const keys: KeyAction[] = [];
  const owner = new Map<string, string>();
  for (const [setName, s] of Object.entries(a.sets).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))) {
    const at = `actions.sets.${setName}`;
    const set = registry.get(setName);
    if (!set) throw new InvalidActionsConfig(`${at}: no question set "${setName}" is registered`);
    if (set.perComment)
      throw new InvalidActionsConfig(
        `${at}: the set asks per comment; labels act on whole issues, so only item-level sets take actions`,
      );
    if (!set.questions)
      throw new InvalidActionsConfig(
        `${at}: the set resolves its questions per workspace; actions need fixed questions`,
      );
    modes[setName] = s.mode ?? 'propose';
    for (const [key, k] of Object.entries(s.keys).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))) {
      const kat = `${at}.keys.${key}`;
      const q = set.questions[key];
      if (!q) throw new InvalidActionsConfig(`${kat}: set "${setName}" asks no key "${key}"`);
      let map: Record<string, string>;
      if (q.kind === 'noul') {
        if (k.label === undefined || k.labels !== undefined)
          throw new InvalidActionsConfig(`${kat}: a noul key takes one label (label: NAME), added while it surfaces`);
        map = { true: k.label };
      } else {
        if (k.labels === undefined || k.label !== undefined)
          throw new InvalidActionsConfig(
            `${kat}: a ${q.kind} key takes labels: { ${q.kind === 'choice' ? 'option' : 'level'}: NAME, ... }`,
          );
        const names = q.kind === 'choice' ? Object.keys(q.options) : [...q.levels];
        const unknown = Object.keys(k.labels).filter((n) => !names.includes(n));
        if (unknown.length)
          throw new InvalidActionsConfig(
            `${kat}.labels: ${unknown.join(', ')} ${unknown.length === 1 ? 'is' : 'are'} not ${q.kind === 'choice' ? 'an option' : 'a level'} of the key (${names.join(', ')})`,
          );
        if (Object.keys(k.labels).length === 0)
          throw new InvalidActionsConfig(`${kat}.labels: name at least one label`);
        map = { ...k.labels };
      }
      const group = [...new Set(Object.values(map))].sort();
      if (group.length !== Object.values(map).length)
        throw new InvalidActionsConfig(
          `${kat}: a label is named twice; one label per ${q.kind === 'choice' ? 'option' : 'level'}`,
        );
      for (const label of group) {
        if (!isManagedLabel(labels, label)) {
          throw new InvalidActionsConfig(
            `${kat}: label "${label}" is outside actions.labels (prefix "${labels.prefix}"${labels.allow.length ? `, allow ${labels.allow.join(', ')}` : ''}); Verdict writes no other label`,
          );
        }
        const lower = label.toLowerCase();
        const other = owner.get(lower);
        if (other)
          throw new InvalidActionsConfig(
            `${kat}: label "${label}" already belongs to ${other}; a label belongs to one key`,
          );
        owner.set(lower, `${setName}/${key}`);
      }
      keys.push({
        set: setName,
        key,
        kind: q.kind,
        labels: map,
        group,
        gate: {
          minPrecision: k.gate?.minPrecision ?? baseGate.minPrecision,
          minLabels: k.gate?.minLabels ?? baseGate.minLabels,
        },
        comment: k.comment ?? false,
      });
    }
  }
  return {
    labels,
    identity: a.identity ?? null,
    modes,
    keys,
    commentTemplate: a.comment ?? DEFAULT_COMMENT_TEMPLATE,
    link: a.link ?? null,
  };
}

/** The action of (set, key), or undefined. */
export function keyAction(cfg: ActionsConfig, set: string, key: string): KeyAction | undefined {
  return cfg.keys.find((k) => k.set === set && k.key === key);
}

/** The action whose group holds `label` (compared case-insensitively, as GitHub does), or undefined. */
export function actionOfLabel(cfg: ActionsConfig, label: string): KeyAction | undefined {
  const n = label.toLowerCase();
  return cfg.keys.find((k) => k.group.some((g) => g.toLowerCase() === n));
}

/**
 * The actions config of a question-set config file (`--config` / `VERDICT_CONFIG`), or NO_ACTIONS
 * without a file or an `actions` section. Every process that writes GitHub items loads the same
 * file, so each leaves the same labels out of the items' state (DESIGN §17).
 * @throws ConfigError naming the file, the member and the rule (exit 2 in the CLI).
 */
export function loadActionsConfig(file: string | undefined, registry: Registry): ActionsConfig {
  if (!file) return NO_ACTIONS;
  try {
    return parseActionsConfig(parseConfigDocument(readConfigText(file), file).actions, registry);
  } catch (err) {
    if (err instanceof InvalidActionsConfig || err instanceof InvalidConfigFile)
      throw new ConfigError(err instanceof InvalidConfigFile ? err.message : `config file ${file}: ${err.message}`);
    throw err;
  }
}
