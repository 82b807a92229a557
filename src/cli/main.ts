#!/usr/bin/env node
// URI filenames let a read open a database whose folder it may not write (store/sqlite/open.ts);
// the driver reads this once, when it loads, so it is set before anything opens a database.
process.env.SQLITE_USE_URI ??= '1';
// A reader that closes the pipe early (`verdict review --help | head`) ends the command quietly:
// there is no one left to tell, so no stack trace and no message, only the exit code so far.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    process.exit(typeof process.exitCode === 'number' ? process.exitCode : 0);
  });
}
const { main } = await import('./program.js');

process.exitCode = await main(process.argv);
