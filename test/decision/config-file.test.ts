import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildRegistry } from '../../src/cli/common.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { loadQuestionSetConfig, parseQuestionSetConfig } from '../../src/decision/config-file.js';
import { noul } from '../../src/decision/questions.js';
import { tempDir } from '../harness/store-fixture.js';

/** User-defined sets from a config file (DESIGN §6), validated by the registry's rules. */

const GOOD = `
sets:
  - name: readiness
    collections: [task]
    eligible: [notSystem, {field: status, in: [open, in_progress]}]
    threshold: 0.8
    unsurfaced: [scope]
    questions:
      has_acceptance_criteria:
        kind: noul
        instructions: The item states how to tell that it is done.
      scope:
        kind: choice
        instructions: How well is the scope defined.
        options: {clear: One change., open: An idea.}
`;

let dir: { dir: string; cleanup: () => void };
beforeEach(() => (dir = tempDir()));
afterEach(() => dir.cleanup());

function file(name: string, text: string): string {
  const p = join(dir.dir, name);
  writeFileSync(p, text);
  return p;
}

describe('parsing a config file', () => {
  it('reads YAML and JSON into sets validated like code-defined ones', () => {
    const [s] = parseQuestionSetConfig(GOOD, 'sets.yaml', ['attention']);
    expect(s).toMatchObject({
      name: 'readiness',
      collections: ['task'],
      threshold: 0.8,
      unsurfaced: ['scope'],
      maxPerCall: 8,
      source: 'sets.yaml',
    });
    expect(s.eligible).toEqual(['notSystem', { field: 'status', in: ['open', 'in_progress'] }]);
    expect(s.questions!.has_acceptance_criteria).toEqual(noul('The item states how to tell that it is done.'));
    const json = JSON.stringify({
      sets: [{ name: 'j', questions: { a: { kind: 'score', instructions: 'Size.', levels: ['s', 'm', 'l'] } } }],
    });
    expect(parseQuestionSetConfig(json, 'sets.json')[0].questions!.a).toEqual({
      kind: 'score',
      instructions: 'Size.',
      levels: ['s', 'm', 'l'],
    });
  });

  it.each([
    [
      'an invalid question',
      GOOD.replace('The item states how to tell that it is done.', '""'),
      /config file f\.yaml: set "readiness": question "has_acceptance_criteria" is invalid: instructions: must not be blank/,
    ],
    [
      'a question of no kind',
      GOOD.replace('kind: noul', 'kind: maybe'),
      /set "readiness": question "has_acceptance_criteria" is invalid/,
    ],
    [
      'a key with @',
      GOOD.replace('has_acceptance_criteria:', 'a@b:'),
      /set "readiness": question "a@b" is invalid: a key must not contain "@"/,
    ],
    [
      'an unknown setting',
      GOOD.replace('threshold: 0.8', 'treshold: 0.8'),
      /set "readiness": Unrecognized key: "treshold"/,
    ],
    [
      'a threshold out of range',
      GOOD.replace('threshold: 0.8', 'threshold: 1.5'),
      /set "readiness": threshold: Too big/,
    ],
    [
      'no questions',
      'sets:\n  - name: empty\n    questions: {}\n',
      /set "empty": questions: a set needs at least one question/,
    ],
    [
      'an unsurfaced key the set does not ask',
      GOOD.replace('unsurfaced: [scope]', 'unsurfaced: [nope]'),
      /set "readiness": .*unsurfaced names keys the set does not ask: nope/,
    ],
    [
      'a built-in name',
      GOOD.replace('name: readiness', 'name: attention'),
      /set "attention": the name is already used by a built-in set/,
    ],
    [
      'a name used twice',
      `${GOOD}  - name: readiness\n    questions: {a: {kind: noul, instructions: A.}}\n`,
      /set "readiness": the name is used twice in this file/,
    ],
    [
      'a set without a name',
      'sets:\n  - questions: {a: {kind: noul, instructions: A.}}\n',
      /set #1: name: Invalid input/,
    ],
    [
      'a resolve (needs code)',
      'sets:\n  - name: r\n    resolve: x\n    questions: {a: {kind: noul, instructions: A.}}\n',
      /set "r": Unrecognized key: "resolve"/,
    ],
    ['not YAML', 'sets: [a, b\n', /config file f\.yaml: not valid YAML/],
    ['no sets list', 'set: []\n', /config file f\.yaml: /],
  ])('refuses %s, naming the file, the set and the problem', (_n, text, message) => {
    expect(() => parseQuestionSetConfig(text, 'f.yaml', ['attention'])).toThrow(message);
  });

  it('a missing file is refused with its name', () => {
    expect(() => loadQuestionSetConfig(join(dir.dir, 'nope.yaml'))).toThrow(
      /config file .*nope\.yaml: cannot be read \(ENOENT\)/,
    );
  });
});

describe('buildRegistry', () => {
  it("adds the config file's sets to the built-in ones (VERDICT_CONFIG or --config)", () => {
    const p = file('sets.yaml', GOOD);
    expect(
      buildRegistry(loadConfig({}, {}))
        .all()
        .map((s) => s.name),
    ).toEqual(['attention', 'conventions', 'conventions_comments', 'effort']);
    expect(
      buildRegistry(loadConfig({}, { VERDICT_CONFIG: p }))
        .all()
        .map((s) => s.name),
    ).toEqual(['attention', 'conventions', 'conventions_comments', 'effort', 'readiness']);
    expect(buildRegistry(loadConfig({ configFile: p }, {})).get('readiness')!.source).toBe(p);
  });

  it('a config that fails validation is a ConfigError at start', () => {
    const p = file('bad.yaml', GOOD.replace('threshold: 0.8', 'threshold: -1'));
    expect(() => buildRegistry(loadConfig({ configFile: p }, {}))).toThrow(ConfigError);
    expect(() => buildRegistry(loadConfig({ configFile: p }, {}))).toThrow(
      `config file ${p}: set "readiness": threshold: Too small`,
    );
  });
});
