import { describe, expect, it } from 'vitest';
import { itemBody, type ItemPageData } from '../../src/dashboard/item-page.js';
import type { Viewer } from '../../src/dashboard/layout.js';

/**
 * The item page's own check on the source link (DESIGN §16.4). The store refuses a source URL that
 * is not absolute http(s) at every write door, so through the doors the page never sees one; a row
 * written around them (an older database, a hand edit, another program) reaches the page as it is,
 * which is where a `javascript:` URL would run. So the page is rendered here with such rows.
 */
function page(sourceUrl: string | null): ItemPageData {
  return {
    item: {
      ref: 'T-1',
      title: 'a title',
      content: 'body',
      fieldsObject: { status: 'open' },
      deletedAt: null,
      sourceUrl,
    },
    collection: 'task',
    comments: [],
    links: [],
    decisions: [],
    sets: [],
    history: { itemId: 'i1', ref: 'T-1', entries: [] },
    verdicts: [],
    now: Date.UTC(2026, 0, 1),
  };
}

const viewer = { token: { id: 't1', name: 'admin', role: 'admin', workspaceId: null }, csrf: 'c' } as unknown as Viewer;

describe('the item page source link', () => {
  it('links an http(s) source URL, opening without a referrer', async () => {
    const body = String(await itemBody(viewer, page('https://github.com/o/r/issues/1')));
    expect(body).toContain(
      '<a href="https://github.com/o/r/issues/1" rel="noopener noreferrer" target="_blank">Open in github.com ↗</a>',
    );
  });

  it('shows no link for a stored URL that is not http(s), nor for none', async () => {
    for (const url of [
      'javascript:alert(1)',
      'JavaScript:alert(1)',
      'data:text/html,<script>alert(1)</script>',
      'ftp://example.com/x',
      '//example.com/x',
      null,
    ]) {
      const body = String(await itemBody(viewer, page(url)));
      expect(body, String(url)).not.toContain('class="source"');
      expect(body, String(url)).not.toMatch(/href="(javascript|data|ftp):/i);
    }
  });
});
