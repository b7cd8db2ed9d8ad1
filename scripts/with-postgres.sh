#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL server on loopback and
# PROOFGATE_TEST_POSTGRES_URL pointing at it; the server is removed afterwards.
#   scripts/with-postgres.sh cargo test --workspace
set -euo pipefail
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$bin" ] || { echo "with-postgres: PostgreSQL is not installed (run scripts/bootstrap.sh)" >&2; exit 1; }
dir=$(mktemp -d /tmp/proofgate-pg.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
run() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$dir"
cleanup() { run "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT
run "$bin/initdb" -D "$dir/data" -U proofgate --auth=trust -E UTF8 >/dev/null
run "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off" start >/dev/null
run "$bin/createdb" -h 127.0.0.1 -p "$port" -U proofgate proofgate_test
export PROOFGATE_TEST_POSTGRES_URL="postgres://proofgate@127.0.0.1:$port/proofgate_test"
echo "with-postgres: PostgreSQL on 127.0.0.1:$port" >&2
"$@"
