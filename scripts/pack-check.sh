#!/usr/bin/env bash
# The package installs and works as a library (DESIGN §16.1): build (CI reuses its fresh
# build, VERDICT_PACK_CHECK_BUILT=1), `npm pack`, install the tarball into a fresh project in a temp
# directory outside the repo (it sees only the tarball, never src/), then there: examples/embed.ts
# type-checked (`strict`, without `skipLibCheck`: the package's declarations must compile as a
# consumer's own, DESIGN §16.5) and compiled by tsc with moduleResolution nodenext, run as an ESM script end to end
# with the fake provider (it prints the decisions), and `npx verdict --version`. CI runs it before the tests.
#
# Speed: installing the tarball would compile better-sqlite3 from source when no prebuilt binary
# can be fetched (about 2 min). When the repo's own better-sqlite3 is the same version and was
# built for this Node, its compiled addon is copied in instead (`--ignore-scripts` install);
# VERDICT_PACK_CHECK_COMPILE=1 forces the full install with scripts. Times are printed per step.
# VERDICT_PACK_CHECK_TYPES=0 leaves out the type check of embed.ts (below says when that is right).
#
# Under another Node (scripts/other-node-check.sh in CI), VERDICT_PACK_CHECK_FROM=DIR reuses the
# project a pack-check under the machine's Node kept in DIR (VERDICT_PACK_CHECK_KEEP=DIR): the same
# tarball, installed once, with embed.ts compiled once. What an install under this Node would change
# is checked here instead: npm's own engine rule (npm-install-checks' checkEngine, the rule behind
# EBADENGINE) over every installed package against this Node, and the better-sqlite3 addon compiled
# for this Node (by the `npm ci` just run in ROOT) put in place of the kept one. Then the example,
# the imports and the bin run under this Node as below. It saves the install and the compile of
# embed.ts per Node (12 to 15 s and 6 s of CPU each in CI) and proves the same things.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
. scripts/timed.sh
NODE_MAJOR=$(node -p 'process.versions.node.split(".")[0]')
export NO_COLOR=1 npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false

step() { echo "pack-check: $1 ($(( $(date +%s) - T0 )) s)"; }
T0=$(date +%s)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/verdict-pack-check-XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# The example, the two entry points from plain JavaScript and the bin, under this Node, in the
# project in the current folder (out/embed.js compiled, the tarball installed).
run_installed() {
  local out version
  out=$(node out/embed.js "$WORK/embed.db")
  echo "$out"
  # A here-string, not `echo | grep -q` (under pipefail a SIGPIPE to echo fails the check at random).
  grep -q '^decision: triage/blocked ' <<<"$out" || { echo "pack-check: the example printed no decision" >&2; exit 1; }
  step "ran the example as an ESM script"

  # The same entry points by name from plain JavaScript, the testing entry included.
  node --input-type=module -e "
import { createVerdict, VerdictError } from 'verdict';
import { FakeProvider, startFakeAnthropicServer } from 'verdict/testing';
const s = await startFakeAnthropicServer(); await s.close();
const v = await createVerdict({ database: ':memory:', provider: new FakeProvider() }); await v.close();
console.log('pack-check: verdict and verdict/testing import; VerdictError is', typeof VerdictError);
"
  version=$(npx --no-install verdict --version)
  test "$version" = "$(node -p "require('$ROOT/package.json').version")"
  step "npx verdict --version: $version"
}

