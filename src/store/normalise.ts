/**
 * Text normalisation at the write door (DESIGN §2): a lone UTF-16 surrogate becomes U+FFFD and
 * NUL is removed. Both are counted so the write's result can report them.
 */
export interface NormaliseReport {
  /** Lone surrogates replaced by U+FFFD. */
  loneSurrogates: number;
  /** NUL characters removed. */
  nulsRemoved: number;
}

export function emptyReport(): NormaliseReport {
  return { loneSurrogates: 0, nulsRemoved: 0 };
}

/** Normalises one string, adding what it changed to `report`. */
export function normaliseText(s: string, report: NormaliseReport): string {
  let out = s;
  if (!out.isWellFormed()) {
    out = out.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, () => {
      report.loneSurrogates++;
      return '\uFFFD';
    });
  }
  // NUL goes after the surrogates are repaired, so removing it cannot join two lone halves into a
  // pair that was never written.
  if (out.includes('\u0000')) {
    const before = out.length;
    out = out.replace(/\u0000/g, '');
    report.nulsRemoved += before - out.length;
  }
  return out;
}
