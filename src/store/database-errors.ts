import { DatabaseNotFound, DatabaseUnavailable } from '../errors.js';

/**
 * How a database is named in messages and log lines: a SQLite path as given, or a Postgres URL
 * reduced to `postgres://host:port/db` (never the user or the password).
 */
export function databaseLabel(url: string): string {
  if (!/^postgres(ql)?:\/\//.test(url)) return url;
  try {
    const u = new URL(url);
    return `postgres://${u.host || 'localhost'}${u.pathname && u.pathname !== '/' ? u.pathname : ''}`;
  } catch {
    return 'postgres://(unparsable URL)';
  }
}

/** The driver's error code (`SQLITE_CANTOPEN`, `ECONNREFUSED`, `28P01`…), or the error's class name. */
function codeOf(err: unknown): string {
  const e = err as { code?: unknown; name?: unknown };
  if (typeof e?.code === 'string' && e.code) return e.code;
  // node-postgres wraps a refused connection to every address of a host in an AggregateError.
  const inner = (err as { errors?: unknown[] })?.errors?.[0];
  if (inner) return codeOf(inner);
  return typeof e?.name === 'string' ? e.name : 'error';
}

/**
 * Turns a driver error met while opening or first reaching a database into a Verdict error whose
 * message reads `<what>; <how to fix>` and names the database by `label` (see databaseLabel) and
 * the driver's code only (driver messages may quote SQL or row data). Errors that are already
 * Verdict's pass through.
 * @returns DatabaseNotFound for a Postgres database that does not exist (3D000), else
 *   DatabaseUnavailable with the driver error as `cause`.
 */
export function databaseError(err: unknown, label: string): Error {
  if (err instanceof DatabaseNotFound || err instanceof DatabaseUnavailable) return err;
  const code = codeOf(err);
  const unavailable = (what: string, fix: string) => new DatabaseUnavailable(`${what} (${code}); ${fix}`, { cause: err });
  switch (code) {
    case 'SQLITE_CANTOPEN':
    case 'EACCES':
    case 'EPERM':
    case 'ENOTDIR':
      return unavailable(`cannot open the database at ${label}`, 'check that its folder exists and that you may read it (and write it, for commands that write)');
    case 'SQLITE_READONLY':
    case 'SQLITE_READONLY_DIRECTORY':
    case 'SQLITE_READONLY_DBMOVED':
    case 'SQLITE_READONLY_CANTINIT':
    case 'SQLITE_READONLY_CANTLOCK':
    case 'EROFS':
      return unavailable(`the database at ${label} cannot be written`, 'give this user write access to the file and its folder, or run a read command (status, show, flags)');
    case 'SQLITE_NOTADB':
      return unavailable(`${label} is not a SQLite database`, 'check --database-url / VERDICT_DATABASE_URL');
    case 'SQLITE_CORRUPT':
      return unavailable(`the database at ${label} is corrupt`, 'restore it from a backup');
    case 'SQLITE_FULL':
    case 'ENOSPC':
      return unavailable(`the disk holding ${label} is full`, 'free space, then run the command again (nothing owed was lost)');
    case 'ECONNREFUSED':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
    case 'ECONNRESET':
      return unavailable(`cannot reach the database at ${label}`, 'check that the server is running and that --database-url / VERDICT_DATABASE_URL names its host and port');
    case '28P01':
    case '28000':
      return unavailable(`the database at ${label} refused the login`, 'check the user and password in --database-url / VERDICT_DATABASE_URL');
    case '3D000':
      return new DatabaseNotFound(`no database at ${label} (3D000); create it (e.g. \`createdb\`) or fix --database-url / VERDICT_DATABASE_URL`);
    default:
      return unavailable(`cannot open the database at ${label}`, 'check --database-url / VERDICT_DATABASE_URL; set VERDICT_DEBUG=1 for the stack');
  }
}
