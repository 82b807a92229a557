import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../src/cli/program.js';
import { beadsCommentSchema, beadsDependencySchema, beadsRowSchema } from '../src/importers/beads-format.js';

/**
 * The user-facing docs stay true to the CLI and the tree: every `verdict <command>` that
 * docs/guide.md or README.md shows is a command of the real program (`buildProgram`, the same
 * program `dist/cli/main.js` runs), with its subcommand and every `--flag` it passes known to that
 * command or to the global options; every relative link of README.md and docs/guide.md names a file
 * that exists, and a `#anchor` on a Markdown link names a heading of its target; the guide's beads
 * import tables list exactly the fields of the importer's zod schemas (DESIGN §15), each as
 * required or optional as the schema has it.
 */

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DOCS = ['README.md', 'docs/guide.md'] as const;

// ------------------------------------------------------------------ Markdown helpers

/** The code of a Markdown text: fenced blocks' lines and inline code spans, one string each. */
function codeOf(md: string): string[] {
  const out: string[] = [];
  const prose: string[] = [];
  let fenced = false;
  for (const line of md.split('\n')) {
    if (/^\s*```/.test(line)) {
      fenced = !fenced;
      continue;
    }
    if (fenced) out.push(line);
    else prose.push(line);
  }
  // An inline span may wrap onto the next line.
  for (const m of prose.join('\n').matchAll(/`([^`]+)`/g)) out.push(m[1].replace(/\s+/g, ' '));
  return out;
}

/** One CLI invocation found in the docs: the words after `verdict` up to a shell operator or a comment. */
interface Invocation {
  text: string;
  words: string[];
}

/**
 * Finds the invocations of the CLI in code: `npx verdict …`, `npm run [-s] verdict -- …`,
 * `node dist/cli/main.js …`, and a bare `verdict …`. Words stop at a shell operator, a comment,
 * or a placeholder (`…`).
 */
function invocationsIn(md: string): Invocation[] {
  const out: Invocation[] = [];
  const start =
    /(?:^|[\s`($])(?:npx verdict|npm run(?: -s)? verdict --|node dist\/cli\/main\.js|verdict)[ \t]+([^\n]*)/g;
  for (const code of codeOf(md)) {
    for (const m of code.matchAll(start)) {
      const words: string[] = [];
      for (const w of m[1].split('`')[0].trim().split(/\s+/)) {
        if (w === '' || /^(?:&&|\|\|?|;|>|2>|<|#)/.test(w) || w.startsWith('…') || w === '...') break;
        words.push(w);
      }
      if (words.length > 0 && /^-{0,2}[a-z]/.test(words[0])) out.push({ text: m[0].trim(), words });
    }
  }
  return out;
}

/** GitHub's anchor of a heading: lower case, punctuation removed, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors of a Markdown text's headings (outside fenced blocks). */
function anchorsOf(md: string): Set<string> {
  const out = new Set<string>();
  let fenced = false;
  for (const line of md.split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    else if (!fenced) {
      const h = /^#{1,6}\s+(.*)$/.exec(line);
      if (h) out.add(slug(h[1]));
    }
  }
  return out;
}

/** The Markdown link targets of a text, outside code. */
function linksOf(md: string): string[] {
  const prose = md.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]);
}

// ------------------------------------------------------------------ CLI helpers

function optionNames(cmd: Command): string[] {
  return cmd.options.flatMap((o) => [o.long, o.short].filter((n): n is string => !!n));
}

/**
 * Why an invocation is not a command of the program, or null when it is: an unknown command, an
 * unknown subcommand of a command that has them, or a `--flag` neither the command nor the global
 * options know.
 */
function checkInvocation(program: Command, words: string[]): string | null {
  const globals = new Set([...optionNames(program), '--help', '-h', '--version', '-V']);
  let i = 0;
  while (i < words.length && words[i].startsWith('-')) {
    const flag = words[i].split('=')[0];
    if (!globals.has(flag)) return `unknown global option ${flag}`;
    i++;
  }
  if (i >= words.length) return null;
  const name = words[i];
  const cmd = program.commands.find((c) => c.name() === name || c.aliases().includes(name));
  if (!cmd) return name === 'help' ? null : `unknown command ${name}`;
  const known = new Set([...globals, ...optionNames(cmd)]);
  let sub: Command | undefined;
  if (cmd.commands.length > 0) {
    const next = words.slice(i + 1).find((w) => !w.startsWith('-'));
    sub = cmd.commands.find((c) => c.name() === next);
    if (next !== undefined && !sub && !/^[A-Z]/.test(next)) return `unknown subcommand ${name} ${next}`;
    for (const n of sub ? optionNames(sub) : []) known.add(n);
  }
  for (const w of words.slice(i + 1)) {
    if (!w.startsWith('--')) continue;
    const flag = w.split('=')[0];
    if (!known.has(flag)) return `unknown option ${flag} of ${name}${sub ? ` ${sub.name()}` : ''}`;
  }
  return null;
}

// ------------------------------------------------------------------ the tests

describe('the docs name only real commands', () => {
  const program = buildProgram();

  it.each(DOCS)('%s: every verdict invocation is a command of the CLI, with known options', (file) => {
    const found = invocationsIn(readFileSync(join(ROOT, file), 'utf8'));
    // The docs show many commands: an extractor that finds none would pass vacuously.
    expect(found.length).toBeGreaterThan(10);
    const wrong = found
      .map((inv) => ({ inv: inv.text, why: checkInvocation(program, inv.words) }))
      .filter((x) => x.why !== null);
    expect(wrong).toEqual([]);
  });

  it('guide names every top-level command the CLI has, but help', () => {
    const names = new Set(
      invocationsIn(readFileSync(join(ROOT, 'docs/guide.md'), 'utf8')).map((i) =>
        i.words.find((w) => !w.startsWith('-')),
      ),
    );
    const missing = program.commands.map((c) => c.name()).filter((n) => n !== 'help' && !names.has(n));
    expect(missing).toEqual([]);
  });

  it('the checker tells a wrong command, subcommand and option from right ones', () => {
    expect(checkInvocation(program, ['show', 'bd-a2f5a'])).toBeNull();
    expect(checkInvocation(program, ['jobs', 'retry', '--state', 'owed'])).toBeNull();
    expect(checkInvocation(program, ['worker', '--until-idle', '--log-level', 'warn'])).toBeNull();
    expect(checkInvocation(program, ['shw', 'bd-a2f5a'])).toBe('unknown command shw');
    expect(checkInvocation(program, ['jobs', 'requeue'])).toBe('unknown subcommand jobs requeue');
    expect(checkInvocation(program, ['worker', '--until-empty'])).toBe('unknown option --until-empty of worker');
    expect(
      invocationsIn(
        'run `npx verdict flags --set attention | head` then\n```\n$ node dist/cli/main.js status\n```\n',
      ).map((i) => i.words),
    ).toEqual([['status'], ['flags', '--set', 'attention']]);
  });
});

describe('the docs link only to files that exist', () => {
  it.each(DOCS)('%s: every relative link resolves to a file, and its anchor to a heading', (file) => {
    const md = readFileSync(join(ROOT, file), 'utf8');
    const links = linksOf(md).filter((l) => !/^[a-z][a-z0-9+.-]*:/i.test(l));
    expect(links.length).toBeGreaterThan(0);
    const broken: string[] = [];
    for (const link of links) {
      const [path, anchor] = link.split('#') as [string, string | undefined];
      const target = path === '' ? join(ROOT, file) : resolve(dirname(join(ROOT, file)), decodeURIComponent(path));
      if (!existsSync(target)) {
        broken.push(`${link}: no such file`);
        continue;
      }
      if (
        anchor !== undefined &&
        target.endsWith('.md') &&
        statSync(target).isFile() &&
        !anchorsOf(readFileSync(target, 'utf8')).has(anchor)
      ) {
        broken.push(`${link}: no heading #${anchor}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('slugs headings as GitHub does', () => {
    expect(slug('Reliability: what the worker does when things go wrong')).toBe(
      'reliability-what-the-worker-does-when-things-go-wrong',
    );
    expect(slug('Embedding Verdict')).toBe('embedding-verdict');
    expect(slug('16. Amendments (newest word: where they differ from §1–15, these win)')).toBe(
      '16-amendments-newest-word-where-they-differ-from-115-these-win',
    );
  });
});

// ------------------------------------------------------------------ the import format

/**
 * The field tables of the guide's beads section, in order (the line, a dependency, a comment):
 * field name → required ("yes") or not.
 */
function importTables(md: string): Map<string, boolean>[] {
  const section = md.slice(md.indexOf('## Importing a beads tracker'), md.indexOf('### What a line can fail on'));
  const tables: Map<string, boolean>[] = [];
  let current: Map<string, boolean> | null = null;
  for (const line of section.split('\n')) {
    const row = /^\| `([a-z_]+)` \|[^|]*\| (yes|optional) \|/.exec(line);
    if (row) {
      if (!current) tables.push((current = new Map()));
      current.set(row[1], row[2] === 'yes');
    } else if (!line.startsWith('|')) current = null;
  }
  return tables;
}

/** A zod object's keys → required (does it refuse `undefined`?). */
function schemaFields(schema: {
  shape: Record<string, { safeParse(v: unknown): { success: boolean } }>;
}): Map<string, boolean> {
  return new Map(Object.entries(schema.shape).map(([k, v]) => [k, !v.safeParse(undefined).success]));
}

describe('the guide documents the beads import format as the code reads it', () => {
  const tables = importTables(readFileSync(join(ROOT, 'docs/guide.md'), 'utf8'));

  it('has one table for a line, a dependency and a comment', () => {
    expect(tables).toHaveLength(3);
  });

  it.each([
    ['a line', 0, beadsRowSchema],
    ['a dependency', 1, beadsDependencySchema],
    ['a comment', 2, beadsCommentSchema],
  ] as const)('%s: every field of the schema, and only those, with the right required-ness', (_name, i, schema) => {
    const doc = Object.fromEntries([...(tables[i] ?? new Map()).entries()].sort());
    const code = Object.fromEntries([...schemaFields(schema as never).entries()].sort());
    expect(doc).toEqual(code);
  });
});

/** The words of the guide's glossary (first column), one list per row: `park, parked` and `current / stale` are two each. */
function glossaryRows(md: string): string[][] {
  const section = md.split('\n## Glossary\n')[1]?.split('\n## ')[0] ?? '';
  return section
    .split('\n')
    .filter((l) => l.startsWith('| ') && !l.startsWith('| Verdict ') && !l.startsWith('|---'))
    .map((l) =>
      l
        .split('|')[1]!
        .split(/[,/]/)
        .map((w) => w.trim())
        .filter((w) => w !== ''),
    );
}

describe("the guide's glossary", () => {
  const rows = glossaryRows(readFileSync(join(ROOT, 'docs/guide.md'), 'utf8'));

  it('states each word once: no word is the heading of two rows', () => {
    expect(rows.length).toBeGreaterThan(10);
    const words = rows.flat();
    expect(words.filter((w, i) => words.indexOf(w) !== i)).toEqual([]);
  });

  it("tells one job's evaluation from an eval against a gold set", () => {
    const meaning = (w: string) => rows.findIndex((r) => r.includes(w));
    expect(meaning('evaluation')).toBeGreaterThanOrEqual(0);
    expect(meaning('eval')).toBeGreaterThanOrEqual(0);
    expect(meaning('evaluation')).not.toBe(meaning('eval'));
  });
});
