#!/usr/bin/env python3
"""A scripted OpenAI-compatible chat-completions server that replays RECORDED replies.

No LLM is reachable from the machines this project is tested on, so tests and the demo put this
server where the LLM would be. It never generates anything: every reply comes from the script.

    scripted_llm.py SCRIPT.json [--port N] [--label TEXT]

SCRIPT.json: {"rules": [{"match": "substring", "reply": "text", "times": 1, "status": 200}, ...],
              "default": "text"}
A request's messages are joined into one text; the first rule whose `match` (all substrings if
a list, case-insensitive) occurs there and that has uses left (`times`, unlimited when absent)
answers. `status` other than 200 answers with that HTTP error instead (to test failures).
`reply` may be a list: successive matches take successive entries. `delay_ms` holds the reply
back that long (to test timeouts and restarts mid-call). `requires_field` / `without_field`: the
rule applies only when the request body has (or lacks) that top-level member (e.g.
`response_format`). `choice_extra` / `message_extra`: members merged into the reply's
choices[0] / its message (e.g. `logprobs`, `refusal`), to test what the proxy lets through.
`tool_calls`: [{"name", "arguments", "id"?}] answers with those tool calls (content null,
finish_reason "tool_calls") instead of text. `retry_after`: the Retry-After header of an
error reply. `raw`: {"prefix", "unit", "count", "suffix"} answers with that body verbatim
(the unit repeated count times: hostile answers) and `headers` (e.g. a redirect's `location`),
at `status`. `unless`: substrings that must NOT occur (e.g. a tool result not sent yet).
A reply may hold `{turn:TEXT}`: it becomes the number of the last turn of the translator
prompt's conversation that the user, the system or a tool said and whose text holds TEXT
(case-insensitive), or 0 when none does; what a translator writes when it cites the turn a
premise came from, as in "The visitor is 70 (turn {turn:70})". `{turn:}` is the last such turn.

POST .../messages answers in the Anthropic Messages API's shape (the same rules; text from the
system prompt, text blocks and tool results; `tool_calls` become `tool_use` blocks), so the
same script can stand in for an Anthropic upstream.
`model_list`: [{"status", "body"?, "retry_after"?, "times"?}] answers GET .../models with
those replies first, in order (each `times` times, once when absent), then with the usual list
(to test an upstream whose model list fails).
Prints "listening on PORT" on stdout once ready. GET /_requests returns what it received.
"""
import argparse
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
RECEIVED = []


def load(path):
    with open(path, encoding="utf-8") as f:
        script = json.load(f)
    for rule in script.get("rules", []):
        rule.setdefault("used", 0)
    return script


DATA_BLOCK = re.compile(r"<(data-[0-9a-f]{16})>\n(.*?)\n</\1>", re.S)
TURN_CITE = re.compile(r"\{turn:([^}]*)\}")


def cite_turns(reply, text):
    """Replaces each {turn:TEXT} of a reply with the turn that states TEXT (see above)."""
    if "{turn:" not in reply:
        return reply
    block = DATA_BLOCK.search(text)
    turns = json.loads(block.group(2)).get("conversation", []) if block else []

    def turn_of(match):
        needle = match.group(1).lower()
        said = [t["turn"] for t in turns
                if t.get("role") != "assistant" and needle in t.get("text", "").lower()]
        return str(said[-1] if said else 0)
    return TURN_CITE.sub(turn_of, reply)


def pick(script, text, req=None):
    low = text.lower()
    req = req or {}
    for rule in script.get("rules", []):
        if "requires_field" in rule and rule["requires_field"] not in req:
            continue
        if "without_field" in rule and rule["without_field"] in req:
            continue
        needles = rule["match"] if isinstance(rule["match"], list) else [rule["match"]]
        if not all(n.lower() in low for n in needles):
            continue
        unless = rule.get("unless", [])
        unless = unless if isinstance(unless, list) else [unless]
        if any(n.lower() in low for n in unless):
            continue
        if "times" in rule and rule["used"] >= rule["times"]:
            continue
        reply = rule.get("reply", "")
        if isinstance(reply, list):
            reply = reply[min(rule["used"], len(reply) - 1)]
        reply = cite_turns(reply, text)
        rule["used"] += 1
        return rule.get("status", 200), reply, rule, rule.get("delay_ms", 0) / 1000
    if "default" in script:
        return 200, script["default"], {"match": "(default)"}, 0
    return 500, "scripted_llm: no recorded reply matches this request", {"match": None}, 0


