#!/usr/bin/env bash
# The README's side-by-side table: runs the shared harness (../shared/bench/side-by-side.sh:
# nginx as the floor, proofgate with both validators, LiteLLM when LITELLM_VENV points at a venv
# with `litellm[proxy]` installed, or `just litellm-venv` made one) on this checkout's release
# build, then the ratios issue 15's targets are stated in.
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
# LiteLLM from `just litellm-venv` when no other venv is named.
if [ -z "${LITELLM_VENV:-}" ] && [ -x "$HOME/.cache/litellm-venv/bin/litellm" ]; then
  export LITELLM_VENV="$HOME/.cache/litellm-venv"
fi
if [ -n "${LITELLM_VENV:-}" ]; then
  version=$("$LITELLM_VENV/bin/python" -m pip show litellm 2>/dev/null | awk '/^Version:/{print $2}')
  if [ -n "$version" ] && [ -x "$LITELLM_VENV/bin/litellm" ]; then
    echo "LiteLLM: $version from $LITELLM_VENV"
  else
    echo "LITELLM_VENV=$LITELLM_VENV has no litellm[proxy]: no LiteLLM row (just litellm-venv installs one)"
  fi
fi
export PROOFGATE_LIMITS__REQUESTS_PER_MINUTE=100000000 PROOFGATE_LIMITS__MAX_CONCURRENT_REQUESTS=4096
# The harness, with its fixed translation citing the question's turn as format 4 asks
# (bench/cite-turn-one.py says why).
harness=$(mktemp -d); cp -r "$shared"/. "$harness"
python3 "$root/bench/cite-turn-one.py" "$harness/nginx-verify.conf" || exit 1
out=$(mktemp); trap 'rm -rf "$view" "$out" "$harness"' EXIT
bash "$harness/side-by-side.sh" "$view" "$secs" | tee "$out"
status=${PIPESTATUS[0]}
# The disk's flush, where the harness kept its databases (mktemp's directory): a durable
# request waits for one, so the c=1 floor of the Bedrock path is the direct call's hop three
# times (the client's, the upstream's, ApplyGuardrail's) and one flush of the commit's pages.
flush=$(python3 "$root/bench/fsync-floor.py" "$(dirname "$(mktemp -u)")" 1000 | awk '$1 == 14 {print $2}')
# Issue 15 reads its targets as ratios of rows of one run: p50 at c=1 against the direct call
# (the floor), requests/s at c=16 against LiteLLM's, and the local validator's against the
# Bedrock validator's. wrk prints times in us, ms or s.
awk -v flush="${flush:-0}" '
  function us(t) { if (t ~ /us$/) return t + 0; if (t ~ /ms$/) return t * 1000; if (t ~ /s$/) return t * 1e6; return -1 }
  $2 == 1 && NF >= 5 { p50[$1] = us($3); p99[$1] = us($4) }
  $2 == 16 && NF >= 5 { rps[$1] = $5 + 0 }
  END {
    split("proofgate-bedrock proofgate-local litellm-bedrock", names, " ")
    print ""
    print "ratios within this run (issue 15: Bedrock path c=1 p50 <= 5x the floor, p99 <= 2 ms;"
    print "c=16 >= 40x LiteLLM; local validator >= 50% of the Bedrock path on a repeated question):"
    for (i = 1; i <= 3; i++) {
      n = names[i]
      if (!(n in p50) || p50["direct"] <= 0) continue
      line = sprintf("  %-18s c=1 p50 %7.1fx the floor, p99 %8.2f ms", n, p50[n] / p50["direct"], p99[n] / 1000)
      if (rps["litellm-bedrock"] > 0 && n != "litellm-bedrock")
        line = line sprintf("; c=16 %6.1fx LiteLLM", rps[n] / rps["litellm-bedrock"])
      if (n == "proofgate-local" && rps["proofgate-bedrock"] > 0)
        line = line sprintf(", %.1f%% of the Bedrock path", 100 * rps[n] / rps["proofgate-bedrock"])
      print line
    }
    if (flush > 0 && p50["direct"] > 0) {
      floor = 3 * p50["direct"] + flush
      printf "  the disk flushes a commit of 14 pages in %.0f us (median, bench/fsync-floor.py): a durable request at c=1 needs at least 3 hops and a flush, %.0f us, %.1fx the direct call\n", flush, floor, floor / p50["direct"]
    }
  }' "$out"
exit "$status"
