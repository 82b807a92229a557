/**
 * A strict parser of the Prometheus text exposition format, version 0.0.4 (the format prom-client
 * serves): `# HELP` and `# TYPE` lines, samples `name{label="value",...} value [timestamp]` with
 * the format's escapes, and the family rules (a TYPE before its samples and at most once; a
 * family's samples contiguous; histogram buckets cumulative, ending in `le="+Inf"` equal to
 * `_count`). It throws on anything else, so a test that parses a scrape proves the text is
 * well-formed, not merely that it contains some substring.
 */

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: MetricType;
  help: string | null;
  samples: Sample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

function unescapeHelp(s: string): string {
  return s.replace(/\\(\\|n)/g, (_, c: string) => (c === 'n' ? '\n' : '\\'));
}

/**
 * A sample value as Prometheus reads it: Go's strconv.ParseFloat, which takes NaN and Inf in any
 * case (prom-client writes an empty event-loop-lag mean as `Nan`).
 */
function parseValue(s: string, line: number): number {
  if (/^nan$/i.test(s)) return NaN;
  if (/^\+?inf(inity)?$/i.test(s)) return Infinity;
  if (/^-inf(inity)?$/i.test(s)) return -Infinity;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s))
    throw new Error(`line ${line}: bad value ${JSON.stringify(s)}`);
  return Number(s);
}

/** Parses `{a="x",b="y"}` starting at `i` (at "{"); returns the labels and the index after "}". */
function parseLabels(text: string, i: number, line: number): [Record<string, string>, number] {
  const labels: Record<string, string> = {};
  i++; // {
  for (;;) {
    if (text[i] === '}') return [labels, i + 1];
    const eq = text.indexOf('=', i);
    if (eq < 0) throw new Error(`line ${line}: label without "="`);
    const name = text.slice(i, eq).trim();
    if (!LABEL_NAME.test(name)) throw new Error(`line ${line}: bad label name ${JSON.stringify(name)}`);
    if (name in labels) throw new Error(`line ${line}: duplicate label ${name}`);
    i = eq + 1;
    if (text[i] !== '"') throw new Error(`line ${line}: label value must be quoted`);
    i++;
    let value = '';
    for (;;) {
      const c = text[i];
      if (c === undefined) throw new Error(`line ${line}: unterminated label value`);
      if (c === '\\') {
        const n = text[i + 1];
        if (n === '\\') value += '\\';
        else if (n === '"') value += '"';
        else if (n === 'n') value += '\n';
        else throw new Error(`line ${line}: bad escape \\${n}`);
        i += 2;
        continue;
      }
      if (c === '"') {
        i++;
        break;
      }
      if (c === '\n') throw new Error(`line ${line}: raw newline in a label value`);
      value += c;
      i++;
    }
    labels[name] = value;
    if (text[i] === ',') i++;
    else if (text[i] !== '}') throw new Error(`line ${line}: expected "," or "}" after a label`);
  }
}

/** The family a sample name belongs to, given the declared families. */
function familyOf(name: string, families: Map<string, Family>): Family | undefined {
  const direct = families.get(name);
  if (direct) return direct;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (name.endsWith(suffix)) {
      const f = families.get(name.slice(0, -suffix.length));
      if (f && (f.type === 'histogram' || (f.type === 'summary' && suffix !== '_bucket'))) return f;
    }
  }
  return undefined;
}

/**
 * Parses a whole exposition.
 * @throws Error naming the line for anything the format does not allow.
 */
