/**
 * A loggable name for an error: its code or class, never its message (it may carry provider text).
 * The driver's code is looked for along the `cause` chain first (up to 5 deep), since the ORM wraps
 * a failed statement in an error of its own without one (drizzle's `DrizzleQueryError`, with the
 * driver's error as `cause`): `40P01` (Postgres deadlock), `SQLITE_FULL`, `ECONNRESET`. Without any
 * code, the first class name along the chain that says more than `Error`.
 */
export function errCode(err: unknown): string {
  const chain: object[] = [];
  for (let e: unknown = err; e && typeof e === 'object' && chain.length < 5 && !chain.includes(e); e = (e as { cause?: unknown }).cause) chain.push(e);
  for (const e of chain) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code) return code;
  }
  const names = chain.map((e) => (e as { name?: unknown }).name).filter((n): n is string => typeof n === 'string' && n !== '');
  return names.find((n) => n !== 'Error') ?? names[0] ?? typeof err;
}
