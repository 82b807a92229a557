#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests and the benchmarks: a fresh cluster in a temp dir,
# listening on 127.0.0.1 on a free port, stopped and removed by `stop`.
#
#   scripts/pg-test-server.sh install         # Debian's postgresql package, when it is missing
#   eval "$(scripts/pg-test-server.sh start)"  # exports VERDICT_TEST_PG_URL and VERDICT_TEST_PG_DIR
#   scripts/pg-test-server.sh stop "$VERDICT_TEST_PG_DIR"
#
# Postgres refuses to run as root, so as root the cluster belongs to the `postgres` user the
# package creates. Durability is off (fsync, synchronous_commit, full_page_writes): the data is
# thrown away, and the tests are about locking and ordering, not crash safety. pg_stat_statements
# is loaded so the bench (part d) can count the statements a worker sends.
set -euo pipefail

pg_bin() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$d" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return 0; fi
  if command -v pg_ctl >/dev/null 2>&1; then dirname "$(command -v pg_ctl)"; return 0; fi
  return 1
}

as_owner() {
  if [ "$(id -u)" = "0" ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  node -e "const s=require('net').createServer();s.listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"
}

case "${1:-}" in
  install)
    if pg_bin >/dev/null && id postgres >/dev/null 2>&1; then
      echo "postgresql already installed: $("$(pg_bin)/postgres" --version)" >&2
    else
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq >&2
      apt-get install -y -qq postgresql >&2
      echo "installed: $("$(pg_bin)/postgres" --version)" >&2
    fi
    ;;
  start)
    bin=$(pg_bin) || { echo "no PostgreSQL binaries found: run $0 install" >&2; exit 1; }
    dir=$(mktemp -d /tmp/verdict-pg.XXXXXX)
    chmod 755 "$dir"
    [ "$(id -u)" = "0" ] && chown postgres "$dir"
    as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-locale --no-sync >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
    port=$(free_port)
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=300 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c shared_preload_libraries=pg_stat_statements" \
      start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
    as_owner "$bin/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c 'CREATE DATABASE verdict_test' >/dev/null
    echo "export VERDICT_TEST_PG_URL=postgres://postgres@127.0.0.1:$port/verdict_test"
    echo "export VERDICT_TEST_PG_DIR=$dir"
    ;;
  stop)
    dir=${2:?usage: $0 stop DIR}
    bin=$(pg_bin)
    if [ -d "$dir/data" ]; then as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true; fi
    rm -rf "$dir"
    ;;
  *)
    echo "usage: $0 install | start | stop DIR" >&2
    exit 2
    ;;
esac
