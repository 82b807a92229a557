/**
 * HTML built by escaping every interpolated value (the dashboard renders tracker text: titles,
 * fields, notes, question keys). `html\`<p>${title}</p>\`` escapes `title`; a value that is already
 * `Html` (another template, or `trusted` for markup Verdict itself produced, such as a Vega SVG) is
 * inserted as is; arrays are joined; null, undefined and false render nothing.
 */

/** Markup that is safe to insert: built by `html` or marked `trusted`. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for an element body or a quoted attribute value. */
function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

type Part = Html | string | number | boolean | null | undefined | readonly Part[];

function render(v: Part): string {
  if (v === null || v === undefined || v === false) return '';
  if (v instanceof Html) return v.text;
  if (Array.isArray(v)) return v.map(render).join('');
  return escapeHtml(String(v));
}

/** The tagged template: literal parts as written, values escaped (see the module comment). */
export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1];
  return new Html(out);
}

/** Markup Verdict produced itself (never tracker or provider text). */
export function trusted(markup: string): Html {
  return new Html(markup);
}
