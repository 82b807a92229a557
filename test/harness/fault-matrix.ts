import { Writable } from 'node:stream';
import { join } from 'node:path';
import { ManualClock } from '../../src/clock.js';
import { CONVENTION_STATEMENT } from '../../src/decision/conventions.js';
import { choice, noul, score } from '../../src/decision/questions.js';
import { defineQuestionSet, Registry, type QuestionSet } from '../../src/decision/registry.js';
import { createLogger } from '../../src/log.js';
import { AnthropicProvider, type AnthropicProviderOptions } from '../../src/providers/anthropic.js';
import { questionAliases } from '../../src/providers/prompt.js';
import type { RunReport } from '../../src/runner/job-life.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { JobRow } from '../../src/store/queue-store.js';
import type { SpendTotals } from '../../src/store/spend-store.js';
import { Worker } from '../../src/worker/worker.js';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';
import type { Handler, RecordedRequest, Reply } from '../../src/testing/fake-server-core.js';
import { tempDir, TASK_SCHEMA } from './store-fixture.js';

/**
 * The provider fault matrix (DESIGN §9, §14), measured through the real worker on a real SQLite file with
 * the real AnthropicProvider (real SDK) against the fake Anthropic server. One case per fault: the
 * server is scripted, one item owes one job of a set with one question of each kind, the worker
 * drains what is claimable (advancing the store's manual clock between passes where a case asks
 * for several), and the case reports what the server saw, what the job became and what the log
 * said. `scripts/fault-matrix.ts` prints every case as a Markdown table;
 * `test/worker/fault-matrix.test.ts` asserts the key rows.
 *
 * Timings are shrunk through the provider's own options (the defaults are 60 s per attempt, 0.5 s
 * first backoff, 30 s Retry-After cap); the retry logic is the same code.
 */

/** The provider timings the matrix runs with (ms). */
export const MATRIX_TIMINGS = {
  perAttemptTimeoutMs: 300,
  minBackoffMs: 5,
  maxBackoffMs: 40,
  retryAfterCapMs: 500,
  maxAttempts: 4,
} as const;

/** The set every case asks: one noul, one choice, one score, in one call. */
const matrixSet = defineQuestionSet({
  name: 'matrix',
  collections: ['task'],
  questions: {
    blocked: noul('The work on this item is blocked by something outside it.'),
    area: choice('Which part of the system does the item touch?', {
      api: 'Server API code',
      ui: 'User interface code',
      docs: 'Documentation',
    }),
    size: score('How much work remains on this item?', ['small', 'medium', 'large']),
  },
  eligible: ['notTerminal'],
});

/** Valid raw answers to `matrixSet`, by question key. */
function goodMatrixAnswers(): Record<string, any> {
  return {
    area: { probabilities: { api: 0.6, ui: 0.3, docs: 0.1 } },
    blocked: { probability: 0.8 },
    size: { probabilities: { '0': 0.2, '1': 0.5, '2': 0.3 } },
  };
}

/**
 * Raw answers by key renamed to the schema's property aliases, as the model sends them: `q1`…`qN`
 * in key order (DESIGN §9.2); members that name no question of `set` pass unchanged.
 */
function asSent(raw: Record<string, unknown>, set: QuestionSet = matrixSet): Record<string, unknown> {
  const aliasOf = new Map(
    questionAliases(new Map(Object.entries(set.questions ?? {}))).map(([alias, key]) => [key, alias]),
  );
  return Object.fromEntries(Object.entries(raw).map(([k, v]) => [aliasOf.get(k) ?? k, v]));
}

/**
 * A set asking one convention-style key, `conv:<ref>` with a real beads ref: `:` is not legal in a
 * tool property name, so the key reaches the API only as its alias (DESIGN §9.2).
 */
const convKeySet = defineQuestionSet({
  name: 'matrix_conv',
  collections: ['task'],
  questions: { 'conv:bd-7h7': noul(`${CONVENTION_STATEMENT}\n\nConvention bd-7h7: Bugs say how to reproduce them`) },
  eligible: ['notTerminal'],
});

