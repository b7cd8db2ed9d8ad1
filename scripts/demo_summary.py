#!/usr/bin/env python3
"""Prints one line summarising a `proofgate audit` report (for the demo)."""
import json
import sys

try:
    v = json.load(open(sys.argv[1]))
except ValueError:
    # The audit could not run: say why (its own message), not a JSON parser's traceback.
    why = open(sys.argv[3]).read().strip() if len(sys.argv) > 3 else ""
    print(f"   {sys.argv[2]}: the audit did not run: {why or 'no report'}  <-- NOT VERIFIED")
    sys.exit(1)
r = v["replay"]
good = sum(c["ok"] for c in v["checks"])
state = "ok" if r["ok"] else "FAILED at record %s" % r.get("failure", {}).get("index")
trust = v.get("trust") or {}
signed = "signed head and log inclusion ok" if trust.get("ok") else "signature/log NOT ok"
print(f"   {sys.argv[2]}: replay {state} ({r['verifiedRecords']}/{r['records']} records, "
      f"final status {r.get('status')}); z3 agrees on {good}/{len(v['checks'])} checks; {signed}"
      + ("" if v["ok"] else "  <-- NOT VERIFIED"))
# An audit that passed but could not check everything says what it left out: the demo must
# not pass a partial audit off as a full one.
if v["ok"] and not v.get("complete"):
    for gap in v.get("notChecked", []):
        print(f"      not checked: {gap}")
elif v["ok"]:
    print("      full audit: nothing left unchecked")
sys.exit(0 if v["ok"] else 1)
