#!/usr/bin/env bash
# The main job: proofgate in front of a chatbot, end to end, on a fresh machine.
#  1. the local reasoner reproduces the paper's two examples from the shipped policies;
#  2. `proofgate serve` runs with the park-admission policy, Z3, SQLite, and a scripted
#     OpenAI-compatible server that replays RECORDED replies (no LLM is reachable here);
#  3. a demo conversation goes through the proxy and every step is printed.
# To use a real model instead, set PROOFGATE_UPSTREAM__BASE_URL / __MODEL / __API_KEY (and the
# same for REWRITER) and run `proofgate serve --config examples/demo/proofgate.toml`.
set -euo pipefail
cd "$(dirname "$0")/.."
pg=${PROOFGATE_BIN:-${CARGO_TARGET_DIR:-target}/debug/proofgate}
work=target/demo
mkdir -p "$work"
# A new database starts a new log: the size the last run signed goes with it.
rm -f "$work"/proofgate.sqlite* "$work"/trail-*.json "$work"/proofgate-audit.signed-size
bold() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

bold "1. The paper's examples, checked by the local reasoner (Z3 $(python3 -c 'import z3; print(z3.get_version_string())'))"
echo "   park admission: senior, low season, budget \$35.40, 'you cannot visit' ->"
"$pg" check --policy examples/policies/park-admission.json \
  --translations examples/policies/park-senior-low-season.translations.json |
  python3 -c 'import json,sys; f=json.load(sys.stdin)["findings"][0]; (k,b),=f.items(); print("     ", k.upper(), "- claim true when", [s["logic"] for s in b["claimsTrueScenario"]["statements"] if "credit" in s["logic"].lower()][:2], "; false when", [s["logic"] for s in b["claimsFalseScenario"]["statements"] if "credit" in s["logic"].lower()][:2])'
echo "   airline: denied boarding but did not check in ->"
"$pg" check --policy examples/policies/airline-refund.json \
  --translations examples/policies/airline-denied-boarding.translations.json |
  python3 -c 'import json,sys; f=json.load(sys.stdin)["findings"][0]; (k,b),=f.items(); print("     ", k.upper(), "- contradicting rules:", [r["identifier"] for r in b.get("contradictingRules",[])])'

bold "2. Starting the scripted LLM (RECORDED replies) and proofgate serve"
python3 tests/support/scripted_llm.py examples/demo/recorded-llm.json \
  --label "scripted LLM, RECORDED reply" > "$work/llm.port" 2> "$work/llm.log" &
llm_pid=$!
trap 'kill $llm_pid ${pg_pid:-} 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -s "$work/llm.port" ] && break; sleep 0.1; done
llm_port=$(sed -n 's/listening on //p' "$work/llm.port")
export PROOFGATE_UPSTREAM__BASE_URL="http://127.0.0.1:$llm_port/v1"
export PROOFGATE_REWRITER__BASE_URL="http://127.0.0.1:$llm_port/v1"
# API keys are on (the default): the demo client gets a chat+read key, made the way an operator
# makes the first one, straight in the storage (only its SHA-256 is kept there).
PROOFGATE_KEY=$("$pg" keys create --config examples/demo/proofgate.toml --name demo --scopes chat,read 2>/dev/null |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
export PROOFGATE_KEY
"$pg" serve --config examples/demo/proofgate.toml > "$work/proofgate.out" 2> "$work/proofgate.log" &
pg_pid=$!
for _ in $(seq 100); do grep -q listening "$work/proofgate.out" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/proofgate listening on //p' "$work/proofgate.out")
[ -n "$url" ] || { echo "proofgate did not start:"; cat "$work/proofgate.log"; exit 1; }
echo "   scripted LLM on 127.0.0.1:$llm_port (every reply it gives is recorded, labelled in $work/llm.log)"
echo "   proofgate on $url: local reasoner, policy examples/policies/park-admission.json, 3 translators, SQLite $work/proofgate.sqlite"
echo "   API keys required; the demo client uses a chat+read key from \`proofgate keys create\`"

bold "3. A demo conversation through the proxy (POST $url/v1/chat/completions)"
python3 scripts/demo_conversation.py "$url"

bold "5. Verifying the trails without trusting the server (proofgate audit)"
echo "   hash chain + replay of every loop decision (proofgate-core); every finding's solver checks"
echo "   rebuilt from the auditor's own copy of the policy and run by an independent z3 process;"
echo "   the server's Ed25519 signature on each trail's head and its inclusion in the append-only log"
key=$("$pg" audit-key --config examples/demo/proofgate.toml)
echo "   verifier key: $key"
# The auditor saves the log's signed checkpoint (public): this audit holds each trail to it,
# and a later audit with it finds any rewrite of what it counts.
python3 -c 'import sys,urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1] + "/api/log/checkpoint").read().decode())' \
  "$url" > "$work/checkpoint.txt"
echo "   log checkpoint saved to $work/checkpoint.txt; each trail is read as its thread's, and the"
echo "   server's whole log (public leaves) is read to find any other head of the same thread"
for trail in "$work"/trail-*.json; do
  thread=$(basename "$trail" .json); thread=${thread#trail-}
  "$pg" audit "$trail" --policy examples/policies/park-admission.json --public-key "$key" \
    --thread "$thread" --log "$url" --checkpoint "$work/checkpoint.txt" \
    > "$trail.verified" 2> "$trail.audit.log" || true
  python3 scripts/demo_summary.py "$trail.verified" "$(basename "$trail")" "$trail.audit.log"
done
echo
echo "   Trails can also be replayed in Node or a browser with the npm package (just wasm):"
echo "   node -e \"const p=require('./crates/wasm/pkg'); console.log(p.replayAudit(require('fs').readFileSync('FILE','utf8')))\""
echo "   The demo server stopped; the SQLite file $work/proofgate.sqlite keeps its threads and trails."
