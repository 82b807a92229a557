/**
 * Durations as a config file writes them: a whole number with a unit (`7d`, `36h`, `90m`, `30s`,
 * `500ms`, `2w`), or a bare number of milliseconds. Used by `maxAge` (DESIGN §5.2).
 */

/** Milliseconds per unit. */
const DURATION_UNITS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const;

/** What a duration string must look like, for error messages. */
export const DURATION_EXPECTED =
  'a whole number with a unit (ms, s, m, h, d or w), such as 7d or 36h, or a number of milliseconds';

/**
 * Parses `7d`, `36h`, `90m`, `30s`, `500ms`, `2w` (whole numbers, optional space before the unit)
 * into milliseconds; null when the text is not such a duration or overflows a safe integer.
 */
export function parseDuration(text: string): number | null {
  const m = /^\s*(\d+)\s*(ms|s|m|h|d|w)\s*$/.exec(text);
  if (!m) return null;
  const ms = Number(m[1]) * DURATION_UNITS[m[2] as keyof typeof DURATION_UNITS];
  return Number.isSafeInteger(ms) ? ms : null;
}

/** Milliseconds in the largest unit up to days that divides them exactly: `7d`, `36h`, `1500ms`. */
export function formatDuration(ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    const per = DURATION_UNITS[unit];
    if (ms !== 0 && ms % per === 0) return `${ms / per}${unit}`;
  }
  return `${ms}ms`;
}

/** Milliseconds as a short human duration for readers (`1h 02m`, `3m 05s`, `45s`, `320ms`): `verdict status` and the dashboard. */
export function formatElapsed(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  const h = Math.floor(m / 60);
  return `${h}h ${String(m % 60).padStart(2, '0')}m`;
}
