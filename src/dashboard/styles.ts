/**
 * The dashboard's one stylesheet, served by Verdict at `/ui/assets/dashboard.css` (no external
 * fonts or styles: the system font stack). Phone-width first: tables scroll sideways inside their
 * box, the nav wraps, and the layout widens at 48em. Focus is always visible for keyboard users.
 */
export const DASHBOARD_CSS = `
:root{--fg:#1b1f24;--muted:#5b6470;--line:#d8dde3;--bg:#fff;--soft:#f4f6f8;--accent:#1f4e8c;--warn:#9a5b00;--bad:#b3261e;--ok:#1e7a3c}
*{box-sizing:border-box}
html{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;font-size:15px;line-height:1.45;color:var(--fg);background:var(--bg)}
body{margin:0}
a{color:var(--accent)}
a:focus-visible,button:focus-visible,input:focus-visible,select:focus-visible,summary:focus-visible{outline:3px solid #f0b400;outline-offset:2px}
.skip{position:absolute;left:-999px;top:0;background:#fff;padding:.5em}
.skip:focus{left:.5em}
header{background:var(--fg);color:#fff;padding:.5em 1em;display:flex;flex-wrap:wrap;gap:.25em 1em;align-items:center}
header .brand{font-weight:700;margin-right:1em}
header nav{display:flex;flex-wrap:wrap;gap:.25em .9em}
header a{color:#fff;text-decoration:none;padding:.2em 0}
header a[aria-current=page]{border-bottom:2px solid #f0b400}
header .who{margin-left:auto;font-size:.85em;opacity:.85;display:flex;gap:.6em;align-items:center}
header .who button{background:none;border:1px solid #fff6;color:#fff;border-radius:4px;padding:.15em .6em;cursor:pointer}
main{padding:1em;max-width:72em;margin:0 auto}
h1{font-size:1.35em;margin:.2em 0 .6em;overflow-wrap:anywhere}
h2{font-size:1.1em;margin:1.4em 0 .5em;border-bottom:1px solid var(--line);padding-bottom:.2em}
h3{font-size:1em;margin:1em 0 .3em}
.muted{color:var(--muted)}
.table-wrap{overflow-x:auto;border:1px solid var(--line);border-radius:6px}
table{border-collapse:collapse;width:100%;font-size:.92em}
th,td{text-align:left;padding:.4em .6em;border-bottom:1px solid var(--line);vertical-align:top}
th{background:var(--soft);font-weight:600;white-space:nowrap}
td.title{overflow-wrap:anywhere;max-width:32em}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr:last-child td{border-bottom:0}
form.filters{display:flex;flex-wrap:wrap;gap:.5em 1em;align-items:end;margin:0 0 1em;padding:.6em;background:var(--soft);border-radius:6px}
label{display:flex;flex-direction:column;font-size:.85em;gap:.15em}
input,select,button,textarea{font:inherit}
input,select{padding:.3em .4em;border:1px solid #aab3bd;border-radius:4px;background:#fff;min-width:8em}
button{padding:.35em .8em;border:1px solid var(--accent);border-radius:4px;background:var(--accent);color:#fff;cursor:pointer}
button.secondary{background:#fff;color:var(--accent)}
button.danger{background:#fff;color:var(--bad);border-color:var(--bad)}
.inline{display:inline}
.pbar{position:relative;display:inline-block;width:8em;height:.9em;background:#e6eaef;border-radius:3px;vertical-align:middle}
.pbar>span{position:absolute;left:0;top:0;bottom:0;background:var(--accent);border-radius:3px}
.pbar>i{position:absolute;top:-.2em;bottom:-.2em;width:2px;background:var(--bad)}
.badge{display:inline-block;font-size:.78em;padding:.05em .45em;border-radius:9px;border:1px solid currentColor;margin:0 .2em;white-space:nowrap}
.badge.stale{color:var(--warn)}
.badge.human{color:var(--ok)}
.badge.bad{color:var(--bad)}
.badge.ok{color:var(--ok)}
.cards{display:grid;grid-template-columns:1fr;gap:.8em}
.card{border:1px solid var(--line);border-radius:6px;padding:.7em .8em}
.card h3{margin-top:0}
dl.fields{display:grid;grid-template-columns:max-content 1fr;gap:.2em .8em;margin:0}
dl.fields dt{color:var(--muted)}
dl.fields dd{margin:0;overflow-wrap:anywhere}
ol.timeline{list-style:none;padding:0;margin:0;border-left:2px solid var(--line)}
ol.timeline li{padding:.3em 0 .6em .8em;position:relative}
ol.timeline li::before{content:"";position:absolute;left:-6px;top:.7em;width:10px;height:10px;border-radius:50%;background:var(--accent)}
.chart svg{max-width:100%;height:auto}
.chart{margin:.6em 0}
.chart.wide svg{width:100%}
.legend{display:flex;flex-wrap:wrap;gap:.3em 1em;align-items:center;font-size:.9em;margin:.4em 0}
.legend .key{display:inline-flex;align-items:center;gap:.35em}
.legend i{display:inline-block;width:.9em;height:.9em;border-radius:2px}
.pager{display:flex;gap:1em;margin:.8em 0;align-items:center}
.notice{padding:.6em .8em;border-radius:6px;background:#eef5ec;border:1px solid #b9d9b4;margin:0 0 1em}
.notice.error{background:#fbeeed;border-color:#e3b4b0}
.verdict-form{display:flex;flex-wrap:wrap;gap:.4em;align-items:end;margin-top:.5em}
.login{max-width:26em;margin:3em auto}
.login input{width:100%}
.stats{display:flex;flex-wrap:wrap;gap:.6em 1.6em;margin:.3em 0 .8em}
.stats div{display:flex;flex-direction:column}
.stats b{font-size:1.25em;font-variant-numeric:tabular-nums}
.bulk{display:flex;flex-wrap:wrap;gap:.4em;align-items:center;margin:0 0 .6em}
td.actions{white-space:nowrap}
td.actions button{margin:0 .2em .2em 0;padding:.25em .6em}
.sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}
.chips{display:inline-flex;flex-wrap:wrap;gap:.25em}
.chip{display:inline-block;font-size:.82em;padding:.05em .55em;border-radius:9px;background:#e8eef6;color:#1f3b63}
.text{white-space:pre-wrap;overflow-wrap:anywhere;background:var(--soft);border-radius:6px;padding:.6em .8em;max-height:40em;overflow-y:auto}
ol.comments{list-style:none;padding:0;margin:0;display:grid;gap:.7em}
ol.comments .meta{margin:0 0 .2em;font-size:.88em}
ul.links{padding-left:1.2em}
.item-layout{display:grid;grid-template-columns:minmax(0,1fr);gap:0 1.6em}
.item-layout>*{min-width:0}
@media (max-width:47.99em){th.wide,td.wide{display:none}td.title{min-width:9em}.pbar{width:4.5em}}
@media (min-width:48em){main{padding:1.2em 1.6em}}
@media (min-width:64em){.item-layout{grid-template-columns:minmax(0,1fr) minmax(0,1fr)}}
`;
