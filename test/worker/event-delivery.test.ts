import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runWorker, type WorkerSettings } from '../../src/compose/run-worker.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { noul } from '../../src/decision/questions.js';
import { defineQuestionSet } from '../../src/decision/registry.js';
import {
  EVENT_SIGNATURE_HEADER,
  signEventBody,
  verifyEventSignature,
} from '../../src/integrations/events/signature.js';
import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { EventDeliverer } from '../../src/worker/event-delivery.js';
import { WorkerMetrics } from '../../src/worker/metrics.js';
import type { Worker } from '../../src/worker/worker.js';
import { captureLog } from '../harness/log-capture.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * Outbound decision events end to end (DESIGN §16.2, issue 14 part 3): a real worker (runWorker,
 * until idle, the fake provider) against a real HTTP receiver on 127.0.0.1. The receiver is down
 * for an hour of the store's clock (503 with Retry-After, then connection refused) while items
 * keep surfacing and clearing; once it is up, every event arrives exactly once, in order per
 * item, each with a signature `verifyEventSignature` accepts. The receiver answers 401 to a bad
 * signature and counts requests of one item in flight at once, so removing the signing, the
 * head-of-line rule or the lease fails these tests.
 */

const SECRET = 'test-event-secret';
const flagSet = defineQuestionSet({
  name: 'flag',
  questions: { urgent: noul('the item is urgent') },
  threshold: 0.5,
  quietPeriodMs: 0,
  reaskDebounceMs: 0,
  noTrail: true,
});
const provider = () =>
  new FakeProvider({ handler: (req) => ({ urgent: { probability: req.state.includes('HIGH') ? 0.9 : 0.1 } }) });

type Mode = 'down' | 'refused' | 'up';

interface Received {
  eventId: string;
  type: string;
  itemId: string;
  body: string;
  signatureOk: boolean;
}

/** A receiver on 127.0.0.1: `down` answers 503 (Retry-After 120), `refused` closes the port, `up` verifies and accepts. */
class Receiver {
  mode: Mode = 'up';
  readonly accepted: Received[] = [];
  requests = 0;
  /** Most requests of one item in flight at once. */
  maxInFlightPerItem = 0;
  private readonly inFlight = new Map<string, number>();
  private server: Server;
  port = 0;

