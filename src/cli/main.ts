#!/usr/bin/env node
// URI filenames let a read open a database whose folder it may not write (store/sqlite/open.ts);
// the driver reads this once, when it loads, so it is set before anything opens a database.
process.env.SQLITE_USE_URI ??= '1';
const { main } = await import('./program.js');

process.exitCode = await main(process.argv);
