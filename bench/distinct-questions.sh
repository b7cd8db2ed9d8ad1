#!/usr/bin/env bash
# The local validator with every question distinct, beside the Bedrock path, in one run:
# what the findings cache cannot hide. nginx (the shared harness's config) serves the upstream
# answer and the fake ApplyGuardrail; the translators are `examples/echo_translator.rs`, which
# translates the age in each question, so each request is a new check for Z3.
#   bench/distinct-questions.sh [SECONDS]     (needs nginx, wrk, a release build)
set -u
root=$(cd "$(dirname "$0")/.." && pwd); secs=${1:-5}
shared=${SHARED_BENCH:-$root/../shared/bench}
target=${CARGO_TARGET_DIR:-$root/target}
bin=$target/release/proofgate; echo_bin=$target/release/examples/echo_translator
[ -x "$bin" ] && [ -x "$echo_bin" ] || { echo "build first: cargo build --release -p proofgate-proxy --example echo_translator --bin proofgate"; exit 1; }
for port in 18090 18092 18100 18101; do
  if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then echo "port $port is in use: stop what listens there first"; exit 1; fi
done
# On the way out, a proxy that is no longer running is reported with its log (a crash must
# not pass for a slow cell).
gone() { for c in b l; do [ -f $w/$c.pid ] && ! kill -0 "$(cat $w/$c.pid)" 2>/dev/null && { echo "== proofgate ($c) had stopped:"; tail -20 $w/$c.log; }; done; return 0; }
w=$(mktemp -d); trap 'gone; kill $(cat $w/*.pid 2>/dev/null) 2>/dev/null; sleep 1; kill -9 $(cat $w/*.pid 2>/dev/null) 2>/dev/null; rm -rf $w' EXIT
cp "$shared/nginx-verify.conf" "$w/nginx.conf"
python3 "$root/bench/cite-turn-one.py" "$w/nginx.conf" || exit 1
nginx -p "$w" -c "$w/nginx.conf" || exit 1
"$echo_bin" 127.0.0.1:18092 > $w/echo.log 2>&1 & echo $! > $w/echo.pid
z3dir=$(python3 -c 'import z3,os;print(os.path.dirname(z3.__file__))')
export LD_LIBRARY_PATH="$z3dir/lib:${LD_LIBRARY_PATH:-}" AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=secret AWS_REGION=us-east-1
export PROOFGATE_LIMITS__REQUESTS_PER_MINUTE=100000000 PROOFGATE_LIMITS__MAX_CONCURRENT_REQUESTS=4096
common="[upstream]\nbase_url = \"http://127.0.0.1:18090/up/v1\"\nmodel = \"m\"\napi_key = \"sk-test\"\n[rewriter]\nbase_url = \"http://127.0.0.1:18090/up/v1\"\nmodel = \"m\"\n[auth]\nrequired = false\n"
printf "$common[validator]\nkind = \"bedrock\"\n[validator.bedrock]\nguardrail_id = \"gr1\"\nguardrail_version = \"1\"\nregion = \"us-east-1\"\nendpoint_url = \"http://127.0.0.1:18090\"\n[storage]\nurl = \"sqlite://$w/b.sqlite\"\nconnection_idle_secs = 5\n" > $w/b.toml
trs=""; for i in 1 2 3; do trs="$trs[[validator.translators]]\nbase_url = \"http://127.0.0.1:18092/v1\"\nmodel = \"t$i\"\n"; done
# A worker idle for 5 s gives its Z3 context back (the default is 300 s), and database
# connections unused for 5 s close (the default is 60 s), so the last line can show what the
# proxy keeps once quiet.
printf "$common[validator]\nkind = \"local\"\npolicy = \"$root/examples/policies/park-admission.json\"\nreasoner_idle_secs = 5\n$trs[storage]\nurl = \"sqlite://$w/l.sqlite\"\nconnection_idle_secs = 5\n" > $w/l.toml
(RUST_LOG=error exec "$bin" serve --config $w/b.toml --listen 127.0.0.1:18101 > $w/b.log 2>&1) & echo $! > $w/b.pid
(RUST_LOG=error exec "$bin" serve --config $w/l.toml --listen 127.0.0.1:18100 > $w/l.log 2>&1) & echo $! > $w/l.pid
sleep 2; for c in b l; do grep -q . $w/$c.log && { echo "== $c.log"; tail -5 $w/$c.log; }; done
# VmRSS, and its part that is the process's own memory (RssAnon) rather than mapped files (the
# binary's and libz3's code, counted as they are first touched).
rss() { awk '/VmRSS/{r=$2} /RssAnon/{a=$2} END{printf "%d MB (anon %d MB)", r/1024, a/1024}' /proc/$(cat $w/$1.pid)/status; }
idle_b=$(rss b); idle_l=$(rss l)
# The proxy's CPU time (every thread) and context switches (its live threads) per request: what
# hand-offs between threads cost a request.
hz=$(getconf CLK_TCK)
usage() { local pid; pid=$(cat $w/$1.pid); echo "$(awk '{print $14+$15}' /proc/$pid/stat) $(cat /proc/$pid/task/*/status 2>/dev/null | awk '/^(non)?voluntary_ctxt_switches/{s+=$2} END{print s+0}')"; }
# The resident set once warm (2 s of load on each local path: its Z3 workers and caches made),
# to tell the working set from growth with requests (compare the line after the runs).
wrk -t1 -c16 -d1s -s "$root/bench/distinct.lua" "http://127.0.0.1:18100/v1/chat/completions" -- 5 >/dev/null 2>&1
wrk -t1 -c16 -d1s -s "$shared/post-verify.lua" "http://127.0.0.1:18100/v1/chat/completions" >/dev/null 2>&1
warm_l=$(rss l)
printf "%-28s %4s %10s %10s %10s %9s %9s\n" path c p50 p99 rps "cpu/req" "switch/req"
offset=$((RANDOM * 100000 + 66))
for c in 1 16; do
  for t in "proofgate-bedrock|18101|$shared/post-verify.lua|b" "proofgate-local-repeated|18100|$shared/post-verify.lua|l" "proofgate-local-distinct|18100|$root/bench/distinct.lua|l"; do
    IFS='|' read -r name port script proc <<< "$t"
    offset=$((offset + 10000000))
    read -r cpu0 sw0 <<< "$(usage $proc)"
    out=$(wrk -t1 -c$c -d${secs}s --latency -s "$script" "http://127.0.0.1:$port/v1/chat/completions" -- $offset 2>&1)
    read -r cpu1 sw1 <<< "$(usage $proc)"
    n=$(echo "$out" | awk '/requests in/{print $1}')
    per=$(awk -v c=$((cpu1 - cpu0)) -v s=$((sw1 - sw0)) -v n="${n:-0}" -v hz="$hz" 'BEGIN{if (n > 0) printf "%.0fus %.1f", c * 1e6 / hz / n, s / n; else printf "- -"}')
    p50=$(echo "$out" | awk '/ 50%/{print $2}'); p99=$(echo "$out" | awk '/ 99%/{print $2}'); rps=$(echo "$out" | awk '/Requests\/sec/{print $2}')
    non=$(echo "$out" | awk '/Non-2xx/{print $NF}')
    printf "%-28s %4s %10s %10s %10s %9s %9s %s\n" "$name" "$c" "$p50" "$p99" "$rps" ${per} "${non:+non-2xx=$non}"
  done
done
# Memory: the local validator's Z3 heaps and findings cache grow with distinct questions.
echo "RSS (VmRSS) idle -> after the runs: bedrock $idle_b -> $(rss b), local $idle_l -> $(rss l) (warm, after 2 s of load: $warm_l)"
# Readers close between 5 and 10 s after their last use, and the freed pages go back 10 s
# after the writer's connection closed.
sleep 12
echo "RSS 12 s later (the 5 s idle times passed): bedrock $(rss b), local $(rss l)"