/** One fault: how the server answers, and how the case is driven. */
export interface FaultCase {
  name: string;
  /** Replies for the requests in order; afterwards the fallback (valid answers, unless `fallback`). */
  replies?: Array<Reply | Handler>;
  fallback?: Handler;
  /** Use the forced-tool path instead of structured output. */
  useTool?: boolean;
  /** The set the item owes. @defaultValue matrixSet */
  set?: QuestionSet;
  /** Worker passes (each drains what is claimable now); between passes the clock moves past not_before. @defaultValue 1 */
  passes?: number;
  /** Stop the worker (as SIGTERM does) once the server has received this many requests. */
  stopAfterRequests?: number;
  /** Extra provider options (e.g. a longer attempt timeout). */
  provider?: Partial<AnthropicProviderOptions>;
}

/** A parsed log line. */
export type LogLine = Record<string, any> & { msg: string };

/** What one case measured. */
export interface FaultResult {
  name: string;
  /** POST /v1/messages requests the server received. */
  calls: number;
  /** The most requests the server had open at once. */
  maxInFlight: number;
  /** Requests in order with their arrival and close times (performance.now ms) and whether the client aborted them. */
  requests: Array<Pick<RecordedRequest, 'receivedAt' | 'closedAt' | 'aborted'>>;
  /** Every recorded outcome in order: its kind, reason, and the claim's attempt number. */
  outcomes: Array<{ kind: string; reason: string; attempts: number; recorded: string }>;
  /** The job row after the last pass (null: deleted, i.e. completed or dropped). */
  job: JobRow | null;
  /** not_before − now after each pass that left the job owed (ms). */
  delays: number[];
  /** Answers stored. */
  answers: number;
  /** Models stored with the answers. */
  models: string[];
  /** Question keys of the answers stored, sorted. */
  storedKeys: string[];
  spend: SpendTotals;
  /** Set when the worker stopped because the provider is misconfigured. */
  misconfigured: string | null;
  logs: LogLine[];
}

/** The cases of the matrix, in table order. */
export function faultCases(): FaultCase[] {
  const S = FakeAnthropicServer;
  const answers = goodMatrixAnswers;
  return [
    { name: 'success, structured output' },
    { name: 'success, forced tool', useTool: true },
    { name: 'forced tool, key conv:bd-7h7 (not a legal property name)', useTool: true, set: convKeySet },
    { name: '429, retry-after 0.1 s (under the cap)', replies: [S.rateLimited(0.1)] },
    { name: '429, retry-after 30 s (over the cap)', replies: [S.rateLimited(30)] },
    { name: '429 on every attempt, no retry-after', replies: Array.from({ length: 4 }, () => S.rateLimited()) },
    { name: '500, then 200', replies: [S.error(500, 'api_error')] },
    { name: '529 twice, then 200', replies: [S.overloaded(), S.overloaded()] },
    { name: '529 forever (3 passes)', fallback: () => S.overloaded(), passes: 3 },
    // DESIGN §3.7: a short Retry-After on a 5xx/529 is a transient fail, not a defer.
    {
      name: '529 + retry-after 0.1 s forever (2 passes)',
      fallback: () => S.overloaded({ 'retry-after': '0.1' }),
      passes: 2,
    },
    {
      name: '503 api_error + retry-after 0.1 s forever (2 passes)',
      fallback: () => S.error(503, 'api_error', 'unavailable', { 'retry-after': '0.1' }),
      passes: 2,
    },
    {
      name: '503 + retry-after 30 s (over the cap)',
      replies: [S.error(503, 'api_error', 'unavailable', { 'retry-after': '30' })],
    },
    { name: 'overloaded_error inside a 200, then 200', replies: [S.errorIn200()] },
    {
      name: '400 invalid_request_error',
      replies: [S.error(400, 'invalid_request_error', 'messages: content is empty')],
    },
    { name: '401 authentication_error', replies: [S.error(401, 'authentication_error', 'invalid x-api-key')] },
    // DESIGN §3.8: the set's fault; its jobs are held, the worker is not stopped.
    {
      name: '400 rejecting the schema',
      replies: [
        S.error(400, 'invalid_request_error', 'output_config.format.schema: Invalid schema: unsupported keyword'),
      ],
    },
    { name: 'stop_reason max_tokens', replies: [S.truncated()] },
    { name: 'malformed JSON', replies: [S.text('{"area": {"probabilities": ')] },
    {
      name: 'wrong kind (noul answered with probabilities)',
      replies: [S.answer(asSent({ ...answers(), blocked: { probabilities: { yes: 0.8, no: 0.2 } } }))],
    },
    { name: 'missing key', replies: [S.answer(asSent((({ size: _s, ...rest }) => rest)(answers())))] },
    {
      name: 'extra keys (ignored)',
      replies: [
        S.answer(asSent({ ...answers(), unasked: { probability: 1 }, blocked: { probability: 0.8, note: 'x' } })),
      ],
    },
    {
      name: 'probabilities sum to 0.7',
      replies: [S.answer(asSent({ ...answers(), area: { probabilities: { api: 0.4, ui: 0.2, docs: 0.1 } } }))],
    },
    {
      name: 'probabilities sum to 1.015 (normalised)',
      replies: [S.answer(asSent({ ...answers(), area: { probabilities: { api: 0.615, ui: 0.3, docs: 0.1 } } }))],
    },
    { name: 'timeout (slow reply), then 200', replies: [S.slow(1_500)] },
    { name: 'dropped connection, then 200', replies: [S.drop()] },
    { name: 'connection dropped mid-body, then 200', replies: [S.drop(true)] },
    {
      name: 'shutdown mid-request',
      replies: [S.hang()],
      stopAfterRequests: 1,
      provider: { perAttemptTimeoutMs: 30_000 },
    },
  ];
}

