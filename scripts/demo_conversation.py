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
        rules = f"  rules {f['rules']}" if f["rules"] else ""
        if "premises" not in f:
            # While questions are asked, the findings are those of an answer that is not sent:
            # the proxy gives their kinds and rules only (the thread view has the rest).
            print(f"        {f['kind']}{rules}  (the held-back answer's claims are not sent)")
            continue
        print(f"        {f['kind']}: premises {f['premises']}")
        print(f"        {' ' * len(f['kind'])}  claims {f['claims']}" + rules)


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
            for src in v.get("premiseSources", []):
                where = f"turn {src['turn']} ({src['role']})" if src.get("turn") else "the answer"
                print(f"        premise {src['logic']} comes from {where} of the conversation")
    return t


def turn(messages, label, tools=None):
    last = messages[-1]
    who = "tool result" if last["role"] == "tool" else "user"
    print(f"\n  [{label}] {who}: {last['content']}")
    request = {"model": "demo", "messages": messages}
    if tools:
        request["tools"] = tools
    headers, body = post("/v1/chat/completions", request)
    pg = body["proofgate"]
    thread = headers.get("x-proofgate-thread")
    print(f"  thread {thread}")
    iterations(thread)
    print(f"  => verdict {headers.get('x-proofgate-verdict')} after {pg['iterations']} validation(s); "
          f"proofgate's own overhead {headers.get('x-proofgate-overhead-ms')} ms (debug build; just bench measures release)")
    findings(pg["findings"])
    message = body["choices"][0]["message"]
    if message.get("tool_calls"):
        print("  assistant (what the app receives): tool calls, passed through unchanged")
        for c in message["tool_calls"]:
            print(f"      {c['function']['name']}({c['function']['arguments']})  id {c['id']}")
        return thread, message, pg
    print("  assistant (what the app receives):")
    show(message["content"])
    return thread, message["content"], pg


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

SYSTEM = "You are ParkBot, the park's assistant. Answer in one friendly sentence."
conv = [{"role": "system", "content": SYSTEM},
        {"role": "user", "content": "I am 70 years old."},
        {"role": "assistant", "content": "Thanks, noted."},
        {"role": "user", "content": "Which age class am I in?"}]
t3, _, pg3 = turn(conv, "question 3: a multi-turn conversation; the age was said two turns earlier")
assert pg3["verdict"] == "VALID", pg3

tools = [{"type": "function", "function": {
    "name": "lookup_ticket", "description": "Ticket details: the holder's age",
    "parameters": {"type": "object", "properties": {"ticket": {"type": "string"}}}}}]
conv = [{"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Which age class is the holder of ticket T-1234 in?"}]
t4, call, pg4 = turn(conv, "question 4: the chatbot calls the app's tool", tools)
assert pg4["verdict"] == "TOOL_CALL", pg4
conv += [{"role": "assistant", "content": None, "tool_calls": call["tool_calls"]},
         {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": '{"holderAge": 70}'}]
t5, _, pg5 = turn(conv, "question 4, continued: the app sends the tool's result", tools)
assert pg5["verdict"] == "VALID", pg5

print("\n\033[1m== 4. The audit trails\033[0m")
for t in (t1, t2, t3, t4, t5):
    bundle = get(f"/api/threads/{t}/audit/bundle")
    trail = bundle["trail"]
    kinds = [r["kind"] for r in trail]
    path = f"target/demo/trail-{t}.json"
    with open(path, "w") as f:
        json.dump(bundle, f)
    print(f"  {URL}/api/threads/{t}/audit  ({len(trail)} records: {' > '.join(kinds)})")
    print(f"    saved to {path}")
