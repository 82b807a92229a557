/**
 * The text content of each MCP tool's result: a few lines in words that say what the structured
 * content holds (counts, refs, keys, the answers in force), so a client that shows only text is
 * not left with nothing, and an agent's context does not hold the same result twice. The data
 * itself is the structured content; these never carry item text beyond a ref.
 */

/** Most rows a summary names; the rest are counted. */
const NAMED_MAX = 5;

type Answer = { type?: string; noul?: number; choice?: string; score?: number } | null | undefined;

/** An answer in a few characters: `p=0.82`, `choice=bug`, `score=3`. */
function answerText(a: unknown): string {
  const x = a as Answer;
  if (!x || typeof x !== 'object') return 'none';
  if (x.type === 'noul') return `p=${fmt(x.noul)}`;
  if (x.type === 'choice') return `choice=${String(x.choice)}`;
  if (x.type === 'score') return `score=${fmt(x.score)}`;
  return 'answered';
}

const fmt = (n: unknown): string => (typeof n === 'number' ? String(Math.round(n * 1000) / 1000) : String(n));
const plural = (n: number, one: string, many = `${one}s`): string => `${n} ${n === 1 ? one : many}`;
const more = (n: number): string => (n > 0 ? `, and ${n} more` : '');

interface ItemGetLike {
  item: { ref: string; collection: string };
  decisions: Array<{
    questionSet: string;
    questionKey: string;
    answer: unknown;
    current: boolean;
    staleReason: string | null;
    surfacing: string;
    source: string;
  }>;
  sets: Array<{ questionSet: string; applies: boolean; job: { state: string } | null }>;
  verdicts: unknown[];
}

/** `item_get`: the item's ref, each decision in one line, where the sets stand, how many verdicts. */
export function itemGetSummary(o: ItemGetLike): string {
  const current = o.decisions.filter((d) => d.current).length;
  const lines = [
    `${o.item.ref} (${o.item.collection}): ${plural(o.decisions.length, 'decision')}, ${current} current, ${o.decisions.length - current} stale; ${plural(o.verdicts.length, 'verdict')}`,
  ];
  for (const d of o.decisions) {
    const flags = [
      d.current ? 'current' : `stale: ${d.staleReason ?? 'unknown'}`,
      d.surfacing === 'surfaced' ? 'surfaced' : null,
      d.source === 'human' ? 'a person\u2019s value' : null,
    ].filter((x) => x !== null);
    lines.push(`- ${d.questionSet}/${d.questionKey} ${answerText(d.answer)} (${flags.join(', ')})`);
  }
  const applying = o.sets.filter((s) => s.applies).map((s) => s.questionSet + (s.job ? ` (job ${s.job.state})` : ''));
  const not = o.sets.filter((s) => !s.applies).map((s) => s.questionSet);
  lines.push(
    `sets applying: ${applying.join(', ') || 'none'}${not.length > 0 ? `; not applying: ${not.join(', ')}` : ''}`,
  );
  return lines.join('\n');
}

interface FlagsLike {
  sets: Array<{
    set: string;
    total: number;
    offset: number;
    nextOffset: number | null;
    failing: boolean;
    rows: Array<{ ref: string; questionKey: string; p: number; current: boolean }>;
  }>;
}

/** `flags_list`: per set, how many keys surface, the highest few, and the next page's offset. */
export function flagsListSummary(o: FlagsLike): string {
  return o.sets
    .map((s) => {
      const head = `${s.set}: ${plural(s.total, 'surfaced key')}${s.failing ? ' (a job of the set is failing: some may be missing)' : ''}`;
      if (s.rows.length === 0) return head;
      const named = s.rows
        .slice(0, NAMED_MAX)
        .map((r) => `${r.ref} ${r.questionKey} p=${fmt(r.p)}${r.current ? '' : ' (stale)'}`);
      const page = `rows ${s.offset + 1}\u2013${s.offset + s.rows.length}${s.nextOffset !== null ? `, next offset ${s.nextOffset}` : ''}`;
      return `${head}; ${page}: ${named.join(', ')}${more(s.rows.length - named.length)}`;
    })
    .join('\n');
}

/** `item_search`: how many items, the first few refs, and the next cursor. */
export function itemSearchSummary(o: { items: Array<{ ref: string }>; next: string | null }): string {
  const named = o.items.slice(0, NAMED_MAX).map((i) => i.ref);
  return `${plural(o.items.length, 'item')}${named.length > 0 ? `: ${named.join(', ')}${more(o.items.length - named.length)}` : ''}; ${o.next !== null ? `next page: after ${JSON.stringify(o.next)}` : 'last page'}`;
}

interface StatusLike {
  workspace: string;
  items: number;
  jobs: Array<{ due: number; waiting: number; inFlight: number; parked: number; failing: number }>;
  queue: { parked: { count: number }; failingSets: Array<{ set: string }>; workersAlive: number };
  spend: { last24h: { calls: number; costUsd: number } } | null;
}

/** `status_get`: the workspace's items and jobs in one line, failing sets, workers, spend when shown. */
export function statusGetSummary(o: StatusLike): string {
  const sum = (k: 'due' | 'waiting' | 'inFlight' | 'failing') => o.jobs.reduce((n, j) => n + j[k], 0);
  const lines = [
    `${o.workspace}: ${plural(o.items, 'item')}; jobs due ${sum('due')}, waiting ${sum('waiting')}, in flight ${sum('inFlight')}, parked ${o.queue.parked.count}, failing ${sum('failing')}; ${plural(o.queue.workersAlive, 'worker')} alive`,
  ];
  if (o.queue.failingSets.length > 0) lines.push(`failing sets: ${o.queue.failingSets.map((f) => f.set).join(', ')}`);
  if (o.spend)
    lines.push(`spend, last 24 h: ${plural(o.spend.last24h.calls, 'call')}, $${o.spend.last24h.costUsd.toFixed(4)}`);
  return lines.join('\n');
}

/** `verdict_record`: what was recorded on which key, and whether it is in force. */
export function verdictRecordSummary(
  o: { verdict: { id: number; verdict: string; questionSet: string; questionKey: string }; inForce: boolean },
  ref: string,
): string {
  const v = o.verdict;
  return `recorded verdict ${v.id} (${v.verdict}) on ${ref} ${v.questionSet}/${v.questionKey}; ${o.inForce ? 'in force: it overrides the model for reads and flags' : 'the model\u2019s answer is in force'}`;
}
