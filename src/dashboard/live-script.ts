/**
 * The dashboard's one script, served at `/ui/assets/live.js` to pages that change while open (the
 * queue, the flags, an item with a job owed): every `LIVE_REFRESH_MS` it fetches the same URL and
 * swaps in each region marked `data-live` (by id) whose markup changed, so the page stays current
 * without a reload: the scroll position, open details and the rest of the page stay as they are.
 * A progressive enhancement: without it every page reads the same, only staler.
 *
 * A region a person is working in is left alone: one holding the focus, a ticked box or a typed
 * value. Hidden tabs do not poll; returning to one refreshes at once. A failed fetch (server
 * restarting, session ended) is skipped quietly until the next tick. The CSRF fields differ on
 * every render, so they are left out of the comparison.
 */

/** How often a live page asks again, ms: a worker's claim loop answers within seconds, and a read per 5 s per open tab is cheap. */
export const LIVE_REFRESH_MS = 5_000;

export const LIVE_SCRIPT = `(() => {
  'use strict';
  const main = document.getElementById('main');
  if (!main || !window.fetch || !window.DOMParser) return;
  const every = Number(main.dataset.liveMs) || ${LIVE_REFRESH_MS};
  const plain = (el) => el.innerHTML.replace(/name="_csrf" value="[^"]*"/g, '');
  const busy = (el) => {
    if (el.contains(document.activeElement) && document.activeElement !== document.body) return true;
    for (const i of el.querySelectorAll('input,textarea,select')) {
      if ((i.type === 'checkbox' || i.type === 'radio') ? i.checked !== i.defaultChecked : (i.tagName === 'SELECT' ? [...i.options].some((o) => o.selected !== o.defaultSelected) : i.value !== i.defaultValue)) return true;
    }
    return false;
  };
  let running = false;
  const refresh = async () => {
    if (running || document.visibilityState === 'hidden') return;
    running = true;
    try {
      const r = await fetch(location.href, { credentials: 'same-origin', headers: { accept: 'text/html' }, redirect: 'manual' });
      if (!r.ok) return;
      const doc = new DOMParser().parseFromString(await r.text(), 'text/html');
      for (const el of document.querySelectorAll('[data-live][id]')) {
        const next = doc.getElementById(el.id);
        if (!next || busy(el) || plain(next) === plain(el)) continue;
        el.innerHTML = next.innerHTML;
      }
      main.dataset.liveAt = String(Date.now());
    } catch (e) {
      // the next tick tries again
    } finally {
      running = false;
    }
  };
  setInterval(refresh, every);
  document.addEventListener('visibilitychange', () => { if (document.visibilityState === 'visible') refresh(); });
})();
`;
