#!/usr/bin/env python3
"""Sends the demo conversation through a running proofgate and prints every step."""
import json
import os
import sys
import textwrap
import urllib.request

URL = sys.argv[1]
# The demo's API key (scripts/demo.sh makes one with `proofgate keys create`), sent as
# `Authorization: Bearer`, as OpenAI SDKs send theirs.
AUTH = {"authorization": f"Bearer {os.environ['PROOFGATE_KEY']}"} if os.environ.get("PROOFGATE_KEY") else {}


def post(path, body):
    req = urllib.request.Request(URL + path, data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json", **AUTH})
    with urllib.request.urlopen(req) as r:
        return dict(r.headers), json.load(r)


def get(path):
    with urllib.request.urlopen(urllib.request.Request(URL + path, headers=AUTH)) as r:
        return json.load(r)


def show(text, indent="      "):
    for line in text.splitlines() or [""]:
        print(textwrap.indent(textwrap.fill(line, 96) if line else "", indent))


def findings(fs):
    for f in fs:
        print(f"        {f['kind']}: premises {f['premises']}")
        print(f"        {' ' * len(f['kind'])}  claims {f['claims']}" + (f"  rules {f['rules']}" if f["rules"] else ""))


def iterations(thread_id):
    t = get(f"/api/threads/{thread_id}")
    for step in t["steps"]:
        purpose = step["purpose"]
        if step.get("reply"):
            who = "upstream chatbot" if purpose == "INITIAL_ANSWER" else "rewriting LLM"
            print(f"    - {purpose.lower().replace('_', ' ')}: {who} replied")
            if step.get("decision"):
                d = step["decision"]
                print(f"      decision: {d['decision']}" + (f", questions {d['questions']}" if d["questions"] else ""))
            if step.get("answer"):
                show(step["answer"])
        v = step.get("validation")
        if v:
            print(f"      validation {v['iteration']}: {v['verdict']['verdict']}")
            kinds = [list(f.keys())[0] for f in v["findings"]]
            print(f"        findings: {kinds}")
    return t


def turn(messages, label):
    print(f"\n  [{label}] user: {messages[-1]['content']}")
    headers, body = post("/v1/chat/completions", {"model": "demo", "messages": messages})
    pg = body["proofgate"]
    thread = headers.get("x-proofgate-thread")
    print(f"  thread {thread}")
    iterations(thread)
    print(f"  => verdict {headers.get('x-proofgate-verdict')} after {pg['iterations']} validation(s); "
          f"proofgate's own overhead {headers.get('x-proofgate-overhead-ms')} ms (debug build; just bench measures release)")
    findings(pg["findings"])
    print("  assistant (what the app receives):")
    show(body["choices"][0]["message"]["content"])
    return thread, body["choices"][0]["message"]["content"], pg


q1 = "I am 70 and visit in the low season without credits. What is my admission fee after the senior discount?"
t1, _, pg1 = turn([{"role": "user", "content": q1}], "question 1: a wrong answer is rewritten")
assert pg1["verdict"] == "VALID", pg1

q2 = "I am 70. How much will I pay in total for admission?"
conv = [{"role": "user", "content": q2}]
t2, reply, pg2 = turn(conv, "question 2: the answer depends on facts the user has not given")
assert pg2["verdict"] == "NEEDS_INPUT", pg2
conv += [{"role": "assistant", "content": reply}, {"role": "user", "content": "Low season, and no credits."}]
t2b, _, pg2b = turn(conv, "question 2, continued: the user answers the follow-up questions")
assert t2b == t2 and pg2b["verdict"] == "VALID", pg2b

print("\n\033[1m== 4. The audit trails\033[0m")
for t in (t1, t2):
    bundle = get(f"/api/threads/{t}/audit/bundle")
    trail = bundle["trail"]
    kinds = [r["kind"] for r in trail]
    path = f"target/demo/trail-{t}.json"
    with open(path, "w") as f:
        json.dump(bundle, f)
    print(f"  {URL}/api/threads/{t}/audit  ({len(trail)} records: {' > '.join(kinds)})")
    print(f"    saved to {path}")