export function parsePromText(text: string): Map<string, Family> {
  if (text.length > 0 && !text.endsWith('\n')) throw new Error('exposition must end with a newline');
  const families = new Map<string, Family>();
  const finished = new Set<string>();
  let current: Family | null = null;
  const lines = text.split('\n');
  for (let n = 0; n < lines.length; n++) {
    const raw = lines[n];
    const line = n + 1;
    if (raw.trim() === '') continue;
    if (raw.startsWith('#')) {
      const m = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s+(.*))?$/.exec(raw);
      if (!m) continue; // a plain comment
      const [, kind, name, rest = ''] = m;
      if (!METRIC_NAME.test(name)) throw new Error(`line ${line}: bad metric name ${JSON.stringify(name)}`);
      if (finished.has(name)) throw new Error(`line ${line}: family ${name} appears twice`);
      let f = families.get(name);
      if (!f) {
        f = { name, type: 'untyped', help: null, samples: [] };
        families.set(name, f);
      }
      if (current && current !== f) finished.add(current.name);
      current = f;
      if (kind === 'HELP') {
        if (f.help !== null) throw new Error(`line ${line}: second HELP for ${name}`);
        f.help = unescapeHelp(rest);
      } else {
        if (!TYPES.has(rest)) throw new Error(`line ${line}: bad type ${JSON.stringify(rest)}`);
        if (f.samples.length) throw new Error(`line ${line}: TYPE after samples of ${name}`);
        f.type = rest as MetricType;
      }
      continue;
    }
    const nameMatch = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(raw);
    if (!nameMatch) throw new Error(`line ${line}: a sample must start with a metric name`);
    const name = nameMatch[0];
    let i = name.length;
    let labels: Record<string, string> = {};
    if (raw[i] === '{') [labels, i] = parseLabels(raw, i, line);
    const rest = raw.slice(i).trim().split(/\s+/);
    if (rest.length < 1 || rest.length > 2 || rest[0] === '')
      throw new Error(`line ${line}: expected a value and an optional timestamp`);
    const value = parseValue(rest[0], line);
    if (rest.length === 2 && !/^-?\d+$/.test(rest[1])) throw new Error(`line ${line}: bad timestamp`);
    const f = familyOf(name, families);
    if (!f) throw new Error(`line ${line}: sample ${name} has no # TYPE`);
    if (f !== current) throw new Error(`line ${line}: samples of ${f.name} are not contiguous`);
    f.samples.push({ name, labels, value });
  }
  for (const f of families.values()) if (f.type === 'histogram') checkHistogram(f);
  return families;
}

function checkHistogram(f: Family): void {
  const series = new Map<string, { buckets: Array<[number, number]>; count?: number }>();
  const key = (l: Record<string, string>) =>
    JSON.stringify(
      Object.entries(l)
        .filter(([k]) => k !== 'le')
        .sort(([a], [b]) => (a < b ? -1 : 1)),
    );
  for (const s of f.samples) {
    const k = key(s.labels);
    const e = series.get(k) ?? { buckets: [] };
    series.set(k, e);
    if (s.name === `${f.name}_bucket`) {
      if (s.labels.le === undefined) throw new Error(`${f.name}: bucket without le`);
      e.buckets.push([parseValue(s.labels.le, 0), s.value]);
    } else if (s.name === `${f.name}_count`) e.count = s.value;
  }
  for (const [k, e] of series) {
    if (e.buckets.length === 0) throw new Error(`${f.name}${k}: no buckets`);
    for (let i = 1; i < e.buckets.length; i++) {
      if (!(e.buckets[i][0] > e.buckets[i - 1][0])) throw new Error(`${f.name}${k}: bucket bounds not increasing`);
      if (e.buckets[i][1] < e.buckets[i - 1][1]) throw new Error(`${f.name}${k}: buckets not cumulative`);
    }
    const last = e.buckets[e.buckets.length - 1];
    if (last[0] !== Infinity) throw new Error(`${f.name}${k}: last bucket is not +Inf`);
    if (e.count !== last[1])
      throw new Error(`${f.name}${k}: _count ${e.count} differs from the +Inf bucket ${last[1]}`);
  }
}

/** The value of one sample (labels must match exactly), or undefined. */
export function sampleValue(
  families: Map<string, Family>,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  for (const f of families.values()) {
    for (const s of f.samples) {
      if (s.name !== name) continue;
      const a = Object.keys(s.labels);
      if (a.length === Object.keys(labels).length && a.every((k) => s.labels[k] === labels[k])) return s.value;
    }
  }
  return undefined;
}
