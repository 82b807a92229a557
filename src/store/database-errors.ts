import { DatabaseNotFound, DatabaseUnavailable, ownCode } from '../errors.js';

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
  const own = ownCode(err);
  if (own) return own;
  const e = err as { name?: unknown };
  // node-postgres wraps a refused connection to every address of a host in an AggregateError.
  const inner = (err as { errors?: unknown[] })?.errors?.[0];
  if (inner) return codeOf(inner);
  return typeof e?.name === 'string' ? e.name : 'error';
}

/** The fix for a better-sqlite3 addon that does not load: rebuild it for the Node.js that runs verdict. */
const SQLITE_ADDON_FIX =
  'run `npm rebuild better-sqlite3` in the folder verdict is installed in, with the Node.js that runs verdict';

/**
 * better-sqlite3's native addon failing to load (it loads at the first database open), which says
 * nothing about the database: the addon was built for another Node.js version (`ERR_DLOPEN_FAILED`,
 * "compiled against ... NODE_MODULE_VERSION 115. This version of Node.js requires
 * NODE_MODULE_VERSION 127"), for another platform, or is missing (the `bindings` package's "Could
 * not locate the bindings file"). Only the two ABI numbers are taken from the loader's message.
 * @returns DatabaseUnavailable naming the cause and SQLITE_ADDON_FIX, or null for any other error.
 */
export function sqliteAddonError(err: unknown): DatabaseUnavailable | null {
  const e = err as { message?: unknown };
  const message = typeof e?.message === 'string' ? e.message : '';
  const dlopen = ownCode(err) === 'ERR_DLOPEN_FAILED';
  if (!dlopen && !/better_sqlite3\.node|Could not locate the bindings file/.test(message)) return null;
  const abi = [...message.matchAll(/NODE_MODULE_VERSION (\d+)/g)].map((m) => m[1]);
  const why =
    abi.length === 2
      ? `it was built for another Node.js version (NODE_MODULE_VERSION ${abi[0]}, this Node.js ${process.version} needs ${abi[1]})`
      : dlopen
        ? 'it was built for another Node.js version or platform'
        : 'it was never built (its install script did not run)';
  return new DatabaseUnavailable(
    `better-sqlite3's native addon does not load, so no SQLite database can be opened: ${why} (${dlopen ? 'ERR_DLOPEN_FAILED' : 'no addon'}); ${SQLITE_ADDON_FIX}`,
    { cause: err },
  );
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
  const addon = sqliteAddonError(err);
  if (addon) return addon;
  const code = codeOf(err);
  const unavailable = (what: string, fix: string) =>
    new DatabaseUnavailable(`${what} (${code}); ${fix}`, { cause: err });
  switch (code) {
    case 'SQLITE_CANTOPEN':
    case 'EACCES':
    case 'EPERM':
    case 'ENOTDIR':
      return unavailable(
        `cannot open the database at ${label}`,
        'check that its folder exists and that you may read it (and write it, for commands that write)',
      );
    case 'SQLITE_READONLY':
    case 'SQLITE_READONLY_DIRECTORY':
    case 'SQLITE_READONLY_DBMOVED':
    case 'SQLITE_READONLY_CANTINIT':
    case 'SQLITE_READONLY_CANTLOCK':
    case 'EROFS':
      return unavailable(
        `the database at ${label} cannot be written`,
        'give this user write access to the file and its folder, or run a read command (status, show, flags)',
      );
    case 'SQLITE_NOTADB':
      return unavailable(`${label} is not a SQLite database`, 'check --database-url / VERDICT_DATABASE_URL');
    case 'SQLITE_CORRUPT':
      return unavailable(`the database at ${label} is corrupt`, 'restore it from a backup');
    case 'SQLITE_FULL':
    case 'ENOSPC':
      return unavailable(
        `the disk holding ${label} is full`,
        'free space, then run the command again (nothing owed was lost)',
      );
    case 'ECONNREFUSED':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
    case 'ECONNRESET':
      return unavailable(
        `cannot reach the database at ${label}`,
        'check that the server is running and that --database-url / VERDICT_DATABASE_URL names its host and port',
      );
    case '28P01':
    case '28000':
      return unavailable(
        `the database at ${label} refused the login`,
        'check the user and password in --database-url / VERDICT_DATABASE_URL',
      );
    case '3D000':
      return new DatabaseNotFound(
        `no database at ${label} (3D000); create it (e.g. \`createdb\`) or fix --database-url / VERDICT_DATABASE_URL`,
      );
    default:
      return unavailable(
        `cannot open the database at ${label}`,
        'check --database-url / VERDICT_DATABASE_URL; set VERDICT_DEBUG=1 for the stack',
      );
  }
}
