/**
 * Test seam for the built CLI (`node --import`): moves the process's clock forward by
 * VERDICT_TEST_CLOCK_OFFSET_MS milliseconds (Date.now and `new Date()`), so a real `dist`
 * process runs days later without a test sleeping. The store reads time through Date.now
 * (clock.ts systemClock), so leases, expiry and as_of all see the moved clock.
 */
const offset = Number(process.env.VERDICT_TEST_CLOCK_OFFSET_MS ?? 0);
if (!Number.isFinite(offset)) throw new Error('VERDICT_TEST_CLOCK_OFFSET_MS must be a number of milliseconds');
const RealDate = Date;
const realNow = RealDate.now.bind(RealDate);
class MovedDate extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(realNow() + offset);
    else super(...args);
  }
  static now() {
    return realNow() + offset;
  }
}
globalThis.Date = MovedDate;
