#!/usr/bin/env bash
# The README's side-by-side table: runs the shared harness (../shared/bench/side-by-side.sh:
# nginx as the floor, proofgate with both validators, LiteLLM when LITELLM_VENV points at a venv
# with `litellm[proxy]` installed) on this checkout's release build.
#   bench/side-by-side.sh [SECONDS]     (needs nginx, wrk, a release build)
# The proxy's request limits are on by default (secure by default) and wrk sends thousands of
# requests a second from one client: without raising them for the run, most answers are 429s
# and the table measures the rate limiter. They are raised here, through the environment, for
# the processes this run starts only.
set -u
root=$(cd "$(dirname "$0")/.." && pwd); secs=${1:-5}
shared=${SHARED_BENCH:-$root/../shared/bench}
target=${CARGO_TARGET_DIR:-$root/target}
[ -x "$shared/side-by-side.sh" ] || { echo "no harness at $shared/side-by-side.sh (set SHARED_BENCH)"; exit 1; }
[ -x "$target/release/proofgate" ] || { echo "build first: cargo build --release -p proofgate-proxy --bin proofgate"; exit 1; }
# Absolute: the harness runs the build through a symlink in another directory, and cargo takes
# a relative CARGO_TARGET_DIR from the directory it runs in.
target=$(cd "$target" && pwd)
for tool in nginx wrk; do
  command -v $tool > /dev/null || { echo "$tool is missing: apt-get install -y nginx wrk"; exit 1; }
done
# The harness runs PROJECT/target/release/proofgate and PROJECT/examples: a view of this
# checkout with the build wherever CARGO_TARGET_DIR put it.
view=$(mktemp -d); trap 'rm -rf "$view"' EXIT
mkdir -p "$view/target/release"
ln -s "$target/release/proofgate" "$view/target/release/proofgate"
ln -s "$root/examples" "$view/examples"
export PROOFGATE_LIMITS__REQUESTS_PER_MINUTE=100000000 PROOFGATE_LIMITS__MAX_CONCURRENT_REQUESTS=4096
bash "$shared/side-by-side.sh" "$view" "$secs"