if [ -n "${VERDICT_PACK_CHECK_FROM:-}" ]; then
  # Hard links (no copying of its node_modules): the one file replaced is unlinked first.
  cp -al "$VERDICT_PACK_CHECK_FROM" "$WORK/project"
  cd "$WORK/project"
  BSQ_REPO=$(node -p "require('$ROOT/node_modules/better-sqlite3/package.json').version")
  BSQ_HERE=$(node -p "require('./node_modules/better-sqlite3/package.json').version")
  test "$BSQ_HERE" = "$BSQ_REPO" || { echo "pack-check: the kept project has better-sqlite3 $BSQ_HERE, $ROOT has $BSQ_REPO" >&2; exit 1; }
  rm node_modules/better-sqlite3/build/Release/better_sqlite3.node
  cp "$ROOT/node_modules/better-sqlite3/build/Release/better_sqlite3.node" node_modules/better-sqlite3/build/Release/
  step "the kept project of $VERDICT_PACK_CHECK_FROM; better-sqlite3 $BSQ_HERE addon copied from $ROOT (built for node $NODE_MAJOR)"
  # npm's own rule, from the npm that runs here: what `npm install` would have warned as EBADENGINE.
  NPM_DIR=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
  NPM_DIR=$NPM_DIR node -e "
const { readdirSync, readFileSync, existsSync } = require('node:fs');
const { join } = require('node:path');
const { checkEngine } = require(join(process.env.NPM_DIR, 'node_modules/npm-install-checks'));
const npmVersion = require(join(process.env.NPM_DIR, 'package.json')).version;
let n = 0, bad = 0;
const walk = (dir) => {
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) {
    if (name.startsWith('.')) continue;
    if (name.startsWith('@')) { walk(join(dir, name)); continue; }
    const pj = join(dir, name, 'package.json');
    if (existsSync(pj)) {
      n++;
      const pkg = JSON.parse(readFileSync(pj, 'utf8'));
      try { checkEngine(pkg, npmVersion, process.version); }
      catch (e) { bad++; console.error('EBADENGINE', pkg.name + '@' + pkg.version, 'requires', JSON.stringify(e.required), 'current node', process.version); }
    }
    walk(join(dir, name, 'node_modules'));
  }
};
walk('node_modules');
if (bad) process.exit(1);
console.log('pack-check: ' + n + ' installed packages, none refuses node ' + process.version + ' (npm ' + npmVersion + ' engine rule)');
" || { echo "pack-check: an installed package refuses this Node (npm's EBADENGINE, above)" >&2; exit 1; }
  step "no EBADENGINE under this Node"
  run_installed
  exit 0
fi

# CI has just built dist/ and says so (VERDICT_PACK_CHECK_BUILT=1): that build
# is packed as it is, unless something it is built from is newer (the rule of test/harness/build-once.ts).
if [ "${VERDICT_PACK_CHECK_BUILT:-0}" = 1 ] && [ -f dist/cli/main.js ] \
  && [ -z "$(find src tsconfig.build.json tsconfig.json package.json -newer dist/cli/main.js -print -quit)" ]; then
  step "dist/ already built from these sources (CI's build)"
else
  npm run build --silent
  step "built dist/"
fi

TARBALL=$(npm pack --silent --ignore-scripts --pack-destination "$WORK" | tail -n 1)
step "packed $TARBALL ($(du -k "$WORK/$TARBALL" | cut -f1) KiB)"

# A fresh ESM project: only the tarball, TypeScript and Node's types (the versions the repo uses).
cd "$WORK"
TS_VERSION=$(node -p "require('$ROOT/node_modules/typescript/package.json').version")
NODE_TYPES_VERSION=$(node -p "require('$ROOT/node_modules/@types/node/package.json').version")
cat > package.json <<'JSON'
{ "name": "verdict-pack-check", "private": true, "type": "module" }
JSON
BSQ_REPO=$(node -p "require('$ROOT/node_modules/better-sqlite3/package.json').version")
if [ "${VERDICT_PACK_CHECK_COMPILE:-0}" = 1 ]; then
  npm install --prefer-offline --no-save "./$TARBALL" "typescript@$TS_VERSION" "@types/node@$NODE_TYPES_VERSION" >install.log 2>&1 || { cat install.log >&2; exit 1; }
  step "installed the tarball (install scripts run: better-sqlite3 built or fetched)"
else
  timed "pack-check (node $NODE_MAJOR): npm install of the tarball" --out install.log npm install --prefer-offline --ignore-scripts --no-save "./$TARBALL" "typescript@$TS_VERSION" "@types/node@$NODE_TYPES_VERSION" || { cat install.log >&2; exit 1; }
  BSQ_HERE=$(node -p "require('./node_modules/better-sqlite3/package.json').version")
  if [ "$BSQ_HERE" = "$BSQ_REPO" ] && [ -f "$ROOT/node_modules/better-sqlite3/build/Release/better_sqlite3.node" ]; then
    mkdir -p node_modules/better-sqlite3/build/Release
    cp "$ROOT/node_modules/better-sqlite3/build/Release/better_sqlite3.node" node_modules/better-sqlite3/build/Release/
    step "installed the tarball; better-sqlite3 $BSQ_HERE addon copied from the repo's build"
  else
    npm rebuild better-sqlite3 >/dev/null
    step "installed the tarball; better-sqlite3 $BSQ_HERE rebuilt (the repo has $BSQ_REPO)"
  fi
fi
test ! -e node_modules/verdict/src || { echo "pack-check: the package ships src/" >&2; exit 1; }
# A consumer's install sees no engine warning (overrides do not reach it: the dependencies are chosen
# so), the manifest runs nothing at install, and `verdict demo` finds its sample in the package.
! grep -n 'EBADENGINE' install.log || { echo "pack-check: the install warned EBADENGINE (above)" >&2; exit 1; }
node -e "const s = require('./node_modules/verdict/package.json').scripts ?? {}; for (const k of ['prepare', 'preinstall', 'install', 'postinstall']) if (s[k]) { console.error('pack-check: the packed manifest has a ' + k + ' script'); process.exit(1); }"
test -f node_modules/verdict/sample/beads-issues.jsonl || { echo "pack-check: the package does not ship sample/ (verdict demo needs it)" >&2; exit 1; }
step "no EBADENGINE, no install-time script, sample/ shipped"

cp "$ROOT/examples/embed.ts" embed.ts
cat > tsconfig.json <<'JSON'
{
  "compilerOptions": {
    "target": "ES2022",
    "module": "NodeNext",
    "moduleResolution": "NodeNext",
    "strict": true,
    "types": ["node"],
    "outDir": "out"
  },
  "files": ["embed.ts"]
}
JSON
# One compile: it type-checks as `--noEmit` would (a type error exits non-zero, so the script stops)
# and writes the ESM script that runs next. VERDICT_PACK_CHECK_TYPES=0 (scripts/other-node-check.sh
# under Node 22 and 24) emits the same JavaScript without the type check (`--noCheck`): the check's
# inputs (this tarball's declarations, TypeScript and @types/node at the repo's versions, the
# example) are the same files under every Node, and TypeScript's answer does not depend on the
# Node that runs it, so the check under the machine's Node (CI's own pack-check) is the one that
# counts; under another Node it cost 25 to 50 s of CPU to give the same answer again.
if [ "${VERDICT_PACK_CHECK_TYPES:-1}" = 0 ]; then
  timed "pack-check (node $NODE_MAJOR): tsc --noCheck on embed.ts" npx tsc -p . --noCheck
  step "tsc emitted embed.ts (moduleResolution nodenext; not type-checked under this Node: VERDICT_PACK_CHECK_TYPES=0)"
else
  timed "pack-check (node $NODE_MAJOR): tsc on embed.ts" npx tsc -p .
  step "tsc (moduleResolution nodenext, strict, no skipLibCheck) passed on embed.ts"
fi
run_installed
# The project as it is now (installed, embed.ts compiled) for the checks under other Nodes.
if [ -n "${VERDICT_PACK_CHECK_KEEP:-}" ]; then
  rm -rf "$VERDICT_PACK_CHECK_KEEP"
  mkdir -p "$VERDICT_PACK_CHECK_KEEP"
  mv node_modules out "$VERDICT_PACK_CHECK_KEEP/"
  cp package.json tsconfig.json embed.ts "$VERDICT_PACK_CHECK_KEEP/"
  step "kept the project in $VERDICT_PACK_CHECK_KEEP"
fi
