/**
 * Thin wrapper: `npx tsx scripts/backfill.ts --set NAME [--workspace SLUG] [--dry-run] [--drain] [--yes]`
 * is `verdict backfill ...` (src/cli/backfill.ts; the logic is src/backfill/backfill.ts, DESIGN §11).
 */
import { main } from '../src/cli/program.js';

process.exitCode = await main([process.argv[0], 'verdict', 'backfill', ...process.argv.slice(2)]);