  constructor() {
    this.server = this.make();
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hooks/verdict`;
  }

  private make(): Server {
    return createServer((req, res) => void this.handle(req, res));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    this.requests++;
    if (this.mode === 'down') {
      res.writeHead(503, { 'retry-after': '120' }).end('maintenance');
      return;
    }
    const body = raw.toString('utf8');
    const payload = JSON.parse(body) as { id: string; type: string; item: { id: string } };
    const itemId = payload.item.id;
    this.inFlight.set(itemId, (this.inFlight.get(itemId) ?? 0) + 1);
    this.maxInFlightPerItem = Math.max(this.maxInFlightPerItem, this.inFlight.get(itemId)!);
    // A slow receiver: two requests of one item sent at once would overlap here.
    await new Promise((r) => setTimeout(r, 15));
    this.inFlight.set(itemId, this.inFlight.get(itemId)! - 1);
    const signatureOk = verifyEventSignature(SECRET, raw, req.headers[EVENT_SIGNATURE_HEADER] as string | undefined);
    if (!signatureOk) {
      res.writeHead(401).end();
      return;
    }
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.headers['x-verdict-event']).toBe(payload.id);
    expect(req.headers['x-verdict-event-type']).toBe(payload.type);
    this.accepted.push({ eventId: payload.id, type: payload.type, itemId, body, signatureOk });
    res.writeHead(204).end();
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.closeAllConnections();
      this.server.close(() => resolve());
    });
  }

  /** Sets the mode; `refused` closes the port, leaving it reopens it on the same port. */
  async set(mode: Mode): Promise<void> {
    if (mode === 'refused' && this.mode !== 'refused') {
      await this.close();
      this.server = this.make();
    } else if (mode !== 'refused' && this.mode === 'refused') await this.listen();
    this.mode = mode;
  }
}

const MIN = 60_000;

describe('outbound decision events: a worker delivers them signed, once, in order per item (DESIGN §16.2)', () => {
  let fx: Fixture;
  let receiver: Receiver;

  beforeEach(async () => {
    fx = await makeFixture([flagSet]);
    receiver = new Receiver();
    await receiver.listen();
  });
  afterEach(async () => {
    if (receiver.mode !== 'refused') await receiver.close();
    await fx.cleanup();
  });

  const settings = (over: Partial<WorkerSettings> = {}): WorkerSettings => ({
    concurrency: 1, // one slot: the items' answers, and so their events, are stored in claim order
    tickMs: 50,
    leaseMs: 60_000,
    passLimit: 20,
    abandonLimit: 8,
    metricsPort: undefined,
    metricsHost: '127.0.0.1',
    requestsPerMinute: undefined,
    inputTokensPerMinute: undefined,
    dailyTokenCap: undefined,
    driftSweepPerMinute: 0,
    pruneIntervalMs: 0,
    retentionHistoryMs: 30 * 24 * 60 * MIN,
    walCheckpointMs: 60_000,
    eventUrls: [receiver.url],
    eventSecret: SECRET,
    ...over,
  });

  const drain = (logger = silentLogger, over: Partial<WorkerSettings> = {}) =>
    runWorker({
      cfg: settings(over),
      store: fx.store,
      registry: fx.registry,
      provider: provider(),
      logger,
      untilIdle: true,
      workerId: 'w-test',
    });

  const item = async (ref: string, hot: boolean) =>
    (
      await fx.store.createItem({
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref,
        title: ref,
        content: hot ? 'HIGH' : 'calm',
        fields: { status: 'open' },
      })
    ).row;
  const setHot = (id: string, hot: boolean) => fx.store.updateItem(id, { content: hot ? 'HIGH again' : 'calm now' });

  it('a receiver down for an hour loses nothing: afterwards every event arrives once, in order per item, signed', async () => {
    const log = captureLog('debug');
    await receiver.set('down');
    const a = await item('A-1', true);
    const b = await item('B-1', true);
    await drain(log.logger); // two surfaced events, each tried once: 503
    expect(receiver.requests).toBe(2);
    expect((await fx.store.listDecisionEvents()).map((e) => e.attempts)).toEqual([1, 1]);

    // An hour of outage, in 5-minute steps, while A clears and surfaces again and B clears.
    for (let step = 1; step <= 12; step++) {
      if (step === 4) await receiver.set('refused');
      if (step === 2) await setHot(a.id, false);
      if (step === 5) await setHot(a.id, true);
      if (step === 7) await setHot(b.id, false);
      fx.clock.advance(5 * MIN);
      await drain(log.logger);
    }
    const queued = await fx.store.listDecisionEvents();
    expect(queued.map((e) => `${e.itemId === a.id ? 'A' : 'B'} ${e.type}`)).toEqual([
      'A decision.surfaced',
      'B decision.surfaced',
      'A decision.cleared',
      'A decision.surfaced',
      'B decision.cleared',
    ]);
    expect(queued.every((e) => e.deliveredAt === null)).toBe(true);
    // Retried with backoff through the hour, never in a tight loop, and only the head of each line.
    const heads = queued.filter((e) => e.attempts > 0);
    expect(heads.map((e) => e.id)).toEqual([queued[0].id, queued[1].id]);
    for (const h of heads) expect(h.attempts).toBeGreaterThanOrEqual(4);
    expect(h0(heads).attempts).toBeLessThanOrEqual(8);
    expect(receiver.accepted).toEqual([]);

    // Up again: one drain after the longest backoff delivers everything.
    await receiver.set('up');
    fx.clock.advance(70 * MIN);
    await drain(log.logger);
    const ids = receiver.accepted.map((r) => r.eventId);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(queued.map((e) => e.eventId).sort());
    for (const it of [a.id, b.id]) {
      expect(receiver.accepted.filter((r) => r.itemId === it).map((r) => r.eventId)).toEqual(
        queued.filter((e) => e.itemId === it).map((e) => e.eventId),
      );
    }
    expect(receiver.accepted.every((r) => r.signatureOk)).toBe(true);
    for (const r of receiver.accepted) expect(r.body).toBe(queued.find((e) => e.eventId === r.eventId)!.payload);
    expect(receiver.maxInFlightPerItem).toBe(1);
    expect((await fx.store.listDecisionEvents()).every((e) => e.deliveredAt !== null)).toBe(true);
    expect(await fx.store.eventDeliveryStats()).toEqual({ pending: 0, due: 0, nextAttemptAt: null });
    // Nothing more is sent on the next run.
    const before = receiver.requests;
    await drain(log.logger);
    expect(receiver.requests).toBe(before);
    // Logs carry ids, statuses and counts: never a body, the item text or the target URL.
    const text = log.lines.join('\n');
    expect(text).toContain('event deliveries failed');
    expect(text).not.toContain('HIGH');
    expect(text).not.toContain('"state_hash"');
    expect(text).not.toContain(receiver.url);
  }, 30_000);

  it("one line at a time: an item's later events wait behind its undelivered head, other items go on", async () => {
    const a = await item('A-1', true);
    await receiver.set('down');
    await drain();
    await setHot(a.id, false);
    await drain();
    await setHot(a.id, true);
    await drain();
    const b = await item('B-1', true);
    await receiver.set('up');
    await drain(); // B's head is delivered; A's line waits for its head's backoff
    expect(receiver.accepted.map((r) => r.itemId)).toEqual([b.id]);
    fx.clock.advance(5 * MIN);
    await drain();
    expect(receiver.accepted.map((r) => `${r.itemId === a.id ? 'A' : 'B'} ${r.type}`)).toEqual([
      'B decision.surfaced',
      'A decision.surfaced',
      'A decision.cleared',
      'A decision.surfaced',
    ]);
    expect(receiver.maxInFlightPerItem).toBe(1);
  }, 30_000);

  it('two deliverers on one outbox never send an event twice (the lease)', async () => {
    const items = [];
    for (let i = 0; i < 6; i++) items.push(await item(`I-${i}`, true));
    await drain(silentLogger, { eventUrls: [], eventSecret: undefined }); // answers stored, events queued, nothing delivered
    await fx.store.syncEventTargets([receiver.url]); // (the worker above had no URLs: it changed no target)
    expect((await fx.store.listDecisionEvents()).length).toBe(0);
    for (const it of items) await setHot(it.id, false);
    await drain(silentLogger, { eventUrls: [], eventSecret: undefined });
    expect((await fx.store.listDecisionEvents()).length).toBe(6);
    const stop = new AbortController();
    const mk = (owner: string) =>
      new EventDeliverer({ store: fx.store, logger: silentLogger, owner, secret: SECRET, pollMs: 10, batchSize: 4 });
    const [x, y] = await Promise.all([mk('one').flush(stop.signal), mk('two').flush(stop.signal)]);
    expect(x.delivered + y.delivered).toBe(6);
    const ids = receiver.accepted.map((r) => r.eventId);
    expect(ids).toHaveLength(6);
    expect(new Set(ids).size).toBe(6);
  }, 30_000);

  it('a long-running worker delivers beside its slots and stops cleanly; metrics count deliveries', async () => {
    let worker: Worker | undefined;
    const running = runWorker({
      cfg: settings(),
      store: fx.store,
      registry: fx.registry,
      provider: provider(),
      logger: silentLogger,
      untilIdle: false,
      workerId: 'w-long',
      onStarted: (w) => (worker = w),
    });
    await until(() => worker !== undefined);
    await item('A-1', true);
    // Delivered as the store sees it (the receiver's 2xx recorded), not only received: a stop
    // between the two releases the row, and it is sent again later (at least once).
    let delivered = false;
    await until(() => {
      void fx.store.listDecisionEvents().then((es) => (delivered = es.length === 1 && es[0].deliveredAt !== null));
      return delivered;
    });
    expect(receiver.accepted).toHaveLength(1);
    worker!.stop();
    await running;
    expect(await fx.store.eventDeliveryStats()).toEqual({ pending: 0, due: 0, nextAttemptAt: null });
    expect((await fx.store.listDecisionEvents())[0]).toMatchObject({ leaseOwner: null, attempts: 0 });

    const metrics = new WorkerMetrics({ store: fx.store });
    metrics.countEventDelivery(true);
    metrics.countEventDelivery(false);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/^verdict_events_delivered_total 1$/m);
    expect(text).toMatch(/^verdict_event_delivery_failures_total 1$/m);
    expect(text).toMatch(/^verdict_events_pending 0$/m);
  }, 30_000);

  it('a receiver that never answers costs one timeout per round, not one per event', async () => {
    let hung = 0;
    const black = createServer(() => void hung++); // accepts, never answers
    await new Promise<void>((r) => black.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(black.address() as AddressInfo).port}/`;
    try {
      for (let i = 0; i < 6; i++) await item(`I-${i}`, true);
      await drain(silentLogger, { eventUrls: [], eventSecret: undefined }); // surfaced, with no target yet: no event
      await fx.store.syncEventTargets([url]);
      for (const it of await fx.store.listItems({ workspaceId: fx.ws.id })) await setHot(it.id, false);
      await drain(silentLogger, { eventUrls: [], eventSecret: undefined });
      expect(await fx.store.listDecisionEvents()).toHaveLength(6);
      const d = new EventDeliverer({
        store: fx.store,
        logger: silentLogger,
        owner: 'one',
        secret: SECRET,
        pollMs: 10,
        batchSize: 2,
        timeoutMs: 200,
      });
      const started = Date.now();
      expect(await d.flush(new AbortController().signal)).toEqual({ delivered: 0, failed: 6 });
      expect(Date.now() - started).toBeLessThan(2_000);
      expect(hung).toBe(2);
      const rows = await fx.store.listDecisionEvents();
      // Two were tried and timed out (one attempt each); the other four were never sent: deferred to
      // the end of the hold with no attempt counted, so their backoff does not grow.
      const tried = rows.filter((r) => r.attempts === 1);
      const held = rows.filter((r) => r.attempts === 0);
      expect(tried.map((r) => r.lastError)).toEqual(['timeout', 'timeout']);
      expect(held).toHaveLength(4);
      const now = await fx.store.now();
      expect(
        held.every(
          (r) =>
            r.lastError === null && r.leaseOwner === null && r.nextAttemptAt > now && r.nextAttemptAt <= now + 60_000,
        ),
      ).toBe(true);
      expect(rows.every((r) => r.deliveredAt === null)).toBe(true);
    } finally {
      black.closeAllConnections();
      await new Promise<void>((r) => black.close(() => r()));
    }
  }, 30_000);

  it('a wrong secret is refused by the receiver and the event stays queued', async () => {
    await item('A-1', true);
    await drain(silentLogger, { eventSecret: 'not-the-receivers' });
    expect(receiver.requests).toBe(1);
    expect(receiver.accepted).toEqual([]);
    const [e] = await fx.store.listDecisionEvents();
    expect(e).toMatchObject({ attempts: 1, deliveredAt: null, lastError: 'http 401' });
  }, 30_000);

  it('a worker without URLs leaves the targets alone; a worker with URLs makes them the targets', async () => {
    await fx.store.syncEventTargets(['http://127.0.0.1:9/other', receiver.url]);
    await drain(silentLogger, { eventUrls: [], eventSecret: undefined });
    await item('A-1', true);
    await drain(silentLogger, { eventUrls: [], eventSecret: undefined });
    expect((await fx.store.listDecisionEvents()).map((e) => e.targetUrl).sort()).toEqual(
      ['http://127.0.0.1:9/other', receiver.url].sort(),
    );
    expect(receiver.requests).toBe(0); // no secret: no delivery
    await drain(); // URLs [receiver]: the other target is disabled, the receiver's event delivered
    expect(receiver.accepted).toHaveLength(1);
    expect(await fx.store.eventDeliveryStats()).toMatchObject({ pending: 0 });
  }, 30_000);
});

