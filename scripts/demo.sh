#!/usr/bin/env bash
# The main job until the proxy exists: runs the `proofgate` CLI on the shipped examples and says
# what each step did.
set -euo pipefail
cd "$(dirname "$0")/.."
pg=target/release/proofgate
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. Findings of a recorded Amazon Bedrock ApplyGuardrail response, in rewriting order"
echo "   (examples/guardrail/apply-guardrail-response.json: one finding of each kind)"
"$pg" findings examples/guardrail/apply-guardrail-response.json | python3 -c '
import json, sys
out = json.load(sys.stdin)
for f in out["findings"]:
    (kind, body), = f.items()
    t = body.get("translation") or {}
    claims = "; ".join(c.get("naturalLanguage") or c.get("logic", "") for c in t.get("claims", []))
    print(f"   {kind:22} {claims}")
v = out["verdict"]
warning = " (" + v["warning"] + ")" if v.get("warning") else ""
print("   aggregate verdict: " + v["verdict"] + warning)
print("   -> not VALID: the rewriting loop would handle the TRANSLATION_AMBIGUOUS finding first")
'

step "2. A rewriting LLM's sloppy markdown reply, parsed into a decision"
sed 's/^/   | /' examples/replies/ask-questions.md
"$pg" decision examples/replies/ask-questions.md | sed 's/^/   /'
