/**
 * Items seeded for the multi-process drain tests: two jobs each (attention and effort), so the
 * default 5,000 items are the 10,000 jobs DESIGN's scale checks ask for. VERDICT_SCALE_ITEMS
 * shrinks it for a quick local run.
 */
export const SCALE_ITEMS = Number(process.env.VERDICT_SCALE_ITEMS || 5_000);
