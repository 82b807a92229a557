#!/usr/bin/env bash
# The input doors and the dashboard session, faulted the way an operator and an intruder would,
# against a built Verdict (ROOT/dist/cli/main.js, fake provider, the bundled sample): the sample
# re-imported with CRLF inside its strings and in NFD (DESIGN §3.1: NFC with LF at every door, so
# the same content owes nothing); invalid UTF-8, an escaped NUL and a 100,000-character id through
# the importer; a NUL ref, a lone surrogate, 5,000-deep fields and a 501-character ref through
# POST /v1/items; the dashboard cookie against /v1 and replayed after logout. Prints what each
# door answered; a person compares it with the rules (the tests named in DESIGN assert them).
# Usage: scripts/fault-doors.sh [ROOT]   (default: this checkout; run `npm run build` first)
set -u
ROOT=$(realpath "${1:-$(dirname "$0")/..}")
CLI="node $ROOT/dist/cli/main.js"
W=$(mktemp -d /tmp/f30.XXXX)
export VERDICT_DATABASE_URL=$W/a.db VERDICT_PROVIDER=fake VERDICT_LOG_LEVEL=warn
cd "$W"
echo "== checkout: $(git -C "$ROOT" rev-parse --short HEAD)"
echo "== the sample re-imported in other forms"
$CLI import beads "$ROOT/sample/beads-issues.jsonl" 2>&1 | grep -E "items:|jobs owed"
$CLI worker --until-idle 2>&1 | grep -E "provider calls|jobs run" | head -2
python3 - "$ROOT/sample/beads-issues.jsonl" <<'PY'
import json, sys, unicodedata
src = [json.loads(l) for l in open(sys.argv[1], encoding='utf-8') if l.strip()]
def walk(v, f):
    if isinstance(v, str): return f(v)
    if isinstance(v, list): return [walk(x, f) for x in v]
    if isinstance(v, dict): return {k: walk(x, f) for k, x in v.items()}
    return v