def anthropic_text(content):
    """The text of an Anthropic `system` or message `content`: text blocks and tool results."""
    if isinstance(content, str):
        return content
    out = []
    for block in content or []:
        if block.get("type") == "text":
            out.append(block.get("text", ""))
        elif block.get("type") == "tool_result":
            out.append(anthropic_text(block.get("content", "")))
        elif block.get("type") == "tool_use":
            out.append(json.dumps(block.get("input", {})))
    return "\n".join(out)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet; we print our own lines
        pass

    def send(self, status, body, content_type="application/json", headers=None):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.rstrip("/").endswith("/_requests"):
            with LOCK:
                self.send(200, json.dumps(RECEIVED))
        elif self.path.split("?")[0].rstrip("/").endswith("/models"):
            # Each API's own list: Anthropic's (asked with `anthropic-version`) pages.
            with LOCK:
                RECEIVED.append({"path": self.path, "method": "GET",
                                 "authorization": self.headers.get("authorization"),
                                 "x-api-key": self.headers.get("x-api-key"),
                                 "anthropic-version": self.headers.get("anthropic-version")})
                failure = next((f for f in self.server.script.get("model_list", [])
                                if f.setdefault("used", 0) < f.get("times", 1)), None)
                if failure is not None:
                    failure["used"] += 1
            if failure is not None:
                headers = {"retry-after": failure["retry_after"]} if "retry_after" in failure else None
                self.send(failure["status"], failure.get("body", json.dumps(
                    {"error": {"message": f"scripted model list failure {failure['status']}"}})),
                    headers=headers)
                return
            if self.headers.get("anthropic-version"):
                models = [{"type": "model", "id": "claude-recorded-1", "display_name": "Claude Recorded",
                           "created_at": "2025-02-19T00:00:00Z"}]
                self.send(200, json.dumps({"data": models, "has_more": False,
                                           "first_id": models[0]["id"], "last_id": models[-1]["id"]}))
            else:
                self.send(200, json.dumps({"object": "list", "data": [
                    {"id": "recorded", "object": "model", "created": 1739923200, "owned_by": "scripted"},
                    {"id": "org/recorded-2", "object": "model", "created": 1739923200,
                     "owned_by": "scripted", "max_model_len": 8192}]}))
        else:
            self.send(404, json.dumps({"error": {"message": "not found"}}))

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        raw = self.rfile.read(length)
        try:
            req = json.loads(raw or b"{}")
        except ValueError:
            self.send(400, json.dumps({"error": {"message": "body is not JSON"}}))
            return
        anthropic = self.path.rstrip("/").endswith("/messages")
        if not (anthropic or self.path.rstrip("/").endswith("/chat/completions")):
            self.send(404, json.dumps({"error": {"message": f"no route {self.path}"}}))
            return
        messages = req.get("messages", [])
        # As Anthropic's API does: tool blocks in the conversation need the tools defined.
        if anthropic and not req.get("tools") and any(
                isinstance(m.get("content"), list) and any(
                    isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result")
                    for b in m["content"])
                for m in messages):
            self.send(400, json.dumps({"type": "error", "error": {
                "type": "invalid_request_error",
                "message": "Requests which include `tool_use` or `tool_result` blocks must define tools."}}))
            return
        parts = [anthropic_text(req.get("system", ""))] if anthropic else []
        parts += [anthropic_text(m.get("content", "")) if anthropic else str(m.get("content", ""))
                  for m in messages]
        text = "\n".join(parts)
        with LOCK:
            RECEIVED.append({"path": self.path, "body": req,
                             "authorization": self.headers.get("authorization"),
                             "x-api-key": self.headers.get("x-api-key"),
                             "anthropic-version": self.headers.get("anthropic-version")})
            status, reply, rule, delay = pick(self.server.script, text, req)
        time.sleep(delay)
        if "raw" in rule:
            raw = rule["raw"]
            body = raw.get("prefix", "") + raw.get("unit", "") * raw.get("count", 0) + raw.get("suffix", "")
            self.send(status, body, headers=rule.get("headers"))
            return
        model = req.get("model") or "recorded"
        print(f"[{self.server.label}] recorded reply for rule {json.dumps(rule['match'])} (HTTP {status})",
              file=sys.stderr, flush=True)
        if status != 200:
            headers = {"retry-after": str(rule["retry_after"])} if "retry_after" in rule else None
            self.send(status, json.dumps({"error": {"message": reply, "type": "scripted_error"}}),
                      headers=headers)
            return
        calls = [{"id": c.get("id", f"call_{i}"), "type": "function",
                  "function": {"name": c["name"],
                               "arguments": c["arguments"] if isinstance(c.get("arguments"), str)
                               else json.dumps(c.get("arguments", {}))}}
                 for i, c in enumerate(rule.get("tool_calls", []))]
        if anthropic:
            blocks = ([{"type": "text", "text": reply}] if reply and not calls else []) + [
                {"type": "tool_use", "id": c["id"].replace("call_", "toolu_"),
                 "name": c["function"]["name"], "input": json.loads(c["function"]["arguments"])}
                for c in calls]
            self.send(200, json.dumps({
                "id": "msg_recorded", "type": "message", "role": "assistant", "model": model,
                "content": blocks, "stop_reason": "tool_use" if calls else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": len(text.split()), "output_tokens": len(reply.split())}}))
            return
        if calls:
            self.send(200, json.dumps({
                "id": "chatcmpl-recorded", "object": "chat.completion", "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "finish_reason": "tool_calls",
                             "message": {"role": "assistant", "content": None, "tool_calls": calls}}],
                "usage": {"prompt_tokens": len(text.split()), "completion_tokens": 1, "total_tokens": len(text.split()) + 1}}))
            return
        if req.get("stream"):
            chunks = [reply[i:i + 16] for i in range(0, len(reply), 16)] or [""]
            out = []
            for i, c in enumerate(chunks):
                delta = {"content": c}
                if i == 0:
                    delta["role"] = "assistant"
                out.append("data: " + json.dumps({
                    "id": "chatcmpl-recorded", "object": "chat.completion.chunk",
                    "created": int(time.time()), "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}) + "\n\n")
            out.append("data: " + json.dumps({
                "id": "chatcmpl-recorded", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}) + "\n\n")
            out.append("data: [DONE]\n\n")
            self.send(200, "".join(out), "text/event-stream")
            return
        message = {"role": "assistant", "content": reply, **rule.get("message_extra", {})}
        choice = {"index": 0, "message": message, "finish_reason": "stop",
                  **rule.get("choice_extra", {})}
        self.send(200, json.dumps({
            "id": "chatcmpl-recorded", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [choice],
            "usage": {"prompt_tokens": len(text.split()), "completion_tokens": len(reply.split()),
                      "total_tokens": len(text.split()) + len(reply.split())}}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("script")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--label", default="scripted LLM")
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.script = load(args.script)
    server.label = args.label
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