describe('event settings', () => {
  it('VERDICT_EVENT_URLS takes comma-separated http(s) URLs and needs VERDICT_EVENT_SECRET', () => {
    expect(loadConfig({}, {}).eventUrls).toEqual([]);
    expect(
      loadConfig(
        {},
        {
          VERDICT_EVENT_URLS: ' https://a.example/h , http://b.example/h,https://a.example/h',
          VERDICT_EVENT_SECRET: 's',
        },
      ).eventUrls,
    ).toEqual(['https://a.example/h', 'http://b.example/h']);
    expect(() => loadConfig({}, { VERDICT_EVENT_URLS: 'https://a.example/h' })).toThrow(ConfigError);
    expect(() => loadConfig({}, { VERDICT_EVENT_URLS: 'https://a.example/h' })).toThrow(
      /^VERDICT_EVENT_SECRET must be set/,
    );
    expect(() =>
      loadConfig({}, { VERDICT_EVENT_URLS: 'https://a.example/h,ftp://b.example/x', VERDICT_EVENT_SECRET: 's' }),
    ).toThrow(/^VERDICT_EVENT_URLS: got .*expected comma-separated http\(s\) URLs/);
    expect(() => loadConfig({ eventUrls: 'not a url' }, { VERDICT_EVENT_SECRET: 's' })).toThrow(/^--event-urls: /);
    expect(() => loadConfig({}, { VERDICT_EVENT_URLS: 'https://a.example/h', VERDICT_EVENT_SECRET: 's\n' })).toThrow(
      /^VERDICT_EVENT_SECRET contains a line break/,
    );
  });

  it('a library worker is refused at start without a secret or with a bad URL', async () => {
    const fx = await makeFixture([flagSet]);
    const cfg = (events: Partial<WorkerSettings>): WorkerSettings => ({
      concurrency: 1,
      tickMs: 50,
      leaseMs: 60_000,
      passLimit: 20,
      abandonLimit: 8,
      metricsPort: undefined,
      metricsHost: '127.0.0.1',
      requestsPerMinute: undefined,
      inputTokensPerMinute: undefined,
      dailyTokenCap: undefined,
      driftSweepPerMinute: 0,
      pruneIntervalMs: 0,
      retentionHistoryMs: 1,
      walCheckpointMs: 60_000,
      ...events,
    });
    const run = (events: Partial<WorkerSettings>) =>
      runWorker({
        cfg: cfg(events),
        store: fx.store,
        registry: fx.registry,
        provider: provider(),
        logger: silentLogger,
        untilIdle: true,
      });
    await expect(run({ eventUrls: ['https://a.example/h'] })).rejects.toThrow(/^eventSecret must be set/);
    await expect(run({ eventUrls: ['file:///etc/passwd'], eventSecret: 's' })).rejects.toThrow(
      /^eventUrls: entry 1 is not an http\(s\) URL/,
    );
    await fx.cleanup();
  });
});

