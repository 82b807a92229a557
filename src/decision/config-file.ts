import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { InvalidQuestion } from './questions.js';
import { defineQuestionSet, InvalidQuestionSet, validateQuestions, type QuestionSet } from './registry.js';
import { errCode, VerdictError } from '../errors.js';
import { DURATION_EXPECTED, parseDuration } from '../duration.js';
import { MIN_MAX_AGE_MS } from './as-of.js';

/**
 * User-defined question sets from a config file (DESIGN §6: "Sets come from code and from a user
 * config file, validated by the same rules, so a team can add a question without a build").
 *
 * The file is JSON (`.json`) or YAML (anything else; YAML also reads JSON). Its shape:
 *
 * ```yaml
 * sets:
 *   - name: docs_quality            # registry key, stored with every answer
 *     collections: [task, feature]  # optional; empty or absent covers every non-system collection
 *     eligible: [notSystem, tracksWork, notTerminal, {field: status, in: [open]}]
 *     threshold: 0.8                # optional, 0 to 1
 *     hysteresis: 0.05              # optional: a surfaced noul clears only below threshold − this
 *     maxPerCall: 8                 # optional
 *     unsurfaced: []                # optional: keys asked and stored but never surfaced
 *     withLinks: false              # optional; also noTrail, perComment, explain (booleans)
 *     quietPeriodMs: 30000          # optional; also reaskDebounceMs, maxDelayMs
 *     maxAge: 7d                    # optional: answers older than this read `expired` and are re-asked
 *                                   # (DESIGN §5.2); a duration (7d, 36h, 2w) or milliseconds; at least 1d
 *     questions:
 *       has_acceptance_criteria:
 *         kind: noul                # noul | choice (options) | score (levels)
 *         instructions: The item states how to tell that it is done.
 * ```
 *
 * An `actions:` section (labels in GitHub behind a calibration gate, DESIGN §17) may stand beside
 * `sets:`; src/actions/config.ts validates it against the registry.
 *
 * Config sets have fixed questions only: `resolve` needs code. Every rule of the registry holds
 * (names, keys, question kinds); a name already used by a built-in set or by an earlier set of
 * the file is refused.
 */

const scalar = z.union([z.string(), z.number(), z.boolean(), z.null()]);

const eligibilityRule = z.union([
  z.enum(['notSystem', 'tracksWork', 'notTerminal']),
  z.object({ field: z.string().min(1), equals: scalar }).strict(),
  z.object({ field: z.string().min(1), in: z.array(scalar).min(1) }).strict(),
]);

const ms = z.number().int().min(0);

/**
 * `maxAge` (DESIGN §5.2): a duration string (`7d`, `36h`, `2w`; see duration.ts) or a
 * whole number of milliseconds, read as milliseconds; at least one day (`MIN_MAX_AGE_MS`, the
 * registry's rule, said here in the file's own terms).
 */
const maxAge = z.union([z.number(), z.string()]).transform((v, ctx) => {
  const parsed = typeof v === 'number' ? (Number.isSafeInteger(v) && v > 0 ? v : null) : parseDuration(v);
  if (parsed === null) {
    ctx.addIssue({ code: 'custom', message: `${JSON.stringify(v)} is not a duration: expected ${DURATION_EXPECTED}` });
    return z.NEVER;
  }
  if (parsed < MIN_MAX_AGE_MS) {
    ctx.addIssue({
      code: 'custom',
      message: `${JSON.stringify(v)} is shorter than 1d, the least a maxAge can be (as_of has day precision, DESIGN §5.2)`,
    });
    return z.NEVER;
  }
  return parsed;
});

/** zod schema of one set in a config file. Questions are checked by the registry's own validator, for its messages. */
const configSetSchema = z
  .object({
    name: z.string().refine((s) => s.trim() !== '', 'must not be blank'),
    collections: z.array(z.string().min(1)).optional(),
    questions: z
      .record(z.string(), z.unknown())
      .refine((q) => Object.keys(q).length > 0, 'a set needs at least one question'),
    eligible: z.array(eligibilityRule).optional(),
    withLinks: z.boolean().optional(),
    noTrail: z.boolean().optional(),
    perComment: z.boolean().optional(),
    maxPerCall: z.number().int().min(1).max(64).optional(),
    threshold: z.number().min(0).max(1).optional(),
    hysteresis: z.number().min(0).max(1).optional(),
    unsurfaced: z.array(z.string()).optional(),
    quietPeriodMs: ms.optional(),
    reaskDebounceMs: ms.optional(),
    maxDelayMs: ms.optional(),
    explain: z.boolean().optional(),
    maxAge: maxAge.optional(),
  })
  .strict();

