import { join } from 'node:path';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { readFileSync } from 'node:fs';
import { seedJobs } from '/work/wt/event-loop-sqlite/scripts/bench-drain.js';
import { reoweAll, ROOT, spawnDist } from '/work/wt/event-loop-sqlite/scripts/fault-support.js';
const d = mkdtempSync(join(tmpdir(), 'dbg-'));
const file = join(d, 'v.db');
await seedJobs(file, 1000);
for (const name of ['fresh', 'answered']) {
  if (name === 'answered') await reoweAll(file);
  const probeFile = join(d, name + '.json');
  const w = spawnDist(process.env.R ?? ROOT, ['worker', '--database-url', file, '--provider', 'fake', '--tick-ms', '50', '--until-idle'], { probeFile });
  const ex = await w.exited; const st = await w.started;
  const p = JSON.parse(readFileSync(probeFile, 'utf8'));
  console.log(name, ex, 'ticks', p.ticks, 'exit at', ex.at - st, p.gaps.map(([e, g, c]: [number, number, number]) => `${e - g - st}..${e - st}(${c})`).join(' '));
  console.log(w.stdout());
}
