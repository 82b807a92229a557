import { afterAll, describe, expect, it } from 'vitest';
import { chartViewsParsed, renderStackedBars, stackedBarsSpec } from '../../src/dashboard/charts.js';
import { createApiServer, createVerdict, type Verdict } from '../../src/index.js';
import { waitFor } from '../harness/cli-process.js';

/**
 * A listening server parses its dashboard charts before the first page asks (dashboard-routes.ts,
 * the `onListen` hook): the first spend page a person opens after a start reuses the kept views
 * (charts.ts `renderStackedBars`) instead of importing Vega and parsing six specs in the request.
 * Its own file: the kept views are module state, which another test's pages would fill first.
 */

let v: Verdict | undefined;
let app: Awaited<ReturnType<typeof createApiServer>> | undefined;
afterAll(async () => {
  await app?.close();
  await v?.close();
});

describe('dashboard charts at start', () => {
  it('are parsed once the server listens, and the spend page then parses none of its own', async () => {
    v = await createVerdict({ database: ':memory:', provider: 'fake' });
    const token = (await v.tokens.create({ workspace: 'w', role: 'admin', name: 'ops', createWorkspace: true })).token;
    app = await createApiServer(v, { rateLimitPerMinute: 1_000_000 });
    await app.ready();
    expect(chartViewsParsed(), 'ready (as inject) parses nothing').toBe(0);
    await app.listen({ host: '127.0.0.1', port: 0 });
    // Six spend charts (calls, tokens, cost per hour and per day) and the queue's throughput chart.
    await waitFor(() => chartViewsParsed() === 7, 120_000);

    const login = await app.inject({ method: 'GET', url: '/ui/login' });
    const csrfCookie = login.cookies.find((c) => c.name === 'verdict_csrf')!;
    const csrf = /name="_csrf" value="([^"]+)"/.exec(login.body)![1];
    const session = await app.inject({
      method: 'POST',
      url: '/ui/login',
      cookies: { verdict_csrf: csrfCookie.value },
      payload: { _csrf: csrf, token },
    });
    const cookie = session.cookies.find((c) => c.name === 'verdict_session')!;
    const spend = await app.inject({ method: 'GET', url: '/ui/spend', cookies: { verdict_session: cookie.value } });
    expect(spend.statusCode).toBe(200);
    expect(spend.body.match(/<svg/g), 'the page drew its six charts').toHaveLength(6);
    expect(chartViewsParsed(), 'the spend page reused the views parsed at start').toBe(7);
  }, 180_000);

  it('two first renders of one chart at once parse it once (the parse at start racing a request)', async () => {
    const before = chartViewsParsed();
    const spec = stackedBarsSpec({
      title: 'race',
      yTitle: 'calls',
      buckets: ['a', 'b'],
      data: [{ x: 'a', series: 'm', value: 2 }],
      width: 321,
      height: 50,
    });
    const [a, b] = await Promise.all([renderStackedBars(spec), renderStackedBars(spec)]);
    expect(a).toBe(b);
    expect(chartViewsParsed()).toBe(before + 1);
  });
});
