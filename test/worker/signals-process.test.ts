import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { spawnCli, waitFor } from '../harness/cli-process.js';

/**
 * Shutdown signals of the real built worker (DESIGN §10, README "a second signal exits at once"):
 * the handlers cover the whole command, so a signal while the database is still being reached is
 * seen, and a second one exits 1 at once with its log line.
 *
 * The window is made deterministic with a PostgreSQL address that accepts the connection and never
 * answers: the worker sits in its first database call until it is signalled.
 */

let server: Server | null = null;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = null;
});

async function silentPostgres(): Promise<{ url: string; connected: () => boolean }> {
  let connected = false;
  server = createServer((s) => {
    connected = true;
    sockets.push(s);
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  return { url: `postgres://verdict@127.0.0.1:${port}/verdict`, connected: () => connected };
}

describe('worker shutdown signals', () => {
  it('a SIGTERM before the worker started is handled; a second SIGTERM logs "second signal" and exits 1 at once', async () => {
    const pgSilent = await silentPostgres();
    const w = spawnCli(['worker', '--database-url', pgSilent.url, '--provider', 'fake', '--grace-ms', '600000']);
    await waitFor(pgSilent.connected, 30_000);
    w.child.kill('SIGTERM');
    await waitFor(() => w.stderr().includes('"shutting down"'), 30_000);
    expect(w.child.exitCode).toBeNull(); // still waiting on the database: the grace period is long
    w.child.kill('SIGTERM');
    const exit = await w.exited;
    expect(exit).toEqual({ code: 1, signal: null });
    const line = w
      .stderr()
      .split('\n')
      .find((l) => l.includes('second signal'));
    expect(line && JSON.parse(line)).toMatchObject({
      level: 40,
      signal: 'SIGTERM',
      first: 'SIGTERM',
      msg: 'second signal: exiting at once',
    });
  }, 60_000);
});