crlf = [walk(r, lambda s: s.replace('\n', '\r\n')) for r in src]
nfd = [walk(r, lambda s: unicodedata.normalize('NFD', s)) for r in src]
open('crlf.jsonl', 'w', encoding='utf-8').write(''.join(json.dumps(r, ensure_ascii=False) + '\n' for r in crlf))
open('nfd.jsonl', 'w', encoding='utf-8').write(''.join(json.dumps(r, ensure_ascii=False) + '\n' for r in nfd))
n_cr = sum(1 for a, b in zip(src, crlf) if a != b); n_nfd = sum(1 for a, b in zip(src, nfd) if a != b)
print(f"rows whose strings differ: CRLF {n_cr}, NFD {n_nfd}")
PY
echo "-- CRLF inside strings:"; $CLI import beads crlf.jsonl 2>&1 | grep -E "items:|jobs owed|normalised"
echo "-- NFD:"; $CLI import beads nfd.jsonl 2>&1 | grep -E "items:|jobs owed|normalised"
$CLI worker --until-idle 2>&1 | grep -E "provider calls|jobs run" | head -2
echo "== the importer's input rules"
printf '{"id":"bd-x1","title":"bad \xff\xfe bytes","status":"open","issue_type":"task","created_at":"2025-01-01T00:00:00Z","updated_at":"2025-01-01T00:00:00Z"}\n' > utf8.jsonl
echo "-- invalid UTF-8 in a title:"; $CLI import beads utf8.jsonl 2>&1 | grep -E "items:|normalised|rejected"; echo "exit $?"
printf '{"id":"bd-x2","title":"nul\\u0000here","status":"open","issue_type":"task","created_at":"2025-01-01T00:00:00Z","updated_at":"2025-01-01T00:00:00Z"}\n' > nul.jsonl
echo "-- escaped NUL in a title:"; $CLI import beads nul.jsonl 2>&1 | grep -E "items:|normalised|rejected"
python3 -c "
import json; print(json.dumps({'id':'x'*100000,'title':'long id','status':'open','issue_type':'task','created_at':'2025-01-01T00:00:00Z','updated_at':'2025-01-01T00:00:00Z'})); print(json.dumps({'id':'bd-ok1','title':'fine','status':'open','issue_type':'task','created_at':'2025-01-01T00:00:00Z','updated_at':'2025-01-01T00:00:00Z'}))" > longid.jsonl
echo "-- a 100,000-character id beside a valid line:"; $CLI import beads longid.jsonl > longid.out 2>&1; echo "exit $?"; grep -E "items:|rejected|line 1" longid.out | cut -c1-200 | head -4
$CLI import beads longid.jsonl --allow-rejects > /dev/null 2>&1; echo "with --allow-rejects: exit $?"
echo "== POST /v1/items and the dashboard session"
TOKEN=$($CLI tokens create --workspace beads --role admin --name f30 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
$CLI serve --http-port 0 > serve.log 2>&1 &
SP=$!
for i in $(seq 1 100); do grep -q "listening on" serve.log && break; sleep 0.2; done
BASE=$(grep -oE "http://[0-9.]+:[0-9]+" serve.log | head -1)
post() { curl -s -o resp.json -w "%{http_code}" -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' --data-binary @"$1" "$BASE/v1/items"; echo " $(head -c 160 resp.json) … write: $(python3 -c 'import json;print(json.load(open("resp.json")).get("write"))' 2>/dev/null)"; }
printf '{"collection":"task","ref":"N\\u0000UL","title":"t"}' > b1.json; echo -n "-- ref N\\u0000UL: "; post b1.json
printf '{"collection":"task","ref":"S-1","title":"lone \\ud800 surrogate"}' > b2.json; echo -n "-- lone surrogate in title: "; post b2.json
python3 -c "
d='{\"a\":'*5000+'1'+'}'*5000
open('b3.json','w').write('{\"collection\":\"task\",\"ref\":\"DEEP-1\",\"title\":\"t\",\"fields\":'+d+'}')"
echo -n "-- 5,000-deep fields: "; post b3.json
python3 -c "open('b4.json','w').write('{\"collection\":\"task\",\"ref\":\"'+'r'*501+'\",\"title\":\"t\"}')"; echo -n "-- 501-character ref: "; post b4.json
echo "-- dashboard session:"
curl -s -c jar.txt -o login.html "$BASE/ui/login"
CSRF=$(grep -oE 'name="_csrf" value="[^"]+"' login.html | sed -E 's/.*value="([^"]+)"/\1/')
curl -s -b jar.txt -c jar.txt -o /dev/null -w "login: %{http_code}\n" --data-urlencode "_csrf=$CSRF" --data-urlencode "token=$TOKEN" "$BASE/ui/login"
SID=$(awk '$6=="verdict_session"{print $7}' jar.txt)
echo "cookie value: ${SID:0:4}… (${#SID} chars; a token starts vdt_)"
echo "cookie value as a /v1 bearer: $(curl -s -o /dev/null -w '%{http_code}' -H "authorization: Bearer $SID" "$BASE/v1/items")"
echo "/ui/flags with the cookie: $(curl -s -o /dev/null -w '%{http_code}' -H "cookie: verdict_session=$SID" "$BASE/ui/flags")"
curl -s -b jar.txt -o flags.html "$BASE/ui/flags"; CSRF2=$(grep -oE 'name="_csrf" value="[^"]+"' flags.html | head -1 | sed -E 's/.*value="([^"]+)"/\1/')
curl -s -b jar.txt -o /dev/null -w "logout: %{http_code}\n" --data-urlencode "_csrf=$CSRF2" "$BASE/ui/logout"
echo "/ui/flags replaying the old cookie after logout: $(curl -s -o /dev/null -w '%{http_code} -> %{redirect_url}' -H "cookie: verdict_session=$SID" "$BASE/ui/flags")"
kill $SP; wait $SP 2>/dev/null
echo "== a second SIGTERM: a running drain aborts its calls and stops at once (abortedCalls), so the second signal is"
echo "   exercised where a stop can be slow (a database that never answers): test/worker/signals-process.test.ts"
echo "== npx inside a checkout: prepare script in package.json: $(cd "$ROOT" && npm pkg get scripts.prepare)"
rm -rf "$W"