/** A pino destination that keeps every line. */
function captureStream(lines: string[]): Writable {
  return new Writable({
    write(chunk, _enc, cb) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      cb();
    },
  });
}

/**
 * Runs one case on a fresh SQLite file and a fresh fake server.
 * @param opts.apiKey the key the provider sends (tests put a canary in it).
 */
export async function runFaultCase(c: FaultCase, opts: { apiKey?: string } = {}): Promise<FaultResult> {
  const t = tempDir('verdict-matrix-');
  const server = await FakeAnthropicServer.start();
  const clock = new ManualClock();
  const set = c.set ?? matrixSet;
  const registry = new Registry([set]);
  const store = new SqliteStore({ url: join(t.dir, 'verdict.db'), registry, clock });
  const raw: string[] = [];
  const logger = createLogger('debug', captureStream(raw) as never);
  try {
    if (c.replies) server.script(...c.replies);
    if (c.fallback) server.setFallback(c.fallback);
    const ws = await store.createWorkspace({ slug: 'acme' });
    const col = await store.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA });
    const item = await store.createItem(
      {
        workspaceId: ws.id,
        collectionId: col.id,
        ref: 'T-1',
        title: 'Fix the login page',
        content: 'It fails on Safari.',
        fields: { status: 'open' },
      },
      { quietPeriod: false },
    );
    const provider = new AnthropicProvider({
      apiKey: opts.apiKey ?? 'sk-ant-test-matrix',
      baseURL: server.url,
      ...MATRIX_TIMINGS,
      useTool: c.useTool ?? false,
      logger: logger.child({ component: 'anthropic' }),
      ...c.provider,
    });
    const outcomes: FaultResult['outcomes'] = [];
    const delays: number[] = [];
    let misconfigured: string | null = null;
    for (let pass = 0; pass < (c.passes ?? 1); pass++) {
      if (pass > 0) {
        const j = await store.getJob(item.row.id, set.name);
        if (!j) break;
        clock.set(Math.max(clock.now(), j.notBefore));
      }
      const worker = new Worker({
        store,
        registry,
        provider,
        logger,
        workerId: 'matrix',
        concurrency: 1,
        tickMs: 10,
        leaseMs: 600_000,
        passLimit: 20,
        abandonLimit: 8,
        untilIdle: c.stopAfterRequests === undefined,
        onOutcome: (r: RunReport) =>
          outcomes.push({
            kind: r.outcome.kind,
            reason: r.outcome.reason,
            attempts: r.claim.attempts,
            recorded: String(r.recorded),
          }),
      });
      const running = worker.run();
      if (c.stopAfterRequests !== undefined) {
        const want = c.stopAfterRequests;
        await until(() => server.messages.length >= want, 10_000);
        worker.stop('SIGTERM');
      }
      const summary = await running;
      misconfigured ??= summary.misconfigured;
      const j = await store.getJob(item.row.id, set.name);
      if (j) delays.push(j.notBefore - clock.now());
    }
    // The server sees a client's abort a moment after the client does.
    await until(() => server.messages.every((r) => r.closedAt !== undefined), 2_000);
    const decisions = await store.listDecisions(item.row.id);
    return {
      name: c.name,
      calls: server.messages.length,
      maxInFlight: server.maxInFlight,
      requests: server.messages.map((r) => ({ receivedAt: r.receivedAt, closedAt: r.closedAt, aborted: r.aborted })),
      outcomes,
      job: await store.getJob(item.row.id, set.name),
      delays,
      answers: decisions.length,
      models: [...new Set(decisions.map((d) => d.model))],
      storedKeys: decisions.map((d) => d.questionKey).sort(),
      spend: await store.spendSince(86_400_000),
      misconfigured,
      logs: raw.map((l) => JSON.parse(l) as LogLine),
    };
  } finally {
    await store.close();
    await server.close();
    t.cleanup();
  }
}

