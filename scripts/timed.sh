# Sourced by .ci/run, scripts/other-node-check.sh and scripts/pack-check.sh:
#   timed LABEL [--out FILE] COMMAND [ARGS...]
# runs COMMAND (an executable, not a shell function; with --out its stdout and stderr go to FILE)
# and then prints
#   time: LABEL: W s wall, C s CPU
# (CPU: user + system, its waited-for child processes included) so a CI log shows where its minutes
# go. CPU seconds are the figure to compare between runs on a shared machine: other load stretches
# the wall time, not the CPU. The line also goes to the file VERDICT_TIMES names, when set (.ci/run
# prints them all together before the tests' counts line). COMMAND's exit status is returned.
# Without GNU time (/usr/bin/time -f) the command just runs.
timed() {
  local label=$1 out=/dev/stdout tf rc=0 line
  shift
  if [ "$1" = --out ]; then
    out=$2
    shift 2
  fi
  if ! /usr/bin/time -f '' true 2>/dev/null; then
    "$@" >"$out" 2>&1
    return
  fi
  tf=$(mktemp)
  if [ "$out" = /dev/stdout ]; then
    /usr/bin/time -o "$tf" -f '%e %U %S' "$@" || rc=$?
  else
    /usr/bin/time -o "$tf" -f '%e %U %S' "$@" >"$out" 2>&1 || rc=$?
  fi
  # On failure GNU time writes "Command exited with non-zero status N" first: the figures are the last line.
  line=$(tail -n 1 "$tf" | awk -v l="$label" '{ printf "time: %s: %.0f s wall, %.0f s CPU", l, $1, $2 + $3 }')
  rm -f "$tf"
  echo "$line"
  if [ -n "${VERDICT_TIMES:-}" ]; then echo "$line" >>"$VERDICT_TIMES"; fi
  return $rc
}
