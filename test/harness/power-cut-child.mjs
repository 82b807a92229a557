// The process a power-cut test runs under strace (test/store/power-cut.test.ts): the built
// library's HTTP write doors and a worker drain, one after the other, on one SQLite file. Every
// acknowledgement is written to the acks file with a synchronous write, so the trace orders it
// among the database's own writes and syncs: `item <ref>` once POST /v1/items answered 201,
// `answer <id>` once a drain returned and a read of item_decisions shows the row.
// argv: database path, acks path, number of writes, mode (`own`: Verdict opens the file;
// `host-normal`: a host handle with synchronous = NORMAL, the control that shows the simulation
// can see a loss).
import { openSync, writeSync } from 'node:fs';
import Database from 'better-sqlite3';
import { createVerdict, defineQuestionSet, noul } from '../../dist/index.js';
import { createApiServer } from '../../dist/server/api-server.js';

const [dbPath, acksPath, writesArg, mode] = process.argv.slice(2);
const writes = Number(writesArg);
const acks = openSync(acksPath, 'w');
const ack = (line) => writeSync(acks, `${line}\n`);

const triage = defineQuestionSet({
  name: 'triage',
  questions: { blocked: noul('Is the item blocked on something outside the team?') },
  quietPeriodMs: 0,
});
let database = dbPath;
if (mode === 'host-normal') {
  const host = new Database(dbPath);
  host.pragma('journal_mode = WAL');
  host.pragma('synchronous = NORMAL');
  database = { sqlite: host };
}
const v = await createVerdict({ database, sets: [triage], provider: 'fake' });
const token = (await v.tokens.create({ workspace: 'acme', role: 'admin', createWorkspace: true })).token;
const app = await createApiServer(v, {});
const headers = { authorization: `Bearer ${token}` };
const post = (url, payload) => app.inject({ method: 'POST', url, headers, payload });
if ((await post('/v1/collections', { slug: 'task' })).statusCode !== 201) throw new Error('collection not created');
const reader = new Database(dbPath, { readonly: true });
const answers = reader.prepare('SELECT id FROM item_decisions WHERE id > ? ORDER BY id');
let lastAnswer = 0;
ack('ready');
for (let i = 0; i < writes; i++) {
  const r = await post('/v1/items', { collection: 'task', ref: `r${i}`, title: `item ${i}` });
  if (r.statusCode !== 201) throw new Error(`write ${i} answered ${r.statusCode}`);
  ack(`item r${i}`);
  if (i % 8 === 7) {
    await v.worker({ concurrency: 1 }).runUntilIdle();
    for (const { id } of answers.all(lastAnswer)) {
      ack(`answer ${id}`);
      lastAnswer = id;
    }
  }
}
ack('done');
process.exit(0); // no close: the trace ends as a cut would find it