async function until(cond: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('fault matrix: condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A short account of what the log said: provider attempt failures, outcomes, cooling-off, spend. */
function summariseLog(logs: LogLine[]): string {
  const parts: string[] = [];
  const counts = new Map<string, number>();
  const add = (s: string) => {
    if (!counts.has(s)) parts.push(s);
    counts.set(s, (counts.get(s) ?? 0) + 1);
  };
  for (const l of logs) {
    if (l.msg === 'provider attempt failed')
      add(
        `attempt failed: ${String(l.reason).replace(/ \(request [^)]*\)/, '')}, ${l.waitMs !== undefined ? 'retry' : 'gave up'}`,
      );
    else if (l.msg === 'provider asked to wait longer than the cap; deferring')
      add(`retry-after ${l.retryAfterMs} ms over the cap: deferring`);
    else if (l.msg === 'job outcome') add(`job outcome ${l.outcome} (${l.reason})`);
    else if (l.msg.startsWith('provider misconfigured')) add(`misconfigured: cooling off ${l.cooloffMs} ms`);
    else if (l.msg === 'worker stopping') add(`worker stopping (${l.reason})`);
    else if (l.msg === 'spend') add(`spend ${l.outcome}: ${l.inputTokens} in / ${l.outputTokens} out`);
  }
  return parts.map((p) => (counts.get(p)! > 1 ? `${p} ×${counts.get(p)}` : p)).join('; ');
}

function secs(ms: number): string {
  if (ms <= 0) return 'now';
  return 'in ' + (ms >= 1000 ? `${(ms / 1000).toFixed(ms % 1000 === 0 ? 0 : 1)} s` : `${ms} ms`);
}

/** One Markdown table row of a result. */
export function tableRow(r: FaultResult): string {
  const outcome =
    r.outcomes.map((o) => `${o.kind}${o.kind === 'complete' ? '' : ` (${o.reason})`}`).join(' → ') || 'none';
  const job = r.job
    ? `${r.job.state}; attempts ${r.job.attempts}, refusals ${r.job.refusals}; ${r.delays.length ? `due ${r.delays.map(secs).join(' → ')}` : ''}`
    : 'deleted (done)';
  const claims = r.outcomes.map((o) => o.attempts).join(', ');
  const closedFirst = r.requests.every((q, i) => i === 0 || (r.requests[i - 1].closedAt ?? Infinity) <= q.receivedAt);
  const aborted = r.requests.map((q, i) => (q.aborted ? `#${i + 1}` : '')).filter(Boolean);
  const calls = [
    `${r.calls}`,
    `max ${r.maxInFlight} open at once`,
    ...(r.calls > 1 ? [closedFirst ? 'each closed before the next' : 'OVERLAPPING'] : []),
    ...(aborted.length ? [`${aborted.join(', ')} closed unanswered`] : []),
  ];
  const cells = [
    r.name,
    `${calls[0]} (${calls.slice(1).join('; ')})`,
    outcome,
    claims,
    job,
    String(r.answers),
    summariseLog(r.logs).replace(/\|/g, '\\|'),
  ];
  return `| ${cells.join(' | ')} |`;
}

export const TABLE_HEADER = [
  '| fault | provider calls | job outcome | attempt no. at claim | job row after | answers stored | what the log says |',
  '|---|---|---|---|---|---|---|',
];
