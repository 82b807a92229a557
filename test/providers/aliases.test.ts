import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { noul, score, type Question } from '../../src/decision/questions.js';
import { AnthropicProvider } from '../../src/providers/anthropic.js';
import { OpenAICompatibleProvider } from '../../src/providers/openai-compatible.js';
import { ProviderRefusal } from '../../src/providers/errors.js';
import { FakeAnthropicServer, TOOL_PROPERTY_KEY } from '../../src/testing/fake-anthropic-server.js';
import type { Handler, RecordedRequest } from '../../src/testing/fake-server-core.js';
import { FakeOpenAIServer } from '../../src/testing/fake-openai-server.js';
import { askOpts, STATE } from './support.js';

/**
 * Schema property names are aliases q1…qN mapped back to question keys (DESIGN §9.2), on every
 * path: Anthropic structured output, Anthropic forced tool, OpenAI-compatible json_schema and
 * json_object. Keys are real beads refs made convention keys (`conv:bd-7h7`), which the Messages
 * API refuses as tool property names. A scripted "model" reads each definition in the prompt and
 * answers its alias with a probability chosen per key, so a mix-up of aliases shows.
 */

/** Keys in insertion order unlike their sorted order, with the probability the model gives each. */
const WANT: Record<string, number> = { 'conv:bd-7h7': 0.91, 'conv:bd-0088': 0.12, 'conv:bd-00u3': 0.47, effort: -1 };
function chunk(): Map<string, Question> {
  return new Map<string, Question>([
    [
      'conv:bd-7h7',
      noul('The content does what the convention forbids, or lacks what it requires.\n\nConvention bd-7h7: first'),
    ],
    ['effort', score('How much effort is the item?', ['small', 'medium', 'large'])],
    [
      'conv:bd-0088',
      noul('The content does what the convention forbids, or lacks what it requires.\n\nConvention bd-0088: second'),
    ],
    [
      'conv:bd-00u3',
      noul('The content does what the convention forbids, or lacks what it requires.\n\nConvention bd-00u3: third'),
    ],
  ]);
}

/** alias → key, read from the prompt the way a model would: each heading, then its fenced definition. */
function aliasesInPrompt(system: string): Map<string, string> {
  const lines = system.split('\n');
  const out = new Map<string, string>();
  lines.forEach((l, i) => {
    const h = /^### (q\d+) \((\w+)\)$/.exec(l);
    if (h && lines[i + 1] === '```json') out.set(h[1], (JSON.parse(lines[i + 2]) as { key: string }).key);
  });
  return out;
}

/** The raw answer the model gives for `key`: WANT's probability, or a distribution for the score. */
function modelAnswer(key: string): unknown {
  return key === 'effort' ? { probabilities: { '0': 0.1, '1': 0.2, '2': 0.7 } } : { probability: WANT[key] };
}

function answersFor(system: string): Record<string, unknown> {
  return Object.fromEntries([...aliasesInPrompt(system)].map(([alias, key]) => [alias, modelAnswer(key)]));
}

function expectAnswersByKey(answers: Map<string, { answer: any }>): void {
  expect([...answers.keys()].sort()).toEqual(Object.keys(WANT).sort());
  for (const [key, p] of Object.entries(WANT))
    if (key !== 'effort') expect(answers.get(key)!.answer).toEqual({ type: 'noul', noul: p });
  expect(answers.get('effort')!.answer).toMatchObject({ type: 'score', legend: { '2': 'large' } });
}

describe('Anthropic: aliases round-trip', () => {
  let server: FakeAnthropicServer;
  beforeAll(async () => {
    server = await FakeAnthropicServer.start();
  });
  afterAll(async () => server.close());
  beforeEach(() => server.reset());

  const anthropicModel: Handler = (req: RecordedRequest) => {
    const system: string = req.body.system[0].text;
    return (
      req.body.tools
        ? FakeAnthropicServer.toolAnswer(answersFor(system))
        : FakeAnthropicServer.answer(answersFor(system))
    )(req);
  };

  for (const useTool of [false, true]) {
    it(`${useTool ? 'forced tool' : 'structured output'}: properties q1…q4 in key order, answers back under their keys`, async () => {
      server.script(anthropicModel);
      const p = new AnthropicProvider({ apiKey: 'sk-ant-test', baseURL: server.url, useTool });
      const r = await p.ask(STATE, chunk(), askOpts());
      expect(server.messages).toHaveLength(1);
      const body = server.messages[0].body;
      const schema = useTool ? body.tools[0].input_schema : body.output_config.format.schema;
      expect(Object.keys(schema.properties)).toEqual(['q1', 'q2', 'q3', 'q4']);
      for (const k of Object.keys(schema.properties)) expect(k).toMatch(TOOL_PROPERTY_KEY);
      // key order: conv:bd-0088, conv:bd-00u3, conv:bd-7h7, effort
      expect([...aliasesInPrompt(body.system[0].text)]).toEqual([
        ['q1', 'conv:bd-0088'],
        ['q2', 'conv:bd-00u3'],
        ['q3', 'conv:bd-7h7'],
        ['q4', 'effort'],
      ]);
      expectAnswersByKey(r.answers);
    });
  }

  it('the fake server refuses a tool property name as the API does (the control for the forced-tool case)', async () => {
    const res = await fetch(`${server.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        tools: [{ name: 't', input_schema: { type: 'object', properties: { 'conv:bd-7h7': { type: 'object' } } } }],
      }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error.message).toMatch(
      /^tools\.0\.custom\.input_schema\.properties: Property keys should match pattern/,
    );
  });

  it('a key holding @ is refused before any request (DESIGN §7.1)', async () => {
    const p = new AnthropicProvider({ apiKey: 'sk-ant-test', baseURL: server.url });
    await expect(p.ask(STATE, new Map([['conv:bd@7h7', noul('x')]]), askOpts())).rejects.toBeInstanceOf(
      ProviderRefusal,
    );
    expect(server.messages).toHaveLength(0);
  });
});

describe('OpenAI-compatible: aliases round-trip', () => {
  let server: FakeOpenAIServer;
  beforeAll(async () => {
    server = await FakeOpenAIServer.start();
  });
  afterAll(async () => server.close());
  beforeEach(() => server.reset());

  const openaiModel: Handler = (req: RecordedRequest) => {
    const system: string = req.body.messages.find((m: any) => m.role === 'system').content;
    return FakeOpenAIServer.answer(answersFor(system))(req);
  };

  for (const responseFormat of ['json_schema', 'json_object'] as const) {
    it(`${responseFormat}: properties q1…q4 in key order, answers back under their keys`, async () => {
      server.script(openaiModel);
      const p = new OpenAICompatibleProvider({ baseURL: server.baseURL, model: 'qwen3:8b', responseFormat });
      const r = await p.ask(STATE, chunk(), askOpts());
      const body = server.completions[0].body;
      const system: string = body.messages[0].content;
      const schema =
        responseFormat === 'json_schema'
          ? body.response_format.json_schema.schema
          : JSON.parse(system.split('\n').at(-1)!);
      expect(Object.keys(schema.properties)).toEqual(['q1', 'q2', 'q3', 'q4']);
      expect(aliasesInPrompt(system).get('q3')).toBe('conv:bd-7h7');
      expectAnswersByKey(r.answers);
    });
  }
});
