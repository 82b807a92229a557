/**
 * Items seeded for the multi-process drain tests: two jobs each (attention and effort).
 * `npm run test:scale` (which CI runs beside the suite) sets VERDICT_SCALE_ITEMS=5000, the 10,000
 * jobs DESIGN's scale checks ask for; plain `npm test` drains 250 items (500 jobs) with the same
 * four processes and the same checks (each job completed exactly once, no SQLITE_BUSY), which is
 * enough for the claims to race but not minutes of draining on every run.
 */
export const SCALE_ITEMS = Number(process.env.VERDICT_SCALE_ITEMS || 250);