describe('signEventBody / verifyEventSignature', () => {
  it('signs the raw bytes with HMAC-SHA256 and verifies in constant time; anything else is false', () => {
    const body = '{"id":"e1","type":"decision.surfaced"}';
    const sig = signEventBody(SECRET, body);
    expect(sig).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(signEventBody(SECRET, Buffer.from(body))).toBe(sig);
    expect(verifyEventSignature(SECRET, body, sig)).toBe(true);
    expect(verifyEventSignature(SECRET, Buffer.from(body), sig.toUpperCase().replace('SHA256=', 'sha256='))).toBe(true);
    expect(verifyEventSignature(SECRET, `${body} `, sig)).toBe(false);
    expect(verifyEventSignature('other', body, sig)).toBe(false);
    expect(verifyEventSignature(SECRET, body, undefined)).toBe(false);
    expect(verifyEventSignature(SECRET, body, sig.slice(0, -2))).toBe(false);
    expect(verifyEventSignature(SECRET, body, sig.replace('sha256=', 'sha1='))).toBe(false);
    expect(verifyEventSignature(SECRET, body, 'sha256=zz' + sig.slice(9))).toBe(false);
    expect(() => signEventBody('', body)).toThrow(TypeError);
  });
});

/** Polls `cond` every 10 ms (real time: the worker's own progress, not a lease or a backoff), failing after 10 s. */
async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (cond()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('until: condition not met within 10 s');
}

function h0<T>(xs: T[]): T {
  return xs[0];
}