/**
 * zod schema of the whole file: `sets`, and `actions` (DESIGN §17; validated by
 * src/actions/config.ts against the registry, since it names sets of code and of the file alike).
 */
const configFileSchema = z.object({ sets: z.array(z.unknown()).default([]), actions: z.unknown().optional() }).strict();

/** Thrown when the config file cannot be used. The message names the file, the set (when one is at fault) and the problem. */
export class InvalidConfigFile extends VerdictError {
  readonly code = 'invalid_config_file';
  constructor(
    readonly file: string,
    readonly setName: string | null,
    readonly problem: string,
  ) {
    super(`config file ${file}${setName === null ? '' : `: set ${setName}`}: ${problem}`);
  }
}

function describeZod(err: z.ZodError): string {
  const i = err.issues[0];
  return `${i.path.length ? `${i.path.join('.')}: ` : ''}${i.message}`;
}

/**
 * Parses and validates a config file's text. `reserved` holds names already registered (the
 * built-in sets), which a config set may not reuse.
 * @throws InvalidConfigFile naming the file, the set and the problem.
 */
export function parseQuestionSetConfig(text: string, file: string, reserved: readonly string[] = []): QuestionSet[] {
  const top = parseConfigDocument(text, file);
  const seen = new Set(reserved);
  const out: QuestionSet[] = [];
  top.sets.forEach((raw, i) => {
    const rawName =
      raw && typeof raw === 'object' && typeof (raw as { name?: unknown }).name === 'string'
        ? (raw as { name: string }).name
        : null;
    const label = rawName === null ? `#${i + 1}` : JSON.stringify(rawName);
    const parsed = configSetSchema.safeParse(raw);
    if (!parsed.success) throw new InvalidConfigFile(file, label, describeZod(parsed.error));
    const s = parsed.data;
    if (seen.has(s.name)) {
      throw new InvalidConfigFile(
        file,
        label,
        reserved.includes(s.name)
          ? 'the name is already used by a built-in set'
          : 'the name is used twice in this file',
      );
    }
    seen.add(s.name);
    try {
      const { maxAge: maxAgeMs, ...settings } = s;
      out.push(defineQuestionSet({ ...settings, maxAgeMs, questions: validateQuestions(s.questions), source: file }));
    } catch (err) {
      if (err instanceof InvalidQuestion || err instanceof InvalidQuestionSet)
        throw new InvalidConfigFile(file, label, err.message);
      throw err;
    }
  });
  return out;
}

/**
 * A JSON or YAML parser's error as one clause: its first line, without the colon that introduces
 * the yaml package's code frame on the lines after it (`... at line 2, column 1:`).
 */
export function parserProblem(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).split('\n')[0].trim().replace(/:$/, '');
}

/**
 * The file's top level, parsed and checked (`sets`, `actions`); members are validated by their readers.
 * @throws InvalidConfigFile when the text is not JSON/YAML or the top level has another shape.
 */
export function parseConfigDocument(text: string, file: string): { sets: unknown[]; actions?: unknown } {
  let doc: unknown;
  try {
    doc = extname(file).toLowerCase() === '.json' ? JSON.parse(text) : parseYaml(text, { uniqueKeys: true });
  } catch (err) {
    // The parser's position is useful and quotes no more than the file's own text.
    throw new InvalidConfigFile(
      file,
      null,
      `not valid ${extname(file).toLowerCase() === '.json' ? 'JSON' : 'YAML'}: ${parserProblem(err)}`,
    );
  }
  const top = configFileSchema.safeParse(doc ?? {});
  if (!top.success) throw new InvalidConfigFile(file, null, describeZod(top.error));
  return top.data;
}

/**
 * Reads a config file's text.
 * @throws InvalidConfigFile when it cannot be read.
 */
export function readConfigText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new InvalidConfigFile(file, null, `cannot be read (${errCode(err)})`);
  }
}

/**
 * Reads and validates a config file (see the file comment for its shape).
 * @throws InvalidConfigFile when the file cannot be read or fails validation.
 */
export function loadQuestionSetConfig(file: string, reserved: readonly string[] = []): QuestionSet[] {
  return parseQuestionSetConfig(readConfigText(file), file, reserved);
}
